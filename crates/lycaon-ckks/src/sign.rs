//! ReLU for networks trained with ReLU: composite minimax approximation of the sign function
//! (Lee, Lee, Kim and No, "Minimax approximation of sign function by composite polynomial for
//! homomorphic comparison", IEEE TDSC 2021), as Lee et al. (ICML 2022, 004's MPCNN) evaluate
//! ReLU(x) = x (1 + sgn x) / 2 in ResNets under CKKS.
//!
//! Stage i is the odd polynomial p_i of degree d_i closest in max norm to 1 on [l_i, 1], so, being
//! odd, to sgn on [-1, -l_i] u [l_i, 1]. It is found by Remez exchange in the odd Chebyshev basis
//! T_1, T_3, .., T_{d_i} (d_i + 1 / 2 unknowns and the levelled error). On [l_i, 1] its values lie
//! in [1 - e_i, 1 + e_i]; every stage but the last is divided by 1 + e_i, so its output is in
//! [-1, 1] again and the next stage approximates sgn on [l_{i+1}, 1] with
//! l_{i+1} = (1 - e_i) / (1 + e_i). All stages are on [-1, 1], so no stage spends a level on a
//! change of variable: depth sum ceil(log2(d_i + 1)), 4 + 4 + 5 = 13 for degrees 15, 15, 27.
//! The last stage is folded into the step (1 + p) / 2, and ReLU is one more product.
//!
//! The input must be scaled into [-1, 1] first (by a bound B on |x|, folded into the weights of
//! the layer before); inputs in (-l_1, l_1) get an unspecified value in [0, 1] from the step, so
//! ReLU's error there is at most l_1 B.

use crate::polynomial::{alternating_extrema, chebyshev_values, solve};
use crate::{Ciphertext, ChebyshevPoly, CkksError, Evaluator};

/// The degrees Lee et al. use for alpha = 13 bits (ResNet-20 to -110 on CIFAR-10, 004's MPCNN).
pub const LEE_ALPHA13_DEGREES: [usize; 3] = [15, 15, 27];

/// The odd polynomial of `degree` (odd) closest to 1 on [low, 1] in max norm, as a Chebyshev
/// polynomial on [-1, 1] (even coefficients zero), and its error on [low, 1] measured on a dense
/// grid. Remez exchange from the Chebyshev extrema mapped into [low, 1]; stops when the levelled
/// and the measured error agree to 1e-9 relative, or after `iterations`.
pub fn odd_sign_minimax(degree: usize, low: f64, iterations: usize) -> Result<(ChebyshevPoly, f64), CkksError> {
    if degree.is_multiple_of(2) || !(low > 0.0 && low < 1.0) {
        return Err(CkksError::InvalidArgument { what: format!("a sign approximation needs an odd degree and 0 < low < 1, not degree {degree}, low {low}") });
    }
    let terms = degree.div_ceil(2); // T_1, T_3, .., T_degree
    let m = terms + 1;
    // A grid dense near `low`, where the error concentrates (Chebyshev points of [low, 1]).
    let grid_len = (400 * m).max(20_000);
    let grid: Vec<f64> = (0..grid_len).map(|k| low + (1.0 - low) * 0.5 * (1.0 - (std::f64::consts::PI * k as f64 / (grid_len - 1) as f64).cos())).collect();
    let odd_values = |x: f64| -> Vec<f64> {
        let t = chebyshev_values(x, degree);
        (0..terms).map(|k| t[2 * k + 1]).collect()
    };
    let basis: Vec<Vec<f64>> = grid.iter().map(|&x| odd_values(x)).collect();
    let evaluate = |c: &[f64], row: &[f64]| row.iter().zip(c).map(|(t, c)| t * c).sum::<f64>();
    let mut reference: Vec<f64> = (0..m).map(|k| low + (1.0 - low) * 0.5 * (1.0 - (std::f64::consts::PI * k as f64 / (m - 1) as f64).cos())).collect();
    let mut best: Option<(f64, Vec<f64>)> = None;
    for _ in 0..iterations {
        let rows: Vec<Vec<f64>> = reference
            .iter()
            .enumerate()
            .map(|(k, &x)| {
                let mut r = odd_values(x);
                r.push(if k % 2 == 0 { 1.0 } else { -1.0 });
                r
            })
            .collect();
        let Some(sol) = solve(rows, vec![1.0; m]) else { break };
        let levelled = sol[terms].abs();
        let coeffs = &sol[..terms];
        let errors: Vec<f64> = basis.iter().map(|row| evaluate(coeffs, row) - 1.0).collect();
        let measured = errors.iter().fold(0.0f64, |mx, e| mx.max(e.abs()));
        if best.as_ref().is_none_or(|b| measured < b.0) {
            best = Some((measured, coeffs.to_vec()));
        }
        if measured - levelled <= 1e-9 * measured {
            break;
        }
        let Some(extrema) = alternating_extrema(&errors, m) else { break };
        reference = extrema.iter().map(|&i| grid[i]).collect();
    }
    let (error, odd) = best.ok_or(CkksError::Internal("the Remez system of a sign approximation is singular"))?;
    let mut coeffs = vec![0.0; degree + 1];
    for (k, c) in odd.into_iter().enumerate() {
        coeffs[2 * k + 1] = c;
    }
    Ok((ChebyshevPoly::new(coeffs, -1.0, 1.0)?, error))
}

/// A composite approximation of sgn on [-1, -low] u [low, 1] (see the module doc).
#[derive(Clone, Debug)]
pub struct CompositeSign {
    /// Stages in order of application, each on [-1, 1]; all but the last scaled into [-1, 1].
    pub stages: Vec<ChebyshevPoly>,
    /// The smallest |x| the approximation is for.
    pub low: f64,
    /// max |p(x) - sgn x| over low <= |x| <= 1 (the last stage's levelled error, measured).
    pub error: f64,
}

impl CompositeSign {
    /// The stages for `degrees` (each odd) and inputs down to |x| = `low`.
    pub fn new(degrees: &[usize], low: f64) -> Result<Self, CkksError> {
        if degrees.is_empty() {
            return Err(CkksError::InvalidArgument { what: "a composite sign needs at least one stage".into() });
        }
        let mut stages = Vec::with_capacity(degrees.len());
        let (mut l, mut error) = (low, 1.0);
        for (i, &d) in degrees.iter().enumerate() {
            let (p, e) = odd_sign_minimax(d, l, 100)?;
            if e >= 1.0 {
                return Err(CkksError::InvalidArgument { what: format!("stage {i} (degree {d}) cannot separate {l:e} from 0") });
            }
            error = e;
            if i + 1 < degrees.len() {
                // Into [-1, 1]: the next stage's inputs from [low, 1] lie in [(1 - e)/(1 + e), 1].
                let scaled: Vec<f64> = p.coeffs.iter().map(|c| c / (1.0 + e)).collect();
                stages.push(ChebyshevPoly::new(scaled, -1.0, 1.0)?);
                l = (1.0 - e) / (1.0 + e);
            } else {
                stages.push(p);
            }
        }
        Ok(Self { stages, low, error })
    }

    /// The gap for ReLU: among low = 2^-5, 2^-5.25, .., 2^-13, the one whose ReLU
    /// x (1 + p(x)) / 2 is closest to max(x, 0) on [-1, 1] (a smaller gap costs accuracy on large
    /// |x|, a larger one near 0), with that error.
    pub fn for_relu(degrees: &[usize]) -> Result<(Self, f64), CkksError> {
        let mut best: Option<(Self, f64)> = None;
        for quarter in 20..=52 {
            let s = Self::new(degrees, 2f64.powf(-(quarter as f64) / 4.0))?;
            let e = s.relu_error(1_000);
            if best.as_ref().is_none_or(|b| e < b.1) {
                best = Some((s, e));
            }
        }
        best.ok_or(CkksError::Internal("no gap tried"))
    }

    /// Lee et al.'s alpha = 13 ReLU: degrees 15, 15, 27 (depth 13 + 1), gap chosen by
    /// [`Self::for_relu`] (2^-9: ReLU within 2^-13 of max(x, 0) on [-1, 1]).
    pub fn lee_alpha13() -> Result<(Self, f64), CkksError> {
        Self::for_relu(&LEE_ALPHA13_DEGREES)
    }

    /// max |x (1 + p(x)) / 2 - max(x, 0)| over [-1, 1], on `points` per octave of |x| from 2^-30
    /// (ReLU's error is largest near the gap and at |x| = 1, both dense in such a grid).
    pub fn relu_error(&self, points: usize) -> f64 {
        let octaves = 30;
        (0..=points * octaves)
            .map(|j| 2f64.powf(-(octaves as f64) * (1.0 - j as f64 / (points * octaves) as f64)))
            .map(|x| (self.relu(x) - x).abs().max(self.relu(-x).abs()))
            .fold(0.0, f64::max)
    }

    /// Multiplicative depth: sum of the stages' depths.
    pub fn depth(&self) -> usize {
        self.stages.iter().map(ChebyshevPoly::depth).sum()
    }

    /// The composite in the clear.
    pub fn evaluate(&self, x: f64) -> f64 {
        self.stages.iter().fold(x, |v, p| p.evaluate(v))
    }

    /// The stages with the last one turned into the step (1 + p) / 2 (no extra level).
    pub fn step_stages(&self) -> Vec<ChebyshevPoly> {
        let mut stages = self.stages.clone();
        let last = stages.last_mut().expect("at least one stage");
        for c in &mut last.coeffs {
            *c *= 0.5;
        }
        last.coeffs[0] += 0.5;
        stages
    }

    /// ReLU in the clear as the homomorphic evaluation computes it: x (1 + p(x)) / 2.
    pub fn relu(&self, x: f64) -> f64 {
        x * (1.0 + self.evaluate(x)) / 2.0
    }
}

impl Evaluator {
    /// The composite sign of an encrypted input in [-1, 1]: its stages one after the other
    /// (`CompositeSign::depth` levels).
    pub fn evaluate_sign(&self, ct: &Ciphertext, sign: &CompositeSign) -> Result<Ciphertext, CkksError> {
        sign.stages.iter().try_fold(ct.clone(), |v, p| self.evaluate_chebyshev(&v, p))
    }

    /// ReLU of an encrypted input in [-1, 1]: x times the step (1 + p(x)) / 2, one level more
    /// than the sign.
    pub fn evaluate_relu(&self, ct: &Ciphertext, sign: &CompositeSign) -> Result<Ciphertext, CkksError> {
        let step = sign.step_stages().iter().try_fold(ct.clone(), |v, p| self.evaluate_chebyshev(&v, p))?;
        self.mul_relin_rescale(ct, &step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_stage_equioscillates_and_is_odd() {
        let (p, err) = odd_sign_minimax(7, 0.1, 100).unwrap();
        assert!(p.coeffs.iter().step_by(2).all(|&c| c == 0.0));
        let grid: Vec<f64> = (0..=9000).map(|k| 0.1 + 0.9 * k as f64 / 9000.0).collect();
        let errors: Vec<f64> = grid.iter().map(|&x| p.evaluate(x) - 1.0).collect();
        let max = errors.iter().fold(0.0f64, |m, e| m.max(e.abs()));
        assert!((max - err).abs() <= 1e-6 * err, "grid {max} vs reported {err}");
        // Best approximation: the error reaches +-err at degree/2 + 2 alternating points.
        let mut alternations = 0;
        let mut last = 0.0;
        for &e in &errors {
            if e.abs() > 0.999 * err && e.signum() != last {
                alternations += 1;
                last = e.signum();
            }
        }
        assert!(alternations >= 7 / 2 + 2, "{alternations} alternations");
        assert!((p.evaluate(-0.5) + p.evaluate(0.5)).abs() < 1e-15);
        // A higher degree does better; a larger gap does better.
        assert!(odd_sign_minimax(15, 0.1, 100).unwrap().1 < err);
        assert!(odd_sign_minimax(7, 0.3, 100).unwrap().1 < err);
    }

    #[test]
    fn lee_alpha13_relu_is_within_2_to_the_minus_13() {
        let (s, relu_error) = CompositeSign::lee_alpha13().unwrap();
        assert_eq!(s.depth(), 13);
        // Measured here on a linear grid of [-1, 1] and a fine one near the gap, independently
        // of the reported figures.
        let mut worst_sign: f64 = 0.0;
        let mut worst_relu: f64 = 0.0;
        for k in 0..=200_000 {
            for x in [k as f64 / 200_000.0, s.low + (1e-2 - s.low) * k as f64 / 200_000.0] {
                worst_relu = worst_relu.max((s.relu(x) - x.max(0.0)).abs()).max((s.relu(-x) - 0.0).abs());
                if x >= s.low {
                    worst_sign = worst_sign.max((s.evaluate(x) - 1.0).abs()).max((s.evaluate(-x) + 1.0).abs());
                }
            }
        }
        assert!(worst_sign <= s.error * 1.001 + 1e-12, "sign: grid {worst_sign} vs reported {}", s.error);
        assert!(worst_relu <= relu_error * 1.01, "relu: grid {worst_relu} vs reported {relu_error}");
        assert!(relu_error < 2f64.powi(-13), "ReLU error 2^{:.2}", relu_error.log2());
        // The step is the sign folded: (1 + p) / 2, no extra level.
        let step = s.step_stages();
        let through = |x: f64| step.iter().fold(x, |v, p| p.evaluate(v));
        for x in [-0.9, -0.01, 0.003, 0.5] {
            assert!((through(x) - (1.0 + s.evaluate(x)) / 2.0).abs() < 1e-12);
        }
        assert_eq!(step.iter().map(ChebyshevPoly::depth).sum::<usize>(), 13);
    }

    #[test]
    fn bad_arguments_are_named() {
        assert!(odd_sign_minimax(8, 0.1, 10).unwrap_err().to_string().contains("odd degree"));
        assert!(odd_sign_minimax(7, 0.0, 10).is_err());
        assert!(CompositeSign::new(&[], 0.1).is_err());
    }
}
