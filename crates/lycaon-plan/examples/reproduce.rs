//! Prints the reproduction table against 000 and the Fig. 9 batch study.

fn main() -> Result<(), lycaon_plan::PlanError> {
    for r in lycaon_plan::simulate::reproduction()? {
        println!("{:55} paper {:>8.3} ours {:>8.3} ({:+6.1}%) real {:>8.3} {}", r.figure, r.paper, r.ours, 100.0 * r.deviation, r.ours_real_networks, r.unit);
    }
    for r in lycaon_plan::simulate::batch_study(&[1, 8, 64, 512])? {
        println!("batch {:>4} {:12} {:>10.4} s {:>10.4} J", r.batch, r.packing, r.latency_s, r.energy_j);
    }
    Ok(())
}
