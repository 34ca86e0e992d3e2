//! Linear transforms against the plain matrix-vector product, Chebyshev polynomial evaluation
//! against f64 evaluation, a depth-10 chain of products, and wire round trips.

mod common;
use common::*;

use std::sync::Arc;

use lycaon_ckks::rlwe::GaloisKeys;
use lycaon_ckks::{
    precision_stats, precision_stats_complex, rotation_galois_element, ChebyshevPoly, Ciphertext, CkksError, Complex64, EvaluationKeys, Evaluator,
    LinearTransform, Plaintext, SeededCiphertext,
};

fn report(label: &str, s: lycaon_ckks::PrecisionStats, min_bits: f64) {
    println!("{label:<40} {s}");
    assert!(s.min_bits >= min_bits && s.mean_bits >= min_bits + 2.0, "{label}: {s}");
}

#[test]
fn dense_linear_transform_matches_matrix_vector_product() {
    let slots = 256;
    let mut s = setup14(&[]);
    let rows: Vec<Vec<Complex64>> = (0..slots).map(|_| s.random_complex(slots)).collect();
    let lt = LinearTransform::from_dense(&s.ctx, &rows).unwrap();
    assert_eq!(lt.baby_steps(), 16);
    let mut s = setup14(&lt.rotations());
    let v = s.random_complex(slots);
    let ct = s.encrypt(&v);
    let want: Vec<Complex64> = rows.iter().map(|r| r.iter().zip(&v).map(|(a, b)| a * b).sum()).collect();
    assert!(precision_stats_complex(&want, &lt.apply_plain(&v)).min_bits > 40.0);
    let t = std::time::Instant::now();
    let out = s.eval.linear_transform(&ct, &lt).unwrap();
    println!("dense {slots}x{slots} transform at logN=14: {:?}", t.elapsed());
    assert_eq!(out.level(), ct.level() - 1);
    assert_eq!(out.scale(), s.ctx.scale_at(ct.level() - 1).unwrap());
    // Entries are uniform in the unit square: |M v| ~ sqrt(256), so about 4 bits go to magnitude.
    report("dense linear transform (256 slots)", precision_stats_complex(&want, &s.decrypt(&out)), 12.0);
    // Prepared (pre-encoded) diagonals give the same result.
    lt.prepare(&s.ctx, ct.level(), s.eval.linear_transform_scale(&ct, s.ctx.scale_at(ct.level() - 1).unwrap()).unwrap()).unwrap();
    let t = std::time::Instant::now();
    let again = s.eval.linear_transform(&ct, &lt).unwrap();
    println!("prepared: {:?}", t.elapsed());
    let t = std::time::Instant::now();
    let _ = s.eval.rotate_hoisted(&ct, &(1..16).collect::<Vec<i64>>()).unwrap();
    println!("15 hoisted rotations: {:?}", t.elapsed());
    let t = std::time::Instant::now();
    let _ = s.eval.rotate(&ct, 16).unwrap();
    println!("one rotation: {:?}", t.elapsed());
    report("prepared linear transform", precision_stats_complex(&want, &s.decrypt(&again)), 12.0);
    // Single hoisting (every rotation moded down) agrees to the same precision.
    let single = lt.clone().with_double_hoisting(false);
    let t = std::time::Instant::now();
    let out1 = s.eval.linear_transform(&ct, &single).unwrap();
    println!("single-hoisted: {:?}", t.elapsed());
    report("single-hoisted linear transform", precision_stats_complex(&want, &s.decrypt(&out1)), 12.0);
}

/// What the runtime does with a transform (the FHE executor, `lycaon bench ckks`): diagonals
/// encoded ahead for one level, rotation keys generated only up to that level; above it the keys
/// are refused.
#[test]
fn prepared_transform_with_keys_only_up_to_its_level_matches_the_plain_product() {
    let (slots, level) = (8192usize, 2usize);
    let mut s = setup14(&[]);
    let diags: Vec<(i64, Vec<Complex64>)> = (0..8).map(|k| (k, s.random_real(slots).into_iter().map(|r| Complex64::new(r / 8.0, 0.0)).collect())).collect();
    let lt = LinearTransform::new(&s.ctx, slots, diags).unwrap();
    let n = s.params.n();
    let pairs: Vec<(u64, usize)> = lt.rotations().iter().map(|&k| (rotation_galois_element(k, n), level)).filter(|&(g, _)| g != 1).collect();
    let galois = GaloisKeys::generate_at(&s.sk, &pairs, &mut s.sampler).unwrap();
    let ev = Evaluator::new(&s.ctx, EvaluationKeys { relin: None, galois: Some(Arc::new(galois)) });
    let x: Vec<Complex64> = s.random_real(slots).into_iter().map(|r| Complex64::new(r, 0.0)).collect();
    let ct = s.encrypt_at(&x, level);
    let sigma = ev.linear_transform_scale(&ct, s.ctx.scale_at(level - 1).unwrap()).unwrap();
    lt.prepare(&s.ctx, level, sigma).unwrap();
    let out = ev.linear_transform(&ct, &lt).unwrap();
    assert_eq!(out.level(), level - 1);
    assert_eq!(out.scale(), s.ctx.scale_at(level - 1).unwrap());
    report("prepared transform, level-2 keys (8 diagonals)", precision_stats_complex(&lt.apply_plain(&x), &s.decrypt(&out)), 18.0);
    let err = ev.linear_transform(&s.encrypt(&x), &lt).unwrap_err();
    assert!(err.to_string().contains("up to level 2"), "{err}");
}

#[test]
fn sparse_diagonals_at_full_slots() {
    let slots = 8192;
    let mut s0 = setup14(&[]);
    let indices = [0i64, 1, 2, 3, 17, 100, -5, 4000];
    let diags: Vec<(i64, Vec<Complex64>)> = indices.iter().map(|&k| (k, s0.random_complex(slots))).collect();
    let lt = LinearTransform::new(&s0.ctx, slots, diags).unwrap();
    let mut s = setup14(&lt.rotations());
    let v = s.random_complex(slots);
    let ct = s.encrypt(&v);
    let want = lt.apply_plain(&v);
    let out = s.eval.linear_transform(&ct, &lt).unwrap();
    report("banded transform (8192 slots, 8 diagonals)", precision_stats_complex(&want, &s.decrypt(&out)), 16.0);
    let out1 = s.eval.linear_transform(&ct, &lt.clone().with_double_hoisting(false)).unwrap();
    report("banded transform, single hoisting", precision_stats_complex(&want, &s.decrypt(&out1)), 16.0);
    // Missing keys are named before any work.
    let bare = setup14(&[1]);
    let ct2 = {
        let mut b = bare;
        let c = b.encrypt(&v);
        let err = b.eval.linear_transform(&c, &lt).unwrap_err();
        assert!(matches!(err, CkksError::MissingRotationKey { .. }) && err.to_string().contains("linear transform"), "{err}");
        c
    };
    assert!(matches!(s.eval.linear_transform(&s.eval.drop_to_level(&ct, 0).unwrap(), &lt).unwrap_err(), CkksError::NotEnoughLevels { .. }));
    let _ = ct2;
}

fn poly_case(s: &mut Setup, label: &str, poly: &ChebyshevPoly, f: impl Fn(f64) -> f64, min_bits: f64) {
    let x: Vec<f64> = s.random_real(8192).into_iter().map(|u| poly.a + (u + 1.0) / 2.0 * (poly.b - poly.a)).collect();
    let ct = s.encrypt_real(&x);
    let t = std::time::Instant::now();
    let out = s.eval.evaluate_chebyshev(&ct, poly).unwrap();
    let elapsed = t.elapsed();
    assert_eq!(out.level(), ct.level() - poly.depth(), "{label}: depth");
    assert_eq!(out.scale(), s.ctx.scale_at(out.level()).unwrap(), "{label}: output scale");
    let want: Vec<f64> = x.iter().map(|&v| poly.evaluate(v)).collect();
    let got = s.decrypt_real(&out);
    println!("{label}: degree {}, depth {}, {:?}; interpolation error {:.2e}", poly.degree(), poly.depth(), elapsed, x.iter().map(|&v| (poly.evaluate(v) - f(v)).abs()).fold(0.0, f64::max));
    report(label, precision_stats(&want, &got), min_bits);
}

#[test]
fn chebyshev_evaluation_in_minimal_depth() {
    let mut s = setup14(&[]);
    let sigmoid = |x: f64| 1.0 / (1.0 + (-x).exp());
    for d in [1usize, 2, 3, 7, 8, 15, 31] {
        let p = ChebyshevPoly::interpolate(|x| (2.0 * x).sin(), -1.0, 1.0, d).unwrap();
        poly_case(&mut s, &format!("sin(2x) on [-1,1] degree {d}"), &p, |x| (2.0 * x).sin(), 17.0);
    }
    let p = ChebyshevPoly::interpolate(sigmoid, -8.0, 8.0, 63).unwrap();
    assert_eq!(p.depth(), 7);
    poly_case(&mut s, "sigmoid on [-8,8] degree 63", &p, sigmoid, 17.0);
    // Width-2 and [0, 1] intervals change variable exactly (integer alpha): no extra level.
    let p = ChebyshevPoly::interpolate(f64::exp, 0.0, 2.0, 7).unwrap();
    assert_eq!(p.depth(), 3);
    poly_case(&mut s, "exp on [0,2] degree 7", &p, f64::exp, 15.0);
    let p = ChebyshevPoly::interpolate(|x| (3.0 * x).cos(), 0.0, 1.0, 15).unwrap();
    assert_eq!(p.depth(), 4);
    poly_case(&mut s, "cos(3x) on [0,1] degree 15", &p, |x| (3.0 * x).cos(), 17.0);
    let relu_ish = |x: f64| x * x * 0.25 + 0.5 * x;
    let p = ChebyshevPoly::interpolate(relu_ish, 0.0, 3.0, 2).unwrap();
    poly_case(&mut s, "quadratic on [0,3]", &p, relu_ish, 17.0);
    // Not enough levels: a clear error.
    let x = s.encrypt_real(&[0.5]);
    let low = s.eval.drop_to_level(&x, 2).unwrap();
    let err = s.eval.evaluate_chebyshev(&low, &ChebyshevPoly::interpolate(sigmoid, -8.0, 8.0, 63).unwrap()).unwrap_err();
    assert!(matches!(err, CkksError::NotEnoughLevels { .. }), "{err}");
}

#[test]
fn depth_ten_chain_keeps_precision() {
    // logN = 15: q_0 of 55 bits, 10 levels of 40 bits, two 55-bit special primes (565 <= 881).
    let lit = lycaon_ckks::scale_stable_literal(1 << 15, 55, 40, 10, &[55, 55]).unwrap();
    let mut s = setup_literal(lit, 40, &[]);
    let slots = 16384;
    let unit = |s: &mut Setup| -> Vec<Complex64> { s.random_real(slots).into_iter().map(|t| Complex64::from_polar(1.0, std::f64::consts::PI * t)).collect() };
    let mut want = unit(&mut s);
    let mut ct = s.encrypt(&want);
    for step in 0..10 {
        let z = unit(&mut s);
        let cz = s.encrypt_at(&z, ct.level());
        ct = s.eval.mul_relin_rescale(&ct, &cz).unwrap();
        want.iter_mut().zip(&z).for_each(|(w, z)| *w *= z);
        assert_eq!(ct.scale(), s.ctx.scale_at(ct.level()).unwrap(), "step {step}: canonical scale");
    }
    assert_eq!(ct.level(), 0);
    let st = precision_stats_complex(&want, &s.decrypt(&ct));
    report("depth-10 chain of products (logN=15)", st, 17.0);
    // The scales stayed within 2^-15 of 2^40 all the way down.
    assert!((ct.scale().log2() - 40.0).abs() < 1e-4);
}

#[test]
fn one_basis_serves_several_polynomials() {
    let mut s = setup14(&[]);
    let x = s.random_real(4096);
    let ct = s.encrypt_real(&x);
    let basis = s.eval.chebyshev_basis(&ct, -1.0, 1.0, 15).unwrap();
    for (name, f) in [("sin", f64::sin as fn(f64) -> f64), ("cos", f64::cos), ("tanh", f64::tanh)] {
        let p = ChebyshevPoly::interpolate(f, -1.0, 1.0, 15).unwrap();
        let target = s.ctx.scale_at(ct.level() - p.depth()).unwrap();
        let out = s.eval.evaluate_chebyshev_with_basis(&basis, &p, target).unwrap();
        let want: Vec<f64> = x.iter().map(|&v| p.evaluate(v)).collect();
        report(&format!("{name} on a shared basis"), precision_stats(&want, &s.decrypt_real(&out)), 17.0);
    }
    let wrong = ChebyshevPoly::interpolate(f64::sin, -2.0, 2.0, 7).unwrap();
    assert!(matches!(s.eval.evaluate_chebyshev_with_basis(&basis, &wrong, 1e12).unwrap_err(), CkksError::InvalidArgument { .. }));
}

/// FNV-1a, enough to pin bytes in a test.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100000001b3))
}

#[test]
fn plaintext_bytes_are_pinned() {
    // Encoding is deterministic: these bytes pin the canonical embedding (slot order, generator 5,
    // rounding) and the wire layout. If this changes on purpose, bump the wire format version
    // and update the constant; if not, something broke compatibility.
    let mut lit = lycaon_ckks::scale_stable_literal(1 << 10, 50, 30, 2, &[50]).unwrap();
    lit.security = lycaon_ckks::rlwe::Security::InsecureTestOnly;
    let params = lycaon_ckks::rlwe::Parameters::new(lit).unwrap();
    let ctx = lycaon_ckks::CkksContext::new(&params, 2f64.powi(30)).unwrap();
    let values: Vec<Complex64> = (0..8).map(|k| Complex64::new(k as f64 / 8.0 - 0.5, 0.25 - k as f64 / 16.0)).collect();
    let pt = lycaon_ckks::Encoder::new(&ctx).encode(&values, 2, 2f64.powi(30)).unwrap();
    let bytes = pt.to_bytes();
    assert_eq!((bytes.len(), fnv(&bytes)), PINNED_PLAINTEXT, "pinned plaintext bytes changed");
}

const PINNED_PLAINTEXT: (usize, u64) = (14285, 8584138529212545794);

#[test]
fn wire_round_trips() {
    let mut s = setup14(&[]);
    let v = s.random_complex(1024);
    let ct = s.encrypt(&v);
    let bytes = ct.to_bytes();
    assert_eq!(Ciphertext::from_bytes(&s.ctx, &bytes).unwrap(), ct);
    let pt = s.encoder.encode(&v, 3, 2f64.powi(40)).unwrap();
    assert_eq!(Plaintext::from_bytes(&s.ctx, &pt.to_bytes()).unwrap(), pt);
    let seeded = s.sym.encrypt(&pt).unwrap();
    let sb = seeded.to_bytes();
    assert!(sb.len() * 2 < bytes.len(), "seeded ciphertexts are about half the size");
    let back = SeededCiphertext::from_bytes(&s.ctx, &sb).unwrap();
    assert_eq!(back, seeded);
    report("seeded round trip", precision_stats_complex(&v, &s.decrypt(&back.expand(&s.ctx).unwrap())), 19.0);
    // Corrupted or foreign bytes are refused with a reason.
    let mut bad = bytes.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 1;
    assert!(Ciphertext::from_bytes(&s.ctx, &bad).unwrap_err().to_string().contains("checksum"));
    assert!(Ciphertext::from_bytes(&s.ctx, &pt.to_bytes()).is_err());
    let other = setup14(&[]);
    assert!(Ciphertext::from_bytes(&other.ctx, &bytes).is_ok(), "same literal, same id");
}

/// Double-hoisted sums with arbitrary baby and giant steps (what the multiplexed convolutions
/// run) against the plain sum of rotated products; two sums over different ciphertexts of one
/// level share one accumulator and one ModDown.
#[test]
fn rotated_product_sums_match_the_plain_sums() {
    use lycaon_ckks::GiantStep;
    let slots = 8192usize;
    let (babies, giants) = ([0i64, 3, -5, 130], [0i64, 1024, -2048]);
    let steps: Vec<i64> = babies.iter().chain(&giants).chain(&[7]).copied().collect();
    let mut s = setup14(&steps);
    let x = s.random_real(slots);
    let y = s.random_real(slots);
    let (cx, cy) = (s.encrypt_real(&x), s.encrypt_real(&y));
    let values: Vec<Vec<Vec<f64>>> = giants.iter().map(|_| babies.iter().map(|_| s.random_real(slots)).collect()).collect();
    let rot = |v: &[f64], k: i64| -> Vec<f64> { (0..slots as i64).map(|t| v[(t + k).rem_euclid(slots as i64) as usize]).collect() };
    let mut want = vec![0.0; slots];
    for (gi, &g) in giants.iter().enumerate() {
        for (bi, &b) in babies.iter().enumerate() {
            let r = rot(&x, g + b);
            for t in 0..slots {
                want[t] += values[gi][bi][t] * r[t];
            }
        }
    }
    let mask: Vec<f64> = (0..slots).map(|t| (t % 3 == 0) as u8 as f64).collect();
    let ry = rot(&y, 7);
    for t in 0..slots {
        want[t] += mask[t] * ry[t];
    }
    let hx = s.eval.hoist_rotations(&cx, &babies).unwrap();
    assert_eq!(hx.steps().len(), 4);
    let plan: Vec<GiantStep> = giants.iter().enumerate().map(|(gi, &g)| GiantStep { giant: g, terms: babies.iter().enumerate().map(|(bi, &b)| (b, values[gi][bi].as_slice())).collect() }).collect();
    let sigma = s.eval.plaintext_scale_for(&cx).unwrap();
    let mut sum = s.eval.rotated_products(&hx, &plan, sigma).unwrap();
    let hy = s.eval.hoist_rotations(&cy, &[7]).unwrap();
    sum.add_assign(&s.eval.rotated_products(&hy, &[GiantStep { giant: 0, terms: vec![(7, mask.as_slice())] }], sigma).unwrap()).unwrap();
    let out = s.eval.finish_extended(sum).unwrap();
    assert_eq!(out.level(), cx.level() - 1);
    assert_eq!(out.scale(), s.ctx.scale_at(out.level()).unwrap());
    report("rotated products (3 giants x 4 babies + 1)", precision_stats(&want, &s.decrypt_real(&out)), 14.0);
    // A baby step that was not hoisted, and a missing giant key, are named.
    let err = s.eval.rotated_products(&hx, &[GiantStep { giant: 0, terms: vec![(9, mask.as_slice())] }], sigma).unwrap_err();
    assert!(err.to_string().contains("baby step 9 was not hoisted"), "{err}");
    let err = s.eval.rotated_products(&hx, &[GiantStep { giant: 11, terms: vec![(3, mask.as_slice())] }], sigma).unwrap_err();
    assert!(matches!(err, CkksError::MissingRotationKey { .. }) && err.to_string().contains("rotation by 11"), "{err}");
}
