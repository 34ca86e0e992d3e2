//! Silent vector OT: random correlations `w_i = v_i ^ L(u_i)` with u_i an m-bit value (m <= 8)
//! and L an F_2-linear map known to the sender only, L(u) = (sum_j u_j x^j) * delta in
//! GF(2^128) (a subfield-VOLE correlation over F_2^m, as in Wolverine, Weng et al., S&P 2021, in
//! characteristic 2). One correlation is a random 1-out-of-2^m OT: the sender's keys
//! H(v ^ L(x)) for every x, the receiver's H(w) = the key of its u. A comparison's m-bit digit
//! then costs one LPN row instead of the m COTs (m rows) of the 1-out-of-N OT built from COTs.
//!
//! The generator is Ferret's iteration over the same public code and parameters, with values
//! in F_2^m in place of bits (the code's matrix is binary, so encoding a value vector is XOR):
//! - the reserve's first k correlations are the LPN secret; the next t carry the trees' noise
//!   values;
//! - each of the t blocks gets a single-point correlation: a plain GGM tree ([`GgmPrg`]) whose
//!   leaves the receiver learns except at its noise position alpha, through h random COTs of
//!   the binary generator in the same direction (one per level, two masked level sums each);
//!   the receiver's noise value beta (uniform nonzero) reaches the punctured leaf through one
//!   reserved correlation (u', delta'): the receiver sends beta ^ u', the sender returns the
//!   reserved v' ^ L(beta ^ u') ^ XOR of the block's leaves, so that the receiver's leaf at alpha
//!   is v_alpha ^ L(beta);
//! - both sides add the code applied to their reserve (the receiver to its values as well).
//!
//! The half-tree of the binary generator cannot serve here: its leaves XOR to the COTs' delta
//! in every tree, so the receiver would learn L(beta) ^ delta per tree and L(beta_1 ^ beta_2)
//! across two. The very first reserve is m binary COTs per correlation, lifted:
//! sum_j x^j t_j = sum_j x^j q_j ^ L(b). LPN over F_2^m with the binary parameters is at least as
//! hard as over F_2 (Liu et al., Crypto 2022; emp-zk runs Ferret's parameters over larger
//! fields). Semi-honest, as the rest of the crate.
//!
//! A segment of s trees: receiver to sender s h bits and s m-bit words, sender to receiver
//! 16 s (2h + 1) bytes, one round trip; plus the s h binary COTs the trees consume.

use std::ops::Range;

use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

use super::fixed_key::GgmPrg;
use super::mpcot;
use super::{FerretParameters, Progress, Stage};
use crate::base_ot::os_seeded_rng;
use crate::channel::Channel;
use crate::cot::{BatchCost, Block, CotReceiver, CotSender};
use crate::crh::{derive_key, Hasher};
use crate::kernels;
use crate::{MpcError, Result};

/// The widest values a vector-OT generator makes (1-out-of-256 OT).
pub const MAX_VALUE_BITS: u32 = 8;

/// x * a in GF(2^128) modulo x^128 + x^7 + x^2 + x + 1.
fn times_x(a: Block) -> Block {
    (a << 1) ^ ((a >> 127) * 0x87)
}

/// L(u) for every u < 2^bits: the sender's offsets, L(u) = (sum_j u_j x^j) * delta.
fn span(delta: Block, bits: u32) -> Vec<Block> {
    let basis: Vec<Block> = std::iter::successors(Some(delta), |&b| Some(times_x(b))).take(bits as usize).collect();
    let mut out = vec![0u128; 1 << bits];
    for u in 1..out.len() {
        out[u] = out[u & (u - 1)] ^ basis[u.trailing_zeros() as usize];
    }
    out
}

/// sum_j x^j c_j for each run of `bits` COT blocks: binary COTs lifted to vector correlations.
fn lift(blocks: &[Block], bits: u32) -> Vec<Block> {
    blocks.chunks_exact(bits as usize).map(|c| c.iter().rev().fold(0, |acc, &b| times_x(acc) ^ b)).collect()
}

fn check_bits(bits: u32) -> Result<()> {
    if !(1..=MAX_VALUE_BITS).contains(&bits) {
        return Err(MpcError::InvalidArgument(format!("vector OT values are 1..={MAX_VALUE_BITS} bits, not {bits}")));
    }
    Ok(())
}

/// The hash that masks the trees' level sums (its own key: domain separation from the OT layer).
fn level_hasher() -> Hasher {
    Hasher::with_key(derive_key("lycaon-mpc vole tree levels", &[]))
}

/// Correlations an iteration reserves for the next: the LPN secret and one per tree.
fn reserved(stage: &Stage) -> usize {
    stage.lpn.k + stage.lpn.t
}

/// The sender's side: holds L (from the binary generator's delta) and serves v.
pub struct VoleSender {
    bits: u32,
    delta: Block,
    span: Vec<Block>,
    main: Stage,
    prg: GgmPrg,
    levels: Hasher,
    rng: ChaCha20Rng,
    reserve: Vec<Block>,
    seeds: Vec<Block>,
    progress: Progress,
    tree_cots: u64,
    /// This generator's segment traffic so far (both directions; its trees' COTs not included).
    bytes: u64,
    /// The binary generator's price of a COT, as last seen (the trees' share of a correlation).
    cot_price: f64,
    buffer: Vec<Block>,
    position: usize,
}

/// Bytes of a segment of `trees` trees of depth `h` and `bits`-bit values, both directions.
fn segment_bytes(trees: usize, h: usize, bits: u32) -> usize {
    16 * trees * (2 * h + 1) + (trees * h).div_ceil(8) + (trees * bits as usize).div_ceil(8)
}

impl VoleSender {
    /// Runs the setup with the peer's [`VoleReceiver::setup`]: sends the public code seed and
    /// lifts `bits` COTs of `cots` (the binary generator in the same direction, whose delta
    /// fixes L) into each of the first reserve's correlations. Errors: a bad `bits`, the
    /// channel's, the generator's.
    pub fn setup(channel: &mut dyn Channel, cots: &mut dyn CotSender, bits: u32) -> Result<Self> {
        check_bits(bits)?;
        let mut rng = os_seeded_rng()?;
        let code_seed = mpcot::random_block(&mut rng);
        channel.send_blocks(&[code_seed])?;
        let main = Stage::new(*FerretParameters::regular_128().main(), code_seed);
        let q = cots.extend(channel, reserved(&main) * bits as usize)?;
        let delta = cots.delta();
        Ok(VoleSender {
            bits,
            delta,
            span: span(delta, bits),
            reserve: kernels::huge_copy(&lift(&q, bits)),
            main,
            prg: GgmPrg::new(),
            levels: level_hasher(),
            rng,
            seeds: Vec::new(),
            // Segments of an eighth of an iteration: the buffer stays near 1.3 million correlations
            // (23 MB).
            progress: Progress::new(),
            tree_cots: 0,
            bytes: 0,
            cot_price: cots.batch_cost().bytes_per_cot,
            buffer: Vec::new(),
            position: 0,
        })
    }

    /// Segment traffic so far, and per correlation that of a whole iteration (with its trees'
    /// COTs at the binary generator's price) over what it serves.
    pub fn batch_cost(&self) -> BatchCost {
        let (lpn, h) = (self.main.lpn, self.main.layout.depth);
        let per_iteration = segment_bytes(lpn.t, h, self.bits) as f64 + (lpn.t * h) as f64 * self.cot_price;
        BatchCost { bytes: self.bytes, bytes_per_cot: per_iteration / lpn.yield_per_iteration() as f64 }
    }

    /// m, the width of the receiver's values.
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// L(x) for every x < 2^m.
    pub fn span(&self) -> &[Block] {
        &self.span
    }

    /// `count` sender halves v, running segments of iterations (one round trip each, and the
    /// binary COTs of their trees) as needed. Errors: the channel's, the generator's.
    pub fn extend(&mut self, channel: &mut dyn Channel, cots: &mut dyn CotSender, count: usize) -> Result<Vec<Block>> {
        let mut out = Vec::new();
        self.extend_into(channel, cots, count, &mut out)?;
        Ok(out)
    }

    /// [`Self::extend`] into `out` (cleared first), reusing its allocation.
    pub fn extend_into(&mut self, channel: &mut dyn Channel, cots: &mut dyn CotSender, count: usize, out: &mut Vec<Block>) -> Result<()> {
        if cots.delta() != self.delta {
            return Err(MpcError::InvalidArgument("the vector OT's trees need the binary generator it was set up with".into()));
        }
        let lpn = self.main.lpn;
        let served_end = lpn.n - lpn.consumed();
        out.clear();
        out.reserve(count);
        loop {
            let take = (count - out.len()).min(self.buffer.len() - self.position);
            out.extend_from_slice(&self.buffer[self.position..self.position + take]);
            self.position += take;
            if out.len() == count {
                return Ok(());
            }
            let (layout, rng, seeds) = (&self.main.layout, &mut self.rng, &mut self.seeds);
            let trees = self.progress.plan(&lpn, count - out.len(), || *seeds = mpcot::draw_seeds(layout, rng));
            let rows = layout.rows(&trees);
            let served = rows.end.min(served_end) - rows.start;
            let mut buffer = std::mem::take(&mut self.buffer);
            buffer.resize(rows.len(), 0);
            self.segment(channel, cots, trees, &mut buffer)?;
            if rows.end == lpn.n {
                let keep = reserved(&self.main);
                self.reserve.copy_from_slice(&buffer[served..served + keep]);
                buffer.truncate(served);
            }
            self.buffer = buffer;
            self.position = 0;
        }
    }

    /// One segment: the trees' leaves plus the code on the reserve, written over `out`.
    fn segment(&mut self, channel: &mut dyn Channel, cots: &mut dyn CotSender, trees: Range<usize>, out: &mut [Block]) -> Result<()> {
        let (stage, prg) = (&self.main, &self.prg);
        let (h, s) = (stage.layout.depth, trees.len());
        let q = cots.extend(channel, s * h)?;
        self.cot_price = cots.batch_cost().bytes_per_cot;
        self.bytes += segment_bytes(s, h, self.bits) as u64;
        let (secret, tree_reserve) = self.reserve.split_at(stage.lpn.k);
        // Per tree: level l's left and right sums at 2l and 2l + 1, then the XOR of its leaves.
        let mut sums = vec![0u128; s * (2 * h + 1)];
        let first_tree = trees.start;
        stage
            .layout
            .split(&trees, out)
            .into_par_iter()
            .enumerate()
            .zip(sums.par_chunks_mut(2 * h + 1))
            .zip(self.seeds[trees.clone()].par_iter())
            .for_each_init(
                || (vec![0u128; 1 << h], vec![0u128; 1 << h.saturating_sub(1)]),
                |(tree, scratch), (((j, leaves_out), sums), &seed)| {
                    let _t = lycaon_math::profile::time(lycaon_math::profile::Kernel::OtExtension);
                    tree[0] = seed;
                    for level in 0..h {
                        (sums[2 * level], sums[2 * level + 1]) = prg.expand_level(tree, 1 << level, scratch);
                    }
                    let mut leaf_sum = 0;
                    for (o, &leaf) in leaves_out.iter_mut().zip(tree.iter()) {
                        *o = leaf;
                        leaf_sum ^= leaf;
                    }
                    sums[2 * h] = leaf_sum;
                    stage.code.encode_add_rows(secret, stage.layout.block_start(first_tree + j), leaves_out);
                },
            );
        let d = channel.recv_bits(s * h)?;
        let e = channel.recv_words(s, self.bits)?;
        // Level sum K^side goes out under H(q ^ (side ^ d) delta): the receiver's t = q ^ b delta
        // opens side b ^ d, the one off its path.
        let delta = self.delta;
        let mut masks: Vec<Block> = q.iter().zip(&d).flat_map(|(&q, &d)| if d { [q ^ delta, q] } else { [q, q ^ delta] }).collect();
        let base = self.tree_cots;
        self.levels.tccr_many(&mut masks, |p| tweak(base + (p / 2) as u64));
        self.tree_cots += (s * h) as u64;
        for (i, tree) in sums.chunks_exact_mut(2 * h + 1).enumerate() {
            for (sum, mask) in tree[..2 * h].iter_mut().zip(&masks[2 * h * i..2 * h * (i + 1)]) {
                *sum ^= mask;
            }
            // The reserved v' moved to the receiver's beta: v' ^ L(beta ^ u'), plus the leaves.
            tree[2 * h] ^= tree_reserve[first_tree + i] ^ self.span[e[i] as usize];
        }
        channel.send_blocks(&sums)
    }
}

// Debug shows the width only: the generators hold L and reserve halves (secrets).
impl std::fmt::Debug for VoleSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VoleSender").field("bits", &self.bits).finish_non_exhaustive()
    }
}

impl std::fmt::Debug for VoleReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VoleReceiver").field("bits", &self.bits).finish_non_exhaustive()
    }
}

/// The tweak of the trees' COT number `index`.
fn tweak(index: u64) -> Block {
    u128::from(index) << 64
}

/// The receiver's side: serves random m-bit values u and w = v ^ L(u).
pub struct VoleReceiver {
    bits: u32,
    main: Stage,
    prg: GgmPrg,
    levels: Hasher,
    rng: ChaCha20Rng,
    reserve_values: Vec<u8>,
    reserve: Vec<Block>,
    alphas: Vec<usize>,
    betas: Vec<u8>,
    progress: Progress,
    tree_cots: u64,
    buffer_values: Vec<u8>,
    buffer: Vec<Block>,
    position: usize,
}

impl VoleReceiver {
    /// The receiver's half of [`VoleSender::setup`], with the binary generator's receiver end
    /// in the same direction. Errors: as the sender's.
    pub fn setup(channel: &mut dyn Channel, cots: &mut dyn CotReceiver, bits: u32) -> Result<Self> {
        check_bits(bits)?;
        let code_seed = channel.recv_blocks(1)?[0];
        let main = Stage::new(*FerretParameters::regular_128().main(), code_seed);
        let (b, t) = cots.extend(channel, reserved(&main) * bits as usize)?;
        let reserve_values: Vec<u8> =
            b.chunks_exact(bits as usize).map(|c| c.iter().enumerate().fold(0u8, |acc, (j, &bit)| acc | (u8::from(bit) << j))).collect();
        Ok(VoleReceiver {
            bits,
            reserve: kernels::huge_copy(&lift(&t, bits)),
            reserve_values: kernels::huge_copy(&reserve_values),
            main,
            prg: GgmPrg::new(),
            levels: level_hasher(),
            rng: os_seeded_rng()?,
            alphas: Vec::new(),
            betas: Vec::new(),
            // Segments of an eighth of an iteration: the buffer stays near 1.3 million correlations
            // (23 MB).
            progress: Progress::new(),
            tree_cots: 0,
            buffer_values: Vec::new(),
            buffer: Vec::new(),
            position: 0,
        })
    }

    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// `count` random values u (below 2^m) and their w = v ^ L(u). Errors: the channel's, the
    /// generator's, a malformed message.
    pub fn extend(&mut self, channel: &mut dyn Channel, cots: &mut dyn CotReceiver, count: usize) -> Result<(Vec<u8>, Vec<Block>)> {
        let (mut values, mut out) = (Vec::new(), Vec::new());
        self.extend_into(channel, cots, count, &mut values, &mut out)?;
        Ok((values, out))
    }

    /// [`Self::extend`] into `values` and `out` (cleared first), reusing their allocations.
    pub fn extend_into(
        &mut self,
        channel: &mut dyn Channel,
        cots: &mut dyn CotReceiver,
        count: usize,
        values: &mut Vec<u8>,
        out: &mut Vec<Block>,
    ) -> Result<()> {
        let lpn = self.main.lpn;
        let served_end = lpn.n - lpn.consumed();
        values.clear();
        out.clear();
        values.reserve(count);
        out.reserve(count);
        loop {
            let take = (count - out.len()).min(self.buffer.len() - self.position);
            values.extend_from_slice(&self.buffer_values[self.position..self.position + take]);
            out.extend_from_slice(&self.buffer[self.position..self.position + take]);
            self.position += take;
            if out.len() == count {
                return Ok(());
            }
            let bits = self.bits;
            let (layout, rng, alphas, betas) = (&self.main.layout, &mut self.rng, &mut self.alphas, &mut self.betas);
            let trees = self.progress.plan(&lpn, count - out.len(), || {
                *alphas = mpcot::draw_noise_positions(layout, rng);
                // Uniform nonzero values: 1 + uniform below 2^m - 1.
                *betas = (0..layout.t).map(|_| 1 + mpcot::uniform_below(rng, (1 << bits) - 1) as u8).collect();
            });
            let rows = layout.rows(&trees);
            let served = rows.end.min(served_end) - rows.start;
            let (mut buffer_values, mut buffer) = (std::mem::take(&mut self.buffer_values), std::mem::take(&mut self.buffer));
            buffer_values.resize(rows.len(), 0);
            buffer.resize(rows.len(), 0);
            self.segment(channel, cots, trees, &mut buffer_values, &mut buffer)?;
            if rows.end == lpn.n {
                let keep = reserved(&self.main);
                self.reserve_values.copy_from_slice(&buffer_values[served..served + keep]);
                self.reserve.copy_from_slice(&buffer[served..served + keep]);
                buffer_values.truncate(served);
                buffer.truncate(served);
            }
            (self.buffer_values, self.buffer) = (buffer_values, buffer);
            self.position = 0;
        }
    }

    fn segment(&mut self, channel: &mut dyn Channel, cots: &mut dyn CotReceiver, trees: Range<usize>, out_values: &mut [u8], out: &mut [Block]) -> Result<()> {
        let (stage, prg) = (&self.main, &self.prg);
        let (h, s, k) = (stage.layout.depth, trees.len(), stage.lpn.k);
        let (b, mut keys) = cots.extend(channel, s * h)?;
        let alphas = &self.alphas[trees.clone()];
        let betas = &self.betas[trees.clone()];
        // d = b ^ (1 - alpha_l): the COT of level l opens the side off the path.
        let d: Vec<bool> = alphas
            .iter()
            .enumerate()
            .flat_map(|(i, &alpha)| (0..h).map(move |l| (i, l, alpha)))
            .map(|(i, l, alpha)| b[i * h + l] ^ ((alpha >> l) & 1 == 0))
            .collect();
        channel.send_bits(&d)?;
        let e: Vec<u64> = trees.clone().zip(betas).map(|(j, &beta)| u64::from(beta ^ self.reserve_values[k + j])).collect();
        channel.send_words(&e, self.bits)?;
        // The code on the reserve while the sender expands its trees.
        stage.code.encode_with_values(&self.reserve[..k], &self.reserve_values[..k], stage.layout.block_start(trees.start), out, out_values);
        let base = self.tree_cots;
        self.levels.tccr_many(&mut keys, |p| tweak(base + p as u64));
        self.tree_cots += (s * h) as u64;
        let message = channel.recv_blocks(s * (2 * h + 1))?;
        let tree_reserve = &self.reserve[k..];
        let first_tree = trees.start;
        let blocks: Vec<(&mut [Block], &mut [u8])> = stage.layout.split(&trees, out).into_iter().zip(stage.layout.split(&trees, out_values)).collect();
        blocks.into_par_iter().enumerate().zip(message.par_chunks(2 * h + 1)).zip(keys.par_chunks(h)).try_for_each_init(
            || (vec![0u128; 1 << h], vec![0u128; 1 << h.saturating_sub(1)]),
            |(tree, scratch), (((i, (leaves_out, values_out)), message), keys)| {
                let (alpha, beta) = (alphas[i], betas[i]);
                if alpha >= leaves_out.len() {
                    return Err(MpcError::InvalidArgument(format!("noise position {alpha} outside a block of {}", leaves_out.len())));
                }
                let _t = lycaon_math::profile::time(lycaon_math::profile::Kernel::OtExtension);
                // Every node but the one on the path is known; that one is kept at 0, and the
                // children it expands to are replaced: the one off the path from the level's
                // opened side sum, the one on it by 0 again.
                tree[0] = 0;
                for level in 0..h {
                    let len = 1 << level;
                    let (sum_left, sum_right) = if level == 0 {
                        tree[1] = 0;
                        (0, 0)
                    } else {
                        prg.expand_level(tree, len, scratch)
                    };
                    let (on_path, side) = (alpha & (len - 1), (alpha >> level) & 1);
                    let (off, on) = (on_path + (1 - side) * len, on_path + side * len);
                    let off_side_sum = if side == 0 { sum_right } else { sum_left };
                    tree[off] ^= message[2 * level + 1 - side] ^ keys[level] ^ off_side_sum;
                    tree[on] = 0;
                }
                let mut punctured = tree_reserve[first_tree + i] ^ message[2 * h];
                for (o, &leaf) in leaves_out.iter_mut().zip(tree.iter()) {
                    *o ^= leaf;
                    punctured ^= leaf;
                }
                leaves_out[alpha] ^= punctured;
                values_out[alpha] ^= beta;
                Ok(())
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::{run_pair, LinkModel};
    use crate::ferret::{FerretReceiver, FerretSender};
    use crate::iknp::{IknpReceiver, IknpSender};

    #[test]
    fn span_is_linear_and_injective() {
        let delta = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3211u128;
        let s = span(delta, 4);
        assert_eq!(s[0], 0);
        for x in 0..16 {
            for y in 0..16 {
                assert_eq!(s[x ^ y], s[x] ^ s[y]);
            }
        }
        let mut sorted = s.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 16);
        // Lifting m COTs gives the span of their choice bits.
        let q = [5u128, 77, 1 << 100];
        let t: Vec<Block> = q.iter().zip([true, false, true]).map(|(&q, b)| if b { q ^ delta } else { q }).collect();
        assert_eq!(lift(&t, 3)[0], lift(&q, 3)[0] ^ span(delta, 3)[0b101]);
    }

    #[test]
    fn ggm_levels_expand_node_by_node() {
        let prg = GgmPrg::new();
        let mut nodes = vec![0u128; 8];
        nodes[..2].copy_from_slice(&[3, 9]);
        let mut scratch = vec![0u128; 4];
        let (l, r) = prg.expand_level(&mut nodes, 2, &mut scratch);
        let (c0, c1) = (prg.children(3), prg.children(9));
        assert_eq!(nodes[..4], [c0.0, c1.0, c0.1, c1.1]);
        assert_eq!((l, r), (c0.0 ^ c1.0, c0.1 ^ c1.1));
    }

    /// Both ends over Ferret, calls of several sizes: segments of the first iteration, its
    /// last one (which keeps the reserve) and the second iteration, built on that reserve.
    #[test]
    fn correlations_hold_across_calls() {
        let bits = 3;
        let calls = [1usize, 700_000, 2_000_000, 5, 8_000_000, 300_000];
        let run = |sender: bool, ch: &mut dyn Channel| -> Result<(Vec<u8>, Vec<Block>, Vec<Block>)> {
            let mut rng = os_seeded_rng()?;
            let params = FerretParameters::default();
            if sender {
                let mut base = IknpSender::new(ch, &mut rng)?;
                let mut cots = FerretSender::setup(ch, &mut base, &params)?;
                let mut vole = VoleSender::setup(ch, &mut cots, bits)?;
                let mut v = Vec::new();
                for &c in &calls {
                    v.extend(vole.extend(ch, &mut cots, c)?);
                }
                Ok((Vec::new(), v, vole.span().to_vec()))
            } else {
                let mut base = IknpReceiver::new(ch, &mut rng)?;
                let mut cots = FerretReceiver::setup(ch, &mut base, &params)?;
                let mut vole = VoleReceiver::setup(ch, &mut cots, bits)?;
                let (mut u, mut w) = (Vec::new(), Vec::new());
                for &c in &calls {
                    let (a, b) = vole.extend(ch, &mut cots, c)?;
                    u.extend(a);
                    w.extend(b);
                }
                Ok((u, w, Vec::new()))
            }
        };
        let ((s, _), (r, _)) = run_pair(LinkModel::UNLIMITED, |ch| run(true, ch), |ch| run(false, ch)).unwrap();
        let (v, span) = (&s.1, &s.2);
        let (u, w) = (&r.0, &r.1);
        assert_eq!((v.len(), u.len()), (calls.iter().sum(), calls.iter().sum()));
        for i in 0..v.len() {
            assert!(u[i] < 1 << bits);
            assert_eq!(w[i], v[i] ^ span[u[i] as usize], "correlation {i}");
        }
        // Values are spread (noise and the code mix them): each of the 8 about an eighth.
        let mut counts = [0usize; 8];
        u.iter().for_each(|&x| counts[x as usize] += 1);
        assert!(counts.iter().all(|&c| c > v.len() / 10), "{counts:?}");
    }
}
