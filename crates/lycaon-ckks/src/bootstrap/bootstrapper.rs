//! The bootstrapping circuit on the crate's [`Evaluator`]: ModRaise, (for sparse slots) the
//! trace that projects the raised phase onto the slot subring, CoeffsToSlots as grouped
//! diagonal factors, the split into real and imaginary parts by conjugation, EvalMod on each
//! (Chebyshev cosine and double angles), recombination, and SlotsToCoeffs landing on the
//! canonical scale of the top residual level.
//!
//! Levels, top down (L the top level, R the top residual level): CoeffsToSlots L .. L - c + 1,
//! EvalMod the next `evalmod.depth()` levels, SlotsToCoeffs the next s levels, output at R.
//! Every rotation key is generated only up to the level where it is used ([`BootstrapKeys`]).

use std::sync::Arc;

use lycaon_math::{Coeff, Poly, Sampler};
use lycaon_rlwe::{GaloisKeys, ParametersLiteral, RelinKey, SecretKey};
use num_complex::Complex64;

use super::dft::{coeffs_to_slots_factors, slots_to_coeffs_factors, DiagonalMatrix};
use super::evalmod::{EvalMod, EvalModParams};
use crate::{conjugation_galois_element, rotation_galois_element, ChebyshevPoly, Ciphertext, CkksContext, CkksError, EvaluationKeys, Evaluator, LinearTransform};

/// The shape of a bootstrappable parameter set and of its circuit.
#[derive(Clone, Debug, PartialEq)]
pub struct BootstrapParams {
    pub log_n: u32,
    pub log_slots: u32,
    /// Bits of q_0 (the modulus EvalMod reduces by).
    pub log_q0: u32,
    /// Levels left for computation after bootstrapping, and their scale.
    pub residual_levels: usize,
    pub log_scale: u32,
    pub stc_levels: usize,
    pub stc_bits: u32,
    pub evalmod: EvalModParams,
    pub evalmod_bits: u32,
    pub cts_levels: usize,
    pub cts_bits: u32,
    pub p_bits: Vec<u32>,
}

impl BootstrapParams {
    /// logN = 16, full slots (2^15), 10 residual levels at scale 2^40 over a 60-bit q_0 (Orion's
    /// residual shape), SlotsToCoeffs in 3 levels of 45 bits, EvalMod in 9 levels of 60 bits,
    /// CoeffsToSlots in 4 levels of 56 bits, P = 5 primes of 61 bits: log QP = 1664 <= 1772,
    /// 128-bit secure for a uniform ternary secret by the HE standard. EvalMod's K = 16 assumes
    /// the phase is under a secret of Hamming weight <= 32 (sparse-secret encapsulation, see the
    /// module documentation of [`super`]).
    pub fn logn16_full_slots() -> Self {
        Self {
            log_n: 16,
            log_slots: 15,
            log_q0: 60,
            residual_levels: 10,
            log_scale: 40,
            stc_levels: 3,
            stc_bits: 45,
            evalmod: EvalModParams::sparse_default(),
            evalmod_bits: 60,
            cts_levels: 4,
            cts_bits: 56,
            p_bits: vec![61; 5],
        }
    }

    /// A small shape for tests (not secure): the logN = 16 circuit at another ring degree and
    /// slot count, with `residual_levels` levels left. Few slots mean large coefficients
    /// (about 1/sqrt(slots) of the values), where the sine's cubic error (2 pi y)^2 / 6 matters:
    /// the message ratio is 2^10 instead of 2^8 (16 times smaller error, same depth).
    pub fn toy(log_n: u32, log_slots: u32, residual_levels: usize) -> Self {
        let evalmod = EvalModParams { log_message_ratio: 10, ..EvalModParams::sparse_default() };
        Self { log_n, log_slots, residual_levels, cts_levels: 2, stc_levels: 2, p_bits: vec![61; 2], evalmod, ..Self::logn16_full_slots() }
    }

    pub fn n(&self) -> usize {
        1 << self.log_n
    }

    pub fn slots(&self) -> usize {
        1 << self.log_slots
    }

    /// The top residual level R (where bootstrapping outputs).
    pub fn residual_top(&self) -> usize {
        self.residual_levels
    }

    /// The top level L.
    pub fn top_level(&self) -> usize {
        self.residual_levels + self.stc_levels + self.evalmod.depth() + self.cts_levels
    }

    /// The modulus chain: q_0 and the residual primes keep the scale 2^log_scale stable (the
    /// crate's [`crate::scale_stable_literal`]); SlotsToCoeffs, EvalMod and CoeffsToSlots primes
    /// follow, then P. The literal asks for 128-bit security (checked by `Parameters::new`).
    pub fn literal(&self) -> Result<ParametersLiteral, CkksError> {
        let n = self.n();
        let base = crate::scale_stable_literal(n, self.log_q0, self.log_scale, self.residual_levels, &[])?;
        let mut q = base.ciphertext_moduli;
        let mut taken = q.clone();
        let mut pick = |bits: u32, count: usize, out: &mut Vec<u64>| -> Result<(), CkksError> {
            let primes = lycaon_math::ntt_primes(bits, n, count, &taken)?;
            taken.extend(&primes);
            out.extend(primes);
            Ok(())
        };
        pick(self.stc_bits, self.stc_levels, &mut q)?;
        pick(self.evalmod_bits, self.evalmod.depth(), &mut q)?;
        pick(self.cts_bits, self.cts_levels, &mut q)?;
        let mut p = Vec::new();
        for &b in &self.p_bits {
            pick(b, 1, &mut p)?;
        }
        Ok(ParametersLiteral::ckks_from_moduli(n, q, p))
    }

    /// The top-level scale that makes the canonical scale of the residual levels 2^log_scale:
    /// Delta_l = sqrt(Delta_{l-1} q_l) upwards from the residual top.
    pub fn top_scale(&self, literal: &ParametersLiteral) -> f64 {
        let mut delta = 2f64.powi(self.log_scale as i32);
        for &q in &literal.ciphertext_moduli[self.residual_levels + 1..] {
            delta = (delta * q as f64).sqrt();
        }
        delta
    }
}

/// (rotation step, level) pairs and the conjugation level that one bootstrapping circuit uses.
#[derive(Clone, Debug, PartialEq)]
pub struct BootstrapRotations {
    pub rotations: Vec<(i64, usize)>,
    pub conjugation_level: usize,
    /// Relinearisation is needed up to this level (the top of EvalMod).
    pub relin_level: usize,
}

/// The bootstrapping circuit for one context and shape.
#[derive(Debug)]
pub struct Bootstrapper {
    ctx: Arc<CkksContext>,
    params: BootstrapParams,
    cts: Vec<LinearTransform>,
    stc: Vec<LinearTransform>,
    cosine: ChebyshevPoly,
    q0: f64,
}

fn to_transform(ctx: &CkksContext, m: DiagonalMatrix) -> Result<LinearTransform, CkksError> {
    LinearTransform::new(ctx, m.slots, m.diagonals.into_iter().map(|(k, d)| (k as i64, d)))
}

impl Bootstrapper {
    /// Builds the transforms and the EvalMod polynomial. Errors when the context does not have
    /// the shape's levels or ring degree.
    pub fn new(ctx: &Arc<CkksContext>, params: BootstrapParams) -> Result<Self, CkksError> {
        if ctx.n() != params.n() || ctx.max_level() != params.top_level() {
            return Err(CkksError::InvalidArgument {
                what: format!("the context has n = {} and top level {}, the bootstrapping shape needs n = {} and top level {}", ctx.n(), ctx.max_level(), params.n(), params.top_level()),
            });
        }
        let n = params.n();
        let slots = params.slots();
        let q0 = ctx.prime_at(0)? as f64;
        let b = params.evalmod.interval();
        // CoeffsToSlots: (1/s) I_2 ... I_s, times 1/2 (the real part is ct + conj ct), 1/B (the
        // cosine's interval), and 2s/n (the trace of a sparse message sums n/2s copies).
        let trace = (n / 2 / slots) as f64;
        let cts_scale = Complex64::new(1.0 / (2.0 * b * trace), 0.0);
        let cts = coeffs_to_slots_factors(n, slots, params.cts_levels, cts_scale).into_iter().map(|m| to_transform(ctx, m)).collect::<Result<_, _>>()?;
        let evalmod = EvalMod::new(params.evalmod);
        let cosine = ChebyshevPoly::new(evalmod.cos_coeffs.clone(), -1.0, 1.0)?;
        // SlotsToCoeffs: S_s ... S_2 times q_0 / (2 pi Delta_0'), Delta_0' = q_0 / 2^ratio.
        let stc_scale = Complex64::new(2f64.powi(params.evalmod.log_message_ratio as i32) / (2.0 * std::f64::consts::PI), 0.0);
        let stc = slots_to_coeffs_factors(n, slots, params.stc_levels, stc_scale).into_iter().map(|m| to_transform(ctx, m)).collect::<Result<_, _>>()?;
        Ok(Self { ctx: ctx.clone(), params, cts, stc, cosine, q0 })
    }

    pub fn params(&self) -> &BootstrapParams {
        &self.params
    }

    /// Every rotation with the level it runs at.
    pub fn rotations(&self) -> BootstrapRotations {
        let top = self.params.top_level();
        let mut rotations = Vec::new();
        // Trace for sparse slots: rotations by s, 2s, ..., n/4 at the top level.
        let mut step = self.params.slots();
        while step < self.params.n() / 2 {
            rotations.push((step as i64, top));
            step *= 2;
        }
        for (i, lt) in self.cts.iter().enumerate() {
            rotations.extend(lt.rotations().into_iter().map(|r| (r, top - i)));
        }
        let after_cts = top - self.params.cts_levels;
        let stc_top = after_cts - self.params.evalmod.depth();
        for (i, lt) in self.stc.iter().enumerate() {
            rotations.extend(lt.rotations().into_iter().map(|r| (r, stc_top - i)));
        }
        BootstrapRotations { rotations, conjugation_level: after_cts, relin_level: after_cts }
    }

    /// The evaluation keys bootstrapping needs, each only up to the level where it is used.
    pub fn generate_keys(&self, sk: &SecretKey, sampler: &mut Sampler) -> Result<EvaluationKeys, CkksError> {
        let r = self.rotations();
        let n = self.params.n();
        let mut pairs: Vec<(u64, usize)> = r.rotations.iter().map(|&(s, l)| (rotation_galois_element(s, n), l)).filter(|&(g, _)| g != 1).collect();
        pairs.push((conjugation_galois_element(n), r.conjugation_level));
        let galois = GaloisKeys::generate_at(sk, &pairs, sampler)?;
        let relin = RelinKey::generate_at(sk, r.relin_level, sampler)?;
        Ok(EvaluationKeys { relin: Some(Arc::new(relin)), galois: Some(Arc::new(galois)) })
    }

    /// ModRaise: the level-0 ciphertext's residues, centred mod q_0, as integers mod Q_top.
    fn mod_raise(&self, ct: &Ciphertext) -> Result<Ciphertext, CkksError> {
        let params = self.ctx.params();
        let backend = params.backend();
        let top = params.q_at(params.max_level())?.clone();
        let q0 = params.q_at(0)?.moduli()[0];
        let mut parts = Vec::with_capacity(2);
        for part in ct.inner().parts() {
            let coeff: Poly<Coeff> = backend.intt(part.clone());
            let centred: Vec<i64> = coeff.limb(0).iter().map(|&x| q0.center(x)).collect();
            parts.push(backend.ntt(Poly::<Coeff>::from_signed(&top, &centred)?));
        }
        let inner = lycaon_rlwe::Ciphertext::from_parts(params, parts)?;
        // Read with scale q_0 the slots hold U (t / q_0): the coefficients are t / q_0 = m' + I.
        Ciphertext::from_inner(&self.ctx, inner, self.q0, self.params.n() / 2)
    }

    /// Refreshes a ciphertext of the shape's slot count (at any level, 2 parts) to the top
    /// residual level, at its canonical scale. Needs the keys of [`Self::generate_keys`].
    pub fn bootstrap(&self, eval: &Evaluator, ct: &Ciphertext) -> Result<Ciphertext, CkksError> {
        if ct.slots() != self.params.slots() {
            return Err(CkksError::InvalidArgument { what: format!("this bootstrapper is for {} slots, the ciphertext has {}", self.params.slots(), ct.slots()) });
        }
        // Level 0 at scale q_0 / 2^ratio: multiply by the integer nearest q_0 / (2^ratio s).
        let low = eval.drop_to_level(ct, 0)?;
        let ratio = 2f64.powi(self.params.evalmod.log_message_ratio as i32);
        let k = (self.q0 / (ratio * low.scale())).round().max(1.0);
        let mut low = eval.mul_integer(&low, k as i64)?;
        let message_scale = low.scale() * k;
        low.set_scale_metadata(message_scale)?;
        // ModRaise and (sparse) trace onto the slot subring.
        let mut raised = self.mod_raise(&low)?;
        let mut step = self.params.slots();
        while step < self.params.n() / 2 {
            let rotated = eval.rotate(&raised, step as i64)?;
            raised = eval.add(&raised, &rotated)?;
            step *= 2;
        }
        raised.set_slots(&self.ctx, self.params.slots())?;
        // CoeffsToSlots, each factor landing on the size of the next level's prime.
        let mut x = raised;
        for lt in &self.cts {
            let target = self.ctx.prime_at(x.level() - 1)? as f64;
            x = eval.linear_transform_to_scale(&x, lt, target)?;
        }
        // Real and imaginary parts: x + conj(x) and -i (x - conj(x)) (the 1/2 is in CtS).
        let conj = eval.conjugate(&x)?;
        let re = eval.add(&x, &conj)?;
        let diff = eval.sub(&x, &conj)?;
        let im = eval.mul_const_scaled(&diff, Complex64::new(0.0, -1.0), 1.0)?;
        let mut outs = Vec::with_capacity(2);
        for part in [re, im] {
            let level = part.level() - self.cosine.depth();
            let mut y = eval.evaluate_chebyshev_to_scale(&part, &self.cosine, self.ctx.prime_at(level)? as f64)?;
            for _ in 0..self.params.evalmod.double_angle {
                let sq = eval.rescale(&eval.mul_relin(&y, &y)?)?;
                y = eval.add_const_real(&eval.mul_integer(&sq, 2)?, -1.0)?;
            }
            outs.push(y);
        }
        let im = eval.mul_const_scaled(&outs[1], Complex64::new(0.0, 1.0), 1.0)?;
        let mut v = eval.add(&outs[0], &im)?;
        // SlotsToCoeffs. Its constant is 2^ratio / 2pi, so it yields c m with c = 2^ratio
        // Delta' / q_0 (Delta' the exact message scale above); the last factor's target absorbs
        // c so that the output is m at exactly the canonical scale of the residual top.
        let c = ratio * message_scale / self.q0;
        let count = self.stc.len();
        for (i, lt) in self.stc.iter().enumerate() {
            let target = if i + 1 == count { self.ctx.scale_at(v.level() - 1)? / c } else { self.ctx.prime_at(v.level() - 1)? as f64 };
            v = eval.linear_transform_to_scale(&v, lt, target)?;
        }
        let residual = self.ctx.scale_at(v.level())?;
        v.set_scale_metadata(residual)?;
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lycaon_rlwe::Parameters;

    #[test]
    fn logn16_set_is_128_bit_secure_and_leaves_ten_levels() {
        let bp = BootstrapParams::logn16_full_slots();
        let lit = bp.literal().unwrap();
        let params = Parameters::new(lit.clone()).unwrap(); // checks log QP <= 1772
        assert!(params.log2_qp() <= 1772.0, "log QP {}", params.log2_qp());
        assert_eq!(bp.top_level(), 10 + 3 + 9 + 4);
        assert_eq!(params.max_level(), bp.top_level());
        let ctx = CkksContext::new(&params, bp.top_scale(&lit)).unwrap();
        for l in 0..=bp.residual_top() {
            assert!((ctx.scale_at(l).unwrap().log2() - 40.0).abs() < 1e-3, "level {l}");
        }
        eprintln!("logN = 16 bootstrapping set: log QP = {:.1}, {} digits", params.log2_qp(), params.key_switch_digit_sizes(params.max_level()).unwrap().len());
    }
}
