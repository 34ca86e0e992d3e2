//! Bytes and rounds of one comparison per digit width (silent OT, 2^16 elements).
//!
//!     cargo run --release -p lycaon-mpc --example digit_sweep [bits...]

use lycaon_mpc::{
    channel::{run_pair, LinkModel},
    compare::less_than,
    party::{OtKind, Party, Role},
    Result,
};

fn main() -> Result<()> {
    let n = 1usize << 16;
    let widths: Vec<u32> = std::env::args().skip(1).map(|s| s.parse().expect("bits")).collect();
    for bits in if widths.is_empty() { vec![12, 22, 36] } else { widths } {
        for digit in 1..=5u32 {
            let mask = (1u64 << bits) - 1;
            let x: Vec<u64> = (0..n as u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) & mask).collect();
            let y: Vec<u64> = x.iter().map(|v| v.wrapping_mul(3) & mask).collect();
            let run = |role: Role, ch: &mut dyn lycaon_mpc::Channel| -> Result<lycaon_mpc::ChannelStats> {
                let mut p = Party::new(role, ch, OtKind::Silent)?;
                let _ = less_than(&mut p, &x[..1024], bits, 3)?; // warm the OT pool
                let before = p.channel().stats();
                less_than(&mut p, if role == Role::P0 { &x } else { &y }, bits, digit)?;
                Ok(p.channel().stats().since(&before))
            };
            let (a, b) = run_pair(LinkModel::UNLIMITED, |ch| run(Role::P0, ch), |ch| run(Role::P1, ch))?;
            let (a, b) = (a.0, b.0);
            println!("bits {bits:2} digit {digit}: {:6.1} B/cmp, {} rounds", (a.bytes_sent + b.bytes_sent) as f64 / n as f64, a.rounds.max(b.rounds));
        }
    }
    Ok(())
}
