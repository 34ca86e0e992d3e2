//! HyPHEN's two convolutions (Kim et al., "HyPHEN: A Hybrid Packing Method and Optimizations
//! for Homomorphic Encryption-Based Neural Networks", arXiv 2302.02407; 002 Sec. 4): the packing
//! changes between the two convolutions of a basic block, so that each one's output is already
//! in the packing the next one reads and no placement rotation is needed.
//!
//! - CA ("channel-aligned"): the multiplexed packing of [`super::multiplexed`] at gap 1, every
//!   channel in a block of its own, one ciphertext for the whole tensor (what residual additions,
//!   bootstraps and MPConv see).
//! - RA ("replicated"): one ciphertext per channel, the h x w channel repeated over every block
//!   of h w slots (slot s holds pixel s mod h w).
//!
//! [`CaConv`] (CA -> RA), for each output channel o: the input's hoisted tap rotations (shared by
//! every o), times o's weights (channel c's block carries W[o][c][tap], zero where the tap reads
//! the padding) and summed over taps; one rescale; then log2 T rotate-and-adds by 1, 2, ..
//! blocks. The product is periodic with the copy length T h w (every copy carries the same o), so
//! the sum over T consecutive blocks is, at every slot, the sum over all input channels: the
//! output channel comes out replicated, which is the RA packing, with no mask and no placement.
//! One level; rotations (f^2 - 1) + C_out log2 T.
//!
//! [`RaConv`] (RA -> CA): rotations move to the output side. For each tap t, u_t = sum over
//! input channels c of x_c (.) V[t][c], where V[t][c] holds, at the slot the tap reads for the
//! output slot s, W[o(s)][c][t] (o(s) the output channel of s's block; zero for padding and
//! unused blocks); one rescale per tap; out = sum over t of rot(u_t, tap offset). A replicated
//! input has every pixel at every block, so the output lands directly in the CA packing (every
//! copy filled). One level; rotations f^2 - 1; plaintext products C_in f^2.
//!
//! A basic block CA -> CaConv -> activation on each RA ciphertext -> RaConv -> CA spends two
//! levels on its convolutions where two MPConvs spend four, and no placement rotations; its price
//! is C_mid relinearisations for the activation (one per RA ciphertext instead of one) and more
//! plaintext products. Gap 1 and stride 1 only: at gap k > 1 the channel sum leaves each output
//! at one of the k^2 grid positions of a pixel and RaConv would need k^2 f^2 rotations, which is
//! where MPConv is cheaper (the compiler keeps MPConv there). The paper's 2D gap packing and
//! PRCR, which handle those layers, are not built.

use std::borrow::Borrow;

use super::multiplexed::MultiplexedLayout;
use super::{FheError, FheOpCounts, FheOps};
use lycaon_ckks::ops::{CiphertextMeta, LayerOps};
use rayon::prelude::*;

/// Checks shared by both convolutions: odd kernel, gap-1 layout, weight count.
fn check(layout: &MultiplexedLayout, c_in: usize, c_out: usize, kernel: usize, weights: &[f64]) -> Result<(), FheError> {
    if kernel.is_multiple_of(2) {
        return Err(FheError::Invalid(format!("kernel {kernel}: HyPHEN's convolutions pad by f/2 and need an odd kernel")));
    }
    if layout.gap != 1 {
        return Err(FheError::Invalid(format!("gap {}: CAConv/RAConv take the gap-1 packing (use MPConv at larger gaps)", layout.gap)));
    }
    if !layout.is_full() {
        return Err(FheError::Invalid(format!("a {} x {} image on a {} x {} grid: CAConv/RAConv take power-of-two images (use MPConv)", layout.rows, layout.cols, layout.height, layout.width)));
    }
    let expected = c_out * c_in * kernel * kernel;
    if weights.len() != expected {
        return Err(FheError::Invalid(format!("expected {expected} weights, got {}", weights.len())));
    }
    Ok(())
}

/// Tap offsets (dy - f/2) w + (dx - f/2) in raster order, with the tap's (dy, dx) shift.
fn taps(width: usize, kernel: usize) -> Vec<(i64, isize, isize)> {
    let pad = (kernel / 2) as isize;
    (0..kernel as isize).flat_map(|dy| (0..kernel as isize).map(move |dx| (dy - pad, dx - pad))).map(|(dy, dx)| ((dy * width as isize + dx) as i64, dy, dx)).collect()
}

/// `period` values repeated over `slots`.
fn tile(period: &[f64], slots: usize) -> Vec<f64> {
    period.iter().copied().cycle().take(slots).collect()
}

/// CAConv: a convolution from the CA packing (one ciphertext) to the RA packing (one ciphertext
/// per output channel), stride 1, padding f/2, one level.
#[derive(Clone, Debug)]
pub struct CaConv {
    input: MultiplexedLayout,
    c_out: usize,
    kernel: usize,
    /// weights[o][tap]: one copy's worth (copy length) of o's slot vector for that tap.
    weights: Vec<Vec<Vec<f64>>>,
}

impl CaConv {
    /// `weights` are [C_out][C_in][f][f].
    pub fn new(input: MultiplexedLayout, c_out: usize, kernel: usize, weights: &[f64]) -> Result<Self, FheError> {
        check(&input, input.channels, c_out, kernel, weights)?;
        let (c_in, h, w) = (input.channels, input.height as isize, input.width as isize);
        let block = input.block_len();
        let vectors = (0..c_out)
            .map(|o| {
                taps(input.width, kernel)
                    .iter()
                    .enumerate()
                    .map(|(t, &(_, dy, dx))| {
                        let mut v = vec![0.0; input.copy_len()];
                        for c in 0..c_in {
                            let wv = weights[(o * c_in + c) * kernel * kernel + t];
                            for y in 0..h {
                                for x in 0..w {
                                    if (0..h).contains(&(y + dy)) && (0..w).contains(&(x + dx)) {
                                        v[c * block + (y * w + x) as usize] = wv;
                                    }
                                }
                            }
                        }
                        v
                    })
                    .collect()
            })
            .collect();
        Ok(Self { input, c_out, kernel, weights: vectors })
    }

    pub fn input_layout(&self) -> &MultiplexedLayout {
        &self.input
    }

    pub fn output_channels(&self) -> usize {
        self.c_out
    }

    fn tap_steps(&self) -> Vec<i64> {
        taps(self.input.width, self.kernel).iter().map(|t| t.0).collect()
    }

    /// Rotate-and-add steps summing the T blocks of a copy: 1, 2, .. T/2 blocks.
    fn channel_sum_steps(&self) -> Vec<i64> {
        (0..self.input.padded_blocks().trailing_zeros()).map(|j| (self.input.block_len() << j) as i64).collect()
    }

    /// Every rotation step the evaluation needs a key for.
    pub fn rotation_steps(&self) -> Vec<i64> {
        let mut s: Vec<i64> = self.tap_steps().into_iter().chain(self.channel_sum_steps()).filter(|&x| x != 0).collect();
        s.sort_unstable();
        s.dedup();
        s
    }

    /// Rotations (f^2 - 1) + C_out log2 T; products C_out f^2; rescales C_out; depth 1.
    pub fn counts(&self) -> FheOpCounts {
        let f2 = (self.kernel * self.kernel) as u64;
        let c_out = self.c_out as u64;
        FheOpCounts { rotations: (f2 - 1) + c_out * self.channel_sum_steps().len() as u64, plain_mults: c_out * f2, rescales: c_out, depth: 1 }
    }

    /// The C_out RA ciphertexts (channel o replicated over every h w block), one level lower.
    pub fn evaluate<E: LayerOps>(&self, ops: &FheOps<E>, ct: &E::Ct) -> Result<Vec<E::Ct>, FheError> {
        if ct.slots() != self.input.slots {
            return Err(FheError::Invalid(format!("the ciphertext has {} slots, the packing {}", ct.slots(), self.input.slots)));
        }
        if ct.level() < 1 {
            return Err(FheError::Invalid("CAConv consumes a level; the ciphertext is at level 0".into()));
        }
        let rotated = ops.rotate_hoisted(ct, &self.tap_steps())?;
        let sums = self.channel_sum_steps();
        // Output channels in parallel: each is its own ciphertext.
        self.weights
            .par_iter()
            .map(|taps| {
                let mut acc: Option<E::Ct> = None;
                for (rot, period) in rotated.iter().zip(taps) {
                    let term = ops.mul_values(rot, &tile(period, self.input.slots))?;
                    acc = Some(match acc {
                        Some(a) => ops.add(&a, &term)?,
                        None => term,
                    });
                }
                let mut acc = ops.rescale(&acc.ok_or_else(|| FheError::Invalid("empty kernel".into()))?)?;
                for &step in &sums {
                    let r = ops.rotate(&acc, step)?;
                    acc = ops.add(&acc, &r)?;
                }
                Ok(acc)
            })
            .collect()
    }
}

/// RAConv: a convolution from the RA packing (one ciphertext per input channel) to the CA
/// packing, stride 1, padding f/2, one level.
#[derive(Clone, Debug)]
pub struct RaConv {
    output: MultiplexedLayout,
    c_in: usize,
    kernel: usize,
    /// vectors[tap][c]: one output copy's worth of V[t][c] (module docs).
    vectors: Vec<Vec<Vec<f64>>>,
}

impl RaConv {
    /// `c_in` RA channels of h x w in `slots` slots -> C_out channels in the CA packing;
    /// `weights` are [C_out][C_in][f][f].
    pub fn new(c_in: usize, height: usize, width: usize, slots: usize, c_out: usize, kernel: usize, weights: &[f64]) -> Result<Self, FheError> {
        let output = MultiplexedLayout::new(c_out, height, width, 1, slots)?;
        check(&output, c_in, c_out, kernel, weights)?;
        let (h, w) = (height as isize, width as isize);
        let (block, period) = (output.block_len(), output.copy_len());
        let vectors = taps(width, kernel)
            .iter()
            .enumerate()
            .map(|(t, &(step, dy, dx))| {
                (0..c_in)
                    .map(|c| {
                        let mut v = vec![0.0; period];
                        for o in 0..c_out {
                            let wv = weights[(o * c_in + c) * kernel * kernel + t];
                            for y in 0..h {
                                for x in 0..w {
                                    if (0..h).contains(&(y + dy)) && (0..w).contains(&(x + dx)) {
                                        // The output slot s reads u_t at s + step.
                                        let s = (o * block) as i64 + (y * w + x) as i64;
                                        v[(s + step).rem_euclid(period as i64) as usize] = wv;
                                    }
                                }
                            }
                        }
                        v
                    })
                    .collect()
            })
            .collect();
        Ok(Self { output, c_in, kernel, vectors })
    }

    pub fn output_layout(&self) -> &MultiplexedLayout {
        &self.output
    }

    pub fn input_channels(&self) -> usize {
        self.c_in
    }

    /// Every rotation step the evaluation needs a key for (the tap offsets).
    pub fn rotation_steps(&self) -> Vec<i64> {
        let mut s: Vec<i64> = taps(self.output.width, self.kernel).iter().map(|t| t.0).filter(|&x| x != 0).collect();
        s.sort_unstable();
        s
    }

    /// Rotations f^2 - 1; products C_in f^2; rescales f^2; depth 1.
    pub fn counts(&self) -> FheOpCounts {
        let f2 = (self.kernel * self.kernel) as u64;
        FheOpCounts { rotations: f2 - 1, plain_mults: self.c_in as u64 * f2, rescales: f2, depth: 1 }
    }

    /// The CA ciphertext of the C_out output channels, one level below the inputs' lowest.
    pub fn evaluate<E: LayerOps, C: Borrow<E::Ct>>(&self, ops: &FheOps<E>, inputs: &[C]) -> Result<E::Ct, FheError> {
        if inputs.len() != self.c_in {
            return Err(FheError::Invalid(format!("RAConv takes {} RA ciphertexts, got {}", self.c_in, inputs.len())));
        }
        let inputs: Vec<&E::Ct> = inputs.iter().map(Borrow::borrow).collect();
        if let Some(ct) = inputs.iter().find(|ct| ct.slots() != self.output.slots) {
            return Err(FheError::Invalid(format!("an input has {} slots, the packing {}", ct.slots(), self.output.slots)));
        }
        if inputs.iter().any(|ct| ct.level() < 1) {
            return Err(FheError::Invalid("RAConv consumes a level; an input is at level 0".into()));
        }
        // Taps in parallel, each thread summing its own (sums mod q are exact in any order).
        let add = |a: Option<E::Ct>, b: Option<E::Ct>| -> Result<Option<E::Ct>, FheError> {
            Ok(match (a, b) {
                (Some(a), Some(b)) => Some(ops.add(&a, &b)?),
                (a, b) => a.or(b),
            })
        };
        let offsets = self.rotation_offsets();
        let out = offsets
            .par_iter()
            .zip(&self.vectors)
            .try_fold(
                || None,
                |out, (&step, per_channel)| {
                    let mut acc: Option<E::Ct> = None;
                    for (x, period) in inputs.iter().zip(per_channel) {
                        acc = add(acc, Some(ops.mul_values(x, &tile(period, self.output.slots))?))?;
                    }
                    let acc = ops.rescale(&acc.ok_or_else(|| FheError::Invalid("no input channel".into()))?)?;
                    let moved = if step == 0 { acc } else { ops.rotate(&acc, step)? };
                    add(out, Some(moved))
                },
            )
            .try_reduce(|| None, add)?;
        out.ok_or_else(|| FheError::Invalid("empty kernel".into()))
    }

    fn rotation_offsets(&self) -> Vec<i64> {
        taps(self.output.width, self.kernel).iter().map(|t| t.0).collect()
    }
}
