//! Galois automorphisms X -> X^g of Z[X]/(X^n + 1), g odd, in coefficient and NTT form.

use crate::ntt::bit_reverse;
use crate::MathError;

/// The Galois element that rotates batched rows by `step` (g = 3^step mod 2n; negative steps
/// rotate right), as SEAL and Lattigo define it.
pub fn rotation_galois_element(step: i64, n: usize) -> u64 {
    let two_n = 2 * n as u64;
    let half = (n / 2) as i64;
    let k = step.rem_euclid(half) as u64;
    let mut g = 1u64;
    for _ in 0..k {
        g = g * 3 % two_n;
    }
    g
}

/// The Galois element of the row swap (conjugation in CKKS): g = 2n - 1.
pub fn row_swap_galois_element(n: usize) -> u64 {
    2 * n as u64 - 1
}

/// Precomputed index maps for one Galois element at one ring degree.
#[derive(Clone, Debug)]
pub struct Automorphism {
    galois_element: u64,
    /// Coefficient form: coefficient i moves to index `coeff_target[i] & (n-1)`, negated when the
    /// bit `n` is set (X^(i g) = -X^(i g - n) for i g mod 2n >= n).
    coeff_target: Vec<u32>,
    /// NTT form: output slot k reads input slot `ntt_source[k]`.
    ntt_source: Vec<u32>,
}

impl Automorphism {
    /// Errors unless g is odd and below 2n.
    pub fn new(galois_element: u64, n: usize) -> Result<Self, MathError> {
        let two_n = 2 * n as u64;
        if galois_element.is_multiple_of(2) || galois_element >= two_n || !n.is_power_of_two() {
            return Err(MathError::InvalidGaloisElement { galois_element, n });
        }
        let coeff_target = (0..n as u64).map(|i| ((i * galois_element) % two_n) as u32).collect();
        // Slot k evaluates at psi^(2 brv(k) + 1); a(X^g) there equals a at psi^((2 brv(k) + 1) g).
        let log_n = n.trailing_zeros();
        let ntt_source = (0..n)
            .map(|k| {
                let exponent = ((2 * bit_reverse(k, log_n) as u64 + 1) * galois_element) % two_n;
                bit_reverse(((exponent - 1) / 2) as usize, log_n) as u32
            })
            .collect();
        Ok(Self { galois_element, coeff_target, ntt_source })
    }

    pub fn galois_element(&self) -> u64 {
        self.galois_element
    }

    pub fn n(&self) -> usize {
        self.ntt_source.len()
    }

    /// Applies the automorphism to one limb in coefficient form (values in [0, q)).
    pub fn apply_coeff(&self, input: &[u64], output: &mut [u64], q: u64) {
        let n = input.len();
        let mask = n - 1;
        for (i, &x) in input.iter().enumerate() {
            let t = self.coeff_target[i] as usize;
            output[t & mask] = if t & n != 0 && x != 0 { q - x } else { x };
        }
    }

    /// Applies the automorphism to one limb in NTT form (a permutation of the evaluations).
    pub fn apply_ntt(&self, input: &[u64], output: &mut [u64]) {
        for (out, &src) in output.iter_mut().zip(&self.ntt_source) {
            *out = input[src as usize];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ntt_primes, Modulus, NttPlan};

    #[test]
    fn coefficient_and_ntt_forms_agree_and_compose() {
        let n = 256;
        let q = Modulus::new(ntt_primes(45, n, 1, &[]).unwrap()[0]).unwrap();
        let plan = NttPlan::new(n, q).unwrap();
        let a: Vec<u64> = (0..n as u64).map(|i| q.reduce(i * i * 31337 + 7)).collect();
        for g in [3u64, 5, 2 * n as u64 - 1, rotation_galois_element(-7, n)] {
            let auto = Automorphism::new(g, n).unwrap();
            let mut by_coeff = vec![0; n];
            auto.apply_coeff(&a, &mut by_coeff, q.value());
            let mut a_ntt = a.clone();
            plan.forward(&mut a_ntt);
            let mut by_ntt = vec![0; n];
            auto.apply_ntt(&a_ntt, &mut by_ntt);
            plan.inverse(&mut by_ntt);
            assert_eq!(by_coeff, by_ntt, "g = {g}");
            // sigma_g then sigma_h equals sigma_{g h}.
            let h = 5u64;
            let mut twice = vec![0; n];
            Automorphism::new(h, n).unwrap().apply_coeff(&by_coeff, &mut twice, q.value());
            let mut once = vec![0; n];
            Automorphism::new(g * h % (2 * n as u64), n).unwrap().apply_coeff(&a, &mut once, q.value());
            assert_eq!(twice, once);
        }
        assert!(Automorphism::new(4, n).is_err() && Automorphism::new(513, n).is_err());
    }

    #[test]
    fn rotation_elements() {
        assert_eq!(rotation_galois_element(1, 8192), 3);
        assert_eq!(rotation_galois_element(0, 8192), 1);
        // A right rotation by 1 equals a left rotation by n/2 - 1.
        assert_eq!(rotation_galois_element(-1, 64), rotation_galois_element(31, 64));
    }
}
