//! Predicted (operation counts x calibrated per-operation costs) against measured server time,
//! for ResNet-20's layers and every algorithm that runs them, printed as a table:
//! cargo run --release -p lycaon-nn --example cost_check -- [N]
use lycaon_bfv::rlwe::{Parameters, ParametersLiteral};
use lycaon_nn::algorithm::Algorithm;
use lycaon_nn::calibrate::OpCosts;
use lycaon_nn::harness::run_layer;
use lycaon_nn::ConvShape;
use rand::{RngExt, SeedableRng};

fn main() {
    let n: usize = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(4096);
    let (q, p): (&[u32], &[u32]) = if n == 4096 { (&[36, 36], &[37]) } else { (&[54, 54], &[55]) };
    let batching = Parameters::new(ParametersLiteral::bfv_from_bits(n, q, p, 20).unwrap()).unwrap();
    let coeff = Parameters::new(ParametersLiteral::bfv_from_bits(n, &[55, 54], &[], 20).unwrap()).unwrap();
    let costs_b = OpCosts::measure(&batching).unwrap();
    let costs_c = OpCosts::measure(&coeff).unwrap();
    println!("{costs_b:?}\n{costs_c:?}");
    let layers = [
        ConvShape::conv(32, 3, 16, 3, 1),
        ConvShape::conv(32, 16, 16, 3, 1),
        ConvShape::conv(32, 16, 32, 3, 2),
        ConvShape::conv(16, 32, 32, 3, 1),
        ConvShape::conv(16, 32, 64, 3, 2),
        ConvShape::conv(8, 64, 64, 3, 1),
        ConvShape::fully_connected(64, 10),
    ];
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    println!("{:<28} {:<18} {:>10} {:>10} {:>7}", "layer", "algorithm", "measured", "predicted", "ratio");
    for shape in &layers {
        let x: Vec<i64> = (0..shape.input_len()).map(|_| rng.random_range(-8..8)).collect();
        let w: Vec<i64> = (0..shape.weight_len()).map(|_| rng.random_range(-8..8)).collect();
        for alg in Algorithm::ALL {
            let (params, costs) = if alg.needs_batching() { (&batching, &costs_b) } else { (&coeff, &costs_c) };
            let Ok(plan) = alg.build(shape, params) else { continue };
            let Ok(run) = run_layer(plan.as_ref(), &x, &w, 3) else { continue };
            let predicted = costs.serial_seconds(&plan.counts()) / costs.parallel_speedup;
            println!(
                "{:<28} {:<18} {:>10.4} {:>10.4} {:>7.2}",
                format!("{}x{} {}->{} k{} s{}", shape.h, shape.w, shape.c_in, shape.c_out, shape.kh, shape.stride),
                alg.to_string(),
                run.server_s,
                predicted,
                predicted / run.server_s
            );
        }
    }
}
