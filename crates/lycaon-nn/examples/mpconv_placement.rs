//! MPConv's output placement, one rotation per output channel (Lee et al.) against baby and giant
//! steps (`Placement::fewest_keys`), on ResNet-20's layer shapes at logN = 16 (2^15 slots,
//! 128-bit secure; 4 levels to keep the keys of both variants in memory): rotation keys, key
//! bytes and evaluation time, the two variants alternated in one process.
//!     cargo run --release -p lycaon-nn --example mpconv_placement [-- REPS]
use std::sync::Arc;
use std::time::Instant;

use lycaon_ckks::rlwe::{Parameters, PublicKey, SecretKey};
use lycaon_backend::RayonBackend;
use lycaon_ckks::{CkksContext, Encoder, EvaluationKeys, Evaluator, PublicKeyEncryptor};
use lycaon_math::Sampler;
use lycaon_nn::fhe::{FheOps, MpConv, MultiplexedLayout};

fn main() {
    let reps: usize = std::env::args().nth(1).map(|s| s.parse().expect("REPS")).unwrap_or(3);
    let lit = lycaon_ckks::scale_stable_literal(1 << 16, 60, 40, 4, &[60]).expect("parameters");
    let params: Arc<Parameters> = Parameters::with_backend(lit, RayonBackend::shared()).expect("parameters");
    let ctx = CkksContext::new(&params, 2f64.powi(40)).expect("context");
    let mut sampler = Sampler::from_os().expect("OS randomness");
    let sk = SecretKey::generate(&params, &mut sampler).expect("secret key");
    let pk = Arc::new(PublicKey::generate(&sk, &mut sampler).expect("public key"));
    let slots = ctx.max_slots();
    // (c_in, hw, gap, c_out, stride): ResNet-20's three stages and its two downsampling layers.
    for (c_in, hw, gap, c_out, stride) in [(16, 32, 1, 16, 1), (16, 32, 1, 32, 2), (32, 16, 2, 32, 1), (32, 16, 2, 64, 2), (64, 8, 4, 64, 1)] {
        let input = MultiplexedLayout::new(c_in, hw, hw, gap, slots).expect("layout");
        let w: Vec<f64> = (0..c_out * c_in * 9).map(|i| ((i * 7919) % 17) as f64 / 17.0 - 0.5).collect();
        let bsgs = MpConv::new(input, c_out, 3, stride, &w).expect("layer");
        let plain = bsgs.clone().with_placement_group(c_out.next_power_of_two()).expect("plain placement");
        let mut steps: Vec<i64> = bsgs.rotation_steps().into_iter().chain(plain.rotation_steps()).collect();
        steps.sort_unstable();
        steps.dedup();
        let ops = FheOps::new(Evaluator::new(&ctx, EvaluationKeys::generate(&sk, &steps, false, &mut sampler).expect("keys")));
        let x: Vec<f64> = (0..c_in * hw * hw).map(|i| ((i * 31) % 13) as f64 / 13.0 - 0.5).collect();
        let level = ctx.max_level();
        let pt = Encoder::new(&ctx).encode_real(&input.pack(&x).expect("pack"), level, ctx.scale_at(level).expect("scale")).expect("encode");
        let ct = PublicKeyEncryptor::new(&ctx, pk.clone()).expect("encryptor").encrypt(&pt).expect("encrypt");
        let (mut t_plain, mut t_bsgs) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            for (conv, times) in [(&plain, &mut t_plain), (&bsgs, &mut t_bsgs)] {
                let t0 = Instant::now();
                conv.evaluate(&ops, &ct).expect("evaluate");
                times.push(t0.elapsed().as_secs_f64());
            }
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (tp, tb) = (median(&mut t_plain), median(&mut t_bsgs));
        println!(
            "{c_in}x{hw}x{hw} gap {gap} -> {c_out}, s {stride}: keys plain {} bsgs {} (g = {}); rotations plain {} bsgs {}; time plain {tp:.3} s bsgs {tb:.3} s, ratio {:.3}",
            plain.rotation_steps().len(),
            bsgs.rotation_steps().len(),
            bsgs.placement_group(),
            plain.counts().rotations,
            bsgs.counts().rotations,
            tb / tp
        );
    }
}
