//! A CPU backend that runs each kernel's limbs (or outputs) on rayon's thread pool. It computes
//! exactly what [`lycaon_backend::CpuBackend`] computes, limb by limb, so the results agree bit
//! for bit (checked by the backend's conformance suite in the tests below).

use std::sync::Arc;

use lycaon_backend::{Backend, CpuBackend};
use lycaon_math::{mul_accumulate_lazy, reduce_lazy, Automorphism, BaseConverter, Coeff, MathError, Ntt, Poly};
use rayon::prelude::*;

/// The multi-threaded CPU backend. Build parameters with
/// `Parameters::with_backend(literal, RayonBackend::shared())` to make every key switch,
/// NTT and inner product use all cores.
#[derive(Debug, Default, Clone, Copy)]
pub struct RayonBackend;

impl RayonBackend {
    pub fn shared() -> Arc<dyn Backend> {
        Arc::new(RayonBackend)
    }
}

impl Backend for RayonBackend {
    fn name(&self) -> &str {
        "cpu-rayon"
    }

    fn ntt(&self, poly: Poly<Coeff>) -> Poly<Ntt> {
        let basis = poly.basis().clone();
        let n = basis.n();
        let mut data = poly.into_data();
        data.par_chunks_exact_mut(n).zip(basis.plans().par_iter()).for_each(|(limb, plan)| plan.forward(limb));
        Poly::from_kernel_output(&basis, data)
    }

    fn intt(&self, poly: Poly<Ntt>) -> Poly<Coeff> {
        let basis = poly.basis().clone();
        let n = basis.n();
        let mut data = poly.into_data();
        data.par_chunks_exact_mut(n).zip(basis.plans().par_iter()).for_each(|(limb, plan)| plan.inverse(limb));
        Poly::from_kernel_output(&basis, data)
    }

    fn mul_assign(&self, a: &mut Poly<Ntt>, b: &Poly<Ntt>) -> Result<(), MathError> {
        if !a.basis().same_primes(b.basis()) {
            return Err(MathError::BasisMismatch { lhs: a.num_limbs(), rhs: b.num_limbs() });
        }
        crate::evaluator::mul_assign_par(a, b);
        Ok(())
    }

    fn automorphism_ntt(&self, poly: &Poly<Ntt>, auto: &Automorphism) -> Result<Poly<Ntt>, MathError> {
        if auto.n() != poly.n() {
            return Err(MathError::InvalidGaloisElement { galois_element: auto.galois_element(), n: poly.n() });
        }
        let n = poly.n();
        let mut data = vec![0u64; poly.data().len()];
        data.par_chunks_exact_mut(n).zip(poly.data().par_chunks_exact(n)).for_each(|(dst, src)| auto.apply_ntt(src, dst));
        Ok(Poly::from_kernel_output(poly.basis(), data))
    }

    fn convert_basis(&self, conv: &BaseConverter, poly: &Poly<Coeff>, centered: bool) -> Result<Poly<Coeff>, MathError> {
        CpuBackend.convert_basis(conv, poly, centered)
    }

    fn inner_product(&self, digits: &[Poly<Ntt>], keys: &[&[Poly<Ntt>]], key_limbs: &[usize], outputs: usize) -> Result<Vec<Poly<Ntt>>, MathError> {
        let Some(first) = digits.first() else { return Err(MathError::EmptyBasis) };
        let basis = first.basis().clone();
        let n = basis.n();
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
        let mut result = Vec::with_capacity(outputs);
        for o in 0..outputs {
            let mut out = vec![0u64; basis.len() * n];
            out.par_chunks_exact_mut(n).enumerate().for_each(|(i, limb)| {
                let q = basis.moduli()[i];
                let mut acc = vec![0u128; n];
                for (d, k) in digits.iter().zip(keys) {
                    mul_accumulate_lazy(&mut acc, d.limb(i), k[o].limb(key_limbs[i]));
                }
                reduce_lazy(&acc, limb, &q);
            });
            result.push(Poly::from_kernel_output(&basis, out));
        }
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_the_reference_backend() {
        for n in [16, 1024] {
            lycaon_backend::conformance::check_backend(&RayonBackend, n);
        }
    }
}
