//! Every algorithm decrypts to exactly the plain integer convolution modulo t, and performs
//! exactly the operations its plan states (NTTs counted by an instrumented backend).

use std::sync::Arc;

use lycaon_bfv::rlwe::{Parameters, ParametersLiteral, Security};
use lycaon_nn::batchwise::BatchWiseConv;
use lycaon_nn::coeff::{CoeffBlocks, CoeffConv, CoeffMatVec};
use lycaon_nn::diagonal::DiagonalFc;
use lycaon_nn::harness::{run_layer, split_evaluations_equal_prepared};
use lycaon_nn::hyena::HyenaConv;
use lycaon_nn::packed::{PackedConv, PackedOptions, Schedule};
use lycaon_nn::padded::PaddedConv;
use lycaon_nn::walsh::WalshConv;
use lycaon_nn::{ConvShape, LinearPlan};
use proptest::prelude::*;
use rand::{RngExt, SeedableRng};

fn literal(n: usize) -> ParametersLiteral {
    let mut lit = if n >= 4096 {
        ParametersLiteral::bfv_from_bits(n, &[36, 36], &[37], 20).unwrap()
    } else {
        ParametersLiteral::bfv_from_bits(n, &[50, 50], &[51], 20).unwrap()
    };
    if n < 4096 {
        lit.security = Security::InsecureTestOnly;
    }
    lit
}

/// Runs a plan on random inputs and weights; checks values, counts and the stated bytes.
fn check(plan: &dyn LinearPlan, _lit: &ParametersLiteral, seed: u64) {
    let shape = *plan.shape();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let x: Vec<i64> = (0..shape.input_len() * plan.batch()).map(|_| rng.random_range(-8..8)).collect();
    let w: Vec<i64> = (0..shape.weight_len()).map(|_| rng.random_range(-8..8)).collect();
    let run = run_layer(plan, &x, &w, 1).unwrap();
    assert_eq!(run.counts, run.stated, "{}: stated counts differ from the instrumented run on {shape:?}", plan.name());
    assert!(run.exact, "{} on {shape:?}: decrypted output differs from the integer reference", plan.name());
    assert_eq!(run.weight_bytes, plan.weight_bytes(), "{}: stated weight bytes", plan.name());
    assert!(
        run.cost.up_bytes.abs_diff(run.up_bytes_measured) <= 8 * plan.input_layout().num_ciphertexts,
        "{}: stated {} up bytes, measured {}",
        plan.name(),
        run.cost.up_bytes,
        run.up_bytes_measured
    );
    assert!(split_evaluations_equal_prepared(plan, &x, &w).unwrap(), "{} on {shape:?}: streaming or per-unit evaluation differs from the prepared one", plan.name());
}

fn params(lit: &ParametersLiteral) -> Arc<Parameters> {
    Parameters::new(lit.clone()).unwrap()
}

fn shapes() -> Vec<ConvShape> {
    let mut odd = ConvShape::conv(7, 3, 5, 3, 1);
    odd.w = 6;
    let mut unpadded = ConvShape::conv(9, 4, 3, 3, 1);
    unpadded.pad_h = 0;
    unpadded.pad_w = 0;
    let mut grouped = ConvShape::conv(6, 4, 6, 3, 1);
    grouped.groups = 2;
    vec![
        ConvShape::conv(8, 2, 3, 3, 1),
        odd,
        ConvShape::conv(8, 3, 4, 3, 2),
        ConvShape::conv(5, 4, 4, 1, 1),
        unpadded,
        grouped,
        ConvShape::depthwise(6, 5, 3, 1),
        ConvShape::conv(5, 3, 2, 5, 1),
        ConvShape::fully_connected(10, 4),
    ]
}

#[test]
fn packed_input_aligned_is_exact() {
    let lit = literal(256);
    for (k, shape) in shapes().iter().enumerate() {
        let plan = PackedConv::new(shape, &params(&lit), PackedOptions::default()).unwrap();
        check(&plan, &lit, k as u64);
    }
}

#[test]
fn packed_partial_aligned_is_exact() {
    let lit = literal(256);
    for (k, shape) in shapes().iter().enumerate() {
        let opts = PackedOptions { schedule: Schedule::PartialAligned, ..Default::default() };
        check(&PackedConv::new(shape, &params(&lit), opts).unwrap(), &lit, 100 + k as u64);
    }
}

#[test]
fn packed_with_plaintext_decomposition_is_exact() {
    let lit = literal(256);
    let opts = PackedOptions { plain_decomposition_bits: Some(10), ..Default::default() };
    check(&PackedConv::new(&ConvShape::conv(8, 3, 4, 3, 1), &params(&lit), opts).unwrap(), &lit, 7);
}

#[test]
fn packed_strips_when_a_channel_exceeds_a_row() {
    // 20 x 20 > 128 slots per row: strips with halos across ciphertexts.
    let lit = literal(256);
    check(&PackedConv::new(&ConvShape::conv(20, 2, 2, 3, 1), &params(&lit), PackedOptions::default()).unwrap(), &lit, 8);
    check(&WalshConv::new(&ConvShape::conv(20, 2, 2, 3, 2), &params(&lit), None).unwrap(), &lit, 9);
}

#[test]
fn walsh_hadamard_is_exact() {
    let lit = literal(256);
    for (k, shape) in shapes().iter().enumerate() {
        // A convolution algorithm: fully connected shapes are refused, with the alternatives.
        if shape.is_fully_connected() {
            let err = WalshConv::new(shape, &params(&lit), None).err().expect("walsh refuses a fully connected layer").to_string();
            assert!(err.contains("cheetah-matvec"), "{err}");
            continue;
        }
        check(&WalshConv::new(shape, &params(&lit), None).unwrap(), &lit, 200 + k as u64);
        // Several channels per row: a dense Walsh basis, still exact.
        if let Ok(plan) = WalshConv::new(shape, &params(&lit), Some(64)) {
            assert_eq!(plan.blocks(), 4);
            check(&plan, &lit, 250 + k as u64);
        }
    }
}

#[test]
fn padded_is_exact() {
    let lit = literal(256);
    for (k, shape) in shapes().iter().enumerate() {
        check(&PaddedConv::new(shape, &params(&lit), None).unwrap(), &lit, 300 + k as u64);
    }
}

fn arbitrary_shape() -> impl Strategy<Value = ConvShape> {
    (1usize..10, 1usize..10, 1usize..5, 1usize..5, prop::sample::select(vec![1usize, 3, 5]), 1usize..3, any::<bool>()).prop_filter_map(
        "kernel fits",
        |(h, w, c_in, c_out, k, stride, pad)| {
            let p = if pad { k / 2 } else { 0 };
            let s = ConvShape { c_in, h, w, c_out, kh: k, kw: k, stride, pad_h: p, pad_w: p, groups: 1 };
            s.validate().ok().map(|_| s)
        },
    )
}

/// A strided layer whose last output strip keeps no output: the output ciphertext of that strip
/// has no weight term (found by the random-shape test; Walsh failed with "no output").
#[test]
fn walsh_sends_an_output_ciphertext_that_keeps_nothing() {
    let shape = ConvShape { c_in: 1, h: 8, w: 7, c_out: 2, kh: 5, kw: 5, stride: 2, pad_h: 2, pad_w: 2, groups: 1 };
    let lit = literal(256);
    let p = params(&lit);
    let walsh = WalshConv::new(&shape, &p, None).unwrap();
    assert_eq!(walsh.output_layout().num_ciphertexts, 2);
    check(&walsh, &lit, 14311781375);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
    #[test]
    fn every_algorithm_is_exact_on_random_shapes(shape in arbitrary_shape(), seed in any::<u64>()) {
        let lit = literal(256);
        let p = params(&lit);
        check(&PackedConv::new(&shape, &p, PackedOptions::default()).unwrap(), &lit, seed);
        check(&PackedConv::new(&shape, &p, PackedOptions { schedule: Schedule::PartialAligned, ..Default::default() }).unwrap(), &lit, seed);
        // Walsh-Hadamard refuses a 1x1 image under a 1x1 kernel (a fully connected layer).
        if !shape.is_fully_connected() {
            check(&WalshConv::new(&shape, &p, None).unwrap(), &lit, seed);
        }
        check(&PaddedConv::new(&shape, &p, None).unwrap(), &lit, seed);
        check(&CoeffConv::new(&shape, &p).unwrap(), &lit, seed);
        check(&HyenaConv::new(&shape, &p, 1).unwrap(), &lit, seed);
    }
}

#[test]
fn secure_parameters_resnet_block() {
    let lit = literal(4096);
    let shape = ConvShape::conv(16, 16, 16, 3, 1);
    check(&PackedConv::new(&shape, &params(&lit), PackedOptions::default()).unwrap(), &lit, 11);
    check(&WalshConv::new(&shape, &params(&lit), None).unwrap(), &lit, 12);
}

#[test]
fn coefficient_convolution_is_exact() {
    let lit = literal(256);
    for (k, shape) in shapes().iter().enumerate().filter(|(_, s)| s.groups == 1) {
        check(&CoeffConv::new(shape, &params(&lit)).unwrap(), &lit, 400 + k as u64);
    }
    // Forced small blocks: several channel and spatial blocks.
    let shape = ConvShape::conv(9, 5, 3, 3, 1);
    check(&CoeffConv::with_blocks(&shape, &params(&lit), CoeffBlocks { c: 2, h: 5, w: 4, k: 1 }).unwrap(), &lit, 410);
    // Output channels packed 3 per ciphertext (a last group of 2), 2 and 5.
    let shape = ConvShape::conv(4, 5, 8, 3, 1);
    // (c = 1, k = 5) and (c = 2, k = 3) come within 20 and 12 coefficients of n = 256.
    for (c, k, seed) in [(1, 3, 411), (1, 2, 412), (1, 5, 413), (2, 3, 414)] {
        let plan = CoeffConv::with_blocks(&shape, &params(&lit), CoeffBlocks { c, h: 6, w: 6, k }).unwrap();
        assert_eq!(plan.output_layout().num_ciphertexts, 8usize.div_ceil(k), "k = {k}");
        check(&plan, &lit, seed);
    }
    // Blocks whose packed products would wrap past n are refused.
    assert!(CoeffConv::with_blocks(&shape, &params(&lit), CoeffBlocks { c: 5, h: 6, w: 6, k: 2 }).is_err());
}

#[test]
fn coefficient_outputs_travel_compressed() {
    let lit = literal(256);
    let params = params(&lit);
    let plan = CoeffMatVec::new(&ConvShape::fully_connected(40, 9), &params).unwrap();
    let positions = lycaon_nn::coeff::kept_positions(plan.output_layout());
    assert!(plan.cost().down_bytes < plan.output_layout().num_ciphertexts * lycaon_nn::layout::ciphertext_bytes(&params, 0));
    assert_eq!(positions.iter().map(Vec::len).sum::<usize>(), 9);
}

#[test]
fn coefficient_matvec_is_exact() {
    let lit = literal(256);
    for (k, (i, o)) in [(10, 4), (300, 7), (64, 200), (1, 1)].into_iter().enumerate() {
        check(&CoeffMatVec::new(&ConvShape::fully_connected(i, o), &params(&lit)).unwrap(), &lit, 500 + k as u64);
    }
}

#[test]
fn diagonal_fc_is_exact() {
    let lit = literal(256);
    for (k, (i, o)) in [(10, 4), (128, 128), (300, 7), (5, 200), (1, 1)].into_iter().enumerate() {
        check(&DiagonalFc::new(&ConvShape::fully_connected(i, o), &params(&lit)).unwrap(), &lit, 600 + k as u64);
    }
}

#[test]
fn scalar_algorithms_take_weights_of_any_size() {
    // Weights up to t/2 leave the 64-bit fast path for 128-bit accumulators.
    let lit = literal(256);
    let p = params(&lit);
    let t = p.plaintext_modulus().unwrap().value() as i64;
    let shape = ConvShape::conv(6, 3, 2, 3, 1);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    let x: Vec<i64> = (0..shape.input_len()).map(|_| rng.random_range(-t..t)).collect();
    let w: Vec<i64> = (0..shape.weight_len()).map(|_| rng.random_range(-t / 2..t / 2)).collect();
    for plan in [Box::new(WalshConv::new(&shape, &p, None).unwrap()) as Box<dyn LinearPlan>, Box::new(PaddedConv::new(&shape, &p, None).unwrap())] {
        let run = run_layer(plan.as_ref(), &x, &w, 1).unwrap();
        assert!(run.exact, "{}", plan.name());
        assert_eq!(run.counts, run.stated);
    }
}

#[test]
fn padded_sums_blocks_of_outputs_across_folds() {
    // 40 output channels: blocks of 16 and a remainder; 8 x 9 terms with weights of 200-255 (all
    // positive, so the 64-bit sums do grow) pass the accumulators' fold bound (15 terms at 50-bit
    // primes) several times mid-sum; 16 x 16 takes two ciphertexts a channel.
    let lit = literal(256);
    let p = params(&lit);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    for shape in [ConvShape::conv(4, 8, 40, 3, 1), ConvShape::conv(16, 8, 20, 3, 1)] {
        let x: Vec<i64> = (0..shape.input_len()).map(|_| rng.random_range(-100..100)).collect();
        let w: Vec<i64> = (0..shape.weight_len()).map(|_| rng.random_range(200..256)).collect();
        let plan = PaddedConv::new(&shape, &p, None).unwrap();
        let run = run_layer(&plan, &x, &w, 1).unwrap();
        assert!(run.exact, "{shape:?}");
        assert_eq!(run.counts, run.stated);
        assert_eq!(plan.output_units(), shape.c_out * if shape.h == 16 { 2 } else { 1 });
    }
}

#[test]
fn hyena_packing_is_exact() {
    let lit = literal(256);
    for (k, shape) in shapes().iter().enumerate() {
        check(&HyenaConv::new(shape, &params(&lit), 1).unwrap(), &lit, 700 + k as u64);
    }
    // Hyena-Pack+: two images share the ciphertexts.
    check(&HyenaConv::new(&ConvShape::conv(5, 3, 4, 3, 1), &params(&lit), 2).unwrap(), &lit, 720);
}

#[test]
fn hyena_counts_follow_table_2() {
    // 000 Table 2, Hyena row: MUL = (M N_on / M_t) C K / C_t, one product per IF group, channel
    // group and output channel.
    let lit = literal(4096);
    let shape = ConvShape::conv(32, 16, 16, 3, 1);
    let plan = HyenaConv::new(&shape, &params(&lit), 1).unwrap();
    let (window_values, c_t, _, m_t) = plan.packing();
    assert_eq!((window_values, c_t), (144, 16));
    let if_groups = (32 * 32usize).div_ceil(m_t); // M N_on / M_t: every output neuron's window
    assert_eq!(plan.counts().plain_mults as usize, if_groups * 16 * 16 / c_t);
    assert_eq!(plan.counts().rotations as usize, if_groups * 16 * 8); // K log2(B_w), B_w = 256
}

#[test]
fn batchwise_packings_are_exact() {
    let lit = literal(256);
    for (k, shape) in shapes().iter().enumerate().take(4) {
        check(&BatchWiseConv::new(shape, &params(&lit), 3, Some(1)).unwrap(), &lit, 800 + k as u64);
        check(&BatchWiseConv::new(shape, &params(&lit), 3, None).unwrap(), &lit, 820 + k as u64);
    }
    let mut grouped = ConvShape::conv(4, 4, 6, 3, 1);
    grouped.groups = 2;
    check(&BatchWiseConv::new(&grouped, &params(&lit), 5, None).unwrap(), &lit, 840);
}
