//! Coefficient-encoded convolution and matrix-vector product without rotations (Huang et al.,
//! "Cheetah", USENIX Security 2022; the C2PC packing of ../papers/000).
//!
//! Convolution: the zero-padded input is cut into blocks of C_p x H_p x W_p values (C_p H_p W_p
//! <= n, neighbouring blocks overlapping by the kernel's halo) and block element (c, i, j) is
//! put at coefficient c H_p W_p + i W_p + j. The kernel of output channel o over the same C_p
//! channels is put reversed, at O - (c H_p W_p + dy W_p + dx) with O = (C_p - 1) H_p W_p +
//! (kh - 1) W_p + (kw - 1). The negacyclic product then holds output (i, j) of the block at
//! coefficient O + i W_p + j, and no wrapped term reaches those coefficients. Products over the
//! channel blocks add up; one output ciphertext per output channel and spatial block.
//!
//! Output-channel packing: with k output channels per ciphertext, kernel j of a group is put
//! at offset j S with S = O + H_p W_p, so channel j's outputs land at O + j S + i W_p + j'.
//! A term of channel j' != j reaching them would need an input coefficient at
//! (j - j') S + (kernel offset) + pos, outside [0, C_p H_p W_p) because S >= O + H_p W_p exceeds
//! the block and every kernel offset; with (k - 1) S + C_p H_p W_p <= n the terms that wrap
//! past n land below O, where no output is read (for k = 1 the usual C_p H_p W_p <= n). One plaintext holds the k kernels, so the products stay
//! C_out x channel blocks while the output ciphertexts (each a whole c_1 on the wire) drop k-fold,
//! at the price of k-fold smaller channel blocks (more input ciphertexts). Small maps with many
//! output channels (ResNet-50's 1x1 layers on 7x7 and 14x14) gain most.
//!
//! Matrix-vector product: x_j at coefficient j of each column block, W[r][j] at r n_i + n_i - 1 - j;
//! coefficient r n_i + n_i - 1 of the product is row r's dot product (n_i n_o <= n).
//!
//! Outputs travel at the lowest level with all of c_1 and only the coefficients of c_0 that carry
//! outputs ([`PartialCiphertext`]).

use std::ops::Range;
use std::sync::Arc;

use rayon::prelude::*;

use lycaon_bfv::noise::{NoiseEstimate, NoiseModel, NoiseProfile, PlainNorms};
use lycaon_bfv::rlwe::{Ciphertext, Parameters};
use lycaon_bfv::{BfvContext, CoeffEncoder, Evaluator, PreparedPlaintext};
use lycaon_math::{Coeff, Ntt, Poly};

use crate::counting::ntt_cost;
use crate::layout::{Encoding, Layout, Placement};
use crate::noise::{check_model, weight_stats};
use crate::{ConvShape, HeOps, LayerNoise, LinearPlan, NnError, OpCounts, PlanCore, PreparedLayer, ValueBounds};

/// Block sizes of a coefficient-encoded convolution: `c` channels of `h` x `w` per input
/// ciphertext, `k` output channels per output ciphertext.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoeffBlocks {
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub k: usize,
}

impl CoeffBlocks {
    /// Where output channel j of a group starts: O + j S with the origin O and the stride
    /// S = O + h w (module docs).
    fn origin(&self, kh: usize, kw: usize) -> usize {
        (self.c - 1) * self.h * self.w + (kh - 1) * self.w + (kw - 1)
    }

    fn channel_stride(&self, kh: usize, kw: usize) -> usize {
        self.origin(kh, kw) + self.h * self.w
    }

    /// Whether the terms of k packed channels' products that wrap past n stay below O.
    fn fits(&self, kh: usize, kw: usize, n: usize) -> bool {
        self.c >= 1 && self.k >= 1 && (self.k - 1) * self.channel_stride(kh, kw) + self.c * self.h * self.w <= n
    }
}

#[derive(Clone)]
pub struct CoeffConv {
    core: PlanCore,
    blocks: CoeffBlocks,
    /// Channel blocks, spatial blocks down and across.
    cb: usize,
    hb: usize,
    wb: usize,
}

const NAME: &str = "coefficient (Cheetah)";

impl CoeffConv {
    /// Chooses the blocks and output packing that minimise the bytes up plus down (ties: fewer
    /// products).
    pub fn new(shape: &ConvShape, params: &Arc<Parameters>) -> Result<Self, NnError> {
        Self::search(shape, params, shape.c_out)
    }

    /// Cheetah's own blocks: one output channel per ciphertext, the fewest ciphertexts up plus
    /// down (000's C2PC packing, whose counts the simulator models).
    pub fn unpacked(shape: &ConvShape, params: &Arc<Parameters>) -> Result<Self, NnError> {
        Self::search(shape, params, 1)
    }

    fn search(shape: &ConvShape, params: &Arc<Parameters>, max_k: usize) -> Result<Self, NnError> {
        shape.validate()?;
        if shape.groups != 1 {
            return Err(NnError::Unsupported {
                algorithm: NAME,
                reason: "grouped and depthwise convolutions need one block per group; use the packed or Walsh-Hadamard convolution".into(),
            });
        }
        let n = params.n();
        let (fh, fw) = (shape.full_h(), shape.full_w());
        let top = params.max_level();
        let up_ct = crate::layout::seeded_ciphertext_bytes(params, top);
        let down_ct = crate::layout::partial_ciphertext_bytes(params, 0);
        let mut best: Option<((usize, usize, usize), CoeffBlocks)> = None;
        for oh in 1..=fh {
            let bh = oh + shape.kh - 1;
            for ow in 1..=fw {
                let bw = ow + shape.kw - 1;
                if bh * bw > n {
                    break;
                }
                let spatial = fh.div_ceil(oh) * fw.div_ceil(ow);
                // k = 1 with the widest channel block, then every k whose widest block still fits.
                for k in 1..=max_k.min(shape.c_out) {
                    let mut blocks = CoeffBlocks { c: shape.c_in.min(n / (bh * bw)), h: bh, w: bw, k };
                    while blocks.c > 0 && !blocks.fits(shape.kh, shape.kw, n) {
                        blocks.c -= 1;
                    }
                    if blocks.c == 0 {
                        break;
                    }
                    let cb = shape.c_in.div_ceil(blocks.c);
                    let outs = shape.c_out.div_ceil(k) * spatial;
                    // Output c_0 coefficients travel only where they carry outputs: the same for every k.
                    // Cheetah's own choice (unpacked) counts ciphertexts, as 000's C2PC model does.
                    let traffic = if max_k == 1 { cb * spatial + outs } else { cb * spatial * up_ct + outs * down_ct };
                    let key = (traffic, shape.c_out * cb * spatial, bh * bw);
                    if best.as_ref().is_none_or(|(b, _)| key < *b) {
                        best = Some((key, blocks));
                    }
                }
            }
        }
        let (_, blocks) = best.ok_or_else(|| NnError::Unsupported {
            algorithm: NAME,
            reason: format!("a {}x{} kernel does not fit in n = {n} coefficients", shape.kh, shape.kw),
        })?;
        Self::with_blocks(shape, params, blocks)
    }

    pub fn with_blocks(shape: &ConvShape, params: &Arc<Parameters>, blocks: CoeffBlocks) -> Result<Self, NnError> {
        shape.validate()?;
        let n = params.n();
        if blocks.c == 0 || blocks.h < shape.kh || blocks.w < shape.kw || !blocks.fits(shape.kh, shape.kw, n) {
            return Err(NnError::Unsupported { algorithm: NAME, reason: format!("blocks {blocks:?} must hold the kernel and fit n = {n} coefficients") });
        }
        let (oh, ow) = (blocks.h - shape.kh + 1, blocks.w - shape.kw + 1);
        let (cb, hb, wb) = (shape.c_in.div_ceil(blocks.c), shape.full_h().div_ceil(oh), shape.full_w().div_ceil(ow));
        let plane = blocks.h * blocks.w;
        // Input: element (c, y, x) sits at padded (y + ph, x + pw); every block covering it gets it.
        let mut placements = Vec::new();
        for c in 0..shape.c_in {
            for y in 0..shape.h {
                let yp = y + shape.pad_h;
                for x in 0..shape.w {
                    let xp = x + shape.pad_w;
                    for by in 0..hb {
                        let Some(i) = yp.checked_sub(by * oh).filter(|&i| i < blocks.h) else {
                            continue;
                        };
                        for bx in 0..wb {
                            let Some(j) = xp.checked_sub(bx * ow).filter(|&j| j < blocks.w) else {
                                continue;
                            };
                            let ct = ((c / blocks.c) * hb + by) * wb + bx;
                            let pos = (c % blocks.c) * plane + i * blocks.w + j;
                            placements.push(Placement { element: ((c * shape.h + y) * shape.w + x) as u32, ct: ct as u32, pos: pos as u32 });
                        }
                    }
                }
            }
        }
        let input_layout = Layout::new(Encoding::Coeff, cb * hb * wb, shape.input_len(), placements);
        // Output (o, y, x) of stride-1 position (Y, X) = (y s, x s) in block (Y / oh, X / ow),
        // channel o in group o / k at offset (o % k) S.
        let (origin, stride) = (blocks.origin(shape.kh, shape.kw), blocks.channel_stride(shape.kh, shape.kw));
        let (out_h, out_w) = (shape.out_h(), shape.out_w());
        let groups = shape.c_out.div_ceil(blocks.k);
        let mut out_placements = Vec::with_capacity(shape.output_len());
        let mut kept = vec![0usize; groups * hb * wb];
        for o in 0..shape.c_out {
            for y in 0..out_h {
                let yy = y * shape.stride;
                for x in 0..out_w {
                    let xx = x * shape.stride;
                    let ct = ((o / blocks.k) * hb + yy / oh) * wb + xx / ow;
                    let pos = origin + (o % blocks.k) * stride + (yy % oh) * blocks.w + xx % ow;
                    kept[ct] += 1;
                    out_placements.push(Placement { element: ((o * out_h + y) * out_w + x) as u32, ct: ct as u32, pos: pos as u32 });
                }
            }
        }
        let mut output_layout = Layout::new(Encoding::Coeff, groups * hb * wb, shape.output_len(), out_placements);
        output_layout.kept_coefficients = Some(kept);
        Ok(Self { blocks, cb, hb, wb, core: PlanCore::new(params, *shape, input_layout, output_layout) })
    }

    pub fn blocks(&self) -> CoeffBlocks {
        self.blocks
    }
}

impl LinearPlan for CoeffConv {
    fn name(&self) -> String {
        "cheetah-coeff".into()
    }
    fn core(&self) -> &PlanCore {
        &self.core
    }
    fn with_params(&self, params: &Arc<Parameters>) -> Result<Box<dyn LinearPlan>, NnError> {
        Ok(Box::new(Self { core: self.core.with_params(params)?, ..self.clone() }))
    }
    fn counts(&self) -> OpCounts {
        let top = self.core.params.max_level();
        let outs = (self.core.shape.c_out.div_ceil(self.blocks.k) * self.hb * self.wb) as u64;
        products_then_lowest(outs, self.cb as u64, top)
    }
    fn galois_elements(&self) -> Vec<u64> {
        Vec::new()
    }

    fn weight_bytes(&self) -> usize {
        self.core.shape.c_out.div_ceil(self.blocks.k) * self.cb * crate::layout::prepared_plaintext_bytes(&self.core.params)
    }

    /// Every output ciphertext is sum over channel blocks g of p_g * x_g, p_g holding the
    /// k C_g kh kw weights of the block's k packed kernels as coefficients
    /// (E||p_g||^2 = k C_g kh kw E[w^2], ||p_g||_1 <= k C_g kh kw |w|max). Only the output coefficients travel and are decrypted, so
    /// the union bound runs over those (the layer's output count), not over n per ciphertext.
    fn noise(&self, model: &NoiseModel, input: NoiseEstimate, bounds: ValueBounds) -> Result<LayerNoise, NnError> {
        check_model(model, &self.core.params)?;
        let sh = &self.core.shape;
        let w = weight_stats(model, bounds);
        let top = self.core.params.max_level();
        let sum = (0..self.cb).fold(model.zero(top), |acc, g| {
            let count = (self.blocks.k.min(sh.c_out) * self.blocks.c.min(sh.c_in - g * self.blocks.c) * sh.kh * sh.kw) as f64;
            model.add(acc, model.mul_plain(input, PlainNorms::coefficients(count, w)))
        });
        Ok(LayerNoise { profile: NoiseProfile::uniform(sh.output_len() as f64, sum), level: top })
    }

    fn prepare(&self, weights: &[i64]) -> Result<Box<dyn PreparedLayer>, NnError> {
        self.core.shape.check_weights(weights)?;
        let kernels = (0..self.core.shape.c_out.div_ceil(self.blocks.k))
            .into_par_iter()
            .map(|group| self.group_kernels(weights, group))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Box::new(PreparedProducts { kernels, in_groups: self.cb, spatial: self.hb * self.wb }))
    }

    /// One output group's kernels at a time: at most one group per thread is prepared at once.
    fn evaluate_streaming(&self, ops: &HeOps, inputs: &[Ciphertext], weights: &[i64]) -> Result<Vec<Ciphertext>, NnError> {
        self.evaluate_units(ops, inputs, weights, 0..self.output_units())
    }

    /// One unit per output ciphertext: (output group of k kernels, spatial block). A range of
    /// units prepares the kernels of each group it touches once.
    fn output_units(&self) -> usize {
        self.core.shape.c_out.div_ceil(self.blocks.k) * self.hb * self.wb
    }

    /// The spatial blocks of one output group share its kernels.
    fn unit_block(&self) -> usize {
        self.hb * self.wb
    }

    fn evaluate_units(&self, ops: &HeOps, inputs: &[Ciphertext], weights: &[i64], units: Range<usize>) -> Result<Vec<Ciphertext>, NnError> {
        self.core.shape.check_weights(weights)?;
        crate::check_units(&units, self.output_units())?;
        let spatial = self.hb * self.wb;
        check_inputs(inputs, self.cb * spatial)?;
        if units.is_empty() {
            return Ok(Vec::new());
        }
        let groups = (units.start / spatial..=(units.end - 1) / spatial)
            .into_par_iter()
            .map(|group| {
                let kernels = self.group_kernels(weights, group)?;
                let own = units.start.max(group * spatial) - group * spatial..units.end.min((group + 1) * spatial) - group * spatial;
                own.into_par_iter().map(|s| products(ops, inputs, &kernels, spatial, s)).collect::<Result<Vec<_>, NnError>>()
            })
            .collect::<Result<Vec<_>, NnError>>()?;
        Ok(groups.into_iter().flatten().collect())
    }
}

fn check_inputs(inputs: &[Ciphertext], expected: usize) -> Result<(), NnError> {
    if inputs.len() != expected {
        return Err(NnError::Count { what: "input ciphertexts", expected, found: inputs.len() });
    }
    Ok(())
}

impl CoeffConv {
    /// Output group `group`'s kernels, one plaintext per input channel block: the group's k
    /// kernels, kernel j at offset j S.
    fn group_kernels(&self, weights: &[i64], group: usize) -> Result<Vec<PreparedPlaintext>, NnError> {
        let sh = &self.core.shape;
        let b = self.blocks;
        let plane = b.h * b.w;
        let (origin, stride) = (b.origin(sh.kh, sh.kw), b.channel_stride(sh.kh, sh.kw));
        let encoder = CoeffEncoder::new(&self.core.params)?;
        let eval = Evaluator::new(&BfvContext::new(&self.core.params)?);
        let top = self.core.params.max_level();
        let n = self.core.params.n();
        (0..self.cb)
            .map(|cbi| {
                let mut coeffs = vec![0i64; n];
                for (j, o) in (group * b.k..sh.c_out.min((group + 1) * b.k)).enumerate() {
                    for c in 0..b.c.min(sh.c_in - cbi * b.c) {
                        for dy in 0..sh.kh {
                            for dx in 0..sh.kw {
                                coeffs[j * stride + origin - (c * plane + dy * b.w + dx)] = weights[((o * sh.c_in + cbi * b.c + c) * sh.kh + dy) * sh.kw + dx];
                            }
                        }
                    }
                }
                Ok(eval.prepare_plain(&encoder.encode_signed(&coeffs)?, top)?)
            })
            .collect()
    }
}

/// Output (row block, spatial block s) = sum over input groups g of input (g, s) times the
/// block's kernel g, switched to the lowest level.
fn products(ops: &HeOps, inputs: &[Ciphertext], kernels: &[PreparedPlaintext], spatial: usize, s: usize) -> Result<Ciphertext, NnError> {
    let mut acc = None;
    for (g, kernel) in kernels.iter().enumerate() {
        ops.mul_plain_add(&mut acc, &inputs[g * spatial + s], kernel)?;
    }
    ops.to_lowest(&acc.ok_or(NnError::Shape("no input group".into()))?)
}

/// Counts of `outs` sums of `terms` ciphertext-plaintext products each, then modulus switching.
fn products_then_lowest(outs: u64, terms: u64, top: usize) -> OpCounts {
    OpCounts {
        plain_mults: outs * terms,
        additions: outs * (terms - 1),
        mod_switches: outs * top as u64,
        ntts: outs * (1..=top).map(ntt_cost::mod_switch).sum::<u64>(),
        ..Default::default()
    }
}

/// Output (row block r, spatial block s) = sum over input groups g of input (g, s) times kernel
/// (r, g): the evaluation of both coefficient algorithms.
struct PreparedProducts {
    kernels: Vec<Vec<PreparedPlaintext>>,
    in_groups: usize,
    spatial: usize,
}

impl PreparedLayer for PreparedProducts {
    fn weight_bytes(&self) -> usize {
        let count: usize = self.kernels.iter().map(Vec::len).sum();
        self.kernels.iter().flatten().next().map_or(0, |p| p.to_bytes().len()) * count
    }

    fn evaluate(&self, ops: &HeOps, inputs: &[Ciphertext]) -> Result<Vec<Ciphertext>, NnError> {
        let expected = self.in_groups * self.spatial;
        if inputs.len() != expected {
            return Err(NnError::Count { what: "input ciphertexts", expected, found: inputs.len() });
        }
        (0..self.kernels.len() * self.spatial)
            .into_par_iter()
            .map(|k| products(ops, inputs, &self.kernels[k / self.spatial], self.spatial, k % self.spatial))
            .collect()
    }
}

/// Coefficient-encoded matrix-vector product W x (a fully connected layer).
#[derive(Clone)]
pub struct CoeffMatVec {
    core: PlanCore,
    /// Columns per block n_i and rows per block n_o.
    cols: usize,
    rows: usize,
}

impl CoeffMatVec {
    pub fn new(shape: &ConvShape, params: &Arc<Parameters>) -> Result<Self, NnError> {
        shape.validate()?;
        if !shape.is_fully_connected() {
            return Err(NnError::Unsupported { algorithm: "cheetah-matvec", reason: "needs a fully connected shape (1 x 1 input and kernel)".into() });
        }
        let n = params.n();
        let (k, m) = (shape.c_in, shape.c_out);
        // Fewest ciphertexts up plus down, then fewest products.
        let (cols, rows) = (1..=k.min(n))
            .map(|ni| (ni, m.min(n / ni)))
            .min_by_key(|&(ni, no)| (k.div_ceil(ni) + m.div_ceil(no), k.div_ceil(ni) * m.div_ceil(no)))
            .ok_or(NnError::Shape("empty matrix".into()))?;
        let (in_cts, out_cts) = (k.div_ceil(cols), m.div_ceil(rows));
        let placements = (0..k).map(|j| Placement { element: j as u32, ct: (j / cols) as u32, pos: (j % cols) as u32 }).collect();
        let input_layout = Layout::new(Encoding::Coeff, in_cts, k, placements);
        let out = (0..m).map(|r| Placement { element: r as u32, ct: (r / rows) as u32, pos: ((r % rows) * cols + cols - 1) as u32 }).collect();
        let mut output_layout = Layout::new(Encoding::Coeff, out_cts, m, out);
        output_layout.kept_coefficients = Some((0..out_cts).map(|c| rows.min(m - c * rows)).collect());
        Ok(Self { cols, rows, core: PlanCore::new(params, *shape, input_layout, output_layout) })
    }
}

impl LinearPlan for CoeffMatVec {
    fn name(&self) -> String {
        "cheetah-matvec".into()
    }
    fn core(&self) -> &PlanCore {
        &self.core
    }
    fn with_params(&self, params: &Arc<Parameters>) -> Result<Box<dyn LinearPlan>, NnError> {
        Ok(Box::new(Self { core: self.core.with_params(params)?, ..self.clone() }))
    }
    fn counts(&self) -> OpCounts {
        let (k, m) = (self.core.shape.c_in, self.core.shape.c_out);
        products_then_lowest(m.div_ceil(self.rows) as u64, k.div_ceil(self.cols) as u64, self.core.params.max_level())
    }
    fn galois_elements(&self) -> Vec<u64> {
        Vec::new()
    }

    fn weight_bytes(&self) -> usize {
        self.core.shape.c_out.div_ceil(self.rows) * self.core.shape.c_in.div_ceil(self.cols) * crate::layout::prepared_plaintext_bytes(&self.core.params)
    }

    /// Output block rb is sum over column blocks cb of p * x_cb, p holding the rows x columns of
    /// the block's weights as coefficients; the union bound runs over the output coefficients.
    fn noise(&self, model: &NoiseModel, input: NoiseEstimate, bounds: ValueBounds) -> Result<LayerNoise, NnError> {
        check_model(model, &self.core.params)?;
        let (k, m) = (self.core.shape.c_in, self.core.shape.c_out);
        let w = weight_stats(model, bounds);
        let top = self.core.params.max_level();
        let mut profile = NoiseProfile::default();
        for rb in 0..m.div_ceil(self.rows) {
            let rows = self.rows.min(m - rb * self.rows);
            let sum = (0..k.div_ceil(self.cols)).fold(model.zero(top), |acc, cb| {
                let count = (rows * self.cols.min(k - cb * self.cols)) as f64;
                model.add(acc, model.mul_plain(input, PlainNorms::coefficients(count, w)))
            });
            profile.push(rows as f64, sum);
        }
        Ok(LayerNoise { profile, level: top })
    }

    fn prepare(&self, weights: &[i64]) -> Result<Box<dyn PreparedLayer>, NnError> {
        self.core.shape.check_weights(weights)?;
        let kernels = (0..self.output_units()).into_par_iter().map(|rb| self.row_block_kernels(weights, rb)).collect::<Result<Vec<_>, _>>()?;
        Ok(Box::new(PreparedProducts { kernels, in_groups: self.core.shape.c_in.div_ceil(self.cols), spatial: 1 }))
    }

    /// One row block's kernels at a time.
    fn evaluate_streaming(&self, ops: &HeOps, inputs: &[Ciphertext], weights: &[i64]) -> Result<Vec<Ciphertext>, NnError> {
        self.evaluate_units(ops, inputs, weights, 0..self.output_units())
    }

    /// One unit per block of rows (one output ciphertext).
    fn output_units(&self) -> usize {
        self.core.shape.c_out.div_ceil(self.rows)
    }

    fn evaluate_units(&self, ops: &HeOps, inputs: &[Ciphertext], weights: &[i64], units: Range<usize>) -> Result<Vec<Ciphertext>, NnError> {
        self.core.shape.check_weights(weights)?;
        crate::check_units(&units, self.output_units())?;
        check_inputs(inputs, self.core.shape.c_in.div_ceil(self.cols))?;
        units.into_par_iter().map(|rb| products(ops, inputs, &self.row_block_kernels(weights, rb)?, 1, 0)).collect()
    }
}

impl CoeffMatVec {
    /// Row block rb's kernels, one per block of columns: the block's rows x columns of weights
    /// as coefficients.
    fn row_block_kernels(&self, weights: &[i64], rb: usize) -> Result<Vec<PreparedPlaintext>, NnError> {
        let (k, m) = (self.core.shape.c_in, self.core.shape.c_out);
        let (ni, no) = (self.cols, self.rows);
        let encoder = CoeffEncoder::new(&self.core.params)?;
        let eval = Evaluator::new(&BfvContext::new(&self.core.params)?);
        let top = self.core.params.max_level();
        let n = self.core.params.n();
        (0..k.div_ceil(ni))
            .map(|cb| {
                let mut coeffs = vec![0i64; n];
                for r in 0..no.min(m - rb * no) {
                    for j in 0..ni.min(k - cb * ni) {
                        coeffs[r * ni + ni - 1 - j] = weights[(rb * no + r) * k + cb * ni + j];
                    }
                }
                Ok(eval.prepare_plain(&encoder.encode_signed(&coeffs)?, top)?)
            })
            .collect()
    }
}

/// An output ciphertext as it travels: all of c_1 and only the coefficients of c_0 that carry
/// outputs (Cheetah's response compression).
#[derive(Clone, Debug)]
pub struct PartialCiphertext {
    pub positions: Vec<u32>,
    pub c0_kept: Vec<u64>,
    pub c1: Poly<Ntt>,
}

impl PartialCiphertext {
    /// Keeps the coefficients of c_0 at `positions` (a level-0 ciphertext).
    pub fn from_ciphertext(params: &Parameters, ct: &Ciphertext, positions: &[u32]) -> Result<Self, NnError> {
        if ct.level() != 0 || ct.len() != 2 {
            return Err(NnError::Shape("only two-part ciphertexts at level 0 are compressed".into()));
        }
        let c0: Poly<Coeff> = params.backend().intt(ct.parts()[0].clone())?;
        let c0_kept = positions.iter().map(|&p| c0.limb(0)[p as usize]).collect();
        Ok(Self { positions: positions.to_vec(), c0_kept, c1: ct.parts()[1].clone() })
    }

    /// A ciphertext that decrypts correctly at the kept positions (zeros elsewhere in c_0).
    pub fn to_ciphertext(&self, params: &Parameters) -> Result<Ciphertext, NnError> {
        let q0 = params.q_at(0)?;
        let mut data = vec![0u64; params.n()];
        for (&p, &v) in self.positions.iter().zip(&self.c0_kept) {
            data[p as usize] = v;
        }
        let c0 = params.backend().ntt(Poly::<Coeff>::from_data(q0, data)?)?;
        Ok(Ciphertext::from_parts(params, vec![c0, self.c1.clone()])?)
    }
}

/// Positions of the outputs in each output ciphertext of a coefficient layout.
pub fn kept_positions(layout: &Layout) -> Vec<Vec<u32>> {
    let mut v = vec![Vec::new(); layout.num_ciphertexts];
    for p in &layout.placements {
        v[p.ct as usize].push(p.pos);
    }
    v
}
