//! Tests of the rotation-keyset planner (004): issue 6's keyset criterion at logN = 16, key sizes
//! by level, power-of-two composition, hybrid plans and errors. (Key bytes against rlwe's real
//! serialised keys: tests/key_bytes.rs.)

use std::collections::VecDeque;

use lycaon_plan::costs::Link;
use lycaon_plan::hybrid::{DesignPoint, HybridPlan, ParamChoice, PlannedLayer, ShapeSpec};
use lycaon_plan::keyset::*;
use lycaon_plan::PlanError;

/// Deterministic pseudo-random numbers (no dependency, reproducible failures).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 17
    }
}

// Issue 6, "Done when" for keysets: a CKKS plan at logN = 16 whose level-aware keyset takes less
// memory than all-required and whose predicted rotation latency is below power-of-two's.
#[test]
fn level_aware_beats_all_required_in_memory_and_power_of_two_in_latency_at_logn16() {
    let cost = KeySwitchCostModel::recorded();
    for params in [FheParams::joo2024_table1(), FheParams::lycaon_logn16()] {
        assert_eq!(params.chain.log_n, 16);
        let report = resnet20_keyset_report(&params, &[ActivationKind::Aespa, ActivationKind::CompositeRelu], &cost, false).unwrap();
        for m in &report.models {
            for r in [&m.network, &m.with_bootstrapping] {
                let p2 = r.strategy(Strategy::PowerOfTwo).unwrap();
                let all = r.strategy(Strategy::AllRequired).unwrap();
                let la = r.strategy(Strategy::LevelAware).unwrap();
                let what = format!("{} {}", params.name, m.activation);
                assert!(la.memory_bytes < all.memory_bytes, "{what}: level-aware {} >= all-required {}", la.memory_bytes, all.memory_bytes);
                assert!(la.wire_bytes < all.wire_bytes, "{what}");
                assert!(la.rotation_s < p2.rotation_s, "{what}: level-aware {} s >= power-of-two {} s", la.rotation_s, p2.rotation_s);
                assert_eq!(la.keys, all.keys, "{what}: same rotations, different levels");
                assert_eq!(la.key_switches, r.rotations, "{what}: one key switch per rotation with every step present");
                assert!(p2.key_switches > r.rotations, "{what}: composition costs extra key switches");
                assert!((la.rotation_s - all.rotation_s).abs() < 1e-9 * all.rotation_s, "{what}: the key's level does not change a rotation's cost");
            }
        }
        // The comparison has every 004 figure with a finite ratio.
        assert!(report.comparison.iter().any(|r| r.quantity.contains("level-aware keys")));
        assert!(report.comparison.iter().all(|r| r.ratio.is_finite() && r.ratio > 0.0), "{:?}", report.comparison);
    }
}

#[test]
fn level_limited_keys_hold_only_the_limbs_and_digits_of_their_level() {
    let chain = FheParams::joo2024_table1().chain;
    let n = chain.n() as u64;
    // Level 3: 4 ciphertext primes + 1 special, one digit per prime.
    assert_eq!(chain.key_memory_bytes(3).unwrap(), 4 * 2 * 5 * n * 8);
    assert_eq!(chain.key_memory_bytes(29).unwrap(), 30 * 2 * 31 * n * 8);
    let lyc = FheParams::lycaon_logn16().chain;
    // Digits of 4 primes: level 5 has 6 primes -> 2 digits, 6 + 4 limbs.
    assert_eq!(lyc.digit_sizes_at(5), vec![4, 2]);
    assert_eq!(lyc.key_memory_bytes(5).unwrap(), 2 * 2 * 10 * n * 8);
    for l in 1..=chain.max_level() {
        assert!(chain.key_memory_bytes(l).unwrap() > chain.key_memory_bytes(l - 1).unwrap());
        assert!(chain.galois_keys_wire_bytes(&[l]).unwrap() > chain.galois_keys_wire_bytes(&[l - 1]).unwrap());
    }
}

#[test]
fn power_of_two_composition_uses_the_naf_weight_and_reconstructs_the_step() {
    let slots = 1usize << 15;
    let keyset = Keyset::power_of_two(slots, 16, false);
    assert_eq!(keyset.len(), 29, "+-2^i for i < 15, with +2^14 = -2^14");
    let mut rng = Lcg(7);
    for _ in 0..2000 {
        let step = (rng.next() % (slots as u64 - 1)) as i64 + 1 - (slots / 2) as i64;
        if step == 0 {
            continue;
        }
        let rotation = Rotation::step(step, slots).unwrap();
        let level = (rng.next() % 17) as usize;
        let hops = keyset.compose(rotation, level).unwrap();
        let sum: i64 = hops
            .iter()
            .map(|h| match h {
                Rotation::Step(s) => *s,
                other => panic!("unexpected hop {other:?}"),
            })
            .sum();
        assert_eq!(sum.rem_euclid(slots as i64), step.rem_euclid(slots as i64), "step {step}: hops {hops:?}");
        let Rotation::Step(canonical) = rotation else { unreachable!() };
        let naf_weight = naf(canonical).len();
        // The fewest of the NAF of the residue and of the residue minus the slot count.
        let residue = step.rem_euclid(slots as i64);
        let expected = naf(residue).iter().filter(|(i, _)| *i < 15).count().min(naf(residue - slots as i64).iter().filter(|(i, _)| *i < 15).count());
        assert_eq!(hops.len(), expected, "step {step}");
        assert!(hops.len() <= naf_weight, "step {step}: {} hops > NAF weight {naf_weight}", hops.len());
        if hops.len() == 1 {
            assert!(canonical.unsigned_abs().is_power_of_two());
        }
    }
    // NAF digits are non-adjacent and reconstruct the value.
    for x in [-12345i64, -7, -1, 1, 3, 7, 255, 16383, 32767] {
        let d = naf(x);
        assert_eq!(d.iter().map(|&(i, s)| s as i64 * (1i64 << i)).sum::<i64>(), x);
        assert!(d.windows(2).all(|w| w[1].0 > w[0].0 + 1), "{x}: {d:?}");
    }
    assert_eq!(power_of_two_steps(7, slots), vec![-1, 8]);
}

#[test]
fn power_of_two_composition_is_optimal_modulo_the_slot_count() {
    // Breadth-first search over the cyclic group with the +-2^i keys gives the true minimum.
    for log_slots in [4u32, 6, 8] {
        let slots = 1usize << log_slots;
        let mut dist = vec![usize::MAX; slots];
        dist[0] = 0;
        let mut queue = VecDeque::from([0usize]);
        while let Some(v) = queue.pop_front() {
            for i in 0..log_slots {
                for u in [(v + (1 << i)) % slots, (v + slots - (1 << i)) % slots] {
                    if dist[u] == usize::MAX {
                        dist[u] = dist[v] + 1;
                        queue.push_back(u);
                    }
                }
            }
        }
        let keyset = Keyset::power_of_two(slots, 0, false);
        for (r, &d) in dist.iter().enumerate().skip(1) {
            assert_eq!(power_of_two_steps(r as i64, slots).len(), d, "slots {slots}, step {r}");
            assert_eq!(keyset.compose(Rotation::step(r as i64, slots).unwrap(), 0).unwrap().len(), d);
        }
    }
}

#[test]
fn general_keysets_compose_missing_steps_and_refuse_impossible_ones() {
    let slots = 1usize << 15;
    let mut table = RotationTable::new(slots, 16);
    table.push_step("a", Phase::Network, 1, 3, 5).unwrap();
    table.push_step("a", Phase::Network, 32, 8, 2).unwrap();
    table.push_step("b", Phase::Network, 33, 8, 1).unwrap();
    table.push_step("b", Phase::Network, -32, 6, 1).unwrap();
    let level_aware = Keyset::level_aware(&table);
    assert_eq!(level_aware.keys_per_level().into_iter().collect::<Vec<_>>(), vec![(3, 1), (6, 1), (8, 2)]);
    // Step 65 at level 8 composes from 32 and 33 (two key switches).
    let hops = level_aware.compose(Rotation::Step(65), 8).unwrap();
    assert_eq!(hops.len(), 2);
    // Step 2 at level 3 composes from 1 + 1 (or from keys above it).
    assert_eq!(level_aware.compose(Rotation::Step(2), 3).unwrap().len(), 2);
    // Step 1 at level 5: its key only serves levels <= 3; the keys of 33 (level 8) and -32
    // (level 6) give it in two key switches.
    let mut hops = level_aware.compose(Rotation::Step(1), 5).unwrap();
    hops.sort();
    assert_eq!(hops, vec![Rotation::Step(-32), Rotation::Step(33)]);
    // At level 7 the key of -32 is gone: only 32 and 33 remain (one direction), a long chain.
    let long = level_aware.compose(Rotation::Step(1), 7).unwrap();
    let sum: i64 = long.iter().map(|h| if let Rotation::Step(s) = h { *s } else { 0 }).sum();
    assert_eq!(sum.rem_euclid(slots as i64), 1);
    assert!(long.len() > 100);
    // Above every key: impossible, with a clear error.
    let err = level_aware.compose(Rotation::Step(1), 10).unwrap_err();
    assert!(matches!(err, PlanError::MissingRotationKey { level: 10, .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("level-aware") && text.contains("level 10") && text.contains("rotation by 1"), "{text}");
    // The wrong keyset for a table: predicting errors instead of pricing.
    let mut other = table.clone();
    other.push_step("c", Phase::Network, 4, 12, 1).unwrap();
    let chain = FheParams::joo2024_table1().chain;
    let err = level_aware.predict(&other, &chain, &KeySwitchCostModel::recorded()).unwrap_err();
    assert!(matches!(err, PlanError::MissingRotationKey { level: 12, .. }), "{err}");
    // Conjugation is never a composition of steps.
    let err = level_aware.compose(Rotation::Conjugate, 3).unwrap_err();
    assert!(err.to_string().contains("conjugation"), "{err}");
    let p2 = Keyset::power_of_two(slots, 16, false);
    assert!(matches!(p2.compose(Rotation::ConjugateStep(3), 2).unwrap_err(), PlanError::MissingRotationKey { .. }));
}

#[test]
fn errors_name_the_problem() {
    let slots = 1usize << 15;
    let mut table = RotationTable::new(slots, 29);
    let err = table.push_step("x", Phase::Network, 0, 3, 1).unwrap_err();
    assert!(matches!(err, PlanError::InvalidRotation { step: 0, .. }) && err.to_string().contains("identity"), "{err}");
    for step in [slots as i64, -(slots as i64), 1 << 40] {
        let err = table.push_step("x", Phase::Network, step, 3, 1).unwrap_err();
        assert!(matches!(err, PlanError::InvalidRotation { .. }) && err.to_string().contains("below the 32768 slots"), "{err}");
    }
    let err = table.push_step("x", Phase::Network, 5, 30, 1).unwrap_err();
    assert_eq!(err, PlanError::LevelAboveTop { level: 30, top: 29 });
    assert!(err.to_string().contains("above the top level 29"));
    let chain = FheParams::joo2024_table1().chain;
    assert!(matches!(chain.key_memory_bytes(30), Err(PlanError::LevelAboveTop { level: 30, top: 29 })));
    assert!(matches!(KeySwitchCostModel::recorded().key_switch_seconds(&chain, 31), Err(PlanError::LevelAboveTop { .. })));
    // Canonical steps: -1 and slots - 1 are one key.
    assert_eq!(canonical_step(slots as i64 - 1, slots).unwrap(), -1);
    assert_eq!(canonical_step(-(slots as i64 / 2), slots).unwrap(), slots as i64 / 2);
    // Parameters beyond 128-bit security or with impossible digits are refused.
    let mut big = chain.clone();
    big.q_bits.push(60);
    big.q_bits.push(60);
    big.q_bits.push(60);
    assert!(big.validate().unwrap_err().to_string().contains("128-bit"));
    let mut digits = chain.clone();
    digits.digits = 31;
    assert!(digits.validate().unwrap_err().to_string().contains("digits"));
    // A malformed JSON request is an error, not a panic.
    assert!(matches!(keyset_json("{\"params\": 3}"), Err(PlanError::Invalid(_))));
    assert!(matches!(keyset_json("{\"model\": \"vgg99\"}"), Err(PlanError::UnknownModel { .. })));
    // Measuring rotations needs keys, which the planner never makes: it says what to run instead,
    // and takes a measured model as "cost_model".
    let err = keyset_json(r#"{"calibrate": true}"#).unwrap_err();
    assert!(matches!(err, PlanError::Invalid(_)) && err.to_string().contains("--calibrate") && err.to_string().contains("cost_model"), "{err}");
    let mut model = KeySwitchCostModel::recorded();
    model.scale *= 2.0;
    let req = serde_json::json!({"params": "lycaon", "activation": "aespa", "cost_model": model});
    let out: serde_json::Value = serde_json::from_str(&keyset_json(&req.to_string()).unwrap()).unwrap();
    assert_eq!(out["cost_model"]["scale"].as_f64(), Some(model.scale));
}

#[test]
fn galois_elements_map_back_to_rotations() {
    for log_n in [12u32, 16] {
        let n = 1usize << log_n;
        let slots = n / 2;
        let mut rng = Lcg(log_n as u64);
        for _ in 0..50 {
            let s = canonical_step((rng.next() % (slots as u64 - 1)) as i64 + 1, slots).unwrap();
            for r in [Rotation::Step(s), Rotation::ConjugateStep(s)] {
                assert_eq!(Rotation::from_galois_element(r.galois_element(n), n).unwrap(), r);
            }
        }
        assert_eq!(Rotation::from_galois_element(2 * n as u64 - 1, n).unwrap(), Rotation::Conjugate);
        assert!(Rotation::from_galois_element(1, n).is_err());
        assert!(Rotation::from_galois_element(4, n).is_err());
    }
}

fn point(params: &ParamChoice, elements: Vec<u64>, rotations: u64) -> DesignPoint {
    DesignPoint {
        algorithm: "test".into(),
        params: params.clone(),
        server_s: 0.0,
        client_s: 0.0,
        comm_s: 0.0,
        predicted_s: 0.0,
        noise_margin_bits: 10.0,
        noise_worst_case_bits: 5.0,
        response_drop_bits: [0, 0],
        bytes_up: 0,
        bytes_down: 0,
        key_bytes: 0,
        rotations,
        galois_elements: elements,
    }
}

#[test]
fn hybrid_plan_tables_group_keys_per_parameter_set() {
    let a = ParamChoice { n: 4096, q_bits: vec![36, 36], p_bits: vec![37], t_bits: 20, digits: 2, t_n: None };
    let b = ParamChoice { n: 8192, q_bits: vec![43, 43, 44, 44], p_bits: vec![44], t_bits: 20, digits: 4, t_n: None };
    let (na, nb) = (a.n, b.n);
    let el = |s: i64, n: usize| Rotation::Step(s).galois_element(n);
    let shape = ShapeSpec { h: 8, w: 8, c_in: 4, c_out: 4, k: 3, stride: 1, pad: None, groups: 1 };
    let layer = |name: &str, chosen: DesignPoint| PlannedLayer {
        name: name.into(),
        shape,
        weight_bits: 4,
        t_bits: 20,
        chosen,
        single_set_point: None,
        design_space: Vec::new(),
    };
    let plan = HybridPlan {
        version: 1,
        mode: "hybrid".into(),
        link: Link::lan(),
        failure_probability: 1e-12,
        layers: vec![
            layer("conv1", point(&a, vec![el(1, na), el(2, na), 2 * na as u64 - 1], 30)),
            layer("conv2", point(&b, vec![el(1, nb), el(-4, nb)], 8)),
            layer("conv3", point(&a, vec![el(2, na), el(100, na)], 4)),
            layer("fc", point(&a, Vec::new(), 0)),
        ],
        predicted_s: 1.0,
        single_set: None,
        single_set_predicted_s: 1.0,
        speedup_vs_single_set: 1.0,
    };
    let groups = hybrid_rotation_tables(&plan).unwrap();
    assert_eq!(groups.len(), 2);
    let ga = groups.iter().find(|g| g.params == a).unwrap();
    let gb = groups.iter().find(|g| g.params == b).unwrap();
    assert_eq!(ga.layers, vec!["conv1", "conv3"]);
    assert_eq!(gb.layers, vec!["conv2"]);
    assert_eq!(ga.table.rotations().into_iter().collect::<Vec<_>>(), vec![Rotation::Step(1), Rotation::Step(2), Rotation::Step(100), Rotation::Conjugate]);
    assert_eq!(ga.table.total(), 34, "per-layer rotation counts are kept");
    assert!(ga.table.entries.iter().all(|e| e.level == 1), "BFV layers run at their set's top level");
    assert_eq!(gb.table.rotations().into_iter().collect::<Vec<_>>(), vec![Rotation::Step(-4), Rotation::Step(1)]);

    let cost = KeySwitchCostModel::recorded();
    let report = hybrid_keyset_report(&plan, &cost).unwrap();
    assert_eq!(report.param_sets.len(), 2);
    let ra = report.param_sets.iter().find(|p| p.params == a.label()).unwrap();
    let chain_a = ChainParams::from_param_choice(&a).unwrap();
    let all = ra.report.strategy(Strategy::AllRequired).unwrap();
    let la = ra.report.strategy(Strategy::LevelAware).unwrap();
    let p2 = ra.report.strategy(Strategy::PowerOfTwo).unwrap();
    assert_eq!(all.keys, 4);
    assert_eq!(all.memory_bytes, 4 * chain_a.key_memory_bytes(1).unwrap());
    assert_eq!(la.memory_bytes, all.memory_bytes, "one level: level-aware is all-required");
    assert_eq!(p2.keys, 2 * 11 - 1 + 1, "+-2^i for 2048 slots and the row swap");
    let total = |s: Strategy| report.totals.iter().find(|t| t.strategy == s).unwrap().memory_bytes;
    assert_eq!(total(Strategy::AllRequired), report.param_sets.iter().map(|p| p.report.strategy(Strategy::AllRequired).unwrap().memory_bytes).sum::<u64>());
    assert!(p2.key_switches > all.key_switches, "step 100 = 128 - 32 + 4 needs three");
}

#[test]
fn fhe_resnet20_table_follows_the_level_plan() {
    let params = FheParams::joo2024_table1();
    assert_eq!((params.comp_level(), params.min_level(), params.chain.log_qp()), (16, 3, 1612));
    assert_eq!(params.chain.log_q_at(3), 184);
    assert_eq!(params.chain.log_q_at(16), 798);
    assert_eq!(params.chain.log_q_at(29), 1552);
    let lyc = FheParams::lycaon_logn16();
    assert!(lyc.chain.log_qp() <= 1772 && lyc.comp_level() >= 10);
    for p in [&params, &lyc] {
        let (table, plan) = fhe_rotation_table(&resnet20(ActivationKind::Aespa), p).unwrap();
        assert!(plan.bootstraps > 0);
        for e in &table.entries {
            assert!(e.level <= p.chain.max_level());
            match e.phase {
                Phase::Network => assert!(e.level >= p.min_level() && e.level <= p.comp_level(), "{e:?}"),
                Phase::Bootstrapping => {}
            }
        }
        for op in &plan.ops {
            assert!(op.level_out >= p.min_level() && op.level_in <= p.comp_level(), "{op:?}");
        }
        // conv1 reads the 32x32 input (gap 1): taps +-1, +-31, +-32, +-33 at the input level.
        let conv1: Vec<i64> = table
            .entries
            .iter()
            .filter(|e| e.layer == "conv1" && e.level == p.comp_level())
            .filter_map(|e| if let Rotation::Step(s) = e.rotation { Some(s) } else { None })
            .collect();
        for s in [1, -1, 31, -31, 32, -32, 33, -33] {
            assert!(conv1.contains(&s), "conv1 lacks tap {s}: {conv1:?}");
        }
        // Bootstrapping adds rotations (and conjugation) of its own.
        assert!(table.phase(Phase::Bootstrapping).total() > 0);
        assert!(table.phase(Phase::Bootstrapping).rotations().contains(&Rotation::Conjugate));
    }
    // A deeper activation needs more bootstrappings.
    let (_, relu) = fhe_rotation_table(&resnet20(ActivationKind::CompositeRelu), &params).unwrap();
    let (_, aespa) = fhe_rotation_table(&resnet20(ActivationKind::Aespa), &params).unwrap();
    assert!(relu.bootstraps > aespa.bootstraps);
    // SumSlots steps.
    assert_eq!(sum_slots_steps(3, 1024), vec![1024, 2048]);
    assert_eq!(sum_slots_steps(16, 1), vec![1, 2, 4, 8]);
    assert_eq!(sum_slots_steps(1, 5), Vec::<i64>::new());
    // An activation deeper than a bootstrapped ciphertext's levels is infeasible, clearly.
    let mut deep = resnet20(ActivationKind::Custom { stage_depths: vec![20] });
    deep.name = "deep".into();
    assert!(matches!(fhe_rotation_table(&deep, &params), Err(PlanError::Infeasible(_))));
}

#[test]
fn json_entry_point_reports_the_comparison_and_accepts_networks_and_plans() {
    let out: serde_json::Value = serde_json::from_str(&keyset_json(r#"{"params": "lycaon", "activation": "aespa"}"#).unwrap()).unwrap();
    assert_eq!(out["models"].as_array().unwrap().len(), 1);
    assert!(out["comparison"].as_array().unwrap().iter().any(|r| r["quantity"].as_str().unwrap().contains("rotation latency")));
    let network = serde_json::to_value(resnet20(ActivationKind::Aespa)).unwrap();
    let req = serde_json::json!({"params": "joo2024", "network": network, "table": true});
    let out: serde_json::Value = serde_json::from_str(&keyset_json(&req.to_string()).unwrap()).unwrap();
    assert!(out["keysets"]["table"].as_array().unwrap().len() > 100);
    assert_eq!(out["keysets"]["strategies"].as_array().unwrap().len(), 3);
    let custom = serde_json::to_value(FheParams::lycaon_logn16()).unwrap();
    let req = serde_json::json!({"params": custom, "activation": "composite_relu"});
    assert!(keyset_json(&req.to_string()).is_ok());
}
