//! Tunes ResNet-20's linear layers and prints the plan's summary:
//! cargo run --release -p lycaon-plan --example tune -- [T_BITS] [WEIGHT_BITS]
use lycaon_plan::costs::CostTable;
use lycaon_plan::hybrid::{candidate_sets, tune, LayerRequest, ShapeSpec, TuneOptions};

fn main() {
    let args: Vec<u32> = std::env::args().skip(1).map(|s| s.parse().unwrap()).collect();
    let (t_bits, weight_bits) = (*args.first().unwrap_or(&20), *args.get(1).unwrap_or(&8));
    println!("{} candidate sets with keys, {} without", candidate_sets(t_bits, true).len(), candidate_sets(t_bits, false).len());
    let shapes = [(32, 3, 16, 3, 1), (32, 16, 16, 3, 1), (32, 16, 32, 3, 2), (16, 32, 32, 3, 1), (16, 32, 64, 3, 2), (8, 64, 64, 3, 1), (1, 64, 10, 1, 1)];
    let layers: Vec<LayerRequest> = shapes
        .iter()
        .enumerate()
        .map(|(i, &(h, c_in, c_out, k, stride))| LayerRequest { name: format!("l{i}"), shape: ShapeSpec { h, w: h, c_in, c_out, k, stride, pad: None, groups: 1 }, weight_bits, t_bits })
        .collect();
    let mut costs = CostTable::cached(CostTable::default_path()).unwrap();
    let began = std::time::Instant::now();
    let plan = tune(&layers, &mut costs, &TuneOptions::default(), false).unwrap();
    costs.save().unwrap();
    println!("tuned in {:.1} s ({} cost shapes)", began.elapsed().as_secs_f64(), costs.len());
    for l in &plan.layers {
        println!("{:<4} {:<16} {:<40} margin {:>5.1} worst {:>6.1} predicted {:.4} s (single set: {:?})", l.name, l.chosen.algorithm, l.chosen.params.label(), l.chosen.noise_margin_bits, l.chosen.noise_worst_case_bits, l.chosen.predicted_s, l.single_set_point.as_ref().map(|p| (p.algorithm.clone(), p.predicted_s)));
    }
    println!("total {:.3} s; single set {:?} {:.3} s; speedup {:.2}x", plan.predicted_s, plan.single_set.as_ref().map(|s| s.label()), plan.single_set_predicted_s, plan.speedup_vs_single_set);
}
