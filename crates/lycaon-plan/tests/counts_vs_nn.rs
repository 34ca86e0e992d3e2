//! The simulator's BFV counts (`simulate::bfv`) equal what lycaon-nn's real layers state and run:
//! Gazelle packed convolution (Channel), Cheetah coefficient convolution and mat-vec (C2PC),
//! Hyena, and the diagonal FC. lycaon-nn's own tests check that each plan's stated counts equal
//! an instrumented run (NTTs from a counting backend), so equality with `LinearPlan::counts()`
//! is equality with the real evaluation.
//!
//! Mapping of definitions (000's Table 2 counts differ, see `simulate::bfv`): rotation = Galois
//! automorphism with a key switch; NTT = single-limb transform of the backend; products =
//! ciphertext-plaintext products (Table 2 MUL).

use std::sync::Arc;

use lycaon_bfv::rlwe::{Parameters, ParametersLiteral, Security};
use lycaon_nn::coeff::{CoeffConv, CoeffMatVec};
use lycaon_nn::diagonal::DiagonalFc;
use lycaon_nn::hyena::HyenaConv;
use lycaon_nn::packed::{PackedConv, PackedOptions};
use lycaon_nn::{ConvShape, LinearPlan, OpCounts};
use lycaon_plan::simulate::bfv::{bfv_counts, BfvAlgorithm, BfvCounts, BfvParams};
use lycaon_plan::simulate::models::LayerSpec;

fn params(n: usize) -> (Arc<Parameters>, BfvParams) {
    let (q, p): (&[u32], &[u32]) = if n >= 4096 { (&[36, 36], &[37]) } else { (&[50, 50], &[51]) };
    let mut lit = ParametersLiteral::bfv_from_bits(n, q, p, 20).unwrap();
    if n < 4096 {
        lit.security = Security::InsecureTestOnly;
    }
    let shape = BfvParams { n, q_primes: q.len(), special_primes: p.len(), digits: lit.key_switch_digits };
    (Parameters::new(lit).unwrap(), shape)
}

fn ours(c: OpCounts) -> BfvCounts {
    BfvCounts {
        rotations: c.rotations,
        hoisted_decompositions: c.hoisted_decompositions,
        key_switches: c.key_switches,
        plain_mults: c.plain_mults,
        scalar_mults: c.scalar_mults,
        additions: c.additions,
        mod_switches: c.mod_switches,
        ntts: c.ntts,
    }
}

fn shape_of(l: &LayerSpec) -> ConvShape {
    let mut s = if l.k == 1 && l.h == 1 && l.w == 1 && l.c_in != l.c_out || l.name.starts_with("fc") {
        ConvShape::fully_connected(l.c_in, l.c_out)
    } else {
        ConvShape::conv(l.h, l.c_in, l.c_out, l.k, l.stride)
    };
    s.w = l.w;
    s.pad_h = l.pad;
    s.pad_w = l.pad;
    if l.kind == lycaon_plan::simulate::models::LayerKind::Depthwise {
        s.groups = l.c_in;
    }
    s
}

fn layers() -> Vec<LayerSpec> {
    let mut odd = LayerSpec::conv("odd", 7, 3, 5, 3, 1, 1);
    odd.w = 6;
    vec![
        LayerSpec::conv("a", 8, 2, 3, 3, 1, 1),
        odd,
        LayerSpec::conv("strided", 8, 3, 4, 3, 2, 1),
        LayerSpec::conv("pointwise", 5, 4, 4, 1, 1, 0),
        LayerSpec::conv("unpadded", 9, 4, 3, 3, 1, 0),
        LayerSpec::conv("k5", 5, 3, 2, 5, 1, 2),
        LayerSpec::depthwise("dw", 6, 5, 3, 1, 1),
        LayerSpec::conv("resnet-block", 16, 16, 16, 3, 1, 1),
        LayerSpec::conv("wide", 32, 8, 16, 3, 1, 1),
    ]
}

#[test]
fn channel_counts_equal_gazelle_packed_conv() {
    for n in [256, 4096] {
        let (p, bp) = params(n);
        for l in layers() {
            let plan = PackedConv::new(&shape_of(&l), &p, PackedOptions::default()).unwrap();
            assert_eq!(bfv_counts(&l, BfvAlgorithm::Channel, &bp, 1).unwrap(), ours(plan.counts()), "{} at n = {n}", l.name);
        }
    }
}

#[test]
fn c2pc_counts_equal_cheetah_coefficient_layers() {
    for n in [256, 4096] {
        let (p, bp) = params(n);
        for l in layers().into_iter().filter(|l| l.kind != lycaon_plan::simulate::models::LayerKind::Depthwise) {
            let plan = CoeffConv::unpacked(&shape_of(&l), &p).unwrap();
            assert_eq!(bfv_counts(&l, BfvAlgorithm::C2pc, &bp, 1).unwrap(), ours(plan.counts()), "{} at n = {n}", l.name);
        }
        for (c_in, c_out) in [(10, 4), (100, 37), (512, 10), (2048, 1000)] {
            let l = LayerSpec::fully_connected("fc", c_in, c_out);
            let plan = CoeffMatVec::new(&ConvShape::fully_connected(c_in, c_out), &p).unwrap();
            assert_eq!(bfv_counts(&l, BfvAlgorithm::C2pc, &bp, 1).unwrap(), ours(plan.counts()), "fc {c_in}->{c_out} at n = {n}");
        }
    }
}

#[test]
fn hyena_counts_equal_hyena_conv() {
    for n in [256, 4096] {
        let (p, bp) = params(n);
        for l in layers() {
            for batch in [1, 2] {
                let plan = HyenaConv::new(&shape_of(&l), &p, batch).unwrap();
                assert_eq!(bfv_counts(&l, BfvAlgorithm::Hyena, &bp, batch).unwrap(), ours(plan.counts()), "{} batch {batch} at n = {n}", l.name);
            }
        }
    }
}

#[test]
fn diagonal_fc_counts_equal_diagonal_fc() {
    for n in [256, 4096] {
        let (p, bp) = params(n);
        for (c_in, c_out) in [(10, 4), (100, 37), (512, 10), (64, 300), (2048, 1000)] {
            let l = LayerSpec::fully_connected("fc", c_in, c_out);
            let plan = DiagonalFc::new(&ConvShape::fully_connected(c_in, c_out), &p).unwrap();
            assert_eq!(bfv_counts(&l, BfvAlgorithm::DiagonalFc, &bp, 1).unwrap(), ours(plan.counts()), "fc {c_in}->{c_out} at n = {n}");
        }
    }
}
