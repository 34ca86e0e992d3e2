//! Linear layers as plaintext matrices on the slots (the leveled path): a convolution (any
//! stride and padding) or an average pooling from one gap packing to the next, a fully connected
//! layer by the hybrid method (Juvekar et al., Gazelle: n_out padded to P_out generalised
//! diagonals over the input period P_in, then log2(P_in / P_out) rotate-and-adds), and the
//! replication of a vector that fills the slots once. Each matrix is a list of entries (row,
//! column, value) in the order Python's `FheModel` writes them, and the rotations its diagonal
//! evaluation needs follow from the distinct diagonal indices by lycaon-ckks' baby-step
//! giant-step split ([`diagonal_rotations`]).

use std::collections::BTreeSet;

use super::fail;
use super::packing::{next_pow2, Grid, SlotPacking};
use crate::fhe::graph::{GraphNode, NodeOp};
use crate::Result;

/// Entries (rows[i], cols[i]) = values[i] of a matrix on the slots; with `period`, the matrix
/// acts on each block of `period` slots alike.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SlotMatrix {
    pub rows: Vec<i64>,
    pub cols: Vec<i64>,
    pub values: Vec<f64>,
    pub period: Option<usize>,
}

impl SlotMatrix {
    /// The distinct diagonal indices (col - row mod `slots`).
    pub fn diagonal_indices(&self, slots: usize) -> Vec<usize> {
        let s = slots as i64;
        let set: BTreeSet<usize> = self.rows.iter().zip(&self.cols).map(|(&r, &c)| (c - r).rem_euclid(s) as usize).collect();
        set.into_iter().collect()
    }
}

/// The rotation steps lycaon-ckks' `LinearTransform` needs for diagonals at `indices` (distinct,
/// below `slots`): its baby-step count n1 (`bsgs_split`), then every giant step k - k mod n1 and
/// baby step k mod n1 that is not 0, sorted (what `LinearTransform::rotations` returns, without
/// encoding a diagonal).
pub fn diagonal_rotations(indices: &[usize], slots: usize) -> Vec<i64> {
    let n1 = lycaon_ckks::bsgs_split(indices, slots);
    let set: BTreeSet<i64> = indices.iter().flat_map(|&k| [k / n1 * n1, k % n1]).filter(|&x| x != 0).map(|x| x as i64).collect();
    set.into_iter().collect()
}

/// A convolution's weights [C_out][C_in][kh][kw] (an average pooling's: 1 / (kh kw) from each
/// channel to itself), bias, stride and padding (top, left, bottom, right).
struct Kernel<'a> {
    weights: Vec<f64>,
    kh: usize,
    kw: usize,
    bias: Option<&'a [f64]>,
    stride: [usize; 2],
    pads: [usize; 4],
}

/// The output of a convolution or average pooling: its packing, its matrix, the bias per slot.
pub struct ConvMatrix {
    pub packing: SlotPacking,
    pub matrix: SlotMatrix,
    pub bias: Option<Vec<f64>>,
}

/// Python's `FheModel._conv`: a convolution or average pooling `node` (input of shape
/// `input_shape` packed as `src`) as a matrix on `slots` slots, its output on the grid of gap
/// g s (the stride s), blocks of g^2 s^2 channels.
pub fn conv_matrix(node: &GraphNode, input_shape: &[usize], src: &SlotPacking, slots: usize) -> Result<ConvMatrix> {
    let d = node.describe();
    let (c_in, h_in, w_in) = (input_shape[0], input_shape[1], input_shape[2]);
    let (c_out, h_out, w_out) = (node.shape[0], node.shape[1], node.shape[2]);
    let a = &node.attrs;
    let Kernel { weights, kh, kw, bias, stride, pads } = match node.op {
        NodeOp::Conv => {
            let w = node.required("weight")?;
            let dense = super::dense_weights(node).ok_or_else(|| fail(format!("{d}: {} groups do not divide {} output channels", a.groups(), w.shape[0])))?;
            Kernel {
                weights: dense.into_owned(),
                kh: w.shape[2],
                kw: w.shape[3],
                bias: node.param("bias").map(|b| b.data.as_slice()),
                stride: a.stride(),
                pads: a.pads(),
            }
        }
        _ => {
            let k = a.kernel.ok_or_else(|| fail(format!("{d}: attribute 'kernel' is missing")))?;
            if c_in != c_out {
                return Err(fail(format!("{d}: pooling from {c_in} to {c_out} channels")));
            }
            let mut w = vec![0.0; c_out * c_in * k[0] * k[1]];
            let v = 1.0 / (k[0] * k[1]) as f64;
            for c in 0..c_out {
                let base = (c * c_in + c) * k[0] * k[1];
                w[base..base + k[0] * k[1]].fill(v);
            }
            Kernel { weights: w, kh: k[0], kw: k[1], bias: None, stride: a.stride.unwrap_or(k), pads: a.pads() }
        }
    };
    if stride[0] != stride[1] {
        return Err(fail(format!("{d}: different strides along rows and columns are not built in the FHE mode")));
    }
    let Some(Grid { gap, row, .. }) = src.grid else {
        return Err(fail(format!("{d}: its input is not an image packing")));
    };
    let s = stride[0];
    let gap_out = gap * s;
    if gap_out * w_out > row {
        return Err(fail(format!("{d}: the output grid ({gap_out} x {w_out}) is wider than the input's row of {row} slots")));
    }
    let per_block = gap_out * gap_out;
    let blocks = c_out.div_ceil(per_block);
    let mut block_out = gap_out * h_out * row;
    if src.period < slots && block_out <= src.period && blocks * src.period <= slots {
        block_out = src.period;
    } else if blocks * next_pow2(block_out) <= slots {
        block_out = next_pow2(block_out);
    }
    if blocks * block_out > slots {
        return Err(fail(format!(
            "{d}: {c_out} x {h_out} x {w_out} at gap {gap_out} needs {} slots, more than one ciphertext ({slots}); several ciphertexts are not built yet",
            blocks * block_out
        )));
    }
    let mut out_index = Vec::with_capacity(c_out * h_out * w_out);
    for co in 0..c_out {
        let m = co % per_block;
        for y in 0..h_out {
            for x in 0..w_out {
                out_index.push(((co / per_block) * block_out + (gap_out * y + m / gap_out) * row + gap_out * x + m % gap_out) as i64);
            }
        }
    }
    let out = SlotPacking { shape: vec![c_out, h_out, w_out], index: out_index, period: slots, grid: Some(Grid { gap: gap_out, row, block: block_out }) };
    let w_at = |co: usize, ci: usize, dy: usize, dx: usize| weights[((co * c_in + ci) * kh + dy) * kw + dx];
    let mut m = SlotMatrix::default();
    for dy in 0..kh {
        // Output rows/columns whose tap (dy, dx) reads a pixel inside the input.
        let ys: Vec<(usize, usize)> = (0..h_out).filter_map(|y| inside(s * y + dy, pads[0], h_in).map(|iy| (y, iy))).collect();
        for dx in 0..kw {
            let xs: Vec<(usize, usize)> = (0..w_out).filter_map(|x| inside(s * x + dx, pads[1], w_in).map(|ix| (x, ix))).collect();
            if ys.is_empty() || xs.is_empty() {
                continue;
            }
            for co in 0..c_out {
                for ci in 0..c_in {
                    let w = w_at(co, ci, dy, dx);
                    if w == 0.0 {
                        continue;
                    }
                    for &(y, iy) in &ys {
                        for &(x, ix) in &xs {
                            m.rows.push(out.at(co, y, x));
                            m.cols.push(src.at(ci, iy, ix));
                            m.values.push(w);
                        }
                    }
                }
            }
        }
    }
    if m.values.is_empty() {
        return Err(fail(format!("{d}: every weight is zero")));
    }
    if src.period < slots {
        // The copy of the input in each output block's period.
        let p = src.period as i64;
        for (c, &r) in m.cols.iter_mut().zip(&m.rows) {
            *c += p * r.div_euclid(p);
        }
    }
    let bias = bias.map(|b| {
        let mut v = vec![0.0; slots];
        for (i, &slot) in out.index.iter().enumerate() {
            v[slot as usize] = b[i / (h_out * w_out)];
        }
        v
    });
    Ok(ConvMatrix { packing: out, matrix: m, bias })
}

/// The input coordinate `pos - pad` when it lies in `0..size`.
fn inside(pos: usize, pad: usize, size: usize) -> Option<usize> {
    pos.checked_sub(pad).filter(|&i| i < size)
}

/// The output of a fully connected layer: its packing (n_out values repeating every P_out), its
/// matrix (period P_in), the rotate-and-add steps after it, the bias per slot.
pub struct DenseMatrix {
    pub packing: SlotPacking,
    pub matrix: SlotMatrix,
    pub sum_steps: Vec<i64>,
    pub bias: Option<Vec<f64>>,
}

/// Python's `FheModel._linear`: entry (j, j + d) of the weight W[o][i] with s the slot of input
/// i, d = (s - o) mod P_out and j = (s - d) mod P_in.
pub fn dense_matrix(node: &GraphNode, src: &SlotPacking, slots: usize) -> Result<DenseMatrix> {
    let w = node.required("weight")?;
    let (n_out, n_in) = (w.shape[0], w.shape[1]);
    let p_out = next_pow2(n_out);
    let p_in = src.period.max(p_out);
    if p_in > slots {
        return Err(fail(format!("{}: {n_out} outputs do not fit one ciphertext", node.describe())));
    }
    let (po, pi) = (p_out as i64, p_in as i64);
    let mut m = SlotMatrix { period: Some(p_in), ..Default::default() };
    for o in 0..n_out {
        for i in 0..n_in {
            let v = w.data[o * n_in + i];
            if v == 0.0 {
                continue;
            }
            let s = src.index[i];
            let d = (s - o as i64).rem_euclid(po);
            let j = (s - d).rem_euclid(pi);
            m.rows.push(j);
            m.cols.push(j + d);
            m.values.push(v);
        }
    }
    let sum_steps = (0..(p_in / p_out).trailing_zeros()).map(|k| po << k).collect();
    let packing = SlotPacking::flat(n_out, p_out);
    let bias = node.param("bias").map(|b| {
        let mut v = vec![0.0; slots];
        packing.for_all_slots(slots, |slot, i| v[slot] = b.data[i]);
        v
    });
    Ok(DenseMatrix { packing, matrix: m, sum_steps, bias })
}

/// The rotate-and-add steps that repeat a vector of `extent` slots over all `slots`: left
/// rotations by -t, -2t, ... (t the next power of two of the extent); the vector then repeats
/// with period t.
pub fn replication_steps(extent: usize, slots: usize) -> (usize, Vec<i64>) {
    let t = next_pow2(extent);
    (t, (0..(slots / t).trailing_zeros()).map(|m| -((t << m) as i64)).collect())
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use lycaon_ckks::rlwe::{Parameters, Security};
    use lycaon_ckks::{CkksContext, Complex64, LinearTransform};
    use rand::{RngExt, SeedableRng};

    use super::*;

    /// A toy context (not secure) with 2^10 slots, for comparing with lycaon-ckks.
    pub(crate) fn toy_context() -> Arc<CkksContext> {
        let mut lit = lycaon_ckks::scale_stable_literal(2048, 40, 30, 2, &[45]).unwrap();
        lit.security = Security::InsecureTestOnly;
        CkksContext::new(&Parameters::new(lit).unwrap(), 2f64.powi(30)).unwrap()
    }

    #[test]
    fn diagonal_rotations_are_the_linear_transforms() {
        let ctx = toy_context();
        let slots = 1024;
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for count in [1, 2, 5, 40, 300] {
            let set: BTreeSet<usize> = (0..count).map(|_| rng.random_range(0..slots)).collect();
            let indices: Vec<usize> = set.into_iter().collect();
            let lt = LinearTransform::new(&ctx, slots, indices.iter().map(|&k| (k as i64, vec![Complex64::new(1.0, 0.0); slots]))).unwrap();
            assert_eq!(diagonal_rotations(&indices, slots), lt.rotations(), "{indices:?}");
        }
    }

    #[test]
    fn replication_fills_the_slots() {
        assert_eq!(replication_steps(100, 1024), (128, vec![-128, -256, -512]));
        assert_eq!(replication_steps(1024, 1024), (1024, vec![]));
    }

    #[test]
    fn a_fully_connected_layer_by_generalised_diagonals() {
        use crate::fhe::graph::{NodeAttrs, Tensor};
        // 3 x 8 on an input repeating every 8: entries per period 8, one rotate-and-add by 4.
        let w: Vec<f64> = (0..24).map(|i| i as f64 + 1.0).collect();
        let node = GraphNode {
            op: NodeOp::Linear,
            name: "fc".into(),
            inputs: vec!["x".into()],
            output: "y".into(),
            shape: vec![3],
            attrs: NodeAttrs::default(),
            params: [("weight".to_string(), Some(Tensor::new(vec![3, 8], w)))].into(),
        };
        let d = dense_matrix(&node, &SlotPacking::flat(8, 8), 16).unwrap();
        assert_eq!(d.sum_steps, [4]);
        assert_eq!(d.matrix.period, Some(8));
        // Output o reads input i at diagonal (i - o) mod 4 of its period.
        for ((&r, &c), &v) in d.matrix.rows.iter().zip(&d.matrix.cols).zip(&d.matrix.values) {
            let (o, i) = ((v as usize - 1) / 8, (v as usize - 1) % 8);
            assert_eq!((c - r) as usize, (i + 8 - o) % 4);
            assert_eq!(c as usize % 8, i);
        }
        assert!(d.bias.is_none());
    }
}
