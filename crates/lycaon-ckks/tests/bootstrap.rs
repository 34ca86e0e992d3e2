//! Bootstrapping end to end: random inputs in [-1, 1], precision in bits after one bootstrap
//! and a chain of them with computation in between, levels left, key memory.

use std::sync::Arc;
use std::time::Instant;

use lycaon_ckks::bootstrap::{BootstrapParams, Bootstrapper};
use lycaon_ckks::rlwe::{Parameters, PublicKey, SecretKey, Security};
use lycaon_ckks::{precision_stats, CkksContext, Decryptor, Encoder, Encryptor, Evaluator};
use lycaon_math::Sampler;

struct Setup {
    ctx: Arc<CkksContext>,
    boot: Bootstrapper,
    eval: Evaluator,
    sk: SecretKey,
    pk: PublicKey,
}

fn setup(bp: BootstrapParams, secure: bool, hamming_weight: Option<usize>) -> Setup {
    let mut lit = bp.literal().unwrap();
    if !secure {
        lit.security = Security::InsecureTestOnly;
    }
    let top_scale = bp.top_scale(&lit);
    let params = Parameters::new(lit).unwrap();
    let ctx = CkksContext::new(&params, top_scale).unwrap();
    let r = bp.residual_top();
    assert!((ctx.scale_at(r).unwrap().log2() - bp.log_scale as f64).abs() < 1e-3, "residual scale 2^{}", ctx.scale_at(r).unwrap().log2());
    let mut s = Sampler::from_os().unwrap();
    let sk = match hamming_weight {
        Some(h) => SecretKey::generate_sparse(&params, h, &mut s).unwrap(),
        None => SecretKey::generate(&params, &mut s).unwrap(),
    };
    let pk = PublicKey::generate(&sk, &mut s).unwrap();
    let boot = Bootstrapper::new(&ctx, bp).unwrap();
    let keys = boot.generate_keys(&sk, &mut s).unwrap();
    let eval = Evaluator::new(&ctx, keys);
    Setup { ctx, boot, eval, sk, pk }
}

fn random_values(count: usize, seed: u64) -> Vec<f64> {
    let mut x = seed | 1;
    (0..count)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
        .collect()
}

fn run_one(st: &Setup, seed: u64) -> (f64, f64, usize) {
    let slots = st.boot.params().slots();
    let values = random_values(slots, seed);
    let enc = Encoder::new(&st.ctx);
    let pt = enc.encode_real(&values, 0, st.ctx.scale_at(0).unwrap()).unwrap();
    let ct = Encryptor::new(&st.ctx).unwrap().encrypt(&st.pk, &pt).unwrap();
    let t = Instant::now();
    let out = st.boot.bootstrap(&st.eval, &ct).unwrap();
    let secs = t.elapsed().as_secs_f64();
    let got = enc.decode_real(&Decryptor::new(&st.ctx, &st.sk).unwrap().decrypt(&out).unwrap()).unwrap();
    let p = precision_stats(&values, &got);
    eprintln!("bootstrap of {slots} slots: {p}, level {} left, {secs:.2} s", out.level());
    (p.mean_bits, p.min_bits, out.level())
}

#[test]
fn toy_bootstrap_sparse_slots_reaches_precision() {
    // logN = 10, 16 slots, h = 32 secret (the EvalMod range assumes it), 2 residual levels.
    let st = setup(BootstrapParams::toy(10, 4, 2), false, Some(32));
    let (mean, min, level) = run_one(&st, 7);
    assert_eq!(level, 2);
    assert!(mean >= 20.0 && min >= 15.0, "mean {mean:.1} bits, min {min:.1}");
}

#[test]
fn toy_bootstrap_full_slots_and_a_chain_of_three_keep_precision() {
    // logN = 10 with all 512 slots; between bootstraps x -> x * y for a fresh encrypted y in
    // [-1, 1] (a ciphertext product, one level; it does not amplify earlier errors).
    let mut bp = BootstrapParams::toy(10, 9, 2);
    bp.evalmod.log_message_ratio = 8; // full slots: small coefficients, less noise amplification
    let st = setup(bp, false, Some(32));
    let (mean, min, level) = run_one(&st, 11);
    assert_eq!(level, 2);
    assert!(mean >= 20.0 && min >= 14.0, "mean {mean:.1} bits, min {min:.1}");
    let slots = st.boot.params().slots();
    let mut want = random_values(slots, 12);
    let enc = Encoder::new(&st.ctx);
    let pt = enc.encode_real(&want, 0, st.ctx.scale_at(0).unwrap()).unwrap();
    let mut ct = Encryptor::new(&st.ctx).unwrap().encrypt(&st.pk, &pt).unwrap();
    for round in 0..3u64 {
        ct = st.boot.bootstrap(&st.eval, &ct).unwrap();
        let y = random_values(slots, 100 + round);
        let level = ct.level();
        let pt = enc.encode_real(&y, level, st.ctx.scale_at(level).unwrap()).unwrap();
        let cy = Encryptor::new(&st.ctx).unwrap().encrypt(&st.pk, &pt).unwrap();
        ct = st.eval.mul_relin_rescale(&ct, &cy).unwrap();
        want.iter_mut().zip(&y).for_each(|(w, v)| *w *= v);
        let got = enc.decode_real(&Decryptor::new(&st.ctx, &st.sk).unwrap().decrypt(&ct).unwrap()).unwrap();
        let p = precision_stats(&want, &got);
        eprintln!("chain round {round}: {p}");
        assert!(p.mean_bits >= 20.0, "round {round}: {p}");
    }
}

/// logN = 16, 2^15 slots, 128-bit secure parameters (dense ternary secret for the standard's
/// check; K = 16 needs the phase under a weight-32 secret, so this test uses a sparse secret
/// for the whole key: encapsulation is not implemented yet).
///
/// Last run (2 shared cores): keys 38.9 s, 49 Galois keys + relinearisation 6.85 GB in memory
/// (2.75 GB serialised, seeded), one bootstrap 46.1 s, 10 levels left, but only 9.8 bits mean
/// precision (min 7.2): FAILS the 20-bit target while the same circuit reaches 21.7 bits at
/// logN = 10 full slots. Open: find the error source that grows with n.
#[test]
#[ignore = "logN = 16: about 10 GB of keys and minutes on two cores; run with --ignored"]
fn logn16_full_slot_bootstrap() {
    let t = Instant::now();
    let st = setup(BootstrapParams::logn16_full_slots(), true, Some(32));
    eprintln!("setup (keys) {:.1} s", t.elapsed().as_secs_f64());
    let g = st.eval.keys().galois.as_ref().unwrap();
    let r = st.eval.keys().relin.as_ref().unwrap();
    let bytes: usize = g.memory_bytes() + r.key().memory_bytes();
    let seeded: usize = g.serialized_len(true) + r.serialized_len(true);
    eprintln!("{} Galois keys + relin: {:.2} GB in memory, {:.2} GB serialised (seeded)", g.len(), bytes as f64 / 1e9, seeded as f64 / 1e9);
    let (mean, _, level) = run_one(&st, 5);
    assert!(level >= 10 && mean >= 20.0, "mean {mean:.1} bits at level {level}");
}
