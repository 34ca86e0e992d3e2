//! Prints the rotation-keyset report of the FHE ResNet-20 next to 004's Tables 3-4.
//!
//! `cargo run --release -p lycaon-plan --example keyset [joo2024|lycaon] [--calibrate]`
//! (`--calibrate` measures rlwe key switching at logN = 16 on this machine first: about ten
//! seconds and 1.6 GB for one Galois key of each preset.)

use lycaon_plan::keyset::{resnet20_keyset_report, ActivationKind, FheParams, KeySwitchCostModel, Strategy};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let preset = args.iter().find(|a| !a.starts_with("--")).map(String::as_str).unwrap_or("joo2024");
    let params = FheParams::by_name(preset)?;
    let cost = if args.iter().any(|a| a == "--calibrate") {
        let cal = KeySwitchCostModel::measure(&[(FheParams::lycaon_logn16().chain, vec![4, 12, 25]), (FheParams::joo2024_table1().chain, vec![3, 16, 29])], 3)?;
        println!("calibration: {}", serde_json::to_string_pretty(&cal)?);
        cal.model
    } else {
        KeySwitchCostModel::recorded()
    };
    let report = resnet20_keyset_report(&params, &[ActivationKind::Aespa, ActivationKind::CompositeRelu], &cost, false)?;
    println!("parameters: {} (log QP = {}, comp level {}, min level {})", params.name, params.chain.log_qp(), params.comp_level(), params.min_level());
    for m in &report.models {
        println!("\n{}: {} bootstrappings", m.activation, m.level_plan.bootstraps);
        for (label, r) in [("network", &m.network), ("with bootstrapping", &m.with_bootstrapping)] {
            println!("  {label}: {} rotations, {} distinct", r.rotations, r.distinct_rotations);
            for s in &r.strategies {
                println!(
                    "    {:<13} keys {:>4}  memory {:>9.2} GB  wire {:>9.2} GB  key switches {:>6}  rotation {:>8.2} s",
                    s.strategy.to_string(),
                    s.keys,
                    s.memory_bytes as f64 / 1e9,
                    s.wire_bytes as f64 / 1e9,
                    s.key_switches,
                    s.rotation_s
                );
            }
        }
        let la = m.network.strategy(Strategy::LevelAware).map(|s| s.keys_per_level.clone());
        println!("  level-aware keys per level: {la:?}");
    }
    println!("\n{:<55} {:>10} {:>10} {:>8}", "quantity", "004", "ours", "ratio");
    for r in &report.comparison {
        println!("{:<55} {:>10.2} {:>10.2} {:>8.3}", r.quantity, r.paper, r.ours, r.ratio);
    }
    for e in &report.explanation {
        println!("- {e}");
    }
    Ok(())
}
