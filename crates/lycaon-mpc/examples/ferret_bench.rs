//! Ferret silent OT between two threads of this process: IKNP base COTs, Ferret's bootstrap
//! stages, then `count` random COTs (default 2^24), then `count` more into the same buffers (a
//! consumer that reuses its buffers, as the OT layer does, pays no fresh pages: on these
//! machines clearing 270 MB of new pages per party is a fifth of the first call's CPU). Prints
//! wall time and communication per COT, with and without the one-time setup.
//!
//! cargo run --release -p lycaon-mpc --example ferret_bench -- [count] [regular_128 | compact | ferret_2020]
//!
//! Both parties share this machine's cores, so the time is that of both halves together; over a
//! network each party has its own cores and the link adds about one round trip per main
//! iteration (about 10^7 COTs) plus the bytes printed here.

use std::time::{Duration, Instant};

use lycaon_mpc::channel::run_pair;
use lycaon_mpc::ferret::{FerretParameters, FerretReceiver, FerretSender};
use lycaon_mpc::iknp::{IknpReceiver, IknpSender};
use lycaon_mpc::{ChannelStats, CotReceiver, CotSender, LinkModel, MpcError, Result};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

fn os_rng() -> Result<ChaCha20Rng> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| MpcError::Crypto(e.to_string()))?;
    Ok(ChaCha20Rng::from_seed(seed))
}

/// One party's figures: the channel after setup and after extend, and the two durations.
struct Figures {
    setup: ChannelStats,
    total: ChannelStats,
    setup_time: Duration,
    extend_time: Duration,
    again_time: Duration,
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let count: usize = match args.next() {
        Some(a) => a.parse().map_err(|_| MpcError::InvalidArgument(format!("count must be a number, not {a}")))?,
        None => 1 << 24,
    };
    if count == 0 {
        return Err(MpcError::InvalidArgument("count must be at least 1".into()));
    }
    let params = match args.next().as_deref() {
        None | Some("regular_128") => FerretParameters::regular_128(),
        Some("ferret_2020") => FerretParameters::ferret_2020(),
        Some("compact") => FerretParameters::regular_128_compact(),
        Some(other) => return Err(MpcError::InvalidArgument(format!("unknown parameter set {other}"))),
    };
    let main = params.main();
    println!(
        "Ferret main n = {}, k = {}, t = {} (tree depth {}), {} bootstrap stage(s), {} base COTs from IKNP; {} threads",
        main.n,
        main.k,
        main.t,
        main.tree_depth(),
        params.bootstrap().len(),
        params.base_cots(),
        rayon::current_num_threads()
    );
    let wall = Instant::now();
    let (((sender, (delta, spot_q)), _), ((receiver, spot_t), _)) = run_pair(
        LinkModel::UNLIMITED,
        |ch| {
            let start = Instant::now();
            let mut base = IknpSender::new(ch, &mut os_rng()?)?;
            let mut ferret = FerretSender::setup(ch, &mut base, &params)?;
            let (setup, setup_time) = (ch.stats(), start.elapsed());
            let start = Instant::now();
            let mut q = ferret.extend(ch, count)?;
            let extend_time = start.elapsed();
            let total = ch.stats();
            let start = Instant::now();
            ferret.extend_into(ch, count, &mut q)?;
            let again_time = start.elapsed();
            // Spot check for the reader: the receiver's first and last COT.
            let spot = [q[0], q[count - 1]];
            Ok((Figures { setup, total, setup_time, extend_time, again_time }, (ferret.delta(), spot)))
        },
        |ch| {
            let start = Instant::now();
            let mut base = IknpReceiver::new(ch, &mut os_rng()?)?;
            let mut ferret = FerretReceiver::setup(ch, &mut base, &params)?;
            let (setup, setup_time) = (ch.stats(), start.elapsed());
            let start = Instant::now();
            let (mut b, mut t) = ferret.extend(ch, count)?;
            let extend_time = start.elapsed();
            let total = ch.stats();
            let start = Instant::now();
            ferret.extend_into(ch, count, &mut b, &mut t)?;
            let again_time = start.elapsed();
            Ok((Figures { setup, total, setup_time, extend_time, again_time }, [(b[0], t[0]), (b[count - 1], t[count - 1])]))
        },
    )?;
    // Setup and the first call (the second call's time is printed apart).
    let wall = wall.elapsed().saturating_sub(sender.again_time.max(receiver.again_time));
    for (q, (b, t)) in spot_q.iter().zip(spot_t.iter()) {
        if *t != q ^ if *b { delta } else { 0 } {
            return Err(MpcError::Crypto("spot check t = q ^ b * delta failed".into()));
        }
    }
    let setup_bytes = sender.setup.total_bytes();
    let extend_bytes = sender.total.since(&sender.setup).total_bytes();
    println!(
        "{count} COTs in {:.3} s wall (setup {:.3} s, extend {:.3} s)",
        wall.as_secs_f64(),
        sender.setup_time.as_secs_f64(),
        sender.extend_time.as_secs_f64()
    );
    println!("{count} more into the same buffers: {:.3} s (the slower party)", sender.again_time.max(receiver.again_time).as_secs_f64());
    println!(
        "  {:.1} ns per COT for extend, {:.1} ns including setup",
        1e9 * sender.extend_time.as_secs_f64() / count as f64,
        1e9 * wall.as_secs_f64() / count as f64
    );
    println!("  setup: {setup_bytes} bytes (IKNP base OTs and {} base COTs, code seed, bootstrap stages)", params.base_cots());
    let extend = sender.total.since(&sender.setup);
    println!("  extend: {extend_bytes} bytes in {} messages, {} rounds", extend.messages_sent + extend.messages_received, extend.rounds);
    println!(
        "  bits per COT: {:.4} excluding setup, {:.4} including setup",
        8.0 * extend_bytes as f64 / count as f64,
        8.0 * (setup_bytes + extend_bytes) as f64 / count as f64
    );
    let (s, r) = main.iteration_bytes();
    println!(
        "  one main iteration: {} bytes for {} new COTs = {:.4} bits per COT",
        s + r,
        main.yield_per_iteration(),
        8.0 * (s + r) as f64 / main.yield_per_iteration() as f64
    );
    Ok(())
}
