//! EvalMod: x -> x - round(x) for x = t / q_0 within `eps` of an integer of magnitude at most K,
//! approximated as (1/2pi) sin(2 pi x) (Cheon-Han-Kim-Kim-Song 2018), evaluated as a Chebyshev
//! interpolant of cos(2 pi (x - 1/4) / 2^r) on [-B, B] followed by r double-angle steps
//! y -> 2 y^2 - 1 (Han-Ki 2020, "cosine with double angle"), and optionally a Taylor arcsine
//! correction that removes the sine's own error (1/2pi) arcsin(sin(2 pi x)) = x - round(x)
//! (Lee-Lee-Kim-No 2020).
//!
//! The message part y = Delta_0 m / q_0 is at most 2^-log_message_ratio; the sine's error is
//! about (2 pi y)^2 / 6 relative to y, and the output is read in units of Delta_0, so every
//! absolute error of EvalMod (in units of q_0) is multiplied by q_0 / Delta_0 = 2^ratio.
//!
//! K comes from the secret: at level 0 the phase c_0 + c_1 s has coefficients t = Delta m + e +
//! q_0 I where t / q_0 is a sum of h + 1 terms uniform in [-1/2, 1/2] (h the secret's Hamming
//! weight), so |I| <= (h + 1) / 2 always and its standard deviation is sqrt((h + 1) / 12):
//! [`k_for_hamming_weight`] turns a failure probability into K.

/// The shape of the EvalMod approximation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EvalModParams {
    /// Bound on |I|, the multiple of q_0 to remove.
    pub k: u32,
    /// Double-angle steps r.
    pub double_angle: u32,
    /// Degree of the Chebyshev interpolant of the cosine.
    pub cos_degree: usize,
    /// Degree of the odd Taylor polynomial of arcsin (0 for none, 1 is the identity, 3, 5, ...).
    pub arcsine_degree: usize,
    /// log2(q_0 / (Delta_0 max |m|)): the ciphertext is brought to scale q_0 / 2^ratio first.
    pub log_message_ratio: u32,
}

impl EvalModParams {
    /// The shape for a sparse (encapsulated, h = 32) secret: K = 16, message ratio 2^8 (as
    /// Lattigo's defaults), four double-angle steps and a degree-31 cosine interpolated on the
    /// whole of [-17, 17] (depth 9; Lattigo's r = 3, degree 30 relies on nodes concentrated near
    /// the integers), no arcsine. The approximation error is below 2^-35 in message units.
    pub fn sparse_default() -> Self {
        Self { k: 16, double_angle: 4, cos_degree: 31, arcsine_degree: 0, log_message_ratio: 8 }
    }

    /// Half-width B of the interpolation interval [-B, B]: K plus one, so that every x within
    /// 1/2 of an integer of magnitude <= K is covered.
    pub fn interval(&self) -> f64 {
        self.k as f64 + 1.0
    }

    /// Multiplicative depth: ceil(log2(degree + 1)) for the cosine (Chebyshev basis with
    /// baby-step giant-step), one per double angle, ceil(log2(degree + 1)) for the arcsine.
    pub fn depth(&self) -> usize {
        let d = |deg: usize| if deg <= 1 { 0 } else { (usize::BITS - deg.leading_zeros()) as usize };
        d(self.cos_degree) + self.double_angle as usize + d(self.arcsine_degree)
    }
}

/// Chebyshev interpolant of f on [-1, 1] of the given degree (values at the Chebyshev nodes).
pub fn chebyshev_interpolant(f: impl Fn(f64) -> f64, degree: usize) -> Vec<f64> {
    let nodes = degree + 1;
    let values: Vec<f64> = (0..nodes).map(|k| f((std::f64::consts::PI * (k as f64 + 0.5) / nodes as f64).cos())).collect();
    (0..nodes)
        .map(|j| {
            let s: f64 = values.iter().enumerate().map(|(k, &v)| v * (std::f64::consts::PI * j as f64 * (k as f64 + 0.5) / nodes as f64).cos()).sum();
            let c = 2.0 * s / nodes as f64;
            if j == 0 {
                c / 2.0
            } else {
                c
            }
        })
        .collect()
}

/// sum_j c_j T_j(t) by Clenshaw's recurrence.
pub fn chebyshev_evaluate(coeffs: &[f64], t: f64) -> f64 {
    let (mut b1, mut b2) = (0.0, 0.0);
    for &c in coeffs.iter().skip(1).rev() {
        let b0 = 2.0 * t * b1 - b2 + c;
        b2 = b1;
        b1 = b0;
    }
    t * b1 - b2 + coeffs.first().copied().unwrap_or(0.0)
}

/// The EvalMod polynomials, ready to evaluate in the clear (for error analysis) or
/// homomorphically.
#[derive(Clone, Debug)]
pub struct EvalMod {
    pub params: EvalModParams,
    /// Chebyshev coefficients of cos(2 pi (B t - 1/4) / 2^r) for t in [-1, 1].
    pub cos_coeffs: Vec<f64>,
    /// Odd Taylor coefficients (1, 1/6, 3/40, ...) of arcsin, up to `arcsine_degree`, each
    /// already multiplied by 1/(2 pi); `[1/(2 pi)]` without the correction.
    pub arcsine_coeffs: Vec<f64>,
}

impl EvalMod {
    pub fn new(params: EvalModParams) -> Self {
        let b = params.interval();
        let r = params.double_angle as i32;
        let two_pi = 2.0 * std::f64::consts::PI;
        let cos_coeffs = chebyshev_interpolant(|t| (two_pi * (b * t - 0.25) / 2f64.powi(r)).cos(), params.cos_degree);
        // arcsin(s) = sum_k (2k)! / (4^k (k!)^2 (2k + 1)) s^(2k + 1).
        let mut arcsine_coeffs = Vec::new();
        let mut c = 1.0;
        let mut k = 0usize;
        while 2 * k < params.arcsine_degree.max(1) {
            arcsine_coeffs.push(c / (2 * k + 1) as f64 / two_pi);
            c *= (2 * k + 1) as f64 / (2 * k + 2) as f64;
            k += 1;
        }
        Self { params, cos_coeffs, arcsine_coeffs }
    }

    /// The approximation of x - round(x), x in units of q_0, computed in f64 exactly as the
    /// homomorphic circuit does (interpolant on x / B, double angles, arcsine polynomial).
    pub fn evaluate_plain(&self, x: f64) -> f64 {
        let mut y = chebyshev_evaluate(&self.cos_coeffs, x / self.params.interval());
        for _ in 0..self.params.double_angle {
            y = 2.0 * y * y - 1.0;
        }
        // y ~ sin(2 pi x); the arcsine polynomial (with the 1/(2 pi)) maps it to x - round(x).
        let y2 = y * y;
        self.arcsine_coeffs.iter().rev().fold(0.0, |acc, &c| acc * y2 + c) * y
    }

    /// Largest error of [`Self::evaluate_plain`] against x - round(x), in units of q_0, over
    /// x = k + y for every integer |k| <= K and `samples` values |y| <= 2^-ratio.
    pub fn max_error(&self, samples: usize) -> f64 {
        self.max_error_against(samples, |y| y)
    }

    /// The same against (1/2pi) sin(2 pi x) (with the arcsine, against x - round(x)): the error
    /// of the polynomial approximation alone, without the sine's own.
    pub fn max_approximation_error(&self, samples: usize) -> f64 {
        let two_pi = 2.0 * std::f64::consts::PI;
        if self.params.arcsine_degree > 1 {
            return self.max_error(samples);
        }
        self.max_error_against(samples, |y| (two_pi * y).sin() / two_pi)
    }

    fn max_error_against(&self, samples: usize, want: impl Fn(f64) -> f64) -> f64 {
        let k = self.params.k as i64;
        let eps = 2f64.powi(-(self.params.log_message_ratio as i32));
        let mut worst = 0.0f64;
        for i in -k..=k {
            for j in 0..samples {
                let y = eps * (2.0 * j as f64 / (samples - 1).max(1) as f64 - 1.0);
                worst = worst.max((self.evaluate_plain(i as f64 + y) - want(y)).abs());
            }
        }
        worst
    }
}

/// Complementary error function (Numerical Recipes' erfcc, relative error below 1.2e-7).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.26551223
            + t * (1.00002368
                + t * (0.37409196
                    + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))))
            .exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// The smallest K such that all n coefficients of I satisfy |I| <= K except with probability at
/// most 2^-failure_bits, for a secret of Hamming weight h (Gaussian approximation of the sum of
/// h + 1 uniforms, which overestimates its tails), capped at the hard bound ceil((h + 1) / 2).
pub fn k_for_hamming_weight(h: usize, n: usize, failure_bits: u32) -> u32 {
    let sigma = ((h + 1) as f64 / 12.0).sqrt();
    let hard = (h + 1).div_ceil(2) as u32;
    let target = 2f64.powi(-(failure_bits as i32)) / n as f64;
    for k in 1..hard {
        // P(|I| > k) = P(|X| > k + 1/2).
        if erfc((k as f64 + 0.5) / (sigma * std::f64::consts::SQRT_2)) <= target {
            return k;
        }
    }
    hard
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chebyshev_interpolation_is_accurate() {
        let c = chebyshev_interpolant(|t| (3.0 * t).exp(), 30);
        for i in 0..=100 {
            let t = -1.0 + 2.0 * i as f64 / 100.0;
            assert!((chebyshev_evaluate(&c, t) - (3.0 * t).exp()).abs() < 1e-12);
        }
    }

    #[test]
    fn evalmod_error_on_the_expected_range() {
        // Errors in message units (x 2^8 = q_0 / Delta_0) over x = k + y, |k| <= 16, |y| <= 2^-8.
        let plain = EvalMod::new(EvalModParams::sparse_default());
        assert_eq!(plain.params.depth(), 9);
        // The polynomial approximates (1/2pi) sin(2 pi x) to 2^-35 ...
        let approx = plain.max_approximation_error(257) * 256.0;
        assert!(approx < 2f64.powi(-35), "approximation error 2^{:.1}", approx.log2());
        // ... so at the largest coefficient (|m| = 1) the sine's own cubic error, 2^-13.3, dominates,
        let total = plain.max_error(257) * 256.0;
        assert!(total < 2f64.powi(-13) && total > 2f64.powi(-14), "total 2^{:.1}", total.log2());
        // and for coefficients 2^-8 smaller (a full-slot message of values in [-1, 1] has
        // coefficients of about 2^-8.3) it falls with y^3 to below 2^-34.
        let small = (plain.evaluate_plain(5.0 + 2f64.powi(-16)) - 2f64.powi(-16)).abs() * 256.0;
        assert!(small < 2f64.powi(-34), "2^{:.1}", small.log2());
        // The degree-3 arcsine correction removes the sine's error at the cost of two levels.
        let corrected = EvalMod::new(EvalModParams { arcsine_degree: 3, ..EvalModParams::sparse_default() });
        assert_eq!(corrected.params.depth(), 11);
        let err = corrected.max_error(257) * 256.0;
        assert!(err < 2f64.powi(-25), "corrected 2^{:.1}", err.log2());
        // Lattigo's shape (r = 3, degree 30) with a plain Chebyshev interpolant on [-17, 17]
        // is too coarse: r = 4 and degree 31 cost one more level and gain 2^16.
        let coarse = EvalMod::new(EvalModParams { double_angle: 3, cos_degree: 30, ..EvalModParams::sparse_default() });
        assert!(coarse.max_approximation_error(257) * 256.0 > 2f64.powi(-21));
    }

    #[test]
    fn k_follows_the_hamming_weight() {
        // h = 32 (the encapsulated sparse secret): K = 12 fails below 2^-20 per bootstrap of
        // 2^16 coefficients, and the hard bound is 17.
        let k = k_for_hamming_weight(32, 1 << 16, 20);
        assert!((10..=13).contains(&k), "K = {k}");
        assert_eq!(k_for_hamming_weight(32, 1 << 16, 300), 17);
        // A dense ternary secret (h ~ 2n/3) needs K in the hundreds.
        let dense = k_for_hamming_weight(2 * (1 << 16) / 3, 1 << 16, 40);
        assert!((400..=700).contains(&dense), "K = {dense}");
    }
}
