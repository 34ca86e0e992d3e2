//! Marginal bytes per element of the two-party ops on a 37-bit prime (silent OT, warm pool).
use lycaon_mpc::{
    channel::{run_pair, LinkModel},
    compare::private_bit_product,
    nonlinear::{drelu_bounded, relu_bounded, select, truncate_exact},
    party::{OtKind, Party, Role},
    ring::ShareRing,
    Result,
};

fn main() -> Result<()> {
    let n = 1usize << 16;
    let p = std::env::args().nth(1).map_or(137_438_822_401u64, |s| s.parse().unwrap());
    let ring = ShareRing::prime(p)?;
    let s: Vec<u64> = (0..n as u64).map(|i| ring.reduce(i.wrapping_mul(0x9e37_79b9_7f4a_7c15))).collect();
    let bits: Vec<bool> = (0..n).map(|i| i % 3 == 0).collect();
    for op in ["warm", "drelu_bounded", "select", "relu_bounded", "truncate_exact12", "bitprod", "bitprod"] {
        let run = |role: Role, ch: &mut dyn lycaon_mpc::Channel| -> Result<lycaon_mpc::ChannelStats> {
            let mut p = Party::new(role, ch, OtKind::Silent)?;
            relu_bounded(&mut p, ring, &s)?;
            let before = p.channel().stats();
            match op {
                "drelu_bounded" => { drelu_bounded(&mut p, ring, &s)?; }
                "select" => { select(&mut p, ring, &bits, &s)?; }
                "relu_bounded" | "warm" => { relu_bounded(&mut p, ring, &s)?; }
                "truncate_exact12" => { truncate_exact(&mut p, ring, &s, 12)?; }
                _ => { private_bit_product(&mut p, ring, &bits)?; }
            }
            Ok(p.channel().stats().since(&before))
        };
        let ((a, _), (b, _)) = run_pair(LinkModel::UNLIMITED, |ch| run(Role::P0, ch), |ch| run(Role::P1, ch))?;
        println!("{op:18} {:6.2} B/elt (p0 {:.2}, p1 {:.2}) {} rounds", (a.bytes_sent + b.bytes_sent) as f64 / n as f64, a.bytes_sent as f64 / n as f64, b.bytes_sent as f64 / n as f64, a.rounds.max(b.rounds));
    }
    Ok(())
}
