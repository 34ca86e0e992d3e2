//! Padded convolution with scalar weights (Juvekar et al. 2018; ../papers/001 Fig. 2b). Each
//! ciphertext holds the zero-padded tiles of a single channel (its strips, as many as fit), so a
//! kernel tap is one rotation and one scalar product for the whole ciphertext: weights stay
//! integers, but output channels cannot share a ciphertext, which costs communication.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use rayon::prelude::*;

use lycaon_bfv::noise::{NoiseEstimate, NoiseModel, NoiseProfile};
use lycaon_bfv::rlwe::{Ciphertext, Parameters};

use crate::counting::ntt_cost;
use crate::grid::TileGrid;
use crate::noise::{check_model, weight_stats};
use crate::packed::{elements_of, rotate_hoisted};
use crate::{ConvShape, HeOps, LayerNoise, LinearPlan, NnError, OpCounts, PlanCore, PreparedLayer, ValueBounds};

const NAME: &str = "padded";

#[derive(Clone)]
pub struct PaddedConv {
    core: PlanCore,
    grid: TileGrid,
    /// Ciphertexts per channel (strips spread over blocks).
    per_channel: usize,
    elements: Vec<u64>,
}

impl PaddedConv {
    pub fn new(shape: &ConvShape, params: &Arc<Parameters>, block: Option<usize>) -> Result<Self, NnError> {
        let grid = TileGrid::new(shape, params.n(), true, block, NAME)?;
        let per_channel = grid.strips.div_ceil(grid.blocks);
        let place = |c: usize, s: usize| (c * per_channel + s / grid.blocks, s % grid.blocks);
        let input_layout = grid.input_layout(shape.c_in * per_channel, place);
        let output_layout = grid.output_layout(shape.c_out * per_channel, place);
        let elements = elements_of((0..shape.kh * shape.kw).map(|k| grid.galois(false, 0, k / shape.kw, k % shape.kw)));
        Ok(Self { grid, per_channel, elements, core: PlanCore::new(params, *shape, input_layout, output_layout) })
    }
}

impl LinearPlan for PaddedConv {
    fn name(&self) -> String {
        "padded".into()
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
        let sh = &self.grid.shape;
        let in_cts = (sh.c_in * self.per_channel) as u64;
        let out_cts = (sh.c_out * self.per_channel) as u64;
        let per_ct = self.elements.iter().filter(|&&g| g != 1).count() as u64;
        let rotations = in_cts * per_ct;
        let decompositions = if per_ct > 0 { in_cts } else { 0 };
        let terms = out_cts * (sh.in_per_group() * sh.kh * sh.kw) as u64;
        OpCounts {
            rotations,
            hoisted_decompositions: decompositions,
            key_switches: rotations,
            plain_mults: 0,
            scalar_mults: terms,
            additions: terms,
            mod_switches: out_cts * top as u64,
            ntts: decompositions * ntt_cost::decomposition(p, top)
                + rotations * ntt_cost::key_switch(p, top)
                + out_cts * (1..=top).map(ntt_cost::mod_switch).sum::<u64>(),
        }
    }

    fn galois_elements(&self) -> Vec<u64> {
        self.elements.iter().copied().filter(|&g| g != 1).collect()
    }

    fn weight_bytes(&self) -> usize {
        self.grid.shape.weight_len() * 8
    }

    /// Every output ciphertext is sum over (input channel of its group, tap) of w * rot_tap(x):
    /// a key switch on every tap but the centre one (rotation 0), then a scalar weight. The lazy
    /// accumulation is exact (it only delays reductions modulo q_i), so it adds no noise.
    fn noise(&self, model: &NoiseModel, input: NoiseEstimate, bounds: ValueBounds) -> Result<LayerNoise, NnError> {
        check_model(model, &self.core.params)?;
        let top = self.core.params.max_level();
        let sh = &self.grid.shape;
        let ks = model.key_switch(top);
        let w = weight_stats(model, bounds);
        let per_tap = (0..sh.kh * sh.kw).map(|k| if self.grid.galois(false, 0, k / sh.kw, k % sh.kw) == 1 { input } else { model.add(input, ks) });
        let one_channel = per_tap.fold(model.zero(top), |acc, x| model.add(acc, model.mul_random_scalar(x, w)));
        let sum = (0..sh.in_per_group()).fold(model.zero(top), |acc, _| model.add(acc, one_channel));
        Ok(LayerNoise { profile: NoiseProfile::uniform(model.n * (sh.c_out * self.per_channel) as f64, sum), level: top })
    }

    fn prepare(&self, weights: &[i64]) -> Result<Box<dyn PreparedLayer>, NnError> {
        Ok(Box::new(self.prepare_padded(weights)?))
    }

    /// One unit per output ciphertext (an output channel's part).
    fn output_units(&self) -> usize {
        self.grid.shape.c_out * self.per_channel
    }

    fn evaluate_units(&self, ops: &HeOps, inputs: &[Ciphertext], weights: &[i64], units: Range<usize>) -> Result<Vec<Ciphertext>, NnError> {
        crate::check_units(&units, self.output_units())?;
        self.prepare_padded(weights)?.evaluate_outputs(ops, inputs, units)
    }
}

impl PaddedConv {
    fn prepare_padded(&self, weights: &[i64]) -> Result<PreparedPadded, NnError> {
        let sh = self.grid.shape;
        sh.check_weights(weights)?;
        let t = self.core.params.plaintext_modulus().ok_or(lycaon_bfv::BfvError::NotBfv)?;
        // scalars[o][(c_rel, tap)], centred mod t: small noise.
        let scalars: Vec<Vec<i64>> = (0..sh.c_out)
            .map(|o| {
                let per = sh.in_per_group() * sh.kh * sh.kw;
                weights[o * per..(o + 1) * per].iter().map(|&w| t.center(t.reduce_i64(w))).collect()
            })
            .collect();
        let bound = scalars.iter().flatten().map(|w| w.unsigned_abs()).max().unwrap_or(0);
        let taps: Vec<u64> = (0..sh.kh * sh.kw).map(|k| self.grid.galois(false, 0, k / sh.kw, k % sh.kw)).collect();
        Ok(PreparedPadded {
            shape: sh,
            per_channel: self.per_channel,
            elements: self.elements.clone(),
            taps,
            scalars,
            bound,
            weight_count: weights.len(),
        })
    }
}

/// Outputs summed together (their accumulators' tiles stay in cache while the inputs stream).
const OUTPUT_BLOCK: usize = 16;

struct PreparedPadded {
    shape: ConvShape,
    per_channel: usize,
    elements: Vec<u64>,
    taps: Vec<u64>,
    scalars: Vec<Vec<i64>>,
    bound: u64,
    weight_count: usize,
}

impl PreparedLayer for PreparedPadded {
    fn weight_bytes(&self) -> usize {
        self.weight_count * 8
    }

    fn evaluate(&self, ops: &HeOps, inputs: &[Ciphertext]) -> Result<Vec<Ciphertext>, NnError> {
        self.evaluate_outputs(ops, inputs, 0..self.shape.c_out * self.per_channel)
    }
}

impl PreparedPadded {
    /// Output ciphertexts `outputs` (in order); only the inputs of their groups are rotated.
    fn evaluate_outputs(&self, ops: &HeOps, inputs: &[Ciphertext], outputs: Range<usize>) -> Result<Vec<Ciphertext>, NnError> {
        let sh = &self.shape;
        let expected = sh.c_in * self.per_channel;
        if inputs.len() != expected {
            return Err(NnError::Count { what: "input ciphertexts", expected, found: inputs.len() });
        }
        let params = ops.params().clone();
        let top = params.max_level();
        let per_in = sh.in_per_group();
        let per_out = sh.c_out / sh.groups;
        let group_of = |j: usize| j / self.per_channel / per_out;
        let used = if outputs.is_empty() { 0..0 } else { group_of(outputs.start) * per_in * self.per_channel..(group_of(outputs.end - 1) + 1) * per_in * self.per_channel };
        let rotated: Vec<BTreeMap<u64, Ciphertext>> = inputs
            .par_iter()
            .enumerate()
            .map(|(k, ct)| if used.contains(&k) { rotate_hoisted(ops, ct, &self.elements) } else { Ok(BTreeMap::new()) })
            .collect::<Result<_, _>>()?;
        // Blocks of outputs that read the same inputs (one group, one part of the channel),
        // summed together so that each input is read once per block, not once per output.
        let mut blocks: BTreeMap<(usize, usize), Vec<usize>> = BTreeMap::new();
        for j in outputs.clone() {
            blocks.entry((group_of(j), j % self.per_channel)).or_default().push(j);
        }
        let blocks: Vec<((usize, usize), &[usize])> = blocks.iter().flat_map(|(&key, js)| js.chunks(OUTPUT_BLOCK).map(move |b| (key, b))).collect();
        let sums = blocks
            .into_par_iter()
            .map(|((group, part), js)| {
                let mut acc = ops.scalar_accumulator(top, js.len(), self.bound)?;
                let alphas: Vec<Vec<i64>> = (0..per_in * self.taps.len()).map(|k| js.iter().map(|j| self.scalars[j / self.per_channel][k]).collect()).collect();
                let terms: Vec<(&Ciphertext, &[i64])> = (0..per_in)
                    .flat_map(|c_rel| self.taps.iter().enumerate().map(move |(tap, g)| (c_rel, tap, g)))
                    .map(|(c_rel, tap, g)| (&rotated[(group * per_in + c_rel) * self.per_channel + part][g], &alphas[c_rel * self.taps.len() + tap][..]))
                    .collect();
                acc.add_terms(&terms);
                let sums = acc.finish(&params)?;
                js.iter().zip(sums).map(|(&j, sum)| Ok((j, ops.to_lowest(&sum)?))).collect::<Result<Vec<_>, NnError>>()
            })
            .collect::<Result<Vec<_>, NnError>>()?;
        let mut out: Vec<(usize, Ciphertext)> = sums.into_iter().flatten().collect();
        out.sort_by_key(|(j, _)| *j);
        Ok(out.into_iter().map(|(_, ct)| ct).collect())
    }
}
