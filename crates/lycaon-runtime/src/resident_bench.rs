//! `lycaon bench gpu`, operation level: each CKKS operation on resident operands (ciphertexts,
//! plaintexts and keys in the device's memory, [`ResidentEvaluator`]) against the host evaluator
//! on every core ([`RayonBackend`]), with the result downloaded and compared bit for bit. Device
//! times are from issue to completion (the backend is synchronised after each run); the boundary
//! (upload and download of a ciphertext) is timed on its own.

use std::sync::Arc;
use std::time::Instant;

use lycaon_backend::{RayonBackend, ResidentBackend};
use lycaon_ckks::rlwe::{Parameters, PublicKey, Security, SecretKey};
use lycaon_ckks::{Ciphertext, CkksContext, CkksError, Complex64, Encoder, EvaluationKeys, Evaluator, PublicKeyEncryptor, ResidentCiphertext, ResidentEvaluator};
use lycaon_math::Sampler;

use crate::device::Device;
use crate::{Result, RuntimeError};

/// One operation's median time on the resident backend and on the host, and whether the results
/// were identical.
#[derive(Clone, Debug, PartialEq)]
pub struct OpTiming {
    pub op: &'static str,
    pub device_ms: f64,
    pub cpu_ms: f64,
    pub matches_cpu: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ResidentReport {
    pub backend: String,
    pub n: usize,
    pub levels: usize,
    pub reps: usize,
    /// Evaluation-key bytes held in device memory.
    pub key_bytes: usize,
    /// Device buffers allocated during the timed runs after each operation's first (the pool's
    /// misses; 0 when every operation reuses memory, as it should).
    pub allocations_after_warmup: usize,
    pub ops: Vec<OpTiming>,
}

fn fhe(e: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::Fhe(e.to_string())
}

fn median_ms<T>(reps: usize, mut f: impl FnMut() -> Result<T>) -> Result<(f64, T)> {
    let mut out = f()?;
    let mut times = Vec::with_capacity(reps.max(1));
    for _ in 0..reps.max(1) {
        let start = Instant::now();
        out = f()?;
        times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok((times[times.len() / 2], out))
}

/// Benchmarks degree 2^log_n with a 60-bit q_0, `levels` 40-bit primes, two 61-bit special primes
/// and three key-switching digits; the ciphertexts sit at the top level. 128-bit secure from
/// log_n = 15 on (with up to about 20 levels at 2^15); smaller degrees are test sizes.
pub fn bench_resident<B: ResidentBackend>(backend: Arc<B>, log_n: u32, levels: usize, reps: usize) -> Result<ResidentReport> {
    let n = 1usize << log_n;
    let mut lit = lycaon_ckks::scale_stable_literal(n.max(1024), 60, 40, levels, &[61, 61]).map_err(fhe)?;
    if n < 1024 {
        let bits: Vec<u32> = std::iter::once(60).chain(std::iter::repeat_n(40, levels)).collect();
        lit = lycaon_ckks::rlwe::ParametersLiteral::ckks_from_bits(n, &bits, &[61, 61]).map_err(fhe)?;
    }
    lit.key_switch_digits = 3.min(levels + 1);
    if log_n < 15 {
        lit.security = Security::InsecureTestOnly;
    }
    let params = Parameters::with_backend(lit, RayonBackend::shared()).map_err(fhe)?;
    let ctx = CkksContext::new(&params, 2f64.powi(40)).map_err(fhe)?;
    let mut sampler = Sampler::from_os().map_err(fhe)?;
    let sk = SecretKey::generate(&params, &mut sampler).map_err(fhe)?;
    let pk = Arc::new(PublicKey::generate(&sk, &mut sampler).map_err(fhe)?);
    let steps: Vec<i64> = (1..=8).collect();
    // A 16-diagonal transform (4 baby steps x 4 giant steps, double hoisted), diagonals prepared
    // once on both sides.
    let slots = ctx.max_slots();
    let lt = lycaon_ckks::LinearTransform::new(&ctx, slots, (0..16i64).map(|k| (k, (0..slots).map(|i| Complex64::new(((i as i64 + k) % 9) as f64 / 9.0, 0.0)).collect())))
        .map_err(fhe)?
        .with_baby_steps(4)
        .map_err(fhe)?;
    let mut key_steps = steps.clone();
    key_steps.extend(lt.rotations());
    key_steps.sort_unstable();
    key_steps.dedup();
    let keys = EvaluationKeys::generate(&sk, &key_steps, true, &mut sampler).map_err(fhe)?;
    let host = Evaluator::new(&ctx, keys.clone());
    let device = ResidentEvaluator::new(&ctx, backend.clone(), &keys).map_err(fhe)?;
    let encoder = Encoder::new(&ctx);
    let mut enc = PublicKeyEncryptor::new(&ctx, pk).map_err(fhe)?;
    let top = ctx.max_level();
    let values: Vec<Complex64> = (0..ctx.max_slots()).map(|i| Complex64::new((i % 17) as f64 / 17.0, 0.0)).collect();
    let pt = encoder.encode(&values, top, ctx.scale_at(top).map_err(fhe)?).map_err(fhe)?;
    let a = enc.encrypt(&pt).map_err(fhe)?;
    let b = enc.encrypt(&pt).map_err(fhe)?;
    let ptm = encoder.encode(&values, top, host.plaintext_scale_for(&a).map_err(fhe)?).map_err(fhe)?;
    let (ra, rb) = (device.upload(&a).map_err(fhe)?, device.upload(&b).map_err(fhe)?);
    let rpt = device.upload_plaintext(&ptm).map_err(fhe)?;
    let lt_target = ctx.scale_at(top - 1).map_err(fhe)?;
    let sigma = host.linear_transform_scale(&a, lt_target).map_err(fhe)?;
    lt.prepare(&ctx, top, sigma).map_err(fhe)?;
    let diags = device.prepare_transform(&lt, top, sigma).map_err(fhe)?;

    type DeviceOp<'a, B> = Box<dyn Fn() -> std::result::Result<Vec<ResidentCiphertext<B>>, CkksError> + 'a>;
    type HostOp<'a> = Box<dyn Fn() -> std::result::Result<Vec<Ciphertext>, CkksError> + 'a>;
    let d = &device;
    let cases: Vec<(&'static str, DeviceOp<B>, HostOp)> = vec![
        ("add", Box::new(|| Ok(vec![d.add(&ra, &rb)?])), Box::new(|| Ok(vec![host.add(&a, &b)?]))),
        ("mul_plain", Box::new(|| Ok(vec![d.mul_plain(&ra, &rpt)?])), Box::new(|| Ok(vec![host.mul_plain(&a, &ptm)?]))),
        ("rescale", Box::new(|| Ok(vec![d.rescale(&ra)?])), Box::new(|| Ok(vec![host.rescale(&a)?]))),
        ("mul_relin", Box::new(|| Ok(vec![d.mul_relin(&ra, &rb)?])), Box::new(|| Ok(vec![host.mul_relin(&a, &b)?]))),
        ("mul_relin_rescale", Box::new(|| Ok(vec![d.mul_relin_rescale(&ra, &rb)?])), Box::new(|| Ok(vec![host.mul_relin_rescale(&a, &b)?]))),
        ("rotate", Box::new(|| Ok(vec![d.rotate(&ra, 1)?])), Box::new(|| Ok(vec![host.rotate(&a, 1)?]))),
        ("rotate_hoisted_8", Box::new(|| d.rotate_hoisted(&ra, &steps)), Box::new(|| host.rotate_hoisted(&a, &steps))),
        ("conjugate", Box::new(|| Ok(vec![d.conjugate(&ra)?])), Box::new(|| Ok(vec![host.conjugate(&a)?]))),
        (
            "linear_transform_16",
            Box::new(|| Ok(vec![d.linear_transform_prepared(&ra, &lt, &diags, lt_target)?])),
            Box::new(|| Ok(vec![host.linear_transform_to_scale(&a, &lt, lt_target)?])),
        ),
    ];
    let mut ops = Vec::with_capacity(cases.len() + 2);
    let mut allocations_after_warmup = 0;
    for (op, on_device, on_host) in &cases {
        let run_on_device = || {
            let r = on_device().map_err(fhe)?;
            backend.synchronize().map_err(fhe)?;
            Ok(r)
        };
        drop(run_on_device()?);
        let before = backend.allocations();
        let (device_ms, got) = median_ms(reps, run_on_device)?;
        allocations_after_warmup += backend.allocations().zip(before).map_or(0, |(a, b)| a - b);
        let (cpu_ms, want) = median_ms(reps, || on_host().map_err(fhe))?;
        let got = got.iter().map(|c| device.download(c)).collect::<std::result::Result<Vec<_>, _>>().map_err(fhe)?;
        let matches_cpu = got.len() == want.len() && got.iter().zip(&want).all(|(g, w)| same(g, w));
        ops.push(OpTiming { op, device_ms, cpu_ms, matches_cpu });
    }
    // Encoding where the plaintext lives: only the slot values travel.
    let scale_top = ctx.scale_at(top).map_err(fhe)?;
    let (encode_ms, pt_dev) = median_ms(reps, || {
        let p = device.encode(&values, slots, top, scale_top).map_err(fhe)?;
        backend.synchronize().map_err(fhe)?;
        Ok(p)
    })?;
    let (encode_cpu_ms, pt_host) = median_ms(reps, || encoder.encode_with_slots(&values, slots, top, scale_top).map_err(fhe))?;
    ops.push(OpTiming { op: "encode", device_ms: encode_ms, cpu_ms: encode_cpu_ms, matches_cpu: device.download_plaintext(&pt_dev).map_err(fhe)? == pt_host });
    // The session boundary: one ciphertext in and out.
    let (up_ms, _) = median_ms(reps, || {
        let r = device.upload(&a).map_err(fhe)?;
        backend.synchronize().map_err(fhe)?;
        Ok(r)
    })?;
    ops.push(OpTiming { op: "upload", device_ms: up_ms, cpu_ms: 0.0, matches_cpu: true });
    let (down_ms, back) = median_ms(reps, || device.download(&ra).map_err(fhe))?;
    ops.push(OpTiming { op: "download", device_ms: down_ms, cpu_ms: 0.0, matches_cpu: same(&back, &a) });
    Ok(ResidentReport { backend: backend.name().to_string(), n, levels, reps, key_bytes: device.key_bytes(), allocations_after_warmup, ops })
}

fn same(a: &Ciphertext, b: &Ciphertext) -> bool {
    a.inner().parts() == b.inner().parts() && a.scale().to_bits() == b.scale().to_bits()
}

/// [`bench_resident`] on a device: the CUDA backend for `Cuda(n)`; for `Cpu`, resident memory on
/// the host (the reference implementation, so the comparison shows its overhead, not a speed-up).
/// Errors: [`crate::device::DeviceError::Unavailable`] when the CUDA backend is missing.
pub fn bench_resident_on(device: Device, log_n: u32, levels: usize, reps: usize) -> Result<ResidentReport> {
    match device {
        Device::Cpu => bench_resident(Arc::new(lycaon_backend::CpuBackend), log_n, levels, reps),
        Device::Cuda(ordinal) => {
            #[cfg(feature = "cuda")]
            {
                let backend = lycaon_cuda::CudaBackend::new(ordinal).map_err(|reason| crate::device::DeviceError::Unavailable { device, reason })?;
                bench_resident(Arc::new(backend), log_n, levels, reps)
            }
            #[cfg(not(feature = "cuda"))]
            {
                let _ = ordinal;
                Err(crate::device::DeviceError::Unavailable { device, reason: lycaon_cuda::CudaError::NotBuilt }.into())
            }
        }
    }
}

/// One bootstrapping of `shape` with the ciphertext, keys and diagonals resident on `backend`:
/// keys generated on the host and uploaded once, a first call (which encodes and uploads the
/// transforms' diagonals), a timed second call (synchronised), precision against the input, and
/// the host's bootstrap of the same ciphertext (every core) for time and a bit-exact check. Keys
/// as [`crate::ckks_bench::bootstrap_timing`]'s, plus `bootstrap_device`,
/// `bootstrap_matches_cpu`, `bootstrap_cpu_reference_us` and `bootstrap_device_diagonal_bytes`.
pub fn resident_bootstrap_timing<B: ResidentBackend>(seed: u64, backend: Arc<B>, shape: lycaon_ckks::bootstrap::BootstrapParams, secure: bool) -> Result<serde_json::Value> {
    use lycaon_ckks::bootstrap::{BootstrapKeys, Bootstrapper, DiagonalCache};
    use lycaon_ckks::{precision_stats, Decryptor};
    use rand::{RngExt, SeedableRng};
    let mut lit = shape.literal().map_err(fhe)?;
    if !secure {
        lit.security = Security::InsecureTestOnly;
    }
    let scale = shape.top_scale(&lit);
    let params = Parameters::with_backend(lit, RayonBackend::shared()).map_err(fhe)?;
    let ctx = CkksContext::new(&params, scale).map_err(fhe)?;
    let t0 = Instant::now();
    let mut sampler = Sampler::from_os().map_err(fhe)?;
    let sk = SecretKey::generate(&params, &mut sampler).map_err(fhe)?;
    let pk = PublicKey::generate(&sk, &mut sampler).map_err(fhe)?;
    let boot = Bootstrapper::new(&ctx, shape.clone()).map_err(fhe)?;
    let BootstrapKeys { evaluation, encapsulation } = boot.generate_keys(&sk, &mut sampler).map_err(fhe)?;
    let keygen_s = t0.elapsed().as_secs_f64();
    let t_up = Instant::now();
    let mut device = ResidentEvaluator::new(&ctx, backend.clone(), &evaluation).map_err(fhe)?;
    if let Some(keys) = &encapsulation {
        device.attach_encapsulation_keys(keys).map_err(fhe)?;
    }
    backend.synchronize().map_err(fhe)?;
    let key_upload_s = t_up.elapsed().as_secs_f64();
    let boot = boot.with_encapsulation_keys(encapsulation.clone());
    let encoder = Encoder::new(&ctx);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let x: Vec<f64> = (0..shape.slots()).map(|_| rng.random_range(-1.0..1.0)).collect();
    let pt = encoder.encode_real(&x, 0, ctx.scale_at(0).map_err(fhe)?).map_err(fhe)?;
    let ct = PublicKeyEncryptor::new(&ctx, Arc::new(pk)).map_err(fhe)?.encrypt(&pt).map_err(fhe)?;
    let rct = device.upload(&ct).map_err(fhe)?;
    let cache = DiagonalCache::default();
    let t1 = Instant::now();
    drop(boot.bootstrap_on(&device, &rct, encapsulation.as_ref(), &cache).map_err(fhe)?);
    backend.synchronize().map_err(fhe)?;
    let first_s = t1.elapsed().as_secs_f64();
    let t2 = Instant::now();
    let out = boot.bootstrap_on(&device, &rct, encapsulation.as_ref(), &cache).map_err(fhe)?;
    backend.synchronize().map_err(fhe)?;
    let seconds = t2.elapsed().as_secs_f64();
    let out = device.download(&out).map_err(fhe)?;
    let got = encoder.decode_real(&Decryptor::new(&ctx, &sk).map_err(fhe)?.decrypt(&out).map_err(fhe)?).map_err(fhe)?;
    let stats = precision_stats(&x, &got[..x.len()]);
    // The host's bootstrap of the same ciphertext: its time (after its own first call) and
    // whether the device's result is the same, bit for bit.
    let host = Evaluator::new(&ctx, evaluation);
    boot.prepare(&host).map_err(fhe)?;
    let t3 = Instant::now();
    let want = boot.bootstrap(&host, &ct).map_err(fhe)?;
    let cpu_reference_s = t3.elapsed().as_secs_f64();
    Ok(serde_json::json!({
        "bootstrap_device": backend.name(),
        "bootstrap_us": seconds * 1e6,
        "bootstrap_first_s": first_s,
        "bootstrap_keygen_s": keygen_s,
        "bootstrap_key_upload_s": key_upload_s,
        "bootstrap_bits": stats.mean_bits,
        "bootstrap_min_bits": stats.min_bits,
        "bootstrap_levels_left": out.level(),
        "bootstrap_key_bytes": device.key_bytes(),
        "bootstrap_matches_cpu": same(&out, &want),
        "bootstrap_cpu_reference_us": cpu_reference_s * 1e6,
        "bootstrap_params": format!("n = {}, {} levels, log QP = {:.0}", params.n(), ctx.max_level(), params.log2_qp()),
        "bootstrap_log2_qp": params.log2_qp(),
        "bootstrap_encapsulation_weight": shape.encapsulation_weight,
    }))
}

/// The logN = 16 full-slot bootstrapping on a device: the host path
/// ([`crate::ckks_bench::bootstrap_timing`] on every core) for `Cpu`, the resident path on the
/// CUDA backend for `Cuda(n)`. Errors: the device is unavailable.
pub fn bootstrap_timing_on(seed: u64, device: Device) -> Result<serde_json::Value> {
    let shape = lycaon_ckks::bootstrap::BootstrapParams::logn16_full_slots();
    match device {
        Device::Cpu => crate::ckks_bench::bootstrap_timing(seed, RayonBackend::shared()),
        Device::Cuda(ordinal) => {
            #[cfg(feature = "cuda")]
            {
                let backend = lycaon_cuda::CudaBackend::new(ordinal).map_err(|reason| crate::device::DeviceError::Unavailable { device, reason })?;
                resident_bootstrap_timing(seed, Arc::new(backend), shape, true)
            }
            #[cfg(not(feature = "cuda"))]
            {
                let _ = (ordinal, shape);
                Err(crate::device::DeviceError::Unavailable { device, reason: lycaon_cuda::CudaError::NotBuilt }.into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_operations_on_host_memory_match_the_host_evaluator() {
        let report = bench_resident_on(Device::Cpu, 6, 3, 1).unwrap();
        assert_eq!(report.ops.len(), 12);
        assert!(report.ops.iter().all(|o| o.matches_cpu && o.device_ms >= 0.0), "{report:?}");
        assert!(report.key_bytes > 0);
    }

    #[test]
    fn resident_bootstrap_on_host_memory_matches_the_host_and_reaches_precision() {
        let shape = lycaon_ckks::bootstrap::BootstrapParams::toy(10, 4, 1);
        let out = resident_bootstrap_timing(3, Arc::new(lycaon_backend::CpuBackend), shape, false).unwrap();
        assert_eq!(out["bootstrap_matches_cpu"], true, "{out}");
        assert!(out["bootstrap_bits"].as_f64().unwrap() > 10.0, "{out}");
        assert_eq!(out["bootstrap_levels_left"], 1);
    }

    #[test]
    fn bootstrapping_on_a_missing_gpu_says_why() {
        if lycaon_cuda::BUILT_WITH_CUDA {
            return;
        }
        let err = bootstrap_timing_on(1, Device::Cuda(0)).unwrap_err().to_string();
        assert!(err.contains("cuda:0 is not available"), "{err}");
    }
}
