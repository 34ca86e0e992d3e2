//! Tests of Ferret over an ideal (test-only) base COT source.

use rand_chacha::ChaCha20Rng;
use rand_core::{Rng, SeedableRng};
use rayon::prelude::*;

use super::*;
use crate::channel::{run_pair, ChannelStats, LinkModel};

/// TEST ONLY, NOT A PROTOCOL: an "ideal" base COT source with no communication at all, both ends
/// reading the same ChaCha stream from a shared seed (so each end knows everything). It stands in
/// for IKNP so that Ferret can be tested on its own.
struct IdealCotSender {
    rng: ChaCha20Rng,
    delta: Block,
}

struct IdealCotReceiver {
    rng: ChaCha20Rng,
    delta: Block,
}

fn ideal_cot_pair(seed: u64) -> (IdealCotSender, IdealCotReceiver) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let delta = mpcot::random_block(&mut rng) | 1; // the lowest bit set, as IKNP's
    (IdealCotSender { rng: rng.clone(), delta }, IdealCotReceiver { rng, delta })
}

impl CotSender for IdealCotSender {
    fn delta(&self) -> Block {
        self.delta
    }

    fn extend(&mut self, _: &mut dyn Channel, count: usize) -> Result<Vec<Block>> {
        Ok((0..count).map(|_| ideal_next(&mut self.rng).0).collect())
    }
}

impl CotReceiver for IdealCotReceiver {
    fn extend(&mut self, _: &mut dyn Channel, count: usize) -> Result<(Vec<bool>, Vec<Block>)> {
        Ok((0..count).map(|_| ideal_next(&mut self.rng)).map(|(q, b)| (b, q ^ if b { self.delta } else { 0 })).unzip())
    }
}

fn ideal_next(rng: &mut ChaCha20Rng) -> (Block, bool) {
    (mpcot::random_block(rng), rng.next_u32() & 1 == 1)
}

/// What one side saw: its outputs of each extend call and the channel counters after setup and
/// after each call.
struct SenderRun {
    delta: Block,
    outputs: Vec<Vec<Block>>,
    stats: Vec<ChannelStats>,
    iterations: u64,
}

struct ReceiverRun {
    outputs: Vec<(Vec<bool>, Vec<Block>)>,
    stats: Vec<ChannelStats>,
}

/// Sets Ferret up over an ideal base and calls extend with each of `counts`. `seed`: None for
/// OS randomness (as in use), Some for a reproducible run.
fn run(params: &FerretParameters, counts: &[usize], seed: Option<u64>) -> (SenderRun, ReceiverRun) {
    let (mut base_s, mut base_r) = ideal_cot_pair(99);
    let rng = |party: u64| seed.map_or_else(|| os_seeded_rng().unwrap(), |s| ChaCha20Rng::seed_from_u64(2 * s + party));
    let ((s, _), (r, _)) = run_pair(
        LinkModel::UNLIMITED,
        |ch| {
            let mut ferret = FerretSender::setup_with_rng(ch, &mut base_s, params, rng(0))?;
            let mut stats = vec![ch.stats()];
            let mut outputs = Vec::new();
            for &count in counts {
                outputs.push(ferret.extend(ch, count)?);
                stats.push(ch.stats());
            }
            Ok(SenderRun { delta: ferret.delta(), outputs, stats, iterations: ferret.iterations() })
        },
        |ch| {
            let mut ferret = FerretReceiver::setup_with_rng(ch, &mut base_r, params, rng(1))?;
            let mut stats = vec![ch.stats()];
            let mut outputs = Vec::new();
            for &count in counts {
                outputs.push(ferret.extend(ch, count)?);
                stats.push(ch.stats());
            }
            Ok(ReceiverRun { outputs, stats })
        },
    )
    .unwrap();
    (s, r)
}

/// Every output satisfies t = q ^ b delta; returns the number of ones among the choice bits.
fn check_correlation(delta: Block, q: &[Block], b: &[bool], t: &[Block]) -> usize {
    assert_eq!((q.len(), b.len()), (t.len(), t.len()));
    let bad = q.par_iter().zip(b.par_iter()).zip(t.par_iter()).filter(|((&q, &b), &t)| t != q ^ if b { delta } else { 0 }).count();
    assert_eq!(bad, 0, "{bad} of {} outputs break t = q ^ b * delta", q.len());
    // The lowest bits: 0 in every q, the choice bit in every t (what spares the receiver's
    // code a second gather for its bits).
    assert_eq!(delta & 1, 1);
    assert!(q.par_iter().all(|&q| q & 1 == 0), "a sender block with its lowest bit set");
    assert!(t.par_iter().zip(b.par_iter()).all(|(&t, &b)| (t & 1 == 1) == b), "a receiver block whose lowest bit is not its choice bit");
    b.par_iter().filter(|&&b| b).count()
}

#[test]
fn mpcot_gives_one_point_per_block() {
    for (n, t) in [(64, 4), (1000, 7), (4096, 64), (10, 5), (3, 1)] {
        let layout = RegularLayout::new(n, t);
        let primitives = TreePrimitives::new();
        let (mut base_s, mut base_r) = ideal_cot_pair(n as u64);
        let delta = base_s.delta;
        let cots = base_s.extend(&mut crate::channel::MemoryChannel::pair().0, layout.cots()).unwrap();
        let (choices, tcots) = base_r.extend(&mut crate::channel::MemoryChannel::pair().0, layout.cots()).unwrap();
        let ((v, _), ((e, w), _)) = run_pair(
            LinkModel::UNLIMITED,
            |ch| {
                let mut v = vec![0u128; n];
                let seeds = mpcot::draw_seeds(&layout, &mut ChaCha20Rng::seed_from_u64(1));
                mpcot::send(ch, &layout, 0..t, &primitives, delta, &cots, &seeds, &mut v, |_, _| ())?;
                Ok(v)
            },
            |ch| {
                let alphas = mpcot::draw_noise_positions(&layout, &mut ChaCha20Rng::seed_from_u64(2));
                mpcot::receiver_choose(ch, &layout, &choices, &alphas)?;
                let (mut w, mut e) = (vec![0u128; n], vec![false; n]);
                mpcot::receiver_finish(ch, &layout, 0..t, &primitives, &alphas, &tcots, &mut w, &mut e)?;
                Ok((e, w))
            },
        )
        .unwrap();
        for j in 0..t {
            let range = layout.block_start(j)..layout.block_start(j) + layout.block_size(j);
            assert_eq!(e[range].iter().filter(|&&x| x).count(), 1, "block {j} of (n, t) = ({n}, {t})");
        }
        assert_eq!(layout.block_start(t - 1) + layout.block_size(t - 1), n);
        check_correlation(delta, &v, &e, &w);
        assert!(v.iter().all(|&x| x != 0));
    }
}

#[test]
fn toy_outputs_are_correlated_balanced_and_continue_across_calls() {
    let params = FerretParameters::toy_insecure();
    // Crossing several main iterations, with calls smaller and larger than one iteration.
    let counts = [1, 0, 5_000, 40_000, 17, 23_456];
    let (s, r) = run(&params, &counts, None);
    assert_eq!(s.delta, ideal_cot_pair(99).0.delta, "Ferret's delta is the base source's");
    let q: Vec<Block> = s.outputs.concat();
    let b: Vec<bool> = r.outputs.iter().flat_map(|(b, _)| b.iter().copied()).collect();
    let t: Vec<Block> = r.outputs.iter().flat_map(|(_, t)| t.iter().copied()).collect();
    for (i, &count) in counts.iter().enumerate() {
        assert_eq!((s.outputs[i].len(), r.outputs[i].0.len(), r.outputs[i].1.len()), (count, count, count));
    }
    let ones = check_correlation(s.delta, &q, &b, &t);
    let fraction = ones as f64 / q.len() as f64;
    assert!((0.47..0.53).contains(&fraction), "choice bits are {fraction} ones");
    // No output is served twice (or kept as reserve and served).
    let mut sorted = q.clone();
    sorted.par_sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), q.len(), "repeated outputs");
    let total: usize = counts.iter().sum();
    let main = params.main();
    let buffered_after_setup = params.bootstrap()[0].n - main.consumed();
    let expected_iterations = (total.saturating_sub(buffered_after_setup)).div_ceil(main.yield_per_iteration());
    assert_eq!(s.iterations, expected_iterations as u64);
}

#[test]
fn consecutive_calls_give_the_same_stream_as_one_call() {
    let params = FerretParameters::toy_insecure();
    let (s1, r1) = run(&params, &[3, 20_000, 31_000], Some(5));
    let (s2, r2) = run(&params, &[51_003], Some(5));
    assert_eq!(s1.outputs.concat(), s2.outputs[0]);
    let b1: Vec<bool> = r1.outputs.iter().flat_map(|(b, _)| b.iter().copied()).collect();
    let t1: Vec<Block> = r1.outputs.iter().flat_map(|(_, t)| t.iter().copied()).collect();
    assert_eq!((b1, t1), r2.outputs[0]);
}

#[test]
fn bytes_match_the_formula() {
    let params = FerretParameters::toy_insecure();
    let boot = params.bootstrap()[0];
    let main = *params.main();
    let after_setup = boot.n - main.consumed();
    let layout = main.layout();
    let h = layout.depth;
    let segment = |trees: usize| (16 * trees * (h + 1), (trees * h).div_ceil(8));
    // Call 1 empties the setup's leftovers (no traffic); call 2 runs the smallest segment; call
    // 3 the rest of that iteration, a whole one, and the smallest segment of a third.
    let smallest = main.t.div_ceil(MIN_SEGMENT);
    let counts = [after_setup, 1, 2 * main.yield_per_iteration()];
    let (s, r) = run(&params, &counts, None);
    let (boot_s, boot_r) = boot.iteration_bytes();
    let (main_s, main_r) = main.iteration_bytes();
    assert_eq!((main_s, main_r), segment(main.t));
    // Setup: the code seed, then one bootstrap iteration (the ideal base sends nothing).
    assert_eq!((s.stats[0].bytes_sent, s.stats[0].bytes_received), ((16 + boot_s) as u64, boot_r as u64));
    assert_eq!((r.stats[0].bytes_sent, r.stats[0].bytes_received), (boot_r as u64, (16 + boot_s) as u64));
    let deltas: Vec<ChannelStats> = s.stats.windows(2).map(|w| w[1].since(&w[0])).collect();
    assert_eq!(deltas[0], ChannelStats::default());
    let (first_s, first_r) = segment(smallest);
    assert_eq!((deltas[1].bytes_sent, deltas[1].bytes_received, deltas[1].messages_sent, deltas[1].rounds), (first_s as u64, first_r as u64, 1, 1));
    let (rest_s, rest_r) = segment(main.t - smallest);
    assert_eq!((deltas[2].bytes_sent, deltas[2].bytes_received, deltas[2].rounds), ((rest_s + main_s + first_s) as u64, (rest_r + main_r + first_r) as u64, 3));
    assert_eq!(s.iterations, 3);
}

#[test]
fn a_small_demand_expands_only_part_of_an_iteration() {
    // The real parameters: 3 million COTs make a third of an iteration's 10.6 million, in
    // segments of at least an eighth, not all of it.
    let params = FerretParameters::regular_128();
    let main = *params.main();
    let after_setup = params.bootstrap().last().unwrap().n - main.consumed();
    let (s, r) = run(&params, &[after_setup, 1_000_000, 2_000_000], None);
    let (b, t) = &r.outputs[2];
    check_correlation(s.delta, &s.outputs[2], b, t);
    let extend: u64 = s.stats[3].since(&s.stats[1]).total_bytes();
    let (main_s, main_r) = main.iteration_bytes();
    assert!(extend < (main_s + main_r) as u64 / 2, "{extend} bytes for 3 million COTs, a whole iteration being {}", main_s + main_r);
    assert_eq!(s.iterations, 1);
}

#[test]
fn parameters_are_validated() {
    assert!(LpnParameters::new(100, 10, 60).is_err(), "blocks of one position");
    assert!(LpnParameters::new(100, 5, 10).is_err(), "k below the row weight");
    assert!(LpnParameters::new(100, 90, 10).is_err(), "consumes more than it makes");
    assert!(LpnParameters::new(100, 50, 10).is_ok());
    let small = LpnParameters::new(1_000, 100, 10).unwrap();
    let big = LpnParameters::new(100_000, 2_000, 100).unwrap();
    assert!(FerretParameters::new(vec![small], big).is_err(), "a bootstrap too small for the next reserve");
    for p in [FerretParameters::regular_128(), FerretParameters::ferret_2020()] {
        assert_eq!(p.main().n % p.main().t, 0);
        assert!(p.main().n / p.main().t == 1 << p.main().tree_depth());
    }
    assert_eq!(FerretParameters::ferret_2020().base_cots(), 32_768 + 918 * 9);
    assert_eq!(FerretParameters::regular_128().base_cots(), 8_911 + 590 * 7);
    assert_eq!(FerretParameters::regular_128().main().consumed(), 589_824 + 1_295 * 13);
}

/// The real 128-bit parameter set, one full main iteration and a bit (run with --release).
#[test]
fn real_parameters_one_iteration() {
    let params = FerretParameters::regular_128();
    let main = *params.main();
    let after_setup = params.bootstrap().last().unwrap().n - main.consumed();
    let count = after_setup + main.yield_per_iteration() + 1_000;
    let start = std::time::Instant::now();
    let (s, r) = run(&params, &[count], None);
    let elapsed = start.elapsed();
    let (b, t) = &r.outputs[0];
    let ones = check_correlation(s.delta, &s.outputs[0], b, t);
    let fraction = ones as f64 / count as f64;
    assert!((0.499..0.501).contains(&fraction), "choice bits are {fraction} ones");
    assert_eq!(s.iterations, 2);
    let (main_s, main_r) = main.iteration_bytes();
    // One whole iteration, then the smallest segment of the next for the last 1,000.
    let smallest = main.t.div_ceil(MIN_SEGMENT);
    let h = main.tree_depth();
    let extend_bytes = s.stats[1].since(&s.stats[0]).total_bytes();
    assert_eq!(extend_bytes, (main_s + main_r + 16 * smallest * (h + 1) + (smallest * h).div_ceil(8)) as u64);
    let per_iteration_bits = 8.0 * (main_s + main_r) as f64 / main.yield_per_iteration() as f64;
    eprintln!(
        "regular_128: {count} COTs (setup + 2 main iterations) in {elapsed:.2?}; {per_iteration_bits:.4} bits/COT per main iteration; setup {} bytes + base COTs",
        s.stats[0].total_bytes()
    );
    assert!(per_iteration_bits < 1.0);
}
