//! The bootstrapped path (Python's `FheResNet`): CIFAR ResNets on the multiplexed packing at the
//! bootstrappable parameter set. Convolutions (two levels) by lycaon-nn's MPConv or BsgsConv,
//! whichever has the lower estimated time (`MultiplexedConv::cheapest`), or, where a
//! stride-1 convolution on the gap-1 packing feeds a quadratic that feeds another stride-1
//! convolution and the change saves rotations, HyPHEN's CAConv -> per-channel quadratic ->
//! RAConv (the first convolution's bias folded into the quadratic); per-channel quadratics
//! (one level when monic) and scales b x + c; ReLU by the composite minimax sign
//! (lycaon-ckks' `CompositeSign::for_relu`, its last stage folded into the step B (1 + p) / 2
//! with B the calibrated bound of its input); residual additions; global average pooling with
//! the fully connected layer (lycaon-nn's AvgPoolFc). Bootstraps placed by
//! [`super::placement`] from the calibrated value bounds; every rotation key at the highest
//! level it is used at under that plan.

use std::collections::{BTreeMap, HashMap};

use lycaon_nn::fhe::{CaConv, MpConv, MultiplexedConv, MultiplexedLayout, RaConv};

use super::linear::diagonal_rotations;
use super::packing::SlotPacking;
use super::placement::{Levels, PlacedOp};
use super::{fail, CompileOptions, Placement};
use crate::fhe::graph::{GraphNode, ModelGraph, NodeOp};
use crate::fhe::program::{
    bootstrap_shape, bootstrap_shape_for_period, part_name, FheOp, FheOpKind, FheParameters, FheProgram, InputPacking, Layout, Refresh, SlotValues,
    FHE_PROGRAM_FORMAT,
};
use crate::Result;

/// A tensor's packing on this path: multiplexed (C, h, w, gap) in one ciphertext or, when it
/// takes several, split by channels (its channels per part, [`Layout::parts`]); a vector (n
/// values in slots 0..n, repeating every `period` slots: what fully connected layers after a
/// flatten read and write); or the logits of the global pooling (n values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Packed {
    Multiplexed(Layout, Option<usize>),
    Vector(usize, usize),
    Logits(usize),
}

/// One op before placement: its program kind (a ReLU's stages come with its bound at the end),
/// depth, the rotation steps of its layers with the levels below its own they run at, and the
/// graph tensor its output is (a part of).
struct ResOp {
    placed: PlacedOp,
    kind: FheOpKind,
    rotations: Vec<(Vec<i64>, usize)>,
    out: Packed,
    tensor: String,
}

/// The names of a tensor's ciphertexts (its parts', [`part_name`]).
fn part_names(tensor: &str, parts: usize) -> Vec<String> {
    (0..parts).map(|k| part_name(tensor, k, parts)).collect()
}

/// Rows `rows` of a row-major matrix of rows of width `width`.
fn row_block(m: &[f64], width: usize, rows: std::ops::Range<usize>) -> Vec<f64> {
    m[rows.start * width..rows.end * width].to_vec()
}

/// The rotation steps of several layers, each once.
fn union(steps: impl IntoIterator<Item = Vec<i64>>) -> Vec<i64> {
    let mut all: Vec<i64> = steps.into_iter().flatten().collect();
    all.sort_unstable();
    all.dedup();
    all
}

fn nn_layout(l: &Layout, slots: usize, what: &str) -> Result<MultiplexedLayout> {
    l.multiplexed(slots).map_err(|e| fail(format!("{what}: {e}")))
}

fn layout_of(l: &MultiplexedLayout) -> Layout {
    Layout::of(l)
}

/// Per-channel values repeated over each channel's pixels, in the multiplexed packing (every
/// copy filled): Python's `multiplexed_pack(*layout, np.repeat(values, h w))`.
fn pack_channels(l: &Layout, slots: usize, values: &[f64], what: &str) -> Result<Vec<f64>> {
    let nl = nn_layout(l, slots, what)?;
    let area = nl.rows * nl.cols;
    let tensor: Vec<f64> = values.iter().flat_map(|&v| std::iter::repeat_n(v, area)).collect();
    nl.pack(&tensor).map_err(|e| fail(format!("{what}: {e}")))
}

/// (weights, kernel, stride) of a convolution with a square kernel padded by f/2 and no groups
/// (what MPConv and HyPHEN's convolutions take; each refuses an even kernel itself), else None.
fn conv_attrs(node: &GraphNode) -> Option<(&[f64], usize, usize, usize)> {
    if node.op != NodeOp::Conv {
        return None;
    }
    let w = node.param("weight")?;
    let k = w.shape[2];
    if w.shape[2] != w.shape[3] || node.attrs.pads().iter().any(|&p| p != k / 2) || node.attrs.groups() != 1 {
        return None;
    }
    Some((&w.data, w.shape[0], k, node.attrs.stride()[0]))
}

/// (dense weights [C_out][C_in][f][f], C_out, f, stride, output image) of a convolution ([`super::dense_weights`],
/// any groups): a square odd kernel padded by f/2 as it is (output image None), any other
/// kernel and padding at stride 1 or 2 as the odd kernel that covers its offsets
/// ([`embedded_kernel`]) with the node's output image kept; else None.
fn dense_conv(node: &GraphNode) -> Option<(std::borrow::Cow<'_, [f64]>, usize, usize, usize, Option<(usize, usize)>)> {
    if node.op != NodeOp::Conv {
        return None;
    }
    let w = node.param("weight")?;
    let (kh, kw) = (w.shape[2], w.shape[3]);
    let dense = super::dense_weights(node)?;
    let [sy, sx] = node.attrs.stride();
    let [top, left, _, _] = node.attrs.pads();
    if kh == kw && kh % 2 == 1 && node.attrs.pads().iter().all(|&p| p == kh / 2) {
        return Some((dense, w.shape[0], kh, sy, None));
    }
    if sy != sx || !(1..=2).contains(&sy) || top >= kh || left >= kw || node.shape.len() != 3 {
        return None;
    }
    let c_in = dense.len() / (w.shape[0] * kh * kw);
    let (weights, k) = embedded_kernel(&dense, w.shape[0], c_in, [kh, kw], [top, left]);
    Some((std::borrow::Cow::Owned(weights), w.shape[0], k, sy, Some((node.shape[1], node.shape[2]))))
}

/// A kh x kw kernel [C_out][C_in][kh][kw] read at offsets -top .. kh - 1 - top (rows) and
/// -left .. kw - 1 - left (columns) as the odd square kernel K padded by K/2 that covers them
/// (what MPConv takes): (weights [C_out][C_in][K][K], K).
fn embedded_kernel(weights: &[f64], c_out: usize, c_in: usize, [kh, kw]: [usize; 2], [top, left]: [usize; 2]) -> (Vec<f64>, usize) {
    let reach = [top, kh - 1 - top, left, kw - 1 - left].into_iter().max().unwrap_or(0);
    let k = 2 * reach + 1;
    let mut out = vec![0.0; c_out * c_in * k * k];
    for o in 0..c_out {
        for i in 0..c_in {
            for y in 0..kh {
                for x in 0..kw {
                    out[((o * c_in + i) * k + y + reach - top) * k + x + reach - left] = weights[((o * c_in + i) * kh + y) * kw + x];
                }
            }
        }
    }
    (out, k)
}

/// Checks that the convolution's output image is the node's (C, H, W).
fn same_shape(node: &GraphNode, channels: usize, l: &MultiplexedLayout) -> Result<()> {
    if node.shape[..] != [channels, l.rows, l.cols] {
        return Err(fail(format!("{}: output shape {:?}, but MPConv gives ({channels}, {}, {})", node.describe(), node.shape, l.rows, l.cols)));
    }
    Ok(())
}

/// An average pooling (window kh x kw at stride s, padding counted in the average) as a
/// convolution MPConv runs: each channel alone, 1 / (kh kw) at the window's taps of the odd
/// square kernel that covers them ([`embedded_kernel`]). Returns (weights [C][C][K][K], K, s).
fn pooling_as_conv(node: &GraphNode, channels: usize) -> Result<(Vec<f64>, usize, usize)> {
    let d = node.describe();
    let [kh, kw] = node.attrs.kernel.ok_or_else(|| fail(format!("{d}: no pooling window")))?;
    let [sy, sx] = node.attrs.stride.unwrap_or([kh, kw]);
    let [top, left, _, _] = node.attrs.pads();
    if sy != sx || !(1..=2).contains(&sy) {
        return Err(fail(format!("{d}: stride ({sy}, {sx}); the FHE path pools at stride 1 or 2 in both directions")));
    }
    if kh == 0 || kw == 0 || top >= kh || left >= kw {
        return Err(fail(format!("{d}: window {kh} x {kw} with padding ({top}, {left})")));
    }
    // 1 / (kh kw) from each channel to itself.
    let mut window = vec![0.0; channels * channels * kh * kw];
    for c in 0..channels {
        window[(c * channels + c) * kh * kw..(c * channels + c + 1) * kh * kw].fill(1.0 / (kh * kw) as f64);
    }
    let (w, k) = embedded_kernel(&window, channels, channels, [kh, kw], [top, left]);
    Ok((w, k, sy))
}

/// Per-channel coefficient rows (c, b, a) of a `poly` node, or None unless (C, 3).
fn quadratic_rows(node: &GraphNode) -> Option<Vec<[f64; 3]>> {
    let c = node.param("coefficients")?;
    if c.shape.len() != 2 || c.shape[1] != 3 {
        return None;
    }
    Some(c.data.chunks(3).map(|r| [r[0], r[1], r[2]]).collect())
}

/// The rotation steps of lycaon-nn's `AvgPoolFc` on `input` with `n_out` outputs (its pooling
/// steps, then its transform's baby and giant steps), without building the transform.
fn pool_fc_rotations(input: &MultiplexedLayout, n_out: usize) -> Vec<i64> {
    let l = input;
    let mut steps: Vec<i64> = (0..l.width.trailing_zeros()).map(|j| (l.gap << j) as i64).collect();
    steps.extend((0..l.height.trailing_zeros()).map(|j| ((l.gap * l.row_len()) << j) as i64));
    let mut indices: Vec<usize> = (0..n_out).flat_map(|i| (0..l.channels).map(move |ch| (l.slot(ch, 0, 0) + l.slots - i) % l.slots)).collect();
    indices.sort_unstable();
    indices.dedup();
    steps.extend(diagonal_rotations(&indices, l.slots));
    steps.sort_unstable();
    steps.dedup();
    steps
}

struct Compiler<'a> {
    graph: &'a ModelGraph,
    options: &'a CompileOptions,
    slots: usize,
    readers: HashMap<&'a str, usize>,
}

/// A multiplexed convolution to emit ([`Compiler::conv_ops`]): `weights` [out][in][k][k].
struct ConvSpec<'w> {
    out_channels: usize,
    kernel: usize,
    stride: usize,
    weights: &'w [f64],
    bias: Option<&'w [f64]>,
    output_image: Option<(usize, usize)>,
}

impl<'a> Compiler<'a> {
    /// Channels per ciphertext of a tensor laid out as `l` (all its channels): None when one
    /// ciphertext holds it, else the fewest equal parts that each fit (the last may be smaller).
    fn partition(&self, l: &Layout, what: &str) -> Result<Option<usize>> {
        if l.multiplexed(self.slots).is_ok() {
            return Ok(None);
        }
        let one = nn_layout(&Layout { channels: 1, ..*l }, self.slots, &format!("{what}: one channel"))?;
        let per_ciphertext = l.gap * l.gap * (self.slots / one.block_len());
        let parts = l.channels.div_ceil(per_ciphertext);
        Ok(Some(l.channels.div_ceil(parts)))
    }

    /// A convolution from `src` (its layout and parts) as one op per output part, each summing
    /// one convolution per input part whose weights are not all zero (lycaon-nn's cheaper
    /// method, chosen on the first such part; a single part is exactly the one-ciphertext op).
    fn conv_ops(&self, node: &GraphNode, src: Layout, part_in: Option<usize>, spec: ConvSpec) -> Result<(Vec<ResOp>, Packed)> {
        let d = node.describe();
        let nn = |e: lycaon_nn::fhe::FheError| fail(format!("{d}: {e}"));
        let ConvSpec { out_channels, kernel, stride, weights, bias, output_image } = spec;
        let taps = kernel * kernel;
        if weights.len() != out_channels * src.channels * taps {
            return Err(fail(format!("{d}: {} weights for {out_channels} x {} x {kernel} x {kernel}", weights.len(), src.channels)));
        }
        let in_parts = src.parts(part_in)?;
        let in_names = part_names(&node.inputs[0], in_parts.len());
        // The output grid, from a one-channel probe on the first part.
        let probe = MultiplexedConv::with_method(
            lycaon_nn::fhe::ConvMethod::MpConv,
            nn_layout(&in_parts[0].1, self.slots, &d)?,
            1,
            kernel,
            stride,
            &vec![1.0; in_parts[0].0.len() * taps],
            output_image,
        )
        .map_err(nn)?;
        let out = Layout { channels: out_channels, ..layout_of(probe.output_layout()) };
        let part_out = self.partition(&out, &d)?;
        let out_parts = out.parts(part_out)?;
        let out_names = part_names(&node.output, out_parts.len());
        let mut ops = Vec::with_capacity(out_parts.len());
        for (j, (rows, out_part)) in out_parts.into_iter().enumerate() {
            let w = row_block(weights, src.channels * taps, rows.clone());
            let per_part: Vec<(MultiplexedLayout, Vec<f64>)> = in_parts
                .iter()
                .map(|(cols, part)| {
                    Ok((nn_layout(part, self.slots, &d)?, Layout::column_block(&w, rows.len(), src.channels * taps, cols.start * taps..cols.end * taps)))
                })
                .collect::<Result<_>>()?;
            let first = per_part.iter().find(|(_, w)| w.iter().any(|&v| v != 0.0));
            let Some((l0, w0)) = first else {
                return Err(fail(format!("{d}: every weight of output channels {rows:?} is zero")));
            };
            let method = MultiplexedConv::cheapest(*l0, rows.len(), kernel, stride, w0, output_image).map_err(nn)?.method();
            let mut steps = Vec::new();
            for (l, w) in per_part.iter().filter(|(_, w)| w.iter().any(|&v| v != 0.0)) {
                let layer = MultiplexedConv::with_method(method, *l, rows.len(), kernel, stride, w, output_image).map_err(nn)?;
                if layout_of(layer.output_layout()) != out_part {
                    return Err(fail(format!("{d}: the parts of the convolution disagree on the output packing")));
                }
                steps.push(layer.rotation_steps());
            }
            let packed_bias = bias.map(|b| pack_channels(&out_part, self.slots, &b[rows.clone()], &d)).transpose()?;
            let kind = FheOpKind::MpConv {
                input: src,
                out_channels: rows.len(),
                kernel,
                stride,
                weights: w,
                bias: packed_bias.map(|v| SlotValues::from_dense(&v)),
                output_image: output_image.map(|(r, c)| [r, c]),
                method,
                part_channels: part_in,
            };
            let name = part_name(&node.name, j, out_names.len());
            ops.push(ResOp {
                placed: PlacedOp { name, inputs: in_names.clone(), output: out_names[j].clone(), depth: 2, relu: false },
                kind,
                rotations: vec![(union(steps), 0)],
                out: Packed::Multiplexed(out, part_out),
                tensor: node.output.clone(),
            });
        }
        Ok((ops, Packed::Multiplexed(out, part_out)))
    }

    /// The HyPHEN op for conv -> quadratic -> conv at `i` (Python's `_hyphen_pair`), else None.
    fn hyphen_pair(&self, i: usize, src: &Layout) -> Result<Option<ResOp>> {
        let nodes = &self.graph.nodes;
        if i + 2 >= nodes.len() || src.gap != 1 || src.image.is_some() {
            return Ok(None);
        }
        let (conv1, act, conv2) = (&nodes[i], &nodes[i + 1], &nodes[i + 2]);
        let (Some(first), Some(second)) = (conv_attrs(conv1), conv_attrs(conv2)) else { return Ok(None) };
        let ((w1, c_mid, k1, s1), (w2, c_out, k2, s2)) = (first, second);
        if s1 != 1 || s2 != 1 || k1 % 2 == 0 || k2 % 2 == 0 || act.op != NodeOp::Poly {
            return Ok(None);
        }
        if act.inputs != [conv1.output.clone()]
            || conv2.inputs != [act.output.clone()]
            || self.readers.get(conv1.output.as_str()) != Some(&1)
            || self.readers.get(act.output.as_str()) != Some(&1)
        {
            return Ok(None);
        }
        let Some(rows) = quadratic_rows(act) else { return Ok(None) };
        if rows.iter().any(|r| r[2] == 0.0) {
            return Ok(None);
        }
        let d = conv1.describe();
        let beta: Vec<f64> = conv1.param("bias").map_or(vec![0.0; c_mid], |b| b.data.clone());
        if rows.len() != c_mid || beta.len() != c_mid {
            return Ok(None);
        }
        // a (x + beta)^2 + b (x + beta) + c, in numpy's order of operations.
        let a: Vec<f64> = rows.iter().map(|r| r[2]).collect();
        let b: Vec<f64> = rows.iter().zip(&beta).map(|(r, &be)| 2.0 * r[2] * be + r[1]).collect();
        let c: Vec<f64> = rows.iter().zip(&beta).map(|(r, &be)| r[2] * (be * be) + r[1] * be + r[0]).collect();
        let monic = a.iter().all(|&x| x == 1.0);
        let nl = nn_layout(src, self.slots, &d)?;
        // HyPHEN's layers take tensors of one ciphertext; anything else runs as MPConvs.
        let (Ok(ca), Ok(ra)) = (CaConv::new(nl, c_mid, k1, w1), RaConv::new(c_mid, src.height, src.width, self.slots, c_out, k2, w2)) else {
            return Ok(None);
        };
        // Only where the change of packing saves rotations against the two MPConvs it replaces.
        let Ok(mp1) = MpConv::new(nl, c_mid, k1, 1, w1) else { return Ok(None) };
        let Ok(mp2) = MpConv::new(*mp1.output_layout(), c_out, k2, 1, w2) else { return Ok(None) };
        if ca.counts().rotations + ra.counts().rotations >= mp1.counts().rotations + mp2.counts().rotations {
            return Ok(None);
        }
        let out = layout_of(ra.output_layout());
        let bias = conv2.param("bias").map(|bv| pack_channels(&out, self.slots, &bv.data, &conv2.describe())).transpose()?;
        let depth = 2 + if monic { 1 } else { 2 };
        let kind = FheOpKind::Hyphen {
            input: *src,
            mid_channels: c_mid,
            kernel1: k1,
            weights1: w1.to_vec(),
            out_channels: c_out,
            kernel2: k2,
            weights2: w2.to_vec(),
            a: (!monic).then_some(a),
            b,
            c,
            bias: bias.map(|v| SlotValues::from_dense(&v)),
        };
        let placed = PlacedOp { name: conv1.name.clone(), inputs: vec![conv1.inputs[0].clone()], output: conv2.output.clone(), depth, relu: false };
        Ok(Some(ResOp {
            placed,
            kind,
            rotations: vec![(ca.rotation_steps(), 0), (ra.rotation_steps(), depth - 1)],
            out: Packed::Multiplexed(out, None),
            tensor: conv2.output.clone(),
        }))
    }

    /// Python's `FheResNet._compile`: the ops and the input's layout and parts. A tensor
    /// larger than one ciphertext is split by channels ([`Self::partition`]): slot-wise ops run
    /// per part, convolutions and the final pooling read every part.
    fn ops(&self) -> Result<(Vec<ResOp>, Layout, Option<usize>)> {
        let g = self.graph;
        let [c, h, w] = g.input_shape[..] else {
            return Err(fail(format!("the bootstrapped path takes a (C, H, W) image input, not shape {:?}", g.input_shape)));
        };
        if c == 0 || h == 0 || w == 0 {
            return Err(fail(format!("the input {:?} is empty", g.input_shape)));
        }
        // Sides that are not powers of two: the image in the corner of the next power-of-two grid.
        let (height, width) = (h.next_power_of_two(), w.next_power_of_two());
        let input = Layout { channels: c, height, width, gap: 1, image: (height != h || width != w).then_some([h, w]) };
        let input_parts = self.partition(&input, &format!("the input {:?}", g.input_shape))?;
        let mut layouts: HashMap<&str, Packed> = HashMap::from([(g.input.as_str(), Packed::Multiplexed(input, input_parts))]);
        let mut ops: Vec<ResOp> = Vec::new();
        let nodes = &g.nodes;
        let mut i = 0;
        while i < nodes.len() {
            let mut node = &nodes[i];
            let d = node.describe();
            let src = *layouts.get(node.inputs[0].as_str()).ok_or_else(|| fail(format!("{d}: its input '{}' has no packing on this path", node.inputs[0])))?;
            let image = |p: Packed| match p {
                Packed::Multiplexed(l, parts) => Ok((l, parts)),
                Packed::Vector(..) | Packed::Logits(_) => {
                    Err(fail(format!("{d}: its input is a vector; on vectors this path takes fully connected layers and ReLUs")))
                }
            };
            // One op per part of the input, each reading the same part of every input.
            let per_part =
                |node: &GraphNode, depth: usize, out: Packed, kind: &dyn Fn(&Layout, std::ops::Range<usize>) -> Result<FheOpKind>| -> Result<Vec<ResOp>> {
                    let Packed::Multiplexed(l, parts) = out else { return Err(fail(format!("{d}: expected an image"))) };
                    let parts = l.parts(parts)?;
                    let n = parts.len();
                    parts
                        .into_iter()
                        .enumerate()
                        .map(|(k, (range, part))| {
                            Ok(ResOp {
                                placed: PlacedOp {
                                    name: part_name(&node.name, k, n),
                                    inputs: node.inputs.iter().map(|t| part_name(t, k, n)).collect(),
                                    output: part_name(&node.output, k, n),
                                    depth,
                                    relu: false,
                                },
                                kind: kind(&part, range)?,
                                rotations: vec![],
                                out,
                                tensor: node.output.clone(),
                            })
                        })
                        .collect()
                };
            let pair = match src {
                Packed::Multiplexed(l, None) if self.options.hyphen => self.hyphen_pair(i, &l)?,
                _ => None,
            };
            let (new_ops, out) = if let Some(pair) = pair {
                node = &nodes[i + 2];
                i += 2;
                let out = pair.out;
                (vec![pair], out)
            } else {
                match node.op {
                    NodeOp::Conv => {
                        let Some((wgt, c_out, k, stride, output_image)) = dense_conv(node) else {
                            return Err(fail(format!(
                                "{d}: the bootstrapped path takes convolutions at stride 1 or 2 alike in both directions, padding below the kernel, groups that divide the channels"
                            )));
                        };
                        let (src, parts) = image(src)?;
                        let bias = node.param("bias").map(|b| b.data.as_slice());
                        let (ops, out) = self.conv_ops(node, src, parts, ConvSpec { out_channels: c_out, kernel: k, stride, weights: &wgt, bias, output_image })?;
                        let Packed::Multiplexed(l, _) = out else { unreachable!("conv_ops packs images") };
                        same_shape(node, c_out, &nn_layout(&Layout { channels: 1, ..l }, self.slots, &d)?)?;
                        (ops, out)
                    }
                    NodeOp::Avgpool => {
                        let (src, parts) = image(src)?;
                        let (weights, kernel, stride) = pooling_as_conv(node, src.channels)?;
                        let rows_cols = match node.shape[..] {
                            [_, rows, cols] => (rows, cols),
                            _ => return Err(fail(format!("{d}: output shape {:?} is not (C, H, W)", node.shape))),
                        };
                        let spec = ConvSpec { out_channels: src.channels, kernel, stride, weights: &weights, bias: None, output_image: Some(rows_cols) };
                        self.conv_ops(node, src, parts, spec)
                            .map_err(|e| fail(format!("{} (the pooling as a {kernel} x {kernel} convolution at stride {stride})", super::message(&e))))?
                    }
                    NodeOp::Poly => {
                        let rows = quadratic_rows(node).ok_or_else(|| fail(format!("{d}: expected a per-channel quadratic (C, 3)")))?;
                        let (l, _) = image(src)?;
                        if rows.len() != l.channels {
                            return Err(fail(format!("{d}: {} coefficient rows for {} channels", rows.len(), l.channels)));
                        }
                        let linear = rows.iter().all(|r| r[2] == 0.0);
                        let monic = rows.iter().all(|r| r[2] == 1.0);
                        let slots = self.slots;
                        let kind = |part: &Layout, range: std::ops::Range<usize>| -> Result<FheOpKind> {
                            let rows = &rows[range];
                            // None for a coefficient that is 0 in every channel.
                            let packed = |j: usize| -> Result<Option<Vec<f64>>> {
                                if rows.iter().all(|r| r[j] == 0.0) {
                                    return Ok(None);
                                }
                                let col: Vec<f64> = rows.iter().map(|r| r[j]).collect();
                                pack_channels(part, slots, &col, &d).map(Some)
                            };
                            let sv = |v: Option<Vec<f64>>| v.map(|v| SlotValues::from_dense(&v));
                            Ok(if linear {
                                // b x + c (a per-channel scale): one level.
                                let b = packed(1)?.unwrap_or_else(|| vec![0.0; slots]);
                                FheOpKind::ScaleShift { b: SlotValues::from_dense(&b), c: sv(packed(0)?) }
                            } else {
                                // Monic (x times x): one level; else a x first, then times x: two.
                                let a = if monic { None } else { packed(2)? };
                                FheOpKind::Quadratic { a: sv(a), b: sv(packed(1)?), c: sv(packed(0)?) }
                            })
                        };
                        let depth = if linear || monic { 1 } else { 2 };
                        (per_part(node, depth, src, &kind)?, src)
                    }
                    NodeOp::Relu if matches!(src, Packed::Vector(..)) => {
                        let placed = PlacedOp { name: node.name.clone(), inputs: node.inputs.clone(), output: node.output.clone(), depth: 0, relu: true };
                        let kind = FheOpKind::CompositeRelu { bound: 0.0, stages: vec![], depths: vec![] };
                        (vec![ResOp { placed, kind, rotations: vec![], out: src, tensor: node.output.clone() }], src)
                    }
                    NodeOp::Flatten | NodeOp::Linear => {
                        // A flatten feeds the fully connected layer after it, read from the image's slots.
                        let (lin, input) = match (node.op, src) {
                            (NodeOp::Linear, Packed::Vector(n, period)) => (node, SlotPacking::flat(n, period)),
                            (NodeOp::Flatten, Packed::Multiplexed(l, None)) => {
                                let lin = nodes.get(i + 1).filter(|n| n.op == NodeOp::Linear && n.inputs == [node.output.clone()]).ok_or_else(|| {
                                    fail(format!("{d}: a flatten of an image feeds one fully connected layer on this path"))
                                })?;
                                let m = nn_layout(&l, self.slots, &d)?;
                                let index = (0..m.channels)
                                    .flat_map(|c| (0..m.rows).flat_map(move |y| (0..m.cols).map(move |x| (c, y, x))))
                                    .map(|(c, y, x)| m.slot(c, y, x) as i64)
                                    .collect();
                                i += 1;
                                (lin, SlotPacking { shape: vec![m.channels * m.rows * m.cols], index, period: m.copy_len(), grid: None })
                            }
                            (NodeOp::Flatten, Packed::Multiplexed(_, Some(_))) => {
                                return Err(fail(format!("{d}: a flatten of a tensor in several ciphertexts is not built; pool it into one first")))
                            }
                            _ => return Err(fail(format!("{d}: a fully connected layer reads a flattened image or a vector on this path"))),
                        };
                        let w = lin.required("weight")?;
                        if w.shape.len() != 2 || w.shape[1] != input.index.len() {
                            return Err(fail(format!("{}: weights {:?} for {} inputs", lin.describe(), w.shape, input.index.len())));
                        }
                        let dense = super::linear::dense_matrix(lin, &input, self.slots)?;
                        let slots = self.slots as i64;
                        let kind = FheOpKind::Linear {
                            rows: dense.matrix.rows.iter().map(|&r| r as u32).collect(),
                            cols: dense.matrix.cols.iter().map(|&c| c.rem_euclid(slots) as u32).collect(),
                            values: dense.matrix.values.clone(),
                            period: dense.matrix.period,
                            sum_steps: dense.sum_steps.clone(),
                            bias: dense.bias.map(|b| SlotValues::from_dense(&b)),
                        };
                        let rotations = vec![(diagonal_rotations(&dense.matrix.diagonal_indices(self.slots), self.slots), 0), (dense.sum_steps, 1)];
                        let out = Packed::Vector(w.shape[0], dense.packing.period);
                        let placed = PlacedOp { name: lin.name.clone(), inputs: node.inputs.clone(), output: lin.output.clone(), depth: 1, relu: false };
                        node = lin;
                        (vec![ResOp { placed, kind, rotations, out, tensor: lin.output.clone() }], out)
                    }
                    NodeOp::Relu => {
                        image(src)?;
                        let relu = |_: &Layout, _| Ok(FheOpKind::CompositeRelu { bound: 0.0, stages: vec![], depths: vec![] });
                        let mut ops = per_part(node, 0, src, &relu)?;
                        ops.iter_mut().for_each(|op| op.placed.relu = true);
                        (ops, src)
                    }
                    NodeOp::Add => {
                        let other = layouts
                            .get(node.inputs[1].as_str())
                            .ok_or_else(|| fail(format!("{d}: its input '{}' has no packing on this path", node.inputs[1])))?;
                        if *other != src {
                            return Err(fail(format!("{d}: the two inputs are packed differently")));
                        }
                        image(src)?;
                        (per_part(node, 0, src, &|_, _| Ok(FheOpKind::Add))?, src)
                    }
                    NodeOp::GlobalAvgpool => {
                        let (flat, lin) = (nodes.get(i + 1), nodes.get(i + 2));
                        let (Some(flat), Some(lin)) = (flat.filter(|f| f.op == NodeOp::Flatten), lin.filter(|l| l.op == NodeOp::Linear)) else {
                            return Err(fail(format!("{d}: expected global average pooling, flatten, linear")));
                        };
                        let (l, parts) = image(src)?;
                        let wgt = lin.required("weight")?;
                        let n_out = wgt.shape[0];
                        let bias = lin.param("bias").map_or(vec![0.0; n_out], |b| b.data.clone());
                        if wgt.data.len() != n_out * l.channels || bias.len() != n_out || n_out == 0 || n_out > self.slots {
                            return Err(fail(format!("{}: {n_out} x {} weights for {} channels", lin.describe(), wgt.shape[1], l.channels)));
                        }
                        let split = l.parts(parts)?;
                        let steps =
                            union(split.iter().map(|(_, part)| Ok(pool_fc_rotations(&nn_layout(part, self.slots, &d)?, n_out))).collect::<Result<Vec<_>>>()?);
                        let kind = FheOpKind::PoolFc { input: l, n_out, weights: wgt.data.clone(), bias, part_channels: parts };
                        let placed = PlacedOp {
                            name: node.name.clone(),
                            inputs: part_names(&node.inputs[0], split.len()),
                            output: lin.output.clone(),
                            depth: 1,
                            relu: false,
                        };
                        layouts.insert(flat.output.as_str(), Packed::Logits(n_out));
                        i += 2;
                        node = lin;
                        let out = Packed::Logits(n_out);
                        (vec![ResOp { placed, kind, rotations: vec![(steps, 0)], out, tensor: lin.output.clone() }], out)
                    }
                    other => return Err(fail(format!("{d}: the bootstrapped FHE path does not take '{}'", other.as_str()))),
                }
            };
            layouts.insert(node.output.as_str(), out);
            ops.extend(new_ops);
            i += 1;
        }
        if !ops.last().is_some_and(|o| matches!(o.kind, FheOpKind::PoolFc { .. } | FheOpKind::Linear { .. })) {
            return Err(fail(format!("{}: the bootstrapped path expects the network to end in a fully connected layer", g.name)));
        }
        Ok((ops, input, input_parts))
    }
}

/// The composite ReLU's stages (Chebyshev coefficients on [-1, 1]) and their depths
/// ceil(log2(coefficients)).
fn relu_stages(degrees: Option<&[usize]>) -> Result<(Vec<Vec<f64>>, Vec<usize>)> {
    let degrees = degrees.unwrap_or(&lycaon_ckks::LEE_ALPHA13_DEGREES);
    let (sign, _) = lycaon_ckks::CompositeSign::for_relu(degrees).map_err(|e| fail(format!("composite ReLU of degrees {degrees:?}: {e}")))?;
    let stages: Vec<Vec<f64>> = sign.stages.iter().map(|p| p.coeffs.clone()).collect();
    let depths = stages.iter().map(|c| c.len().max(1).next_power_of_two().trailing_zeros() as usize).collect();
    Ok((stages, depths))
}

/// The program of `graph` on the bootstrapped path.
pub fn compile(graph: &ModelGraph, options: &CompileOptions) -> Result<FheProgram> {
    let auto = options.bootstrap_shape == "auto";
    let ring = if auto { bootstrap_shape("logn16_full_slots")? } else { bootstrap_shape(&options.bootstrap_shape)? };
    let slots = 1usize << (ring.log_n - 1);
    let top = ring.residual_levels;
    let bounds = options.bounds.as_ref().ok_or_else(|| {
        fail("the bootstrapped path needs the value bound of every tensor (bounds: from calibration images, as FheResNet._calibrate computes them)")
    })?;
    for (name, &b) in bounds {
        if !(b.is_finite() && b > 0.0) {
            return Err(fail(format!("the bound {b} of tensor '{name}' is not a positive number")));
        }
    }
    let original = graph;
    let (graph, space_to_depth) = super::space_to_depth::apply(original, slots)?;
    let graph: &ModelGraph = &graph;
    let compiler = Compiler { graph, options, slots, readers: graph.readers() };
    let (mut ops, input, input_parts) = compiler.ops()?;
    // Every tensor repeats with its layout's copy length; bootstrapping as few slots as the
    // longest one needs is cheaper (one EvalMod instead of two).
    let copy_len = |l: &Layout, parts: Option<usize>, what: &str| -> Result<usize> {
        l.parts(parts)?.iter().map(|(_, part)| Ok(nn_layout(part, slots, what)?.copy_len())).try_fold(0, |m, c: Result<usize>| Ok(m.max(c?)))
    };
    let mut period = copy_len(&input, input_parts, "the input")?;
    for op in &ops {
        match &op.out {
            Packed::Multiplexed(l, parts) => period = period.max(copy_len(l, *parts, &op.placed.name)?),
            Packed::Vector(_, p) => period = period.max(*p),
            Packed::Logits(_) => {}
        }
    }
    let shape_name = if auto { bootstrap_shape_for_period(period) } else { options.bootstrap_shape.clone() };
    let shape = bootstrap_shape(&shape_name)?;
    if shape.log_n != ring.log_n || shape.slots() < period {
        return Err(fail(format!(
            "the bootstrapping shape {shape_name} bootstraps {} slots, but a tensor of this network repeats only every {period} slots (use {} or 'auto')",
            shape.slots(),
            bootstrap_shape_for_period(period)
        )));
    }
    let (stages, depths) = if ops.iter().any(|o| o.placed.relu) { relu_stages(options.relu_degrees.as_deref())? } else { (vec![], vec![]) };
    // Each ciphertext's graph tensor (a part's bound is its tensor's).
    let input_names = part_names(&graph.input, input.parts(input_parts)?.len());
    let tensor_of: HashMap<String, String> =
        input_names.iter().map(|n| (n.clone(), graph.input.clone())).chain(ops.iter().map(|o| (o.placed.output.clone(), o.tensor.clone()))).collect();
    let bound = |name: &str| {
        let tensor = tensor_of.get(name).map_or(name, String::as_str);
        bounds.get(tensor).copied().ok_or_else(|| fail(format!("tensor '{tensor}' has no value bound; pass the calibrated bounds of every tensor")))
    };
    // A bound under 1 is put back by a product with it after the bootstrap (one level).
    let refreshed: HashMap<String, usize> =
        tensor_of.iter().filter_map(|(n, t)| bounds.get(t).map(|&b| (n.clone(), if b >= 1.0 { top } else { top.saturating_sub(1) }))).collect();
    let levels = Levels { top, relu_depths: &depths, refreshed: &refreshed };
    let placed: Vec<PlacedOp> = ops.iter().map(|o| o.placed.clone()).collect();
    let output = placed.last().map(|o| o.output.clone()).unwrap_or_default();
    if options.placement == Placement::Fewest {
        // Its state is every live ciphertext's level: parts multiply the states.
        if let Some(op) = ops.iter().find(|o| matches!(o.out, Packed::Multiplexed(_, Some(_)))) {
            return Err(fail(format!(
                "{}: its output takes several ciphertexts, and the fewest-bootstraps search takes tensors of one ciphertext each; use the greedy placement",
                op.placed.name
            )));
        }
    }
    let plan = match options.placement {
        Placement::Greedy => levels.greedy(&placed, &input_names)?,
        Placement::Fewest => levels.fewest(&placed, &input_names, &output)?,
    };
    let op_levels = levels.op_levels(&placed, &input_names, &plan)?;
    let mut rotation_levels: BTreeMap<i64, usize> = BTreeMap::new();
    let mut program_ops = Vec::with_capacity(ops.len());
    for ((op, refresh), &level) in ops.iter_mut().zip(&plan).zip(&op_levels) {
        for (steps, below) in &op.rotations {
            let at = level.saturating_sub(*below);
            for &s in steps {
                let s = s.rem_euclid(slots as i64);
                if s != 0 {
                    let e = rotation_levels.entry(s).or_insert(0);
                    *e = (*e).max(at);
                }
            }
        }
        if op.placed.relu {
            // The last stage folded into the step B (1 + p) / 2.
            let b = bound(&op.placed.inputs[0])?;
            let mut st = stages.clone();
            if let Some(last) = st.last_mut() {
                for c in last.iter_mut() {
                    *c *= b / 2.0;
                }
                if let Some(c0) = last.first_mut() {
                    *c0 += b / 2.0;
                }
            }
            op.kind = FheOpKind::CompositeRelu { bound: b, stages: st, depths: depths.clone() };
        }
        let refresh = refresh.iter().map(|n| Ok(Refresh { tensor: n.clone(), bound: bound(n)? })).collect::<Result<Vec<_>>>()?;
        program_ops.push(FheOp {
            name: op.placed.name.clone(),
            inputs: op.placed.inputs.clone(),
            output: op.placed.output.clone(),
            level,
            depth: op.placed.depth,
            refresh,
            kind: std::mem::replace(&mut op.kind, FheOpKind::Alias),
        });
    }
    let n_out = match ops.last().map(|o| o.out) {
        Some(Packed::Logits(n) | Packed::Vector(n, _)) => n,
        _ => return Err(fail("the network's output must be the logits of the last linear layer")),
    };
    Ok(FheProgram {
        format: FHE_PROGRAM_FORMAT,
        name: options.name.clone().unwrap_or_else(|| graph.name.clone()),
        parameters: FheParameters::Bootstrappable { shape: shape_name },
        input: graph.input.clone(),
        input_shape: original.input_shape.clone(),
        input_packing: InputPacking::Multiplexed {
            channels: input.channels,
            height: input.height,
            width: input.width,
            gap: input.gap,
            image: input.image,
            part_channels: input_parts,
            space_to_depth,
        },
        input_level: top,
        output,
        output_slots: (0..n_out as u32).collect(),
        ops: program_ops,
        rotation_levels,
        relin_level: Some(top),
        metadata: options.metadata.clone().unwrap_or_else(|| serde_json::json!({})),
    })
}

#[cfg(test)]
mod tests {
    use lycaon_nn::fhe::{AvgPoolFc, ConvMethod};

    use super::*;

    #[test]
    fn pool_fc_rotations_are_lycaon_nns() {
        let ctx = super::super::linear::tests::toy_context();
        for (c, h, w, gap, n_out) in [(4, 4, 4, 2, 3), (16, 8, 8, 1, 10), (8, 4, 4, 2, 5)] {
            let l = MultiplexedLayout::new(c, h, w, gap, 1024).unwrap();
            let weights = vec![0.5; n_out * c];
            let layer = AvgPoolFc::new(&ctx, l, n_out, &weights, &vec![0.0; n_out]).unwrap();
            assert_eq!(pool_fc_rotations(&l, n_out), layer.rotation_steps(), "{c} x {h} x {w} gap {gap}");
        }
    }

    /// A graph node writing `{name}:o`.
    fn node(
        op: NodeOp,
        name: &str,
        inputs: &[&str],
        shape: &[usize],
        attrs: crate::fhe::graph::NodeAttrs,
        params: Vec<(&str, crate::fhe::graph::Tensor)>,
    ) -> GraphNode {
        GraphNode {
            op,
            name: name.into(),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            output: format!("{name}:o"),
            shape: shape.to_vec(),
            attrs,
            params: params.into_iter().map(|(k, t)| (k.to_string(), Some(t))).collect(),
        }
    }

    /// `conv` (a node named "{name}"), then ReLU, global average pooling, flatten and a 2-class
    /// linear layer, on an input of `input_shape`.
    fn conv_relu_head(conv: GraphNode, input_shape: Vec<usize>) -> ModelGraph {
        use crate::fhe::graph::{NodeAttrs, Tensor, GRAPH_FORMAT, GRAPH_VERSION};
        let (c, name, out) = (conv.shape[0], conv.name.clone(), conv.output.clone());
        let nodes = vec![
            node(NodeOp::Relu, "relu", &[out.as_str()], &conv.shape, NodeAttrs::default(), vec![]),
            node(NodeOp::GlobalAvgpool, "gap", &["relu:o"], &[c, 1, 1], NodeAttrs::default(), vec![]),
            node(NodeOp::Flatten, "flat", &["gap:o"], &[c], NodeAttrs::default(), vec![]),
            node(NodeOp::Linear, "fc", &["flat:o"], &[2], NodeAttrs::default(), vec![("weight", Tensor::new(vec![2, c], vec![0.5; 2 * c]))]),
        ];
        let nodes = std::iter::once(conv).chain(nodes).collect();
        ModelGraph { format: GRAPH_FORMAT.into(), version: GRAPH_VERSION, name, input: "x".into(), input_shape, output: "fc:o".into(), nodes }
    }

    /// A residual block on a 4 x 8 x 8 image: conv, general quadratic, conv, add, monic
    /// quadratic, ReLU, global average pooling, flatten, linear.
    fn tiny_resnet() -> ModelGraph {
        use crate::fhe::graph::{NodeAttrs, Tensor, GRAPH_FORMAT, GRAPH_VERSION};
        let pad = NodeAttrs { stride: Some([1, 1]), pads: Some([1; 4]), groups: Some(1), ..Default::default() };
        let weights = |n: usize, scale: f64| (0..n).map(|i| ((i * 7919 % 101) as f64 / 101.0 - 0.5) * scale).collect::<Vec<f64>>();
        let quad = |a: f64| Tensor::new(vec![4, 3], (0..4).flat_map(|c| [0.1 * c as f64, 0.5, a]).collect());
        let nodes = vec![
            node(NodeOp::Conv, "conv1", &["x"], &[4, 8, 8], pad.clone(), vec![("weight", Tensor::new(vec![4, 4, 3, 3], weights(144, 0.4)))]),
            node(NodeOp::Poly, "act1", &["conv1:o"], &[4, 8, 8], NodeAttrs::default(), vec![("coefficients", quad(0.3))]),
            node(
                NodeOp::Conv,
                "conv2",
                &["act1:o"],
                &[4, 8, 8],
                pad,
                vec![("weight", Tensor::new(vec![4, 4, 3, 3], weights(144, 0.3))), ("bias", Tensor::new(vec![4], vec![0.1; 4]))],
            ),
            node(NodeOp::Add, "add", &["conv2:o", "x"], &[4, 8, 8], NodeAttrs::default(), vec![]),
            node(NodeOp::Poly, "act2", &["add:o"], &[4, 8, 8], NodeAttrs::default(), vec![("coefficients", quad(1.0))]),
            node(NodeOp::Relu, "relu", &["act2:o"], &[4, 8, 8], NodeAttrs::default(), vec![]),
            node(NodeOp::GlobalAvgpool, "pool", &["relu:o"], &[4, 1, 1], NodeAttrs::default(), vec![]),
            node(NodeOp::Flatten, "flat", &["pool:o"], &[4], NodeAttrs::default(), vec![]),
            node(NodeOp::Linear, "fc", &["flat:o"], &[3], NodeAttrs::default(), vec![("weight", Tensor::new(vec![3, 4], weights(12, 1.0)))]),
        ];
        let g = ModelGraph {
            format: GRAPH_FORMAT.into(),
            version: GRAPH_VERSION,
            name: "tiny".into(),
            input: "x".into(),
            input_shape: vec![4, 8, 8],
            output: "fc:o".into(),
            nodes,
        };
        g.validate().unwrap();
        g
    }

    #[test]
    fn a_tiny_resnet_compiles_with_a_level_plan_that_fits() {
        let g = tiny_resnet();
        let mut bounds: BTreeMap<String, f64> = std::iter::once("x".to_string()).chain(g.nodes.iter().map(|n| n.output.clone())).map(|n| (n, 4.0)).collect();
        bounds.insert("add:o".into(), 0.5); // refreshed one level lower
        for (hyphen, placement) in [(true, Placement::Greedy), (false, Placement::Greedy), (false, Placement::Fewest)] {
            let options = CompileOptions { bounds: Some(bounds.clone()), hyphen, placement, ..Default::default() };
            let choice = super::super::choose_path(&g, &options).unwrap();
            assert_eq!(choice.path, super::super::CompilePath::Bootstrapped);
            assert!(choice.reason.contains("relu node 'relu'"), "{}", choice.reason);
            let p = super::super::compile(&g, &options).unwrap();
            let kinds: Vec<String> = p.ops.iter().map(|o| serde_json::to_value(&o.kind).unwrap()["kind"].as_str().unwrap().to_string()).collect();
            assert_eq!(kinds.last().map(String::as_str), Some("pool_fc"));
            assert!(kinds.iter().any(|k| k == "composite_relu") && kinds.iter().any(|k| k == "quadratic"));
            // Each convolution by the cheaper method, written into the program only when not MPConv.
            let methods: Vec<ConvMethod> =
                p.ops.iter().filter_map(|o| if let FheOpKind::MpConv { method, .. } = &o.kind { Some(*method) } else { None }).collect();
            let json = p.to_json();
            assert_eq!(json.matches("\"method\":\"bsgs\"").count(), methods.iter().filter(|m| **m == ConvMethod::Bsgs).count());
            assert!(!json.contains("\"method\":\"mpconv\""));
            let top = p.input_level;
            assert_eq!(top, bootstrap_shape("logn16_full_slots").unwrap().residual_levels);
            assert!(p.ops.iter().all(|o| o.level >= o.depth && o.level <= top), "{:?}", p.ops.iter().map(|o| (o.level, o.depth)).collect::<Vec<_>>());
            assert!(p.rotation_levels.values().all(|&l| l <= top) && !p.rotation_levels.is_empty());
            assert_eq!(p.output_slots, [0, 1, 2]);
            assert!(p.bootstraps().unwrap() >= 2, "the composite ReLU alone needs bootstraps");
            let relu = p.ops.iter().find(|o| o.name == "relu").unwrap();
            match &relu.kind {
                FheOpKind::CompositeRelu { bound, stages, depths } => {
                    assert_eq!((*bound, depths.as_slice()), (4.0, &[4usize, 4, 5][..]));
                    assert_eq!(stages.len(), 3);
                }
                other => panic!("{other:?}"),
            }
        }
        // The bootstrapping shape: 4 x 8 x 8 at gap 1 repeats every 256 slots, so `auto` takes
        // the sparsest measured shape (2^11 slots); a named one must hold the period.
        let options = CompileOptions { bounds: Some(bounds.clone()), ..Default::default() };
        let p = super::super::compile(&g, &options).unwrap();
        assert_eq!(p.parameters, FheParameters::Bootstrappable { shape: "logn16_slots11".into() });
        for (shape, ok) in [("logn16_full_slots", true), ("logn16_slots14", true), ("logn16_slots10", false), ("logn16_slots16", false), ("bfv", false)] {
            let named = CompileOptions { bootstrap_shape: shape.into(), ..options.clone() };
            match super::super::compile(&g, &named) {
                Ok(p) => assert!(ok && p.parameters == FheParameters::Bootstrappable { shape: shape.into() }, "{shape}"),
                Err(e) => assert!(!ok && e.to_string().contains("unknown bootstrapping shape"), "{shape}: {e}"),
            }
        }
        assert_eq!(bootstrap_shape_for_period(1 << 14), "logn16_slots14");
        assert_eq!(bootstrap_shape_for_period(1 << 15), "logn16_full_slots");
        assert_eq!(bootstrap_shape_for_period(3000), "logn16_slots12");
        // Without bounds: a clear error, naming why the leveled path was not taken either.
        let e = super::super::compile(&g, &CompileOptions::default()).unwrap_err().to_string();
        assert!(e.contains("relu node 'relu'") && e.contains("value bound"), "{e}");
    }

    #[test]
    fn images_that_are_not_powers_of_two_and_average_pooling_compile() {
        use crate::fhe::graph::{NodeAttrs, Tensor, GRAPH_FORMAT, GRAPH_VERSION};
        let pad = NodeAttrs { stride: Some([1, 1]), pads: Some([1; 4]), groups: Some(1), ..Default::default() };
        let pool = |k: usize, s: usize, p: usize| NodeAttrs { kernel: Some([k, k]), stride: Some([s, s]), pads: Some([p; 4]), ..Default::default() };
        let graph = |pooling: NodeAttrs, pooled: [usize; 2]| ModelGraph {
            format: GRAPH_FORMAT.into(),
            version: GRAPH_VERSION,
            name: "odd".into(),
            input: "x".into(),
            input_shape: vec![3, 6, 5],
            output: "fc:o".into(),
            nodes: vec![
                node(NodeOp::Conv, "conv", &["x"], &[4, 6, 5], pad.clone(), vec![("weight", Tensor::new(vec![4, 3, 3, 3], vec![0.1; 108]))]),
                node(NodeOp::Relu, "relu", &["conv:o"], &[4, 6, 5], NodeAttrs::default(), vec![]),
                node(NodeOp::Avgpool, "pool", &["relu:o"], &[4, pooled[0], pooled[1]], pooling, vec![]),
                node(NodeOp::GlobalAvgpool, "gap", &["pool:o"], &[4, 1, 1], NodeAttrs::default(), vec![]),
                node(NodeOp::Flatten, "flat", &["gap:o"], &[4], NodeAttrs::default(), vec![]),
                node(NodeOp::Linear, "fc", &["flat:o"], &[2], NodeAttrs::default(), vec![("weight", Tensor::new(vec![2, 4], vec![0.5; 8]))]),
            ],
        };
        let bounds = |g: &ModelGraph| -> BTreeMap<String, f64> {
            std::iter::once("x".to_string()).chain(g.nodes.iter().map(|n| n.output.clone())).map(|n| (n, 2.0)).collect()
        };
        // 2 x 2 at stride 2: a 3 x 3 kernel (offsets 0, +1), floor(6 / 2) x floor(5 / 2) kept.
        let g = graph(pool(2, 2, 0), [3, 2]);
        g.validate().unwrap();
        let p = super::super::compile(&g, &CompileOptions { bounds: Some(bounds(&g)), ..Default::default() }).unwrap();
        assert_eq!(
            p.input_packing,
            InputPacking::Multiplexed { channels: 3, height: 8, width: 8, gap: 1, image: Some([6, 5]), part_channels: None, space_to_depth: None }
        );
        let op = p.ops.iter().find(|o| o.name == "pool").unwrap();
        match &op.kind {
            FheOpKind::MpConv { kernel, stride, output_image, weights, input, .. } => {
                assert_eq!((*kernel, *stride, *output_image, input.image), (3, 2, Some([3, 2]), Some([6, 5])));
                let taps: Vec<usize> = (0..9).filter(|&t| weights[t] != 0.0).collect(); // channel 0 -> 0
                assert_eq!(taps, [4, 5, 7, 8]);
                assert!(weights.iter().all(|&w| w == 0.0 || w == 0.25));
            }
            other => panic!("{other:?}"),
        }
        // 3 x 3 at stride 1 with padding 1: the plain 3 x 3 kernel.
        let g = graph(pool(3, 1, 1), [6, 5]);
        super::super::compile(&g, &CompileOptions { bounds: Some(bounds(&g)), ..Default::default() }).unwrap();
        // Stride 3 is refused by name.
        let g = graph(pool(3, 3, 0), [2, 1]);
        let e =
            super::super::compile(&g, &CompileOptions { bounds: Some(bounds(&g)), path: Some(super::super::CompilePath::Bootstrapped), ..Default::default() })
                .unwrap_err();
        assert!(e.to_string().contains("avgpool node 'pool'") && e.to_string().contains("stride"), "{e}");
    }

    #[test]
    fn tensors_larger_than_a_ciphertext_are_split_by_channels() {
        use crate::fhe::graph::{NodeAttrs, Tensor, GRAPH_FORMAT, GRAPH_VERSION};
        let pad = NodeAttrs { stride: Some([1, 1]), pads: Some([1; 4]), groups: Some(1), ..Default::default() };
        let pool = NodeAttrs { kernel: Some([2, 2]), stride: Some([2, 2]), pads: Some([0; 4]), ..Default::default() };
        let weights: Vec<f64> = (0..16 * 16 * 9).map(|i| ((i * 37 % 19) as f64 - 9.0) / 50.0).collect();
        // 16 x 64 x 64 takes 2^16 slots: two ciphertexts of 8 channels; the pooling to gap 2
        // gathers them into one.
        let graph = |pooled: bool, side: usize| {
            let mut nodes = vec![
                node(
                    NodeOp::Conv,
                    "conv",
                    &["x"],
                    &[16, side, side],
                    pad.clone(),
                    vec![("weight", Tensor::new(vec![16, 16, 3, 3], weights.clone())), ("bias", Tensor::new(vec![16], vec![0.1; 16]))],
                ),
                node(NodeOp::Relu, "relu", &["conv:o"], &[16, side, side], NodeAttrs::default(), vec![]),
                node(NodeOp::Add, "add", &["relu:o", "x"], &[16, side, side], NodeAttrs::default(), vec![]),
            ];
            let last = if pooled {
                nodes.push(node(NodeOp::Avgpool, "pool", &["add:o"], &[16, side / 2, side / 2], pool.clone(), vec![]));
                "pool:o"
            } else {
                "add:o"
            };
            nodes.push(node(NodeOp::GlobalAvgpool, "gap", &[last], &[16, 1, 1], NodeAttrs::default(), vec![]));
            nodes.push(node(NodeOp::Flatten, "flat", &["gap:o"], &[16], NodeAttrs::default(), vec![]));
            nodes.push(node(
                NodeOp::Linear,
                "fc",
                &["flat:o"],
                &[3],
                NodeAttrs::default(),
                vec![("weight", Tensor::new(vec![3, 16], (0..48).map(|i| i as f64 / 48.0).collect()))],
            ));
            let g = ModelGraph {
                format: GRAPH_FORMAT.into(),
                version: GRAPH_VERSION,
                name: "wide".into(),
                input: "x".into(),
                input_shape: vec![16, side, side],
                output: "fc:o".into(),
                nodes,
            };
            g.validate().unwrap();
            g
        };
        let bounds = |g: &ModelGraph| -> BTreeMap<String, f64> {
            std::iter::once("x".to_string()).chain(g.nodes.iter().map(|n| n.output.clone())).map(|n| (n, 4.0)).collect()
        };
        let options = |g: &ModelGraph| CompileOptions { bounds: Some(bounds(g)), ..Default::default() };
        for pooled in [true, false] {
            let g = graph(pooled, 64);
            let p = super::super::compile(&g, &options(&g)).unwrap();
            assert_eq!(
                p.input_packing,
                InputPacking::Multiplexed { channels: 16, height: 64, width: 64, gap: 1, image: None, part_channels: Some(8), space_to_depth: None }
            );
            assert_eq!(p.input_names().unwrap(), ["x#0", "x#1"]);
            let by_name: HashMap<&str, &FheOp> = p.ops.iter().map(|o| (o.name.as_str(), o)).collect();
            for j in 0..2 {
                let conv = by_name[format!("conv#{j}").as_str()];
                assert_eq!((conv.inputs.as_slice(), conv.output.as_str()), (&["x#0".to_string(), "x#1".to_string()][..], format!("conv:o#{j}").as_str()));
                match &conv.kind {
                    // Output channels 8 j .. 8 j + 8 of every input channel.
                    FheOpKind::MpConv { out_channels, weights: w, part_channels, input, .. } => {
                        assert_eq!((*out_channels, *part_channels, input.channels), (8, Some(8), 16));
                        assert_eq!(w[..], weights[j * 8 * 144..(j + 1) * 8 * 144]);
                    }
                    other => panic!("{other:?}"),
                }
                assert_eq!(by_name[format!("relu#{j}").as_str()].inputs, [format!("conv:o#{j}")]);
                assert_eq!(by_name[format!("add#{j}").as_str()].inputs, [format!("relu:o#{j}"), format!("x#{j}")]);
            }
            let last = &p.ops.last().unwrap();
            match &last.kind {
                FheOpKind::PoolFc { part_channels, input, .. } if pooled => {
                    assert_eq!((*part_channels, input.gap, input.channels), (None, 2, 16));
                    assert_eq!(by_name["pool"].inputs, ["add:o#0", "add:o#1"]);
                    assert_eq!(last.inputs, ["pool:o"]);
                }
                FheOpKind::PoolFc { part_channels, .. } => {
                    assert_eq!(*part_channels, Some(8));
                    assert_eq!(last.inputs, ["add:o#0", "add:o#1"]);
                }
                other => panic!("{other:?}"),
            }
            // Each part's bound is its tensor's; every part of the ReLU's input bootstraps alike.
            assert!(p.ops.iter().filter(|o| o.name.starts_with("relu#")).all(|o| matches!(o.kind, FheOpKind::CompositeRelu { bound: 4.0, .. })));
            let fewest = CompileOptions { placement: Placement::Fewest, ..options(&g) };
            let e = super::super::compile(&g, &fewest).err().expect("fewest refuses parts").to_string();
            assert!(e.contains("one ciphertext each") && e.contains("greedy"), "{e}");
        }
        // One channel larger than a ciphertext arrives space-to-depth, which a stride-1
        // convolution cannot read: refused by name.
        let g = graph(false, 256);
        let e = super::super::compile(&g, &options(&g)).err().expect("a channel over a ciphertext").to_string();
        assert!(e.contains("conv node 'conv'") && e.contains("space-to-depth by 2"), "{e}");
        // ResNet's stem (7 x 7 at stride 2) on 3 x 200 x 200 reads it as 12 x 100 x 100 in six
        // parts of two channels, by a 5 x 5 kernel at stride 1.
        let stem = NodeAttrs { stride: Some([2, 2]), pads: Some([3; 4]), groups: Some(1), ..Default::default() };
        let conv = node(NodeOp::Conv, "stem", &["x"], &[4, 100, 100], stem, vec![("weight", Tensor::new(vec![4, 3, 7, 7], vec![0.01; 588]))]);
        let g = conv_relu_head(conv, vec![3, 200, 200]);
        g.validate().unwrap();
        let p = super::super::compile(&g, &options(&g)).unwrap();
        assert_eq!(p.input_shape, [3, 200, 200]);
        assert_eq!(
            p.input_packing,
            InputPacking::Multiplexed {
                channels: 12,
                height: 128,
                width: 128,
                gap: 1,
                image: Some([100, 100]),
                part_channels: Some(2),
                space_to_depth: Some(2)
            }
        );
        match &p.ops[0].kind {
            FheOpKind::MpConv { kernel, stride, part_channels, out_channels, .. } => {
                assert_eq!((*kernel, *stride, *part_channels, *out_channels), (5, 1, Some(2), 2))
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(p.ops[0].inputs.len(), 6);
    }

    #[test]
    fn a_quadratic_between_convolutions_of_several_ciphertexts_runs_as_mpconvs() {
        use crate::fhe::graph::{NodeAttrs, Tensor, GRAPH_FORMAT, GRAPH_VERSION};
        // conv -> quadratic -> conv is HyPHEN's pattern, whose layers take one ciphertext: with
        // a 16 x 64 x 64 middle (two ciphertexts) it compiles as MPConvs on parts.
        let pad = NodeAttrs { stride: Some([1, 1]), pads: Some([1; 4]), groups: Some(1), ..Default::default() };
        let w = |c_out: usize, c_in: usize| Tensor::new(vec![c_out, c_in, 3, 3], (0..c_out * c_in * 9).map(|i| ((i * 37 % 19) as f64 - 9.0) / 50.0).collect());
        let quad = Tensor::new(vec![16, 3], (0..48).map(|i| if i % 3 == 2 { 1.0 } else { 0.1 }).collect());
        let nodes = vec![
            node(NodeOp::Conv, "conv1", &["x"], &[16, 64, 64], pad.clone(), vec![("weight", w(16, 3))]),
            node(NodeOp::Poly, "act", &["conv1:o"], &[16, 64, 64], NodeAttrs::default(), vec![("coefficients", quad)]),
            node(NodeOp::Conv, "conv2", &["act:o"], &[16, 64, 64], pad, vec![("weight", w(16, 16))]),
            node(NodeOp::GlobalAvgpool, "gap", &["conv2:o"], &[16, 1, 1], NodeAttrs::default(), vec![]),
            node(NodeOp::Flatten, "flat", &["gap:o"], &[16], NodeAttrs::default(), vec![]),
            node(NodeOp::Linear, "fc", &["flat:o"], &[3], NodeAttrs::default(), vec![("weight", Tensor::new(vec![3, 16], vec![0.25; 48]))]),
        ];
        let g = ModelGraph {
            format: GRAPH_FORMAT.into(),
            version: GRAPH_VERSION,
            name: "wide-quadratic".into(),
            input: "x".into(),
            input_shape: vec![3, 64, 64],
            output: "fc:o".into(),
            nodes,
        };
        g.validate().unwrap();
        let bounds: BTreeMap<String, f64> = std::iter::once("x".to_string()).chain(g.nodes.iter().map(|n| n.output.clone())).map(|n| (n, 4.0)).collect();
        let p = super::super::compile(&g, &CompileOptions { bounds: Some(bounds), ..Default::default() }).unwrap();
        let names: Vec<&str> = p.ops.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["conv1#0", "conv1#1", "act#0", "act#1", "conv2#0", "conv2#1", "gap"]);
        assert!(p.ops.iter().all(|o| !matches!(o.kind, FheOpKind::Hyphen { .. })));
    }

    #[test]
    fn a_depthwise_convolution_compiles_as_the_dense_one_zero_across_groups() {
        use crate::fhe::graph::{NodeAttrs, Tensor};
        let dw = NodeAttrs { stride: Some([1, 1]), pads: Some([1; 4]), groups: Some(4), ..Default::default() };
        let conv =
            node(NodeOp::Conv, "dw", &["x"], &[4, 8, 8], dw, vec![("weight", Tensor::new(vec![4, 1, 3, 3], (0..36).map(|i| i as f64 / 36.0).collect()))]);
        let g = conv_relu_head(conv, vec![4, 8, 8]);
        g.validate().unwrap();
        let bounds: BTreeMap<String, f64> = std::iter::once("x".to_string()).chain(g.nodes.iter().map(|n| n.output.clone())).map(|n| (n, 2.0)).collect();
        let p = super::super::compile(&g, &CompileOptions { bounds: Some(bounds), ..Default::default() }).unwrap();
        match &p.ops[0].kind {
            FheOpKind::MpConv { weights, out_channels, input, .. } => {
                assert_eq!((*out_channels, input.channels, weights.len()), (4, 4, 4 * 4 * 9));
                for o in 0..4 {
                    for c in 0..4 {
                        let block = &weights[(o * 4 + c) * 9..(o * 4 + c + 1) * 9];
                        let want: Vec<f64> = if o == c { (0..9).map(|t| (o * 9 + t) as f64 / 36.0).collect() } else { vec![0.0; 9] };
                        assert_eq!(block, &want[..], "output {o}, input {c}");
                    }
                }
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn relu_stage_depths() {
        let (stages, depths) = relu_stages(None).unwrap();
        assert_eq!(depths, [4, 4, 5]);
        assert_eq!(stages.iter().map(Vec::len).collect::<Vec<_>>(), [16, 16, 28]);
    }
}
