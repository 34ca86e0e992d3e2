//! A suite every backend runs: each kernel on random inputs must equal the CPU reference bit for bit.

use std::sync::Arc;

use lycaon_math::{ntt_moduli, rotation_galois_element, Automorphism, BaseConverter, Coeff, Poly, RnsBasis, Sampler};

use crate::{Backend, CpuBackend};

fn random_coeff(basis: &Arc<RnsBasis>, sampler: &mut Sampler) -> Poly<Coeff> {
    // A uniform NTT-form polynomial is uniform in coefficient form too; reinterpret its data.
    let data = sampler.uniform_poly(basis).into_data();
    Poly::from_data(basis, data).expect("uniform residues are reduced")
}

/// Runs every kernel of `backend` and of [`CpuBackend`] on the same random inputs for the given
/// degree and panics with the kernel's name on the first difference.
pub fn check_backend(backend: &dyn Backend, n: usize) {
    let cpu = CpuBackend;
    let mut sampler = Sampler::from_seed([42; 32]);
    let q = ntt_moduli(&[50, 50, 49], n, &[]).unwrap();
    let taken: Vec<u64> = q.iter().map(|m| m.value()).collect();
    let p = ntt_moduli(&[51, 51], n, &taken).unwrap();
    let bq = RnsBasis::new(n, &q).unwrap();
    let bp = RnsBasis::new(n, &p).unwrap();

    let a = random_coeff(&bq, &mut sampler);
    let b = random_coeff(&bq, &mut sampler);
    assert_eq!(backend.ntt(a.clone()).unwrap(), cpu.ntt(a.clone()).unwrap(), "ntt");
    let (an, bn) = (cpu.ntt(a.clone()).unwrap(), cpu.ntt(b.clone()).unwrap());
    assert_eq!(backend.intt(an.clone()).unwrap(), a, "intt");
    let (mut x, mut y) = (an.clone(), an.clone());
    backend.mul_assign(&mut x, &bn).unwrap();
    cpu.mul_assign(&mut y, &bn).unwrap();
    assert_eq!(x, y, "mul_assign");
    let auto = Automorphism::new(rotation_galois_element(5, n), n).unwrap();
    assert_eq!(backend.automorphism_ntt(&an, &auto).unwrap(), cpu.automorphism_ntt(&an, &auto).unwrap(), "automorphism");
    let conv = BaseConverter::new(bq.clone(), bp.clone()).unwrap();
    for centered in [false, true] {
        assert_eq!(
            backend.convert_basis(&conv, &a, centered).unwrap(),
            cpu.convert_basis(&conv, &a, centered).unwrap(),
            "convert_basis(centered = {centered})"
        );
    }
    let keys: Vec<Vec<Poly<_>>> = (0..3).map(|_| vec![sampler.uniform_poly(&bq), sampler.uniform_poly(&bq)]).collect();
    let key_refs: Vec<&[Poly<_>]> = keys.iter().map(|k| k.as_slice()).collect();
    let digits = vec![an.clone(), bn.clone(), an];
    let limbs = [0, 1, 2];
    assert_eq!(
        backend.inner_product(&digits, &key_refs, &limbs, 2).unwrap(),
        cpu.inner_product(&digits, &key_refs, &limbs, 2).unwrap(),
        "inner_product"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use lycaon_math::Ntt;

    #[test]
    fn cpu_backend_conforms() {
        check_backend(&CpuBackend, 1024);
    }

    #[test]
    fn inner_product_matches_stepwise_sum() {
        let n = 64;
        let q = ntt_moduli(&[50, 45], n, &[]).unwrap();
        let basis = RnsBasis::new(n, &q).unwrap();
        let mut s = Sampler::from_seed([1; 32]);
        let digits: Vec<Poly<Ntt>> = (0..4).map(|_| s.uniform_poly(&basis)).collect();
        let keys: Vec<Vec<Poly<Ntt>>> = (0..4).map(|_| vec![s.uniform_poly(&basis)]).collect();
        let refs: Vec<&[Poly<Ntt>]> = keys.iter().map(|k| k.as_slice()).collect();
        let got = CpuBackend.inner_product(&digits, &refs, &[0, 1], 1).unwrap();
        let mut want = Poly::<Ntt>::zero(&basis);
        for (d, k) in digits.iter().zip(&keys) {
            want.mul_add_assign(d, &k[0]).unwrap();
        }
        assert_eq!(got[0], want);
    }
}
