//! Diagonal (Halevi-Shoup 2014) fully connected layer with baby-step giant-step and hoisting.
//!
//! The matrix is cut into N x N blocks (N a power of two up to n/2); the client repeats each N-long
//! piece of its input along both rows of slots, so a row rotation is a cyclic shift mod N. With
//! N = b1 b2, block (o, i) contributes
//!   y_o += sum_g rot_{g b1}( sum_j rot_{-g b1}(diag_{g b1 + j}) * rot_j(x_i) ),
//! the b1 - 1 baby rotations of each x_i share one decomposition (hoisting), and each giant
//! rotation acts on a sum over all input blocks.

use std::collections::BTreeMap;
use std::sync::Arc;

use rayon::prelude::*;

use lycaon_bfv::noise::{NoiseEstimate, NoiseModel, NoiseProfile, PlainNorms};
use lycaon_bfv::rlwe::{Ciphertext, Parameters};
use lycaon_bfv::{BatchEncoder, BfvContext, Evaluator, PreparedPlaintext};
use lycaon_math::rotation_galois_element;

use crate::counting::ntt_cost;
use crate::layout::{Encoding, Layout, Placement};
use crate::noise::{check_model, slot_support};
use crate::packed::rotate_hoisted;
use crate::{ConvShape, HeOps, LayerNoise, LinearPlan, NnError, OpCounts, PlanCore, PreparedLayer, ValueBounds};

const NAME: &str = "diagonal (Halevi-Shoup)";

#[derive(Clone)]
pub struct DiagonalFc {
    core: PlanCore,
    /// Block size N, baby steps b1, giant steps b2.
    dim: usize,
    baby: usize,
    giant: usize,
    in_blocks: usize,
    out_blocks: usize,
}

impl DiagonalFc {
    pub fn new(shape: &ConvShape, params: &Arc<Parameters>) -> Result<Self, NnError> {
        shape.validate()?;
        if !shape.is_fully_connected() {
            return Err(NnError::Unsupported { algorithm: NAME, reason: "needs a fully connected shape (1 x 1 input and kernel)".into() });
        }
        let half = params.n() / 2;
        let dim = shape.c_in.max(shape.c_out).next_power_of_two().min(half);
        let baby = 1usize << dim.trailing_zeros().div_ceil(2);
        let giant = dim / baby;
        let (in_blocks, out_blocks) = (shape.c_in.div_ceil(dim), shape.c_out.div_ceil(dim));
        let n = params.n();
        let mut placements = Vec::new();
        for j in 0..shape.c_in {
            for copy in 0..n / dim {
                placements.push(Placement { element: j as u32, ct: (j / dim) as u32, pos: (copy * dim + j % dim) as u32 });
            }
        }
        let input_layout = Layout::new(Encoding::Batch, in_blocks, shape.c_in, placements);
        let out = (0..shape.c_out).map(|r| Placement { element: r as u32, ct: (r / dim) as u32, pos: (r % dim) as u32 }).collect();
        let output_layout = Layout::new(Encoding::Batch, out_blocks, shape.c_out, out);
        Ok(Self { dim, baby, giant, in_blocks, out_blocks, core: PlanCore::new(params, *shape, input_layout, output_layout) })
    }

    fn baby_elements(&self) -> Vec<u64> {
        (0..self.baby).map(|j| rotation_galois_element(j as i64, self.core.params.n())).collect()
    }

    fn giant_element(&self, g: usize) -> u64 {
        rotation_galois_element((g * self.baby) as i64, self.core.params.n())
    }
}

impl LinearPlan for DiagonalFc {
    fn name(&self) -> String {
        "diagonal-bsgs".into()
    }
    fn core(&self) -> &PlanCore {
        &self.core
    }
    fn with_params(&self, params: &Arc<Parameters>) -> Result<Box<dyn LinearPlan>, NnError> {
        Ok(Box::new(Self { core: self.core.with_params(params)?, ..self.clone() }))
    }

    fn counts(&self) -> OpCounts {
        let p = &*self.core.params;
        let top = p.max_level();
        let (kb, mb) = (self.in_blocks as u64, self.out_blocks as u64);
        let baby_rot = kb * (self.baby as u64 - 1);
        let baby_dec = if self.baby > 1 { kb } else { 0 };
        let giant_rot = mb * (self.giant as u64 - 1);
        let plain_mults = mb * kb * self.dim as u64;
        OpCounts {
            rotations: baby_rot + giant_rot,
            hoisted_decompositions: baby_dec + giant_rot,
            key_switches: baby_rot + giant_rot,
            plain_mults,
            scalar_mults: 0,
            // Products summed into one partial per (output block, giant step), partials summed.
            additions: plain_mults - mb * self.giant as u64 + mb * (self.giant as u64 - 1),
            mod_switches: mb * top as u64,
            ntts: (baby_dec + giant_rot) * ntt_cost::decomposition(p, top)
                + (baby_rot + giant_rot) * ntt_cost::key_switch(p, top)
                + mb * (1..=top).map(ntt_cost::mod_switch).sum::<u64>(),
        }
    }

    fn galois_elements(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.baby_elements().into_iter().chain((1..self.giant).map(|g| self.giant_element(g))).filter(|&g| g != 1).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    fn weight_bytes(&self) -> usize {
        self.out_blocks * self.in_blocks * self.dim * crate::layout::prepared_plaintext_bytes(&self.core.params)
    }

    /// Output block ob is sum_g rot_{g b1}(sum_ib sum_j p * rot_j(x_ib)): a key switch on every
    /// baby step j > 0 before the product and on every giant step g > 0 after it. The diagonal
    /// plaintexts repeat with period N along both rows of slots, so they have only 2N non-zero
    /// coefficients (uniform modulo t), not n: E||p||^2 = 2N (t^2 - 1) / 12.
    fn noise(&self, model: &NoiseModel, input: NoiseEstimate, _bounds: ValueBounds) -> Result<LayerNoise, NnError> {
        check_model(model, &self.core.params)?;
        let top = self.core.params.max_level();
        let ks = model.key_switch(top);
        let n = self.core.params.n();
        let half = n / 2;
        // Slot u (both rows) holds weight row u mod N of the diagonal: ids by row.
        let ids: Vec<u64> = (0..n).map(|u| ((u % half) % self.dim) as u64 + 1).collect();
        let p = PlainNorms::uniform_mod_t(slot_support(n, &ids) as f64, model.t);
        let baby = (0..self.baby).fold(model.zero(top), |acc, j| model.add(acc, model.mul_plain(if j == 0 { input } else { model.add(input, ks) }, p)));
        let partial = (0..self.in_blocks).fold(model.zero(top), |acc, _| model.add(acc, baby));
        let out = (0..self.giant).fold(model.zero(top), |acc, g| model.add(acc, if g == 0 { partial } else { model.add(partial, ks) }));
        Ok(LayerNoise { profile: NoiseProfile::uniform(model.n * self.out_blocks as f64, out), level: top })
    }

    fn prepare(&self, weights: &[i64]) -> Result<Box<dyn PreparedLayer>, NnError> {
        self.core.shape.check_weights(weights)?;
        let t = self.core.params.plaintext_modulus().ok_or(lycaon_bfv::BfvError::NotBfv)?.value();
        let (k, m, dim) = (self.core.shape.c_in, self.core.shape.c_out, self.dim);
        let n = self.core.params.n();
        let half = n / 2;
        let encoder = BatchEncoder::new(&self.core.params)?;
        let eval = Evaluator::new(&BfvContext::new(&self.core.params)?);
        let top = self.core.params.max_level();
        // plaintexts[o][i][d] for diagonal d = g b1 + j, pre-rotated right by g b1.
        let plaintexts = (0..self.out_blocks * self.in_blocks)
            .into_par_iter()
            .map(|oi| {
                let (ob, ib) = (oi / self.in_blocks, oi % self.in_blocks);
                (0..dim)
                    .map(|d| {
                        let shift = (d / self.baby) * self.baby;
                        let mut slots = vec![0u64; n];
                        for u in 0..half {
                            // The giant rotation brings slot u + shift to slot u, row u's output.
                            let r = u % dim;
                            let (row, col) = (ob * dim + r, ib * dim + (r + d) % dim);
                            if row < m && col < k {
                                let w = weights[row * k + col].rem_euclid(t as i64) as u64;
                                slots[(u + shift) % half] = w;
                                slots[half + (u + shift) % half] = w;
                            }
                        }
                        Ok(eval.prepare_plain(&encoder.encode(&slots)?, top)?)
                    })
                    .collect::<Result<Vec<_>, NnError>>()
            })
            .collect::<Result<Vec<_>, NnError>>()?;
        Ok(Box::new(PreparedDiagonal {
            plaintexts,
            baby: self.baby_elements(),
            giant: (0..self.giant).map(|g| self.giant_element(g)).collect(),
            in_blocks: self.in_blocks,
            out_blocks: self.out_blocks,
        }))
    }
}

struct PreparedDiagonal {
    plaintexts: Vec<Vec<PreparedPlaintext>>,
    baby: Vec<u64>,
    giant: Vec<u64>,
    in_blocks: usize,
    out_blocks: usize,
}

impl PreparedLayer for PreparedDiagonal {
    fn weight_bytes(&self) -> usize {
        let count: usize = self.plaintexts.iter().map(Vec::len).sum();
        self.plaintexts.iter().flatten().next().map_or(0, |p| p.to_bytes().len()) * count
    }

    fn evaluate(&self, ops: &HeOps, inputs: &[Ciphertext]) -> Result<Vec<Ciphertext>, NnError> {
        if inputs.len() != self.in_blocks {
            return Err(NnError::Count { what: "input ciphertexts", expected: self.in_blocks, found: inputs.len() });
        }
        let babies: Vec<BTreeMap<u64, Ciphertext>> = inputs.par_iter().map(|ct| rotate_hoisted(ops, ct, &self.baby)).collect::<Result<_, _>>()?;
        let b1 = self.baby.len();
        (0..self.out_blocks)
            .into_par_iter()
            .map(|ob| {
                let mut out = None;
                for (g, &giant) in self.giant.iter().enumerate() {
                    let mut partial = None;
                    for (ib, rotated) in babies.iter().enumerate() {
                        for (j, e) in self.baby.iter().enumerate() {
                            ops.mul_plain_add(&mut partial, &rotated[e], &self.plaintexts[ob * self.in_blocks + ib][g * b1 + j])?;
                        }
                    }
                    let partial = partial.ok_or(NnError::Shape("empty partial sum".into()))?;
                    let aligned = ops.galois_hoisted(&partial, &[giant])?.pop().ok_or(NnError::Shape("no rotation result".into()))?;
                    ops.add_into(&mut out, aligned)?;
                }
                ops.to_lowest(&out.ok_or(NnError::Shape("no output".into()))?)
            })
            .collect()
    }
}
