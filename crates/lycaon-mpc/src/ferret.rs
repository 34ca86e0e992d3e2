//! Ferret silent OT: random correlated OT (`t_i = q_i ^ b_i * delta`, one global delta) from
//! primal LPN with regular noise, in the semi-honest setting (Yang, Weng, Lan, Zhang and Wang,
//! "Ferret: Fast Extension for coRRElated oT with small communication", CCS 2020, figure 5
//! without the malicious consistency check).
//!
//! One iteration with parameters (n, k, t) turns k + t * h reserved COTs (h = ceil(log2(n / t)))
//! into n new ones:
//! - the first k reserved COTs are the LPN secret u (sender `q`, receiver `b`, `t`);
//! - the other t * h run a regular multi-point COT ([`mpcot`]): a sparse noise vector e with one
//!   1 in each of t blocks of n / t positions, the sender holding v and the receiver w = v ^ e *
//!   delta;
//! - both sides apply the public local linear code A ([`lpn`], each row 10 random positions of
//!   u): sender z = v ^ A q, receiver bits x = e ^ A b and blocks w ^ A t = z ^ x * delta.
//!
//! The last k + t * h outputs are kept as the next iteration's reserve; the first n - k - t * h
//! are served by `extend`. An iteration's trees are expanded in segments, as the calls need
//! them (the first an eighth of the iteration, each later one at least twice the one before, so
//! a session that needs 3 million COTs does not make 10 million; the output is the same however
//! the trees are cut); the last
//! segment, which holds the reserve, runs once the served rows are used up. A segment that goes
//! to the caller whole is made in place in the vector it returns, with no copy. The very first
//! reserve comes from a base COT source (IKNP) through a short chain of smaller bootstrap
//! iterations, so the base source only has to produce a few tens of thousands of COTs once.
//! Both parties' generators must be made with the same [`FerretParameters`].
//!
//! Communication of a segment of s trees, exactly: receiver to sender ceil(s h / 8) bytes, sender
//! to receiver 16 s (h + 1) bytes, in two messages (one round trip, whatever s and h are). Setup
//! adds the 16-byte code seed (sender to receiver), what the base source sends, and one
//! iteration per bootstrap stage.

mod fixed_key;
mod lpn;
mod mpcot;
mod vole;

use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

use crate::base_ot::os_seeded_rng;
use crate::channel::Channel;
use crate::cot::{BatchCost, Block, CotReceiver, CotSender};
use crate::kernels;
use crate::{MpcError, Result};
use lpn::{LocalLinearCode, ROW_WEIGHT};
use mpcot::{RegularLayout, TreePrimitives};
pub use vole::{VoleReceiver, VoleSender, MAX_VALUE_BITS};

/// The smallest segment of an iteration, as a fraction of its trees (one over this): a call
/// expands the trees that cover it, at least this many. Segments do not grow (an earlier
/// schedule doubled each one): a session makes at most an eighth of an iteration (1.3 million
/// COTs) it does not use, where doubling made up to twice what short sessions used.
const MIN_SEGMENT: usize = 8;

/// One primal-LPN instance with regular noise: n outputs, secret length k, noise weight t (one
/// noisy position in each of t blocks of about n / t positions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LpnParameters {
    pub n: usize,
    pub k: usize,
    pub t: usize,
}

impl LpnParameters {
    /// Checks n / t >= 2, k >= 10 (the code's row weight) and that an iteration yields more
    /// COTs than it consumes.
    pub fn new(n: usize, k: usize, t: usize) -> Result<Self> {
        let p = LpnParameters { n, k, t };
        p.validate()?;
        Ok(p)
    }

    fn validate(&self) -> Result<()> {
        let LpnParameters { n, k, t } = *self;
        if t == 0 || n / t < 2 {
            return Err(MpcError::InvalidArgument(format!("LPN noise weight t = {t} needs 1 <= t <= n / 2 (n = {n})")));
        }
        if k < ROW_WEIGHT || k > u32::MAX as usize {
            return Err(MpcError::InvalidArgument(format!("LPN secret length k = {k} must be in [{ROW_WEIGHT}, 2^32)")));
        }
        if n <= self.consumed() {
            return Err(MpcError::InvalidArgument(format!("an iteration with n = {n} must yield more than the {} COTs it consumes", self.consumed())));
        }
        Ok(())
    }

    fn layout(&self) -> RegularLayout {
        RegularLayout::new(self.n, self.t)
    }

    /// Depth of each half-tree: ceil(log2(ceil(n / t))).
    pub fn tree_depth(&self) -> usize {
        self.layout().depth
    }

    /// COTs one iteration consumes (and keeps back from its output): k + t * tree_depth.
    pub fn consumed(&self) -> usize {
        self.k + self.t * self.tree_depth()
    }

    /// New COTs one iteration makes available beyond the next iteration's reserve.
    pub fn yield_per_iteration(&self) -> usize {
        self.n - self.consumed()
    }

    /// Payload bytes one iteration sends in one segment (sender to receiver, receiver to sender).
    pub fn iteration_bytes(&self) -> (usize, usize) {
        let layout = self.layout();
        (layout.sender_bytes(self.t), layout.receiver_bytes(self.t))
    }

    /// The trees of the next segment, from tree `next` on: enough for `want` more served COTs
    /// and at least `least` trees; the rest of the iteration where that would reach into the
    /// reserve's rows.
    fn segment(&self, next: usize, want: usize, least: usize) -> std::ops::Range<usize> {
        let layout = self.layout();
        let served_end = self.n - self.consumed();
        let target = layout.block_start(next).saturating_add(want);
        let covering = (next..=self.t).find(|&j| layout.block_start(j) >= target).unwrap_or(self.t);
        let end = covering.max(next + least).min(self.t);
        if layout.block_start(end) > served_end {
            next..self.t
        } else {
            next..end
        }
    }
}

/// A chain of LPN instances: bootstrap stages, then the main instance every later iteration
/// uses. Stage 0's reserve comes from the base COT source; each stage's n covers the next
/// stage's reserve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FerretParameters {
    bootstrap: Vec<LpnParameters>,
    main: LpnParameters,
}

impl FerretParameters {
    /// Checks every stage and that each stage's output covers the next stage's reserve.
    pub fn new(bootstrap: Vec<LpnParameters>, main: LpnParameters) -> Result<Self> {
        let p = FerretParameters { bootstrap, main };
        for stage in p.stages() {
            stage.validate()?;
        }
        for pair in p.stages().collect::<Vec<_>>().windows(2) {
            if pair[0].n < pair[1].consumed() {
                return Err(MpcError::InvalidArgument(format!(
                    "a bootstrap stage's n = {} does not cover the next stage's reserve of {} COTs",
                    pair[0].n,
                    pair[1].consumed()
                )));
            }
        }
        Ok(p)
    }

    /// Regular-noise parameters for 128-bit security as emp-ot (the Ferret authors' code) sets
    /// them today (`emp-ot/ferret/constants.h`), re-chosen after the 2023-24 algebraic and
    /// estimator work on regular-noise LPN: main n = 10,608,640 = 1,295 * 2^13, k = 589,824,
    /// t = 1,295; bootstrap (607,232 = 593 * 2^10, 69,454, 593) and (75,520 = 590 * 2^7, 8,911,
    /// 590). emp-ot bootstraps the smallest stage with dual LPN; here it comes from the base
    /// source instead: 8,911 + 590 * 7 = 13,041 base COTs.
    pub fn regular_128() -> Self {
        Self::new(
            vec![LpnParameters { n: 75_520, k: 8_911, t: 590 }, LpnParameters { n: 607_232, k: 69_454, t: 593 }],
            LpnParameters { n: 10_608_640, k: 589_824, t: 1_295 },
        )
        .expect("the published parameters chain")
    }

    /// [`Self::regular_128`] without its largest stage: main (607,232, 69,454, 593), bootstrap
    /// (75,520, 8,911, 590). The same 128-bit regular-noise LPN sets emp-ot uses (its bootstrap
    /// stages must be as secure as the main one), about 530,000 COTs per iteration.
    pub fn regular_128_compact() -> Self {
        Self::new(vec![LpnParameters { n: 75_520, k: 8_911, t: 590 }], LpnParameters { n: 607_232, k: 69_454, t: 593 }).expect("the published parameters chain")
    }

    /// The original Ferret regular-noise set (CCS 2020 and emp-ot's first `ferret_b13`): main
    /// n = 10,485,760 = 1,280 * 2^13, k = 452,000, t = 1,280; bootstrap n = 470,016 = 918 * 2^9,
    /// k = 32,768, t = 918 (41,030 base COTs). Claimed 128-bit security in 2020; later analyses
    /// of regular-noise LPN led emp-ot to the larger [`Self::regular_128`], which is the default.
    pub fn ferret_2020() -> Self {
        Self::new(vec![LpnParameters { n: 470_016, k: 32_768, t: 918 }], LpnParameters { n: 10_485_760, k: 452_000, t: 1_280 })
            .expect("the published parameters chain")
    }

    /// Tiny parameters for fast tests. NOT SECURE: an LPN instance this small is solved at once.
    /// Block sizes that are not powers of two on purpose (truncated trees).
    pub fn toy_insecure() -> Self {
        Self::new(vec![LpnParameters { n: 4_000, k: 400, t: 50 }], LpnParameters { n: 20_000, k: 1_200, t: 37 }).expect("toy parameters chain")
    }

    pub fn main(&self) -> &LpnParameters {
        &self.main
    }

    pub fn bootstrap(&self) -> &[LpnParameters] {
        &self.bootstrap
    }

    /// COTs the base source has to produce once, at setup.
    pub fn base_cots(&self) -> usize {
        self.stages().next().map_or(0, |s| s.consumed())
    }

    fn stages(&self) -> impl Iterator<Item = &LpnParameters> {
        self.bootstrap.iter().chain(std::iter::once(&self.main))
    }
}

impl Default for FerretParameters {
    fn default() -> Self {
        Self::regular_128()
    }
}

/// What both parties share for one stage: the tree layout and the public code.
#[derive(Clone)]
struct Stage {
    lpn: LpnParameters,
    layout: RegularLayout,
    code: LocalLinearCode,
}

impl Stage {
    fn new(lpn: LpnParameters, code_seed: Block) -> Self {
        Stage { lpn, layout: lpn.layout(), code: LocalLinearCode::new(code_seed, lpn.n, lpn.k) }
    }
}

/// Where the main iteration in progress stands, the same on both sides: its inputs (the reserve
/// it started from), the next tree to expand (0: none yet, the next call starts an iteration)
/// and the main traffic so far.
struct Progress {
    next_tree: usize,
    iterations: u64,
    bytes: u64,
}

impl Progress {
    /// Nothing done yet.
    fn new() -> Self {
        Progress { next_tree: 0, iterations: 0, bytes: 0 }
    }

    /// The next segment for `want` COTs; starts an iteration where none is in progress (then
    /// `start` draws its randomness).
    fn plan(&mut self, lpn: &LpnParameters, want: usize, start: impl FnOnce()) -> std::ops::Range<usize> {
        if self.next_tree == 0 {
            self.iterations += 1;
            start();
        }
        let trees = lpn.segment(self.next_tree, want, lpn.t.div_ceil(MIN_SEGMENT));
        let layout = lpn.layout();
        self.bytes += (layout.sender_bytes(trees.len()) + layout.receiver_bytes(trees.len())) as u64;
        self.next_tree = if trees.end == lpn.t { 0 } else { trees.end };
        trees
    }
}

/// The sender's side of Ferret: holds delta (the base source's) and serves `q_i`.
pub struct FerretSender {
    delta: Block,
    main: Stage,
    primitives: TreePrimitives,
    rng: ChaCha20Rng,
    /// The iteration in progress's k + t h input COTs (once it ends, the next one's).
    reserve: Vec<Block>,
    /// The iteration in progress's tree seeds.
    seeds: Vec<Block>,
    progress: Progress,
    /// Made but not yet served: `buffer[position..]`.
    buffer: Vec<Block>,
    position: usize,
}

impl FerretSender {
    /// Runs the setup with the peer's [`FerretReceiver::setup`]: sends the public code seed,
    /// takes `params.base_cots()` COTs from `base` (whose delta becomes Ferret's), then runs the
    /// bootstrap stages. The base source is not used afterwards (a `Box<dyn CotSender>` is passed
    /// as `&mut *boxed`). Errors: the channel's, and the base source's.
    pub fn setup(channel: &mut dyn Channel, base: &mut dyn CotSender, params: &FerretParameters) -> Result<Self> {
        Self::setup_with_rng(channel, base, params, os_seeded_rng()?)
    }

    fn setup_with_rng(channel: &mut dyn Channel, base: &mut dyn CotSender, params: &FerretParameters, mut rng: ChaCha20Rng) -> Result<Self> {
        let code_seed = mpcot::random_block(&mut rng);
        channel.send_blocks(&[code_seed])?;
        let delta = base.delta();
        if delta & 1 != 1 {
            return Err(MpcError::InvalidArgument("Ferret needs a base COT source whose delta has its lowest bit set (IKNP's does)".into()));
        }
        let mut reserve = base.extend(channel, params.base_cots())?;
        if reserve.len() != params.base_cots() {
            return Err(MpcError::InvalidArgument(format!("the base source returned {} COTs, not {}", reserve.len(), params.base_cots())));
        }
        // Lowest bits: 0 in every q, the choice bit in every t (t = q ^ b delta still holds,
        // delta's lowest bit being 1); every iteration keeps it so (see `lpn`, `mpcot`).
        for q in &mut reserve {
            *q &= !1;
        }
        let primitives = TreePrimitives::new();
        let mut buffer = Vec::new();
        for (i, lpn) in params.bootstrap.iter().enumerate() {
            let stage = Stage::new(*lpn, code_seed);
            let mut out = vec![0u128; lpn.n];
            let seeds = mpcot::draw_seeds(&stage.layout, &mut rng);
            sender_segment(channel, &stage, &primitives, delta, &reserve, &seeds, 0..lpn.t, &mut out)?;
            let next = params.bootstrap.get(i + 1).unwrap_or(&params.main).consumed();
            reserve = out.split_off(lpn.n - next);
            buffer.extend_from_slice(&out);
        }
        Ok(FerretSender {
            delta,
            main: Stage::new(params.main, code_seed),
            primitives,
            rng,
            reserve: kernels::huge_copy(&reserve),
            seeds: Vec::new(),
            progress: Progress::new(),
            buffer,
            position: 0,
        })
    }

    /// Main iterations started so far (not counting the bootstrap).
    pub fn iterations(&self) -> u64 {
        self.progress.iterations
    }

    /// COTs already made and not yet served (extend serves these without communication).
    pub fn buffered(&self) -> usize {
        self.buffer.len() - self.position
    }
}

impl CotSender for FerretSender {
    fn delta(&self) -> Block {
        self.delta
    }

    /// Main iterations only (the bootstrap is setup): the segments' traffic so far, and per COT
    /// that of a whole iteration over what it serves.
    fn batch_cost(&self) -> BatchCost {
        let lpn = self.main.lpn;
        let (to_receiver, to_sender) = lpn.iteration_bytes();
        BatchCost { bytes: self.progress.bytes, bytes_per_cot: (to_receiver + to_sender) as f64 / lpn.yield_per_iteration() as f64 }
    }

    /// Serves `count` COTs from the buffer, running segments of main iterations (one round trip
    /// each) as needed. Errors: the channel's.
    fn extend(&mut self, channel: &mut dyn Channel, count: usize) -> Result<Vec<Block>> {
        let mut out = Vec::new();
        self.extend_into(channel, count, &mut out)?;
        Ok(out)
    }

    fn extend_into(&mut self, channel: &mut dyn Channel, count: usize, out: &mut Vec<Block>) -> Result<()> {
        let lpn = self.main.lpn;
        let served_end = lpn.n - lpn.consumed();
        let take = count.min(self.buffered());
        // Every slot is written before it is read, so a reused `out` keeps its old values and
        // only growth is zeroed.
        kernels::resize_huge(out, count, 0);
        out[..take].par_iter_mut().zip(self.buffer[self.position..self.position + take].par_iter()).for_each(|(o, b)| *o = *b);
        self.position += take;
        let mut filled = take;
        while filled < count {
            let want = count - filled;
            let (layout, rng, seeds) = (&self.main.layout, &mut self.rng, &mut self.seeds);
            let trees = self.progress.plan(&lpn, want, || *seeds = mpcot::draw_seeds(layout, rng));
            let rows = layout.rows(&trees);
            let served = rows.end.min(served_end) - rows.start;
            if trees.end < lpn.t && served <= want {
                // The whole segment goes to the caller: made in place in `out`.
                sender_segment(channel, &self.main, &self.primitives, self.delta, &self.reserve, &self.seeds, trees, &mut out[filled..filled + served])?;
                filled += served;
                continue;
            }
            // Part of it, or the reserve's rows with it: made in the buffer (its allocation reused).
            self.buffer.resize(rows.len(), 0);
            sender_segment(channel, &self.main, &self.primitives, self.delta, &self.reserve, &self.seeds, trees, &mut self.buffer)?;
            if rows.end == lpn.n {
                self.reserve.copy_from_slice(&self.buffer[served..]);
                self.buffer.truncate(served);
            }
            let take = served.min(want);
            out[filled..filled + take].par_iter_mut().zip(self.buffer[..take].par_iter()).for_each(|(o, b)| *o = *b);
            self.position = take;
            filled += take;
        }
        Ok(())
    }
}

/// The receiver's side of Ferret: serves random choice bits `b_i` and `t_i = q_i ^ b_i delta`.
pub struct FerretReceiver {
    main: Stage,
    primitives: TreePrimitives,
    rng: ChaCha20Rng,
    reserve_bits: Vec<bool>,
    reserve: Vec<Block>,
    /// The iteration in progress's noise positions.
    alphas: Vec<usize>,
    progress: Progress,
    buffer_bits: Vec<bool>,
    buffer: Vec<Block>,
    position: usize,
}

impl FerretReceiver {
    /// The receiver's half of [`FerretSender::setup`], with the same parameters and the receiver
    /// end of a base source with the same delta. Errors: the channel's (including a malformed
    /// code seed), and the base source's.
    pub fn setup(channel: &mut dyn Channel, base: &mut dyn CotReceiver, params: &FerretParameters) -> Result<Self> {
        Self::setup_with_rng(channel, base, params, os_seeded_rng()?)
    }

    fn setup_with_rng(channel: &mut dyn Channel, base: &mut dyn CotReceiver, params: &FerretParameters, mut rng: ChaCha20Rng) -> Result<Self> {
        let code_seed = channel.recv_blocks(1)?[0];
        let (mut reserve_bits, mut reserve) = base.extend(channel, params.base_cots())?;
        if reserve_bits.len() != reserve.len() || reserve.len() != params.base_cots() {
            return Err(MpcError::InvalidArgument(format!("the base source returned {} COTs, not {}", reserve.len(), params.base_cots())));
        }
        // The choice bit in the lowest bit of every t (the sender clears its q's there).
        for (t, &b) in reserve.iter_mut().zip(&reserve_bits) {
            *t = (*t & !1) | u128::from(b);
        }
        let primitives = TreePrimitives::new();
        let (mut buffer_bits, mut buffer) = (Vec::new(), Vec::new());
        for (i, lpn) in params.bootstrap.iter().enumerate() {
            let stage = Stage::new(*lpn, code_seed);
            let (mut bits, mut out) = (vec![false; lpn.n], vec![0u128; lpn.n]);
            let alphas = mpcot::draw_noise_positions(&stage.layout, &mut rng);
            receiver_segment(channel, &stage, &primitives, &reserve_bits, &reserve, &alphas, 0..lpn.t, &mut bits, &mut out)?;
            let next = params.bootstrap.get(i + 1).unwrap_or(&params.main).consumed();
            reserve_bits = bits.split_off(lpn.n - next);
            reserve = out.split_off(lpn.n - next);
            buffer_bits.extend_from_slice(&bits);
            buffer.extend_from_slice(&out);
        }
        Ok(FerretReceiver {
            main: Stage::new(params.main, code_seed),
            primitives,
            rng,
            reserve_bits: kernels::huge_copy(&reserve_bits),
            reserve: kernels::huge_copy(&reserve),
            alphas: Vec::new(),
            progress: Progress::new(),
            buffer_bits,
            buffer,
            position: 0,
        })
    }

    /// Main iterations started so far (not counting the bootstrap).
    pub fn iterations(&self) -> u64 {
        self.progress.iterations
    }

    /// COTs already made and not yet served.
    pub fn buffered(&self) -> usize {
        self.buffer.len() - self.position
    }
}

impl CotReceiver for FerretReceiver {
    /// Serves `count` COTs, running segments of main iterations as needed. Errors: the
    /// channel's, and a malformed message from the sender.
    fn extend(&mut self, channel: &mut dyn Channel, count: usize) -> Result<(Vec<bool>, Vec<Block>)> {
        let (mut bits, mut out) = (Vec::new(), Vec::new());
        self.extend_into(channel, count, &mut bits, &mut out)?;
        Ok((bits, out))
    }

    fn extend_into(&mut self, channel: &mut dyn Channel, count: usize, bits: &mut Vec<bool>, out: &mut Vec<Block>) -> Result<()> {
        let lpn = self.main.lpn;
        let served_end = lpn.n - lpn.consumed();
        let take = count.min(self.buffered());
        // As the sender's: each slot written before it is read, only growth zeroed.
        kernels::resize_huge(bits, count, false);
        kernels::resize_huge(out, count, 0);
        bits[..take].copy_from_slice(&self.buffer_bits[self.position..self.position + take]);
        out[..take].par_iter_mut().zip(self.buffer[self.position..self.position + take].par_iter()).for_each(|(o, b)| *o = *b);
        self.position += take;
        let mut filled = take;
        while filled < count {
            let want = count - filled;
            let (layout, rng, alphas) = (&self.main.layout, &mut self.rng, &mut self.alphas);
            let trees = self.progress.plan(&lpn, want, || *alphas = mpcot::draw_noise_positions(layout, rng));
            let rows = layout.rows(&trees);
            let served = rows.end.min(served_end) - rows.start;
            if trees.end < lpn.t && served <= want {
                let (segment_bits, segment) = (&mut bits[filled..filled + served], &mut out[filled..filled + served]);
                receiver_segment(channel, &self.main, &self.primitives, &self.reserve_bits, &self.reserve, &self.alphas, trees, segment_bits, segment)?;
                filled += served;
                continue;
            }
            self.buffer_bits.resize(rows.len(), false);
            self.buffer.resize(rows.len(), 0);
            receiver_segment(
                channel,
                &self.main,
                &self.primitives,
                &self.reserve_bits,
                &self.reserve,
                &self.alphas,
                trees,
                &mut self.buffer_bits,
                &mut self.buffer,
            )?;
            if rows.end == lpn.n {
                self.reserve_bits.copy_from_slice(&self.buffer_bits[served..]);
                self.reserve.copy_from_slice(&self.buffer[served..]);
                self.buffer_bits.truncate(served);
                self.buffer.truncate(served);
            }
            let take = served.min(want);
            bits[filled..filled + take].copy_from_slice(&self.buffer_bits[..take]);
            out[filled..filled + take].par_iter_mut().zip(self.buffer[..take].par_iter()).for_each(|(o, b)| *o = *b);
            self.position = take;
            filled += take;
        }
        Ok(())
    }
}

/// One segment of an iteration, sender side: the outputs `q` of `trees` (their rows, written
/// over `out`) from the iteration's k + t h reserved COTs and its tree seeds.
#[allow(clippy::too_many_arguments)]
fn sender_segment(
    channel: &mut dyn Channel,
    stage: &Stage,
    primitives: &TreePrimitives,
    delta: Block,
    reserve: &[Block],
    seeds: &[Block],
    trees: std::ops::Range<usize>,
    out: &mut [Block],
) -> Result<()> {
    debug_assert_eq!(reserve.len(), stage.lpn.consumed());
    let (k, h) = (stage.lpn.k, stage.layout.depth);
    let (secret, mpcot_cots) = reserve.split_at(k);
    let cots = &mpcot_cots[trees.start * h..trees.end * h];
    let seeds = &seeds[trees.clone()];
    // The code is applied tree by tree, on leaves still in cache, before the trees' message
    // goes out: the receiver applies its code meanwhile, so nobody waits longer.
    mpcot::send(channel, &stage.layout, trees, primitives, delta, cots, seeds, out, |first, leaves| stage.code.encode_add_rows(secret, first, leaves))
}

/// One segment of an iteration, receiver side: (b, t) of `trees`' rows, written over `bits` and
/// `out`, from the reserved COTs and the iteration's noise positions. The code is applied
/// while the sender expands its trees.
#[allow(clippy::too_many_arguments)]
fn receiver_segment(
    channel: &mut dyn Channel,
    stage: &Stage,
    primitives: &TreePrimitives,
    reserve_bits: &[bool],
    reserve: &[Block],
    alphas: &[usize],
    trees: std::ops::Range<usize>,
    bits: &mut [bool],
    out: &mut [Block],
) -> Result<()> {
    debug_assert_eq!(reserve.len(), stage.lpn.consumed());
    let (k, h) = (stage.lpn.k, stage.layout.depth);
    let levels = k + trees.start * h..k + trees.end * h;
    let alphas = &alphas[trees.clone()];
    mpcot::receiver_choose(channel, &stage.layout, &reserve_bits[levels.clone()], alphas)?;
    stage.code.encode_with_bits(&reserve[..k], stage.layout.block_start(trees.start), out, bits);
    mpcot::receiver_finish(channel, &stage.layout, trees, primitives, alphas, &reserve[levels], out, bits)
}

#[cfg(test)]
mod tests;
