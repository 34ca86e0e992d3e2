//! Times every kernel of a backend against [`CpuBackend`] on the same random inputs and checks
//! that the outputs agree bit for bit. Used by `lycaon bench gpu`; works for any backend, so it
//! is tested here with the CPU and emulated backends.

use std::time::Instant;

use lycaon_backend::{Backend, CpuBackend};
use lycaon_math::{ntt_moduli, rotation_galois_element, Automorphism, BaseConverter, MathError, Poly, RnsBasis, Sampler};

/// One kernel's median time on the backend and on the CPU reference, and whether they agreed.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelTiming {
    pub kernel: &'static str,
    pub backend_ms: f64,
    pub cpu_ms: f64,
    pub matches_cpu: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct BenchReport {
    pub backend: String,
    pub n: usize,
    pub limbs: usize,
    pub reps: usize,
    pub kernels: Vec<KernelTiming>,
}

/// One kernel run on a backend, its output as words.
type KernelRun<'a> = &'a dyn Fn(&dyn Backend) -> Result<Vec<u64>, MathError>;

fn median_ms<T>(reps: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut times = Vec::with_capacity(reps);
    let mut last = None;
    for _ in 0..reps.max(1) {
        let start = Instant::now();
        let out = f();
        times.push(start.elapsed().as_secs_f64() * 1e3);
        last = Some(out);
    }
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], last.expect("at least one repetition"))
}

/// Benchmarks at degree 2^log_n over `limbs` 50-bit primes, with 2 special 61-bit primes as the
/// base-conversion target and a 3-digit, 2-output inner product (one key switch's shape). Each
/// kernel's time includes whatever transfers the backend makes per call.
pub fn bench_backend(backend: &dyn Backend, log_n: u32, limbs: usize, reps: usize) -> Result<BenchReport, MathError> {
    let n = 1usize << log_n;
    let cpu = CpuBackend;
    let q = ntt_moduli(&vec![50; limbs.max(1)], n, &[])?;
    let taken: Vec<u64> = q.iter().map(|m| m.value()).collect();
    let p = ntt_moduli(&[61, 61], n, &taken)?;
    let (bq, bp) = (RnsBasis::new(n, &q)?, RnsBasis::new(n, &p)?);
    let mut sampler = Sampler::from_seed([7; 32]);
    let a_ntt = sampler.uniform_poly(&bq);
    let b_ntt = sampler.uniform_poly(&bq);
    let a = Poly::from_data(&bq, a_ntt.data().to_vec())?;
    let auto = Automorphism::new(rotation_galois_element(1, n), n)?;
    let conv = BaseConverter::new(bq.clone(), bp)?;
    let keys: Vec<Vec<Poly<_>>> = (0..3).map(|_| vec![sampler.uniform_poly(&bq), sampler.uniform_poly(&bq)]).collect();
    let key_refs: Vec<&[Poly<_>]> = keys.iter().map(|k| k.as_slice()).collect();
    let digits = vec![a_ntt.clone(), b_ntt.clone(), a_ntt.clone()];
    let limb_ids: Vec<usize> = (0..bq.len()).collect();

    let mut kernels = Vec::new();
    let mut time = |kernel: &'static str, run: KernelRun| -> Result<(), MathError> {
        let (backend_ms, got) = median_ms(reps, || run(backend));
        let (cpu_ms, want) = median_ms(reps, || run(&cpu));
        kernels.push(KernelTiming { kernel, backend_ms, cpu_ms, matches_cpu: got? == want? });
        Ok(())
    };
    time("ntt", &|be| Ok(be.ntt(a.clone())?.into_data()))?;
    time("intt", &|be| Ok(be.intt(a_ntt.clone())?.into_data()))?;
    time("mul_assign", &|be| {
        let mut x = a_ntt.clone();
        be.mul_assign(&mut x, &b_ntt)?;
        Ok(x.into_data())
    })?;
    time("automorphism_ntt", &|be| Ok(be.automorphism_ntt(&a_ntt, &auto)?.into_data()))?;
    time("convert_basis", &|be| Ok(be.convert_basis(&conv, &a, false)?.into_data()))?;
    time("convert_basis_centered", &|be| Ok(be.convert_basis(&conv, &a, true)?.into_data()))?;
    time("inner_product", &|be| Ok(be.inner_product(&digits, &key_refs, &limb_ids, 2)?.into_iter().flat_map(Poly::into_data).collect()))?;
    Ok(BenchReport { backend: backend.name().to_string(), n, limbs: bq.len(), reps, kernels })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_agrees_with_itself() {
        let report = bench_backend(&CpuBackend, 5, 2, 1).unwrap();
        assert_eq!(report.kernels.len(), 7);
        assert!(report.kernels.iter().all(|k| k.matches_cpu && k.backend_ms >= 0.0), "{report:?}");
    }
}
