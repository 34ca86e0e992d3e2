//! Runs every layer of a plan (JSON from `lycaon plan --json` or `lycaon_plan::hybrid::plan_json`)
//! through the real encrypted layer and prints predicted against measured server time, client
//! time and noise budget. A benchmark, not a test: run it on an otherwise idle machine.
//!
//! With `--recalibrate` the operation costs are measured again in this process and the plan's
//! choices repriced with them, so that prediction and measurement see the same machine state
//! (the plan's own calibration may be hours old).
//!
//! cargo run --release -p lycaon-plan --example validate_plan -- PLAN.json [REPS] [--recalibrate]
use lycaon_nn::algorithm::Algorithm;
use lycaon_nn::harness::run_layer;
use lycaon_plan::costs::CostTable;
use lycaon_plan::hybrid::{price, HybridPlan, LayerRequest, TuneOptions};
use rand::{RngExt, SeedableRng};

fn main() {
    let mut args: Vec<String> = std::env::args().collect();
    let recalibrate = args.iter().any(|a| a == "--recalibrate");
    args.retain(|a| a != "--recalibrate");
    let path = args.get(1).expect("usage: validate_plan PLAN.json [REPS] [--recalibrate]");
    let reps: usize = args.get(2).map(|s| s.parse().expect("REPS")).unwrap_or(3);
    let mut costs = CostTable::in_memory();
    let plan: HybridPlan = serde_json::from_str(&std::fs::read_to_string(path).expect("read plan")).expect("parse plan");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let mut seen = std::collections::BTreeSet::new();
    println!("{:<20} {:<15} {:>10} {:>10} {:>6} {:>9} {:>9} {:>6} {:>8} {:>8}", "layer", "algorithm", "server s", "predicted", "ratio", "client s", "predicted", "ratio", "budget", "margin");
    let (mut total_measured, mut total_predicted) = (0.0, 0.0);
    for layer in &plan.layers {
        let key = format!("{:?}{}{:?}", layer.shape, layer.chosen.algorithm, layer.chosen.params);
        if !seen.insert(key) {
            continue; // identical layers measure the same
        }
        let params = layer.chosen.params.parameters().expect("params");
        let algorithm = Algorithm::parse(&layer.chosen.algorithm).expect("algorithm");
        let shape = layer.shape.conv_shape();
        let lp = algorithm.build(&shape, &params).expect("plan");
        let wmax = 1i64 << (layer.weight_bits - 1);
        let t = params.plaintext_modulus().unwrap().value() as i64;
        let x: Vec<i64> = (0..shape.input_len()).map(|_| rng.random_range(-(t / 2)..t / 2)).collect();
        let w: Vec<i64> = (0..shape.weight_len()).map(|_| rng.random_range(-wmax + 1..wmax)).collect();
        let mut chosen = layer.chosen.clone();
        if recalibrate {
            costs.calibrate(&params).expect("calibrate");
            let request = LayerRequest { name: layer.name.clone(), shape: layer.shape.clone(), weight_bits: layer.weight_bits, t_bits: layer.t_bits };
            let options = TuneOptions { failure_probability: plan.failure_probability, ..TuneOptions::default() };
            chosen = price(&request, algorithm, &layer.chosen.params, &costs, &options).expect("price").expect("the plan's point is priceable");
        }
        // Millisecond layers need many repetitions for a stable median: at least half a second.
        let probe = run_layer(lp.as_ref(), &x, &w, 1).expect("run");
        let reps = reps.max((0.5 / probe.server_s.max(1e-6)).ceil().min(200.0) as usize);
        let run = run_layer(lp.as_ref(), &x, &w, reps).expect("run");
        assert!(run.exact, "layer {} decrypted wrongly", layer.name);
        let client = run.encrypt_s + run.decrypt_s;
        total_measured += run.server_s;
        total_predicted += chosen.server_s;
        println!(
            "{:<20} {:<15} {:>10.4} {:>10.4} {:>6.2} {:>9.4} {:>9.4} {:>6.2} {:>8.1} {:>8.1}",
            layer.name,
            layer.chosen.algorithm,
            run.server_s,
            chosen.server_s,
            chosen.server_s / run.server_s,
            client,
            chosen.client_s,
            chosen.client_s / client,
            run.min_noise_budget,
            chosen.noise_margin_bits
        );
    }
    println!("distinct layers: measured server {total_measured:.4} s, predicted {total_predicted:.4} s, ratio {:.2}", total_predicted / total_measured);
}
