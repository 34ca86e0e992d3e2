//! The bootstrapping circuit on the crate's [`Evaluator`]: ModRaise (encapsulated in a sparse
//! secret, see [`super`]), for sparse slots the trace that projects the raised phase onto the
//! slot subring, CoeffsToSlots as grouped diagonal factors, the split into real and imaginary
//! parts by conjugation, EvalMod on each (Chebyshev cosine and double angles), recombination,
//! and SlotsToCoeffs landing on the canonical scale of the top residual level. For sparse slots
//! (s < n/2) the two parts are packed side by side in 2s slots and EvalMod runs once: the last
//! CoeffsToSlots factor writes [y, 0] on 2s slots, [2 Re y, 0] + rot_s([2 Im y, 0]) packs them
//! (one rotation), and the first SlotsToCoeffs factor reads [a, b] as a + i b and writes an
//! s-periodic (s-slot) result.
//!
//! Levels, top down (L the top level, R the top residual level): CoeffsToSlots L .. L - c + 1,
//! EvalMod the next `evalmod.depth()` levels, SlotsToCoeffs the next s levels, output at R.
//! Every rotation key is generated only up to the level where it is used.
//!
//! Precision of the transforms. A factor's diagonals are encoded as integer polynomials of size
//! about sigma |d| (sigma the plaintext scale, |d| the entries), and rounding them adds an error
//! of about sqrt(n / 12) / (sigma |d|) relative to the factor's output. CoeffsToSlots must keep
//! about 38 bits of relative precision at logN = 16 (the message sits 2^-16 q_0 under q_0 I
//! with |I| up to 16, and coefficient errors grow by sqrt(n) on the way back to slots), so the
//! constant of each transform (1 / (2 B s trace) for CoeffsToSlots, 2^ratio / 2pi for
//! SlotsToCoeffs) is spread over its factors such that every factor's encoded diagonals have
//! the same integer size ([`spread_constant`]). Folding it all into the first factor, as an
//! earlier version did, left that factor's diagonals at 2^-20 at a plaintext scale of 2^52:
//! 2^32-sized integers, a 2^-26 relative error, and 9.8 bits at logN = 16.
//!
//! Where the error goes at logN = 16 (full slots, dense secret; the `stage_errors` test):
//! CoeffsToSlots adds 2^-41 q_0 (rms), EvalMod 2^-35.6 in units of the sine (its noise at
//! scale 2^60 grows 4x per double angle), SlotsToCoeffs 2^-26 of the message; bootstrapping
//! alone is off by 2^-22.7 rms from its input, whose own encryption noise at scale 2^40 is
//! 2^-22.1: 22.7 bits mean end to end. Before the constants were spread, CoeffsToSlots added
//! 2^-30.4 (logN = 12), 2^-27.5 (14) and about 2^-24.6 (16) q_0: 17.8, 13.8 and 9.8 bits.
//!
//! The transforms are double hoisted (`hoisted.rs`); their diagonals are encoded over
//! Q_l P once per (level, plaintext scale), on first use, and kept (3.1 GB at logN = 16: the
//! first bootstrap also encodes them).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use lycaon_math::{Poly, Sampler};
use lycaon_rlwe::{GaloisKeys, KeySwitchKey, ParametersLiteral, RelinKey, SecretKey};
use lycaon_rlwe::wire::{reserve_header, seal_reserved, ObjectKind};
use num_complex::Complex64;

use super::dft::{coeffs_to_slots_factors, slots_to_coeffs_factors, DiagonalMatrix};
use super::evalmod::{chebyshev_evaluate, EvalMod, EvalModParams};
use super::hoisted::ExtendedDiagonals;
use crate::ops::{BootstrapOps, CiphertextMeta};
use crate::serialize::{bootstrap_key_flags, put_part, put_part_bytes};
use crate::{
    conjugation_galois_element, rotation_galois_element, ChebyshevPoly, Ciphertext, CkksContext, CkksError, EvaluationKeys, Evaluator, LinearTransform,
};

const P_PRIMES: usize = 6;

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
    /// Hamming weight h of the ephemeral sparse secret of sparse-secret encapsulation, or `None`
    /// to ModRaise under the scheme's own secret (only sound when that secret is itself sparse
    /// enough for `evalmod.k`, as in tests).
    pub encapsulation_weight: Option<usize>,
    /// The baby-step giant-step split of each transform factor minimises (baby steps) + w
    /// (giant steps): a giant step is a whole key switch (ModUp of every digit, inner product,
    /// ModDown), a hoisted baby step only an inner product and a ModDown, about a third, but
    /// every baby step is one more rotation key. w = 1 counts rotations (fewest keys).
    pub cts_giant_step_cost: usize,
    pub stc_giant_step_cost: usize,
}

impl BootstrapParams {
    /// logN = 16, full slots (2^15), 10 residual levels at scale 2^40 over a 60-bit q_0 (Orion's
    /// residual shape), SlotsToCoeffs in 3 levels of 45 bits, EvalMod in 9 levels of 60 bits,
    /// CoeffsToSlots in 4 levels of 56 bits, P = 6 primes of 61 bits: log QP = 1725 <= 1772,
    /// 128-bit secure for a uniform ternary secret by the HE standard. EvalMod's K = 16 holds
    /// because ModRaise happens under an ephemeral secret of Hamming weight 32 (sparse-secret
    /// encapsulation, see the module documentation of [`super`]).
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
            p_bits: vec![61; P_PRIMES],
            encapsulation_weight: Some(32),
            cts_giant_step_cost: 3,
            stc_giant_step_cost: 1,
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

/// The two keys of sparse-secret encapsulation (public material).
#[derive(Clone, Debug)]
pub struct EncapsulationKeys {
    /// From the dense secret s to the ephemeral sparse s', for level 0 only (Q_0 P): RLWE under
    /// s' with a 365-bit modulus at logN = 16.
    pub dense_to_sparse: Arc<KeySwitchKey>,
    /// From s' back to s at the top level (RLWE under the dense s, as every other key).
    pub sparse_to_dense: Arc<KeySwitchKey>,
}

impl EncapsulationKeys {
    pub fn memory_bytes(&self) -> usize {
        self.dense_to_sparse.memory_bytes() + self.sparse_to_dense.memory_bytes()
    }

    pub fn serialized_len(&self, seeded: bool) -> usize {
        self.dense_to_sparse.serialized_len(seeded) + self.sparse_to_dense.serialized_len(seeded)
    }
}

/// Every key bootstrapping needs: the evaluation keys (for the [`Evaluator`]) and the
/// encapsulation keys (for [`Bootstrapper::with_encapsulation_keys`]).
#[derive(Clone, Debug)]
pub struct BootstrapKeys {
    pub evaluation: EvaluationKeys,
    pub encapsulation: Option<EncapsulationKeys>,
}

impl BootstrapKeys {
    /// Bytes of all keys in memory (8 bytes per residue).
    pub fn memory_bytes(&self) -> usize {
        let g = self.evaluation.galois.as_ref().map_or(0, |g| g.memory_bytes());
        let r = self.evaluation.relin.as_ref().map_or(0, |r| r.key().memory_bytes());
        g + r + self.encapsulation.as_ref().map_or(0, EncapsulationKeys::memory_bytes)
    }

    /// Bytes of all keys serialised one by one (seeded: uniform halves as 32-byte seeds).
    pub fn serialized_len(&self, seeded: bool) -> usize {
        let g = self.evaluation.galois.as_ref().map_or(0, |g| g.serialized_len(seeded));
        let r = self.evaluation.relin.as_ref().map_or(0, |r| r.serialized_len(seeded));
        g + r + self.encapsulation.as_ref().map_or(0, |e| e.serialized_len(seeded))
    }
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
    /// The message scale of an input at the canonical scale of level 0.
    canonical_message_scale: f64,
    /// Sparse slots (s < n/2): EvalMod runs once on 2s slots holding both parts.
    packed: bool,
    encapsulation: Option<EncapsulationKeys>,
    /// Diagonals over Q_l P per (transform, level, plaintext scale bits), encoded once.
    prepared: DiagonalCache<ExtendedDiagonals>,
}

/// A bootstrapper's transform diagonals as one evaluator keeps them (host polynomials for
/// [`Evaluator`], uploaded ones for a [`crate::ResidentEvaluator`]), per (transform, level,
/// plaintext scale), encoded once and reused by every later bootstrap.
pub struct DiagonalCache<D>(Mutex<HashMap<(usize, usize, u64), Arc<D>>>);

impl<D> Default for DiagonalCache<D> {
    fn default() -> Self {
        Self(Mutex::new(HashMap::new()))
    }
}

impl<D> std::fmt::Debug for DiagonalCache<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DiagonalCache({} transforms)", self.len())
    }
}

impl<D> DiagonalCache<D> {
    fn get(&self, key: &(usize, usize, u64)) -> Option<Arc<D>> {
        self.0.lock().ok().and_then(|m| m.get(key).cloned())
    }

    fn insert(&self, key: (usize, usize, u64), d: Arc<D>) {
        if let Ok(mut m) = self.0.lock() {
            m.insert(key, d);
        }
    }

    /// How many prepared transforms are kept.
    pub fn len(&self) -> usize {
        self.0.lock().map(|m| m.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The baby-step count n1 minimising (baby steps) + w (giant steps) for these diagonals.
fn weighted_bsgs_split(indices: &[usize], slots: usize, w: usize) -> usize {
    let mut best = (usize::MAX, 1);
    let mut n1 = 1;
    while n1 <= slots {
        let babies: HashSet<usize> = indices.iter().map(|k| k % n1).filter(|&i| i != 0).collect();
        let giants: HashSet<usize> = indices.iter().map(|k| k / n1).filter(|&j| j != 0).collect();
        let cost = babies.len() + w * giants.len();
        if cost <= best.0 {
            best = (cost, n1);
        }
        n1 *= 2;
    }
    best.1
}

fn to_transform(ctx: &CkksContext, m: DiagonalMatrix, giant_step_cost: usize) -> Result<LinearTransform, CkksError> {
    let indices: Vec<usize> = m.diagonals.keys().copied().collect();
    let n1 = weighted_bsgs_split(&indices, m.slots, giant_step_cost);
    LinearTransform::new(ctx, m.slots, m.diagonals.into_iter().map(|(k, d)| (k as i64, d)))?.with_baby_steps(n1)
}

/// Per-factor constants whose product is `total`, chosen so that sigma_i c_i is the same for
/// every factor (sigma_i its plaintext scale): c_i = total^(1/k) G / sigma_i with G the
/// geometric mean of the sigma_i. The encoded diagonals then all have the same integer size,
/// which maximises the smallest of them (the rounding of the smallest bounds the precision).
pub fn spread_constant(total: f64, sigmas: &[f64]) -> Vec<f64> {
    let k = sigmas.len() as f64;
    let log_g = sigmas.iter().map(|s| s.ln()).sum::<f64>() / k;
    sigmas.iter().map(|s| (total.ln() / k + log_g - s.ln()).exp()).collect()
}

/// The last CoeffsToSlots factor for packed sparse slots: the same map on 2s slots, reading the
/// s-slot input as [u, u] and writing [M u, 0] (rows s..2s zero), so that the real and
/// imaginary parts can later sit side by side in one 2s-slot ciphertext.
fn widen_to_upper_zero(m: DiagonalMatrix) -> DiagonalMatrix {
    let s = m.slots;
    let zero = Complex64::new(0.0, 0.0);
    let diagonals = m.diagonals.into_iter().map(|(r, mut d)| {
        d.resize(2 * s, zero);
        (r, d)
    });
    DiagonalMatrix { slots: 2 * s, diagonals: diagonals.collect() }
}

/// The first SlotsToCoeffs factor for packed sparse slots: on 2s slots [a, b] it applies the
/// s-slot map M to a + i b and writes the result s-periodically ([M z, M z], an s-slot message):
/// row t (t0 = t mod s) takes d_r[t0] (a_k + i b_k) with k = (t0 + r) mod s, i.e. d_r[t0] at
/// column k and i d_r[t0] at column k + s.
fn fold_halves(m: DiagonalMatrix) -> DiagonalMatrix {
    let s = m.slots;
    let w = 2 * s;
    let mut out: BTreeMap<usize, Vec<Complex64>> = BTreeMap::new();
    for (&r, d) in &m.diagonals {
        for t in 0..w {
            let t0 = t % s;
            let k = (t0 + r) % s;
            for (col, v) in [(k, d[t0]), (k + s, d[t0] * Complex64::new(0.0, 1.0))] {
                let rot = (col + w - t) % w;
                out.entry(rot).or_insert_with(|| vec![Complex64::new(0.0, 0.0); w])[t] += v;
            }
        }
    }
    DiagonalMatrix { slots: w, diagonals: out }
}

impl Bootstrapper {
    /// Builds the transforms and the EvalMod polynomial. Errors when the context does not have
    /// the shape's levels or ring degree.
    pub fn new(ctx: &Arc<CkksContext>, params: BootstrapParams) -> Result<Self, CkksError> {
        if ctx.n() != params.n() || ctx.max_level() != params.top_level() {
            return Err(CkksError::InvalidArgument {
                what: format!(
                    "the context has n = {} and top level {}, the bootstrapping shape needs n = {} and top level {}",
                    ctx.n(),
                    ctx.max_level(),
                    params.n(),
                    params.top_level()
                ),
            });
        }
        let n = params.n();
        let slots = params.slots();
        let top = params.top_level();
        let prime = |l: usize| ctx.prime_at(l).map(|q| q as f64);
        let q0 = prime(0)?;
        let b = params.evalmod.interval();
        // CoeffsToSlots: I_2 ... I_s times 1/s, 1/2 (the real part is ct + conj ct), 1/B (the
        // cosine's interval) and 2s/n (the trace of a sparse message sums n/2s copies). Factor
        // i runs at level L - i, its input at scale q_0 (the first) or q_{L-i}, its output at
        // q_{L-i-1}: sigma_i = q_{L-i-1} q_{L-i} / scale_in.
        let trace = (n / 2 / slots) as f64;
        let mut cts_f = coeffs_to_slots_factors(n, slots, params.cts_levels, Complex64::new(slots as f64, 0.0));
        let mut sigmas = Vec::with_capacity(cts_f.len());
        let mut scale_in = q0;
        for i in 0..cts_f.len() {
            let target = prime(top - i - 1)?;
            sigmas.push(target * prime(top - i)? / scale_in);
            scale_in = target;
        }
        for (f, c) in cts_f.iter_mut().zip(spread_constant(1.0 / (2.0 * b * trace * slots as f64), &sigmas)) {
            f.scale(Complex64::new(c, 0.0));
        }
        // Sparse slots: EvalMod runs once, on real and imaginary parts side by side in 2s slots.
        let packed = slots < n / 2;
        if packed {
            if let Some(last) = cts_f.pop() {
                cts_f.push(widen_to_upper_zero(last));
            }
        }
        let cts = cts_f.into_iter().map(|m| to_transform(ctx, m, params.cts_giant_step_cost)).collect::<Result<Vec<_>, _>>()?;
        let evalmod = EvalMod::new(params.evalmod);
        let cosine = ChebyshevPoly::new(evalmod.cos_coeffs.clone(), -1.0, 1.0)?;
        // EvalMod's output scale (as the circuit computes it) is SlotsToCoeffs' input scale.
        let after_cts = top - cts.len();
        let mut level = after_cts - cosine.depth();
        let mut scale_in = prime(level)?;
        for _ in 0..params.evalmod.double_angle {
            scale_in = scale_in * scale_in / prime(level)?;
            level -= 1;
        }
        // SlotsToCoeffs: S_s ... S_2 times q_0 / (2 pi Delta_0'), Delta_0' = q_0 / 2^ratio; the
        // last factor lands on the residual top's scale (up to the exact message factor).
        let mut stc_f = slots_to_coeffs_factors(n, slots, params.stc_levels, Complex64::new(1.0, 0.0));
        let mut sigmas = Vec::with_capacity(stc_f.len());
        for j in 0..stc_f.len() {
            let l = level - j;
            let target = if j + 1 == stc_f.len() { ctx.scale_at(l - 1)? } else { prime(l - 1)? };
            sigmas.push(target * prime(l)? / scale_in);
            scale_in = target;
        }
        let stc_total = 2f64.powi(params.evalmod.log_message_ratio as i32) / (2.0 * std::f64::consts::PI);
        for (f, c) in stc_f.iter_mut().zip(spread_constant(stc_total, &sigmas)) {
            f.scale(Complex64::new(c, 0.0));
        }
        if packed && !stc_f.is_empty() {
            let first = stc_f.remove(0);
            stc_f.insert(0, fold_halves(first));
        }
        let stc = stc_f.into_iter().map(|m| to_transform(ctx, m, params.stc_giant_step_cost)).collect::<Result<Vec<_>, _>>()?;
        let s0 = ctx.scale_at(0)?;
        let canonical_message_scale = s0 * Self::integer_factor(q0, &params, s0);
        Ok(Self { ctx: ctx.clone(), params, cts, stc, cosine, q0, canonical_message_scale, packed, encapsulation: None, prepared: DiagonalCache::default() })
    }

    /// The integer k that brings a level-0 scale s to about q_0 / 2^ratio.
    fn integer_factor(q0: f64, params: &BootstrapParams, scale: f64) -> f64 {
        let ratio = 2f64.powi(params.evalmod.log_message_ratio as i32);
        (q0 / (ratio * scale)).round().max(1.0)
    }

    /// Attaches the encapsulation keys (server side: public material).
    pub fn with_encapsulation_keys(mut self, keys: Option<EncapsulationKeys>) -> Self {
        self.encapsulation = keys;
        self
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
        let after_cts = top - self.cts.len();
        let stc_top = after_cts - self.params.evalmod.depth();
        for (i, lt) in self.stc.iter().enumerate() {
            rotations.extend(lt.rotations().into_iter().map(|r| (r, stc_top - i)));
        }
        if self.packed {
            rotations.push((self.params.slots() as i64, after_cts));
        }
        BootstrapRotations { rotations, conjugation_level: after_cts, relin_level: after_cts }
    }

    /// The bytes in memory of the keys [`Self::generate_keys`] makes, computed without making
    /// them: 2 polynomials per digit over Q_l P for each rotation key at its level l, the
    /// conjugation and relinearisation keys, and the two encapsulation keys.
    pub fn key_memory_estimate(&self) -> Result<usize, CkksError> {
        let params = self.ctx.params();
        let alpha = params.special_prime_count();
        let n = self.params.n();
        let bytes = |level: usize| -> Result<usize, CkksError> { Ok(2 * params.key_switch_digit_sizes(level)?.len() * (level + 1 + alpha) * n * 8) };
        let r = self.rotations();
        let mut levels: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
        for &(s, l) in &r.rotations {
            let g = rotation_galois_element(s, n);
            if g != 1 {
                let e = levels.entry(g).or_insert(l);
                *e = (*e).max(l);
            }
        }
        let mut total = bytes(r.conjugation_level)? + bytes(r.relin_level)?;
        for &l in levels.values() {
            total += bytes(l)?;
        }
        if self.params.encapsulation_weight.is_some() {
            total += bytes(0)? + bytes(self.params.top_level())?;
        }
        Ok(total)
    }

    /// The keys bootstrapping needs, each only up to the level where it is used, and (when the
    /// shape encapsulates) a fresh sparse secret's two encapsulation keys; the sparse secret
    /// itself is dropped (zeroised) here. Client side: needs the secret key.
    pub fn generate_keys(&self, sk: &SecretKey, sampler: &mut Sampler) -> Result<BootstrapKeys, CkksError> {
        let (pairs, relin_level) = self.galois_pairs();
        let galois = GaloisKeys::generate_at(sk, &pairs, sampler)?;
        let relin = RelinKey::generate_at(sk, relin_level, sampler)?;
        let encapsulation = self.generate_encapsulation_keys(sk, sampler)?;
        Ok(BootstrapKeys { evaluation: EvaluationKeys { relin: Some(Arc::new(relin)), galois: Some(Arc::new(galois)) }, encapsulation })
    }

    /// The bytes of [`Self::generate_keys`]'s keys as [`BootstrapKeys::to_bytes`] writes them
    /// (the same keys for the same sampler), made without holding the keys: each Galois key is
    /// written and dropped before the next, so a client needs about the memory of the bytes
    /// (2.5 GB at logN = 16, against 6.9 GB of keys plus their bytes).
    pub fn generate_keys_bytes(&self, sk: &SecretKey, sampler: &mut Sampler) -> Result<Vec<u8>, CkksError> {
        let params = self.ctx.params();
        if sk.params().id() != params.id() {
            return Err(CkksError::InvalidArgument { what: "the secret key was made under other parameters than the bootstrapper's".into() });
        }
        let (pairs, relin_level) = self.galois_pairs();
        let encapsulate = self.params.encapsulation_weight.is_some();
        let mut buf = reserve_header(self.key_memory_estimate()? / 2 + 64);
        buf.push(bootstrap_key_flags(true, true, encapsulate));
        put_part(&mut buf, |b| GaloisKeys::generate_serialized_into(sk, &pairs, sampler, b))?;
        put_part_bytes(&mut buf, &RelinKey::generate_at(sk, relin_level, sampler)?.to_bytes());
        if let Some(keys) = self.generate_encapsulation_keys(sk, sampler)? {
            put_part_bytes(&mut buf, &keys.dense_to_sparse.to_bytes());
            put_part_bytes(&mut buf, &keys.sparse_to_dense.to_bytes());
        }
        Ok(seal_reserved(ObjectKind::CkksBootstrapKeys, params.id(), buf))
    }

    /// (Galois element, level) of every rotation and the conjugation, and the relinearisation level.
    fn galois_pairs(&self) -> (Vec<(u64, usize)>, usize) {
        let r = self.rotations();
        let n = self.params.n();
        let mut pairs: Vec<(u64, usize)> = r.rotations.iter().map(|&(s, l)| (rotation_galois_element(s, n), l)).filter(|&(g, _)| g != 1).collect();
        pairs.push((conjugation_galois_element(n), r.conjugation_level));
        (pairs, r.relin_level)
    }

    /// A fresh sparse secret's two encapsulation keys, when the shape encapsulates (client side).
    pub fn generate_encapsulation_keys(&self, sk: &SecretKey, sampler: &mut Sampler) -> Result<Option<EncapsulationKeys>, CkksError> {
        let Some(h) = self.params.encapsulation_weight else { return Ok(None) };
        let sparse = SecretKey::generate_sparse(sk.params(), h, sampler)?;
        let dense_to_sparse = KeySwitchKey::generate_switch(sk, &sparse, 0, sampler)?;
        let sparse_to_dense = KeySwitchKey::generate_switch(&sparse, sk, self.params.top_level(), sampler)?;
        Ok(Some(EncapsulationKeys { dense_to_sparse: Arc::new(dense_to_sparse), sparse_to_dense: Arc::new(sparse_to_dense) }))
    }

    /// First stage: brings the ciphertext to level 0 at scale about q_0 / 2^ratio (times the
    /// integer nearest q_0 / (2^ratio s)), switches it to the sparse secret, raises it to the top
    /// level, switches it back to the dense secret and (sparse slots) takes the trace. Returns
    /// the raised ciphertext, read at scale q_0 (its slots hold the special FFT of t / q_0 =
    /// m' + I, trace times for sparse slots), and the exact message scale Delta_0'.
    /// Errors: `InvalidArgument` for another slot count or missing encapsulation keys,
    /// `WrongSize` unless 2 parts, and the key errors of rotations.
    pub fn mod_raise(&self, eval: &Evaluator, ct: &Ciphertext) -> Result<(Ciphertext, f64), CkksError> {
        eval.check(ct)?;
        self.mod_raise_on(eval, ct, self.encapsulation.as_ref())
    }

    /// [`Self::mod_raise`] on any [`BootstrapOps`], with these encapsulation keys.
    fn mod_raise_on<E: BootstrapOps>(&self, eval: &E, ct: &E::Ct, keys: Option<&EncapsulationKeys>) -> Result<(E::Ct, f64), CkksError> {
        if ct.log_slots() != self.params.log_slots {
            return Err(CkksError::InvalidArgument {
                what: format!("this bootstrapper is for {} slots, the ciphertext has {}", self.params.slots(), 1usize << ct.log_slots()),
            });
        }
        if ct.parts() != 2 {
            return Err(CkksError::WrongSize { expected: 2, found: ct.parts() });
        }
        let low = eval.drop_to_level(ct, 0)?;
        let k = Self::integer_factor(self.q0, &self.params, low.scale());
        let mut low = eval.mul_integer(&low, k as i64)?;
        let message_scale = low.scale() * k;
        crate::encoding::check_scale(message_scale)?;
        low.assume_scale(message_scale);
        let encapsulation = match (self.params.encapsulation_weight, keys) {
            (None, _) => None,
            (Some(_), Some(keys)) => Some(keys),
            (Some(h), None) => {
                return Err(CkksError::InvalidArgument {
                    what: format!(
                        "this shape raises under a sparse secret of weight {h}: attach the encapsulation keys with Bootstrapper::with_encapsulation_keys or pass them to bootstrap_with"
                    ),
                });
            }
        };
        if let Some(keys) = encapsulation {
            low = eval.switch_encapsulation(&low, keys, true)?;
        }
        let mut raised = eval.raise(&low)?;
        if let Some(keys) = encapsulation {
            raised = eval.switch_encapsulation(&raised, keys, false)?;
        }
        raised.assume_scale(self.q0);
        raised.assume_log_slots(self.params.log_n - 1);
        let mut step = self.params.slots();
        while step < self.params.n() / 2 {
            let rotated = eval.rotate(&raised, step as i64)?;
            raised = eval.add(&raised, &rotated)?;
            step *= 2;
        }
        raised.assume_log_slots(self.params.log_slots);
        Ok((raised, message_scale))
    }

    /// One factor of a transform (double hoisted), with its diagonals encoded over Q_l P once
    /// per (level, plaintext scale) when `keep` (inputs at the scale the circuit always produces
    /// there), and for this call only otherwise.
    #[allow(clippy::too_many_arguments)]
    fn transform_on<E: BootstrapOps>(&self, eval: &E, x: &E::Ct, id: usize, lt: &LinearTransform, target: f64, keep: bool, cache: &DiagonalCache<E::Diagonals>) -> Result<E::Ct, CkksError> {
        crate::encoding::check_scale(target)?;
        let sigma = target * self.ctx.prime_at(x.level())? as f64 / x.scale();
        let key = (id, x.level(), sigma.to_bits());
        let diags = match if keep { cache.get(&key) } else { None } {
            Some(d) => d,
            None => {
                let d = Arc::new(eval.prepare_extended(lt, x.level(), sigma)?);
                if keep {
                    cache.insert(key, d.clone());
                }
                d
            }
        };
        eval.apply_extended(x, lt, &diags, sigma, target)
    }

    fn set_log_slots<Ct: CiphertextMeta>(&self, x: &mut Ct, slots: usize) -> Result<(), CkksError> {
        x.assume_log_slots(crate::encoding::check_slots(&self.ctx, slots)?);
        Ok(())
    }

    /// Second stage: the slots of the output hold (m' + I) / (2B) per coefficient (the real part
    /// of slot j is coefficient bitrev(j), the imaginary part coefficient bitrev(j) + n/2 for
    /// full slots), each factor landing on the size of the next level's prime.
    pub fn coeffs_to_slots(&self, eval: &Evaluator, ct: &Ciphertext) -> Result<Ciphertext, CkksError> {
        self.coeffs_to_slots_on(eval, ct, &self.prepared)
    }

    fn coeffs_to_slots_on<E: BootstrapOps>(&self, eval: &E, ct: &E::Ct, cache: &DiagonalCache<E::Diagonals>) -> Result<E::Ct, CkksError> {
        let mut x = eval.duplicate(ct)?;
        for (i, lt) in self.cts.iter().enumerate() {
            if lt.slots() != 1usize << x.log_slots() {
                // The packed last factor reads the s-slot message as a 2s-slot one, [u, u].
                self.set_log_slots(&mut x, lt.slots())?;
            }
            let target = self.ctx.prime_at(x.level() - 1)? as f64;
            x = self.transform_on(eval, &x, i, lt, target, true, cache)?;
        }
        Ok(x)
    }

    /// Third stage: splits the slots into real and imaginary parts (x + conj x and
    /// -i (x - conj x)), evaluates the cosine and the double angles on each, and recombines:
    /// every slot holds sin(2 pi (m' + I)) ~ 2 pi m' per coefficient.
    pub fn eval_mod(&self, eval: &Evaluator, x: &Ciphertext) -> Result<Ciphertext, CkksError> {
        self.eval_mod_on(eval, x)
    }

    fn eval_mod_on<E: BootstrapOps>(&self, eval: &E, x: &E::Ct) -> Result<E::Ct, CkksError> {
        let conj = eval.conjugate(x)?;
        let re = eval.add(x, &conj)?;
        let diff = eval.sub(x, &conj)?;
        let im = eval.mul_const_scaled(&diff, Complex64::new(0.0, -1.0), 1.0)?;
        if self.packed {
            // [2 Re y, 0] + rot_s([2 Im y, 0]) = [2 Re y, 2 Im y] on 2s slots: one EvalMod.
            let moved = eval.rotate(&im, self.params.slots() as i64)?;
            return self.cosine_chain(eval, &eval.add(&re, &moved)?);
        }
        // The two halves run side by side: their kernels alone leave cores idle (single-limb
        // steps, allocation), and the two chains share nothing.
        let (re, im) = rayon::join(|| self.cosine_chain(eval, &re), || self.cosine_chain(eval, &im));
        let im = eval.mul_const_scaled(&im?, Complex64::new(0.0, 1.0), 1.0)?;
        eval.add(&re?, &im)
    }

    /// The cosine interpolant and the double angles on one real-valued ciphertext.
    fn cosine_chain<E: BootstrapOps>(&self, eval: &E, part: &E::Ct) -> Result<E::Ct, CkksError> {
        let level = part.level() - self.cosine.depth();
        let mut y = crate::polynomial::evaluate_chebyshev_to_scale(eval, part, &self.cosine, self.ctx.prime_at(level)? as f64)?;
        for _ in 0..self.params.evalmod.double_angle {
            let sq = eval.rescale(&eval.mul_relin(&y, &y)?)?;
            y = eval.add_const(&eval.mul_integer(&sq, 2)?, Complex64::new(-1.0, 0.0))?;
        }
        Ok(y)
    }

    /// The factor c = 2^ratio Delta' / q_0 by which SlotsToCoeffs' constant 2^ratio / 2pi
    /// differs from the exact one for the message scale Delta'.
    pub fn message_factor(&self, message_scale: f64) -> f64 {
        2f64.powi(self.params.evalmod.log_message_ratio as i32) * message_scale / self.q0
    }

    /// Last stage: the forward special FFT on the bit-reversed coefficients, its last factor
    /// absorbing the message factor so that the output is m at exactly the canonical scale of
    /// the residual top.
    pub fn slots_to_coeffs(&self, eval: &Evaluator, v: &Ciphertext, message_scale: f64) -> Result<Ciphertext, CkksError> {
        self.slots_to_coeffs_on(eval, v, message_scale, &self.prepared)
    }

    fn slots_to_coeffs_on<E: BootstrapOps>(&self, eval: &E, v: &E::Ct, message_scale: f64, cache: &DiagonalCache<E::Diagonals>) -> Result<E::Ct, CkksError> {
        let c = self.message_factor(message_scale);
        let canonical = message_scale == self.canonical_message_scale;
        let count = self.stc.len();
        let mut v = eval.duplicate(v)?;
        for (i, lt) in self.stc.iter().enumerate() {
            if lt.slots() != 1usize << v.log_slots() {
                // After the packed first factor the message is s-periodic: an s-slot one.
                self.set_log_slots(&mut v, lt.slots())?;
            }
            let last = i + 1 == count;
            let target = if last { self.ctx.scale_at(v.level() - 1)? / c } else { self.ctx.prime_at(v.level() - 1)? as f64 };
            v = self.transform_on(eval, &v, 1000 + i, lt, target, !last || canonical, cache)?;
        }
        let residual = self.ctx.scale_at(v.level())?;
        crate::encoding::check_scale(residual)?;
        v.assume_scale(residual);
        self.set_log_slots(&mut v, self.params.slots())?;
        Ok(v)
    }

    /// Encodes every transform's diagonals now, as the first bootstrap would (about 3 s of
    /// encoding at logN = 16, 3.1 GB kept), by bootstrapping a trivial encryption of zero at the
    /// canonical scale of level 0. Needs the same keys as [`Self::bootstrap`].
    pub fn prepare(&self, eval: &Evaluator) -> Result<(), CkksError> {
        self.prepare_with(eval, self.encapsulation.as_ref())
    }

    /// [`Self::prepare`] with these encapsulation keys (a server's first session), unless the
    /// diagonals are encoded already.
    pub fn prepare_with(&self, eval: &Evaluator, keys: Option<&EncapsulationKeys>) -> Result<(), CkksError> {
        if self.prepared_diagonal_bytes() > 0 {
            return Ok(());
        }
        let params = self.ctx.params();
        let zero = Poly::<lycaon_math::Ntt>::zero(params.q_at(0)?);
        let inner = lycaon_rlwe::Ciphertext::from_parts(params, vec![zero.clone(), zero])?;
        let ct = Ciphertext::from_inner(&self.ctx, inner, self.ctx.scale_at(0)?, self.params.slots())?;
        self.bootstrap_with(eval, &ct, keys).map(|_| ())
    }

    /// Refreshes a ciphertext of the shape's slot count (at any level, 2 parts) to the top
    /// residual level, at its canonical scale. Needs the evaluation keys of
    /// [`Self::generate_keys`] in `eval` and, for an encapsulating shape, its encapsulation keys
    /// attached with [`Self::with_encapsulation_keys`]. Errors as the stages.
    pub fn bootstrap(&self, eval: &Evaluator, ct: &Ciphertext) -> Result<Ciphertext, CkksError> {
        self.bootstrap_with(eval, ct, self.encapsulation.as_ref())
    }

    /// [`Self::bootstrap`] with these encapsulation keys in place of the attached ones: one
    /// bootstrapper (its transforms and the diagonals it keeps, 3.1 GB at logN = 16) serves the
    /// sessions of many clients, each with its own keys.
    pub fn bootstrap_with(&self, eval: &Evaluator, ct: &Ciphertext, keys: Option<&EncapsulationKeys>) -> Result<Ciphertext, CkksError> {
        eval.check(ct)?;
        self.bootstrap_on(eval, ct, keys, &self.prepared)
    }

    /// [`Self::bootstrap_with`] on any [`BootstrapOps`] (a [`crate::ResidentEvaluator`] keeps
    /// the ciphertext, keys and diagonals in a device's memory throughout), with the transforms'
    /// diagonals kept in `cache` as that evaluator holds them. A resident evaluator switches
    /// with the encapsulation keys it was given ([`crate::ResidentEvaluator::attach_encapsulation_keys`]).
    /// The result equals [`Self::bootstrap_with`]'s bit for bit.
    pub fn bootstrap_on<E: BootstrapOps>(&self, eval: &E, ct: &E::Ct, keys: Option<&EncapsulationKeys>, cache: &DiagonalCache<E::Diagonals>) -> Result<E::Ct, CkksError> {
        let (raised, message_scale) = self.mod_raise_on(eval, ct, keys)?;
        let x = self.coeffs_to_slots_on(eval, &raised, cache)?;
        let v = self.eval_mod_on(eval, &x)?;
        self.slots_to_coeffs_on(eval, &v, message_scale, cache)
    }

    /// Bytes of the diagonals encoded so far (over Q_l P, kept for later bootstraps).
    pub fn prepared_diagonal_bytes(&self) -> usize {
        self.prepared.0.lock().map(|m| m.values().flat_map(|d| d.values()).map(|p| 8 * p.data().len()).sum()).unwrap_or(0)
    }

    /// The CoeffsToSlots factors in the order they are applied.
    pub fn coeffs_to_slots_transforms(&self) -> &[LinearTransform] {
        &self.cts
    }

    /// The SlotsToCoeffs factors in the order they are applied.
    pub fn slots_to_coeffs_transforms(&self) -> &[LinearTransform] {
        &self.stc
    }

    /// CoeffsToSlots in f64 on decoded slot values (a reference for tests).
    pub fn coeffs_to_slots_plain(&self, z: &[Complex64]) -> Vec<Complex64> {
        self.cts.iter().fold(z.to_vec(), |acc, lt| lt.apply_plain(&acc))
    }

    /// EvalMod in f64 on decoded slot values, as the circuit computes it (cosine interpolant and
    /// double angles on 2 Re z and 2 Im z).
    pub fn eval_mod_plain(&self, z: &[Complex64]) -> Vec<Complex64> {
        let coeffs = EvalMod::new(self.params.evalmod).cos_coeffs;
        let f = |t: f64| {
            let mut y = chebyshev_evaluate(&coeffs, t);
            for _ in 0..self.params.evalmod.double_angle {
                y = 2.0 * y * y - 1.0;
            }
            y
        };
        if self.packed {
            let s = self.params.slots();
            let re = z[..s].iter().map(|c| Complex64::new(f(2.0 * c.re), 0.0));
            return re.chain(z[..s].iter().map(|c| Complex64::new(f(2.0 * c.im), 0.0))).collect();
        }
        z.iter().map(|c| Complex64::new(f(2.0 * c.re), f(2.0 * c.im))).collect()
    }

    /// SlotsToCoeffs in f64 (without the message factor).
    pub fn slots_to_coeffs_plain(&self, v: &[Complex64]) -> Vec<Complex64> {
        self.stc.iter().fold(v.to_vec(), |acc, lt| lt.apply_plain(&acc))
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
        let boot = Bootstrapper::new(&ctx, bp.clone()).unwrap();
        let keys = boot.key_memory_estimate().unwrap() as f64 / 1e9;
        assert!(keys < 8.5, "keys {keys:.2} GB: more than half of Lattigo's 17 GB");
        // The precision fix: every CoeffsToSlots factor's diagonals, encoded at its plaintext
        // scale sigma, are integers of about 2^47 or more (rounding them costs 2^-40 relative at
        // n = 2^16). Folding 1/(2 B s) into the first factor gave 2^32 there.
        let top = bp.top_level();
        let mut scale_in = ctx.prime_at(0).unwrap() as f64;
        for (i, lt) in boot.coeffs_to_slots_transforms().iter().enumerate() {
            let target = ctx.prime_at(top - i - 1).unwrap() as f64;
            let sigma = target * ctx.prime_at(top - i).unwrap() as f64 / scale_in;
            scale_in = target;
            let (sum, count) = lt.diagonals().values().flatten().fold((0.0, 0usize), |(s, c), d| (s + d.norm_sqr(), c + 1));
            let size = (sigma * (sum / count as f64).sqrt()).log2();
            eprintln!("CoeffsToSlots factor {i}: sigma 2^{:.1}, encoded diagonals of 2^{size:.1}", sigma.log2());
            assert!(size > 46.0, "factor {i}: diagonals of 2^{size:.1}");
        }
    }

    #[test]
    fn spread_constant_equalises_the_encoded_sizes() {
        let sigmas = [2f64.powi(52), 2f64.powi(56), 2f64.powi(56), 2f64.powi(60)];
        let c = spread_constant(2f64.powi(-20), &sigmas);
        assert!((c.iter().product::<f64>().log2() + 20.0).abs() < 1e-9);
        for (ci, si) in c.iter().zip(&sigmas) {
            assert!(((ci * si).log2() - 51.0).abs() < 1e-9, "2^{}", (ci * si).log2());
        }
    }
}
