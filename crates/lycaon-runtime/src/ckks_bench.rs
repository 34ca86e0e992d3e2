//! `lycaon bench ckks`, Lycaon's side: each CKKS operation timed on the backend the runtime
//! chooses (median of `reps` runs after one warm-up, inputs prepared untimed), its precision
//! checked once against float64, and the bytes of the keys it uses; and one logN = 16 full-slot
//! bootstrapping. The peers (SEAL, Lattigo) run from Python beside it.

use std::sync::Arc;
use std::time::Instant;

use lycaon_ckks::bootstrap::{BootstrapParams, Bootstrapper};
use lycaon_ckks::rlwe::{GaloisKeys, Parameters, PublicKey, RelinKey, SecretKey};
use lycaon_ckks::{
    precision_stats, rotation_galois_element, ChebyshevPoly, CkksContext, Complex64, Decryptor, Encoder, EvaluationKeys, Evaluator, LinearTransform,
    PublicKeyEncryptor,
};
use lycaon_math::Sampler;
use rand::{RngExt, SeedableRng};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::{Result, RuntimeError};

fn ckks(e: lycaon_ckks::CkksError) -> RuntimeError {
    RuntimeError::Fhe(e.to_string())
}

fn rlwe(e: lycaon_ckks::rlwe::RlweError) -> RuntimeError {
    RuntimeError::Fhe(e.to_string())
}

/// One benchmarked parameter set and the linear transform's shape.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpsSpec {
    pub log_n: u32,
    pub log_q: Vec<u32>,
    pub log_p: Vec<u32>,
    pub log_scale: u32,
    pub reps: usize,
    /// Consecutive diagonals of the linear transform (None: all slots).
    #[serde(default)]
    pub lt_diagonals: Option<usize>,
    /// Level the transform runs at (None: the top).
    #[serde(default)]
    pub lt_level: Option<usize>,
    #[serde(default = "default_hoisted")]
    pub hoisted: usize,
    #[serde(default = "default_degree")]
    pub poly_degree: usize,
    #[serde(default)]
    pub seed: u64,
}

fn default_hoisted() -> usize {
    8
}

fn default_degree() -> usize {
    63
}

fn median_us(reps: usize, mut op: impl FnMut() -> Result<()>) -> Result<f64> {
    op()?;
    let mut samples = Vec::with_capacity(reps.max(1));
    for _ in 0..reps.max(1) {
        let t0 = Instant::now();
        op()?;
        samples.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}

fn bits(want: &[f64], got: &[f64]) -> f64 {
    precision_stats(want, &got[..want.len()]).mean_bits
}

/// Timings, precision and key bytes per operation, keys `<op>_us`, `<op>_bits`,
/// `<op>_key_bytes` (the shape `lycaon.bench.ckks` reports).
pub fn op_timings(spec: &OpsSpec, backend: Arc<dyn lycaon_backend::Backend>) -> Result<Value> {
    let n = 1usize << spec.log_n;
    let (&log_q0, scales) = spec.log_q.split_first().ok_or_else(|| RuntimeError::Program("log_q is empty".into()))?;
    let lit = lycaon_ckks::scale_stable_literal(n, log_q0, spec.log_scale, scales.len(), &spec.log_p).map_err(ckks)?;
    let params = Parameters::with_backend(lit, backend).map_err(rlwe)?;
    let ctx = CkksContext::new(&params, 2f64.powi(spec.log_scale as i32)).map_err(ckks)?;
    let (slots, top) = (ctx.max_slots(), ctx.max_level());
    let d = spec.lt_diagonals.unwrap_or(slots).clamp(1, slots);
    let lt_level = spec.lt_level.unwrap_or(top).min(top);
    let mut rng = rand::rngs::StdRng::seed_from_u64(spec.seed);
    let x: Vec<f64> = (0..slots).map(|_| rng.random_range(-1.0..1.0)).collect();
    let y: Vec<f64> = (0..slots).map(|_| rng.random_range(-1.0..1.0)).collect();
    let mut out = Map::new();
    out.insert("log2_qp".into(), json!(params.log2_qp()));
    out.insert("lt_diagonals".into(), json!(d));
    out.insert("lt_level".into(), json!(lt_level));

    let t0 = Instant::now();
    let mut sampler = Sampler::from_os()?;
    let sk = SecretKey::generate(&params, &mut sampler).map_err(rlwe)?;
    let pk = PublicKey::generate(&sk, &mut sampler).map_err(rlwe)?;
    let rk = Arc::new(RelinKey::generate(&sk, &mut sampler).map_err(rlwe)?);
    let steps: Vec<i64> = (1..=spec.hoisted as i64).collect();
    let gk = Arc::new(EvaluationKeys::galois_keys(&sk, &steps, false, &mut sampler).map_err(ckks)?);
    out.insert("keygen_s".into(), json!(t0.elapsed().as_secs_f64()));
    let encoder = Encoder::new(&ctx);
    let mut encryptor = PublicKeyEncryptor::new(&ctx, Arc::new(pk)).map_err(ckks)?;
    let decryptor = Decryptor::new(&ctx, &sk).map_err(ckks)?;
    let ev = Evaluator::new(&ctx, EvaluationKeys { relin: Some(rk.clone()), galois: Some(gk.clone()) });
    let decode = |ct: &lycaon_ckks::Ciphertext| -> Result<Vec<f64>> { encoder.decode_real(&decryptor.decrypt(ct).map_err(ckks)?).map_err(ckks) };
    let scale = ctx.scale_at(top).map_err(ckks)?;
    let cx = encryptor.encrypt(&encoder.encode_real(&x, top, scale).map_err(ckks)?).map_err(ckks)?;
    let cy = encryptor.encrypt(&encoder.encode_real(&y, top, scale).map_err(ckks)?).map_err(ckks)?;

    let prod = ev.mul_relin(&cx, &cy).map_err(ckks)?;
    out.insert("mul_relin_us".into(), json!(median_us(spec.reps, || ev.mul_relin(&cx, &cy).map(drop).map_err(ckks))?));
    out.insert("rescale_us".into(), json!(median_us(spec.reps, || ev.rescale(&prod).map(drop).map_err(ckks))?));
    let xy: Vec<f64> = x.iter().zip(&y).map(|(a, b)| a * b).collect();
    let b = bits(&xy, &decode(&ev.rescale(&prod).map_err(ckks)?)?);
    out.insert("mul_relin_bits".into(), json!(b));
    out.insert("rescale_bits".into(), json!(b));
    out.insert("mul_relin_key_bytes".into(), json!(rk.key().memory_bytes()));
    out.insert("rotate_1_us".into(), json!(median_us(spec.reps, || ev.rotate(&cx, 1).map(drop).map_err(ckks))?));
    let rolled = |k: usize| -> Vec<f64> { (0..slots).map(|i| x[(i + k) % slots]).collect() };
    out.insert("rotate_1_bits".into(), json!(bits(&rolled(1), &decode(&ev.rotate(&cx, 1).map_err(ckks)?)?)));
    out.insert("rotate_1_key_bytes".into(), json!(gk.memory_bytes() / gk.len().max(1)));
    let name = format!("rotate_hoisted_{}", spec.hoisted);
    out.insert(format!("{name}_us"), json!(median_us(spec.reps, || ev.rotate_hoisted(&cx, &steps).map(drop).map_err(ckks))?));
    let rotated = ev.rotate_hoisted(&cx, &steps).map_err(ckks)?;
    let (mut want, mut got) = (Vec::new(), Vec::new());
    for (k, c) in steps.iter().zip(&rotated) {
        want.extend(rolled(*k as usize));
        got.extend(decode(c)?);
    }
    out.insert(format!("{name}_bits"), json!(bits(&want, &got)));
    out.insert(format!("{name}_key_bytes"), json!(gk.memory_bytes()));

    // The linear transform: d consecutive diagonals at lt_level, its keys only up to that level.
    let diags: Vec<Vec<f64>> = (0..d).map(|_| (0..slots).map(|_| rng.random_range(-1.0..1.0) / d as f64).collect()).collect();
    let lt = LinearTransform::new(&ctx, slots, diags.iter().enumerate().map(|(k, v)| (k as i64, v.iter().map(|&r| Complex64::new(r, 0.0)).collect())))
        .map_err(ckks)?;
    let pairs: Vec<(u64, usize)> = lt.rotations().iter().map(|&s| (rotation_galois_element(s, n), lt_level)).filter(|&(g, _)| g != 1).collect();
    let lt_keys = Arc::new(GaloisKeys::generate_at(&sk, &pairs, &mut sampler).map_err(rlwe)?);
    let ev_lt = Evaluator::new(&ctx, EvaluationKeys { relin: None, galois: Some(lt_keys.clone()) });
    let cl = encryptor.encrypt(&encoder.encode_real(&x, lt_level, ctx.scale_at(lt_level).map_err(ckks)?).map_err(ckks)?).map_err(ckks)?;
    if lt_level > 0 {
        let sigma = ev_lt.linear_transform_scale(&cl, ctx.scale_at(lt_level - 1).map_err(ckks)?).map_err(ckks)?;
        lt.prepare(&ctx, lt_level, sigma).map_err(ckks)?;
    }
    out.insert("linear_transform_us".into(), json!(median_us((spec.reps / 2).max(1), || ev_lt.linear_transform(&cl, &lt).map(drop).map_err(ckks))?));
    let mut want = vec![0.0; slots];
    for (k, diag) in diags.iter().enumerate() {
        for (i, w) in want.iter_mut().enumerate() {
            *w += diag[i] * x[(i + k) % slots];
        }
    }
    out.insert("linear_transform_bits".into(), json!(bits(&want, &decode(&ev_lt.linear_transform(&cl, &lt).map_err(ckks)?)?)));
    out.insert("linear_transform_key_bytes".into(), json!(lt_keys.memory_bytes()));
    out.insert("linear_transform_galois_keys".into(), json!(lt_keys.len()));
    out.insert("linear_transform_baby_steps".into(), json!(lt.baby_steps()));
    drop((lt, lt_keys, ev_lt, diags));

    let coeffs: Vec<f64> = (0..=spec.poly_degree).map(|_| rng.random_range(-1.0..1.0) / (spec.poly_degree + 1) as f64).collect();
    let poly = ChebyshevPoly::new(coeffs.clone(), -1.0, 1.0).map_err(ckks)?;
    let name = format!("poly_{}", spec.poly_degree);
    out.insert(format!("{name}_us"), json!(median_us((spec.reps / 2).max(1), || ev.evaluate_chebyshev(&cx, &poly).map(drop).map_err(ckks))?));
    let res = ev.evaluate_chebyshev(&cx, &poly).map_err(ckks)?;
    let want: Vec<f64> = x.iter().map(|&v| chebyshev_value(&coeffs, v)).collect();
    out.insert(format!("{name}_bits"), json!(bits(&want, &decode(&res)?)));
    out.insert(format!("{name}_levels_used"), json!(top - res.level()));
    out.insert(format!("{name}_key_bytes"), json!(rk.key().memory_bytes()));
    Ok(Value::Object(out))
}

fn chebyshev_value(coeffs: &[f64], x: f64) -> f64 {
    let (mut t0, mut t1, mut sum) = (1.0, x, 0.0);
    for (k, &c) in coeffs.iter().enumerate() {
        let t = match k {
            0 => t0,
            1 => t1,
            _ => {
                let t2 = 2.0 * x * t1 - t0;
                t0 = t1;
                t1 = t2;
                t2
            }
        };
        sum += c * t;
    }
    sum
}

fn rss_bytes() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<usize>().ok()))
        .map_or(0, |kb| kb * 1024)
}

/// One logN = 16 full-slot bootstrapping of a level-0 ciphertext: keys, a first call (which
/// encodes the transforms' diagonals), a timed second call, precision and levels left.
pub fn bootstrap_timing(seed: u64, backend: Arc<dyn lycaon_backend::Backend>) -> Result<Value> {
    let shape = BootstrapParams::logn16_full_slots();
    let lit = shape.literal().map_err(ckks)?;
    let scale = shape.top_scale(&lit);
    let params = Parameters::with_backend(lit, backend).map_err(rlwe)?;
    let ctx = CkksContext::new(&params, scale).map_err(ckks)?;
    let rss0 = rss_bytes();
    let t0 = Instant::now();
    let mut sampler = Sampler::from_os()?;
    let sk = SecretKey::generate(&params, &mut sampler).map_err(rlwe)?;
    let pk = PublicKey::generate(&sk, &mut sampler).map_err(rlwe)?;
    let boot = Bootstrapper::new(&ctx, shape.clone()).map_err(ckks)?;
    let keys = boot.generate_keys(&sk, &mut sampler).map_err(ckks)?;
    let key_bytes = keys.memory_bytes();
    let key_bytes_seeded = keys.serialized_len(true);
    let boot = boot.with_encapsulation_keys(keys.encapsulation.clone());
    let keygen_s = t0.elapsed().as_secs_f64();
    let ev = Evaluator::new(&ctx, keys.evaluation);
    let encoder = Encoder::new(&ctx);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let x: Vec<f64> = (0..shape.slots()).map(|_| rng.random_range(-1.0..1.0)).collect();
    let ct = PublicKeyEncryptor::new(&ctx, Arc::new(pk))
        .map_err(ckks)?
        .encrypt(&encoder.encode_real(&x, 0, ctx.scale_at(0).map_err(ckks)?).map_err(ckks)?)
        .map_err(ckks)?;
    let t1 = Instant::now();
    boot.bootstrap(&ev, &ct).map_err(ckks)?;
    let first_s = t1.elapsed().as_secs_f64();
    let rss = rss_bytes().saturating_sub(rss0);
    let cpu0 = cpu_seconds();
    let t2 = Instant::now();
    let out = boot.bootstrap(&ev, &ct).map_err(ckks)?;
    let seconds = t2.elapsed().as_secs_f64();
    let cpu_s = cpu_seconds() - cpu0;
    let got = encoder.decode_real(&Decryptor::new(&ctx, &sk).map_err(ckks)?.decrypt(&out).map_err(ckks)?).map_err(ckks)?;
    let stats = precision_stats(&x, &got[..x.len()]);
    Ok(json!({
        "bootstrap_us": seconds * 1e6,
        "bootstrap_first_s": first_s,
        "bootstrap_cpu_s": cpu_s,
        "bootstrap_keygen_s": keygen_s,
        "bootstrap_bits": stats.mean_bits,
        "bootstrap_min_bits": stats.min_bits,
        "bootstrap_levels_left": out.level(),
        "bootstrap_key_bytes": key_bytes,
        "bootstrap_key_bytes_seeded": key_bytes_seeded,
        "bootstrap_rss_growth_bytes": rss,
        "bootstrap_params": format!("n = {}, {} levels, log QP = {:.0}", params.n(), ctx.max_level(), params.log2_qp()),
        "bootstrap_log2_qp": params.log2_qp(),
        "bootstrap_encapsulation_weight": shape.encapsulation_weight,
    }))
}

/// CPU seconds of this process (all threads), from /proc (0 where there is none).
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else { return 0.0 };
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}
