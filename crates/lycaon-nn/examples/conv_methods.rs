//! MPConv (Lee et al.: per-group channel sums, one placement rotation per output channel)
//! against BsgsConv (block diagonals by baby and giant steps, double-hoisted placement) on
//! ResNet-20's layer shapes at logN = 16 (2^15 slots, 128-bit secure; 11 ciphertext primes and
//! 6 special primes, as the bootstrappable set): time, rotations, estimated cost and precision,
//! the two alternated in one process.
//!     cargo run --release -p lycaon-nn --example conv_methods [-- REPS]
use std::sync::Arc;
use std::time::Instant;

use lycaon_backend::RayonBackend;
use lycaon_ckks::rlwe::{Parameters, PublicKey, SecretKey};
use lycaon_ckks::{precision_stats, CkksContext, Decryptor, Encoder, EvaluationKeys, Evaluator, PublicKeyEncryptor};
use lycaon_math::Sampler;
use lycaon_nn::fhe::mpconv::conv_reference_f64;
use lycaon_nn::fhe::{BsgsConv, FheOps, MpConv, MultiplexedLayout};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let reps: usize = std::env::args().nth(1).map(|s| s.parse().expect("REPS")).unwrap_or(2);
    let lit = lycaon_ckks::scale_stable_literal(1 << 16, 60, 40, 10, &[61; 6]).expect("parameters");
    let params: Arc<Parameters> = Parameters::with_backend(lit, RayonBackend::shared()).expect("parameters");
    let ctx = CkksContext::new(&params, 2f64.powi(40)).expect("context");
    let mut sampler = Sampler::from_os().expect("OS randomness");
    let sk = SecretKey::generate(&params, &mut sampler).expect("secret key");
    let pk = Arc::new(PublicKey::generate(&sk, &mut sampler).expect("public key"));
    let slots = ctx.max_slots();
    let (mut total_mp, mut total_bsgs) = (0.0, 0.0);
    // (c_in, hw, gap, c_out, kernel, stride): ResNet-20's three stages, its downsampling layers and shortcuts.
    for (c_in, hw, gap, c_out, kernel, stride) in [(16, 32, 1, 16, 3, 1), (16, 32, 1, 32, 3, 2), (16, 32, 1, 32, 1, 2), (32, 16, 2, 32, 3, 1), (32, 16, 2, 64, 3, 2), (32, 16, 2, 64, 1, 2), (64, 8, 4, 64, 3, 1)] {
        let input = MultiplexedLayout::new(c_in, hw, hw, gap, slots).expect("layout");
        let w: Vec<f64> = (0..c_out * c_in * kernel * kernel).map(|i| (((i * 7919) % 17) as f64 / 17.0 - 0.5) / (c_in as f64).sqrt()).collect();
        let mp = MpConv::new(input, c_out, kernel, stride, &w).expect("layer");
        let bsgs = BsgsConv::new(input, c_out, kernel, stride, &w).expect("layer");
        let mut steps: Vec<i64> = mp.rotation_steps().into_iter().chain(bsgs.rotation_steps()).collect();
        steps.sort_unstable();
        steps.dedup();
        let ops = FheOps::new(Evaluator::new(&ctx, EvaluationKeys::generate(&sk, &steps, false, &mut sampler).expect("keys")));
        let x: Vec<f64> = (0..c_in * hw * hw).map(|i| ((i * 31) % 13) as f64 / 13.0 - 0.5).collect();
        let want = mp.output_layout().pack(&conv_reference_f64((c_in, hw, hw), &x, c_out, kernel, stride, &w)).expect("pack");
        let level = ctx.max_level();
        let pt = Encoder::new(&ctx).encode_real(&input.pack(&x).expect("pack"), level, ctx.scale_at(level).expect("scale")).expect("encode");
        let ct = PublicKeyEncryptor::new(&ctx, pk.clone()).expect("encryptor").encrypt(&pt).expect("encrypt");
        let decrypt = |c: &lycaon_ckks::Ciphertext| Encoder::new(&ctx).decode_real(&Decryptor::new(&ctx, &sk).expect("decryptor").decrypt(c).expect("decrypt")).expect("decode");
        let (mut t_mp, mut t_bsgs) = (Vec::new(), Vec::new());
        let (mut p_mp, mut p_bsgs) = (0.0, 0.0);
        for _ in 0..reps {
            let t0 = Instant::now();
            let out = mp.evaluate(&ops, &ct).expect("MPConv");
            t_mp.push(t0.elapsed().as_secs_f64());
            p_mp = precision_stats(&want, &decrypt(&out)).min_bits;
            let t0 = Instant::now();
            let out = bsgs.evaluate(&ops, &ct).expect("BsgsConv");
            t_bsgs.push(t0.elapsed().as_secs_f64());
            p_bsgs = precision_stats(&want, &decrypt(&out)).min_bits;
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (tm, tb) = (median(&mut t_mp), median(&mut t_bsgs));
        total_mp += tm;
        total_bsgs += tb;
        println!(
            "{c_in}x{hw}x{hw} gap {gap} -> {c_out}, f {kernel}, s {stride}: MPConv {tm:.3} s ({} rotations, {:.1} est., {:.1} bits) | BsgsConv {tb:.3} s ({} rotations, {:.1} est., {:.1} bits; q {}, n1 {}) | ratio {:.3}",
            mp.counts().rotations,
            mp.estimated_cost(),
            p_mp,
            bsgs.counts().rotations,
            bsgs.estimated_cost(),
            p_bsgs,
            bsgs.groups(),
            bsgs.baby_blocks(),
            tb / tm
        );
    }
    println!("all layers: MPConv {total_mp:.3} s, BsgsConv {total_bsgs:.3} s, ratio {:.3}", total_bsgs / total_mp);
}
