//! Precomputation for CKKS at one parameter set: the canonical scale Delta_l of every level
//! (Delta_{l-1} = Delta_l^2 / q_l), rescaling constants q_l^{-1} mod q_i, Garner constants for
//! exact decoding, the special FFT of the canonical embedding, NTT(X^{n/2}) (the imaginary unit
//! in every slot) and a cache of automorphism index maps.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use lycaon_math::{is_prime, Automorphism, Modulus, ShoupConstant, SpecialFft};
use lycaon_rlwe::{Parameters, ParametersLiteral, Security};


use crate::CkksError;

/// Everything CKKS precomputes for one parameter set; shared behind an `Arc`.
#[derive(Debug)]
pub struct CkksContext {
    pub(crate) params: Arc<Parameters>,
    scales: Vec<f64>,
    pub(crate) fft: SpecialFft,
    /// rescale_inv[l][i] = q_l^{-1} mod q_i for i < l.
    pub(crate) rescale_inv: Vec<Vec<ShoupConstant>>,
    /// q_l mod q_i for i < l (centring the dropped limb).
    pub(crate) last_mod: Vec<Vec<u64>>,
    /// Garner: garner_prefix[i][j] = (q_0 ... q_{j-1}) mod q_i for j < i; garner_inv[i] its inverse at j = i.
    garner_prefix: Vec<Vec<u64>>,
    garner_inv: Vec<ShoupConstant>,
    /// NTT(X^{n/2}) over the top Q, limb-major: multiplying by it multiplies every slot by i.
    pub(crate) imag_unit_ntt: Vec<u64>,
    automorphisms: RwLock<HashMap<u64, Arc<Automorphism>>>,
}

impl CkksContext {
    /// Precomputes CKKS constants; `scale` is the canonical scale of the top level (2^40 for
    /// 40-bit primes, say). Errors if the parameters carry a plaintext modulus or the scale is
    /// not a finite number >= 1.
    pub fn new(params: &Arc<Parameters>, scale: f64) -> Result<Arc<Self>, CkksError> {
        if params.plaintext_modulus().is_some() {
            return Err(CkksError::NotCkks);
        }
        if !scale.is_finite() || scale < 1.0 {
            return Err(CkksError::InvalidScale { scale });
        }
        let q = params.q();
        let moduli: Vec<Modulus> = q.moduli().to_vec();
        let top = moduli.len() - 1;
        let mut scales = vec![0.0; moduli.len()];
        scales[top] = scale;
        for l in (1..=top).rev() {
            scales[l - 1] = scales[l] * scales[l] / moduli[l].value() as f64;
        }
        let mut rescale_inv = Vec::with_capacity(moduli.len());
        let mut last_mod = Vec::with_capacity(moduli.len());
        for (l, ql) in moduli.iter().enumerate() {
            let inv = moduli[..l].iter().map(|qi| qi.inv(qi.reduce(ql.value())).map(|v| ShoupConstant::new(v, qi))).collect::<Result<Vec<_>, _>>()?;
            rescale_inv.push(inv);
            last_mod.push(moduli[..l].iter().map(|qi| qi.reduce(ql.value())).collect());
        }
        let mut garner_prefix = Vec::with_capacity(moduli.len());
        let mut garner_inv = Vec::with_capacity(moduli.len());
        for (i, qi) in moduli.iter().enumerate() {
            let mut prefix = Vec::with_capacity(i + 1);
            let mut acc = 1u64 % qi.value();
            for qj in &moduli[..i] {
                prefix.push(acc);
                acc = qi.mul(acc, qi.reduce(qj.value()));
            }
            garner_inv.push(ShoupConstant::new(qi.inv(acc)?, qi));
            garner_prefix.push(prefix);
        }
        let n = params.n();
        let mut half = vec![0i64; n];
        half[n / 2] = 1;
        let imag_unit_ntt = params.backend().ntt(lycaon_math::Poly::from_signed(q, &half)?)?.into_data();
        Ok(Arc::new(Self {
            params: params.clone(),
            scales,
            fft: SpecialFft::new(n),
            rescale_inv,
            last_mod,
            garner_prefix,
            garner_inv,
            imag_unit_ntt,
            automorphisms: RwLock::new(HashMap::new()),
        }))
    }

    pub fn params(&self) -> &Arc<Parameters> {
        &self.params
    }

    pub fn n(&self) -> usize {
        self.params.n()
    }

    /// Largest number of slots (n/2).
    pub fn max_slots(&self) -> usize {
        self.params.n() / 2
    }

    pub fn max_level(&self) -> usize {
        self.params.max_level()
    }

    /// The canonical scale Delta_l of a level.
    pub fn scale_at(&self, level: usize) -> Result<f64, CkksError> {
        self.scales.get(level).copied().ok_or(CkksError::Rlwe(lycaon_rlwe::RlweError::LevelOutOfRange { level, max: self.scales.len() - 1 }))
    }

    /// The scale of the top level (the one the context was made with).
    pub fn default_scale(&self) -> f64 {
        self.scales[self.scales.len() - 1]
    }

    /// The ciphertext prime q_l dropped by a rescale at level l.
    pub fn prime_at(&self, level: usize) -> Result<u64, CkksError> {
        Ok(self.params.q_at(level)?.moduli()[level].value())
    }

    pub(crate) fn automorphism(&self, galois_element: u64) -> Result<Arc<Automorphism>, CkksError> {
        if let Some(a) = self.automorphisms.read().ok().and_then(|m| m.get(&galois_element).cloned()) {
            return Ok(a);
        }
        let a = Arc::new(Automorphism::new(galois_element, self.n())?);
        if let Ok(mut m) = self.automorphisms.write() {
            m.insert(galois_element, a.clone());
        }
        Ok(a)
    }

    /// Exact centred value of coefficient `k` of a coefficient-form polynomial at `level`, divided
    /// by `scale`: balanced mixed-radix (Garner) digits a_i in (-q_i/2, q_i/2], so the sum
    /// sum_i a_i q_0...q_{i-1} has no cancellation and f64 keeps full relative precision.
    pub(crate) fn garner_weights(&self, level: usize, scale: f64) -> Vec<f64> {
        let moduli = self.params.q().moduli();
        let mut w = Vec::with_capacity(level + 1);
        let mut acc = 1.0 / scale;
        for q in &moduli[..=level] {
            w.push(acc);
            acc *= q.value() as f64;
        }
        w
    }

    /// Reconstructs one coefficient from its residues (one per limb of Q_level) with weights
    /// from [`Self::garner_weights`].
    #[inline]
    pub(crate) fn garner_value(&self, residues: &[u64], weights: &[f64], digits: &mut Vec<i64>) -> f64 {
        let moduli = self.params.q().moduli();
        digits.clear();
        let mut value = 0.0;
        for (i, (&x, q)) in residues.iter().zip(moduli).enumerate() {
            let mut t = 0u64;
            for (&a, &pj) in digits.iter().zip(&self.garner_prefix[i]) {
                t = q.add(t, q.mul(q.reduce_i64(a), pj));
            }
            let c = self.garner_inv[i];
            let a = q.center(q.mul_shoup(q.sub(x, t), c.value, c.shoup));
            digits.push(a);
            if a != 0 {
                value += a as f64 * weights[i];
            }
        }
        value
    }
}

/// The NTT-friendly prime (= 1 mod 2n, below 2^61) closest to `target`, not in `taken`.
fn prime_near(target: f64, n: usize, taken: &[u64]) -> Result<u64, CkksError> {
    let two_n = 2 * n as u64;
    let k0 = ((target - 1.0) / two_n as f64).round().max(1.0) as u64;
    let ok = |c: u64| c < (1 << 61) && c > two_n && is_prime(c) && !taken.contains(&c);
    for d in 0..(1u64 << 24) {
        let up = (k0 + d) * two_n + 1;
        let down = k0.checked_sub(d).filter(|&k| k > 0).map(|k| k * two_n + 1);
        // Of the two candidates at this distance, the closer one first.
        let mut cands = [Some(up), down];
        if let Some(dn) = down {
            if (target - dn as f64).abs() < (up as f64 - target).abs() {
                cands = [Some(dn), Some(up)];
            }
        }
        for c in cands.into_iter().flatten() {
            if ok(c) {
                return Ok(c);
            }
        }
    }
    Err(CkksError::InvalidArgument { what: format!("no NTT-friendly prime near 2^{:.1} for n = {n}", target.log2()) })
}

/// A CKKS parameter literal whose primes keep the canonical scales stable: q_0 is the largest
/// prime below 2^log_q0; then, from the top level down, each q_l is the prime closest to
/// Delta_l^2 / 2^log_scale, so that Delta_{l-1} = Delta_l^2 / q_l stays within about
/// 2n / 2^log_scale of 2^log_scale at every level (no drift however deep the circuit).
/// `levels` primes follow q_0 (the multiplicative depth); `p_bits` gives the special primes.
/// The set is checked for 128-bit security when it is turned into `Parameters`.
///
/// Errors: `InvalidParameters` (through [`CkksError::Rlwe`]) for an n that is not a power of two
/// in 16..=65536, checked before any prime is searched; [`CkksError::InvalidArgument`] for bit
/// sizes outside 2..=61 or when no prime is close enough.
pub fn scale_stable_literal(n: usize, log_q0: u32, log_scale: u32, levels: usize, p_bits: &[u32]) -> Result<ParametersLiteral, CkksError> {
    lycaon_rlwe::check_ring_degree(n)?;
    if !(2..=61).contains(&log_scale) || !(2..=61).contains(&log_q0) {
        return Err(CkksError::InvalidArgument { what: format!("log_q0 = {log_q0} and log_scale = {log_scale} must be between 2 and 61") });
    }
    let q0 = lycaon_math::ntt_primes(log_q0, n, 1, &[])?[0];
    let mut taken = vec![q0];
    let target = 2f64.powi(log_scale as i32);
    let mut delta = target;
    let mut chain = Vec::with_capacity(levels);
    for _ in 0..levels {
        let q = prime_near(delta * delta / target, n, &taken)?;
        taken.push(q);
        chain.push(q);
        delta = delta * delta / q as f64;
    }
    chain.reverse();
    let mut q = vec![q0];
    q.extend(chain);
    let mut special = Vec::with_capacity(p_bits.len());
    for &b in p_bits {
        let p = lycaon_math::ntt_primes(b, n, 1, &taken)?[0];
        taken.push(p);
        special.push(p);
    }
    let mut lit = ParametersLiteral::ckks_from_moduli(n, q, special);
    lit.security = Security::Bits128;
    Ok(lit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_primes_keep_scales_near_the_target() {
        let mut lit = scale_stable_literal(1 << 14, 60, 40, 20, &[60]).unwrap();
        lit.security = Security::InsecureTestOnly; // only the scales matter here
        let params = Parameters::new(lit).unwrap();
        let ctx = CkksContext::new(&params, 2f64.powi(40)).unwrap();
        for l in 0..=ctx.max_level() {
            let s = ctx.scale_at(l).unwrap();
            assert!((s.log2() - 40.0).abs() < 1e-4, "level {l}: scale 2^{}", s.log2());
        }
    }

    #[test]
    fn a_ring_degree_that_is_not_a_power_of_two_is_refused_before_any_prime_search() {
        let err = scale_stable_literal(3000, 50, 40, 2, &[50]).unwrap_err();
        assert!(matches!(err, CkksError::Rlwe(lycaon_rlwe::RlweError::InvalidParameters { .. })), "{err}");
        assert!(err.to_string().contains("n = 3000 is not a power of two"), "{err}");
    }
}
