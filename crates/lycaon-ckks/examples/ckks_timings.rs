//! Times the main CKKS operations at Orion's ResNet parameters (logN = 16, LogQ = [55] + [40] x 10,
//! LogP = [61] x 3, scale 2^40, full slots) or a smaller ring:
//! `cargo run --release -p lycaon-ckks --example ckks_timings [logN] [reps]`.

use std::time::Instant;

use lycaon_ckks::rlwe::{Parameters, ParametersLiteral, PublicKey, SecretKey};
use lycaon_backend::RayonBackend;
use lycaon_ckks::{precision_stats, ChebyshevPoly, CkksContext, Complex64, Encoder, EvaluationKeys, Evaluator, LinearTransform, PublicKeyEncryptor};
use lycaon_math::Sampler;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn time<T>(label: &str, reps: usize, mut f: impl FnMut() -> T) -> T {
    let mut out = f();
    let t = Instant::now();
    for _ in 0..reps {
        out = f();
    }
    println!("{label:<44} {:>10.2} ms", t.elapsed().as_secs_f64() * 1e3 / reps as f64);
    out
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let log_n: u32 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(16);
    let reps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5);
    let n = 1usize << log_n;
    let mut q_bits = vec![55u32];
    q_bits.extend(std::iter::repeat_n(40, if log_n >= 16 { 10 } else { 6 }));
    let p_bits = if log_n >= 16 { vec![61u32; 3] } else { vec![61] };
    let lit = ParametersLiteral::ckks_from_bits(n, &q_bits, &p_bits)?;
    let params = Parameters::with_backend(lit, RayonBackend::shared())?;
    println!("logN = {log_n}, log QP = {:.1}, digits = {}, threads = {}", params.log2_qp(), params.literal().key_switch_digits, rayon::current_num_threads());
    let ctx = CkksContext::new(&params, 2f64.powi(40))?;
    let mut rng = Sampler::from_os()?;
    let sk = SecretKey::generate(&params, &mut rng)?;
    let pk = std::sync::Arc::new(PublicKey::generate(&sk, &mut rng)?);
    let hoisted: Vec<i64> = (1..=8).collect();
    let slots = n / 2;
    // A transform with 64 diagonals (16 baby steps, 4 giant steps), encoded lazily or prepared.
    let diags: Vec<(i64, Vec<Complex64>)> = (0..64).map(|k| (k as i64, (0..slots).map(|i| Complex64::new(((i + k) % 7) as f64 / 7.0, 0.0)).collect())).collect();
    let lt = LinearTransform::new(&ctx, slots, diags)?.with_baby_steps(16)?;
    let steps: Vec<i64> = hoisted.iter().copied().chain(lt.rotations()).collect();
    let t = Instant::now();
    let keys = EvaluationKeys::generate(&sk, &steps, true, &mut rng)?;
    println!("{:<44} {:>10.2} ms", "key generation (relin + Galois)", t.elapsed().as_secs_f64() * 1e3);
    let eval = Evaluator::new(&ctx, keys);
    let encoder = Encoder::new(&ctx);
    let mut enc = PublicKeyEncryptor::new(&ctx, pk)?;
    let x: Vec<f64> = (0..slots).map(|i| ((i * 7919) % 1000) as f64 / 500.0 - 1.0).collect();
    let top = ctx.max_level();
    let pt = time("encode (full slots, top level)", reps, || encoder.encode_real(&x, top, ctx.scale_at(top).unwrap()).unwrap());
    let ct = time("encrypt (public key)", reps, || enc.encrypt(&pt).unwrap());
    let prod = time("multiply + relinearise", reps, || eval.mul_relin(&ct, &ct).unwrap());
    let r = time("rescale", reps, || eval.rescale(&prod).unwrap());
    time("rotate by 1", reps, || eval.rotate(&ct, 1).unwrap());
    time("8 hoisted rotations (1..8)", reps, || eval.rotate_hoisted(&ct, &hoisted).unwrap());
    time("conjugate", reps, || eval.conjugate(&ct).unwrap());
    let dec = lycaon_ckks::Decryptor::new(&ctx, &sk)?;
    let got = time("decrypt + decode", reps, || encoder.decode_real(&dec.decrypt(&r).unwrap()).unwrap());
    let want: Vec<f64> = x.iter().map(|v| v * v).collect();
    println!("mul+relin+rescale precision: {}", precision_stats(&want, &got));
    time("linear transform, 64 diagonals (lazy encode)", reps.min(3), || eval.linear_transform(&ct, &lt).unwrap());
    let sigma = eval.linear_transform_scale(&ct, ctx.scale_at(top - 1)?)?;
    lt.prepare(&ctx, top, sigma)?;
    time("linear transform, 64 diagonals (prepared)", reps.min(3), || eval.linear_transform(&ct, &lt).unwrap());
    let single = lt.clone().with_double_hoisting(false);
    single.prepare(&ctx, top, sigma)?;
    time("  same, single hoisting (prepared)", reps.min(3), || eval.linear_transform(&ct, &single).unwrap());
    let sigmoid = |v: f64| 1.0 / (1.0 + (-v).exp());
    let poly = ChebyshevPoly::interpolate(sigmoid, -1.0, 1.0, 63)?;
    let out = time("degree-63 Chebyshev polynomial", reps.min(3), || eval.evaluate_chebyshev(&ct, &poly).unwrap());
    let got = encoder.decode_real(&dec.decrypt(&out)?)?;
    let want: Vec<f64> = x.iter().map(|&v| poly.evaluate(v)).collect();
    println!("polynomial precision: {} (levels left {})", precision_stats(&want, &got), out.level());
    Ok(())
}
