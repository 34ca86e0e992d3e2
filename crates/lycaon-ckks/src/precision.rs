//! Precision of approximate results in bits, as Lattigo reports it: for each slot,
//! -log2 |expected - got| (capped at 64 bits for exact slots), summarised as min, mean, median
//! and max, with the mean computed from the mean absolute error (log2 of the average error).

use num_complex::Complex64;

/// Bits of precision over a set of slots.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PrecisionStats {
    /// Worst slot: -log2 of the largest error.
    pub min_bits: f64,
    /// -log2 of the mean absolute error.
    pub mean_bits: f64,
    /// Median of the per-slot bits.
    pub median_bits: f64,
    /// Best slot: -log2 of the smallest error.
    pub max_bits: f64,
    /// The largest absolute error itself.
    pub max_error: f64,
}

impl std::fmt::Display for PrecisionStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "precision bits: min {:.2}, mean {:.2}, median {:.2}, max {:.2}", self.min_bits, self.mean_bits, self.median_bits, self.max_bits)
    }
}

const CAP: f64 = 64.0;

fn bits(err: f64) -> f64 {
    if err <= 0.0 { CAP } else { (-err.log2()).min(CAP) }
}

fn stats(errors: Vec<f64>) -> PrecisionStats {
    if errors.is_empty() {
        return PrecisionStats { min_bits: CAP, mean_bits: CAP, median_bits: CAP, max_bits: CAP, max_error: 0.0 };
    }
    let max_error = errors.iter().cloned().fold(0.0, f64::max);
    let min_error = errors.iter().cloned().fold(f64::INFINITY, f64::min);
    let mean = errors.iter().sum::<f64>() / errors.len() as f64;
    let mut b: Vec<f64> = errors.iter().map(|&e| bits(e)).collect();
    b.sort_by(|x, y| x.total_cmp(y));
    let median_bits = if b.len() % 2 == 1 { b[b.len() / 2] } else { (b[b.len() / 2 - 1] + b[b.len() / 2]) / 2.0 };
    PrecisionStats { min_bits: bits(max_error), mean_bits: bits(mean), median_bits, max_bits: bits(min_error), max_error }
}

/// Precision of real results: per slot |expected - got|, over the common length.
pub fn precision_stats(expected: &[f64], got: &[f64]) -> PrecisionStats {
    stats(expected.iter().zip(got).map(|(a, b)| if a.is_finite() && b.is_finite() { (a - b).abs() } else { f64::INFINITY }).collect())
}

/// Precision of complex results: per slot the modulus of the difference.
pub fn precision_stats_complex(expected: &[Complex64], got: &[Complex64]) -> PrecisionStats {
    stats(expected.iter().zip(got).map(|(a, b)| (a - b).norm()).map(|e| if e.is_finite() { e } else { f64::INFINITY }).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_of_known_errors() {
        let s = precision_stats(&[1.0, 2.0, 3.0, 4.0], &[1.0 + 2f64.powi(-10), 2.0 - 2f64.powi(-20), 3.0, 4.0 + 2f64.powi(-12)]);
        assert_eq!(s.min_bits, 10.0);
        assert_eq!(s.max_bits, 64.0);
        assert!((s.max_error - 2f64.powi(-10)).abs() < 1e-18);
        assert!(s.mean_bits > 11.0 && s.mean_bits < 12.0);
        assert_eq!(precision_stats(&[1.0], &[f64::NAN]).min_bits, f64::NEG_INFINITY.max(-f64::INFINITY).max(bits(f64::INFINITY)));
    }
}
