//! A multiplexed convolution whose channel sum over blocks is a baby-step giant-step sum of
//! block diagonals (ours), on the packing and with the results of [`super::MpConv`].
//!
//! MPConv (Lee et al. 2022) computes p_i output channels per group, one per input copy, and sums
//! each group's products over all C_in channels of a copy by rotate-and-add (2 log k_i + log T_i
//! rotations per group), then masks and places every output channel by its own rotation. Here
//! each *block* of each copy computes its own output channel, so a group yields T_i p_i outputs
//! instead of p_i:
//!
//! 1. Input copies are replicas, so rotating by j blocks (j B slots) is a cyclic shift of the
//!    blocks inside every copy. Block beta of copy r ("producer" (r, beta), computing output
//!    channel o(r, beta)) multiplies the input rotated by tap (dy, dx) and by j blocks with the
//!    weights W[o][c][dy][dx] of the channels c of block (beta + j) mod T_i, and sums over taps
//!    and j: sum_(j, tap) D_(j, tap) (.) rot_(tap + j B)(x). That is a baby-step giant-step sum
//!    (babies: taps and the first n1 block shifts, hoisted once for all groups; giants: block
//!    shifts by multiples of n1 B), double-hoisted ([`lycaon_ckks::HoistedRotations`]). One level.
//! 2. Sum the k_i^2 channels interleaved in each block: 2 log k_i rotate-and-adds (steps 1, 2, ..
//!    and k_i w, 2 k_i w, ..): the sub-position (0, 0) of each block now holds its output channel
//!    at every stride-1 pixel.
//! 3. Placement: producer (r, beta) moves to output channel o's slots by one rotation, the same
//!    for every pixel; producers are assigned to outputs so that a whole copy (or a few blocks of
//!    it) shares one rotation. Masks (the stride-s pixels of sub-position (0, 0), the valid
//!    image) times the hoisted rotations, all groups summed over Q_l P, one ModDown. One level.
//! 4. Replicate the output copy p_o times (log p_o rotate-and-adds), as MPConv.
//!
//! Split: when the outputs need fewer than p_i lanes (T_i producers each), d copies work for
//! one lane: copy i of the lane assigns block beta the output of block (beta - i) mod T_i and sums
//! only the shifts j = 0, d, 2d, ..; across the d copies that covers every block once, the
//! placement adds the d partial sums of an output, and the block diagonals drop d-fold.
//!
//! Same plaintext products of weights as MPConv (f^2 C_out / p_i), same depth (2). Costs
//! against MPConv: [`BsgsConv::estimated_cost`].

use std::sync::Mutex;

use lycaon_ckks::ops::{CiphertextMeta, LayerOps};
use lycaon_ckks::{GiantStep, GiantSums};
use rayon::prelude::*;

use super::multiplexed::MultiplexedLayout;
use super::{FheError, FheOpCounts, FheOps};

/// Relative costs of the operations on the bootstrappable parameter set (logN = 16), in units of
/// one full rotation (decomposition, inner product, two ModDowns), from
/// `cargo run --release -p lycaon-ckks --example ckks_profile_keyswitch -- 16 6` on 2 cores:
/// rotation 85 ms, decomposition 31 ms, inner product with its automorphisms 16 ms, one ModDown
/// 20 ms; the encodings (with their products) fitted to `cargo run --release -p lycaon-nn
/// --example conv_methods` on ResNet-20's layers (about 21 ms over Q_l P, 17 limbs).
#[derive(Clone, Copy, Debug)]
pub struct OpCosts {
    pub rotation: f64,
    pub decomposition: f64,
    pub hoisted_rotation: f64,
    pub mod_down: f64,
    pub encode_q: f64,
    pub encode_qp: f64,
}

pub const OP_COSTS: OpCosts = OpCosts { rotation: 1.0, decomposition: 0.37, hoisted_rotation: 0.19, mod_down: 0.24, encode_q: 0.16, encode_qp: 0.25 };

/// The baby-step blocks n1 may not hoist more than this many rotations at once: each is held
/// over Q_l P (about 18 MB at logN = 16, level 10).
const MAX_BABIES: usize = 48;

/// Lane u, block beta -> the output channel that producer computes (None: idle).
type LaneOutput = Box<dyn Fn(usize, usize) -> Option<usize>>;

/// A convolution on the multiplexed packing by block diagonals (module docs).
#[derive(Clone, Debug)]
pub struct BsgsConv {
    input: MultiplexedLayout,
    output: MultiplexedLayout,
    c_out: usize,
    kernel: usize,
    stride: usize,
    /// [C_out][C_in][f][f].
    weights: Vec<f64>,
    /// q: groups of p_i copies of T_i producers each.
    groups: usize,
    /// Lanes (T_i producers each) the outputs need.
    lanes: usize,
    /// d: copies per lane, each summing every d-th block shift (1: no split).
    split: usize,
    /// n1: block shifts among the baby steps (a power of two dividing T_i).
    baby_blocks: usize,
    /// assign[(g p_i + r) T_i + beta]: the output channel producer (r, beta) of group g computes.
    assign: Vec<Option<usize>>,
    /// Per group, the placement: (rotation step, the output channels it moves into place; their
    /// mask is made when evaluating, [`Self::placement_mask`]: kept as masks, a wide layer's
    /// would hold hundreds of MB).
    placement: Vec<Vec<(i64, Vec<usize>)>>,
    /// M: each placement step s is the baby s mod M (hoisted per group) and the giant
    /// s - (s mod M), one rotation shared by every group ([`Self::placement_steps`]). The slot
    /// count (all babies) unless the placement needs more than [`MAX_PLACEMENT_KEYS`] steps.
    placement_modulus: usize,
}

/// A placement with more distinct steps than this (a stride-2 layer into gap 8 or 16: one per
/// output sub-position, in hundreds of groups) takes the baby/giant split with the fewest keys.
const MAX_PLACEMENT_KEYS: usize = 32;

/// Per group, the distinct babies s mod M of its placement steps; and the distinct giants
/// s - (s mod M) of all groups (steps in 0..slots).
fn split_placement(placement: &[Vec<(i64, Vec<usize>)>], modulus: usize) -> (Vec<Vec<i64>>, Vec<i64>) {
    let m = modulus as i64;
    let mut giants: Vec<i64> = Vec::new();
    let babies = placement
        .iter()
        .map(|classes| {
            let mut b: Vec<i64> = Vec::new();
            for (s, _) in classes {
                let (baby, giant) = (s.rem_euclid(m), s - s.rem_euclid(m));
                if !b.contains(&baby) {
                    b.push(baby);
                }
                if !giants.contains(&giant) {
                    giants.push(giant);
                }
            }
            b
        })
        .collect();
    (babies, giants)
}

/// The slot count when the placement needs at most [`MAX_PLACEMENT_KEYS`] steps; else the
/// power-of-two M with the fewest keys (babies and non-zero giants), the larger on a tie.
fn placement_modulus(placement: &[Vec<(i64, Vec<usize>)>], slots: usize) -> usize {
    let keys = |m: usize| {
        let (babies, giants) = split_placement(placement, m);
        let mut all: Vec<i64> = babies.into_iter().flatten().chain(giants).filter(|&s| s != 0).collect();
        all.sort_unstable();
        all.dedup();
        all.len()
    };
    let mut best = (keys(slots), slots);
    if best.0 <= MAX_PLACEMENT_KEYS {
        return slots;
    }
    let mut m = slots / 2;
    while m >= 1 {
        let k = keys(m);
        if k < best.0 {
            best = (k, m);
        }
        m /= 2;
    }
    best.1
}

impl BsgsConv {
    /// As [`super::MpConv::new`]: `weights` are [C_out][C_in][f][f], padding f/2, stride 1 or 2.
    pub fn new(input: MultiplexedLayout, c_out: usize, kernel: usize, stride: usize, weights: &[f64]) -> Result<Self, FheError> {
        Self::with_output(input, c_out, kernel, stride, weights, ((input.rows - 1) / stride + 1, (input.cols - 1) / stride + 1))
    }

    /// As [`super::MpConv::with_output`]: only the top-left `output` = (rows, cols) pixels kept.
    /// Copies that no output needs share the block sums of those that do (the split with the
    /// lowest estimated cost).
    pub fn with_output(input: MultiplexedLayout, c_out: usize, kernel: usize, stride: usize, weights: &[f64], output: (usize, usize)) -> Result<Self, FheError> {
        let mut best = Self::with_split(input, c_out, kernel, stride, weights, output, 1)?;
        let mut cost = best.estimated_cost();
        let mut d = 2;
        while d <= input.copies() && input.padded_blocks().is_multiple_of(d) {
            let Some(conv) = Self::try_split(input, c_out, kernel, stride, weights, output, d)? else { break };
            let c = conv.estimated_cost();
            if c < cost {
                (best, cost) = (conv, c);
            }
            d *= 2;
        }
        Ok(best)
    }

    /// The layer with d copies per lane, or None when the lanes need more than p_i / d copies.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn try_split(input: MultiplexedLayout, c_out: usize, kernel: usize, stride: usize, weights: &[f64], output: (usize, usize), d: usize) -> Result<Option<Self>, FheError> {
        let conv = Self::with_split(input, c_out, kernel, stride, weights, output, d)?;
        Ok((conv.groups == 1 && conv.lanes * d <= input.copies()).then_some(conv))
    }

    /// Producers: lane u = g p_i / d + r / d, copy r = u d + i of a lane sums the block shifts
    /// j = i + m d for its output o(u, (beta - i) mod T_i) (module docs, "split").
    #[allow(clippy::too_many_arguments)]
    fn with_split(input: MultiplexedLayout, c_out: usize, kernel: usize, stride: usize, weights: &[f64], output: (usize, usize), d: usize) -> Result<Self, FheError> {
        // The same checks and output layout as MPConv.
        let out = super::MpConv::checked_output(input, c_out, kernel, stride, weights, output)?;
        let (t_in, t_out, k_out2) = (input.padded_blocks(), out.padded_blocks(), out.gap * out.gap);
        let p_in = input.copies();
        // Lanes of T_i producers: output o = beta_o K_o + s (block beta_o, sub-position s).
        let (lanes, lane_of): (usize, LaneOutput) = if t_in >= t_out {
            // Block beta makes block beta mod T_o; the T_i / T_o block rounds give sub-positions.
            let m = t_in / t_out;
            (k_out2.div_ceil(m), Box::new(move |u, beta| Some((beta % t_out) * k_out2 + u * m + beta / t_out).filter(|_| u * m + beta / t_out < k_out2)))
        } else {
            // Lane u covers output blocks beta + t T_i, t = u mod e, at sub-position u / e.
            let e = t_out / t_in;
            (e * k_out2, Box::new(move |u, beta| Some((beta + (u % e) * t_in) * k_out2 + u / e).filter(|_| u / e < k_out2)))
        };
        if d == 0 || d > p_in || !t_in.is_multiple_of(d) {
            return Err(FheError::Invalid(format!("split {d}: at most the {p_in} copies, dividing the {t_in} blocks")));
        }
        let lanes_per_group = p_in / d;
        let groups = lanes.div_ceil(lanes_per_group);
        let assign: Vec<Option<usize>> = (0..groups * p_in)
            .flat_map(|gr| (0..t_in).map(move |beta| (gr, beta)))
            .map(|(gr, beta)| {
                let (g, r) = (gr / p_in, gr % p_in);
                let (u, i) = (g * lanes_per_group + r / d, r % d);
                lane_of(u, (beta + t_in - i % t_in) % t_in).filter(|&o| o < c_out)
            })
            .collect();
        let mut seen = vec![0usize; c_out];
        for &o in assign.iter().flatten() {
            seen[o] += 1;
        }
        if let Some(o) = seen.iter().position(|&s| s != d) {
            return Err(FheError::Invalid(format!("internal: output channel {o} assigned to {} producers, not {d}", seen[o])));
        }
        let (slots, block) = (input.slots as i64, input.block_len());
        let placement: Vec<Vec<(i64, Vec<usize>)>> = (0..groups)
            .map(|g| {
                let mut classes: Vec<(i64, Vec<usize>)> = Vec::new();
                for r in 0..p_in {
                    for beta in 0..t_in {
                        let Some(o) = assign[(g * p_in + r) * t_in + beta] else { continue };
                        let from = (r * input.copy_len() + beta * block) as i64;
                        let step = (from - out.slot(o, 0, 0) as i64).rem_euclid(slots);
                        match classes.iter_mut().find(|(s, _)| *s == step) {
                            Some((_, outputs)) => outputs.push(o),
                            None => classes.push((step, vec![o])),
                        }
                    }
                }
                classes
            })
            .collect();
        let placement_modulus = placement_modulus(&placement, input.slots);
        let mut conv = Self { input, output: out, c_out, kernel, stride, weights: weights.to_vec(), groups, lanes, split: d, baby_blocks: 1, assign, placement, placement_modulus };
        conv.baby_blocks = conv.cheapest_baby_blocks();
        Ok(conv)
    }

    pub fn input_layout(&self) -> &MultiplexedLayout {
        &self.input
    }

    pub fn output_layout(&self) -> &MultiplexedLayout {
        &self.output
    }

    pub fn stride(&self) -> usize {
        self.stride
    }

    pub fn out_channels(&self) -> usize {
        self.c_out
    }

    /// q: groups (one BSGS sum, sub-position sum and placement each).
    pub fn groups(&self) -> usize {
        self.groups
    }

    /// 1 at every output pixel of these output channels, 0 elsewhere.
    fn placement_mask(&self, outputs: &[usize]) -> Vec<f64> {
        let out = &self.output;
        let mut mask = vec![0.0; self.input.slots];
        for &o in outputs {
            for y in 0..out.rows {
                for x in 0..out.cols {
                    mask[out.slot(o, y, x)] = 1.0;
                }
            }
        }
        mask
    }

    /// M of the placement's baby/giant split (the slot count: every step a baby).
    pub fn placement_modulus(&self) -> usize {
        self.placement_modulus
    }

    /// n1: block shifts among the baby steps.
    pub fn baby_blocks(&self) -> usize {
        self.baby_blocks
    }

    /// The same layer with n1 block shifts among the baby steps (a power of two dividing T_i).
    pub fn with_baby_blocks(mut self, n1: usize) -> Result<Self, FheError> {
        if !n1.is_power_of_two() || n1 > self.shifts() {
            return Err(FheError::Invalid(format!("baby blocks {n1}: a power of two up to {}", self.shifts())));
        }
        self.baby_blocks = n1;
        Ok(self)
    }

    fn tap_offsets(&self) -> Vec<i64> {
        super::mpconv::tap_steps(&self.input, self.kernel)
    }

    /// Block shifts summed by each producer: T_i / d (shift index jj is the shift jj d).
    fn shifts(&self) -> usize {
        self.input.padded_blocks() / self.split
    }

    /// d copies per lane (1: no split).
    pub fn split(&self) -> usize {
        self.split
    }

    fn baby_steps_for(&self, n1: usize) -> Vec<i64> {
        let block = (self.input.block_len() * self.split) as i64;
        let taps = self.tap_offsets();
        let mut s: Vec<i64> = (0..n1 as i64).flat_map(|jb| taps.iter().map(move |&t| t + jb * block)).map(|x| x.rem_euclid(self.input.slots as i64)).collect();
        s.sort_unstable();
        s.dedup();
        s
    }

    fn giant_steps_for(&self, n1: usize) -> Vec<i64> {
        let block = (self.input.block_len() * self.split) as i64;
        (1..(self.shifts() / n1) as i64).map(|jg| jg * n1 as i64 * block).collect()
    }

    /// Step 2's rotate-and-add steps over the k_i^2 sub-positions of a block.
    fn sub_sum_steps(&self) -> Vec<i64> {
        super::mpconv::sub_position_sum_steps(&self.input)
    }

    fn replication_steps(&self) -> Vec<i64> {
        super::mpconv::replication_steps(&self.output)
    }

    /// Every rotation step the evaluation needs a key for.
    pub fn rotation_steps(&self) -> Vec<i64> {
        let slots = self.input.slots as i64;
        let mut s: Vec<i64> = self
            .baby_steps_for(self.baby_blocks)
            .into_iter()
            .chain(self.giant_steps_for(self.baby_blocks))
            .chain(self.sub_sum_steps())
            .chain({
                let (babies, giants) = split_placement(&self.placement, self.placement_modulus);
                babies.into_iter().flatten().chain(giants)
            })
            .chain(self.replication_steps())
            .map(|x| x.rem_euclid(slots))
            .filter(|&x| x != 0)
            .collect();
        s.sort_unstable();
        s.dedup();
        s
    }

    /// The non-zero weights of block diagonal (shift j, tap (dy, dx)) of group g, each with the
    /// slot of its producer block's sub-position at pixel (0, 0).
    fn diagonal_weights(&self, g: usize, j: usize, dy: usize, dx: usize) -> impl Iterator<Item = (usize, f64)> + '_ {
        let l = &self.input;
        let (f, k, t_in, p_in, c_in) = (self.kernel, l.gap, l.padded_blocks(), l.copies(), l.channels);
        (0..p_in).flat_map(move |r| (0..t_in).map(move |beta| (r, beta))).flat_map(move |(r, beta)| {
            let o = self.assign[(g * p_in + r) * t_in + beta];
            let src_block = (beta + j) % t_in;
            (0..k * k).map(move |sub| (sub, src_block * k * k + sub)).take_while(move |&(_, c)| o.is_some() && c < c_in).filter_map(move |(sub, c)| {
                let o = o?;
                let wv = self.weights[((o * c_in + c) * f + dy) * f + dx];
                (wv != 0.0).then(|| (r * l.copy_len() + beta * l.block_len() + (sub / k) * l.row_len() + sub % k, wv))
            })
        })
    }

    /// Block diagonal (j, tap (dy, dx)) of group g, None when all its weights are zero (skipped).
    fn diagonal(&self, g: usize, j: usize, dy: usize, dx: usize) -> Option<Vec<f64>> {
        let l = &self.input;
        let (k, pad) = (l.gap, (self.kernel / 2) as isize);
        let (h, w) = (l.rows as isize, l.cols as isize);
        let mut v: Option<Vec<f64>> = None;
        for (base, wv) in self.diagonal_weights(g, j, dy, dx) {
            let v = v.get_or_insert_with(|| vec![0.0; l.slots]);
            for y in 0..h {
                let iy = y + dy as isize - pad;
                if iy < 0 || iy >= h {
                    continue;
                }
                for x in 0..w {
                    let ix = x + dx as isize - pad;
                    if ix < 0 || ix >= w {
                        continue;
                    }
                    v[base + (k * y as usize) * l.row_len() + k * x as usize] = wv;
                }
            }
        }
        v
    }

    /// The non-zero block diagonals of group g: ((shift index jj, tap index), values); shift jj
    /// moves by jj d blocks.
    fn diagonals(&self, g: usize) -> Vec<((usize, usize), Vec<f64>)> {
        let f = self.kernel;
        let items: Vec<(usize, usize)> = (0..self.shifts()).flat_map(|jj| (0..f * f).map(move |t| (jj, t))).collect();
        items.par_iter().filter_map(|&(jj, t)| self.diagonal(g, jj * self.split, t / f, t % f).map(|v| ((jj, t), v))).collect()
    }

    /// Per group, the block shifts j with a non-zero diagonal (none: the group is skipped).
    fn used_blocks(&self) -> Vec<Vec<usize>> {
        (0..self.groups)
            .map(|g| {
                let f = self.kernel;
                (0..self.shifts()).flat_map(|jj| (0..f * f).map(move |t| (jj, t))).filter(|&(jj, t)| self.diagonal_weights(g, jj * self.split, t / f, t % f).next().is_some()).map(|(jj, _)| jj).collect()
            })
            .collect()
    }

    /// Operations of one evaluation: rotations (key switches, hoisted ones one each) = baby
    /// steps + per group (its giant steps + 2 log k_i + its placement steps) + log p_o;
    /// plaintext products = non-zero block diagonals + placement masks; rescales = groups + 1;
    /// depth 2.
    pub fn counts(&self) -> FheOpCounts {
        let slots = self.input.slots as i64;
        let n1 = self.baby_blocks;
        let mut c = FheOpCounts { rotations: self.baby_steps_for(n1).iter().filter(|&&s| s != 0).count() as u64 + self.replication_steps().len() as u64, plain_mults: 0, rescales: 1, depth: 2 };
        let (placement_babies, _) = split_placement(&self.placement, self.placement_modulus);
        let mut placement_giants: Vec<i64> = Vec::new();
        for ((js, placement), babies) in self.used_blocks().iter().zip(&self.placement).zip(&placement_babies) {
            if js.is_empty() {
                continue;
            }
            let mut giants: Vec<usize> = js.iter().map(|j| j / n1).filter(|&jg| jg != 0).collect();
            giants.dedup();
            c.rotations += giants.len() as u64 + self.sub_sum_steps().len() as u64 + babies.iter().filter(|&&b| b.rem_euclid(slots) != 0).count() as u64;
            c.plain_mults += js.len() as u64 + placement.len() as u64;
            c.rescales += 1;
            let m = self.placement_modulus as i64;
            placement_giants.extend(placement.iter().map(|(s, _)| s - s.rem_euclid(m)).filter(|&g| g != 0));
        }
        placement_giants.sort_unstable();
        placement_giants.dedup();
        c.rotations += placement_giants.len() as u64;
        c
    }

    fn nonzero_diagonals(&self) -> usize {
        self.used_blocks().iter().map(Vec::len).sum()
    }

    fn cost_with(&self, n1: usize, diagonals: usize) -> f64 {
        let c = OP_COSTS;
        let q = self.groups as f64;
        let babies = self.baby_steps_for(n1).iter().filter(|&&s| s != 0).count() as f64;
        let giants = self.giant_steps_for(n1).len() as f64;
        let giant = c.mod_down + c.decomposition + c.hoisted_rotation;
        let (babies_per_group, placement_giants) = split_placement(&self.placement, self.placement_modulus);
        let placement: f64 = self.placement.iter().zip(&babies_per_group).map(|(p, b)| c.decomposition + b.len() as f64 * c.hoisted_rotation + p.len() as f64 * c.encode_qp).sum::<f64>()
            + placement_giants.iter().filter(|&&g| g != 0).count() as f64 * giant;
        c.decomposition
            + babies * c.hoisted_rotation
            + diagonals as f64 * c.encode_qp
            + q * (giants * giant + 2.0 * c.mod_down + self.sub_sum_steps().len() as f64 * c.rotation)
            + placement
            + 2.0 * c.mod_down
            + self.replication_steps().len() as f64 * c.rotation
    }

    /// Estimated time of one evaluation in full rotations ([`OP_COSTS`]).
    pub fn estimated_cost(&self) -> f64 {
        self.cost_with(self.baby_blocks, self.nonzero_diagonals())
    }

    fn cheapest_baby_blocks(&self) -> usize {
        let diagonals = self.nonzero_diagonals();
        let mut best = (f64::INFINITY, 1);
        let mut n1 = 1;
        while n1 <= self.shifts() {
            if n1 == 1 || self.baby_steps_for(n1).len() <= MAX_BABIES {
                let cost = self.cost_with(n1, diagonals);
                if cost < best.0 {
                    best = (cost, n1);
                }
            }
            n1 *= 2;
        }
        best.1
    }

    /// Evaluates on a ciphertext in the input packing (every copy filled); the result is in
    /// [`Self::output_layout`], two levels lower.
    pub fn evaluate<E: LayerOps>(&self, ops: &FheOps<E>, ct: &E::Ct) -> Result<E::Ct, FheError> {
        if ct.slots() != self.input.slots {
            return Err(FheError::Invalid(format!("the ciphertext has {} slots, the packing {}", ct.slots(), self.input.slots)));
        }
        if ct.level() < 2 {
            return Err(FheError::Invalid(format!("the convolution consumes 2 levels, the ciphertext is at level {}", ct.level())));
        }
        let n1 = self.baby_blocks;
        let block = (self.input.block_len() * self.split) as i64;
        let taps = self.tap_offsets();
        let hoisted = ops.hoist_rotations(ct, &self.baby_steps_for(n1))?;
        // Every group's placement terms, their giant rotations shared (one sum, bounded memory).
        let placed: Mutex<Option<GiantSums<E::Poly>>> = Mutex::new(None);
        let modulus = self.placement_modulus as i64;
        (0..self.groups)
            .into_par_iter()
            .try_for_each(|g| -> Result<(), FheError> {
                let diagonals = self.diagonals(g);
                let giants: Vec<GiantStep> = (0..self.shifts() / n1)
                    .map(|jg| GiantStep {
                        giant: (jg * n1) as i64 * block,
                        terms: diagonals.iter().filter(|((j, _), _)| j / n1 == jg).map(|((j, t), v)| (taps[*t] + (j % n1) as i64 * block, v.as_slice())).collect(),
                    })
                    .filter(|g| !g.terms.is_empty())
                    .collect();
                if giants.is_empty() {
                    return Ok(());
                }
                let mut v = ops.finish_extended(ops.rotated_products(&hoisted, &giants)?)?;
                for step in self.sub_sum_steps() {
                    let r = ops.rotate(&v, step)?;
                    v = ops.add(&v, &r)?;
                }
                let classes = &self.placement[g];
                let masks: Vec<Vec<f64>> = classes.iter().map(|(_, outputs)| self.placement_mask(outputs)).collect();
                let mut babies: Vec<i64> = classes.iter().map(|(s, _)| s.rem_euclid(modulus)).collect();
                babies.sort_unstable();
                babies.dedup();
                let moved = ops.hoist_rotations(&v, &babies)?;
                let mut by_giant: Vec<GiantStep> = Vec::new();
                for ((s, _), m) in classes.iter().zip(&masks) {
                    let (baby, giant) = (s.rem_euclid(modulus), s - s.rem_euclid(modulus));
                    match by_giant.iter_mut().find(|x| x.giant == giant) {
                        Some(x) => x.terms.push((baby, m.as_slice())),
                        None => by_giant.push(GiantStep { giant, terms: vec![(baby, m.as_slice())] }),
                    }
                }
                let mut sums = ops.giant_sums(&moved)?;
                ops.add_rotated_products(&mut sums, &moved, &by_giant)?;
                let mut all = placed.lock().map_err(|_| FheError::Invalid("a placement lock is poisoned".into()))?;
                match all.as_mut() {
                    Some(a) => ops.merge_giant_sums(a, sums)?,
                    None => *all = Some(sums),
                }
                Ok(())
            })?;
        let placed = placed.into_inner().map_err(|_| FheError::Invalid("a placement lock is poisoned".into()))?;
        let mut out = ops.finish_extended(ops.close_giant_sums(placed.ok_or_else(|| FheError::Invalid("no output channel".into()))?)?)?;
        for step in self.replication_steps() {
            let r = ops.rotate(&out, step)?;
            out = ops.add(&out, &r)?;
        }
        Ok(out)
    }
}
