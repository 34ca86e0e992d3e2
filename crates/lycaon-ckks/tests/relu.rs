//! ReLU by composite minimax sign under encryption: 14 levels, against the same composite in
//! the clear and against max(x, 0).

mod common;

use common::setup_literal;
use lycaon_ckks::rlwe::Security;
use lycaon_ckks::{precision_stats, CompositeSign};

#[test]
fn encrypted_composite_relu_matches_the_clear_one() {
    let (sign, relu_error) = CompositeSign::lee_alpha13().unwrap();
    // Toy ring (NOT secure) with the 14 levels the ReLU needs.
    let mut lit = lycaon_ckks::scale_stable_literal(1 << 11, 60, 40, 14, &[60]).unwrap();
    lit.security = Security::InsecureTestOnly;
    let mut s = setup_literal(lit, 40, &[]);
    let x: Vec<f64> = s.random_real(1 << 10);
    let ct = s.encrypt_real(&x);
    let out = s.eval.evaluate_relu(&ct, &sign).unwrap();
    assert_eq!(out.level(), ct.level() - 14);
    let got = s.decrypt_real(&out);
    let clear: Vec<f64> = x.iter().map(|&v| sign.relu(v)).collect();
    let stats = precision_stats(&clear, &got);
    println!("composite ReLU 15-15-27: gap 2^{:.2}, sign error 2^{:.2}, ReLU error 2^{:.2}; encrypted vs clear: {stats:?}", sign.low.log2(), sign.error.log2(), relu_error.log2());
    assert!(stats.min_bits > 16.0, "encrypted vs clear composite: {stats:?}");
    let worst = x.iter().zip(&got).map(|(&v, &g)| (g - v.max(0.0)).abs()).fold(0.0, f64::max);
    assert!(worst < relu_error + 2f64.powi(-16), "encrypted vs max(x, 0): 2^{:.2}", worst.log2());
    let sgn = s.decrypt_real(&s.eval.evaluate_sign(&ct, &sign).unwrap());
    assert!(x.iter().zip(&sgn).all(|(&v, &g)| v.abs() < sign.low || (g - v.signum()).abs() < sign.error + 1e-4));
}
