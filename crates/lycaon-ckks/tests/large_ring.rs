//! One smoke test at logN = 16 with Orion's ResNet parameters (LogQ = [55] + [40] x 10,
//! LogP = [61] x 3, scale 2^40, full slots): 128-bit secure (log QP = 638 <= 1772), products,
//! rotations and a polynomial keep precision; prints the timings it observed.

mod common;
use common::*;

use std::time::Instant;

use lycaon_ckks::rlwe::ParametersLiteral;
use lycaon_ckks::{precision_stats, ChebyshevPoly};

#[test]
fn orion_parameters_at_log_n_16() {
    let mut q_bits = vec![55u32];
    q_bits.extend([40u32; 10]);
    let lit = ParametersLiteral::ckks_from_bits(1 << 16, &q_bits, &[61, 61, 61]).unwrap();
    let t = Instant::now();
    let mut s = setup_literal(lit, 40, &[1, 2, 3, 4]);
    println!("set-up and keys: {:?}", t.elapsed());
    assert!(s.params.log2_qp() < 640.0);
    let slots = 1 << 15;
    let (x, y) = (s.random_real(slots), s.random_real(slots));
    let (cx, cy) = (s.encrypt_real(&x), s.encrypt_real(&y));
    let t = Instant::now();
    let m = s.eval.mul_relin(&cx, &cy).unwrap();
    let t_mul = t.elapsed();
    let t = Instant::now();
    let r = s.eval.rescale(&m).unwrap();
    let t_rescale = t.elapsed();
    let t = Instant::now();
    let rot = s.eval.rotate(&cx, 1).unwrap();
    let t_rot = t.elapsed();
    let t = Instant::now();
    let hoisted = s.eval.rotate_hoisted(&cx, &[1, 2, 3, 4]).unwrap();
    let t_hoist = t.elapsed();
    println!("logN=16: mul+relin {t_mul:?}, rescale {t_rescale:?}, rotate {t_rot:?}, 4 hoisted rotations {t_hoist:?}");
    let want: Vec<f64> = x.iter().zip(&y).map(|(a, b)| a * b).collect();
    let st = precision_stats(&want, &s.decrypt_real(&r));
    println!("mul+relin+rescale {st}");
    assert!(st.mean_bits > 20.0 && st.min_bits > 15.0);
    let st = precision_stats(&rotate_plain(&x, 1), &s.decrypt_real(&rot));
    println!("rotate {st}");
    assert!(st.mean_bits > 20.0);
    let st = precision_stats(&rotate_plain(&x, 4), &s.decrypt_real(&hoisted[3]));
    assert!(st.mean_bits > 20.0);
    let relu_approx = ChebyshevPoly::interpolate(|v| v.max(0.0), -1.0, 1.0, 15).unwrap();
    let t = Instant::now();
    let out = s.eval.evaluate_chebyshev(&cx, &relu_approx).unwrap();
    println!("degree-15 polynomial: {:?}, level {} -> {}", t.elapsed(), cx.level(), out.level());
    let want: Vec<f64> = x.iter().map(|&v| relu_approx.evaluate(v)).collect();
    let st = precision_stats(&want, &s.decrypt_real(&out));
    println!("polynomial {st}");
    assert!(st.mean_bits > 18.0);
}
