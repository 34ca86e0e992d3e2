//! decrypt(op(enc(x))) == op(x) mod t for every operation, both encoders, at every supported n,
//! and the measured noise budget within 2 bits of the analytical model.

mod common;
use common::*;

use lycaon_bfv::noise::NoiseEstimate;
use lycaon_bfv::rlwe::Ciphertext;

fn mod_t(v: impl IntoIterator<Item = u128>, t: u64) -> Vec<u64> {
    v.into_iter().map(|x| (x % t as u128) as u64).collect()
}

fn assert_budget(s: &Setup, ct: &Ciphertext, predicted: NoiseEstimate, what: &str) {
    let measured = s.dec.noise_budget(ct).unwrap();
    let expected = s.model.budget(predicted);
    assert!(measured > 0.0, "{what}: noise budget exhausted");
    assert!((measured - expected).abs() <= 2.0, "{what}: measured budget {measured:.2} bits, model {expected:.2}");
    let worst = s.model.worst_case_budget(predicted);
    assert!(worst <= measured, "{what}: worst-case budget {worst:.2} bits above the measured {measured:.2}");
}

/// Runs every operation at one parameter set.
fn all_operations(s: &mut Setup) {
    let t = s.t;
    let n = s.params.n();
    let top = s.params.max_level();
    let be = s.batch();
    let ce = s.coeff();
    let (x, y) = (s.random(), s.random());

    // Encryption, both ways, both encoders.
    let ct_x = s.enc.encrypt(&be.encode(&x).unwrap()).unwrap();
    assert_eq!(be.decode(&s.dec.decrypt(&ct_x).unwrap()).unwrap(), x);
    assert_budget(s, &ct_x, s.model.fresh_public(top), "public encryption");
    let ct_y = s.sym.encrypt(&be.encode(&y).unwrap()).unwrap().expand(&s.params).unwrap();
    assert_eq!(be.decode(&s.dec.decrypt(&ct_y).unwrap()).unwrap(), y);
    assert_budget(s, &ct_y, s.model.fresh_symmetric(top), "symmetric encryption");
    let ct_cx = s.enc.encrypt(&ce.encode(&x).unwrap()).unwrap();
    assert_eq!(ce.decode(&s.dec.decrypt(&ct_cx).unwrap()).unwrap(), x);
    // Re-randomisation with the public key alone: the same message in a different ciphertext.
    let fresh = s.enc.rerandomise(&ct_x).unwrap();
    assert_ne!(fresh, ct_x);
    assert_eq!(be.decode(&s.dec.decrypt(&fresh).unwrap()).unwrap(), x);

    // Add, sub, negate.
    let sum = s.eval.add(&ct_x, &ct_y).unwrap();
    assert_eq!(be.decode(&s.dec.decrypt(&sum).unwrap()).unwrap(), mod_t(x.iter().zip(&y).map(|(&a, &b)| a as u128 + b as u128), t));
    assert_budget(s, &sum, s.model.add(s.model.fresh_public(top), s.model.fresh_symmetric(top)), "add");
    let diff = s.eval.sub(&ct_x, &ct_y).unwrap();
    assert_eq!(be.decode(&s.dec.decrypt(&diff).unwrap()).unwrap(), mod_t(x.iter().zip(&y).map(|(&a, &b)| a as u128 + (t - b) as u128), t));
    let neg = s.eval.negate(&ct_x).unwrap();
    assert_eq!(be.decode(&s.dec.decrypt(&neg).unwrap()).unwrap(), mod_t(x.iter().map(|&a| (t - a) as u128), t));

    // Plaintext add/sub and products.
    let pt_y = be.encode(&y).unwrap();
    let ap = s.eval.add_plain(&ct_x, &pt_y).unwrap();
    assert_eq!(be.decode(&s.dec.decrypt(&ap).unwrap()).unwrap(), mod_t(x.iter().zip(&y).map(|(&a, &b)| a as u128 + b as u128), t));
    // On a seeded ciphertext: the same sum, still seeded.
    let seeded = s.sym.encrypt(&be.encode(&x).unwrap()).unwrap();
    let seeded_sum = s.eval.add_plain_seeded(&seeded, &pt_y).unwrap();
    assert_eq!(seeded_sum.expand(&s.params).unwrap(), s.eval.add_plain(&seeded.expand(&s.params).unwrap(), &pt_y).unwrap());
    assert_eq!(be.decode(&s.dec.decrypt(&seeded_sum.expand(&s.params).unwrap()).unwrap()).unwrap(), be.decode(&s.dec.decrypt(&ap).unwrap()).unwrap());
    let sp = s.eval.sub_plain(&ct_x, &pt_y).unwrap();
    assert_eq!(be.decode(&s.dec.decrypt(&sp).unwrap()).unwrap(), mod_t(x.iter().zip(&y).map(|(&a, &b)| a as u128 + (t - b) as u128), t));
    // Small rings (n = 1024, 2048 with 27 and 54 bits) have no room for a plaintext product:
    // each operation runs where the model says it fits.
    let fits = |est| s.model.budget(est) > 3.0;
    let mp = s.eval.mul_plain(&ct_x, &pt_y).unwrap();
    let prepared = s.eval.prepare_plain(&pt_y, top).unwrap();
    assert_eq!(s.eval.mul_plain_prepared(&ct_x, &prepared).unwrap(), mp);
    if fits(s.model.mul_plain_uniform(s.model.fresh_public(top))) {
        assert_eq!(be.decode(&s.dec.decrypt(&mp).unwrap()).unwrap(), mod_t(x.iter().zip(&y).map(|(&a, &b)| a as u128 * b as u128), t));
        assert_budget(s, &mp, s.model.mul_plain_uniform(s.model.fresh_public(top)), "mul_plain");
    }
    for scalar in [3i64, -5, 1000].into_iter().filter(|&c| fits(s.model.mul_scalar(s.model.fresh_public(top), c as f64))) {
        let ms = s.eval.mul_scalar(&ct_x, scalar).unwrap();
        let c = scalar.rem_euclid(t as i64) as u128;
        assert_eq!(be.decode(&s.dec.decrypt(&ms).unwrap()).unwrap(), mod_t(x.iter().map(|&a| a as u128 * c), t));
        assert_budget(s, &ms, s.model.mul_scalar(s.model.fresh_public(top), scalar as f64), "mul_scalar");
    }
    // Coefficient encoding: a plaintext product is a negacyclic convolution modulo t.
    if n <= 8192 && fits(s.model.mul_plain_uniform(s.model.fresh_public(top))) {
        let small: Vec<u64> = (0..n as u64).map(|i| (i * 7 + 1) % t).collect();
        let cm = s.eval.mul_plain(&ct_cx, &ce.encode(&small).unwrap()).unwrap();
        assert_eq!(ce.decode(&s.dec.decrypt(&cm).unwrap()).unwrap(), negacyclic_mul(&x, &small, t));
    }

    // Modulus switching keeps the message.
    if top > 0 {
        let low = s.eval.mod_switch_to_next(&ct_x).unwrap();
        assert_eq!(low.level(), top - 1);
        assert_eq!(be.decode(&s.dec.decrypt(&low).unwrap()).unwrap(), x);
        assert_budget(s, &low, s.model.mod_switch(s.model.fresh_public(top), top), "mod_switch");
        let bottom = s.eval.mod_switch_to(&ct_x, 0).unwrap();
        assert_eq!(be.decode(&s.dec.decrypt(&bottom).unwrap()).unwrap(), x);
        assert!(s.eval.add(&low, &ct_x).is_err(), "level mismatch must be refused");
    }

    let (Some(rk), Some(gk)) = (s.rk.clone(), s.gk.clone()) else { return };

    // Ciphertext product, with and without relinearisation.
    let prod: Vec<u64> = mod_t(x.iter().zip(&y).map(|(&a, &b)| a as u128 * b as u128), t);
    let m3 = s.eval.multiply(&ct_x, &ct_y).unwrap();
    assert_eq!(m3.len(), 3);
    assert_eq!(be.decode(&s.dec.decrypt(&m3).unwrap()).unwrap(), prod);
    let mul_est = s.model.multiply(s.model.fresh_public(top), s.model.fresh_symmetric(top));
    assert_budget(s, &m3, mul_est, "multiply");
    let relin = s.eval.relinearize(&m3, &rk).unwrap();
    assert_eq!(relin.len(), 2);
    assert_eq!(be.decode(&s.dec.decrypt(&relin).unwrap()).unwrap(), prod);
    assert_budget(s, &relin, s.model.relinearize(mul_est, top), "relinearize");
    let fused = s.eval.multiply_relin(&ct_x, &ct_y, &rk).unwrap();
    assert_eq!(be.decode(&s.dec.decrypt(&fused).unwrap()).unwrap(), prod);
    // Square of a coefficient-encoded ciphertext, where the model leaves room for it (a square's
    // two noise terms are correlated, which costs about one more bit than a product).
    if s.model.budget(s.model.relinearize(mul_est, top)) > 4.0 && n <= 8192 {
        let sq = s.eval.multiply_relin(&ct_cx, &ct_cx, &rk).unwrap();
        assert_eq!(ce.decode(&s.dec.decrypt(&sq).unwrap()).unwrap(), negacyclic_mul(&x, &x, t));
    }

    // Rotations, hoisted rotations and the row swap.
    for step in s.rotations.clone() {
        let r = s.eval.rotate_rows(&ct_x, step, &gk).unwrap();
        assert_eq!(be.decode(&s.dec.decrypt(&r).unwrap()).unwrap(), rotate_rows_plain(&x, step), "step {step}");
        assert_budget(s, &r, s.model.rotate(s.model.fresh_public(top), top), "rotation");
    }
    let steps = s.hoisted.clone();
    let hoisted = s.eval.rotate_rows_hoisted(&ct_x, &steps, &gk).unwrap();
    for (h, &step) in hoisted.iter().zip(&steps) {
        let plain = s.eval.rotate_rows(&ct_x, step, &gk).unwrap();
        assert_eq!(s.dec.decrypt(h).unwrap(), s.dec.decrypt(&plain).unwrap());
        // The single rotation decomposes sigma(c_1), the hoisted one permutes the digits of c_1:
        // different representatives of the same key switch, so equal plaintexts and noise.
        let (bh, bp) = (s.dec.noise_budget(h).unwrap(), s.dec.noise_budget(&plain).unwrap());
        assert!((bh - bp).abs() < 1.5, "hoisted budget {bh:.2}, single {bp:.2}");
    }
    let swapped = s.eval.swap_rows(&ct_x, &gk).unwrap();
    let half = n / 2;
    let want: Vec<u64> = x[half..].iter().chain(&x[..half]).copied().collect();
    assert_eq!(be.decode(&s.dec.decrypt(&swapped).unwrap()).unwrap(), want);
    assert!(s.eval.rotate_rows(&ct_x, 11, &gk).is_err(), "missing key must be refused");

    // Rotation and product after a modulus switch (keys work at every level).
    if top > 0 {
        let low_x = s.eval.mod_switch_to_next(&ct_x).unwrap();
        let low_y = s.eval.mod_switch_to_next(&ct_y).unwrap();
        let r = s.eval.rotate_rows(&low_x, 3, &gk).unwrap();
        assert_eq!(be.decode(&s.dec.decrypt(&r).unwrap()).unwrap(), rotate_rows_plain(&x, 3));
        let low_est = s.model.mod_switch(s.model.fresh_public(top), top);
        if s.model.budget(s.model.relinearize(s.model.multiply(low_est, low_est), top - 1)) > 4.0 {
            let m = s.eval.multiply_relin(&low_x, &low_y, &rk).unwrap();
            assert_eq!(be.decode(&s.dec.decrypt(&m).unwrap()).unwrap(), prod);
        }
    }
}

#[test]
fn n4096_seal_like() {
    all_operations(&mut setup(4096, &[36, 36], &[37], 20, 2, true));
}

#[test]
fn n8192_seal_like() {
    all_operations(&mut setup(8192, &[43, 43, 44, 44], &[44], 20, 4, true));
}

#[test]
fn n8192_two_digits_two_special_primes() {
    all_operations(&mut setup(8192, &[50, 50, 40], &[39, 39], 20, 2, true));
}

#[test]
fn n16384_default() {
    all_operations(&mut setup_literal(lycaon_bfv::rlwe::ParametersLiteral::bfv_default(16384).unwrap()));
}

#[test]
fn toy_parameters_single_digit() {
    all_operations(&mut setup(64, &[50, 50, 50], &[55], 17, 1, false));
}

/// The degrees without key-switching primes (every operation that needs no evaluation key).
#[test]
fn n1024_and_n2048() {
    all_operations(&mut setup(1024, &[27], &[], 14, 1, true));
    all_operations(&mut setup(2048, &[54], &[], 16, 1, true));
}

/// The largest degree, with the standard's full modulus.
#[test]
fn n32768_default() {
    all_operations(&mut setup_literal(lycaon_bfv::rlwe::ParametersLiteral::bfv_default(32768).unwrap()));
}

/// Plaintexts (both forms) round-trip through the wire format and refuse corruption.
#[test]
fn plaintext_serialisation() {
    let mut s = setup(4096, &[36, 36], &[37], 20, 2, true);
    let x = s.random();
    let pt = s.batch().encode(&x).unwrap();
    let bytes = pt.to_bytes();
    assert_eq!(lycaon_bfv::Plaintext::from_bytes(&s.params, &bytes).unwrap(), pt);
    let err = lycaon_bfv::Plaintext::from_bytes(&s.params, &bytes[..bytes.len() - 3]).unwrap_err();
    assert!(err.to_string().contains("truncated"), "{err}");
    let prepared = s.eval.prepare_plain(&pt, 1).unwrap();
    let back = lycaon_bfv::PreparedPlaintext::from_bytes(&s.params, &prepared.to_bytes()).unwrap();
    let ct = s.enc.encrypt(&pt).unwrap();
    assert_eq!(s.eval.mul_plain_prepared(&ct, &back).unwrap(), s.eval.mul_plain_prepared(&ct, &prepared).unwrap());
    let mut flipped = prepared.to_bytes();
    flipped[60] ^= 1;
    assert!(lycaon_bfv::PreparedPlaintext::from_bytes(&s.params, &flipped).unwrap_err().to_string().contains("checksum"));
}
