//! Where the time of one rotation goes, against a relinearisation:
//! `cargo run --release -p lycaon-ckks --example ckks_profile_rotation [logN]`.

use std::time::Instant;

use lycaon_ckks::rlwe::{keyswitch, Parameters, ParametersLiteral, PublicKey, SecretKey};
use lycaon_backend::RayonBackend;
use lycaon_ckks::{CkksContext, Encoder, EvaluationKeys, Evaluator, PublicKeyEncryptor};
use lycaon_math::{Automorphism, Sampler};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let log_n: u32 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(16);
    let n = 1usize << log_n;
    let mut q_bits = vec![55u32];
    q_bits.extend([40u32; 10]);
    let params = Parameters::with_backend(ParametersLiteral::ckks_from_bits(n, &q_bits, &[61, 61, 61])?, RayonBackend::shared())?;
    let ctx = CkksContext::new(&params, 2f64.powi(40))?;
    let mut rng = Sampler::from_os()?;
    let sk = SecretKey::generate(&params, &mut rng)?;
    let pk = std::sync::Arc::new(PublicKey::generate(&sk, &mut rng)?);
    let keys = EvaluationKeys::generate(&sk, &[1], false, &mut rng)?;
    let gk = keys.galois.clone().unwrap();
    let rk = keys.relin.clone().unwrap();
    let eval = Evaluator::new(&ctx, keys);
    let top = ctx.max_level();
    let ct = PublicKeyEncryptor::new(&ctx, pk)?.encrypt(&Encoder::new(&ctx).encode_real(&[0.5; 16], top, ctx.scale_at(top)?)?)?;
    let b = params.backend();
    let c1 = &ct.inner().parts()[1];
    let auto = Automorphism::new(5, n)?;
    for _ in 0..3 {
        let t = Instant::now();
        let cc = b.intt(c1.clone())?;
        let t_intt = ms(t);
        let t = Instant::now();
        let dec = keyswitch::decompose(&params, &cc, c1)?;
        let t_dec = ms(t);
        let t = Instant::now();
        let [k0, _k1] = keyswitch::key_switch_decomposed(&params, &dec, gk.get(5).unwrap())?;
        let t_ks = ms(t);
        let t = Instant::now();
        let _ = keyswitch::key_switch_decomposed(&params, &dec, rk.key())?;
        let t_ks_relin = ms(t);
        let t = Instant::now();
        let _ = b.automorphism_ntt(&k0, &auto)?;
        let t_auto = ms(t);
        let t = Instant::now();
        let _ = eval.rotate(&ct, 1)?;
        let t_rot = ms(t);
        let t = Instant::now();
        let _ = eval.relinearize(&eval.mul(&ct, &ct)?)?;
        let t_mul = ms(t);
        println!("intt {t_intt:.1}, decompose {t_dec:.1}, switch (Galois key) {t_ks:.1}, switch (relin key) {t_ks_relin:.1}, automorphism {t_auto:.1} | rotate {t_rot:.1}, mul+relin {t_mul:.1} ms");
    }
    Ok(())
}
