//! Analytical noise model of BFV: per-coefficient variance (practical) and infinity-norm bound (worst case) of the noise, and the budgets they give (implementation_notes/bfv-noise.md).
//!
//! A ciphertext at level l carries the phase c_0 + c_1 s = Q_l m / t + v (mod Q_l) with m centred
//! and v real; the measured invariant noise budget is log2(Q_l) - 1 - log2(t max_k |v_k|).
//! Lycaon encodes round(Q_l m / t) exactly, so v is linear in the inputs' noises under additions,
//! scalar and plaintext products and automorphisms (no message-dependent term); key switching and
//! modulus switching add rounding terms. Every [`NoiseEstimate`] carries both forms:
//!
//! - `variance`: Var(v_k) under the usual independence heuristic (coefficients of independent
//!   noises are independent, products sum n independent terms);
//! - `bound`: a bound on ||v||_inf that holds for every run (the discrete Gaussian is cut at
//!   [`lycaon_math::ERROR_BOUND`], secrets are ternary, products with a polynomial of coefficients
//!   bounded in l1-norm by L grow the bound by L).
//!
//! The practical budget at a decryption-failure probability p treats each output coefficient as a
//! centred Gaussian and union-bounds over all output coefficients ([`NoiseProfile`]).

use lycaon_math::{ERROR_BOUND, ERROR_STD_DEV};

/// Noise v of one ciphertext: variance per coefficient, worst-case bound on ||v||_inf, and the
/// modulus it lives under.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NoiseEstimate {
    pub variance: f64,
    pub bound: f64,
    pub log2_q: f64,
}

/// Second moment and largest absolute value of a random integer multiplier (a scalar weight, or
/// one coefficient of a plaintext).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScalarStats {
    pub mean_square: f64,
    pub max_abs: f64,
}

impl ScalarStats {
    /// A fixed scalar c.
    pub fn constant(c: f64) -> Self {
        Self { mean_square: c * c, max_abs: c.abs() }
    }

    /// Integers uniform in [-bound, bound], reduced centred modulo t: E[w^2] = bound (bound + 1) / 3;
    /// once bound reaches t/2 they are uniform modulo t.
    pub fn uniform(bound: u64, t: f64) -> Self {
        let b = bound as f64;
        if b >= (t / 2.0).floor() {
            return Self::uniform_mod_t(t);
        }
        Self { mean_square: b * (b + 1.0) / 3.0, max_abs: b }
    }

    /// Uniform residues modulo t, centred: E = (t^2 - 1) / 12, at most floor(t / 2).
    pub fn uniform_mod_t(t: f64) -> Self {
        Self { mean_square: (t * t - 1.0) / 12.0, max_abs: (t / 2.0).floor() }
    }

    /// A sum of `terms` independent multipliers with these statistics (each of either sign),
    /// reduced centred modulo t.
    pub fn sum_of(self, terms: f64, t: f64) -> Self {
        let s = Self { mean_square: self.mean_square * terms, max_abs: self.max_abs * terms };
        if s.max_abs >= (t / 2.0).floor() {
            let u = Self::uniform_mod_t(t);
            return Self { mean_square: s.mean_square.min(u.mean_square), max_abs: u.max_abs };
        }
        s
    }
}

/// Norms of a plaintext polynomial p as a multiplier of noise: E[||p||_2^2] (the variance of each
/// coefficient of p v is E||p||^2 Var(v)) and a bound on ||p||_1 (||p v||_inf <= ||p||_1 ||v||_inf).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlainNorms {
    pub square: f64,
    pub l1: f64,
}

impl PlainNorms {
    /// `support` coefficients, each with the statistics `coeff`, the rest zero.
    pub fn coefficients(support: f64, coeff: ScalarStats) -> Self {
        Self { square: support * coeff.mean_square, l1: support * coeff.max_abs }
    }

    /// A batch-encoded plaintext whose `support` non-zero coefficients are uniform modulo t.
    pub fn uniform_mod_t(support: f64, t: f64) -> Self {
        Self::coefficients(support, ScalarStats::uniform_mod_t(t))
    }

    /// Exact norms of a known polynomial (coefficients centred modulo t).
    pub fn of_centred(coeffs: impl IntoIterator<Item = i64>) -> Self {
        coeffs.into_iter().fold(Self { square: 0.0, l1: 0.0 }, |acc, c| Self { square: acc.square + (c as f64).powi(2), l1: acc.l1 + (c as f64).abs() })
    }
}

/// Parameters the model needs; everything is public.
#[derive(Clone, Debug)]
pub struct NoiseModel {
    pub n: f64,
    pub t: f64,
    /// log2 of each ciphertext prime, q_0 first.
    pub log2_primes: Vec<f64>,
    /// log2 of P (product of special primes).
    pub log2_p: f64,
    /// Number of special primes.
    pub special_primes: usize,
    /// Primes per key-switching digit at the top level.
    pub digit_size: usize,
}

const SIGMA2: f64 = ERROR_STD_DEV * ERROR_STD_DEV;
/// The sampler's cut of the discrete Gaussian (6 sigma): no error coefficient exceeds it.
const B_ERR: f64 = ERROR_BOUND as f64;
/// Variance of a uniform ternary secret coefficient.
const VAR_S: f64 = 2.0 / 3.0;

/// The default target decryption-failure probability, 2^-40.
pub const DEFAULT_FAILURE_PROBABILITY: f64 = 9.094947017729282e-13;

impl NoiseModel {
    pub fn from_params(params: &lycaon_rlwe::Parameters) -> Option<Self> {
        let t = params.plaintext_modulus()?.value() as f64;
        let lit = params.literal();
        Some(Self {
            n: params.n() as f64,
            t,
            log2_primes: lit.ciphertext_moduli.iter().map(|&q| (q as f64).log2()).collect(),
            log2_p: lit.special_moduli.iter().map(|&p| (p as f64).log2()).sum(),
            special_primes: lit.special_moduli.len(),
            digit_size: lit.ciphertext_moduli.len().div_ceil(lit.key_switch_digits),
        })
    }

    /// log2(Q_level).
    pub fn log2_q(&self, level: usize) -> f64 {
        self.log2_primes[..=level].iter().sum()
    }

    /// The highest level.
    pub fn max_level(&self) -> usize {
        self.log2_primes.len() - 1
    }

    /// A noiseless ciphertext (the identity of [`NoiseModel::add`]).
    pub fn zero(&self, level: usize) -> NoiseEstimate {
        NoiseEstimate { variance: 0.0, bound: 0.0, log2_q: self.log2_q(level) }
    }

    /// Fresh symmetric encryption: e plus the rounding of Q m / t (|.| <= 1/2).
    pub fn fresh_symmetric(&self, level: usize) -> NoiseEstimate {
        NoiseEstimate { variance: SIGMA2 + 1.0 / 12.0, bound: B_ERR + 0.5, log2_q: self.log2_q(level) }
    }

    /// Fresh public-key encryption: e_0 + e u + e_1 s (u, s ternary) plus the rounding.
    pub fn fresh_public(&self, level: usize) -> NoiseEstimate {
        NoiseEstimate { variance: SIGMA2 * (1.0 + 2.0 * self.n * VAR_S) + 1.0 / 12.0, bound: B_ERR * (1.0 + 2.0 * self.n) + 0.5, log2_q: self.log2_q(level) }
    }

    pub fn add(&self, a: NoiseEstimate, b: NoiseEstimate) -> NoiseEstimate {
        NoiseEstimate { variance: a.variance + b.variance, bound: a.bound + b.bound, log2_q: a.log2_q }
    }

    /// Multiplication by a fixed scalar c (taken centred modulo t).
    pub fn mul_scalar(&self, a: NoiseEstimate, c: f64) -> NoiseEstimate {
        self.mul_random_scalar(a, ScalarStats::constant(c))
    }

    /// Multiplication by a scalar drawn independently of the noise (a weight).
    pub fn mul_random_scalar(&self, a: NoiseEstimate, c: ScalarStats) -> NoiseEstimate {
        NoiseEstimate { variance: a.variance * c.mean_square, bound: a.bound * c.max_abs, log2_q: a.log2_q }
    }

    /// Multiplication by a plaintext polynomial with the given norms.
    pub fn mul_plain(&self, a: NoiseEstimate, p: PlainNorms) -> NoiseEstimate {
        NoiseEstimate { variance: a.variance * p.square, bound: a.bound * p.l1, log2_q: a.log2_q }
    }

    /// Multiplication by a plaintext with all n coefficients uniform modulo t (centred).
    pub fn mul_plain_uniform(&self, a: NoiseEstimate) -> NoiseEstimate {
        self.mul_plain(a, PlainNorms::uniform_mod_t(self.n, self.t))
    }

    /// Noise added by one hybrid key switch at a level: sum_j d_j e_j / P plus the ModDown
    /// rounding r_0 + r_1 s. d_j (ModUp without centring) is a sum of alpha_j residues uniform in
    /// [0, Q_j), so 0 <= d_j < alpha_j Q_j and E[d_j^2] = Q_j^2 (alpha_j / 12 + alpha_j^2 / 4);
    /// each r_i is minus a sum of k fractions in [0, 1) (k special primes, fast conversion
    /// without centring), so |r_i| < k and E[r_i^2] = k / 12 + k^2 / 4.
    pub fn key_switch(&self, level: usize) -> NoiseEstimate {
        let count = level + 1;
        let (mut variance, mut bound) = (0.0, 0.0);
        let mut start = 0;
        while start < count {
            let end = (start + self.digit_size).min(count);
            let alpha = (end - start) as f64;
            let ratio = (self.log2_primes[start..end].iter().sum::<f64>() - self.log2_p).exp2();
            variance += self.n * SIGMA2 * ratio * ratio * (alpha / 12.0 + alpha * alpha / 4.0);
            bound += self.n * alpha * ratio * B_ERR;
            start = end;
        }
        let k = self.special_primes.max(1) as f64;
        variance += (k / 12.0 + k * k / 4.0) * (1.0 + self.n * VAR_S);
        bound += k * (1.0 + self.n);
        NoiseEstimate { variance, bound, log2_q: self.log2_q(level) }
    }

    /// Rotation or row swap at `level`: the automorphism permutes coefficients (up to sign), so
    /// both forms are kept; the key switch adds to them.
    pub fn rotate(&self, a: NoiseEstimate, level: usize) -> NoiseEstimate {
        self.add(a, self.key_switch(level))
    }

    /// Ciphertext product (three parts): v = m_1 v_2 + m_2 v_1 + t (v_1 k_2 + v_2 k_1) + rounding,
    /// where k_i = (c_0 + c_1 s - Q m / t - v) / Q has variance n Var(s) / 12 + 1 / 12 and
    /// |k_i| <= (1 + n) / 2 + 1 (c_0, c_1 centred modulo Q).
    pub fn multiply(&self, a: NoiseEstimate, b: NoiseEstimate) -> NoiseEstimate {
        let (n, t) = (self.n, self.t);
        let var_k = n * VAR_S / 12.0 + 1.0 / 12.0;
        let sum = a.variance + b.variance;
        let message_terms = n * t * t / 12.0 * sum;
        let k_terms = t * t * n * var_k * sum;
        let rounding = (1.0 + n * VAR_S + n * n * VAR_S * VAR_S) / 12.0;
        let k_max = (1.0 + n) / 2.0 + 1.0;
        let bound = n * (t / 2.0) * (a.bound + b.bound) + t * n * k_max * (a.bound + b.bound) + (1.0 + n + n * n) / 2.0;
        NoiseEstimate { variance: message_terms + k_terms + rounding, bound, log2_q: a.log2_q }
    }

    /// Relinearisation adds one key switch.
    pub fn relinearize(&self, a: NoiseEstimate, level: usize) -> NoiseEstimate {
        self.rotate(a, level)
    }

    /// Modulus switching from `level` to `level - 1`: v scales by 1/q_l, plus the rounding
    /// r_0 + r_1 s with |r_i| <= 1/2.
    pub fn mod_switch(&self, a: NoiseEstimate, level: usize) -> NoiseEstimate {
        let ratio = (-self.log2_primes[level]).exp2();
        NoiseEstimate {
            variance: a.variance * ratio * ratio + (1.0 + self.n * VAR_S) / 12.0,
            bound: a.bound * ratio + (1.0 + self.n) / 2.0,
            log2_q: self.log2_q(level - 1),
        }
    }

    /// Rounding c_0 to a multiple of 2^c0_bits and c_1 to a multiple of 2^c1_bits (dropping low
    /// bits before sending): the noise r_0 + r_1 s it adds, |r_i| <= 2^(bits - 1), each r uniform
    /// (variance 4^bits / 12), at the modulus 2^log2_q.
    pub fn rounding(&self, c0_bits: u32, c1_bits: u32, log2_q: f64) -> NoiseEstimate {
        let error = |b: u32| if b == 0 { (0.0, 0.0) } else { (4f64.powi(b as i32) / 12.0, 2f64.powi(b as i32 - 1)) };
        let ((v0, h0), (v1, h1)) = (error(c0_bits), error(c1_bits));
        NoiseEstimate { variance: v0 + self.n * VAR_S * v1, bound: h0 + self.n * h1, log2_q }
    }

    /// Switches from `from` down to `to` one prime at a time (as `Evaluator::mod_switch_to`).
    pub fn mod_switch_to(&self, mut a: NoiseEstimate, from: usize, to: usize) -> NoiseEstimate {
        for level in (to + 1..=from).rev() {
            a = self.mod_switch(a, level);
        }
        a
    }

    /// Budget in bits when ||v||_inf = `magnitude`: log2(Q) - 1 - log2(t magnitude).
    pub fn budget_for(&self, log2_q: f64, magnitude: f64) -> f64 {
        log2_q - 1.0 - self.t.log2() - magnitude.log2()
    }

    /// The expected budget of one ciphertext (the expected maximum of n Gaussian coefficients,
    /// sqrt(2 ln n) sigma), clamped at 0: what one measurement typically shows.
    pub fn budget(&self, a: NoiseEstimate) -> f64 {
        let expected_max = a.variance.sqrt() * (2.0 * self.n.ln()).sqrt();
        self.budget_for(a.log2_q, expected_max).max(0.0)
    }

    /// Practical budget of one ciphertext at a failure probability (all n coefficients).
    pub fn practical_budget(&self, a: NoiseEstimate, failure_probability: f64) -> f64 {
        NoiseProfile::uniform(self.n, a).practical_budget(self, failure_probability)
    }

    /// Worst-case budget of one ciphertext: never above the measured one.
    pub fn worst_case_budget(&self, a: NoiseEstimate) -> f64 {
        self.budget_for(a.log2_q, a.bound)
    }
}

/// Complementary error function (Numerical Recipes' erfcc: relative error below 1.2e-7 for every
/// x, so also in the far tail the union bound needs).
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let u = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + u * (1.000_023_68
            + u * (0.374_091_96
                + u * (0.096_784_18
                    + u * (-0.186_288_06 + u * (0.278_868_07 + u * (-1.135_203_98 + u * (1.488_515_87 + u * (-0.822_152_23 + u * 0.170_872_77))))))));
    let r = u * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// The noise of a layer's output coefficients, as classes of coefficients sharing one estimate
/// (all at one level). Most layers have one class per output ciphertext shape; sums of
/// automorphic images (rotate-and-add trees) have classes by coefficient index.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NoiseProfile {
    /// (number of output coefficients, their noise), over all output ciphertexts.
    pub classes: Vec<(f64, NoiseEstimate)>,
}

impl NoiseProfile {
    pub fn uniform(coefficients: f64, noise: NoiseEstimate) -> Self {
        Self { classes: vec![(coefficients, noise)] }
    }

    /// Adds `coefficients` coefficients with this noise (merged with an equal class).
    pub fn push(&mut self, coefficients: f64, noise: NoiseEstimate) {
        if let Some(c) = self.classes.iter_mut().find(|(_, e)| *e == noise) {
            c.0 += coefficients;
        } else {
            self.classes.push((coefficients, noise));
        }
    }

    /// Total number of output coefficients the budget is taken over.
    pub fn coefficients(&self) -> f64 {
        self.classes.iter().map(|c| c.0).sum()
    }

    /// Applies `f` to every class (e.g. a modulus switch).
    pub fn map(&self, f: impl Fn(NoiseEstimate) -> NoiseEstimate) -> Self {
        let mut out = Self::default();
        for &(c, e) in &self.classes {
            out.push(c, f(e));
        }
        out
    }

    /// The largest per-coefficient variance.
    pub fn max_variance(&self) -> f64 {
        self.classes.iter().map(|c| c.1.variance).fold(0.0, f64::max)
    }

    /// The practical budget at a decryption-failure probability p: the smallest T with
    /// sum_classes count * erfc(T / (sqrt(2) sigma)) <= p (Gaussian tail of each coefficient,
    /// union bound over every output coefficient), then log2(Q) - 1 - log2(t T).
    pub fn practical_budget(&self, model: &NoiseModel, failure_probability: f64) -> f64 {
        let live: Vec<(f64, f64)> = self.classes.iter().filter(|c| c.1.variance > 0.0 && c.0 > 0.0).map(|c| (c.0, c.1.variance.sqrt())).collect();
        let Some(log2_q) = self.classes.first().map(|c| c.1.log2_q) else {
            return f64::INFINITY;
        };
        if live.is_empty() {
            return f64::INFINITY;
        }
        let p = failure_probability.clamp(1e-300, 1.0);
        let tail = |x: f64| live.iter().map(|&(count, sigma)| count * erfc(x / (std::f64::consts::SQRT_2 * sigma))).sum::<f64>();
        // Bisection on log2 T between the largest sigma / 8 and sigma * 64 (z up to 64).
        let top = live.iter().map(|c| c.1).fold(0.0, f64::max);
        let (mut lo, mut hi) = ((top / 8.0).log2(), (top * 64.0).log2());
        for _ in 0..100 {
            let mid = 0.5 * (lo + hi);
            if tail(mid.exp2()) > p {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        model.budget_for(log2_q, hi.exp2())
    }

    /// The worst-case budget: from the largest bound; never above the measured budget.
    pub fn worst_case_budget(&self, model: &NoiseModel) -> f64 {
        let bound = self.classes.iter().map(|c| c.1.bound).fold(0.0, f64::max);
        let log2_q = self.classes.first().map_or(0.0, |c| c.1.log2_q);
        model.budget_for(log2_q, bound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erfc_matches_known_values() {
        assert!((erfc(0.0) - 1.0).abs() < 1e-7);
        assert!((erfc(1.0) - 0.157_299_207_050_285_1).abs() < 1e-7);
        // erfc(6) = 2.15197367e-17; relative accuracy in the tail.
        assert!((erfc(6.0) / 2.151_973_671_249_891e-17 - 1.0).abs() < 1e-6);
        assert!((erfc(-1.0) - 1.842_700_792_949_715).abs() < 1e-7);
    }

    #[test]
    fn practical_budget_is_the_gaussian_union_bound() {
        let model = NoiseModel { n: 4096.0, t: 1048576.0, log2_primes: vec![60.0], log2_p: 61.0, special_primes: 1, digit_size: 1 };
        let e = NoiseEstimate { variance: 1.0, bound: 100.0, log2_q: 60.0 };
        // 4096 erfc(z / sqrt 2) = 2^-40 at z = 8.2095 (Python math.erfc and bisection).
        let z: f64 = 60.0 - 1.0 - 20.0 - model.practical_budget(e, DEFAULT_FAILURE_PROBABILITY);
        assert!((z.exp2() - 8.2095).abs() < 1e-3, "z = {}", z.exp2());
        assert!((model.worst_case_budget(e) - (39.0 - 100f64.log2())).abs() < 1e-12);
    }
}
