//! Multi-point COT with regular noise: the length-n output is cut into t consecutive blocks of
//! n / t positions (the first n mod t blocks one longer), and each block is a single-point COT
//! built from a half-tree (Guo, Yang, Wang, Zhang, Xie, Liu and Zhao, Eurocrypt 2023; Ferret,
//! section 4, with the GGM tree of Schoppmann et al., CCS 2019, in its place).
//!
//! For a block of `size` positions the tree has depth h = ceil(log2(size)) and 2^h leaves, of
//! which the first `size` are used. The sender learns leaves v; the receiver, with a noise
//! position alpha in [0, size), learns w with w_i = v_i for i != alpha and w_alpha = v_alpha ^
//! delta. The sender's first level is (s, s ^ delta) for a random s, and a node x has children
//! H(x) and x ^ H(x) ([`HalfTreeHash`]): children XOR to their parent, so every level's nodes XOR
//! to delta and the sum K^1_l of a level's right children is K^0_l ^ delta. Level l costs one
//! random COT (q, t = q ^ b delta): the receiver, whose path takes side alpha_l there, sends
//! d = b ^ alpha_l, and the sender sends K^0_l ^ q ^ (1 ^ d) delta, which the receiver's t turns
//! into K^{1 - alpha_l}_l, the sum of the side off its path: h blocks per tree, half the GGM
//! tree's 2h, and one hash per node instead of two PRG calls. The receiver keeps, at the node on
//! its path, the XOR of the level's other nodes (the true node ^ delta), which the same
//! expansion carries down. Finally the sender sends delta ^ XOR of the used leaves, from which
//! the receiver gets w_alpha (needed where a block is not a whole tree).
//!
//! Leaf i's path is its binary digits, lowest first: level l's side is bit l - 1 of i.
//!
//! Any run of consecutive trees is two messages whatever their number and h are: the receiver's
//! h bits d per tree, then the sender's h + 1 blocks per tree. The trees are expanded in
//! parallel. The tree seeds and the noise positions are drawn for a whole iteration at its start
//! ([`draw_seeds`], [`draw_noise_positions`]), so the output does not depend on how the
//! iteration's trees are cut into runs.

use std::ops::Range;

use rand_chacha::ChaCha20Rng;
use rand_core::Rng;
use rayon::prelude::*;

use super::fixed_key::HalfTreeHash;
use crate::channel::Channel;
use crate::cot::Block;
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

    /// Bytes the sender sends for `trees`: one masked level sum per level and one leaf
    /// correction per tree.
    pub(crate) fn sender_bytes(&self, trees: usize) -> usize {
        16 * trees * (self.depth + 1)
    }

    /// The output positions of `trees` (`out`, starting at the first one's) split into blocks.
    pub(crate) fn split<'a, T>(&self, trees: &Range<usize>, mut out: &'a mut [T]) -> Vec<&'a mut [T]> {
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

/// The fixed-key primitive of the trees: the half-tree's expansion.
pub(crate) struct TreePrimitives {
    pub(crate) tree: HalfTreeHash,
}

impl TreePrimitives {
    pub(crate) fn new() -> Self {
        TreePrimitives { tree: HalfTreeHash::new() }
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
    let half_tree = &primitives.tree;
    debug_assert_eq!((cots.len(), seeds.len()), (trees.len() * h, trees.len()));
    debug_assert_eq!(out.len(), layout.rows(&trees).len());
    // Per tree: the left sums K^0_l for l = 1..=h, then delta ^ XOR of the used leaves.
    let mut message = vec![0u128; trees.len() * (h + 1)];
    let first_tree = trees.start;
    layout.split(&trees, out).into_par_iter().enumerate().zip(message.par_chunks_mut(h + 1)).zip(seeds.par_iter()).for_each_init(
        || vec![0u128; 1 << h],
        |tree, (((j, leaves_out), sums), &seed)| {
            let j = first_tree + j;
            let _t = lycaon_math::profile::time(lycaon_math::profile::Kernel::OtExtension);
            tree[0] = seed;
            tree[1] = seed ^ delta;
            sums[0] = seed;
            for (level, sum) in sums.iter_mut().enumerate().take(h).skip(1) {
                *sum = half_tree.expand_level(tree, 1 << level);
            }
            // Leaves with the lowest bit cleared: the receiver's choice bits live there.
            let mut leaf_sum = delta;
            for (o, &leaf) in leaves_out.iter_mut().zip(tree.iter()) {
                *o = leaf & !1;
                leaf_sum ^= leaf & !1;
            }
            sums[h] = leaf_sum;
            finish(layout.block_start(j), leaves_out);
        },
    );
    let d = channel.recv_bits(cots.len())?;
    // K^0 ^ q ^ (1 ^ d) delta: the receiver's t = q ^ b delta opens the side off its path.
    message.par_chunks_mut(h + 1).zip(cots.par_chunks(h)).zip(d.par_chunks(h)).for_each(|((tree, cots), d)| {
        for ((m, &q), &d) in tree[..h].iter_mut().zip(cots).zip(d) {
            *m ^= if d { q } else { q ^ delta };
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
            let side = (alpha >> level) & 1 == 1;
            d.push(choices[j * h + level] ^ side);
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
    let half_tree = &primitives.tree;
    debug_assert_eq!((cots.len(), alphas.len()), (trees.len() * h, trees.len()));
    let message = channel.recv_blocks(trees.len() * (h + 1))?;
    let mut blocks: Vec<(&mut [Block], &mut [bool])> = layout.split(&trees, out).into_iter().zip(layout.split(&trees, out_bits)).collect();
    blocks.par_iter_mut().zip(message.par_chunks(h + 1)).zip(cots.par_chunks(h)).zip(alphas.par_iter()).try_for_each_init(
        || vec![0u128; 1 << h],
        |tree, ((((leaves_out, bits_out), message), cots), &alpha)| {
            if alpha >= leaves_out.len() {
                return Err(MpcError::InvalidArgument(format!("noise position {alpha} outside a block of {}", leaves_out.len())));
            }
            let _t = lycaon_math::profile::time(lycaon_math::profile::Kernel::OtExtension);
            // The sum of level l's side off the path (side 1 - alpha_l).
            let off_path_sum = |level: usize| message[level] ^ cots[level];
            // Level 1: the node off the path, and on the path the XOR of the level's others
            // (the same node): the true node ^ delta.
            tree[0] = off_path_sum(0);
            tree[1] = tree[0];
            for level in 1..h {
                let len = 1 << level;
                let on_path = alpha & (len - 1);
                // The node on the path expands to its children's true values ^ (0, delta) or
                // (delta, 0) plus the hash's error, which the known side sum corrects: after
                // this, the child off the path is true and the one on it is true ^ delta.
                let fix = off_path_sum(level) ^ half_tree.expand_level(tree, len);
                tree[on_path] ^= fix;
                tree[on_path + len] ^= fix;
            }
            // The sender's leaves with their lowest bit cleared, as it sums them; the punctured
            // one, delta ^ v, then has lowest bit 1: its choice bit.
            tree[alpha] = 0;
            let mut punctured = message[h];
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
pub(crate) fn uniform_below(rng: &mut ChaCha20Rng, bound: u64) -> u64 {
    let zone = u64::MAX - (u64::MAX - bound + 1) % bound;
    loop {
        let x = rng.next_u64();
        if x <= zone {
            return x % bound;
        }
    }
}
