//! Hoisted against one-by-one rotations: `cargo run --release -p lycaon-ckks --example profile_hoisting [logN]`.

use std::time::Instant;

use lycaon_ckks::rlwe::{Parameters, ParametersLiteral, PublicKey, SecretKey};
use lycaon_backend::RayonBackend;
use lycaon_ckks::{CkksContext, Encoder, EvaluationKeys, Evaluator, PublicKeyEncryptor};
use lycaon_math::Sampler;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let log_n: u32 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(14);
    let n = 1usize << log_n;
    let params = Parameters::with_backend(ParametersLiteral::ckks_from_bits(n, &[55, 40, 40, 40, 40, 40, 40], &[61])?, RayonBackend::shared())?;
    let ctx = CkksContext::new(&params, 2f64.powi(40))?;
    let mut rng = Sampler::from_os()?;
    let sk = SecretKey::generate(&params, &mut rng)?;
    let pk = std::sync::Arc::new(PublicKey::generate(&sk, &mut rng)?);
    let steps: Vec<i64> = (1..=8).collect();
    let eval = Evaluator::new(&ctx, EvaluationKeys::generate(&sk, &steps, false, &mut rng)?);
    let top = ctx.max_level();
    let ct = PublicKeyEncryptor::new(&ctx, pk)?.encrypt(&Encoder::new(&ctx).encode_real(&[0.5; 16], top, ctx.scale_at(top)?)?)?;
    for round in 0..3 {
        let t = Instant::now();
        for &s in &steps {
            eval.rotate(&ct, s)?;
        }
        let one = t.elapsed();
        let t = Instant::now();
        eval.rotate_hoisted(&ct, &steps)?;
        let hoisted = t.elapsed();
        println!("round {round}: 8 single rotations {one:?}, 8 hoisted {hoisted:?}");
    }
    Ok(())
}
