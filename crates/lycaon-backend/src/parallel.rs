//! A CPU backend that runs each kernel's limbs (or outputs) on rayon's thread pool. It computes
//! exactly what [`CpuBackend`] computes, limb by limb, so the results agree bit for bit (checked
//! by the conformance suite in the tests below).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::{check_inner_product_args, Backend, CpuBackend};
use lycaon_math::{lazy_capacity, Automorphism, BaseConverter, Coeff, MathError, Modulus, Ntt, Poly};
use num_traits::ToPrimitive;
use rayon::prelude::*;

/// (Q/q_i) mod p_j for a conversion from Q to P, indexed [j][i].
type ConversionTable = Arc<Vec<Vec<u64>>>;

/// Source primes and target primes of a conversion.
type BasisPair = (Vec<u64>, Vec<u64>);

/// The multi-threaded CPU backend. Build parameters with
/// `Parameters::with_backend(literal, RayonBackend::shared())` to make every key switch,
/// NTT, base conversion and inner product use all cores.
#[derive(Debug, Default)]
pub struct RayonBackend {
    /// Base-conversion constants per (source primes, target primes), computed once.
    tables: RwLock<HashMap<BasisPair, ConversionTable>>,
}

impl RayonBackend {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn shared() -> Arc<dyn Backend> {
        Arc::new(Self::new())
    }

    fn table(&self, conv: &BaseConverter) -> ConversionTable {
        let key = (conv.from_basis().moduli().iter().map(|q| q.value()).collect::<Vec<_>>(), conv.to_basis().moduli().iter().map(|q| q.value()).collect::<Vec<_>>());
        if let Some(t) = self.tables.read().ok().and_then(|m| m.get(&key).cloned()) {
            return t;
        }
        let product = conv.from_basis().product();
        let table: Vec<Vec<u64>> = key
            .1
            .iter()
            .map(|&p| key.0.iter().map(|&q| ((product / q) % p).to_u64().unwrap_or(0)).collect())
            .collect();
        let table = Arc::new(table);
        if let Ok(mut m) = self.tables.write() {
            m.insert(key, table.clone());
        }
        table
    }
}

impl Backend for RayonBackend {
    fn name(&self) -> &str {
        "cpu-rayon"
    }

    fn ntt(&self, poly: Poly<Coeff>) -> Result<Poly<Ntt>, MathError> {
        let basis = poly.basis().clone();
        let n = basis.n();
        let mut data = poly.into_data();
        data.par_chunks_exact_mut(n).zip(basis.plans().par_iter()).for_each(|(limb, plan)| plan.forward(limb));
        Ok(Poly::from_kernel_output(&basis, data))
    }

    fn intt(&self, poly: Poly<Ntt>) -> Result<Poly<Coeff>, MathError> {
        let basis = poly.basis().clone();
        let n = basis.n();
        let mut data = poly.into_data();
        data.par_chunks_exact_mut(n).zip(basis.plans().par_iter()).for_each(|(limb, plan)| plan.inverse(limb));
        Ok(Poly::from_kernel_output(&basis, data))
    }

    fn mul_assign(&self, a: &mut Poly<Ntt>, b: &Poly<Ntt>) -> Result<(), MathError> {
        if !a.basis().same_primes(b.basis()) {
            return Err(MathError::BasisMismatch { lhs: a.num_limbs(), rhs: b.num_limbs() });
        }
        let n = a.n();
        let moduli = a.basis().moduli().to_vec();
        a.data_mut().par_chunks_exact_mut(n).zip(b.data().par_chunks_exact(n)).zip(moduli).for_each(|((x, y), q)| {
            x.iter_mut().zip(y).for_each(|(u, &v)| *u = q.mul(*u, v));
        });
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
        let (from, to) = (conv.from_basis(), conv.to_basis());
        // The exact (centred) variant and single-prime sources keep the reference path.
        if centered || from.len() == 1 || !poly.basis().same_primes(from) {
            return CpuBackend.convert_basis(conv, poly, centered);
        }
        let n = from.n();
        let table = self.table(conv);
        // y_i = x_i (Q/q_i)^{-1} mod q_i, then x + u Q = sum_i y_i (Q/q_i) mod p_j (Bajard et al.).
        let mut scaled = vec![0u64; from.len() * n];
        scaled.par_chunks_exact_mut(n).enumerate().for_each(|(i, y)| {
            let (q, c) = (from.moduli()[i], from.punctured_inverse(i));
            y.iter_mut().zip(poly.limb(i)).for_each(|(o, &x)| *o = q.mul_shoup(x, c.value, c.shoup));
        });
        let mut out = vec![0u64; to.len() * n];
        out.par_chunks_exact_mut(n).enumerate().for_each(|(j, o)| {
            let p = to.moduli()[j];
            let cap = lazy_capacity(&p).saturating_sub(1).max(1) as usize;
            let mut acc = [0u128; BLOCK];
            let mut start = 0;
            while start < n {
                let end = (start + BLOCK).min(n);
                let len = end - start;
                acc[..len].iter_mut().for_each(|a| *a = 0);
                for (i, &m) in table[j].iter().enumerate() {
                    if i > 0 && i % cap == 0 {
                        acc[..len].iter_mut().for_each(|a| *a = p.reduce_u128(*a) as u128);
                    }
                    for (a, &y) in acc[..len].iter_mut().zip(&scaled[i * n + start..i * n + end]) {
                        *a += y as u128 * m as u128;
                    }
                }
                o[start..end].iter_mut().zip(&acc[..len]).for_each(|(x, &a)| *x = p.reduce_u128(a));
                start = end;
            }
        });
        Ok(Poly::from_kernel_output(to, out))
    }

    fn inner_product(&self, digits: &[Poly<Ntt>], keys: &[&[Poly<Ntt>]], key_limbs: &[usize], outputs: usize) -> Result<Vec<Poly<Ntt>>, MathError> {
        let basis = check_inner_product_args(digits, keys, key_limbs, outputs)?;
        let n = basis.n();
        let key_rows: Vec<Vec<&Poly<Ntt>>> = (0..outputs).map(|o| keys.iter().map(|k| &k[o]).collect()).collect();
        let mut result: Vec<Vec<u64>> = (0..outputs).map(|_| vec![0u64; basis.len() * n]).collect();
        if outputs == 2 {
            let (first, second) = result.split_at_mut(1);
            first[0].par_chunks_exact_mut(n).zip(second[0].par_chunks_exact_mut(n)).enumerate().try_for_each(|(i, (o0, o1))| {
                let q = basis.moduli()[i];
                let x: Vec<&[u64]> = digits.iter().map(|d| d.limb(i)).collect();
                let y0: Vec<&[u64]> = key_rows[0].iter().map(|k| k.limb(key_limbs[i])).collect();
                let y1: Vec<&[u64]> = key_rows[1].iter().map(|k| k.limb(key_limbs[i])).collect();
                dot_blocked(&q, &x, &[&y0, &y1], &mut [o0, o1])
            })?;
        } else {
            for (o, out) in result.iter_mut().enumerate() {
                out.par_chunks_exact_mut(n).enumerate().try_for_each(|(i, limb)| {
                    let q = basis.moduli()[i];
                    let x: Vec<&[u64]> = digits.iter().map(|d| d.limb(i)).collect();
                    let y: Vec<&[u64]> = key_rows[o].iter().map(|k| k.limb(key_limbs[i])).collect();
                    dot_blocked(&q, &x, &[&y], &mut [limb])
                })?;
            }
        }
        let result = result.into_iter().map(|d| Poly::from_kernel_output(&basis, d)).collect();
        Ok(result)
    }
}

/// Coefficients per block of the blocked dot products: two u128 accumulators of this size stay in
/// L1, and every input is streamed once.
const BLOCK: usize = 512;

/// outs[o][k] = sum_j xs[j][k] ys[o][j][k] mod q, accumulated in u128 per block of coefficients
/// (reducing early only if the sum could overflow) and reduced once: the same values as a
/// term-by-term modular sum. Schemes call it for point-wise dot products that bypass the trait
/// (CKKS's linear transforms).
///
/// Every `xs[j]`, `ys[o][j]` and `outs[o]` is one limb of residues below q, all of one length,
/// with one `ys[o]` per output and one `ys[o][j]` per `xs[j]`; otherwise `LimbCount` names the
/// first count or length that differs.
pub fn dot_blocked(q: &Modulus, xs: &[&[u64]], ys: &[&[&[u64]]], outs: &mut [&mut [u64]]) -> Result<(), MathError> {
    let n = outs.first().map_or(0, |o| o.len());
    if ys.len() != outs.len() {
        return Err(MathError::LimbCount { expected: outs.len(), found: ys.len() });
    }
    for y in ys {
        if y.len() != xs.len() {
            return Err(MathError::LimbCount { expected: xs.len(), found: y.len() });
        }
    }
    let mut lengths = xs.iter().map(|x| x.len()).chain(ys.iter().flat_map(|y| y.iter().map(|v| v.len()))).chain(outs.iter().map(|o| o.len()));
    if let Some(found) = lengths.find(|&len| len != n) {
        return Err(MathError::LimbCount { expected: n, found });
    }
    let cap = lazy_capacity(q).saturating_sub(1).max(1) as usize;
    let mut acc = vec![[0u128; BLOCK]; outs.len()];
    let mut start = 0;
    while start < n {
        let end = (start + BLOCK).min(n);
        let len = end - start;
        acc.iter_mut().for_each(|a| a[..len].iter_mut().for_each(|v| *v = 0));
        for (j, x) in xs.iter().enumerate() {
            if j > 0 && j % cap == 0 {
                acc.iter_mut().for_each(|a| a[..len].iter_mut().for_each(|v| *v = q.reduce_u128(*v) as u128));
            }
            let x = &x[start..end];
            for (a, y) in acc.iter_mut().zip(ys) {
                let y = &y[j][start..end];
                for ((s, &u), &v) in a[..len].iter_mut().zip(x).zip(y) {
                    *s += u as u128 * v as u128;
                }
            }
        }
        for (a, out) in acc.iter().zip(outs.iter_mut()) {
            out[start..end].iter_mut().zip(&a[..len]).for_each(|(o, &v)| *o = q.reduce_u128(v));
        }
        start = end;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_the_reference_backend() {
        for n in [16, 1024] {
            crate::conformance::check_backend(&RayonBackend::new(), n);
        }
    }

    #[test]
    fn dot_blocked_matches_a_term_by_term_sum_and_checks_lengths() {
        let q = lycaon_math::ntt_moduli(&[60], 16, &[]).unwrap()[0];
        let xs: Vec<Vec<u64>> = (0..5u64).map(|j| (0..1030u64).map(|k| q.value() - 1 - j * k).collect()).collect();
        let ys: Vec<Vec<u64>> = (0..5u64).map(|j| (0..1030u64).map(|k| q.value() - 2 - j - k).collect()).collect();
        let (x, y): (Vec<&[u64]>, Vec<&[u64]>) = (xs.iter().map(|v| v.as_slice()).collect(), ys.iter().map(|v| v.as_slice()).collect());
        let mut out = vec![0u64; 1030];
        dot_blocked(&q, &x, &[&y], &mut [&mut out]).unwrap();
        for (k, &o) in out.iter().enumerate() {
            let want = (0..5).fold(0u64, |s, j| q.add(s, q.mul(xs[j][k], ys[j][k])));
            assert_eq!(o, want, "coefficient {k}");
        }
        let mut short = vec![0u64; 1029];
        assert!(matches!(dot_blocked(&q, &x, &[&y], &mut [&mut short]), Err(MathError::LimbCount { expected: 1029, found: 1030 })));
        assert!(matches!(dot_blocked(&q, &x[..4], &[&y], &mut [&mut out]), Err(MathError::LimbCount { expected: 4, found: 5 })));
        assert!(matches!(dot_blocked(&q, &x, &[&y, &y], &mut [&mut out]), Err(MathError::LimbCount { expected: 1, found: 2 })));
    }
}
