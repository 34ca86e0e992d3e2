//! CKKS evaluation keys: the relinearisation key and Galois keys for slot rotations (X -> X^(5^k),
//! which moves slot j + k to slot j) and conjugation (X -> X^(2n - 1)). CKKS uses the generator
//! 5, not BFV's 3, because 5^k = 1 mod 4 keeps X^(n/2) the imaginary unit in every slot.

use std::sync::Arc;

use lycaon_math::Sampler;
use lycaon_rlwe::{GaloisKeys, RelinKey, SecretKey};

use crate::CkksError;

/// The Galois element 5^k mod 2n of a left rotation by `step` slots (negative: right), with the
/// step taken modulo n/2 (the order of 5), so that a key serves every slot count.
pub fn rotation_galois_element(step: i64, n: usize) -> u64 {
    let two_n = 2 * n as u64;
    let k = step.rem_euclid((n / 2) as i64) as u64;
    let (mut result, mut base, mut e) = (1u64, 5u64, k);
    while e > 0 {
        if e & 1 == 1 {
            result = result * base % two_n;
        }
        base = base * base % two_n;
        e >>= 1;
    }
    result
}

/// The Galois element of complex conjugation of every slot: 2n - 1.
pub fn conjugation_galois_element(n: usize) -> u64 {
    2 * n as u64 - 1
}

/// The keys an [`crate::Evaluator`] may use. Public material only: no secret key.
#[derive(Clone, Debug, Default)]
pub struct EvaluationKeys {
    pub relin: Option<Arc<RelinKey>>,
    pub galois: Option<Arc<GaloisKeys>>,
}

impl EvaluationKeys {
    /// A relinearisation key and Galois keys for the given rotation steps (and conjugation).
    pub fn generate(sk: &SecretKey, steps: &[i64], conjugate: bool, sampler: &mut Sampler) -> Result<Self, CkksError> {
        let relin = RelinKey::generate(sk, sampler)?;
        let galois = Self::galois_keys(sk, steps, conjugate, sampler)?;
        Ok(Self { relin: Some(Arc::new(relin)), galois: Some(Arc::new(galois)) })
    }

    /// Galois keys for rotations by `steps` (identity steps skipped) and optionally conjugation.
    pub fn galois_keys(sk: &SecretKey, steps: &[i64], conjugate: bool, sampler: &mut Sampler) -> Result<GaloisKeys, CkksError> {
        let n = sk.params().n();
        let mut elements: Vec<u64> = steps.iter().map(|&s| rotation_galois_element(s, n)).filter(|&g| g != 1).collect();
        if conjugate {
            elements.push(conjugation_galois_element(n));
        }
        elements.sort_unstable();
        elements.dedup();
        Ok(GaloisKeys::generate(sk, &elements, sampler)?)
    }

    pub fn with_relin(relin: RelinKey) -> Self {
        Self { relin: Some(Arc::new(relin)), galois: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_elements_are_powers_of_five() {
        let n = 1 << 13;
        assert_eq!(rotation_galois_element(0, n), 1);
        assert_eq!(rotation_galois_element(1, n), 5);
        assert_eq!(rotation_galois_element(2, n), 25);
        // Right by one is 5^(n/2 - 1) = 5^-1 mod 2n.
        let inv = rotation_galois_element(-1, n);
        assert_eq!(inv * 5 % (2 * n as u64), 1);
    }
}
