//! Prints the rotation-keyset report of the FHE ResNet-20 next to 004's Tables 3-4.
//!
//! `cargo run --release -p lycaon-plan --example keyset [joo2024|lycaon] [--calibrate]`
//! (`--calibrate` measures rlwe key switching at logN = 16 on this machine first: about ten
//! seconds and 1.6 GB for one Galois key of each preset.)
//!
//! The measuring lives here, not in lycaon-plan: it needs a real secret key and Galois key, and
//! the planner never holds a key. It times the backend's limb NTT and product, then real
//! rotations, and hands the numbers to [`KeySwitchCostModel::fit`].

use std::sync::Arc;
use std::time::Instant;

use lycaon_math::Sampler;
use lycaon_plan::keyset::{
    resnet20_keyset_report, ActivationKind, Calibration, CalibrationPoint, ChainParams, FheParams, KeySwitchCostModel, KeySwitchCounts, Rotation, Strategy,
};
use lycaon_rlwe::{GaloisKeys, Parameters, SecretKey};

type AnyError = Box<dyn std::error::Error>;

fn median_seconds(reps: usize, mut f: impl FnMut() -> Result<(), AnyError>) -> Result<f64, AnyError> {
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let start = Instant::now();
        f()?;
        times.push(start.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// Times the per-limb NTT and product of the backend at the first chain's n, then real rlwe
/// rotations (one Galois key at the top level, fresh ciphertexts at each level) for every
/// (chain, levels), and fits the model to them. All chains must share n.
fn measure(chains: &[(ChainParams, Vec<usize>)], reps: usize) -> Result<Calibration, AnyError> {
    let (first, _) = chains.first().ok_or("calibration needs at least one parameter set")?;
    if chains.iter().any(|(c, _)| c.log_n != first.log_n) {
        return Err("calibration chains must share the ring degree".into());
    }
    let reps = reps.max(1);
    let mut sampler = Sampler::from_os()?;
    let (ntt_limb_s, elementwise_limb_s) = {
        let params: Arc<Parameters> = Parameters::new(first.rlwe_literal()?)?;
        let backend = params.backend().clone();
        let limbs = params.qp().len().min(8);
        let basis = lycaon_math::RnsBasis::from_plans(params.qp().plans()[..limbs].to_vec())?;
        let a = sampler.uniform_poly(&basis);
        let b = sampler.uniform_poly(&basis);
        let coeff = backend.intt(a.clone())?;
        let ntt = median_seconds(reps.max(5), || {
            std::hint::black_box(backend.ntt(coeff.clone())?);
            Ok(())
        })?;
        let product = median_seconds(reps.max(5), || {
            let mut x = a.clone();
            backend.mul_assign(&mut x, &b)?;
            std::hint::black_box(x);
            Ok(())
        })?;
        (ntt / limbs as f64, product / limbs as f64)
    };
    let mut points = Vec::new();
    for (chain, levels) in chains {
        let params: Arc<Parameters> = Parameters::new(chain.rlwe_literal()?)?;
        let sk = SecretKey::generate(&params, &mut sampler)?;
        let g = Rotation::Step(1).galois_element(params.n());
        let keys = GaloisKeys::generate(&sk, &[g], &mut sampler)?;
        let label = format!("{} limbs of QP, {} digits", chain.limbs_at(chain.max_level()), chain.digits);
        for &level in levels {
            let counts = KeySwitchCounts::at(chain, level)?;
            let ct = lycaon_rlwe::encrypt_zero_symmetric(&sk, level, &mut sampler)?.expand(&params)?;
            let measured_s = median_seconds(reps, || {
                std::hint::black_box(lycaon_rlwe::keyswitch::automorphism(&params, &ct, g, &keys)?);
                Ok(())
            })?;
            points.push(CalibrationPoint { params: label.clone(), level, counts, measured_s, model_s: 0.0 });
        }
    }
    Ok(KeySwitchCostModel::fit(first.log_n, ntt_limb_s, elementwise_limb_s, points)?)
}

fn main() -> Result<(), AnyError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let preset = args.iter().find(|a| !a.starts_with("--")).map(String::as_str).unwrap_or("joo2024");
    let params = FheParams::by_name(preset)?;
    let cost = if args.iter().any(|a| a == "--calibrate") {
        let cal = measure(&[(FheParams::lycaon_logn16().chain, vec![4, 12, 25]), (FheParams::joo2024_table1().chain, vec![3, 16, 29])], 3)?;
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
