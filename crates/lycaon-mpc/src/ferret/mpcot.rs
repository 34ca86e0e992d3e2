//! Multi-point COT with regular noise: the length-n output is cut into t consecutive blocks of
//! n / t positions (the first n mod t blocks one longer), and each block is a single-point COT
//! built from a GGM tree (Ferret, section 4; Schoppmann, Gascón, Reichert and Raykova, CCS 2019).
//!
//! For a block of `size` positions the tree has depth h = ceil(log2(size)) and 2^h leaves, of
//! which the first `size` are used. The sender learns leaves v; the receiver, with a noise
//! position alpha in [0, size), learns w with w_i = v_i for i != alpha and w_alpha = v_alpha ^
//! delta. Level l of the tree costs one random COT (q, t = q ^ b * delta): the receiver, wanting
//! the XOR K of the level's nodes on the side off its path (bit 1 - alpha_l), sends d = b ^ (1 -
//! alpha_l); the sender sends K^0 ^ H(q ^ d delta) and K^1 ^ H(q ^ (1 ^ d) delta), of which the
//! receiver can open exactly the one it wants with H(t). Finally the sender sends delta ^ XOR of
//! the used leaves, from which the receiver gets w_alpha.
//!
//! Any run of consecutive trees is two messages whatever their number and h are: the receiver's
//! h bits d per tree, then the sender's 2h + 1 blocks per tree. The trees are expanded in
//! parallel. The tree seeds and the noise positions are drawn for a whole iteration at its start
//! ([`draw_seeds`], [`draw_noise_positions`]), so the output does not depend on how the
//! iteration's trees are cut into runs.

use std::ops::Range;

use rand_chacha::ChaCha20Rng;
use rand_core::Rng;
use rayon::prelude::*;

use super::fixed_key::{correlation_robust_hash, GgmPrg};
use crate::channel::Channel;
use crate::cot::Block;
use crate::crh::Hasher;
use crate::{MpcError, Result};

/// How the n outputs split into t blocks, and each block's tree depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RegularLayout {
    pub(crate) n: usize,
    pub(crate) t: usize,
    /// The depth of every tree: ceil(log2(ceil(n / t))).
    pub(crate) depth: usize,
}

impl RegularLayout {
    /// Needs 2 <= n / t (checked by the parameter validation).
    pub(crate) fn new(n: usize, t: usize) -> Self {
        let max_size = n.div_ceil(t);
        RegularLayout { n, t, depth: max_size.next_power_of_two().trailing_zeros() as usize }
    }

    pub(crate) fn block_size(&self, j: usize) -> usize {
        self.n / self.t + usize::from(j < self.n % self.t)
    }

    pub(crate) fn block_start(&self, j: usize) -> usize {
        j * (self.n / self.t) + j.min(self.n % self.t)
    }

    /// Random COTs one MPCOT consumes: one per tree level.
    #[cfg(test)]
    pub(crate) fn cots(&self) -> usize {
        self.t * self.depth
    }

    /// The output positions of `trees`.
    pub(crate) fn rows(&self, trees: &Range<usize>) -> Range<usize> {
        self.block_start(trees.start)..self.block_start(trees.end)
    }

    /// Bytes the receiver sends for `trees` (the bits d, packed).
    pub(crate) fn receiver_bytes(&self, trees: usize) -> usize {
        (trees * self.depth).div_ceil(8)
    }

    /// Bytes the sender sends for `trees`: two masked level sums per level and one leaf
    /// correction per tree.
    pub(crate) fn sender_bytes(&self, trees: usize) -> usize {
        16 * trees * (2 * self.depth + 1)
    }

    /// The output positions of `trees` (`out`, starting at the first one's) split into blocks.
    fn split<'a, T>(&self, trees: &Range<usize>, mut out: &'a mut [T]) -> Vec<&'a mut [T]> {
        let mut blocks = Vec::with_capacity(trees.len());
        for j in trees.clone() {
            let (head, tail) = out.split_at_mut(self.block_size(j));
            blocks.push(head);
            out = tail;
        }
        blocks
    }
}

/// The sender's tree seeds for one iteration.
pub(crate) fn draw_seeds(layout: &RegularLayout, rng: &mut ChaCha20Rng) -> Vec<Block> {
    (0..layout.t).map(|_| random_block(rng)).collect()
}

/// The receiver's noise positions for one iteration: one per block, uniform in the block,
/// relative to its start.
pub(crate) fn draw_noise_positions(layout: &RegularLayout, rng: &mut ChaCha20Rng) -> Vec<usize> {
    (0..layout.t).map(|j| uniform_below(rng, layout.block_size(j) as u64) as usize).collect()
}

/// The fixed-key primitives of the trees: the GGM PRG and the hash that masks the level sums.
pub(crate) struct TreePrimitives {
    pub(crate) prg: GgmPrg,
    pub(crate) hash: Hasher,
}

impl TreePrimitives {
    pub(crate) fn new() -> Self {
        TreePrimitives { prg: GgmPrg::new(), hash: correlation_robust_hash() }
    }
}

/// The sender's half for `trees`: writes their leaves v over `out` (their output positions),
/// then calls `finish(first, leaves)` on each tree's slice of `out` (its first output index and
/// its leaves) while they are still in the core's caches. `cots` are the trees' random COTs `q`,
/// `depth` per tree top level first, and `seeds` their seeds.
#[allow(clippy::too_many_arguments)]
pub(crate) fn send(
    channel: &mut dyn Channel,
    layout: &RegularLayout,
    trees: Range<usize>,
    primitives: &TreePrimitives,
    delta: Block,
    cots: &[Block],
    seeds: &[Block],
    out: &mut [Block],
    finish: impl Fn(usize, &mut [Block]) + Sync,
) -> Result<()> {
    let h = layout.depth;
    let (prg, hash) = (&primitives.prg, &primitives.hash);
    debug_assert_eq!((cots.len(), seeds.len()), (trees.len() * h, trees.len()));
    debug_assert_eq!(out.len(), layout.rows(&trees).len());
    // Per tree: the level sums (K^0_l, K^1_l) for l = 1..=h, then delta ^ XOR of used leaves.
    let mut message = vec![0u128; trees.len() * (2 * h + 1)];
    let first_tree = trees.start;
    layout.split(&trees, out).into_par_iter().enumerate().zip(message.par_chunks_mut(2 * h + 1)).zip(seeds.par_iter()).for_each_init(
        || vec![0u128; 1 << h],
        |tree, (((j, leaves_out), sums), &seed)| {
            let j = first_tree + j;
            let _t = lycaon_math::profile::time(lycaon_math::profile::Kernel::OtExtension);
            tree[0] = seed;
            for level in 0..h {
                let (k0, k1) = prg.expand_level(tree, 1 << level);
                sums[2 * level] = k0;
                sums[2 * level + 1] = k1;
            }
            // Leaves with the lowest bit cleared: the receiver's choice bits live there.
            let mut leaf_sum = delta;
            for (o, &leaf) in leaves_out.iter_mut().zip(tree.iter()) {
                *o = leaf & !1;
                leaf_sum ^= leaf & !1;
            }
            sums[2 * h] = leaf_sum;
            finish(layout.block_start(j), leaves_out);
        },
    );
    let d = channel.recv_bits(cots.len())?;
    // Masks H(q ^ d delta) for K^0 and H(q ^ (1 ^ d) delta) for K^1.
    let mut masks: Vec<Block> = cots.iter().zip(&d).flat_map(|(&q, &d)| if d { [q ^ delta, q] } else { [q, q ^ delta] }).collect();
    masks.par_chunks_mut(1 << 10).for_each(|chunk| hash.ccr_many(chunk));
    message.par_chunks_mut(2 * h + 1).zip(masks.par_chunks(2 * h)).for_each(|(tree, masks)| {
        for (m, mask) in tree[..2 * h].iter_mut().zip(masks) {
            *m ^= mask;
        }
    });
    channel.send_blocks(&message)
}

/// The receiver's first half for some trees: sends the bits d that steer their levels' COTs
/// to the noise positions `alphas` (one per tree, relative to its block's start). `choices`
/// are the choice bits b of the trees' reserved COTs.
pub(crate) fn receiver_choose(channel: &mut dyn Channel, layout: &RegularLayout, choices: &[bool], alphas: &[usize]) -> Result<()> {
    let h = layout.depth;
    debug_assert_eq!(choices.len(), alphas.len() * h);
    let mut d = Vec::with_capacity(choices.len());
    for (j, &alpha) in alphas.iter().enumerate() {
        for level in 0..h {
            let path_bit = (alpha >> (h - 1 - level)) & 1 == 1;
            d.push(choices[j * h + level] ^ !path_bit);
        }
    }
    channel.send_bits(&d)
}

/// The receiver's second half for `trees`: receives the sender's message and XORs w into `out`
/// and the unit vectors e into `out_bits` (both the trees' output positions). `cots` are the
/// trees' reserved COTs' blocks t, `alphas` their noise positions.
#[allow(clippy::too_many_arguments)]
pub(crate) fn receiver_finish(
    channel: &mut dyn Channel,
    layout: &RegularLayout,
    trees: Range<usize>,
    primitives: &TreePrimitives,
    alphas: &[usize],
    cots: &[Block],
    out: &mut [Block],
    out_bits: &mut [bool],
) -> Result<()> {
    let h = layout.depth;
    let (prg, hash) = (&primitives.prg, &primitives.hash);
    debug_assert_eq!((cots.len(), alphas.len()), (trees.len() * h, trees.len()));
    let message = channel.recv_blocks(trees.len() * (2 * h + 1))?;
    let mut masks = cots.to_vec();
    masks.par_chunks_mut(1 << 10).for_each(|chunk| hash.ccr_many(chunk));
    let mut blocks: Vec<(&mut [Block], &mut [bool])> = layout.split(&trees, out).into_iter().zip(layout.split(&trees, out_bits)).collect();
    blocks.par_iter_mut().zip(message.par_chunks(2 * h + 1)).zip(masks.par_chunks(h)).zip(alphas.par_iter()).try_for_each_init(
        || vec![0u128; 1 << h],
        |tree, ((((leaves_out, bits_out), message), masks), &alpha)| {
            if alpha >= leaves_out.len() {
                return Err(MpcError::InvalidArgument(format!("noise position {alpha} outside a block of {}", leaves_out.len())));
            }
            let _t = lycaon_math::profile::time(lycaon_math::profile::Kernel::OtExtension);
            // The level sums the receiver can open: side 1 - alpha_l of level l.
            let path_bit = |level: usize| (alpha >> (h - 1 - level)) & 1;
            let known = |level: usize| message[2 * level + 1 - path_bit(level)] ^ masks[level];
            let a = path_bit(0);
            tree[a] = 0;
            tree[1 - a] = known(0);
            for level in 1..h {
                let (k0, k1) = prg.expand_level(tree, 1 << level);
                let a = path_bit(level);
                let on_path = 2 * (alpha >> (h - level)) + a;
                let sibling = on_path ^ 1;
                // The expanded placeholder put garbage at `sibling`; the side sum holds it too.
                let side_sum = if a == 0 { k1 } else { k0 };
                tree[sibling] ^= known(level) ^ side_sum;
                tree[on_path] = 0;
            }
            // The sender's leaves with their lowest bit cleared, as it sums them; the punctured
            // one, delta ^ v, then has lowest bit 1: its choice bit.
            let mut punctured = message[2 * h];
            for (o, &leaf) in leaves_out.iter_mut().zip(tree.iter()) {
                *o ^= leaf & !1;
                punctured ^= leaf & !1;
            }
            leaves_out[alpha] ^= punctured;
            bits_out[alpha] ^= true;
            Ok(())
        },
    )
}

pub(crate) fn random_block(rng: &mut ChaCha20Rng) -> Block {
    ((rng.next_u64() as u128) << 64) | rng.next_u64() as u128
}

/// Uniform in [0, bound) by rejection (bound >= 1).
fn uniform_below(rng: &mut ChaCha20Rng, bound: u64) -> u64 {
    let zone = u64::MAX - (u64::MAX - bound + 1) % bound;
    loop {
        let x = rng.next_u64();
        if x <= zone {
            return x % bound;
        }
    }
}
