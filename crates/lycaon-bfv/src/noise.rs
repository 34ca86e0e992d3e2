//! Analytical noise model of BFV, used to predict the measured noise budget
//! (implementation_notes/bfv-noise.md has the derivations).
//!
//! A ciphertext at level l carries phase c_0 + c_1 s = round(Q_l m / t) + e (mod Q_l); the model
//! tracks Var(e) per coefficient under the usual independence heuristic, and the invariant noise
//! budget is log2(Q_l) - 1 - log2(t max_k |e_k|) with max_k |e_k| ~ sqrt(2 ln n) sqrt(Var(e)).

use lycaon_math::ERROR_STD_DEV;

/// Variance of the noise e of one ciphertext, with the parameters it lives under.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NoiseEstimate {
    pub variance: f64,
    pub log2_q: f64,
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
    /// Primes per key-switching digit at the top level.
    pub digit_size: usize,
}

const SIGMA2: f64 = ERROR_STD_DEV * ERROR_STD_DEV;
/// Variance of a uniform ternary secret coefficient.
const VAR_S: f64 = 2.0 / 3.0;

impl NoiseModel {
    pub fn from_params(params: &lycaon_rlwe::Parameters) -> Option<Self> {
        let t = params.plaintext_modulus()?.value() as f64;
        let lit = params.literal();
        Some(Self {
            n: params.n() as f64,
            t,
            log2_primes: lit.ciphertext_moduli.iter().map(|&q| (q as f64).log2()).collect(),
            log2_p: lit.special_moduli.iter().map(|&p| (p as f64).log2()).sum(),
            digit_size: lit.ciphertext_moduli.len().div_ceil(lit.key_switch_digits),
        })
    }

    fn log2_q(&self, level: usize) -> f64 {
        self.log2_primes[..=level].iter().sum()
    }

    /// Fresh symmetric encryption: e plus the rounding of Q m / t.
    pub fn fresh_symmetric(&self, level: usize) -> NoiseEstimate {
        NoiseEstimate { variance: SIGMA2 + 1.0 / 12.0, log2_q: self.log2_q(level) }
    }

    /// Fresh public-key encryption: e_0 + e u + e_1 s.
    pub fn fresh_public(&self, level: usize) -> NoiseEstimate {
        NoiseEstimate { variance: SIGMA2 * (1.0 + 2.0 * self.n * VAR_S) + 1.0 / 12.0, log2_q: self.log2_q(level) }
    }

    pub fn add(&self, a: NoiseEstimate, b: NoiseEstimate) -> NoiseEstimate {
        NoiseEstimate { variance: a.variance + b.variance, log2_q: a.log2_q }
    }

    /// Multiplication by a scalar c (taken centred modulo t).
    pub fn mul_scalar(&self, a: NoiseEstimate, c: f64) -> NoiseEstimate {
        NoiseEstimate { variance: a.variance * c * c, log2_q: a.log2_q }
    }

    /// Multiplication by a plaintext with uniform coefficients modulo t (centred).
    pub fn mul_plain_uniform(&self, a: NoiseEstimate) -> NoiseEstimate {
        NoiseEstimate { variance: a.variance * self.n * self.t * self.t / 12.0, log2_q: a.log2_q }
    }

    /// Noise added by one hybrid key switch at a level: sum_j d_j e_j / P plus the ModDown
    /// rounding r_0 + r_1 s, with d_j a sum of `alpha` residues uniform in [0, Q_j).
    pub fn key_switch(&self, level: usize) -> f64 {
        let count = level + 1;
        let mut inner = 0.0;
        let mut start = 0;
        while start < count {
            let end = (start + self.digit_size).min(count);
            let alpha = (end - start) as f64;
            let log2_qj: f64 = self.log2_primes[start..end].iter().sum();
            // E[d^2] = Q_j^2 (alpha / 12 + alpha^2 / 4).
            inner += self.n * SIGMA2 * (2.0 * (log2_qj - self.log2_p)).exp2() * (alpha / 12.0 + alpha * alpha / 4.0);
            start = end;
        }
        let special = (self.log2_p / 50.0).ceil().max(1.0);
        let rounding = (special / 12.0 + special * special / 4.0) * (1.0 + self.n * VAR_S);
        inner + rounding
    }

    /// Rotation or row swap: the automorphism keeps the variance, the key switch adds to it.
    pub fn rotate(&self, a: NoiseEstimate, level: usize) -> NoiseEstimate {
        NoiseEstimate { variance: a.variance + self.key_switch(level), log2_q: a.log2_q }
    }

    /// Ciphertext product (three parts): e = m_1 e_2 + m_2 e_1 + t (e_1 k_2 + e_2 k_1) + rounding,
    /// where k_i = (c_0 + c_1 s - Q m / t - e) / Q has variance n Var(s) / 12 + 1 / 12.
    pub fn multiply(&self, a: NoiseEstimate, b: NoiseEstimate) -> NoiseEstimate {
        let (n, t) = (self.n, self.t);
        let var_k = n * VAR_S / 12.0 + 1.0 / 12.0;
        let sum = a.variance + b.variance;
        let message_terms = n * t * t / 12.0 * sum;
        let k_terms = t * t * n * var_k * sum;
        let rounding = (1.0 + n * VAR_S + n * n * VAR_S * VAR_S) / 12.0;
        NoiseEstimate { variance: message_terms + k_terms + rounding, log2_q: a.log2_q }
    }

    /// Relinearisation adds one key switch.
    pub fn relinearize(&self, a: NoiseEstimate, level: usize) -> NoiseEstimate {
        self.rotate(a, level)
    }

    /// Modulus switching from `level` to `level - 1`: e scales by 1/q_l, plus rounding r_0 + r_1 s.
    pub fn mod_switch(&self, a: NoiseEstimate, level: usize) -> NoiseEstimate {
        let ratio2 = (-2.0 * self.log2_primes[level]).exp2();
        NoiseEstimate { variance: a.variance * ratio2 + (1.0 + self.n * VAR_S) / 12.0, log2_q: self.log2_q(level - 1) }
    }

    /// Predicted invariant noise budget in bits.
    pub fn budget(&self, a: NoiseEstimate) -> f64 {
        let expected_max = a.variance.sqrt() * (2.0 * self.n.ln()).sqrt();
        (a.log2_q - 1.0 - self.t.log2() - expected_max.log2()).max(0.0)
    }
}
