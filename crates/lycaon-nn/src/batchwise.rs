//! Batch-axis packings (CryptoNets; nGraph-HE2; ../papers/000 Sec. 7.3): BatchWise-Pack puts one
//! input value of every image of the batch in one ciphertext and multiplies by the weight as a
//! scalar, so there are no rotations at all; BatchWise-Pack+ also packs K_t output channels
//! (the input repeated K_t times, the weights of K_t kernels in one plaintext) when the batch
//! leaves slots free. One ciphertext per input value and per output value (and kernel group):
//! throughput packings that only pay off for large batches.

use std::sync::Arc;

use rayon::prelude::*;

use lycaon_bfv::noise::{NoiseEstimate, NoiseModel, NoiseProfile, PlainNorms};
use lycaon_bfv::rlwe::{Ciphertext, Parameters};
use lycaon_bfv::{BatchEncoder, BfvContext, Evaluator, PreparedPlaintext};

use crate::counting::ntt_cost;
use crate::layout::{Encoding, Layout, Placement};
use crate::noise::{check_model, slot_support, weight_stats};
use crate::{ConvShape, HeOps, LayerNoise, LinearPlan, NnError, OpCounts, PlanCore, PreparedLayer, ValueBounds};

const NAME: &str = "batchwise";

#[derive(Clone)]
pub struct BatchWiseConv {
    core: PlanCore,
    batch: usize,
    k_t: usize,
    kernel_groups: usize,
    /// For each output position (y, x): the (input position, tap) pairs inside the image.
    taps: Arc<Vec<Vec<(usize, usize)>>>,
    /// Terms of each (kernel group, output position), and the slot support of each kernel
    /// group's plaintexts (k_t > 1): counted once, as every parameter set with this n shares them.
    term_counts: Arc<Vec<usize>>,
    supports: Arc<Vec<usize>>,
}

impl BatchWiseConv {
    /// `k_t` = 1 is BatchWise-Pack (scalar weights); None packs as many output channels as the
    /// batch leaves room for (BatchWise-Pack+).
    pub fn new(shape: &ConvShape, params: &Arc<Parameters>, batch: usize, k_t: Option<usize>) -> Result<Self, NnError> {
        shape.validate()?;
        let n = params.n();
        if batch == 0 || batch > n {
            return Err(NnError::Unsupported { algorithm: NAME, reason: format!("batch {batch} must be between 1 and n = {n}") });
        }
        let k_t = k_t.unwrap_or(n / batch).clamp(1, shape.c_out.min(n / batch));
        let kernel_groups = shape.c_out.div_ceil(k_t);
        let (oh, ow) = (shape.out_h(), shape.out_w());
        let taps = (0..oh * ow)
            .map(|p| {
                let (y, x) = (p / ow, p % ow);
                let mut v = Vec::new();
                for r in 0..shape.kh {
                    for s in 0..shape.kw {
                        let iy = (y * shape.stride + r) as isize - shape.pad_h as isize;
                        let ix = (x * shape.stride + s) as isize - shape.pad_w as isize;
                        if iy >= 0 && ix >= 0 && (iy as usize) < shape.h && (ix as usize) < shape.w {
                            v.push((iy as usize * shape.w + ix as usize, r * shape.kw + s));
                        }
                    }
                }
                v
            })
            .collect();
        let plane = shape.h * shape.w;
        // Element e of image b sits at slot kk * batch + b of ciphertext e for every kernel lane kk.
        let mut placements = Vec::with_capacity(batch * shape.input_len());
        for b in 0..batch {
            for e in 0..shape.input_len() {
                placements.push(Placement { element: (b * shape.input_len() + e) as u32, ct: e as u32, pos: b as u32 });
            }
        }
        let mut input_layout = Layout::new(Encoding::Batch, shape.c_in * plane, batch * shape.input_len(), placements);
        input_layout.replicas = (k_t, batch);
        let mut out = Vec::with_capacity(batch * shape.output_len());
        for b in 0..batch {
            for k in 0..shape.c_out {
                for p in 0..oh * ow {
                    let ct = (k / k_t) * oh * ow + p;
                    out.push(Placement { element: (b * shape.output_len() + k * oh * ow + p) as u32, ct: ct as u32, pos: ((k % k_t) * batch + b) as u32 });
                }
            }
        }
        let output_layout = Layout::new(Encoding::Batch, kernel_groups * oh * ow, batch * shape.output_len(), out);
        let mut plan = Self {
            batch,
            k_t,
            kernel_groups,
            taps: Arc::new(taps),
            term_counts: Arc::default(),
            supports: Arc::default(),
            core: PlanCore::new(params, *shape, input_layout, output_layout),
        };
        let positions = plan.taps.len();
        plan.term_counts = Arc::new((0..kernel_groups * positions).map(|i| plan.terms(i / positions, i % positions).count()).collect());
        plan.supports = Arc::new(if k_t == 1 {
            Vec::new()
        } else {
            (0..kernel_groups)
                .map(|kg| {
                    let mut ids = vec![0u64; n];
                    for kk in 0..k_t.min(shape.c_out - kg * k_t) {
                        ids[kk * batch..(kk + 1) * batch].fill(kk as u64 + 1);
                    }
                    slot_support(n, &ids)
                })
                .collect()
        });
        Ok(plan)
    }

    /// Terms of output ciphertext (kernel group kg, position p): (input ciphertext, weight index
    /// within the group's kernel at channel offset, tap).
    fn terms(&self, kg: usize, p: usize) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        let sh = &self.core.shape;
        let plane = sh.h * sh.w;
        // A kernel group may straddle conv groups only when k_t > c_out / groups; every channel
        // of the groups it touches is visited and zero weights fill the rest.
        let per_out = sh.c_out / sh.groups;
        let first_group = (kg * self.k_t) / per_out;
        let last_group = ((kg * self.k_t + self.k_t).min(sh.c_out) - 1) / per_out;
        (first_group * sh.in_per_group()..(last_group + 1) * sh.in_per_group())
            .flat_map(move |c| self.taps[p].iter().map(move |&(pos, tap)| (c * plane + pos, c, tap)))
    }
}

impl LinearPlan for BatchWiseConv {
    fn name(&self) -> String {
        if self.k_t == 1 {
            format!("batchwise (batch {})", self.batch)
        } else {
            format!("batchwise+ (batch {}, {} kernels)", self.batch, self.k_t)
        }
    }
    fn core(&self) -> &PlanCore {
        &self.core
    }
    fn with_params(&self, params: &Arc<Parameters>) -> Result<Box<dyn LinearPlan>, NnError> {
        Ok(Box::new(Self { core: self.core.with_params(params)?, ..self.clone() }))
    }
    fn batch(&self) -> usize {
        self.batch
    }

    fn counts(&self) -> OpCounts {
        let top = self.core.params.max_level();
        let positions = self.taps.len();
        let terms: u64 = self.term_counts.iter().map(|&c| c as u64).sum();
        let outs = (self.kernel_groups * positions) as u64;
        let (plain_mults, scalar_mults, additions) = if self.k_t == 1 { (0, terms, terms) } else { (terms, 0, terms - outs) };
        OpCounts {
            plain_mults,
            scalar_mults,
            additions,
            mod_switches: outs * top as u64,
            ntts: outs * (1..=top).map(ntt_cost::mod_switch).sum::<u64>(),
            ..Default::default()
        }
    }

    fn galois_elements(&self) -> Vec<u64> {
        Vec::new()
    }

    fn weight_bytes(&self) -> usize {
        let sh = &self.core.shape;
        if self.k_t == 1 {
            sh.weight_len() * 8
        } else {
            self.kernel_groups * sh.c_in * sh.kh * sh.kw * crate::layout::prepared_plaintext_bytes(&self.core.params)
        }
    }

    /// Every output ciphertext is a sum over its terms of w * x (BatchWise: scalar weights, exact
    /// lazy sums) or p * x (BatchWise+: p holds K_t weights in runs of `batch` slots; its
    /// non-zero coefficients are uniform modulo t, n of them unless the runs repeat along a row).
    fn noise(&self, model: &NoiseModel, input: NoiseEstimate, bounds: ValueBounds) -> Result<LayerNoise, NnError> {
        check_model(model, &self.core.params)?;
        let top = self.core.params.max_level();
        let w = weight_stats(model, bounds);
        let positions = self.taps.len();
        let mut profile = NoiseProfile::default();
        for kg in 0..self.kernel_groups {
            let term = if self.k_t == 1 {
                model.mul_random_scalar(input, w)
            } else {
                model.mul_plain(input, PlainNorms::uniform_mod_t(self.supports[kg] as f64, model.t))
            };
            // Positions with as many terms have the same sum: fold each count once (the same
            // additions in the same order, so the same bits).
            let mut sums: std::collections::HashMap<usize, NoiseEstimate> = std::collections::HashMap::new();
            for &terms in &self.term_counts[kg * positions..(kg + 1) * positions] {
                let sum = *sums.entry(terms).or_insert_with(|| (0..terms).fold(model.zero(top), |acc, _| model.add(acc, term)));
                profile.push(model.n, sum);
            }
        }
        Ok(LayerNoise { profile, level: top })
    }

    fn prepare(&self, weights: &[i64]) -> Result<Box<dyn PreparedLayer>, NnError> {
        let sh = self.core.shape;
        sh.check_weights(weights)?;
        let t = self.core.params.plaintext_modulus().ok_or(lycaon_bfv::BfvError::NotBfv)?;
        let rs = sh.kh * sh.kw;
        let weight = |k: usize, c: usize, tap: usize| sh.weight(weights, k, c, tap / sh.kw, tap % sh.kw).unwrap_or(0);
        let plaintexts = if self.k_t == 1 {
            Vec::new()
        } else {
            let encoder = BatchEncoder::new(&self.core.params)?;
            let eval = Evaluator::new(&BfvContext::new(&self.core.params)?);
            let top = self.core.params.max_level();
            let n = self.core.params.n();
            (0..self.kernel_groups * sh.c_in * rs)
                .into_par_iter()
                .map(|idx| {
                    let (kg, c, tap) = (idx / (sh.c_in * rs), (idx / rs) % sh.c_in, idx % rs);
                    let mut slots = vec![0u64; n];
                    for kk in 0..self.k_t.min(sh.c_out - kg * self.k_t) {
                        let w = t.reduce_i64(weight(kg * self.k_t + kk, c, tap));
                        slots[kk * self.batch..(kk + 1) * self.batch].fill(w);
                    }
                    Ok(eval.prepare_plain(&encoder.encode(&slots)?, top)?)
                })
                .collect::<Result<Vec<_>, NnError>>()?
        };
        let scalars: Vec<i64> = if self.k_t == 1 {
            (0..sh.c_out * sh.c_in * rs).map(|i| t.center(t.reduce_i64(weight(i / (sh.c_in * rs), (i / rs) % sh.c_in, i % rs)))).collect()
        } else {
            Vec::new()
        };
        let bound = scalars.iter().map(|w| w.unsigned_abs()).max().unwrap_or(0);
        let terms: Vec<Vec<(usize, usize, usize)>> =
            (0..self.kernel_groups * self.taps.len()).map(|i| self.terms(i / self.taps.len(), i % self.taps.len()).collect()).collect();
        Ok(Box::new(PreparedBatchWise {
            plaintexts,
            scalars,
            bound,
            terms,
            positions: self.taps.len(),
            c_in: sh.c_in,
            rs,
            input_cts: self.core.input_layout.num_ciphertexts,
            weight_count: weights.len(),
        }))
    }
}

struct PreparedBatchWise {
    plaintexts: Vec<PreparedPlaintext>,
    scalars: Vec<i64>,
    bound: u64,
    terms: Vec<Vec<(usize, usize, usize)>>,
    positions: usize,
    c_in: usize,
    rs: usize,
    input_cts: usize,
    weight_count: usize,
}

impl PreparedLayer for PreparedBatchWise {
    fn weight_bytes(&self) -> usize {
        match self.plaintexts.first() {
            None => self.weight_count * 8,
            Some(p) => p.to_bytes().len() * self.plaintexts.len(),
        }
    }

    fn evaluate(&self, ops: &HeOps, inputs: &[Ciphertext]) -> Result<Vec<Ciphertext>, NnError> {
        if inputs.len() != self.input_cts {
            return Err(NnError::Count { what: "input ciphertexts", expected: self.input_cts, found: inputs.len() });
        }
        let params = ops.params().clone();
        let top = params.max_level();
        self.terms
            .par_iter()
            .enumerate()
            .map(|(idx, terms)| {
                let kg = idx / self.positions;
                let sum = if self.plaintexts.is_empty() {
                    // BatchWise: output channel kg, scalar weights.
                    let mut acc = ops.scalar_accumulator(top, 1, self.bound)?;
                    for &(input, c, tap) in terms {
                        acc.add(&inputs[input], &[self.scalars[(kg * self.c_in + c) * self.rs + tap]]);
                    }
                    acc.finish(&params)?.pop().ok_or(NnError::Shape("no accumulator".into()))?
                } else {
                    let mut acc = None;
                    for &(input, c, tap) in terms {
                        ops.mul_plain_add(&mut acc, &inputs[input], &self.plaintexts[(kg * self.c_in + c) * self.rs + tap])?;
                    }
                    acc.ok_or(NnError::Shape("an output has no input in range".into()))?
                };
                ops.to_lowest(&sum)
            })
            .collect()
    }
}
