//! IKNP random correlated OT over an in-memory channel: 2^20 COTs, wall time and bytes per OT,
//! then chosen-message OT and correlated OT built on top. Run with
//! `cargo run --release -p lycaon-mpc --example ot_bench [log2 count]`.

use std::time::Instant;

use lycaon_mpc::base_ot::os_seeded_rng;
use lycaon_mpc::channel::run_pair;
use lycaon_mpc::iknp::{IknpReceiver, IknpSender};
use lycaon_mpc::ot::{OtReceiver, OtSender};
use lycaon_mpc::{CotReceiver, CotSender, LinkModel, Result};

fn main() -> Result<()> {
    let log_count: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20);
    let count = 1usize << log_count;
    println!("threads: {}", rayon::current_num_threads());

    let start = Instant::now();
    let (((setup_s, extend_s, sender_stats), _), (receiver_stats, _)) = run_pair(
        LinkModel::UNLIMITED,
        |ch| {
            let t0 = Instant::now();
            let mut s = IknpSender::new(ch, &mut os_seeded_rng()?)?;
            let setup = t0.elapsed();
            let before = ch.stats();
            let t1 = Instant::now();
            let q = s.extend(ch, count)?;
            let extend = t1.elapsed();
            assert_eq!(q.len(), count);
            Ok((setup, extend, ch.stats().since(&before)))
        },
        |ch| {
            let mut r = IknpReceiver::new(ch, &mut os_seeded_rng()?)?;
            let before = ch.stats();
            let (b, _) = r.extend(ch, count)?;
            assert_eq!(b.len(), count);
            Ok(ch.stats().since(&before))
        },
    )?;
    let total = start.elapsed();
    let bytes = sender_stats.total_bytes();
    println!("IKNP setup (128 Chou-Orlandi base OTs): {:.1} ms", setup_s.as_secs_f64() * 1e3);
    println!(
        "IKNP 2^{log_count} random COTs: {:.1} ms extend ({:.1} M COT/s), {:.1} ms with setup; {} bytes = {:.3} bytes/COT (receiver -> sender {}, sender -> receiver {})",
        extend_s.as_secs_f64() * 1e3,
        count as f64 / extend_s.as_secs_f64() / 1e6,
        total.as_secs_f64() * 1e3,
        bytes,
        bytes as f64 / count as f64,
        receiver_stats.bytes_sent,
        sender_stats.bytes_sent,
    );

    // Chosen-message OT and correlated OT over the same extension, 2^(log_count - 2) each.
    let n = count / 4;
    let messages: Vec<(u128, u128)> = (0..n as u128).map(|i| (i, !i)).collect();
    let choices: Vec<bool> = (0..n).map(|i| i % 3 == 0).collect();
    let correlations: Vec<u64> = (0..n as u64).collect();
    let start = Instant::now();
    let (((chosen_s, correlated_s), _), _) = run_pair(
        LinkModel::UNLIMITED,
        |ch| {
            let mut s = OtSender::new(IknpSender::new(ch, &mut os_seeded_rng()?)?);
            let t0 = Instant::now();
            s.send_chosen(ch, &messages)?;
            let chosen = t0.elapsed();
            let t1 = Instant::now();
            s.send_correlated(ch, &correlations, 1 << 32)?;
            Ok((chosen, t1.elapsed()))
        },
        |ch| {
            let mut r = OtReceiver::new(IknpReceiver::new(ch, &mut os_seeded_rng()?)?);
            let out = r.receive_chosen(ch, &choices)?;
            assert!(out.iter().enumerate().all(|(i, &m)| m == if choices[i] { !(i as u128) } else { i as u128 }));
            r.receive_correlated(ch, &choices, 1 << 32)
        },
    )?;
    println!(
        "2^{} chosen-message OTs: {:.1} ms (sender's view); 2^{} correlated OTs mod 2^32: {:.1} ms; both with setup {:.1} ms",
        log_count - 2,
        chosen_s.as_secs_f64() * 1e3,
        log_count - 2,
        correlated_s.as_secs_f64() * 1e3,
        start.elapsed().as_secs_f64() * 1e3,
    );
    Ok(())
}
