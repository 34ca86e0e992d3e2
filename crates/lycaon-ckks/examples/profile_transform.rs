//! One dense 256 x 256 linear transform at logN = 14, for profiling:
//! `cargo run --release -p lycaon-ckks --example profile_transform`.

use std::time::Instant;

use lycaon_ckks::rlwe::{Parameters, PublicKey, SecretKey};
use lycaon_backend::RayonBackend;
use lycaon_ckks::{CkksContext, Complex64, Encoder, EvaluationKeys, Evaluator, LinearTransform, PublicKeyEncryptor};
use lycaon_math::Sampler;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let slots = 256;
    let params = Parameters::with_backend(lycaon_ckks::scale_stable_literal(1 << 14, 55, 40, 8, &[55])?, RayonBackend::shared())?;
    let ctx = CkksContext::new(&params, 2f64.powi(40))?;
    let rows: Vec<Vec<Complex64>> = (0..slots).map(|i| (0..slots).map(|j| Complex64::new(((i * 31 + j * 17) % 13) as f64 / 13.0, 0.0)).collect()).collect();
    let lt = LinearTransform::from_dense(&ctx, &rows)?;
    let mut rng = Sampler::from_os()?;
    let sk = SecretKey::generate(&params, &mut rng)?;
    let pk = std::sync::Arc::new(PublicKey::generate(&sk, &mut rng)?);
    let keys = EvaluationKeys::generate(&sk, &lt.rotations(), false, &mut rng)?;
    let eval = Evaluator::new(&ctx, keys);
    let top = ctx.max_level();
    let v: Vec<f64> = (0..slots).map(|i| i as f64 / slots as f64).collect();
    let ct = PublicKeyEncryptor::new(&ctx, pk)?.encrypt(&Encoder::new(&ctx).encode_real(&v, top, ctx.scale_at(top)?)?)?;
    let sigma = eval.linear_transform_scale(&ct, ctx.scale_at(top - 1)?)?;
    lt.prepare(&ctx, top, sigma)?;
    let single = lt.clone().with_double_hoisting(false);
    single.prepare(&ctx, top, sigma)?;
    for _ in 0..3 {
        let t = Instant::now();
        eval.linear_transform(&ct, &lt)?;
        let double = t.elapsed();
        let t = Instant::now();
        eval.linear_transform(&ct, &single)?;
        println!("transform: double hoisting {double:?}, single hoisting {:?}", t.elapsed());
    }
    Ok(())
}
