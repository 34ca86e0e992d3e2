//! Splits the cost of one hoisted rotation into its kernels: `cargo run --release -p lycaon-ckks --example ckks_profile_keyswitch [logN] [special primes]`
//! (at logN = 16: 11 ciphertext primes, 3 special primes by default; 6 is the bootstrappable shape's count).

use std::time::Instant;

use lycaon_ckks::rlwe::{keyswitch, Parameters, ParametersLiteral, SecretKey};
use lycaon_backend::RayonBackend;
use lycaon_ckks::EvaluationKeys;
use lycaon_math::Sampler;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let log_n: u32 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(14);
    let n = 1usize << log_n;
    let mut q_bits = vec![55u32];
    q_bits.extend(std::iter::repeat_n(40, if log_n >= 16 { 10 } else { 6 }));
    let specials: usize = std::env::args().nth(2).and_then(|s| s.parse().ok()).unwrap_or(if log_n >= 16 { 3 } else { 1 });
    let p_bits = vec![61u32; specials];
    for backend in [lycaon_backend::CpuBackend::shared(), RayonBackend::shared()] {
        let params = Parameters::with_backend(ParametersLiteral::ckks_from_bits(n, &q_bits, &p_bits)?, backend.clone())?;
        let mut rng = Sampler::from_os()?;
        let sk = SecretKey::generate(&params, &mut rng)?;
        let gk = EvaluationKeys::galois_keys(&sk, &[1], false, &mut rng)?;
        let key = gk.get(5).unwrap();
        let c = rng.uniform_poly(params.q());
        let reps = 10;
        let b = params.backend();
        let t = Instant::now();
        for _ in 0..reps { let _ = b.intt(c.clone())?; }
        let t_intt = t.elapsed().as_secs_f64() * 1e3 / reps as f64;
        let cc = b.intt(c.clone())?;
        let t = Instant::now();
        for _ in 0..reps { let _ = keyswitch::decompose(&params, &cc, &c)?; }
        let t_dec = t.elapsed().as_secs_f64() * 1e3 / reps as f64;
        let dec = keyswitch::decompose(&params, &cc, &c)?;
        let t = Instant::now();
        for _ in 0..reps { let _ = keyswitch::key_switch_decomposed(&params, &dec, key)?; }
        let t_ks = t.elapsed().as_secs_f64() * 1e3 / reps as f64;
        let t = Instant::now();
        for _ in 0..reps { let _ = keyswitch::key_switch_decomposed_lazy(&params, &dec, key)?; }
        let t_ip = t.elapsed().as_secs_f64() * 1e3 / reps as f64;
        let x = rng.uniform_poly(params.qp());
        let t = Instant::now();
        for _ in 0..reps { let _ = keyswitch::mod_down(&params, x.clone(), params.max_level())?; }
        let t_md = t.elapsed().as_secs_f64() * 1e3 / reps as f64;
        println!("{}: intt(Q) {t_intt:.2} ms, decompose {t_dec:.2} ms, inner product + 2 ModDown {t_ks:.2} ms, inner product alone {t_ip:.2} ms, one ModDown {t_md:.2} ms", b.name());
    }
    Ok(())
}
