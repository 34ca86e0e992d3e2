//! Non-square inputs (h != w): every algorithm that accepts the shape decrypts to exactly the
//! plain integer convolution and performs the operations its plan states.

use std::sync::Arc;

use lycaon_bfv::rlwe::{Parameters, ParametersLiteral, Security};
use lycaon_nn::algorithm::Algorithm;
use lycaon_nn::harness::run_layer;
use lycaon_nn::ConvShape;
use rand::{RngExt, SeedableRng};

fn params(n: usize) -> Arc<Parameters> {
    let mut lit = ParametersLiteral::bfv_from_bits(n, &[50, 50], &[51], 20).unwrap();
    lit.security = Security::InsecureTestOnly;
    Parameters::new(lit).unwrap()
}

fn shape(c_in: usize, h: usize, w: usize, c_out: usize, k: usize, stride: usize, groups: usize) -> ConvShape {
    ConvShape { c_in, h, w, c_out, kh: k, kw: k, stride, pad_h: k / 2, pad_w: k / 2, groups }
}

/// Why an algorithm may refuse a shape; any other refusal fails the test.
fn refusal_expected(algorithm: Algorithm, s: &ConvShape) -> bool {
    match algorithm {
        Algorithm::CheetahMatVec | Algorithm::Diagonal => !s.is_fully_connected(),
        Algorithm::Cheetah => s.groups != 1,
        _ => false,
    }
}

#[test]
fn every_algorithm_is_exact_on_non_square_inputs() {
    let shapes = [
        shape(3, 12, 10, 4, 3, 1, 1),
        shape(3, 12, 10, 4, 3, 2, 1),
        shape(3, 10, 12, 4, 3, 2, 1),
        shape(3, 12, 10, 3, 3, 1, 3),
        shape(4, 12, 10, 4, 3, 2, 4),
        shape(3, 12, 10, 4, 1, 1, 1),
        shape(3, 12, 10, 6, 3, 1, 3),
        shape(2, 5, 13, 3, 5, 2, 1),
        // Wider than a row of slots at n = 256: strips across ciphertexts.
        shape(2, 9, 20, 3, 3, 1, 1),
        shape(2, 20, 9, 3, 3, 2, 1),
    ];
    let p = params(256);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2024);
    let mut failures = Vec::new();
    let mut ran = 0;
    for s in &shapes {
        let x: Vec<i64> = (0..s.input_len()).map(|_| rng.random_range(-8..8)).collect();
        let w: Vec<i64> = (0..s.weight_len()).map(|_| rng.random_range(-8..8)).collect();
        for algorithm in Algorithm::ALL {
            let plan = match algorithm.build(s, &p) {
                Ok(plan) => plan,
                Err(_) if refusal_expected(algorithm, s) => continue,
                Err(e) => {
                    failures.push(format!("{algorithm} refused {s:?}: {e}"));
                    continue;
                }
            };
            match run_layer(plan.as_ref(), &x, &w, 1) {
                Ok(run) if run.exact && run.counts == run.stated => ran += 1,
                Ok(run) if run.exact => failures.push(format!("{algorithm} on {s:?}: stated counts {:?}, counted {:?}", run.stated, run.counts)),
                Ok(_) => failures.push(format!("{algorithm} on {s:?}: decrypted output differs from the integer reference")),
                Err(e) => failures.push(format!("{algorithm} on {s:?}: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    // Every convolution algorithm ran every shape (cheetah the ungrouped ones).
    let runnable: usize = shapes.iter().map(|s| Algorithm::ALL.iter().filter(|&&a| !refusal_expected(a, s)).count()).sum();
    assert_eq!(ran, runnable);
    assert_eq!(runnable, 8 * shapes.len() + shapes.iter().filter(|s| s.groups == 1).count());
}
