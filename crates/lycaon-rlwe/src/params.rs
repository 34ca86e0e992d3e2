//! Validated RLWE parameter sets: ring degree n, the ciphertext modulus chain Q = q_0 ... q_{L-1},
//! special primes P for hybrid key switching, the number of key-switching digits, and (for BFV) the
//! plaintext modulus t. A set is identified by a content hash, never by pointer.

use std::ops::Range;
use std::sync::Arc;

use lycaon_backend::{Backend, CpuBackend};
use lycaon_math::{ntt_primes, BaseConverter, Modulus, NttPlan, RnsBasis, ShoupConstant};

use crate::{wire::ParamsId, RlweError};

/// Largest log2(QP) at 128-bit classical security for a uniform ternary secret and error of
/// sigma = 3.2, by ring degree n: the one security table of Lycaon (every other crate and the
/// Python package read it through [`max_log_qp`] or this constant).
///
/// Where each bound comes from:
/// * n = 1024 .. 32768 (27, 54, 109, 218, 438, 881): the Homomorphic Encryption Standard
///   (Albrecht et al. 2018, Table 1, "ternary secret, classical, 128 bits"), the same values SEAL's
///   `SEAL_HE_STD_PARMS_128_TC` enforces.
/// * n = 65536 (1772): not in the standard's table, which stops at 2^15. 1772 is the bound this
///   project adopted for 2^16 when the table was written (commit 17538a6; no derivation was
///   recorded), about twice the 2^15 bound. Tables recomputed since with the lattice estimator
///   (e.g. those of the FHE-Security-Guidelines scripts) are lower in every row, about 1747 bits
///   at 2^16, so a set at 2^16 that needs the last bits below 1772 deserves a fresh estimate.
pub const MAX_LOG_QP_128: [(usize, u32); 7] =
    [(1024, 27), (2048, 54), (4096, 109), (8192, 218), (16384, 438), (32768, 881), (65536, 1772)];

/// The largest log2(QP) a parameter set with ring degree `n` may have at 128-bit security
/// ([`MAX_LOG_QP_128`]); `None` for a degree the table does not cover (not a power of two, or
/// outside 1024..=65536).
pub fn max_log_qp(n: usize) -> Option<u32> {
    MAX_LOG_QP_128.iter().find(|&&(m, _)| m == n).map(|&(_, bits)| bits)
}

/// Checks that a ring degree can define the ring Z[X]/(X^n + 1) Lycaon works in: a power of two,
/// at most 65536, at least 16 (the 128-bit floor of 1024 is checked by [`Parameters::new`] with the
/// security level). Literal builders call it before they search for NTT-friendly primes, so a bad
/// n is named as such instead of as a missing prime. Errors: [`RlweError::InvalidParameters`].
pub fn check_ring_degree(n: usize) -> Result<(), RlweError> {
    if !n.is_power_of_two() {
        return Err(RlweError::InvalidParameters {
            reason: format!("ring degree n = {n} is not a power of two; the ring is Z[X]/(X^n + 1) with n = 2^k (1024, 2048, 4096, 8192, 16384, 32768 or 65536 at 128-bit security)"),
        });
    }
    if !(16..=1 << 16).contains(&n) {
        return Err(RlweError::InvalidParameters { reason: format!("ring degree n = {n} is outside 16..=65536 (1024..=65536 at 128-bit security)") });
    }
    Ok(())
}

/// The security a parameter set must meet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Security {
    /// 128-bit classical security per the HE standard (the only level a user should ever pick).
    Bits128,
    /// No check at all. For unit tests with toy parameters only; never use it for real data.
    InsecureTestOnly,
}

/// User-facing parameter description, checked by [`Parameters::new`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParametersLiteral {
    /// Ring degree, a power of two in 1024..=65536 (16..=65536 with `InsecureTestOnly`).
    pub n: usize,
    /// Ciphertext primes q_0 .. q_{L-1}; modulus switching drops them from the end.
    pub ciphertext_moduli: Vec<u64>,
    /// Special primes P of hybrid key switching (at least one if keys are used).
    pub special_moduli: Vec<u64>,
    /// BFV plaintext modulus t (a prime = 1 mod 2n for batching); `None` for CKKS.
    pub plaintext_modulus: Option<u64>,
    /// Number of key-switching digits the ciphertext primes are grouped into (1..=L); `L` gives one
    /// prime per digit, as SEAL does.
    pub key_switch_digits: usize,
    pub security: Security,
}

impl ParametersLiteral {
    /// A BFV literal with primes generated from bit sizes (largest NTT-friendly primes below each
    /// size, as SEAL's CoeffModulus::Create) and a batching-friendly prime t of `t_bits` bits.
    /// Errors: [`RlweError::InvalidParameters`] for an n that is not a power of two in 16..=65536,
    /// [`RlweError::Math`] when too few primes of a size exist.
    pub fn bfv_from_bits(n: usize, q_bits: &[u32], p_bits: &[u32], t_bits: u32) -> Result<Self, RlweError> {
        check_ring_degree(n)?;
        let mut taken = Vec::new();
        let mut pick = |bits: u32| -> Result<u64, RlweError> {
            let q = ntt_primes(bits, n, 1, &taken)?[0];
            taken.push(q);
            Ok(q)
        };
        let ciphertext_moduli = q_bits.iter().map(|&b| pick(b)).collect::<Result<Vec<_>, _>>()?;
        let special_moduli = p_bits.iter().map(|&b| pick(b)).collect::<Result<Vec<_>, _>>()?;
        let t = ntt_primes(t_bits, n, 1, &[])?[0];
        Ok(Self {
            n,
            key_switch_digits: ciphertext_moduli.len(),
            ciphertext_moduli,
            special_moduli,
            plaintext_modulus: Some(t),
            security: Security::Bits128,
        })
    }

    /// A CKKS literal (no plaintext modulus) with primes generated from bit sizes: the largest
    /// NTT-friendly primes below each size, all distinct, as SEAL's CoeffModulus::Create. The
    /// number of key-switching digits is chosen so that each digit's primes fit under P (the
    /// usual hybrid choice, dnum = ceil(L / alpha) with alpha = floor(log P / max log q_i)), or
    /// one digit per prime when there are no special primes.
    /// Errors as [`Self::bfv_from_bits`].
    pub fn ckks_from_bits(n: usize, q_bits: &[u32], p_bits: &[u32]) -> Result<Self, RlweError> {
        check_ring_degree(n)?;
        let mut taken = Vec::new();
        let mut pick = |bits: u32| -> Result<u64, RlweError> {
            let q = ntt_primes(bits, n, 1, &taken)?[0];
            taken.push(q);
            Ok(q)
        };
        let ciphertext_moduli = q_bits.iter().map(|&b| pick(b)).collect::<Result<Vec<_>, _>>()?;
        let special_moduli = p_bits.iter().map(|&b| pick(b)).collect::<Result<Vec<_>, _>>()?;
        let key_switch_digits = Self::hybrid_digits(&ciphertext_moduli, &special_moduli);
        Ok(Self { n, ciphertext_moduli, special_moduli, plaintext_modulus: None, key_switch_digits, security: Security::Bits128 })
    }

    /// A CKKS literal from explicit primes, with the digit count of [`Self::ckks_from_bits`].
    pub fn ckks_from_moduli(n: usize, ciphertext_moduli: Vec<u64>, special_moduli: Vec<u64>) -> Self {
        let key_switch_digits = Self::hybrid_digits(&ciphertext_moduli, &special_moduli);
        Self { n, ciphertext_moduli, special_moduli, plaintext_modulus: None, key_switch_digits, security: Security::Bits128 }
    }

    /// dnum = ceil(L / alpha), alpha = max(1, floor(log2 P / max_i log2 q_i)); L with no P.
    fn hybrid_digits(q: &[u64], p: &[u64]) -> usize {
        let l = q.len().max(1);
        if p.is_empty() {
            return l;
        }
        let log_p: f64 = p.iter().map(|&x| (x as f64).log2()).sum();
        let max_q = q.iter().map(|&x| (x as f64).log2()).fold(1.0, f64::max);
        let alpha = ((log_p / max_q).floor() as usize).max(1);
        l.div_ceil(alpha)
    }

    /// The default BFV set for a ring degree: the largest modulus the standard allows at 128 bits,
    /// split like SEAL's BFVDefault (one special prime), and a 20-bit batching prime t.
    pub fn bfv_default(n: usize) -> Result<Self, RlweError> {
        check_ring_degree(n)?;
        let (q_bits, p_bits): (&[u32], &[u32]) = match n {
            1024 => (&[27], &[]),
            2048 => (&[54], &[]),
            4096 => (&[36, 36], &[37]),
            8192 => (&[43, 43, 44, 44], &[44]),
            16384 => (&[48, 48, 48, 49, 49, 49, 49, 49], &[49]),
            32768 => (&[55; 15], &[56]),
            _ => return Err(RlweError::InvalidParameters { reason: format!("no default BFV parameters for n = {n}; pass moduli explicitly") }),
        };
        Self::bfv_from_bits(n, q_bits, p_bits, 20)
    }
}

/// Per-level precomputation for key switching at level l (l + 1 ciphertext primes).
#[derive(Debug)]
pub(crate) struct LevelContext {
    pub q: Arc<RnsBasis>,
    /// Q_l followed by P.
    pub qp: Arc<RnsBasis>,
    /// Prime indices of each digit present at this level.
    pub digits: Vec<Range<usize>>,
    /// For each digit: its own primes as a basis, and the converter to the complementary primes
    /// of QP_l (in QP_l order, skipping the digit's own).
    pub digit_bases: Vec<Arc<RnsBasis>>,
    pub mod_up: Vec<BaseConverter>,
    /// P -> Q_l, and P^{-1} mod q_i.
    pub mod_down: Option<BaseConverter>,
    pub p_inv: Vec<ShoupConstant>,
    /// For each limb of QP_l, its index in the top-level QP basis that keys live in.
    pub key_limbs: Vec<usize>,
}

/// A validated parameter set with its precomputed bases, shared behind an `Arc`.
pub struct Parameters {
    literal: ParametersLiteral,
    id: ParamsId,
    q: Arc<RnsBasis>,
    p: Option<Arc<RnsBasis>>,
    qp: Arc<RnsBasis>,
    t: Option<Modulus>,
    t_plan: Option<Arc<NttPlan>>,
    levels: Vec<LevelContext>,
    backend: Arc<dyn Backend>,
}

impl std::fmt::Debug for Parameters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parameters")
            .field("n", &self.literal.n)
            .field("log_q", &self.q.log2_product())
            .field("log_qp", &self.qp.log2_product())
            .field("t", &self.literal.plaintext_modulus)
            .field("digits", &self.literal.key_switch_digits)
            .field("id", &hex_prefix(&self.id))
            .finish()
    }
}

fn check_security(lit: &ParametersLiteral, log_qp: f64) -> Result<(), RlweError> {
    if lit.security == Security::InsecureTestOnly {
        return Ok(());
    }
    let Some(max) = max_log_qp(lit.n) else {
        return Err(RlweError::Insecure { n: lit.n, log_qp, max_log_qp: 0 });
    };
    if log_qp > max as f64 {
        return Err(RlweError::Insecure { n: lit.n, log_qp, max_log_qp: max });
    }
    Ok(())
}

impl Parameters {
    /// Validates a literal: primes NTT-friendly and distinct, t compatible, 128-bit security
    /// (unless explicitly opted out), digits in range.
    pub fn new(literal: ParametersLiteral) -> Result<Arc<Self>, RlweError> {
        Self::with_backend(literal, CpuBackend::shared())
    }

    pub fn with_backend(literal: ParametersLiteral, backend: Arc<dyn Backend>) -> Result<Arc<Self>, RlweError> {
        let lit = literal;
        let n = lit.n;
        check_ring_degree(n)?;
        if lit.security == Security::Bits128 && n < 1024 {
            return Err(RlweError::InvalidParameters { reason: format!("ring degree n = {n} is below 1024, the smallest the HE standard rates at 128-bit security") });
        }
        if lit.ciphertext_moduli.is_empty() {
            return Err(RlweError::InvalidParameters { reason: "at least one ciphertext prime is required".into() });
        }
        let to_moduli = |v: &[u64]| v.iter().map(|&q| Modulus::new(q).map_err(RlweError::from)).collect::<Result<Vec<_>, _>>();
        let qm = to_moduli(&lit.ciphertext_moduli)?;
        let pm = to_moduli(&lit.special_moduli)?;
        for m in qm.iter().chain(&pm) {
            if m.bits() > 61 {
                return Err(RlweError::InvalidParameters { reason: format!("prime {} exceeds 61 bits", m.value()) });
            }
        }
        let all: Vec<Modulus> = qm.iter().chain(&pm).copied().collect();
        let qp = RnsBasis::new(n, &all)?;
        check_security(&lit, qp.log2_product())?;
        let l = qm.len();
        let q = qp.prefix(l)?;
        let p = if pm.is_empty() { None } else { Some(RnsBasis::from_plans(qp.plans()[l..].to_vec())?) };
        let digits = lit.key_switch_digits;
        if digits == 0 || digits > l {
            return Err(RlweError::InvalidParameters { reason: format!("key_switch_digits = {digits} must be between 1 and the number of ciphertext primes ({l})") });
        }
        let (t, t_plan) = match lit.plaintext_modulus {
            None => (None, None),
            Some(t) => {
                let tm = Modulus::new(t)?;
                if t < 2 || qm.iter().any(|q| q.value() <= t) {
                    return Err(RlweError::InvalidParameters { reason: format!("plaintext modulus t = {t} must be at least 2 and smaller than every ciphertext prime") });
                }
                // Batching needs t prime and t = 1 mod 2n; coefficient encoding works for any t.
                let plan = NttPlan::new(n, tm).ok().map(Arc::new);
                (Some(tm), plan)
            }
        };
        let digit_size = l.div_ceil(digits);
        let mut levels = Vec::with_capacity(l);
        for level in 0..l {
            levels.push(Self::level_context(&qp, p.as_ref(), l, level, digit_size)?);
        }
        let id = Self::content_hash(&lit);
        Ok(Arc::new(Self { literal: lit, id, q, p, qp, t, t_plan, levels, backend }))
    }

    fn level_context(qp_top: &Arc<RnsBasis>, p: Option<&Arc<RnsBasis>>, l: usize, level: usize, digit_size: usize) -> Result<LevelContext, RlweError> {
        let count = level + 1;
        let plans = qp_top.plans();
        let q = RnsBasis::from_plans(plans[..count].to_vec())?;
        let alpha = plans.len() - l;
        let qp_plans: Vec<_> = plans[..count].iter().chain(&plans[l..]).cloned().collect();
        let qp = RnsBasis::from_plans(qp_plans.clone())?;
        let key_limbs: Vec<usize> = (0..count).chain(l..l + alpha).collect();
        let (mut digits, mut digit_bases, mut mod_up) = (Vec::new(), Vec::new(), Vec::new());
        if alpha > 0 {
            let mut start = 0;
            while start < count {
                let end = (start + digit_size).min(count);
                let own = RnsBasis::from_plans(qp_plans[start..end].to_vec())?;
                let rest: Vec<_> = qp_plans[..start].iter().chain(&qp_plans[end..]).cloned().collect();
                mod_up.push(BaseConverter::new(own.clone(), RnsBasis::from_plans(rest)?)?);
                digit_bases.push(own);
                digits.push(start..end);
                start = end;
            }
        }
        let (mod_down, p_inv) = match p {
            Some(p) => {
                let conv = BaseConverter::new(p.clone(), q.clone())?;
                let p_inv = q
                    .moduli()
                    .iter()
                    .map(|qi| {
                        let pm = p.moduli().iter().fold(1u64, |acc, pj| qi.mul(acc, qi.reduce(pj.value())));
                        qi.inv(pm).map(|v| ShoupConstant::new(v, qi))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                (Some(conv), p_inv)
            }
            None => (None, Vec::new()),
        };
        Ok(LevelContext { q, qp, digits, digit_bases, mod_up, mod_down, p_inv, key_limbs })
    }

    fn content_hash(lit: &ParametersLiteral) -> ParamsId {
        let mut h = blake3::Hasher::new();
        h.update(b"lycaon-parameters-v1");
        h.update(&(lit.n as u64).to_le_bytes());
        for list in [&lit.ciphertext_moduli, &lit.special_moduli] {
            h.update(&(list.len() as u64).to_le_bytes());
            list.iter().for_each(|q| {
                h.update(&q.to_le_bytes());
            });
        }
        h.update(&lit.plaintext_modulus.unwrap_or(0).to_le_bytes());
        h.update(&(lit.key_switch_digits as u64).to_le_bytes());
        h.update(&[matches!(lit.security, Security::Bits128) as u8]);
        *h.finalize().as_bytes()
    }

    pub fn literal(&self) -> &ParametersLiteral {
        &self.literal
    }

    /// Content hash identifying this parameter set on the wire.
    pub fn id(&self) -> &ParamsId {
        &self.id
    }

    pub fn n(&self) -> usize {
        self.literal.n
    }

    /// Index of the top level (L - 1); level l has l + 1 ciphertext primes.
    pub fn max_level(&self) -> usize {
        self.levels.len() - 1
    }

    /// The ciphertext basis Q_l at a level.
    pub fn q_at(&self, level: usize) -> Result<&Arc<RnsBasis>, RlweError> {
        Ok(&self.level(level)?.q)
    }

    pub fn q(&self) -> &Arc<RnsBasis> {
        &self.q
    }

    pub fn p(&self) -> Option<&Arc<RnsBasis>> {
        self.p.as_ref()
    }

    /// Q followed by P at the top level (where keys live).
    pub fn qp(&self) -> &Arc<RnsBasis> {
        &self.qp
    }

    pub fn plaintext_modulus(&self) -> Option<&Modulus> {
        self.t.as_ref()
    }

    /// NTT plan modulo t, present when t is a prime = 1 mod 2n (batching possible).
    pub fn plaintext_ntt(&self) -> Option<&Arc<NttPlan>> {
        self.t_plan.as_ref()
    }

    /// Number of ciphertext primes in each key-switching digit present at `level` (the last digit
    /// may be shorter); cost models need it to count NTTs of a key switch.
    pub fn key_switch_digit_sizes(&self, level: usize) -> Result<Vec<usize>, RlweError> {
        Ok(self.level(level)?.digits.iter().map(|r| r.len()).collect())
    }

    /// Number of special primes P.
    pub fn special_prime_count(&self) -> usize {
        self.p.as_ref().map_or(0, |p| p.len())
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    pub(crate) fn level(&self, level: usize) -> Result<&LevelContext, RlweError> {
        self.levels.get(level).ok_or(RlweError::LevelOutOfRange { level, max: self.levels.len() - 1 })
    }

    /// log2(Q * P).
    pub fn log2_qp(&self) -> f64 {
        self.qp.log2_product()
    }
}

/// The first 8 bytes of an id in hex, for messages and debug output.
pub fn hex_prefix(id: &ParamsId) -> String {
    id[..8].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_secure_and_distinct() {
        for n in [4096, 8192, 16384, 32768] {
            let p = Parameters::new(ParametersLiteral::bfv_default(n).unwrap()).unwrap();
            let max = max_log_qp(n).unwrap() as f64;
            assert!(p.log2_qp() <= max && p.log2_qp() > max - 8.0, "n={n} log qp {}", p.log2_qp());
        }
        let a = Parameters::new(ParametersLiteral::bfv_default(8192).unwrap()).unwrap();
        let b = Parameters::new(ParametersLiteral::bfv_default(4096).unwrap()).unwrap();
        assert_ne!(a.id(), b.id());
    }

    #[test]
    fn insecure_sets_are_refused_unless_opted_out() {
        let mut lit = ParametersLiteral::bfv_from_bits(4096, &[50, 50], &[50], 20).unwrap();
        let err = Parameters::new(lit.clone()).unwrap_err();
        assert!(matches!(err, RlweError::Insecure { n: 4096, max_log_qp: 109, .. }), "{err}");
        assert!(err.to_string().contains("128-bit"), "{err}");
        lit.security = Security::InsecureTestOnly;
        assert!(Parameters::new(lit).is_ok());
        let mut small = ParametersLiteral::bfv_from_bits(64, &[30], &[31], 10).unwrap();
        assert!(Parameters::new(small.clone()).is_err());
        small.security = Security::InsecureTestOnly;
        assert!(Parameters::new(small).is_ok());
    }

    #[test]
    fn ckks_literals_have_no_plaintext_modulus_and_hybrid_digits() {
        let mut bits = vec![55u32];
        bits.extend([40u32; 10]);
        let lit = ParametersLiteral::ckks_from_bits(1 << 16, &bits, &[61, 61, 61]).unwrap();
        assert_eq!(lit.plaintext_modulus, None);
        assert_eq!(lit.key_switch_digits, 4, "11 primes in digits of 3 under a 183-bit P");
        let p = Parameters::new(lit).unwrap();
        assert!(p.plaintext_modulus().is_none() && p.log2_qp() < 640.0);
        let lit = ParametersLiteral::ckks_from_bits(8192, &[50, 40], &[]).unwrap();
        assert_eq!(lit.key_switch_digits, 2);
    }

    #[test]
    fn bad_literals_name_the_problem() {
        let mut lit = ParametersLiteral::bfv_default(4096).unwrap();
        lit.key_switch_digits = 3;
        assert!(Parameters::new(lit.clone()).unwrap_err().to_string().contains("key_switch_digits"));
        lit.key_switch_digits = 1;
        lit.ciphertext_moduli[1] = lit.ciphertext_moduli[0];
        assert!(Parameters::new(lit.clone()).unwrap_err().to_string().contains("twice"));
        lit.ciphertext_moduli[1] = 1 << 40;
        assert!(Parameters::new(lit).is_err());
    }

    #[test]
    fn the_security_table_is_the_standards() {
        // HE standard, Table 1, ternary secret, classical 128 bits; 2^16 is the project's bound.
        let want = [(1024, 27), (2048, 54), (4096, 109), (8192, 218), (16384, 438), (32768, 881), (65536, 1772)];
        for (n, bits) in want {
            assert_eq!(max_log_qp(n), Some(bits), "n = {n}");
        }
        for n in [0, 512, 3000, 1 << 17] {
            assert_eq!(max_log_qp(n), None, "n = {n}");
        }
    }

    #[test]
    fn a_ring_degree_that_is_not_a_power_of_two_is_named_as_such() {
        let says_power_of_two = |e: RlweError| {
            assert!(matches!(e, RlweError::InvalidParameters { .. }), "{e}");
            assert!(e.to_string().contains("n = 3000 is not a power of two"), "{e}");
        };
        // Each builder refuses before it looks for NTT-friendly primes (which would fail with
        // "no 1 NTT-friendly primes of 36 bits exist for n = 3000").
        says_power_of_two(ParametersLiteral::bfv_from_bits(3000, &[36, 36], &[37], 20).unwrap_err());
        says_power_of_two(ParametersLiteral::ckks_from_bits(3000, &[36, 36], &[37]).unwrap_err());
        says_power_of_two(ParametersLiteral::bfv_default(3000).unwrap_err());
        // A literal built by hand is refused by validation, with either security level.
        let mut lit = ParametersLiteral::bfv_default(4096).unwrap();
        lit.n = 3000;
        says_power_of_two(Parameters::new(lit.clone()).unwrap_err());
        lit.security = Security::InsecureTestOnly;
        says_power_of_two(Parameters::new(lit).unwrap_err());
        assert!(check_ring_degree(1 << 17).unwrap_err().to_string().contains("outside 16..=65536"));
        assert!(check_ring_degree(8).is_err() && check_ring_degree(16).is_ok() && check_ring_degree(65536).is_ok());
        // Below 1024 only with the test-only opt-out.
        let small = ParametersLiteral::bfv_from_bits(512, &[30], &[31], 17).unwrap();
        assert!(Parameters::new(small).unwrap_err().to_string().contains("below 1024"));
    }
}
