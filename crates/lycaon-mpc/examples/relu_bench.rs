//! ReLU on 2^16 shared elements, both parties in one process: wall time, bytes and rounds per
//! run, with IKNP and with silent OT, on Z_2^64, on Z_2^37 (Cheetah's ring) and on a 20-bit prime
//! field.
//!
//!     cargo run --release -p lycaon-mpc --example relu_bench [log2 elements] [reps] [iknp|silent] [z64|z37|p20]

use std::time::Instant;

use lycaon_mpc::{
    channel::{run_pair, LinkModel},
    nonlinear::relu,
    party::{OtKind, Party, Role},
    ring::ShareRing,
    Result,
};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let log_n: u32 = args.get(1).map_or(16, |s| s.parse().expect("log2 elements"));
    let reps: usize = args.get(2).map_or(3, |s| s.parse().expect("reps"));
    let n = 1usize << log_n;
    let only_ot = args.get(3).cloned().unwrap_or_default();
    let only_ring = args.get(4).cloned().unwrap_or_default();
    for (ring_name, ring) in [("z64", ShareRing::power_of_two(64)?), ("z37", ShareRing::power_of_two(37)?), ("p20", ShareRing::prime(1_032_193)?)] {
        for (ot_name, kind) in [("iknp", OtKind::Iknp), ("silent", OtKind::Silent)] {
            if (!only_ot.is_empty() && only_ot != ot_name) || (!only_ring.is_empty() && only_ring != ring_name) {
                continue;
            }
            let shares: Vec<u64> = (0..n as u64).map(|i| ring.reduce(i.wrapping_mul(0x9e37_79b9_7f4a_7c15))).collect();
            let run = |role: Role, ch: &mut dyn lycaon_mpc::Channel| -> Result<(f64, f64, lycaon_mpc::ChannelStats)> {
                let t0 = Instant::now();
                let mut p = Party::new(role, ch, kind)?;
                let setup = t0.elapsed().as_secs_f64();
                let before = p.channel().stats();
                let t1 = Instant::now();
                for _ in 0..reps {
                    relu(&mut p, ring, &shares)?;
                }
                Ok((setup, t1.elapsed().as_secs_f64() / reps as f64, p.channel().stats().since(&before)))
            };
            let ((a, _), (b, _)) = run_pair(LinkModel::UNLIMITED, |ch| run(Role::P0, ch), |ch| run(Role::P1, ch))?;
            let bytes = (a.2.bytes_sent + b.2.bytes_sent) as f64 / reps as f64;
            println!(
                "{ring:?} {kind:?}: setup {:.3} s, ReLU {:.3} s, {:.1} B/element, {} rounds",
                a.0.max(b.0),
                a.1.max(b.1),
                bytes / n as f64,
                a.2.rounds.max(b.2.rounds) / reps as u64
            );
        }
    }
    Ok(())
}
