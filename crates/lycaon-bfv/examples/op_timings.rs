//! Median single-thread timings of the BFV operations at SEAL's default split, for profiling:
//! `cargo run --release -p lycaon-bfv --example op_timings`. Peer comparisons live in
//! `lycaon bench bfv`.

use std::sync::Arc;
use std::time::Instant;

use lycaon_bfv::rlwe::{GaloisKeys, Parameters, ParametersLiteral, PublicKey, RelinKey, SecretKey};
use lycaon_bfv::{BatchEncoder, BfvContext, Decryptor, Evaluator, PublicKeyEncryptor, SecretKeyEncryptor};
use lycaon_math::Sampler;

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn median_us(reps: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..3 {
        f();
    }
    let mut v: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    v.sort_by(|a, b| a.total_cmp(b));
    v[reps / 2]
}

fn main() {
    for (n, q, p) in [(4096usize, vec![36u32, 36], vec![37u32]), (8192, vec![43, 43, 44, 44], vec![44])] {
        let params = Parameters::new(ParametersLiteral::bfv_from_bits(n, &q, &p, 20).unwrap()).unwrap();
        let ctx = BfvContext::new(&params).unwrap();
        let mut s = Sampler::from_os().unwrap();
        let sk = Arc::new(SecretKey::generate(&params, &mut s).unwrap());
        let pk = Arc::new(PublicKey::generate(&sk, &mut s).unwrap());
        let rk = RelinKey::generate(&sk, &mut s).unwrap();
        let gk = GaloisKeys::for_rotations(&sk, &(1..=9).collect::<Vec<_>>(), false, &mut s).unwrap();
        let be = BatchEncoder::new(&params).unwrap();
        let (mut enc, mut sym) = (PublicKeyEncryptor::new(&ctx, pk).unwrap(), SecretKeyEncryptor::new(&ctx, sk.clone()).unwrap());
        let dec = Decryptor::new(&ctx, sk.clone()).unwrap();
        let ev = Evaluator::new(&ctx);
        let vals: Vec<u64> = (0..n as u64).map(|i| i * 31 % 1000).collect();
        let pt = be.encode(&vals).unwrap();
        let ct = enc.encrypt(&pt).unwrap();
        let ct2 = enc.encrypt(&pt).unwrap();
        let reps = 30;
        let steps: Vec<i64> = (1..=9).collect();
        let plan = params.q().plans()[0].clone();
        let mut limb = ct.parts()[0].limb(0).to_vec();
        let rows = [
            ("encrypt", median_us(reps, || drop(enc.encrypt(&pt).unwrap()))),
            ("encrypt_symmetric", median_us(reps, || drop(sym.encrypt(&pt).unwrap()))),
            ("decrypt", median_us(reps, || drop(dec.decrypt(&ct).unwrap()))),
            ("mul_plain", median_us(reps, || drop(ev.mul_plain(&ct, &pt).unwrap()))),
            ("mul_scalar", median_us(reps, || drop(ev.mul_scalar(&ct, 5).unwrap()))),
            ("rotate_1", median_us(reps, || drop(ev.rotate_rows(&ct, 1, &gk).unwrap()))),
            ("rotate_9_hoisted", median_us(reps, || drop(ev.rotate_rows_hoisted(&ct, &steps, &gk).unwrap()))),
            ("mul_relin", median_us(reps, || drop(ev.multiply_relin(&ct, &ct2, &rk).unwrap()))),
            ("ntt_limb", median_us(200, || {
                plan.forward(&mut limb);
                plan.inverse(&mut limb);
            })),
        ];
        for (op, us) in rows {
            println!("n={n:<6} {op:<20} {us:>10.1} us");
        }
    }
}
