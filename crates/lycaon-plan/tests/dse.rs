//! Tests of 003's (Cheetah) HE-PTune counts and accelerator design-space exploration.

use lycaon_plan::simulate::dse::*;
use lycaon_plan::simulate::models::{model_by_name, LayerSpec, Model};
use lycaon_plan::PlanError;

/// Toy parameters, not secure: n = 16, q of 30 bits, t = 17, ciphertext base 2^10 (l_ct = 3), plaintext
/// base 2^5 >= t (l_pt = 1).
fn toy() -> HeParams {
    HeParams { n: 16, log_q: 30, t: 17, log_w_ct: 10, log_w_pt: 5 }
}

// Hand derivation (003 Sec. IV-A): a 4x4 image has 16 pixels <= n = 16, so c_n = floor(16/16) = 1 channel
// per ciphertext: 2 input and 3 output ciphertexts. Each output ciphertext sums c_i f^2 = 2 * 9 = 18
// partials, so HE_Mult = HE_Rotate = 3 * 18 = 54 and HE_Add = 3 * 17 = 51. Each rotation: 1 INTT and
// l_ct = 3 NTTs (162 NTTs, 54 INTTs), each n/2 log2 n = 8 * 4 = 32 butterflies: 216 * 32 = 6912.
// Modular multiplications: 54 * 2 * 16 * l_pt(1) + 54 * 2 * 16 * l_ct(3) = 1728 + 5184 = 6912.
// Modular additions: 51 * 2 * 16 + 54 * 2 * 16 * (l_ct - 1) = 1632 + 3456 = 5088.
// Integer multiplications: 3 per butterfly + 5 per modular multiplication = 20736 + 34560 = 55296.
#[test]
fn conv_with_one_channel_per_ciphertext() {
    let layer = LayerSpec::conv("c", 4, 2, 3, 3, 1, 1);
    let c = layer_counts(&layer, &toy(), Schedule::PartialAligned).unwrap();
    assert_eq!(c.packing, Packing::ChannelsPerCiphertext(1));
    assert_eq!((c.input_cts, c.output_cts, c.partials_per_output_ct), (2, 3, 18));
    assert_eq!((c.he_mult, c.he_rotate, c.he_add), (54, 54, 51));
    assert_eq!((c.ntt, c.intt, c.butterflies), (162, 54, 6912));
    assert_eq!((c.modmul, c.modadd, c.int_mults), (6912, 5088, 55296));
}

// A 2x2 image (4 pixels) in n = 16 slots: c_n = 4 channels per ciphertext. c_i = 6 -> ceil(6/4) = 2 input
// ciphertexts, c_o = 5 -> 2 output ciphertexts, 1x1 filter: 6 partials per output, 12 HE_Mult.
// With a plaintext base of 2^3 < t = 17 (5 bits), l_pt = ceil(5/3) = 2: 12 * 2 * 16 * 2 = 768 modular
// multiplications for HE_Mult, plus 12 * 2 * 16 * 3 = 1152 for key switching.
#[test]
fn conv_with_several_channels_per_ciphertext_and_plaintext_digits() {
    let layer = LayerSpec::conv("c", 2, 6, 5, 1, 1, 0);
    let params = HeParams { log_w_pt: 3, ..toy() };
    assert_eq!(params.l_pt(), 2);
    let c = layer_counts(&layer, &params, Schedule::PartialAligned).unwrap();
    assert_eq!(c.packing, Packing::ChannelsPerCiphertext(4));
    assert_eq!((c.input_cts, c.output_cts, c.partials_per_output_ct, c.he_mult), (2, 2, 6, 12));
    assert_eq!(c.modmul, 768 + 1152);
}

// An 8x8 image (64 pixels) in n = 16 slots: c_n = ceil(64/16) = 4 ciphertexts per channel; c_i = 2 -> 8
// input and c_o = 3 -> 12 output ciphertexts, each summing c_i f^2 = 18 partials: 216 HE_Mult.
#[test]
fn conv_with_several_ciphertexts_per_channel() {
    let layer = LayerSpec::conv("c", 8, 2, 3, 3, 1, 1);
    let c = layer_counts(&layer, &toy(), Schedule::PartialAligned).unwrap();
    assert_eq!(c.packing, Packing::CiphertextsPerChannel(4));
    assert_eq!((c.input_cts, c.output_cts, c.partials_per_output_ct, c.he_mult), (8, 12, 18, 216));
}

// FC 40 -> 20 with n = 16: ceil(40/16) = 3 input and ceil(20/16) = 2 output ciphertexts; 40 * 20 / 16 = 50
// generalised diagonals, 25 per output ciphertext. A depthwise 3x3 layer over 8 channels of 2x2 packs
// c_n = 4 channels per ciphertext: 2 output ciphertexts of f^2 = 9 partials.
#[test]
fn fully_connected_and_depthwise() {
    let fc = layer_counts(&LayerSpec::fully_connected("fc", 40, 20), &toy(), Schedule::PartialAligned).unwrap();
    assert_eq!((fc.input_cts, fc.output_cts, fc.partials_per_output_ct, fc.he_mult), (3, 2, 25, 50));
    let dw = layer_counts(&LayerSpec::depthwise("dw", 2, 8, 3, 1, 1), &toy(), Schedule::PartialAligned).unwrap();
    assert_eq!((dw.output_cts, dw.partials_per_output_ct, dw.he_mult), (2, 9, 18));
    // A weight matrix over 3 columns is three FC layers.
    let mm = layer_counts(&LayerSpec::matmul("mm", 3, 40, 20), &toy(), Schedule::PartialAligned).unwrap();
    assert_eq!((mm.output_cts, mm.he_mult), (6, 150));
}

// 003 Sec. VIII-B2: ResNet-50's 3x3, 64 -> 64 layer on 56x56 with one channel per ciphertext needs 36,864
// HE_Mult and HE_Rotate (n = 4096 >= 3136 pixels gives c_n = 1).
#[test]
fn resnet50_layer6_matches_the_paper() {
    let layer = LayerSpec::conv("layer1.0.conv2", 56, 64, 64, 3, 1, 1);
    let params = HeParams { n: 4096, log_q: 60, t: PLAINTEXT_MODULUS, log_w_ct: 20, log_w_pt: 19 };
    for schedule in [Schedule::PartialAligned, Schedule::InputAligned] {
        let c = layer_counts(&layer, &params, schedule).unwrap();
        assert_eq!(c.packing, Packing::ChannelsPerCiphertext(1));
        assert_eq!((c.he_mult, c.he_rotate), (36_864, 36_864));
    }
}

#[test]
fn input_aligned_never_has_more_noise_budget_and_costs_no_less_after_tuning() {
    let layers = [LayerSpec::conv("a", 56, 64, 64, 3, 1, 1), LayerSpec::conv("b", 14, 256, 1024, 1, 1, 0), LayerSpec::fully_connected("fc", 2048, 1000)];
    for layer in &layers {
        for log_w_ct in [8, 16, 24, 30] {
            for log_w_pt in [4, 10, 19] {
                let p = HeParams { n: 4096, log_q: 60, t: PLAINTEXT_MODULUS, log_w_ct, log_w_pt };
                let pa = noise_budget_bits(layer, &p, Schedule::PartialAligned).unwrap();
                let ia = noise_budget_bits(layer, &p, Schedule::InputAligned).unwrap();
                assert!(ia <= pa + 1e-9, "{}: IA {ia} > PA {pa}", layer.name);
            }
        }
        let pa = tune_layer(layer, Schedule::PartialAligned, 16384).unwrap();
        let ia = tune_layer(layer, Schedule::InputAligned, 16384).unwrap();
        assert!(pa.noise_budget_bits >= 0.0 && ia.noise_budget_bits >= 0.0);
        assert!(ia.counts.int_mults >= pa.counts.int_mults, "{}", layer.name);
        // Sched-PA avoids plaintext decomposition on these layers (003 Sec. V-C); Sched-IA cannot.
        assert_eq!(pa.params.l_pt(), 1, "{}", layer.name);
        assert!(ia.params.l_pt() > 1 && ia.params.l_ct() >= pa.params.l_ct(), "{}", layer.name);
    }
}

/// HE-PTune's choice is the cheapest feasible point: brute force over the same space agrees.
#[test]
fn tuner_is_optimal_over_its_search_space() {
    let layer = LayerSpec::conv("c", 28, 128, 128, 3, 1, 1);
    let tuned = tune_layer(&layer, Schedule::PartialAligned, 8192).unwrap();
    let log_t = (PLAINTEXT_MODULUS as f64).log2().ceil() as u32;
    for n in [1024usize, 2048, 4096, 8192] {
        let log_q = max_log_q(n).unwrap();
        for log_w_ct in 1..=log_q {
            for log_w_pt in 1..=log_t {
                let p = HeParams { n, log_q, t: PLAINTEXT_MODULUS, log_w_ct, log_w_pt };
                if p.validate().is_err() || noise_budget_bits(&layer, &p, Schedule::PartialAligned).unwrap() < 0.0 {
                    continue;
                }
                let c = layer_counts(&layer, &p, Schedule::PartialAligned).unwrap();
                assert!(c.int_mults >= tuned.counts.int_mults, "{p:?} beats the tuner's {:?}", tuned.params);
            }
        }
    }
}

// One lane's kernels for n = 4096, l_ct = 3 on 3 NTT units, l_pt = 1 (003 Sec. VII-A2): HE_Mult streams
// 2n products over 2 multipliers (4096 cycles); INTT and each NTT take n/2 log2 n = 24576 butterflies at
// one a cycle (13 GB/s at 400 MHz); decompose and key switch stream n words each.
#[test]
fn lane_kernel_cycles() {
    assert_eq!(butterflies_per_cycle(), 1);
    let lane = LaneHardware { max_n: 4096, ntt_units: 3, butterflies_per_ntt: 1, mult_modmuls: 2 };
    let p = HeParams { n: 4096, log_q: 60, t: PLAINTEXT_MODULUS, log_w_ct: 20, log_w_pt: 19 };
    let k = lane.partial_cycles(&p);
    assert_eq!((k.he_mult, k.intt, k.decompose, k.ntt, k.key_switch), (4096, 24576, 4096, 24576, 4096));
    // Two NTT units for three digits: two rounds.
    assert_eq!(LaneHardware { ntt_units: 2, ..lane }.partial_cycles(&p).ntt, 2 * 24576);
}

// A one-layer model on 2 PEs x 4 lanes: 3 output ciphertexts of 18 partials take ceil(3/2) * ceil(18/4) = 10
// rounds, each one partial's kernels plus log2(4) = 2 adder levels.
#[test]
fn latency_is_rounds_times_partial_time() {
    let model = Model { name: "toy".into(), layers: vec![LayerSpec::conv("c", 4, 2, 3, 3, 1, 1)] };
    let tuned = tune_model(&model, Schedule::PartialAligned, 4096).unwrap();
    let acc = Accelerator::for_layers(2, 4, &tuned).unwrap();
    let k = acc.lane.partial_cycles(&tuned[0].params);
    let per_round = k.he_mult + k.intt + k.decompose + k.ntt + k.key_switch + 2;
    let rounds = tuned[0].counts.output_cts.div_ceil(2) * tuned[0].counts.partials_per_output_ct.div_ceil(4);
    let point = acc.evaluate(&tuned).unwrap();
    assert!((point.latency_s - (rounds * per_round) as f64 / CLOCK_HZ).abs() < 1e-12);
    assert!(point.area_mm2 > 0.0 && point.power_w > 0.0 && point.energy_j > 0.0);
    assert!((point.area_mm2 - point.area.total()).abs() < 1e-9);
}

fn resnet_sweep() -> Vec<DesignPoint> {
    sweep(&model_by_name("resnet50").unwrap(), &SweepRanges::default()).unwrap()
}

#[test]
fn more_pes_or_lanes_are_never_slower_and_always_larger() {
    let points = resnet_sweep();
    assert_eq!(points.len(), 10 * 12);
    let at = |p: usize, l: usize| points.iter().find(|d| d.pes == p && d.lanes == l).unwrap();
    let ranges = SweepRanges::default();
    for &p in &ranges.pes {
        for w in ranges.lanes.windows(2) {
            let (a, b) = (at(p, w[0]), at(p, w[1]));
            assert!(b.latency_s <= a.latency_s, "{p} PEs: {} lanes slower than {}", w[1], w[0]);
            assert!(b.area_mm2 > a.area_mm2);
        }
    }
    for &l in &ranges.lanes {
        for w in ranges.pes.windows(2) {
            let (a, b) = (at(w[0], l), at(w[1], l));
            assert!(b.latency_s <= a.latency_s, "{l} lanes: {} PEs slower than {}", w[1], w[0]);
            assert!(b.area_mm2 > a.area_mm2);
        }
    }
}

#[test]
fn pareto_fronts_are_exactly_the_non_dominated_points() {
    let points = resnet_sweep();
    for objective in [Objective::Area, Objective::Power] {
        let cost = |p: &DesignPoint| if objective == Objective::Area { p.area_mm2 } else { p.power_w };
        let front = pareto_front(&points, objective);
        assert!(!front.is_empty());
        let dominates = |q: &DesignPoint, p: &DesignPoint| q.latency_s <= p.latency_s && cost(q) <= cost(p) && (q.latency_s < p.latency_s || cost(q) < cost(p));
        for f in &front {
            assert!(!points.iter().any(|q| dominates(q, f)), "front point {}x{} is dominated", f.pes, f.lanes);
        }
        for p in &points {
            let on_front = front.iter().any(|f| f.pes == p.pes && f.lanes == p.lanes);
            if !on_front {
                assert!(front.iter().any(|f| dominates(f, p) || (f.latency_s == p.latency_s && cost(f) == cost(p))), "{}x{} left off", p.pes, p.lanes);
            }
        }
        for w in front.windows(2) {
            assert!(w[0].latency_s < w[1].latency_s && cost(&w[0]) > cost(&w[1]));
        }
    }
}

#[test]
fn reproduction_rows_are_within_tolerance_or_their_documented_deviation() {
    let rows = reproduction_003().unwrap();
    for what in ["ResNet-50 latency on 8", "area on 8", "power on 8", "nearest 30 W", "nearest 545", "vgg16 latency", "alexnet latency"] {
        assert!(rows.iter().any(|r| r.what.contains(what)), "no row for {what}");
    }
    let json: Vec<ReproductionRow> = serde_json::from_str(&reproduction_003_json().unwrap()).unwrap();
    assert_eq!(json.len(), rows.len(), "the JSON entry point gives the same table");
    for (j, r) in json.iter().zip(&rows) {
        assert_eq!((&j.what, j.within_tolerance, &j.explanation), (&r.what, r.within_tolerance, &r.explanation));
        assert!((j.ours / r.ours - 1.0).abs() < 1e-12, "{}", r.what);
    }
    for r in &rows {
        assert!(r.paper > 0.0 && r.ours.is_finite() && r.ours > 0.0, "{}", r.what);
        assert!((r.deviation - (r.ours / r.paper - 1.0)).abs() < 1e-12);
        if r.within_tolerance {
            assert!(r.deviation.abs() <= REPRODUCTION_TOLERANCE);
        } else {
            let (lo, hi) = r.documented_deviation.unwrap_or_else(|| panic!("{} is off by {:+.2} without a documented deviation", r.what, r.deviation));
            assert!(lo <= r.deviation && r.deviation <= hi, "{}: {:+.3} outside its documented [{lo}, {hi}]", r.what, r.deviation);
            assert!(r.explanation.len() > 80, "{}", r.what);
        }
    }
}

#[test]
fn table_vi_runs_every_network_on_the_resnet50_design() {
    let rows = table_vi().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r.model.as_str()).collect();
    assert_eq!(names, ["resnet50", "vgg16", "alexnet"]);
    assert!(rows[0].increase.abs() < 1e-12, "ResNet-50 on its own design has no increase");
    for r in &rows {
        assert!(r.latency_ms > 0.0 && r.avg_output_cts >= 1.0 && r.avg_partials_k > 0.0);
    }
}

#[test]
fn dse_json_answers_by_name_and_inline() {
    let out = dse_json(r#"{"model": "resnet50", "pes": [8, 16], "lanes": [256, 512], "table_vi": false}"#).unwrap();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["points"].as_array().unwrap().len(), 4);
    assert!(!v["pareto_area"].as_array().unwrap().is_empty() && !v["pareto_power"].as_array().unwrap().is_empty());
    assert!(v.get("table_vi").is_none());
    let inline = serde_json::json!({"model": Model { name: "toy".into(), layers: vec![LayerSpec::conv("c", 4, 2, 3, 3, 1, 1)] }, "pes": [2], "lanes": [4], "table_vi": false});
    let out: serde_json::Value = serde_json::from_str(&dse_json(&inline.to_string()).unwrap()).unwrap();
    // HE-PTune picks n = 1024 for the 4x4 image (64 channels a ciphertext): one output ciphertext of 18 partials.
    let layer = &out["layers"][0];
    assert_eq!(layer["counts"]["he_mult"], layer["counts"]["output_cts"].as_u64().unwrap() * 18);
    assert!(matches!(dse_json("{"), Err(PlanError::InvalidRequest { .. })));
    assert!(matches!(dse_json(r#"{"model": "nope"}"#), Err(PlanError::UnknownModel { .. })));
    assert!(matches!(dse_json(r#"{"model": "resnet50", "pes": [0]}"#), Err(PlanError::InvalidArch { .. })));
}

#[test]
fn bad_inputs_are_errors() {
    let bad = LayerSpec { c_in: 0, ..LayerSpec::conv("c", 4, 2, 3, 3, 1, 1) };
    assert!(matches!(layer_counts(&bad, &toy(), Schedule::PartialAligned), Err(PlanError::InvalidLayer { .. })));
    assert!(matches!(
        layer_counts(&LayerSpec::conv("c", 4, 2, 3, 3, 1, 1), &HeParams { n: 12, ..toy() }, Schedule::PartialAligned),
        Err(PlanError::InvalidParams { .. })
    ));
    let model = Model { name: "toy".into(), layers: vec![LayerSpec::conv("c", 4, 2, 3, 3, 1, 1)] };
    let tuned = tune_model(&model, Schedule::PartialAligned, 4096).unwrap();
    assert!(matches!(Accelerator::for_layers(0, 4, &tuned), Err(PlanError::InvalidArch { .. })));
    assert!(matches!(sweep(&model, &SweepRanges { pes: vec![], ..SweepRanges::default() }), Err(PlanError::InvalidArch { .. })));
}
