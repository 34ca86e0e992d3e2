//! The hot kernels of Lycaon's schemes over whole RNS polynomials (all limbs at once), behind one
//! trait so that a GPU implementation can take the same calls. [`CpuBackend`] is the reference;
//! [`RayonBackend`] computes the same on every core; every other backend must agree with the
//! reference bit for bit ([`conformance`]).
//!
//! Kernels are coarse on purpose: a key-switching inner product is one call, not a loop of
//! point-wise products, so that a device backend can fuse it. Every kernel returns a `Result`:
//! the math layer's errors for bad operands, and [`MathError::Device`] when a device fails, so a
//! GPU failure reaches the caller as an error instead of a panic.

use std::sync::Arc;

use lycaon_math::{
    mul_accumulate_lazy, reduce_lazy, Automorphism, BaseConverter, Coeff, MathError, Ntt, Poly, RnsBasis,
};

pub mod conformance;
pub mod parallel;
pub mod resident;

pub use parallel::RayonBackend;
pub use resident::{KeyLayout, LimbConstant, ResidentBackend};

/// Whole-polynomial kernels. Inputs are validated polynomials; errors are the math layer's, with
/// [`MathError::Device`] for a failure of the device itself (never returned by the CPU backends).
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// A short name for logs and benchmarks ("cpu", "cuda:0").
    fn name(&self) -> &str;

    /// Forward NTT of every limb.
    fn ntt(&self, poly: Poly<Coeff>) -> Result<Poly<Ntt>, MathError>;

    /// Inverse NTT of every limb.
    fn intt(&self, poly: Poly<Ntt>) -> Result<Poly<Coeff>, MathError>;

    /// Point-wise product a *= b.
    fn mul_assign(&self, a: &mut Poly<Ntt>, b: &Poly<Ntt>) -> Result<(), MathError>;

    /// X -> X^g on a polynomial in NTT form (a permutation of slots).
    fn automorphism_ntt(&self, poly: &Poly<Ntt>, auto: &Automorphism) -> Result<Poly<Ntt>, MathError>;

    /// Base conversion of a coefficient-form polynomial from `conv`'s source to its target basis;
    /// `centered` selects the exact (centred-lift) variant instead of the fast approximate one.
    fn convert_basis(&self, conv: &BaseConverter, poly: &Poly<Coeff>, centered: bool) -> Result<Poly<Coeff>, MathError>;

    /// Key-switching inner product: for each output o, sum_j digits[j] * keys[j][o] point-wise,
    /// accumulated lazily in u128 and reduced once. `key_limbs[i]` names the limb of the key
    /// polynomials that matches limb i of the digits (keys may carry more limbs than the digits).
    fn inner_product(
        &self,
        digits: &[Poly<Ntt>],
        keys: &[&[Poly<Ntt>]],
        key_limbs: &[usize],
        outputs: usize,
    ) -> Result<Vec<Poly<Ntt>>, MathError>;
}

/// Checks the arguments of [`Backend::inner_product`] and returns the digits' basis. Every
/// backend calls this first, so all of them reject the same inputs with the same error:
/// at least one digit; one key list per digit with at least `outputs` polynomials; one key limb
/// index per digit limb; all digits in one basis; and key limb `key_limbs[i]` of every key
/// polynomial having prime i of that basis.
pub fn check_inner_product_args(
    digits: &[Poly<Ntt>],
    keys: &[&[Poly<Ntt>]],
    key_limbs: &[usize],
    outputs: usize,
) -> Result<Arc<RnsBasis>, MathError> {
    let Some(first) = digits.first() else { return Err(MathError::EmptyBasis) };
    let basis = first.basis().clone();
    if keys.len() != digits.len() || key_limbs.len() != basis.len() {
        return Err(MathError::LimbCount { expected: digits.len(), found: keys.len() });
    }
    for (d, k) in digits.iter().zip(keys) {
        if !d.basis().same_primes(&basis) || k.len() < outputs {
            return Err(MathError::BasisMismatch { lhs: basis.len(), rhs: d.num_limbs() });
        }
        for kp in k.iter().take(outputs) {
            if key_limbs.iter().zip(basis.moduli()).any(|(&l, q)| kp.basis().moduli().get(l) != Some(q)) {
                return Err(MathError::BasisMismatch { lhs: basis.len(), rhs: kp.num_limbs() });
            }
        }
    }
    Ok(basis)
}

/// The reference backend: the math layer's kernels, one thread.
#[derive(Debug, Default, Clone, Copy)]
pub struct CpuBackend;

impl CpuBackend {
    pub fn shared() -> Arc<dyn Backend> {
        Arc::new(CpuBackend)
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> &str {
        "cpu"
    }

    fn ntt(&self, poly: Poly<Coeff>) -> Result<Poly<Ntt>, MathError> {
        Ok(poly.ntt())
    }

    fn intt(&self, poly: Poly<Ntt>) -> Result<Poly<Coeff>, MathError> {
        Ok(poly.intt())
    }

    fn mul_assign(&self, a: &mut Poly<Ntt>, b: &Poly<Ntt>) -> Result<(), MathError> {
        a.mul_assign(b)
    }

    fn automorphism_ntt(&self, poly: &Poly<Ntt>, auto: &Automorphism) -> Result<Poly<Ntt>, MathError> {
        poly.automorphism(auto)
    }

    fn convert_basis(&self, conv: &BaseConverter, poly: &Poly<Coeff>, centered: bool) -> Result<Poly<Coeff>, MathError> {
        if !poly.basis().same_primes(conv.from_basis()) {
            return Err(MathError::BasisMismatch { lhs: poly.num_limbs(), rhs: conv.from_basis().len() });
        }
        let to: &Arc<RnsBasis> = conv.to_basis();
        let mut out = vec![0u64; to.len() * to.n()];
        if centered {
            conv.convert_centered(poly.data(), &mut out)?;
        } else {
            conv.convert_approximate(poly.data(), &mut out)?;
        }
        Ok(Poly::from_kernel_output(to, out))
    }

    fn inner_product(
        &self,
        digits: &[Poly<Ntt>],
        keys: &[&[Poly<Ntt>]],
        key_limbs: &[usize],
        outputs: usize,
    ) -> Result<Vec<Poly<Ntt>>, MathError> {
        let basis = check_inner_product_args(digits, keys, key_limbs, outputs)?;
        let n = basis.n();
        let mut acc = vec![0u128; n];
        let mut result = Vec::with_capacity(outputs);
        for o in 0..outputs {
            let mut out = vec![0u64; basis.len() * n];
            for (i, q) in basis.moduli().iter().enumerate() {
                acc.iter_mut().for_each(|a| *a = 0);
                for (d, k) in digits.iter().zip(keys) {
                    mul_accumulate_lazy(&mut acc, d.limb(i), k[o].limb(key_limbs[i]));
                }
                reduce_lazy(&acc, &mut out[i * n..(i + 1) * n], q);
            }
            result.push(Poly::from_kernel_output(&basis, out));
        }
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lycaon_math::{ntt_moduli, Sampler};

    #[test]
    fn inner_product_arguments_are_checked() {
        let n = 16;
        let q = ntt_moduli(&[40, 41, 42], n, &[]).unwrap();
        let qp = RnsBasis::new(n, &q).unwrap();
        let low = qp.prefix(2).unwrap();
        let mut s = Sampler::from_seed([3; 32]);
        let d = [s.uniform_poly(&low), s.uniform_poly(&low)];
        let k: Vec<Poly<Ntt>> = vec![s.uniform_poly(&qp), s.uniform_poly(&qp)];
        let keys: [&[Poly<Ntt>]; 2] = [&k, &k];
        assert!(check_inner_product_args(&d, &keys, &[0, 1], 2).unwrap().same_primes(&low));
        assert_eq!(check_inner_product_args(&[], &[], &[], 1).unwrap_err(), MathError::EmptyBasis);
        assert!(matches!(check_inner_product_args(&d, &keys[..1], &[0, 1], 2), Err(MathError::LimbCount { .. })));
        assert!(matches!(check_inner_product_args(&d, &keys, &[0], 2), Err(MathError::LimbCount { .. })));
        assert!(matches!(check_inner_product_args(&d, &keys, &[0, 1], 3), Err(MathError::BasisMismatch { .. })));
        // Key limb 2 holds the third prime, not the second.
        assert!(matches!(check_inner_product_args(&d, &keys, &[0, 2], 2), Err(MathError::BasisMismatch { .. })));
        assert!(matches!(check_inner_product_args(&d, &keys, &[0, 5], 2), Err(MathError::BasisMismatch { .. })));
    }
}
