//! The tuner on random layer shapes: every chosen point is a 128-bit secure parameter set, keeps
//! a non-negative practical noise margin, and really decrypts exactly when the layer is run.

use std::sync::Mutex;

use lycaon_nn::algorithm::Algorithm;
use lycaon_nn::harness::run_layer;
use lycaon_plan::costs::{CostTable, Link};
use lycaon_plan::hybrid::{candidate_sets, tune, LayerRequest, ShapeSpec, TuneOptions};
use proptest::prelude::*;
use rand::{RngExt, SeedableRng};

static COSTS: Mutex<Option<CostTable>> = Mutex::new(None);

fn layer_strategy() -> impl Strategy<Value = LayerRequest> {
    (prop::sample::select(vec![4usize, 8]), 1usize..6, 1usize..6, prop::sample::select(vec![1usize, 3]), 1usize..3, 18u32..28, 3u32..9).prop_map(
        |(h, c_in, c_out, k, stride, t_bits, weight_bits)| LayerRequest {
            name: format!("{h}x{h} {c_in}->{c_out} k{k} s{stride}"),
            shape: ShapeSpec { h, w: h, c_in, c_out, k, stride, pad: None, groups: 1 },
            weight_bits,
            t_bits,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn tuned_layers_are_secure_and_decrypt(layer in layer_strategy(), seed in any::<u64>()) {
        let mut guard = COSTS.lock().unwrap_or_else(|e| e.into_inner());
        let costs = guard.get_or_insert_with(CostTable::in_memory);
        // n up to 4096 keeps the calibration short; the rules are the same for larger n.
        let options = TuneOptions { link: Link::lan(), ..TuneOptions::default() };
        let plan = tune(std::slice::from_ref(&layer), costs, &options, false).unwrap();
        let chosen = &plan.layers[0].chosen;
        prop_assert!(chosen.noise_margin_bits >= 0.0, "margin {}", chosen.noise_margin_bits);
        let params = chosen.params.parameters().expect("the chosen set must pass the 128-bit check");
        prop_assert!(params.log2_qp() <= lycaon_bfv::rlwe::MAX_LOG_QP_128.iter().find(|(n, _)| *n == params.n()).unwrap().1 as f64);
        let shape = layer.shape.conv_shape();
        let lp = Algorithm::parse(&chosen.algorithm).unwrap().build(&shape, &params).unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let t = params.plaintext_modulus().unwrap().value() as i64;
        let wmax = 1i64 << (layer.weight_bits - 1);
        let x: Vec<i64> = (0..shape.input_len()).map(|_| rng.random_range(-(t / 2)..t / 2)).collect();
        // Weights of full magnitude (random sign), as the model's weight bound assumes: a layer
        // with a single weight of 0 would decrypt with almost no noise and say nothing.
        let w: Vec<i64> = (0..shape.weight_len()).map(|_| if rng.random_range(0..2) == 0 { wmax - 1 } else { 1 - wmax }).collect();
        let run = run_layer(lp.as_ref(), &x, &w, 1).unwrap();
        prop_assert!(run.exact, "{} under {} decrypted wrongly", chosen.algorithm, chosen.params.label());
        prop_assert!(run.min_noise_budget > 0.0);
        // The practical model is never far off the real budget (the noise-model tests bound it
        // to 2 bits per algorithm; here a looser check on random shapes).
        prop_assert!((run.min_noise_budget - chosen.noise_margin_bits).abs() < 4.0, "{} under {}: measured {} predicted {}", chosen.algorithm, chosen.params.label(), run.min_noise_budget, chosen.noise_margin_bits);
    }
}

#[test]
fn search_space_is_secure_and_well_formed() {
    for t_bits in [17u32, 20, 33, 40] {
        for with_keys in [false, true] {
            let sets = candidate_sets(t_bits, with_keys);
            assert!(!sets.is_empty());
            for s in sets {
                assert!(s.q_bits.iter().all(|&b| b > t_bits), "{}", s.label());
                assert_eq!(s.p_bits.is_empty(), !with_keys);
                s.parameters().unwrap_or_else(|e| panic!("{}: {e}", s.label()));
            }
        }
    }
}

#[test]
fn bad_requests_are_refused_with_reasons() {
    let mut costs = CostTable::in_memory();
    let options = TuneOptions::default();
    assert!(tune(&[], &mut costs, &options, false).unwrap_err().to_string().contains("no linear layer"));
    let bad = LayerRequest { name: "x".into(), shape: ShapeSpec { h: 8, w: 8, c_in: 2, c_out: 2, k: 3, stride: 1, pad: None, groups: 1 }, weight_bits: 8, t_bits: 70 };
    assert!(tune(&[bad], &mut costs, &options, false).unwrap_err().to_string().contains("t_bits"));
    let err = lycaon_plan::hybrid::plan_json("{\"layers\": 3}").unwrap_err().to_string();
    assert!(err.contains("malformed plan request"), "{err}");
    let err = lycaon_plan::hybrid::plan_json("{\"layers\": [], \"link\": \"fast\"}").unwrap_err().to_string();
    assert!(err.contains("link"), "{err}");
}

/// With noise flooding asked for, the tuner prices the flooded outputs: the chosen set keeps a
/// non-negative margin after flooding, which needs room for about flood_bits + log2 n bits more
/// than the bare layer, so its modulus is larger than the bare plan's.
#[test]
fn flooding_is_priced_into_the_choice() {
    let mut guard = COSTS.lock().unwrap_or_else(|e| e.into_inner());
    let costs = guard.get_or_insert_with(CostTable::in_memory);
    let layer = LayerRequest { name: "conv".into(), shape: ShapeSpec { h: 8, w: 8, c_in: 4, c_out: 4, k: 3, stride: 1, pad: None, groups: 1 }, weight_bits: 8, t_bits: 30 };
    let bare = TuneOptions { link: Link::lan(), algorithms: vec!["cheetah".into()], ..TuneOptions::default() };
    let flooded = TuneOptions { flood_bits: 40.0, ..bare.clone() };
    let a = tune(std::slice::from_ref(&layer), costs, &bare, false).unwrap().layers[0].chosen.clone();
    let b = tune(std::slice::from_ref(&layer), costs, &flooded, false).unwrap().layers[0].chosen.clone();
    assert!(b.noise_margin_bits >= 0.0, "flooded margin {}", b.noise_margin_bits);
    let log_q = |p: &lycaon_plan::hybrid::ParamChoice| p.q_bits.iter().sum::<u32>();
    assert!(log_q(&b.params) >= log_q(&a.params) + 40, "bare {} flooded {}", a.params.label(), b.params.label());
    assert!(log_q(&b.params) as f64 >= 30.0 + 40.0 + (b.params.n as f64).log2(), "{}", b.params.label());
}
