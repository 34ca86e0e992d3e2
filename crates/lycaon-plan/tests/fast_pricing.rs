//! The planner prices a layer by building each algorithm's plan once per (n, t) and
//! re-parameterising it for every moduli chain; this must give exactly the design points of
//! building the plan for every parameter set ([`price`]), on random layer shapes.

use std::collections::BTreeMap;

use lycaon_nn::algorithm::Algorithm;
use lycaon_nn::calibrate::OpCosts;
use lycaon_plan::costs::CostTable;
use lycaon_plan::hybrid::{candidate_sets, design_space, price, LayerRequest, ParamChoice, ShapeSpec, TuneOptions};

/// A cost table with made-up costs for every parameter shape of the search space (no timing, so
/// the test is deterministic and fast).
fn fixed_costs(dir: &std::path::Path) -> CostTable {
    let threads = rayon::current_num_threads().max(1);
    let mut entries = BTreeMap::new();
    for (i, n) in [2048usize, 4096, 8192, 16384].into_iter().enumerate() {
        for q in 1..=4usize {
            for p in 0..=1usize {
                for d in 1..=q {
                    let s = (n as f64) * (q + p) as f64 * 1e-9 * (1.0 + 0.1 * d as f64 + 0.01 * i as f64);
                    let keyed = (p > 0).then_some(20.0 * s);
                    let costs = OpCosts {
                        hoisted_decomposition_s: keyed,
                        rotation_s: keyed.map(|r| 1.5 * r),
                        plain_mult_s: 3.0 * s,
                        lazy_scalar_mac_s: 0.5 * s,
                        lazy_scalar_mac_fanout_s: 0.6 * s,
                        addition_s: 0.3 * s,
                        mod_switch_s: 4.0 * s,
                        encrypt_s: 9.0 * s,
                        decrypt_s: 5.0 * s,
                        parallel_speedup: 1.0 + 0.25 * (threads as f64 - 1.0),
                        threads,
                    };
                    entries.insert(format!("n{n}-q{q}-p{p}-d{d}-threads{threads}"), costs);
                }
            }
        }
    }
    let path = dir.join("op-costs-v2.json");
    std::fs::write(&path, serde_json::to_string(&entries).unwrap()).unwrap();
    CostTable::cached(path).unwrap()
}

#[test]
fn shared_plans_price_like_one_plan_per_parameter_set() {
    let dir = std::env::temp_dir().join(format!("lycaon-fast-pricing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut costs = fixed_costs(&dir);
    let options = TuneOptions::default();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |m: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % m
    };
    let mut layers: Vec<LayerRequest> = (0..4)
        .map(|i| {
            let h = [4usize, 8, 16][next(3) as usize];
            let k = [1usize, 3][next(2) as usize];
            let shape = ShapeSpec { h, w: h, c_in: 1 + next(12) as usize, c_out: 1 + next(12) as usize, k, stride: 1 + next(2) as usize, pad: None, groups: 1 };
            LayerRequest { name: format!("random{i}"), shape, weight_bits: 3 + next(8) as u32, t_bits: 18 + next(20) as u32 }
        })
        .collect();
    layers.push(LayerRequest {
        name: "fc".into(),
        shape: ShapeSpec { h: 1, w: 1, c_in: 100, c_out: 10, k: 1, stride: 1, pad: None, groups: 1 },
        weight_bits: 8,
        t_bits: 25,
    });
    for layer in &layers {
        let fast = design_space(layer, &mut costs, &options, false).unwrap();
        let mut direct = Vec::new();
        for algorithm in Algorithm::ALL {
            // The tuner's search points: per cost class, the set with the largest modulus.
            let mut best: BTreeMap<(usize, usize, usize, usize), ParamChoice> = BTreeMap::new();
            for s in candidate_sets(layer.t_bits, algorithm.needs_batching()) {
                let e = best.entry((s.n, s.q_bits.len(), s.p_bits.len(), s.digits)).or_insert_with(|| s.clone());
                if s.log_q() > e.log_q() {
                    *e = s;
                }
            }
            for set in best.into_values() {
                if set.parameters().is_ok() {
                    direct.extend(price(layer, algorithm, &set, &costs, &options).unwrap());
                }
            }
        }
        assert!(!direct.is_empty(), "{}", layer.name);
        // Debug prints every f64 to the last bit: the points must be identical, in order.
        assert_eq!(format!("{fast:?}"), format!("{direct:?}"), "layer {} ({:?}, t {} bits)", layer.name, layer.shape, layer.t_bits);
    }
    std::fs::remove_dir_all(&dir).ok();
}
