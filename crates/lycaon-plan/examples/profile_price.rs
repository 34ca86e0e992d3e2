//! Time of pricing one layer per algorithm (plan construction, counts, noise, bytes).
use lycaon_plan::costs::CostTable;
use lycaon_plan::hybrid::{candidate_sets, price, LayerRequest, ShapeSpec, TuneOptions};
use lycaon_nn::algorithm::Algorithm;

fn main() {
    let layer = LayerRequest { name: "l".into(), shape: ShapeSpec { h: 32, w: 32, c_in: 16, c_out: 16, k: 3, stride: 1, pad: None, groups: 1 }, weight_bits: 12, t_bits: 33 };
    let mut costs = CostTable::cached(CostTable::default_path()).unwrap();
    let opts = TuneOptions::default();
    for alg in Algorithm::ALL {
        let sets = candidate_sets(33, alg.needs_batching());
        let t = std::time::Instant::now();
        let mut ok = 0;
        for s in &sets {
            costs.calibrate(&s.parameters().unwrap()).unwrap();
            if let Ok(Some(_)) = price(&layer, alg, s, &costs, &opts) { ok += 1; }
        }
        println!("{alg:<18} {} sets, {ok} priced, {:.3} s", sets.len(), t.elapsed().as_secs_f64());
    }
}
