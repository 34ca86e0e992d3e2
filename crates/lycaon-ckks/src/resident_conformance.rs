//! A suite every resident backend runs: each [`ResidentEvaluator`] operation on random
//! ciphertexts must return what [`Evaluator`] returns, bit for bit (same polynomials, scale and
//! level), and bad operands must get the host evaluator's errors.

use std::sync::Arc;

use lycaon_backend::ResidentBackend;
use lycaon_math::Sampler;
use lycaon_rlwe::{Parameters, ParametersLiteral, PublicKey, SecretKey, Security};
use num_complex::Complex64;

use crate::{Ciphertext, CkksContext, CkksError, Encoder, EvaluationKeys, Evaluator, LinearTransform, PublicKeyEncryptor, ResidentCiphertext, ResidentEvaluator};

/// Toy parameters for the suite: degree `n`, a 50-bit q_0, `levels` 40-bit primes, two 55-bit
/// special primes and two key-switching digits (so ModUp converts multi-prime digits).
pub fn toy_literal(n: usize, levels: usize) -> ParametersLiteral {
    let mut lit = crate::scale_stable_literal(n.max(1024), 50, 40, levels, &[55, 55]).expect("toy chain");
    if n < 1024 {
        let bits: Vec<u32> = std::iter::once(50).chain(std::iter::repeat_n(40, levels)).collect();
        lit = ParametersLiteral::ckks_from_bits(n, &bits, &[55, 55]).expect("toy chain");
    }
    lit.key_switch_digits = 2;
    lit.security = Security::InsecureTestOnly;
    lit
}

fn same<B: ResidentBackend>(what: &str, re: &ResidentEvaluator<B>, got: &ResidentCiphertext<B>, want: &Ciphertext) {
    let got = re.download(got).unwrap_or_else(|e| panic!("{what}: download failed: {e}"));
    assert_eq!(got.level(), want.level(), "{what}: level");
    assert_eq!(got.scale().to_bits(), want.scale().to_bits(), "{what}: scale");
    assert_eq!(got.len(), want.len(), "{what}: part count");
    for (p, (g, w)) in got.inner.parts().iter().zip(want.inner.parts()).enumerate() {
        if let Some(k) = g.data().iter().zip(w.data()).position(|(x, y)| x != y) {
            panic!("{what}: part {p} differs from the host evaluator's at word {k} (limb {}): {} != {}", k / g.n(), g.data()[k], w.data()[k]);
        }
    }
}

/// A resident evaluator with a relinearisation key and rotation keys for steps 1, -3 and 5 over
/// [`toy_literal`]`(n, 4)`, and two uploaded ciphertexts at the top level.
pub fn session<B: ResidentBackend>(backend: Arc<B>, n: usize) -> (ResidentEvaluator<B>, ResidentCiphertext<B>, ResidentCiphertext<B>) {
    let params = Parameters::new(toy_literal(n, 4)).expect("parameters");
    let ctx = CkksContext::new(&params, 2f64.powi(40)).unwrap();
    let mut sampler = Sampler::from_seed([9; 32]);
    let sk = SecretKey::generate(&params, &mut sampler).unwrap();
    let pk = Arc::new(PublicKey::generate(&sk, &mut sampler).unwrap());
    let keys = EvaluationKeys::generate(&sk, &[1, -3, 5], true, &mut sampler).unwrap();
    let re = ResidentEvaluator::new(&ctx, backend, &keys).unwrap();
    let mut enc = PublicKeyEncryptor::new(&ctx, pk).unwrap();
    let encoder = Encoder::new(&ctx);
    let top = ctx.max_level();
    let v: Vec<Complex64> = (0..ctx.max_slots()).map(|i| Complex64::new(i as f64 / ctx.max_slots() as f64, 0.0)).collect();
    let pt = encoder.encode(&v, top, ctx.scale_at(top).unwrap()).unwrap();
    let a = re.upload(&enc.encrypt(&pt).unwrap()).unwrap();
    let b = re.upload(&enc.encrypt(&pt).unwrap()).unwrap();
    (re, a, b)
}

/// Runs every operation through `backend` and through the host evaluator on the same inputs and
/// panics naming the first that differs. `n` is the ring degree (small for an emulated device).
pub fn check_resident_evaluator<B: ResidentBackend>(backend: Arc<B>, n: usize) {
    let levels = 4;
    let params = Parameters::new(toy_literal(n, levels)).expect("parameters");
    let ctx = CkksContext::new(&params, 2f64.powi(40)).unwrap();
    let mut sampler = Sampler::from_seed([7; 32]);
    let sk = SecretKey::generate(&params, &mut sampler).unwrap();
    let pk = Arc::new(PublicKey::generate(&sk, &mut sampler).unwrap());
    // A transform with six diagonals (BSGS over two giant steps), in both hoisting variants.
    let slots = ctx.max_slots();
    let diagonal = |k: usize| -> Vec<Complex64> { (0..slots).map(|i| Complex64::new(((i * 5 + k * 3) % 13) as f64 / 13.0 - 0.5, ((i + k) % 7) as f64 / 14.0)).collect() };
    let lt = LinearTransform::new(&ctx, slots, [0usize, 1, 2, 5, 6, 9].map(|k| (k as i64, diagonal(k)))).unwrap().with_baby_steps(4).unwrap();
    let mut steps = vec![1i64, -3, 5];
    steps.extend(lt.rotations());
    steps.sort_unstable();
    steps.dedup();
    let keys = EvaluationKeys::generate(&sk, &steps, true, &mut sampler).unwrap();
    let host = Evaluator::new(&ctx, keys.clone());
    let re = ResidentEvaluator::new(&ctx, backend, &keys).unwrap();
    let encoder = Encoder::new(&ctx);
    let mut enc = PublicKeyEncryptor::new(&ctx, pk).unwrap();
    let values = |seed: u64| -> Vec<Complex64> {
        (0..slots).map(|i| Complex64::new(((i as u64 * 7 + seed) % 11) as f64 / 11.0 - 0.5, ((i as u64 * 3 + seed) % 5) as f64 / 5.0 - 0.4)).collect()
    };
    let top = ctx.max_level();
    let pa = encoder.encode(&values(1), top, ctx.scale_at(top).unwrap()).unwrap();
    let pb = encoder.encode(&values(2), top, ctx.scale_at(top).unwrap()).unwrap();
    let a = enc.encrypt(&pa).unwrap();
    let b = enc.encrypt(&pb).unwrap();
    let (ra, rb) = (re.upload(&a).unwrap(), re.upload(&b).unwrap());
    same("upload and download", &re, &ra, &a);

    same("add", &re, &re.add(&ra, &rb).unwrap(), &host.add(&a, &b).unwrap());
    same("sub", &re, &re.sub(&ra, &rb).unwrap(), &host.sub(&a, &b).unwrap());
    same("negate", &re, &re.negate(&ra).unwrap(), &host.negate(&a).unwrap());
    same("drop_to_level", &re, &re.drop_to_level(&ra, 1).unwrap(), &host.drop_to_level(&a, 1).unwrap());
    same("rescale", &re, &re.rescale(&ra).unwrap(), &host.rescale(&a).unwrap());
    same("set_scale", &re, &re.set_scale(&ra, 2f64.powi(37)).unwrap(), &host.set_scale(&a, 2f64.powi(37)).unwrap());
    same("mul_integer", &re, &re.mul_integer(&ra, -5).unwrap(), &host.mul_integer(&a, -5).unwrap());
    same("mul_const", &re, &re.mul_const(&ra, -0.3125).unwrap(), &host.mul_const(&a, -0.3125).unwrap());
    let c = Complex64::new(0.25, -1.5);
    same("mul_const_complex", &re, &re.mul_const_complex(&ra, c).unwrap(), &host.mul_const_complex(&a, c).unwrap());
    same("add_const", &re, &re.add_const(&ra, c).unwrap(), &host.add_const(&a, c).unwrap());
    let pt = encoder.encode(&values(3), top, host.plaintext_scale_for(&a).unwrap()).unwrap();
    let rpt = re.upload_plaintext(&pt).unwrap();
    same("mul_plain", &re, &re.mul_plain(&ra, &rpt).unwrap(), &host.mul_plain(&a, &pt).unwrap());
    let pt_add = encoder.encode(&values(4), top, a.scale()).unwrap();
    let rpt_add = re.upload_plaintext(&pt_add).unwrap();
    same("add_plain", &re, &re.add_plain(&ra, &rpt_add).unwrap(), &host.add_plain(&a, &pt_add).unwrap());
    same("sub_plain", &re, &re.sub_plain(&ra, &rpt_add).unwrap(), &host.sub_plain(&a, &pt_add).unwrap());

    let prod = host.mul(&a, &b).unwrap();
    let rprod = re.mul(&ra, &rb).unwrap();
    same("mul (tensor)", &re, &rprod, &prod);
    same("relinearize", &re, &re.relinearize(&rprod).unwrap(), &host.relinearize(&prod).unwrap());
    same("mul_relin_rescale", &re, &re.mul_relin_rescale(&ra, &rb).unwrap(), &host.mul_relin_rescale(&a, &b).unwrap());
    same("add of a 3-part and a 2-part", &re, &re.sub(&ra, &rprod).unwrap(), &host.sub(&a, &prod).unwrap());

    // Operands at different levels and scales: the alignment policy runs on the device too.
    let low = host.mul_relin_rescale(&a, &b).unwrap();
    let rlow = re.upload(&low).unwrap();
    same("add across levels", &re, &re.add(&ra, &rlow).unwrap(), &host.add(&a, &low).unwrap());
    same("sub across levels", &re, &re.sub(&rlow, &ra).unwrap(), &host.sub(&low, &a).unwrap());

    let rotated = host.rotate_hoisted(&a, &[1, -3, 5, 0]).unwrap();
    for (i, r) in re.rotate_hoisted(&ra, &[1, -3, 5, 0]).unwrap().iter().enumerate() {
        same("rotate_hoisted", &re, r, &rotated[i]);
    }
    same("rotate at a lower level", &re, &re.rotate(&rlow, -3).unwrap(), &host.rotate(&low, -3).unwrap());
    same("conjugate", &re, &re.conjugate(&ra).unwrap(), &host.conjugate(&a).unwrap());

    for (what, lt, x, rx) in [
        ("linear transform, double hoisting", lt.clone(), &a, &ra),
        ("linear transform, single hoisting", lt.clone().with_double_hoisting(false), &a, &ra),
        ("linear transform at a lower level", lt.clone(), &low, &rlow),
    ] {
        let target = ctx.scale_at(x.level() - 1).unwrap() * 1.5;
        let sigma = host.linear_transform_scale(x, target).unwrap();
        let diags = re.prepare_transform(&lt, x.level(), sigma).unwrap();
        same(what, &re, &re.linear_transform_prepared(rx, &lt, &diags, target).unwrap(), &host.linear_transform_to_scale(x, &lt, target).unwrap());
        let wrong = re.prepare_transform(&lt, x.level(), sigma * 2.0).unwrap();
        assert!(matches!(re.linear_transform_prepared(rx, &lt, &wrong, target), Err(CkksError::InvalidArgument { .. })), "{what}: diagonals for another scale");
    }

    // Polynomial evaluation (Chebyshev basis, baby-step giant-step tree, leaves): degree 7 on
    // [-1, 1] (no level for the change of variable) and degree 5 on [0, 3] (one level).
    for (what, poly) in [
        ("chebyshev degree 7 on [-1, 1]", crate::ChebyshevPoly::interpolate(|x| (2.0 * x).sin(), -1.0, 1.0, 7).unwrap()),
        ("chebyshev degree 5 on [0, 3]", crate::ChebyshevPoly::interpolate(|x| x * x - 0.5 * x, 0.0, 3.0, 5).unwrap()),
    ] {
        let scale = ctx.scale_at(top - poly.depth()).unwrap();
        same(what, &re, &re.evaluate_chebyshev_to_scale(&ra, &poly, scale).unwrap(), &host.evaluate_chebyshev_to_scale(&a, &poly, scale).unwrap());
    }

    // Double-hoisted rotation sums (the multiplexed convolutions' core): two ciphertexts' baby
    // steps into one set of giant sums, closed and finished; and a sum made in one call.
    {
        use crate::{GiantStep, GiantSums};
        let reals = |seed: u64| -> Vec<f64> { values(seed).iter().map(|c| c.re).collect() };
        let (v1, v2, v3) = (reals(11), reals(12), reals(13));
        let steps = [0i64, 1, -3, 5];
        let (ha, hb) = (host.hoist_rotations(&a, &steps).unwrap(), host.hoist_rotations(&b, &steps).unwrap());
        let (rha, rhb) = (re.hoist_rotations(&ra, &steps).unwrap(), re.hoist_rotations(&rb, &steps).unwrap());
        let ps = host.plaintext_scale_at(a.level(), a.scale()).unwrap();
        let giants_a = [GiantStep { giant: 0, terms: vec![(1, &v1[..]), (0, &v2[..])] }, GiantStep { giant: 5, terms: vec![(-3, &v1[..])] }];
        let giants_b = [GiantStep { giant: 5, terms: vec![(1, &v3[..])] }, GiantStep { giant: 1, terms: vec![(5, &v2[..]), (-3, &v3[..])] }];
        let mut sums = GiantSums::new(&ha, ps);
        host.add_rotated_products(&mut sums, &ha, &giants_a).unwrap();
        host.add_rotated_products(&mut sums, &hb, &giants_b).unwrap();
        let want = host.finish_extended(host.close_giant_sums(sums).unwrap()).unwrap();
        let mut rsums = GiantSums::new(&rha, ps);
        re.add_rotated_products(&mut rsums, &rha, &giants_a).unwrap();
        let mut more = GiantSums::new(&rhb, ps);
        re.add_rotated_products(&mut more, &rhb, &giants_b).unwrap();
        re.merge_giant_sums(&mut rsums, more).unwrap();
        same("rotation sums over two ciphertexts", &re, &re.finish_extended(re.close_giant_sums(rsums).unwrap()).unwrap(), &want);
        let one = host.finish_extended(host.rotated_products(&ha, &giants_a, ps).unwrap()).unwrap();
        same("rotated products", &re, &re.finish_extended(re.rotated_products(&rha, &giants_a, ps).unwrap()).unwrap(), &one);
        let mut e = re.rotated_products(&rha, &giants_a, ps).unwrap();
        re.add_extended(&mut e, &re.rotated_products(&rhb, &giants_b, ps).unwrap()).unwrap();
        let mut he = host.rotated_products(&ha, &giants_a, ps).unwrap();
        he.add_assign(&host.rotated_products(&hb, &giants_b, ps).unwrap()).unwrap();
        same("added extended sums", &re, &re.finish_extended(e).unwrap(), &host.finish_extended(he).unwrap());
        let missing = [GiantStep { giant: 2, terms: vec![(1, &v1[..])] }];
        assert_eq!(
            re.rotated_products(&rha, &missing, ps).err().map(|e| e.to_string()),
            host.rotated_products(&ha, &missing, ps).err().map(|e| e.to_string()),
            "a giant step without its key"
        );
    }

    // Encoding on the backend: full and sparse slots, at the top and lower levels, real and
    // complex values, a scale past 2^62 (the host path), and the host's errors.
    for (slots, level, scale) in [(slots, top, ctx.scale_at(top).unwrap()), (slots / 4, 2, 2f64.powi(30)), (1, 1, 2f64.powi(20)), (slots, top, 2f64.powi(70))] {
        let v: Vec<Complex64> = values(slots as u64)[..slots].to_vec();
        let got = re.encode(&v, slots, level, scale).unwrap();
        let want = encoder.encode_with_slots(&v, slots, level, scale).unwrap();
        assert_eq!(got.poly.download(re.b()).unwrap(), want.poly, "encode ({slots} slots, level {level}, scale 2^{})", scale.log2());
        assert_eq!((got.scale.to_bits(), got.log_slots), (want.scale.to_bits(), want.log_slots));
    }
    let err = |r: Result<crate::ResidentPlaintext<B>, CkksError>| r.err().map(|e| e.to_string());
    assert_eq!(err(re.encode(&values(1), slots, top, 2f64.powi(200))), encoder.encode_with_slots(&values(1), slots, top, 2f64.powi(200)).err().map(|e| e.to_string()), "scale overflow");
    assert_eq!(err(re.encode(&values(1), slots / 2, top, 2f64.powi(30))), encoder.encode_with_slots(&values(1), slots / 2, top, 2f64.powi(30)).err().map(|e| e.to_string()), "too many values");

    // Errors are the host's.
    let err = |r: Result<ResidentCiphertext<B>, CkksError>| r.err().map(|e| e.to_string());
    assert_eq!(err(re.rotate(&ra, 2)), host.rotate(&a, 2).err().map(|e| e.to_string()), "missing rotation key");
    let bottom = host.drop_to_level(&a, 0).unwrap();
    let rbottom = re.upload(&bottom).unwrap();
    assert_eq!(err(re.rescale(&rbottom)), host.rescale(&bottom).err().map(|e| e.to_string()), "rescale at level 0");
    assert_eq!(err(re.relinearize(&ra)), host.relinearize(&a).err().map(|e| e.to_string()), "relinearize of 2 parts");
    let low_pt = encoder.encode(&values(5), 1, ctx.scale_at(1).unwrap()).unwrap();
    let rlow_pt = re.upload_plaintext(&low_pt).unwrap();
    assert_eq!(err(re.mul_plain(&ra, &rlow_pt)), host.mul_plain(&a, &low_pt).err().map(|e| e.to_string()), "plaintext below the ciphertext");
    assert!(levels >= 2);
}

/// Bootstraps one ciphertext through `backend` ([`crate::bootstrap::Bootstrapper::bootstrap_on`]
/// with a [`ResidentEvaluator`]) and through the host evaluator, for the toy shape of degree
/// 2^log_n and 2^log_slots slots (dense secret, insecure test parameters), and panics unless the
/// results are identical; bootstraps twice so the second run takes the cached diagonals.
pub fn check_resident_bootstrap<B: ResidentBackend>(backend: Arc<B>, log_n: u32, log_slots: u32) {
    use crate::bootstrap::{BootstrapKeys, BootstrapParams, Bootstrapper, DiagonalCache};
    let bp = BootstrapParams::toy(log_n, log_slots, 1);
    let mut lit = bp.literal().unwrap();
    lit.security = Security::InsecureTestOnly;
    let top_scale = bp.top_scale(&lit);
    let params = Parameters::new(lit).unwrap();
    let ctx = CkksContext::new(&params, top_scale).unwrap();
    let mut sampler = Sampler::from_seed([11; 32]);
    let sk = SecretKey::generate(&params, &mut sampler).unwrap();
    let pk = Arc::new(PublicKey::generate(&sk, &mut sampler).unwrap());
    let boot = Bootstrapper::new(&ctx, bp).unwrap();
    let BootstrapKeys { evaluation, encapsulation } = boot.generate_keys(&sk, &mut sampler).unwrap();
    let host = Evaluator::new(&ctx, evaluation.clone());
    let mut re = ResidentEvaluator::new(&ctx, backend, &evaluation).unwrap();
    if let Some(keys) = &encapsulation {
        re.attach_encapsulation_keys(keys).unwrap();
    }
    let boot = boot.with_encapsulation_keys(encapsulation.clone());
    let slots = 1usize << log_slots;
    let values: Vec<Complex64> = (0..slots).map(|i| Complex64::new(((i * 7) % 19) as f64 / 19.0 - 0.5, 0.0)).collect();
    let pt = Encoder::new(&ctx).encode(&values, 0, ctx.scale_at(0).unwrap()).unwrap();
    let ct = PublicKeyEncryptor::new(&ctx, pk).unwrap().encrypt(&pt).unwrap();
    let want = boot.bootstrap(&host, &ct).unwrap();
    let cache = DiagonalCache::default();
    let rct = re.upload(&ct).unwrap();
    for run in ["bootstrap", "bootstrap with cached diagonals"] {
        let got = boot.bootstrap_on(&re, &rct, encapsulation.as_ref(), &cache).unwrap();
        same(run, &re, &got, &want);
    }
    assert!(!cache.is_empty());
}
