//! A ResNet-20 stage-1 basic block's convolutions (16 x 32 x 32, 3x3, 2^15 slots, logN = 16,
//! 128-bit secure) two ways, alternated in one process on the same input:
//!   MPConv -> square -> MPConv            (one packing; four levels of convolutions)
//!   CAConv -> square on each RA ciphertext -> RAConv   (HyPHEN's changing packing; two levels)
//! Prints rotations, plaintext products, rotation keys, levels and the median time of each, and
//! what one operation costs (to read the difference).
//!     cargo run --release -p lycaon-nn --example hyphen_blocks [-- REPS]
use std::sync::Arc;
use std::time::Instant;

use lycaon_ckks::rlwe::{Parameters, PublicKey, SecretKey};
use lycaon_backend::RayonBackend;
use lycaon_ckks::{precision_stats, Ciphertext, CkksContext, Decryptor, Encoder, EvaluationKeys, Evaluator, PublicKeyEncryptor};
use lycaon_math::Sampler;
use lycaon_nn::fhe::mpconv::conv_reference_f64;
use lycaon_nn::fhe::{CaConv, FheOps, MpConv, MultiplexedLayout, RaConv};

fn main() {
    let reps: usize = std::env::args().nth(1).map(|s| s.parse().expect("REPS")).unwrap_or(3);
    let lit = lycaon_ckks::scale_stable_literal(1 << 16, 60, 40, 6, &[60]).expect("parameters");
    let params: Arc<Parameters> = Parameters::with_backend(lit, RayonBackend::shared()).expect("parameters");
    let ctx = CkksContext::new(&params, 2f64.powi(40)).expect("context");
    let mut sampler = Sampler::from_os().expect("OS randomness");
    let sk = SecretKey::generate(&params, &mut sampler).expect("secret key");
    let pk = Arc::new(PublicKey::generate(&sk, &mut sampler).expect("public key"));
    let slots = ctx.max_slots();
    let (c, hw) = (16, 32);
    let layout = MultiplexedLayout::new(c, hw, hw, 1, slots).expect("layout");
    let weights = |seed: usize| -> Vec<f64> { (0..c * c * 9).map(|i| (((i + seed) * 7919) % 17) as f64 / 17.0 / 6.0 - 0.04).collect() };
    let (w1, w2) = (weights(1), weights(2));
    let (mp1, mp2) = (MpConv::new(layout, c, 3, 1, &w1).expect("mpconv"), MpConv::new(layout, c, 3, 1, &w2).expect("mpconv"));
    let (ca, ra) = (CaConv::new(layout, c, 3, &w1).expect("caconv"), RaConv::new(c, hw, hw, slots, c, 3, &w2).expect("raconv"));
    let steps_of = |lists: &[Vec<i64>]| {
        let mut s: Vec<i64> = lists.concat();
        s.sort_unstable();
        s.dedup();
        s
    };
    let (mp_steps, hy_steps) = (steps_of(&[mp1.rotation_steps(), mp2.rotation_steps()]), steps_of(&[ca.rotation_steps(), ra.rotation_steps()]));
    let keys = EvaluationKeys::generate(&sk, &steps_of(&[mp_steps.clone(), hy_steps.clone()]), false, &mut sampler).expect("keys");
    let ops = FheOps::new(Evaluator::new(&ctx, keys));
    let eval = ops.evaluator();
    let square = |x: &Ciphertext| eval.rescale(&eval.mul_relin(x, x).expect("square")).expect("rescale");

    let x: Vec<f64> = (0..c * hw * hw).map(|i| ((i * 31) % 13) as f64 / 13.0 - 0.5).collect();
    let level = ctx.max_level();
    let pt = Encoder::new(&ctx).encode_real(&layout.pack(&x).expect("pack"), level, ctx.scale_at(level).expect("scale")).expect("encode");
    let ct = PublicKeyEncryptor::new(&ctx, pk.clone()).expect("encryptor").encrypt(&pt).expect("encrypt");
    let r1 = conv_reference_f64((c, hw, hw), &x, c, 3, 1, &w1);
    let want = layout.pack(&conv_reference_f64((c, hw, hw), &r1.iter().map(|v| v * v).collect::<Vec<_>>(), c, 3, 1, &w2)).expect("pack");
    let decrypt = |ct: &Ciphertext| Encoder::new(&ctx).decode_real(&Decryptor::new(&ctx, &sk).expect("decryptor").decrypt(ct).expect("decrypt")).expect("decode");

    {
        // Each operation's median of 5 (the first call warms up allocations).
        let time = |f: &dyn Fn()| {
            let mut t: Vec<f64> = (0..5)
                .map(|_| {
                    let t0 = Instant::now();
                    f();
                    t0.elapsed().as_secs_f64()
                })
                .collect();
            t.sort_by(f64::total_cmp);
            t[2]
        };
        let v = vec![0.5; slots];
        let low = ops.rescale(&ops.mul_values(&ct, &v).expect("product")).expect("rescale");
        let values: Vec<lycaon_ckks::Complex64> = v.iter().map(|&x| lycaon_ckks::Complex64::new(x, 0.0)).collect();
        let encoder = Encoder::new(&ctx);
        let t_encode = time(&|| drop(encoder.encode_with_slots(&values, slots, ct.level(), ctx.scale_at(ct.level()).expect("scale")).expect("encode")));
        let t_product = time(&|| drop(ops.mul_values(&ct, &v).expect("product")));
        let t_rotate = time(&|| drop(ops.rotate(&ct, 1024).expect("rotation")));
        let t_rotate_low = time(&|| drop(ops.rotate(&low, 1024).expect("rotation")));
        let t_hoisted = time(&|| drop(ops.rotate_hoisted(&ct, &[1, -1, 32, -32, 31, -31, 33, -33]).expect("rotations")));
        let t_square = time(&|| drop(square(&ct)));
        println!(
            "one operation at the top level (median of 5): plaintext product {t_product:.3} s (of which encoding {t_encode:.3} s), rotation {t_rotate:.3} s \
             (one level down {t_rotate_low:.3} s), 8 hoisted rotations {t_hoisted:.3} s, square + relinearisation {t_square:.3} s"
        );
    }
    let (mut t_mp, mut t_hy, mut parts) = (Vec::new(), Vec::new(), Vec::new());
    let (mut out_mp, mut out_hy) = (None, None);
    for _ in 0..reps {
        let t0 = Instant::now();
        let y = mp2.evaluate(&ops, &square(&mp1.evaluate(&ops, &ct).expect("mpconv"))).expect("mpconv");
        t_mp.push(t0.elapsed().as_secs_f64());
        out_mp = Some(y);
        let t0 = Instant::now();
        let mid0 = ca.evaluate(&ops, &ct).expect("caconv");
        let ta = t0.elapsed().as_secs_f64();
        let mid: Vec<Ciphertext> = mid0.iter().map(square).collect();
        let tb = t0.elapsed().as_secs_f64();
        let y = ra.evaluate(&ops, &mid).expect("raconv");
        parts.push((ta, tb - ta, t0.elapsed().as_secs_f64() - tb));
        t_hy.push(t0.elapsed().as_secs_f64());
        out_hy = Some(y);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (tm, th) = (median(&mut t_mp), median(&mut t_hy));
    let (out_mp, out_hy) = (out_mp.expect("ran"), out_hy.expect("ran"));
    let (cm, ch) = (mp1.counts() + mp2.counts(), ca.counts() + ra.counts());
    println!("stage-1 block convolutions, 16x32x32, logN 16, {reps} reps, {} threads", rayon::current_num_threads());
    println!(
        "MPConv x2:       rotations {:3}, relinearisations 1, plain products {:3}, keys {:2}, levels {}, {tm:.2} s, {}",
        cm.rotations,
        cm.plain_mults,
        mp_steps.len(),
        ct.level() - out_mp.level(),
        precision_stats(&want, &decrypt(&out_mp))
    );
    println!(
        "CAConv + RAConv: rotations {:3}, relinearisations {c}, plain products {:3}, keys {:2}, levels {}, {th:.2} s, {}",
        ch.rotations,
        ch.plain_mults,
        hy_steps.len(),
        ct.level() - out_hy.level(),
        precision_stats(&want, &decrypt(&out_hy))
    );
    let (ca_s, sq_s, ra_s) = parts[parts.len() / 2];
    println!("  of which CAConv {ca_s:.2} s, {c} squares {sq_s:.2} s, RAConv {ra_s:.2} s");
    println!("time ratio HyPHEN / MPConv: {:.3}", th / tm);
}
