//! Global average pooling into a fully connected layer, on a multiplexed packing.
//!
//! Pooling: rotate-and-add over the pixels of each channel, log2 w steps along a grid row (k,
//! 2k, ...) and log2 h steps across pixel rows (k * k w, ...). Afterwards the slot of channel c at
//! pixel (0, 0) holds the sum of channel c; no level is used.
//!
//! Fully connected: out[i] = sum_c W[i][c] sum_c / (h w) + bias[i], as one plaintext matrix on
//! the slot vector (the 1 / (h w) of the average folded into it), evaluated by the ckks
//! [`LinearTransform`] (diagonal method, baby-step giant-step, one level). The matrix reads the
//! scattered channel-sum slots directly, so no gathering rotations are needed; the cost is that
//! it has up to n_out x C non-zero diagonals (BSGS brings the rotations to about 2 sqrt of that).
//! The result is in slots 0..n_out. The matrix is kept as its weights and built for each
//! evaluation: ImageNet's 1000 outputs over 512 channels at gap 16 make thousands of diagonals
//! of 2^15 slots each (3.4 GB held for the server's lifetime otherwise).

use lycaon_ckks::ops::LayerOps;
use lycaon_ckks::{bsgs_split, CkksContext, Complex64, LinearTransform};

use super::multiplexed::MultiplexedLayout;
use super::{bsgs_steps, diagonal_method_counts, FheError, FheOpCounts, FheOps};

#[derive(Debug)]
pub struct AvgPoolFc {
    input: MultiplexedLayout,
    n_out: usize,
    /// [n_out][C].
    weights: Vec<f64>,
    bias: Vec<f64>,
    /// The matrix's distinct diagonal indices and its baby-step count.
    indices: Vec<usize>,
    baby: usize,
}

impl AvgPoolFc {
    /// `weights` are [n_out][C]; `bias` has n_out values.
    pub fn new(ctx: &CkksContext, input: MultiplexedLayout, n_out: usize, weights: &[f64], bias: &[f64]) -> Result<Self, FheError> {
        let c = input.channels;
        if weights.len() != n_out * c || bias.len() != n_out {
            return Err(FheError::Invalid(format!("expected {} weights and {n_out} biases, got {} and {}", n_out * c, weights.len(), bias.len())));
        }
        if n_out == 0 || n_out > input.slots {
            return Err(FheError::Invalid(format!("{n_out} outputs for {} slots", input.slots)));
        }
        if input.slots > ctx.max_slots() {
            return Err(FheError::Invalid(format!("a packing of {} slots on a ring of {}", input.slots, ctx.max_slots())));
        }
        let slots = input.slots;
        let mut indices: Vec<usize> = (0..n_out).flat_map(|i| (0..c).map(move |ch| (input.slot(ch, 0, 0) + slots - i) % slots)).collect();
        indices.sort_unstable();
        indices.dedup();
        let baby = bsgs_split(&indices, slots);
        Ok(Self { input, n_out, weights: weights.to_vec(), bias: bias.to_vec(), indices, baby })
    }

    /// The matrix (pooling's 1 / (h w) folded in) as a linear transform: row i reads slot P_c,
    /// diagonal index P_c - i (mod slots), entry at position i.
    fn transform(&self, ctx: &CkksContext) -> Result<LinearTransform, FheError> {
        let (c, slots) = (self.input.channels, self.input.slots);
        let inv_area = 1.0 / (self.input.rows * self.input.cols) as f64;
        let mut diagonals: std::collections::BTreeMap<usize, Vec<Complex64>> = std::collections::BTreeMap::new();
        for i in 0..self.n_out {
            for ch in 0..c {
                let d = (self.input.slot(ch, 0, 0) + slots - i) % slots;
                diagonals.entry(d).or_insert_with(|| vec![Complex64::new(0.0, 0.0); slots])[i] += Complex64::new(self.weights[i * c + ch] * inv_area, 0.0);
            }
        }
        // The same indices: LinearTransform::new finds the same split (`baby`).
        Ok(LinearTransform::new(ctx, slots, diagonals.into_iter().map(|(d, v)| (d as i64, v)))?)
    }

    fn pool_steps(&self) -> Vec<i64> {
        let l = &self.input;
        let cols = (0..l.width.trailing_zeros()).map(|j| (l.gap << j) as i64);
        let rows = (0..l.height.trailing_zeros()).map(|j| ((l.gap * l.row_len()) << j) as i64);
        cols.chain(rows).collect()
    }

    pub fn rotation_steps(&self) -> Vec<i64> {
        let (babies, giants) = bsgs_steps(&self.indices, self.baby);
        let mut s: Vec<i64> = self.pool_steps().into_iter().chain(babies.into_iter().chain(giants).map(|x| x as i64)).collect();
        s.sort_unstable();
        s.dedup();
        s
    }

    /// log2 h + log2 w pooling rotations, then the linear transform's (BSGS) counts; depth 1.
    pub fn counts(&self) -> FheOpCounts {
        let pool = FheOpCounts { rotations: self.pool_steps().len() as u64, ..Default::default() };
        pool + diagonal_method_counts(&self.indices, self.baby)
    }

    pub fn n_out(&self) -> usize {
        self.n_out
    }

    /// The n_out logits in slots 0..n_out, one level below the input.
    pub fn evaluate<E: LayerOps>(&self, ops: &FheOps<E>, ct: &E::Ct) -> Result<E::Ct, FheError> {
        let mut acc = ops.duplicate(ct)?;
        for step in self.pool_steps() {
            let r = ops.rotate(&acc, step)?;
            acc = ops.add(&acc, &r)?;
        }
        let transform = self.transform(ops.context())?;
        let out = ops.linear_transform(&acc, &transform)?;
        ops.add_values(&out, &self.bias)
    }
}

/// Plain reference: logits of global average pooling of a [C][h][w] tensor, then W x + bias.
pub fn avgpool_fc_reference(c: usize, h: usize, w: usize, x: &[f64], n_out: usize, weights: &[f64], bias: &[f64]) -> Vec<f64> {
    let means: Vec<f64> = (0..c).map(|ch| x[ch * h * w..(ch + 1) * h * w].iter().sum::<f64>() / (h * w) as f64).collect();
    (0..n_out).map(|i| bias[i] + (0..c).map(|ch| weights[i * c + ch] * means[ch]).sum::<f64>()).collect()
}
