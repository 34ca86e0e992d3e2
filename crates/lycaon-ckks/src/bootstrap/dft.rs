//! The special FFT of the canonical embedding as a product of sparse diagonal matrices
//! (Cheon-Han-Hhan 2019; Han-Ki 2020; Bossuat-Mouchet-Troncoso-Pastoriza-Hubaux 2021): each
//! radix-2 butterfly stage is a matrix with three cyclic diagonals (offsets 0 and +-h), and
//! grouping consecutive stages into one factor trades levels for diagonals (k stages give at
//! most 2^(k+1) - 1 diagonals).
//!
//! With the encoder's convention (slot j of an s-slot message is m(zeta^(5^j)), see
//! `context::SpecialFft`), forward(v) = S_s ... S_4 S_2 (bit_reverse(v)) and
//! inverse(z) = (1/s) bit_reverse(I_2 I_4 ... I_s z). Bootstrapping never applies the bit
//! reversal: CoeffsToSlots evaluates (1/s) I_2 ... I_s and leaves the coefficients in
//! bit-reversed slot order, EvalMod works slot by slot, and SlotsToCoeffs evaluates
//! S_s ... S_2 on the bit-reversed input, which is exactly what the forward transform needs.

use std::collections::BTreeMap;

use num_complex::Complex64;

/// A linear map on C^slots, x -> sum_r diag_r (*) rot(x, r), where rot(x, r)_j = x_{(j + r) mod
/// slots} is a left rotation by r (the homomorphic `rotate(ct, r)` on an s-slot ciphertext).
#[derive(Clone, Debug, PartialEq)]
pub struct DiagonalMatrix {
    pub slots: usize,
    /// Rotation r in 0..slots -> its diagonal (slots values).
    pub diagonals: BTreeMap<usize, Vec<Complex64>>,
}

impl DiagonalMatrix {
    pub fn identity(slots: usize) -> Self {
        Self { slots, diagonals: BTreeMap::from([(0, vec![Complex64::new(1.0, 0.0); slots])]) }
    }

    /// y = M x.
    pub fn apply(&self, x: &[Complex64]) -> Vec<Complex64> {
        let s = self.slots;
        let mut y = vec![Complex64::new(0.0, 0.0); s];
        for (&r, d) in &self.diagonals {
            for j in 0..s {
                y[j] += d[j] * x[(j + r) % s];
            }
        }
        y
    }

    /// self o other (apply `other` first): sum_{a,b} d_a (*) rot(e_b, a) (*) rot(x, a + b).
    pub fn compose(&self, other: &DiagonalMatrix) -> DiagonalMatrix {
        let s = self.slots;
        let mut out: BTreeMap<usize, Vec<Complex64>> = BTreeMap::new();
        for (&a, da) in &self.diagonals {
            for (&b, eb) in &other.diagonals {
                let r = (a + b) % s;
                let acc = out.entry(r).or_insert_with(|| vec![Complex64::new(0.0, 0.0); s]);
                for j in 0..s {
                    acc[j] += da[j] * eb[(j + a) % s];
                }
            }
        }
        // Drop diagonals that cancelled exactly (none do for butterflies, but keep it tidy).
        out.retain(|_, d| d.iter().any(|c| c.norm_sqr() > 0.0));
        DiagonalMatrix { slots: s, diagonals: out }
    }

    /// Multiplies every entry by c.
    pub fn scale(&mut self, c: Complex64) {
        self.diagonals.values_mut().for_each(|d| d.iter_mut().for_each(|x| *x *= c));
    }

    /// Multiplies row j by w_j (diag(w) o M).
    pub fn scale_rows(&mut self, w: &[Complex64]) {
        self.diagonals.values_mut().for_each(|d| d.iter_mut().zip(w).for_each(|(x, &wj)| *x *= wj));
    }

    /// The rotations this matrix needs.
    pub fn rotations(&self) -> Vec<usize> {
        self.diagonals.keys().copied().collect()
    }
}

/// Roots and the 5^j table of the special FFT at ring degree n (as `context::SpecialFft`).
struct Roots {
    m: usize,
    rot_group: Vec<usize>,
}

impl Roots {
    fn new(n: usize) -> Self {
        let m = 2 * n;
        let mut rot_group = Vec::with_capacity(n / 2);
        let mut g = 1usize;
        for _ in 0..n / 2 {
            rot_group.push(g);
            g = g * 5 % m;
        }
        Self { m, rot_group }
    }

    fn ksi(&self, k: usize) -> Complex64 {
        Complex64::from_polar(1.0, 2.0 * std::f64::consts::PI * k as f64 / self.m as f64)
    }
}

/// Butterfly stage of the forward transform at block length `len` on `slots` values.
fn forward_stage(roots: &Roots, slots: usize, len: usize) -> DiagonalMatrix {
    let h = len / 2;
    let lenq = 4 * len;
    let step = roots.m / lenq;
    let zero = Complex64::new(0.0, 0.0);
    let one = Complex64::new(1.0, 0.0);
    let (mut d0, mut dp, mut dm) = (vec![zero; slots], vec![zero; slots], vec![zero; slots]);
    for p in 0..slots {
        let r = p % len;
        if r < h {
            let w = roots.ksi((roots.rot_group[r] % lenq) * step);
            d0[p] = one;
            dp[p] = w;
        } else {
            let w = roots.ksi((roots.rot_group[r - h] % lenq) * step);
            d0[p] = -w;
            dm[p] = one;
        }
    }
    stage_matrix(slots, h, d0, dp, dm)
}

/// Butterfly stage of the inverse transform at block length `len` (without the 1/s).
fn inverse_stage(roots: &Roots, slots: usize, len: usize) -> DiagonalMatrix {
    let h = len / 2;
    let lenq = 4 * len;
    let step = roots.m / lenq;
    let zero = Complex64::new(0.0, 0.0);
    let one = Complex64::new(1.0, 0.0);
    let (mut d0, mut dp, mut dm) = (vec![zero; slots], vec![zero; slots], vec![zero; slots]);
    for p in 0..slots {
        let r = p % len;
        if r < h {
            d0[p] = one;
            dp[p] = one;
        } else {
            let w = roots.ksi((lenq - roots.rot_group[r - h] % lenq) * step);
            d0[p] = -w;
            dm[p] = w;
        }
    }
    stage_matrix(slots, h, d0, dp, dm)
}

fn stage_matrix(slots: usize, h: usize, d0: Vec<Complex64>, dp: Vec<Complex64>, dm: Vec<Complex64>) -> DiagonalMatrix {
    let mut diagonals = BTreeMap::new();
    diagonals.insert(0, d0);
    if h == slots - h {
        // slots = 2: +h and -h are the same rotation.
        let sum = dp.iter().zip(&dm).map(|(a, b)| a + b).collect();
        diagonals.insert(h, sum);
    } else {
        diagonals.insert(h % slots, dp);
        diagonals.insert(slots - h, dm);
    }
    DiagonalMatrix { slots, diagonals }
}

/// Splits `count` stages into `groups` contiguous groups, sizes as equal as possible, larger
/// groups first.
pub fn group_sizes(count: usize, groups: usize) -> Vec<usize> {
    let groups = groups.clamp(1, count.max(1));
    let (q, r) = (count / groups, count % groups);
    (0..groups).map(|i| q + usize::from(i < r)).filter(|&g| g > 0).collect()
}

/// CoeffsToSlots factors for `slots` slots at ring degree n, in the order they are applied,
/// grouped into `levels` factors (one level each): their product is (1/s) I_2 ... I_s, i.e.
/// z -> bit_reverse(inverse special FFT of z). `scale` multiplies the whole transform (folded
/// into the first factor).
pub fn coeffs_to_slots_factors(n: usize, slots: usize, levels: usize, scale: Complex64) -> Vec<DiagonalMatrix> {
    let roots = Roots::new(n);
    // Stages in application order: len = s, s/2, ..., 2.
    let mut stages = Vec::new();
    let mut len = slots;
    while len >= 2 {
        stages.push(inverse_stage(&roots, slots, len));
        len /= 2;
    }
    let mut factors = group(stages, slots, levels);
    if let Some(first) = factors.first_mut() {
        first.scale(scale / slots as f64);
    }
    factors
}

/// SlotsToCoeffs factors in application order, grouped into `levels` factors: their product is
/// S_s ... S_2, mapping bit_reverse(v) to the forward special FFT of v; `scale` is folded into
/// the first factor.
pub fn slots_to_coeffs_factors(n: usize, slots: usize, levels: usize, scale: Complex64) -> Vec<DiagonalMatrix> {
    let roots = Roots::new(n);
    let mut stages = Vec::new();
    let mut len = 2;
    while len <= slots {
        stages.push(forward_stage(&roots, slots, len));
        len *= 2;
    }
    let mut factors = group(stages, slots, levels);
    if let Some(first) = factors.first_mut() {
        first.scale(scale);
    }
    factors
}

/// Multiplies consecutive stages (given in application order) into `levels` factors.
fn group(stages: Vec<DiagonalMatrix>, slots: usize, levels: usize) -> Vec<DiagonalMatrix> {
    if stages.is_empty() {
        return vec![DiagonalMatrix::identity(slots)];
    }
    let mut out = Vec::new();
    let mut it = stages.into_iter();
    for size in group_sizes(it.len(), levels) {
        let mut acc = DiagonalMatrix::identity(slots);
        for stage in it.by_ref().take(size) {
            acc = stage.compose(&acc);
        }
        out.push(acc);
    }
    out
}

/// Bit reversal of the indices (an involution), as the encoder's FFT applies it.
pub fn bit_reverse_permute(values: &mut [Complex64]) {
    let n = values.len();
    let bits = n.trailing_zeros();
    for i in 0..n {
        let j = if bits == 0 { 0 } else { i.reverse_bits() >> (usize::BITS - bits) };
        if i < j {
            values.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CkksContext;
    use lycaon_rlwe::{Parameters, ParametersLiteral, Security};
    use std::sync::Arc;

    /// The encoder's FFT at ring degree n (through a toy context).
    struct SpecialFftForTests(Arc<CkksContext>);

    impl SpecialFftForTests {
        fn new(n: usize) -> Self {
            let mut lit = ParametersLiteral::ckks_from_bits(n, &[50], &[]).unwrap();
            lit.security = Security::InsecureTestOnly;
            Self(CkksContext::new(&Parameters::new(lit).unwrap(), 2f64.powi(30)).unwrap())
        }
        fn forward(&self, v: &mut [Complex64]) {
            self.0.fft.forward(v)
        }
        fn inverse(&self, v: &mut [Complex64]) {
            self.0.fft.inverse(v)
        }
    }

    fn random_vector(len: usize, seed: u64) -> Vec<Complex64> {
        let mut x = seed | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        };
        (0..len).map(|_| Complex64::new(next(), next())).collect()
    }

    fn apply_all(factors: &[DiagonalMatrix], x: &[Complex64]) -> Vec<Complex64> {
        factors.iter().fold(x.to_vec(), |acc, f| f.apply(&acc))
    }

    #[test]
    fn grouped_factors_multiply_to_the_encoders_special_fft() {
        for (n, slots) in [(64usize, 32usize), (64, 8), (256, 128), (256, 2), (1024, 64)] {
            let fft = SpecialFftForTests::new(n);
            for levels in [1usize, 2, 3, 4] {
                let v = random_vector(slots, 7 + slots as u64);
                // SlotsToCoeffs on bit_reverse(v) = forward(v).
                let mut want = v.clone();
                fft.forward(&mut want);
                let mut br = v.clone();
                bit_reverse_permute(&mut br);
                let stc = slots_to_coeffs_factors(n, slots, levels, Complex64::new(1.0, 0.0));
                assert_eq!(stc.len(), group_sizes(slots.trailing_zeros() as usize, levels).len().max(1));
                let got = apply_all(&stc, &br);
                let err = got.iter().zip(&want).map(|(a, b)| (a - b).norm()).fold(0.0, f64::max);
                assert!(err < 1e-10 * slots as f64, "n={n} s={slots} levels={levels} StC err {err}");
                // CoeffsToSlots of z = bit_reverse(inverse(z)).
                let z = random_vector(slots, 99);
                let mut want = z.clone();
                fft.inverse(&mut want);
                bit_reverse_permute(&mut want);
                let cts = coeffs_to_slots_factors(n, slots, levels, Complex64::new(1.0, 0.0));
                let got = apply_all(&cts, &z);
                let err = got.iter().zip(&want).map(|(a, b)| (a - b).norm()).fold(0.0, f64::max);
                assert!(err < 1e-12, "n={n} s={slots} levels={levels} CtS err {err}");
                // k stages in a group give at most 2^(k+1) - 1 diagonals.
                for (f, k) in cts.iter().zip(group_sizes(slots.trailing_zeros() as usize, levels)) {
                    assert!(f.diagonals.len() < 1 << (k + 1), "{} diagonals for {k} stages", f.diagonals.len());
                }
            }
        }
    }

    #[test]
    fn full_slot_transform_at_logn_16_in_four_levels() {
        // The logN = 16 bootstrapping shape: 15 stages in 4 groups (4, 4, 4, 3 stages).
        let n = 1 << 16;
        let slots = n / 2;
        let cts = coeffs_to_slots_factors(n, slots, 4, Complex64::new(1.0, 0.0));
        let counts: Vec<usize> = cts.iter().map(|f| f.diagonals.len()).collect();
        // The first group holds the s/2 stage, whose +h and -h diagonals coincide.
        assert_eq!(counts, vec![16, 31, 31, 15]);
        let fft = SpecialFftForTests::new(n);
        let z = random_vector(slots, 5);
        let mut want = z.clone();
        fft.inverse(&mut want);
        bit_reverse_permute(&mut want);
        let got = apply_all(&cts, &z);
        let err = got.iter().zip(&want).map(|(a, b)| (a - b).norm()).fold(0.0, f64::max);
        assert!(err < 1e-12, "err {err}");
    }
}
