//! Measured invariant noise budget after each operation next to the analytical model.
//! `cargo run --release -p lycaon-bfv --example noise_table`.

use std::sync::Arc;

use lycaon_bfv::noise::NoiseModel;
use lycaon_bfv::rlwe::{GaloisKeys, Parameters, ParametersLiteral, PublicKey, RelinKey, SecretKey};
use lycaon_bfv::{BatchEncoder, BfvContext, Decryptor, Evaluator, PublicKeyEncryptor, SecretKeyEncryptor};
use lycaon_math::Sampler;

fn main() {
    println!("{:>6} {:<18} {:>10} {:>10} {:>7}", "n", "operation", "measured", "model", "diff");
    for (n, q, p) in [(4096usize, vec![36u32, 36], vec![37u32]), (8192, vec![43, 43, 44, 44], vec![44]), (16384, vec![48, 48, 48, 49, 49, 49, 49, 49], vec![49])] {
        let params = Parameters::new(ParametersLiteral::bfv_from_bits(n, &q, &p, 20).unwrap()).unwrap();
        let ctx = BfvContext::new(&params).unwrap();
        let m = NoiseModel::from_params(&params).unwrap();
        let mut s = Sampler::from_os().unwrap();
        let sk = Arc::new(SecretKey::generate(&params, &mut s).unwrap());
        let pk = Arc::new(PublicKey::generate(&sk, &mut s).unwrap());
        let rk = RelinKey::generate(&sk, &mut s).unwrap();
        let gk = GaloisKeys::for_rotations(&sk, &[1], false, &mut s).unwrap();
        let be = BatchEncoder::new(&params).unwrap();
        let (mut enc, mut sym) = (PublicKeyEncryptor::new(&ctx, pk).unwrap(), SecretKeyEncryptor::new(&ctx, sk.clone()).unwrap());
        let (dec, ev) = (Decryptor::new(&ctx, sk.clone()).unwrap(), Evaluator::new(&ctx));
        let t = params.plaintext_modulus().unwrap().value();
        let x: Vec<u64> = (0..n).map(|_| s.next_u64() % t).collect();
        let pt = be.encode(&x).unwrap();
        let top = params.max_level();
        let a = enc.encrypt(&pt).unwrap();
        let b = sym.encrypt(&pt).unwrap().expand(&params).unwrap();
        let fresh = m.fresh_public(top);
        let sym = m.fresh_symmetric(top);
        let prod = m.multiply(fresh, sym);
        let rows = [
            ("encrypt (public)", dec.noise_budget(&a).unwrap(), m.budget(fresh)),
            ("encrypt (secret)", dec.noise_budget(&b).unwrap(), m.budget(sym)),
            ("add", dec.noise_budget(&ev.add(&a, &b).unwrap()).unwrap(), m.budget(m.add(fresh, sym))),
            ("mul_scalar(1000)", dec.noise_budget(&ev.mul_scalar(&a, 1000).unwrap()).unwrap(), m.budget(m.mul_scalar(fresh, 1000.0))),
            ("mul_plain", dec.noise_budget(&ev.mul_plain(&a, &pt).unwrap()).unwrap(), m.budget(m.mul_plain_uniform(fresh))),
            ("rotate", dec.noise_budget(&ev.rotate_rows(&a, 1, &gk).unwrap()).unwrap(), m.budget(m.rotate(fresh, top))),
            ("multiply", dec.noise_budget(&ev.multiply(&a, &b).unwrap()).unwrap(), m.budget(prod)),
            ("multiply+relin", dec.noise_budget(&ev.multiply_relin(&a, &b, &rk).unwrap()).unwrap(), m.budget(m.relinearize(prod, top))),
            ("mod_switch", dec.noise_budget(&ev.mod_switch_to_next(&a).unwrap()).unwrap(), m.budget(m.mod_switch(fresh, top))),
        ];
        for (op, measured, model) in rows {
            println!("{n:>6} {op:<18} {measured:>10.2} {model:>10.2} {:>7.2}", measured - model);
        }
    }
}
