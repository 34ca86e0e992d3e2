//! Multiplexed parallel convolution (MPConv, Lee et al. 2022) on one ciphertext in the
//! multiplexed packing of [`super::multiplexed`].
//!
//! Input: C_in channels of h x w at gap k_i, p_i copies. Kernel f x f, padding f/2, stride s in
//! {1, 2}. Output: C_out channels of (h/s) x (w/s) at gap k_o = s k_i, p_o copies.
//!
//! 1. Tap rotations, shared by every output channel ("parallel"): for each tap (dy, dx), rotate
//!    the input by (dy - f/2) k_i (k_i w) + (dx - f/2) k_i, all hoisted on one decomposition
//!    (f^2 - 1 rotations).
//! 2. For each group g of p_i output channels (q = ceil(C_out / p_i) groups), copy r of the
//!    packing works for output channel o = g p_i + r: multiply each rotated input by a plaintext
//!    holding, at the slot of (c, y, x) in copy r, the weight W[o][c][dy][dx] if input pixel
//!    (y + dy - f/2, x + dx - f/2) exists and 0 otherwise (zero padding), and sum the f^2
//!    products; one rescale.
//! 3. Sum over input channels by rotate-and-add: log2 k_i steps along a grid row (1, 2, ...),
//!    log2 k_i steps across rows (k_i w, 2 k_i w, ...) and log2 T_i steps across blocks. The slot
//!    of channel 0 at pixel (y, x) in copy r now holds output channel o at stride-1 pixel (y, x).
//! 4. Output placement: for each output channel, multiply by the mask of copy r's channel-0
//!    slots at pixels (s y', s x') (this also does the stride-2 downsampling), and rotate them to
//!    the slots of channel o in the output packing (gap k_o); the offset is the same for every
//!    pixel, so one rotation per output channel. All masked terms share a scale: summed, then one
//!    rescale. Placement by baby and giant steps (ours, to cut rotation keys): with
//!    o = u g + v and g a multiple of p_i and k_o^2, the offset of o is a baby offset that
//!    depends on v only plus a giant offset -u (g / k_o^2) (block length) that depends on u
//!    only; so channel o is rotated by its baby offset into the accumulator of u, and each
//!    accumulator once by its giant offset: g + C_out / g distinct steps instead of C_out, and
//!    no more rotations (channel u g's own offset is 0, its rotation is u's giant step). g
//!    minimises the distinct steps (g = C_out is the plain one-rotation-per-channel placement).
//!    `cargo run --release -p lycaon-nn --example mpconv_placement` measures both on ResNet-20's
//!    layers.
//! 5. Replicate the output copy p_o times by log2 p_o rotate-and-adds.
//!
//! Depth 2 (weights, masks). Operation counts: [`MpConv::counts`].

use super::multiplexed::MultiplexedLayout;
use super::{FheError, FheOpCounts, FheOps};
use lycaon_ckks::ops::{CiphertextMeta, LayerOps};
use rayon::prelude::*;

/// An MPConv layer with its weights laid out as plaintext slot vectors.
#[derive(Clone, Debug)]
pub struct MpConv {
    input: MultiplexedLayout,
    output: MultiplexedLayout,
    c_out: usize,
    kernel: usize,
    stride: usize,
    /// weight_vectors[g][tap]: the slot vector of step 2 for group g, tap dy * f + dx.
    weight_vectors: Vec<Vec<Vec<f64>>>,
    /// masks[r]: the step-4 mask of copy r.
    masks: Vec<Vec<f64>>,
    /// Step 4's rotations.
    placement: Placement,
}

/// Step 4's rotations for C_out output channels from an input packing to an output packing:
/// channel o = u g + v is rotated by `baby[v]` into the accumulator of u, and accumulator u by
/// `giant[u]` (module docs). Shared with the planner's rotation table (lycaon-plan).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// g: output channels per giant step (a power of two, a multiple of p_i and k_o^2).
    pub group: usize,
    /// Baby offsets, v < min(g, C_out).
    pub baby: Vec<i64>,
    /// Giant offsets, u < ceil(C_out / g).
    pub giant: Vec<i64>,
}

impl Placement {
    /// The placement with output group size g. Errors unless g is a power of two from
    /// max(p_i, k_o^2) to C_out rounded up (or that minimum).
    pub fn with_group(input: &MultiplexedLayout, output: &MultiplexedLayout, c_out: usize, g: usize) -> Result<Self, FheError> {
        let unit = input.copies().max(output.gap * output.gap);
        let top = c_out.next_power_of_two().max(unit);
        if !(g.is_power_of_two() && g >= unit && g <= top) {
            return Err(FheError::Invalid(format!("placement group {g}: a power of two from {unit} to {top}")));
        }
        let slots = input.slots as i64;
        let baby = (0..g.min(c_out))
            .map(|v| ((v % input.copies() * input.copy_len()) as i64 - output.slot(v, 0, 0) as i64).rem_euclid(slots))
            .collect();
        // Channel u g + v sits u g / k_o^2 blocks after channel v.
        let k2 = output.gap * output.gap;
        let giant = (0..c_out.div_ceil(g)).map(|u| (-((u * (g / k2) * output.block_len()) as i64)).rem_euclid(slots)).collect();
        Ok(Self { group: g, baby, giant })
    }

    /// The g with the fewest distinct steps (ties: the larger g, fewer rotations); g = C_out is
    /// the plain one-rotation-per-channel placement.
    pub fn fewest_keys(input: &MultiplexedLayout, output: &MultiplexedLayout, c_out: usize) -> Result<Self, FheError> {
        let unit = input.copies().max(output.gap * output.gap);
        let mut g = c_out.next_power_of_two().max(unit);
        let mut best = Self::with_group(input, output, c_out, g)?;
        while g > unit {
            g /= 2;
            let p = Self::with_group(input, output, c_out, g)?;
            if p.distinct_steps().len() < best.distinct_steps().len() {
                best = p;
            }
        }
        Ok(best)
    }

    /// The baby offset of output channel o.
    pub fn baby_of(&self, o: usize) -> i64 {
        self.baby[o % self.group]
    }

    /// Distinct non-zero steps.
    pub fn distinct_steps(&self) -> Vec<i64> {
        let mut s: Vec<i64> = self.baby.iter().chain(&self.giant).copied().filter(|&x| x != 0).collect();
        s.sort_unstable();
        s.dedup();
        s
    }

    /// Rotations of one evaluation over `c_out` channels.
    pub fn rotations(&self, c_out: usize) -> usize {
        (0..c_out).filter(|&o| self.baby_of(o) != 0).count() + self.giant.iter().filter(|&&x| x != 0).count()
    }
}

impl MpConv {
    /// `weights` are [C_out][C_in][f][f]. Errors when the kernel is even, the stride not 1 or 2,
    /// the grid not divisible by the stride, or the output does not fit the slots. The output
    /// image has ceil(rows / s) x ceil(cols / s) pixels (padding f/2).
    pub fn new(input: MultiplexedLayout, c_out: usize, kernel: usize, stride: usize, weights: &[f64]) -> Result<Self, FheError> {
        Self::with_output(input, c_out, kernel, stride, weights, ((input.rows - 1) / stride + 1, (input.cols - 1) / stride + 1))
    }

    /// The checks of [`Self::with_output`] and its output layout, without building the layer
    /// (the block-diagonal convolution shares them: same packing in and out).
    pub(crate) fn checked_output(input: MultiplexedLayout, c_out: usize, kernel: usize, stride: usize, weights: &[f64], output: (usize, usize)) -> Result<MultiplexedLayout, FheError> {
        if kernel.is_multiple_of(2) {
            return Err(FheError::Invalid(format!("kernel {kernel}: MPConv pads by f/2 and needs an odd kernel")));
        }
        if stride != 1 && stride != 2 {
            return Err(FheError::Invalid(format!("stride {stride}: only 1 and 2 are supported")));
        }
        if !input.height.is_multiple_of(stride) || !input.width.is_multiple_of(stride) || input.height < stride || input.width < stride {
            return Err(FheError::Invalid(format!("{} x {} grid with stride {stride}", input.height, input.width)));
        }
        let largest = ((input.rows - 1) / stride + 1, (input.cols - 1) / stride + 1);
        if output.0 == 0 || output.1 == 0 || output.0 > largest.0 || output.1 > largest.1 {
            return Err(FheError::Invalid(format!("a {} x {} output of a {} x {} image at stride {stride} (at most {} x {})", output.0, output.1, input.rows, input.cols, largest.0, largest.1)));
        }
        let expected = c_out * input.channels * kernel * kernel;
        if weights.len() != expected {
            return Err(FheError::Invalid(format!("expected {expected} weights, got {}", weights.len())));
        }
        MultiplexedLayout::new(c_out, input.height / stride, input.width / stride, input.gap * stride, input.slots)?.with_valid(output.0, output.1)
    }

    /// [`Self::new`] keeping only the top-left `output` = (rows, cols) pixels of the result (at
    /// most ceil(rows / s) x ceil(cols / s)); the rest are masked to zero. An average pooling
    /// whose windows end before the padding (floor instead of ceil) is this.
    pub fn with_output(input: MultiplexedLayout, c_out: usize, kernel: usize, stride: usize, weights: &[f64], output: (usize, usize)) -> Result<Self, FheError> {
        let output = Self::checked_output(input, c_out, kernel, stride, weights, output)?;
        let c_in = input.channels;
        // Off-image pixels read as zero padding: their taps get no weight.
        let (h, w, pad) = (input.rows as isize, input.cols as isize, (kernel / 2) as isize);
        let p_in = input.copies();
        let groups = c_out.div_ceil(p_in);
        let mut weight_vectors = Vec::with_capacity(groups);
        for g in 0..groups {
            let mut taps = Vec::with_capacity(kernel * kernel);
            for dy in 0..kernel {
                for dx in 0..kernel {
                    let mut v = vec![0.0; input.slots];
                    for r in 0..p_in {
                        let o = g * p_in + r;
                        if o >= c_out {
                            break;
                        }
                        for c in 0..c_in {
                            let wv = weights[((o * c_in + c) * kernel + dy) * kernel + dx];
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
                                    v[r * input.copy_len() + input.slot(c, y as usize, x as usize)] = wv;
                                }
                            }
                        }
                    }
                    taps.push(v);
                }
            }
            weight_vectors.push(taps);
        }
        let masks = (0..p_in)
            .map(|r| {
                let mut m = vec![0.0; input.slots];
                for y in 0..output.rows {
                    for x in 0..output.cols {
                        // Channel 0 of copy r at stride-1 pixel (s y, s x).
                        m[r * input.copy_len() + input.slot(0, stride * y, stride * x)] = 1.0;
                    }
                }
                m
            })
            .collect();
        let placement = Placement::fewest_keys(&input, &output, c_out)?;
        Ok(Self { input, output, c_out, kernel, stride, weight_vectors, masks, placement })
    }

    /// g: output channels per giant step of the placement (C_out rounded up to a power of two:
    /// one rotation per channel, no giant steps).
    pub fn placement_group(&self) -> usize {
        self.placement.group
    }

    /// The same layer with output group size g (for comparisons; [`Placement::with_group`]).
    pub fn with_placement_group(mut self, g: usize) -> Result<Self, FheError> {
        self.placement = Placement::with_group(&self.input, &self.output, self.c_out, g)?;
        Ok(self)
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

    /// q: output-channel groups (one pass of steps 2-3 each).
    pub fn groups(&self) -> usize {
        self.weight_vectors.len()
    }

    fn tap_steps(&self) -> Vec<i64> {
        tap_steps(&self.input, self.kernel)
    }

    /// Step 3: rotate-and-add steps summing the channels of one copy into channel 0's slots.
    fn channel_sum_steps(&self) -> Vec<i64> {
        let l = &self.input;
        let blocks = (0..l.padded_blocks().trailing_zeros()).map(|j| (l.block_len() << j) as i64);
        sub_position_sum_steps(l).into_iter().chain(blocks).collect()
    }

    /// Step 5: rotate-and-add steps filling the p_o output copies.
    fn replication_steps(&self) -> Vec<i64> {
        replication_steps(&self.output)
    }

    /// Every rotation step the evaluation needs a key for.
    pub fn rotation_steps(&self) -> Vec<i64> {
        let mut s: Vec<i64> = self.tap_steps().into_iter().chain(self.channel_sum_steps()).chain(self.placement.distinct_steps()).chain(self.replication_steps()).collect();
        s.retain(|&x| x.rem_euclid(self.input.slots as i64) != 0);
        s.sort_unstable();
        s.dedup();
        s
    }

    /// Operations of one evaluation, from the algorithm's structure (not from running it):
    /// rotations (f^2 - 1) + q (2 log k_i + log T_i) + #{o : baby offset != 0}
    /// + #{u : giant offset != 0} + log p_o;
    /// plaintext products q f^2 + C_out; rescales q + 1; depth 2.
    pub fn counts(&self) -> FheOpCounts {
        let f2 = (self.kernel * self.kernel) as u64;
        let q = self.groups() as u64;
        let sum_rot = self.channel_sum_steps().len() as u64;
        let placements = self.placement.rotations(self.c_out) as u64;
        let replication = self.replication_steps().len() as u64;
        FheOpCounts { rotations: (f2 - 1) + q * sum_rot + placements + replication, plain_mults: q * f2 + self.c_out as u64, rescales: q + 1, depth: 2 }
    }

    /// Evaluates on a ciphertext in the input packing; the result is in [`Self::output_layout`],
    /// two levels lower.
    pub fn evaluate<E: LayerOps>(&self, ops: &FheOps<E>, ct: &E::Ct) -> Result<E::Ct, FheError> {
        if ct.slots() != self.input.slots {
            return Err(FheError::Invalid(format!("the ciphertext has {} slots, the packing {}", ct.slots(), self.input.slots)));
        }
        if ct.level() < 2 {
            return Err(FheError::Invalid(format!("MPConv consumes 2 levels, the ciphertext is at level {}", ct.level())));
        }
        // Step 1: one hoisted batch of tap rotations, reused by every group.
        let rotated = ops.rotate_hoisted(ct, &self.tap_steps())?;
        // Steps 2-4 per group, groups in parallel (each thread folds its groups into its own
        // accumulators, one per giant step u, holding channels u g .. u g + g - 1 at baby
        // offsets); sums mod q are exact, so the order of the additions does not matter.
        let empty = || -> Vec<Option<E::Ct>> { (0..self.c_out.div_ceil(self.placement.group)).map(|_| None).collect() };
        let giants = self
            .weight_vectors
            .par_iter()
            .enumerate()
            .try_fold(empty, |mut giants, (g, taps)| -> Result<_, FheError> {
                self.group_into(ops, &rotated, g, taps, &mut giants)?;
                Ok(giants)
            })
            .try_reduce(empty, |mut a, b| {
                for (x, y) in a.iter_mut().zip(b) {
                    *x = sum(ops, x.take(), y)?;
                }
                Ok(a)
            })?;
        let mut out: Option<E::Ct> = None;
        for (part, &step) in giants.into_iter().zip(&self.placement.giant) {
            let Some(part) = part else { continue };
            let placed = if step == 0 { part } else { ops.rotate(&part, step)? };
            out = Some(match out {
                Some(a) => ops.add(&a, &placed)?,
                None => placed,
            });
        }
        let mut out = ops.rescale(&out.ok_or(FheError::Invalid("no output channel".into()))?)?;
        // Step 5: fill the output copies.
        for step in self.replication_steps() {
            let r = ops.rotate(&out, step)?;
            out = ops.add(&out, &r)?;
        }
        Ok(out)
    }
}

impl MpConv {
    /// Steps 2-4 for group `g`: the weighted sum over taps, the channel sum, and each copy's
    /// outputs masked and placed into `giants`.
    fn group_into<E: LayerOps>(&self, ops: &FheOps<E>, rotated: &[E::Ct], g: usize, taps: &[Vec<f64>], giants: &mut [Option<E::Ct>]) -> Result<(), FheError> {
        let mut acc: Option<E::Ct> = None;
        for (rot, weights) in rotated.iter().zip(taps) {
            acc = sum(ops, acc, Some(ops.mul_values(rot, weights)?))?;
        }
        let mut acc = ops.rescale(&acc.ok_or(FheError::Invalid("empty kernel".into()))?)?;
        for step in self.channel_sum_steps() {
            let r = ops.rotate(&acc, step)?;
            acc = ops.add(&acc, &r)?;
        }
        let p_in = self.input.copies();
        for (r, mask) in self.masks.iter().enumerate() {
            let o = g * p_in + r;
            if o >= self.c_out {
                break;
            }
            let masked = ops.mul_values(&acc, mask)?;
            let step = self.placement.baby_of(o);
            let placed = if step == 0 { masked } else { ops.rotate(&masked, step)? };
            let slot = &mut giants[o / self.placement.group];
            *slot = sum(ops, slot.take(), Some(placed))?;
        }
        Ok(())
    }
}

/// The rotation of tap (dy, dx) of an f x f kernel padded by f/2 on `input`, for dy, dx in
/// row-major order: (dy - f/2) k (k w) + (dx - f/2) k.
pub(crate) fn tap_steps(input: &MultiplexedLayout, kernel: usize) -> Vec<i64> {
    let (k, row, pad) = (input.gap as i64, input.row_len() as i64, (kernel / 2) as i64);
    let f = kernel as i64;
    (0..f).flat_map(|dy| (0..f).map(move |dx| (dy - pad) * k * row + (dx - pad) * k)).collect()
}

/// Rotate-and-add steps summing the k^2 channels interleaved in each block of `layout` into
/// sub-position (0, 0): 1, 2, .. k/2 along a grid row, then k w, 2 k w, .. across rows.
pub(crate) fn sub_position_sum_steps(layout: &MultiplexedLayout) -> Vec<i64> {
    let doubling = |unit: usize| (0..layout.gap.trailing_zeros()).map(move |j| (unit << j) as i64);
    doubling(1).chain(doubling(layout.row_len())).collect()
}

/// Rotate-and-add steps that fill the copies of `output` from its first.
pub(crate) fn replication_steps(output: &MultiplexedLayout) -> Vec<i64> {
    (0..output.copies().trailing_zeros()).map(|j| -((output.copy_len() << j) as i64)).collect()
}

/// a + b where either may be absent.
fn sum<E: LayerOps>(ops: &FheOps<E>, a: Option<E::Ct>, b: Option<E::Ct>) -> Result<Option<E::Ct>, FheError> {
    Ok(match (a, b) {
        (Some(a), Some(b)) => Some(ops.add(&a, &b)?),
        (a, b) => a.or(b),
    })
}

/// Plain f64 reference: convolution [C_out][ceil(h/s)][ceil(w/s)] of a [C_in][h][w] tensor (`input_shape` =
/// (C_in, h, w)) with weights [C_out][C_in][f][f], padding f/2, stride s.
pub fn conv_reference_f64(input_shape: (usize, usize, usize), x: &[f64], c_out: usize, kernel: usize, stride: usize, weights: &[f64]) -> Vec<f64> {
    let (c_in, h, w) = input_shape;
    let (oh, ow, pad) = ((h - 1) / stride + 1, (w - 1) / stride + 1, (kernel / 2) as isize);
    let mut out = vec![0.0; c_out * oh * ow];
    for o in 0..c_out {
        for y in 0..oh {
            for xo in 0..ow {
                let mut acc = 0.0;
                for c in 0..c_in {
                    for dy in 0..kernel {
                        let iy = (y * stride + dy) as isize - pad;
                        if iy < 0 || iy >= h as isize {
                            continue;
                        }
                        for dx in 0..kernel {
                            let ix = (xo * stride + dx) as isize - pad;
                            if ix < 0 || ix >= w as isize {
                                continue;
                            }
                            acc += weights[((o * c_in + c) * kernel + dy) * kernel + dx] * x[(c * h + iy as usize) * w + ix as usize];
                        }
                    }
                }
                out[(o * oh + y) * ow + xo] = acc;
            }
        }
    }
    out
}
