//! Timings of the pieces of a key switch at n = 8192 (profiling aid).
use std::sync::Arc;
use std::time::Instant;
use lycaon_bfv::rlwe::{keyswitch, GaloisKeys, Parameters, ParametersLiteral, PublicKey, SecretKey};
use lycaon_bfv::{BatchEncoder, BfvContext, PublicKeyEncryptor};
use lycaon_math::Sampler;

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn time(label: &str, reps: usize, mut f: impl FnMut()) {
    f();
    let s = Instant::now();
    for _ in 0..reps {
        f();
    }
    println!("{label:<24} {:>8.1} us", s.elapsed().as_secs_f64() * 1e6 / reps as f64);
}

fn main() {
    let params = Parameters::new(ParametersLiteral::bfv_from_bits(8192, &[43, 43, 44, 44], &[44], 20).unwrap()).unwrap();
    let ctx = BfvContext::new(&params).unwrap();
    let mut s = Sampler::from_os().unwrap();
    let sk = Arc::new(SecretKey::generate(&params, &mut s).unwrap());
    let pk = Arc::new(PublicKey::generate(&sk, &mut s).unwrap());
    let gk = GaloisKeys::for_rotations(&sk, &[1], false, &mut s).unwrap();
    let key = gk.get(3).unwrap();
    let pt = BatchEncoder::new(&params).unwrap().encode(&[1, 2, 3]).unwrap();
    let ct = PublicKeyEncryptor::new(&ctx, pk).unwrap().encrypt(&pt).unwrap();
    let c1 = ct.parts()[1].clone();
    let b = params.backend().clone();
    let coeff = b.intt(c1.clone()).unwrap();
    let dec = keyswitch::decompose(&params, &coeff, &c1).unwrap();
    time("intt c1", 200, || drop(b.intt(c1.clone()).unwrap()));
    time("decompose", 200, || drop(keyswitch::decompose(&params, &coeff, &c1).unwrap()));
    time("key_switch_decomposed", 200, || drop(keyswitch::key_switch_decomposed(&params, &dec, key).unwrap()));
    let qp = params.qp().clone();
    let x = s.uniform_poly(&qp);
    time("mod_down", 200, || drop(keyswitch::mod_down(&params, x.clone(), 3).unwrap()));
    time("clone QP poly", 200, || drop(x.clone()));
    let auto = lycaon_math::Automorphism::new(3, 8192).unwrap();
    time("automorphism Q poly", 200, || drop(b.automorphism_ntt(&c1, &auto).unwrap()));
    let limbs: Vec<usize> = (0..5).collect();
    let keys: Vec<Vec<_>> = (0..4).map(|_| vec![s.uniform_poly(&qp), s.uniform_poly(&qp)]).collect();
    let refs: Vec<&[_]> = keys.iter().map(|k| k.as_slice()).collect();
    let digits: Vec<_> = (0..4).map(|_| s.uniform_poly(&qp)).collect();
    time("inner_product", 200, || drop(b.inner_product(&digits, &refs, &limbs, 2).unwrap()));
}
