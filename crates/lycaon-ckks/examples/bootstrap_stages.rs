//! Times each stage of a logN = 16 full-slot bootstrap (ModRaise, CoeffsToSlots, EvalMod,
//! SlotsToCoeffs) after a first call that encodes the diagonals:
//! `cargo run --release -p lycaon-ckks --example bootstrap_stages [reps] [log_slots]`.

use std::sync::Arc;
use std::time::Instant;

use lycaon_backend::RayonBackend;
use lycaon_ckks::bootstrap::{BootstrapParams, Bootstrapper};
use lycaon_ckks::rlwe::{Parameters, PublicKey, SecretKey};
use lycaon_ckks::{precision_stats, CkksContext, Decryptor, Encoder, Evaluator, PublicKeyEncryptor};
use lycaon_math::Sampler;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// User plus system CPU seconds of this process (Linux /proc; 0 elsewhere).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let reps: usize = std::env::args().nth(1).map(|s| s.parse()).transpose()?.unwrap_or(2);
    let log_slots: u32 = std::env::args().nth(2).map(|s| s.parse()).transpose()?.unwrap_or(15);
    let shape = BootstrapParams { log_slots, ..BootstrapParams::logn16_full_slots() };
    let lit = shape.literal()?;
    let scale = shape.top_scale(&lit);
    let params = Parameters::with_backend(lit, RayonBackend::shared())?;
    let ctx = CkksContext::new(&params, scale)?;
    let mut sampler = Sampler::from_os()?;
    let sk = SecretKey::generate(&params, &mut sampler)?;
    let pk = PublicKey::generate(&sk, &mut sampler)?;
    let boot = Bootstrapper::new(&ctx, shape.clone())?;
    let keys = boot.generate_keys(&sk, &mut sampler)?;
    let boot = boot.with_encapsulation_keys(keys.encapsulation.clone());
    let ev = Evaluator::new(&ctx, keys.evaluation);
    let encoder = Encoder::new(&ctx);
    let x: Vec<f64> = (0..shape.slots()).map(|i| ((i * 7919) % 2001) as f64 / 1000.0 - 1.0).collect();
    let ct = PublicKeyEncryptor::new(&ctx, Arc::new(pk))?.encrypt(&encoder.encode_real(&x, 0, ctx.scale_at(0)?)?)?;
    let t = Instant::now();
    boot.bootstrap(&ev, &ct)?;
    println!("first bootstrap (encodes diagonals): {:.2} s", t.elapsed().as_secs_f64());
    for _ in 0..reps {
        let cpu = cpu_seconds();
        let t = Instant::now();
        let (raised, message_scale) = boot.mod_raise(&ev, &ct)?;
        let t_raise = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let y = boot.coeffs_to_slots(&ev, &raised)?;
        let t_cts = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let v = boot.eval_mod(&ev, &y)?;
        let t_mod = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let out = boot.slots_to_coeffs(&ev, &v, message_scale)?;
        let t_stc = t.elapsed().as_secs_f64();
        let got = encoder.decode_real(&Decryptor::new(&ctx, &sk)?.decrypt(&out)?)?;
        let bits = precision_stats(&x, &got[..x.len()]).mean_bits;
        println!(
            "mod_raise {t_raise:.2} s, coeffs_to_slots {t_cts:.2} s, eval_mod {t_mod:.2} s, slots_to_coeffs {t_stc:.2} s, total {:.2} s ({:.1} CPU s), {bits:.1} bits",
            t_raise + t_cts + t_mod + t_stc,
            cpu_seconds() - cpu
        );
    }
    Ok(())
}
