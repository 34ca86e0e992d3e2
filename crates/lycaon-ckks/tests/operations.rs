//! Precision in bits of every CKKS operation on random inputs in [-1, 1], at logN = 14 with a
//! 40-bit scale, and the errors bad input gets.

mod common;
use common::*;

use lycaon_ckks::{precision_stats, precision_stats_complex, CkksError, Complex64, Evaluator};

fn check(label: &str, want: &[Complex64], got: &[Complex64], min_bits: f64) {
    let s = precision_stats_complex(want, got);
    println!("{label:<28} {s}");
    assert!(s.min_bits >= min_bits && s.mean_bits >= min_bits + 2.0, "{label}: {s} (wanted min >= {min_bits}, mean >= {})", min_bits + 2.0);
}

#[test]
fn encode_decode_round_trip_full_and_sparse() {
    let mut s = setup14(&[]);
    for slots in [1usize, 2, 16, 1024, 8192] {
        let v = s.random_complex(slots);
        let level = s.ctx.max_level();
        let pt = s.encoder.encode(&v, level, s.ctx.scale_at(level).unwrap()).unwrap();
        assert_eq!(pt.slots(), slots);
        let got = s.encoder.decode(&pt).unwrap();
        check(&format!("encode/decode {slots} slots"), &v, &got, 32.0);
    }
    // Sparse slots replicate across the full embedding.
    let v = s.random_complex(4);
    let pt = s.encoder.encode(&v, 0, 2f64.powi(40)).unwrap();
    let mut full = pt.clone();
    let ct = s.enc.encrypt(&full).unwrap();
    let mut ct_full = ct.clone();
    ct_full.set_slots(&s.ctx, 8192).unwrap();
    let got = s.decrypt(&ct_full);
    let want: Vec<Complex64> = (0..8192).map(|i| v[i % 4]).collect();
    check("sparse replicated", &want, &got, 19.0);
    // Huge scales take the 128-bit and big-integer paths exactly.
    for log_scale in [70, 100, 140] {
        full = s.encoder.encode(&v, s.ctx.max_level(), 2f64.powi(log_scale)).unwrap();
        check(&format!("encode at 2^{log_scale}"), &v, &s.encoder.decode(&full).unwrap(), 32.0);
    }
}

#[test]
fn encryption_and_arithmetic() {
    let mut s = setup14(&[]);
    let slots = 8192;
    let (x, y) = (s.random_complex(slots), s.random_complex(slots));
    let cx = s.encrypt(&x);
    check("public encryption", &x, &s.decrypt(&cx), 19.0);
    // Re-randomisation with the public key alone: the same message in a different ciphertext.
    let fresh = s.enc.rerandomise(&cx).unwrap();
    assert!(fresh != cx && fresh.scale() == cx.scale() && fresh.level() == cx.level());
    check("re-randomised", &x, &s.decrypt(&fresh), 18.0);
    let level = s.ctx.max_level();
    let pt_y = s.encoder.encode(&y, level, s.ctx.scale_at(level).unwrap()).unwrap();
    let seeded = s.sym.encrypt(&pt_y).unwrap();
    let cy = seeded.expand(&s.ctx).unwrap();
    check("symmetric encryption", &y, &s.decrypt(&cy), 19.0);

    let e = &s.eval;
    let sum: Vec<Complex64> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    check("add", &sum, &s.decrypt(&e.add(&cx, &cy).unwrap()), 19.0);
    let diff: Vec<Complex64> = x.iter().zip(&y).map(|(a, b)| a - b).collect();
    check("sub", &diff, &s.decrypt(&e.sub(&cx, &cy).unwrap()), 19.0);
    check("negate", &x.iter().map(|a| -a).collect::<Vec<_>>(), &s.decrypt(&e.negate(&cx).unwrap()), 19.0);
    check("add_plain", &sum, &s.decrypt(&e.add_plain(&cx, &pt_y).unwrap()), 19.0);
    check("sub_plain", &diff, &s.decrypt(&e.sub_plain(&cx, &pt_y).unwrap()), 19.0);
    let c = Complex64::new(0.3, -1.7);
    check("add_const complex", &x.iter().map(|a| a + c).collect::<Vec<_>>(), &s.decrypt(&e.add_const(&cx, c).unwrap()), 19.0);

    let prod: Vec<Complex64> = x.iter().zip(&y).map(|(a, b)| a * b).collect();
    let pscale = e.plaintext_scale_for(&cx).unwrap();
    let pt_y2 = s.encoder.encode(&y, level, pscale).unwrap();
    let mp = e.rescale(&e.mul_plain(&cx, &pt_y2).unwrap()).unwrap();
    assert_eq!(mp.scale(), s.ctx.scale_at(level - 1).unwrap(), "mul_plain lands on the canonical scale");
    check("mul_plain + rescale", &prod, &s.decrypt(&mp), 17.0);

    let mc = e.rescale(&e.mul_const(&cx, -2.625).unwrap()).unwrap();
    assert_eq!(mc.scale(), s.ctx.scale_at(level - 1).unwrap());
    check("mul_const real", &x.iter().map(|a| a * -2.625).collect::<Vec<_>>(), &s.decrypt(&mc), 17.0);
    let mcc = e.rescale(&e.mul_const_complex(&cx, c).unwrap()).unwrap();
    check("mul_const complex", &x.iter().map(|a| a * c).collect::<Vec<_>>(), &s.decrypt(&mcc), 17.0);
    check("mul_integer", &x.iter().map(|a| a * 3.0).collect::<Vec<_>>(), &s.decrypt(&e.mul_integer(&cx, 3).unwrap()), 17.0);

    let m = e.mul_relin(&cx, &cy).unwrap();
    let r = e.rescale(&m).unwrap();
    assert_eq!(r.level(), level - 1);
    assert_eq!(r.scale(), s.ctx.scale_at(level - 1).unwrap(), "canonical scales compose exactly");
    check("mul + relin + rescale", &prod, &s.decrypt(&r), 17.0);
    let m3 = e.rescale(&e.relinearize(&e.mul(&cx, &cy).unwrap()).unwrap()).unwrap();
    check("mul, relinearize, rescale", &prod, &s.decrypt(&m3), 17.0);
    // Unrelinearised, the rescale's rounding of c2 meets s^2 at decryption: about 3 bits below
    // the relinearised product, and the minimum over 8192 slots ranged 16.8-18.0 in 12 runs
    // (a bar of 17 failed about one run in six).
    check("3-part decrypt", &prod, &s.decrypt(&e.rescale(&e.mul(&cx, &cy).unwrap()).unwrap()), 16.0);

    // Mixed levels: x (top) + x*y (one level down) meet at the lower level exactly.
    let mixed = e.add(&cx, &r).unwrap();
    assert_eq!(mixed.level(), level - 1);
    check("add across levels", &x.iter().zip(&prod).map(|(a, b)| a + b).collect::<Vec<_>>(), &s.decrypt(&mixed), 17.0);
    // Different scales at one level, fixed on the way down.
    let mut odd = cx.clone();
    odd.set_scale_metadata(cx.scale() * 1.001).unwrap();
    let fixed = e.add(&odd, &r).unwrap();
    check("add with scale fix-up", &x.iter().zip(&prod).map(|(a, b)| a / 1.001 + b).collect::<Vec<_>>(), &s.decrypt(&fixed), 17.0);
    let ss = e.set_scale(&cx, 2f64.powi(33)).unwrap();
    assert_eq!(ss.scale(), 2f64.powi(33));
    check("set_scale", &x, &s.decrypt(&ss), 17.0);
    let dropped = e.drop_level(&cx, 3).unwrap();
    assert_eq!(dropped.level(), level - 3);
    check("drop_level", &x, &s.decrypt(&dropped), 19.0);
}

#[test]
fn rotations_and_conjugation() {
    let steps = [1i64, 2, 5, -1, -7, 100, 4095];
    let mut s = setup14(&steps);
    let slots = 8192;
    let x = s.random_complex(slots);
    let cx = s.encrypt(&x);
    for &k in &steps {
        let r = s.eval.rotate(&cx, k).unwrap();
        check(&format!("rotate {k}"), &rotate_plain(&x, k), &s.decrypt(&r), 17.0);
    }
    let hoisted = s.eval.rotate_hoisted(&cx, &steps).unwrap();
    for (&k, r) in steps.iter().zip(&hoisted) {
        check(&format!("hoisted rotate {k}"), &rotate_plain(&x, k), &s.decrypt(r), 17.0);
    }
    let conj = s.eval.conjugate(&cx).unwrap();
    check("conjugate", &x.iter().map(|c| c.conj()).collect::<Vec<_>>(), &s.decrypt(&conj), 17.0);
    // Sparse slots rotate within their own period.
    let v = s.random_complex(64);
    let cv = s.encrypt(&v);
    check("sparse rotate 5", &rotate_plain(&v, 5), &s.decrypt(&s.eval.rotate(&cv, 5).unwrap()), 17.0);
    check("sparse rotate -1", &rotate_plain(&v, -1), &s.decrypt(&s.eval.rotate(&cv, -1).unwrap()), 17.0);
}

#[test]
fn bad_input_gets_clear_errors() {
    let mut s = setup14(&[1]);
    let x = s.random_real(16);
    let cx = s.encrypt_real(&x);
    let level = s.ctx.max_level();
    // Missing keys name what is missing.
    let err = s.eval.rotate(&cx, 3).unwrap_err();
    assert!(matches!(err, CkksError::MissingRotationKey { .. }) && err.to_string().contains("rotation by 3"), "{err}");
    let bare = Evaluator::without_keys(&s.ctx);
    assert_eq!(bare.mul_relin(&cx, &cx).unwrap_err(), CkksError::MissingRelinKey);
    assert!(bare.conjugate(&cx).unwrap_err().to_string().contains("conjugation"));
    // Scale mismatch at one level.
    let mut odd = cx.clone();
    odd.set_scale_metadata(cx.scale() * 1.5).unwrap();
    let err = s.eval.add(&cx, &odd).unwrap_err();
    assert!(matches!(err, CkksError::ScaleMismatch { .. }) && err.to_string().contains("set_scale"), "{err}");
    let pt = s.encoder.encode_real(&x, level, 2f64.powi(30)).unwrap();
    assert!(matches!(s.eval.add_plain(&cx, &pt).unwrap_err(), CkksError::ScaleMismatch { .. }));
    // Plaintext below the ciphertext's level.
    let low = s.encoder.encode_real(&x, 0, cx.scale()).unwrap();
    assert_eq!(s.eval.mul_plain(&cx, &low).unwrap_err(), CkksError::PlaintextLevelTooLow { plaintext: 0, ciphertext: level });
    // Rescale at level 0, too many levels dropped.
    let bottom = s.eval.drop_to_level(&cx, 0).unwrap();
    assert!(matches!(s.eval.rescale(&bottom).unwrap_err(), CkksError::NotEnoughLevels { op: "rescale", .. }));
    assert!(s.eval.drop_level(&bottom, 1).is_err());
    assert!(s.eval.drop_to_level(&bottom, 3).is_err());
    // Encoding: too many values, bad slots, non-finite values, scale overflow.
    assert!(matches!(s.encoder.encode_real(&vec![0.0; 8193], 0, 1e10).unwrap_err(), CkksError::TooManyValues { .. }));
    assert!(matches!(s.encoder.encode_with_slots(&[], 3, 0, 1e10).unwrap_err(), CkksError::InvalidSlots { slots: 3, .. }));
    assert!(matches!(s.encoder.encode_real(&[f64::NAN], 0, 1e10).unwrap_err(), CkksError::NonFiniteValue { index: 0, .. }));
    let err = s.encoder.encode_real(&[1e6], 0, 2f64.powi(50)).unwrap_err();
    assert!(matches!(err, CkksError::ScaleOverflow { .. }), "{err}");
    assert!(matches!(s.encoder.encode_real(&[1.0], 0, f64::INFINITY).unwrap_err(), CkksError::InvalidScale { .. }));
    // A 3-part ciphertext cannot be rotated or multiplied again.
    let three = s.eval.mul(&cx, &cx).unwrap();
    assert_eq!(s.eval.rotate(&three, 1).unwrap_err(), CkksError::WrongSize { expected: 2, found: 3 });
    assert!(matches!(s.eval.mul(&three, &cx).unwrap_err(), CkksError::WrongSize { .. }));
    let _ = precision_stats(&x, &x);
}
