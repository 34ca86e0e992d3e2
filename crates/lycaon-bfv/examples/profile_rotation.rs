//! Repeated rotations at n = 8192 for `perf record`.
use std::sync::Arc;
use lycaon_bfv::rlwe::{GaloisKeys, Parameters, ParametersLiteral, PublicKey, SecretKey};
use lycaon_bfv::{BatchEncoder, BfvContext, Evaluator, PublicKeyEncryptor};
use lycaon_math::Sampler;

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let params = Parameters::new(ParametersLiteral::bfv_from_bits(8192, &[43, 43, 44, 44], &[44], 20).unwrap()).unwrap();
    let ctx = BfvContext::new(&params).unwrap();
    let mut s = Sampler::from_os().unwrap();
    let sk = Arc::new(SecretKey::generate(&params, &mut s).unwrap());
    let pk = Arc::new(PublicKey::generate(&sk, &mut s).unwrap());
    let gk = GaloisKeys::for_rotations(&sk, &[1], false, &mut s).unwrap();
    let pt = BatchEncoder::new(&params).unwrap().encode(&[1, 2, 3]).unwrap();
    let ct = PublicKeyEncryptor::new(&ctx, pk).unwrap().encrypt(&pt).unwrap();
    let ev = Evaluator::new(&ctx);
    let start = std::time::Instant::now();
    let iters: usize = std::env::var("ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    for _ in 0..iters {
        std::hint::black_box(ev.rotate_rows(&ct, 1, &gk).unwrap());
    }
    println!("rotate_1: {:.1} us", start.elapsed().as_secs_f64() * 1e6 / iters as f64);
}
