//! Runs every layer of a plan (JSON from `lycaon plan --json` or `lycaon_plan::hybrid::plan_json`)
//! through the real encrypted layer and prints predicted against measured server time, client
//! time and noise budget. A benchmark, not a test: run it on an otherwise idle machine.
//!
//! cargo run --release -p lycaon-plan --example validate_plan -- PLAN.json [REPS]
use lycaon_nn::algorithm::Algorithm;
use lycaon_nn::harness::run_layer;
use lycaon_plan::hybrid::HybridPlan;
use rand::{RngExt, SeedableRng};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).expect("usage: validate_plan PLAN.json [REPS]");
    let reps: usize = args.get(2).map(|s| s.parse().expect("REPS")).unwrap_or(3);
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
        let run = run_layer(lp.as_ref(), &x, &w, reps).expect("run");
        assert!(run.exact, "layer {} decrypted wrongly", layer.name);
        let client = run.encrypt_s + run.decrypt_s;
        total_measured += run.server_s;
        total_predicted += layer.chosen.server_s;
        println!(
            "{:<20} {:<15} {:>10.4} {:>10.4} {:>6.2} {:>9.4} {:>9.4} {:>6.2} {:>8.1} {:>8.1}",
            layer.name,
            layer.chosen.algorithm,
            run.server_s,
            layer.chosen.server_s,
            layer.chosen.server_s / run.server_s,
            client,
            layer.chosen.client_s,
            layer.chosen.client_s / client,
            run.min_noise_budget,
            layer.chosen.noise_margin_bits
        );
    }
    println!("distinct layers: measured server {total_measured:.4} s, predicted {total_predicted:.4} s, ratio {:.2}", total_predicted / total_measured);
}
