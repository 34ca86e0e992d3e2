//! Hyena packing and dataflow (Singh et al., IEEE S&P 2024; ../papers/000 Sec. 5, Figs. 4-5) on
//! BFV ciphertexts, and Hyena-Pack+ (Sec. 7.3) when a batch is packed.
//!
//! IF: each ciphertext holds RS-sized windows side by side, one window (with C_t input channels,
//! C_t RS values, in a block of B_w = next_pow2(C_t RS) slots) per output neuron. The paper
//! packs non-overlapping windows and slides the IF by permutations (Step P) to reach the other
//! output neurons; in the hybrid mode the client packs its own input, so it sends the windows of
//! every one of the RS offsets (the paper's N_on) directly and the server never permutes. With a
//! batch (Hyena-Pack+), windows of the batch's images fill the same ciphertexts first.
//!
//! W: the kernels of K_t output channels over the same C_t channels, kernel (m + j) mod K_t
//! aligned with window m. Step B shifts W by one window (a plaintext shift: free, no key
//! switching) so that after K_t products every window has met every kernel; Step C adds the
//! products over channel groups (the psums are aligned); Step D aggregates each window's C_t RS
//! values with log2(B_w) rotate-and-add steps (the paper's binary-tree option). Every psum
//! ciphertext then holds one output neuron per window, at the window's first slot.
//!
//! Counts per IF group (Table 2, Hyena row, with M N_on / M_t IF groups): products C K / C_t
//! (= the table's MUL), W shifts C K / C_t (plaintext), psum rotations K log2(B_w). The outputs
//! are K psum ciphertexts per IF group, not compacted: the packing targets an accelerator's
//! rotations, not a hybrid protocol's communication, and its down bytes show it.

use std::sync::Arc;

use rayon::prelude::*;

use lycaon_bfv::noise::{NoiseEstimate, NoiseModel, NoiseProfile, PlainNorms};
use lycaon_bfv::rlwe::{Ciphertext, Parameters};
use lycaon_bfv::{BatchEncoder, BfvContext, Evaluator, PreparedPlaintext};
use lycaon_math::rotation_galois_element;

use crate::counting::ntt_cost;
use crate::layout::{Encoding, Layout, Placement};
use crate::noise::{automorphism_sum_classes, check_model, slot_support};
use crate::{ConvShape, HeOps, LayerNoise, LinearPlan, NnError, OpCounts, PlanCore, PreparedLayer, ValueBounds};

const NAME: &str = "hyena-pack";

/// One output neuron's window: image of the batch and stride-1 output position.
#[derive(Clone, Copy, Debug)]
struct Window {
    image: usize,
    y: usize,
    x: usize,
}

#[derive(Clone)]
pub struct HyenaConv {
    core: PlanCore,
    batch: usize,
    /// Channels per window block (C_t), block size B_w, kernels per W (K_t).
    c_t: usize,
    block: usize,
    k_t: usize,
    windows: Arc<Vec<Window>>,
    /// IF groups (ciphertexts of windows) and channel groups.
    groups: usize,
    channel_groups: usize,
    kernel_groups: usize,
    noise_shape: Arc<HyenaNoiseShape>,
}

/// What the noise of a Hyena plan needs besides the parameters' moduli (it depends on n and the
/// packing only, and costs O(n log n) to find): the support of a weight plaintext and the
/// coefficient classes of the rotate-and-add tree.
#[derive(Debug)]
struct HyenaNoiseShape {
    support: usize,
    main: Vec<(f64, f64)>,
    later: Vec<(usize, Vec<(f64, f64)>)>,
}

impl HyenaConv {
    /// Hyena-Pack for `batch` images (batch > 1 is Hyena-Pack+).
    pub fn new(shape: &ConvShape, params: &Arc<Parameters>, batch: usize) -> Result<Self, NnError> {
        shape.validate()?;
        if batch == 0 {
            return Err(NnError::Shape("batch must be at least 1".into()));
        }
        let n = params.n();
        let half = n / 2;
        let rs = shape.kh * shape.kw;
        if rs > half {
            return Err(NnError::Unsupported { algorithm: NAME, reason: format!("a {rs}-value window does not fit a row of {half} slots") });
        }
        let per_in = shape.in_per_group();
        let mut c_t = per_in.min(half / rs).max(1);
        while (c_t * rs).next_power_of_two() > half {
            c_t -= 1;
        }
        let block = (c_t * rs).next_power_of_two();
        let blocks = n / block;
        let k_t = shape.c_out.min(blocks);
        let windows: Vec<Window> = (0..batch)
            .flat_map(|image| (0..shape.out_h()).flat_map(move |y| (0..shape.out_w()).map(move |x| Window { image, y: y * shape.stride, x: x * shape.stride })))
            .collect();
        let groups = windows.len().div_ceil(blocks);
        let channel_groups = per_in.div_ceil(c_t);
        let kernel_groups = shape.c_out.div_ceil(k_t);
        let mut plan = Self {
            core: PlanCore::new(params, *shape, Layout::new(Encoding::Batch, 0, 0, Vec::new()), Layout::new(Encoding::Batch, 0, 0, Vec::new())),
            batch,
            c_t,
            block,
            k_t,
            windows: Arc::new(windows),
            groups,
            channel_groups,
            kernel_groups,
            noise_shape: Arc::new(HyenaNoiseShape { support: 0, main: Vec::new(), later: Vec::new() }),
        };
        plan.core.input_layout = Arc::new(plan.make_input_layout());
        plan.core.output_layout = Arc::new(plan.make_output_layout());
        plan.noise_shape = Arc::new(plan.make_noise_shape());
        Ok(plan)
    }

    fn blocks(&self) -> usize {
        self.core.params.n() / self.block
    }

    fn block_slot(&self, m: usize) -> usize {
        let per_row = self.core.params.n() / 2 / self.block;
        (m / per_row) * (self.core.params.n() / 2) + (m % per_row) * self.block
    }

    /// Group of the window's absolute input channel c (for grouped convolutions: the channels
    /// of the window's group are the ones packed; here all windows read channel group cg of
    /// every conv group through the weights, which are zero across groups).
    fn make_input_layout(&self) -> Layout {
        let sh = &self.core.shape;
        let rs = sh.kh * sh.kw;
        let mut placements = Vec::new();
        for (wi, win) in self.windows.iter().enumerate() {
            let (g, m) = (wi / self.blocks(), wi % self.blocks());
            for c in 0..sh.c_in {
                let (cg, c_t) = ((c % sh.in_per_group()) / self.c_t, (c % sh.in_per_group()) % self.c_t);
                // Grouped convolutions: channel c serves only its own group's outputs; pack the
                // group's channels side by side (see weights), keyed by the conv group as well.
                let conv_group = c / sh.in_per_group();
                let ct = ((conv_group * self.channel_groups + cg) * self.groups) + g;
                for r in 0..sh.kh {
                    let iy = (win.y + r) as isize - sh.pad_h as isize;
                    if iy < 0 || iy >= sh.h as isize {
                        continue;
                    }
                    for s in 0..sh.kw {
                        let ix = (win.x + s) as isize - sh.pad_w as isize;
                        if ix < 0 || ix >= sh.w as isize {
                            continue;
                        }
                        let element = win.image * sh.input_len() + (c * sh.h + iy as usize) * sh.w + ix as usize;
                        let pos = self.block_slot(m) + c_t * rs + r * sh.kw + s;
                        placements.push(Placement { element: element as u32, ct: ct as u32, pos: pos as u32 });
                    }
                }
            }
        }
        Layout::new(Encoding::Batch, sh.groups * self.channel_groups * self.groups, self.batch * sh.input_len(), placements)
    }

    /// Output (image, k, y, x) is in psum (group g, kernel group kg, step j) at window m's first
    /// slot, where k = kg K_t + (m + j) mod K_t.
    fn make_noise_shape(&self) -> HyenaNoiseShape {
        let sh = &self.core.shape;
        let n = self.core.params.n();
        let rs = sh.kh * sh.kw;
        let mut ids = vec![0u64; n];
        for m in 0..self.blocks() {
            let k = m % self.k_t;
            if k >= sh.c_out {
                continue;
            }
            for off in 0..self.c_t.min(sh.in_per_group()) * rs {
                ids[self.block_slot(m) + off] = (k * self.block + off + 1) as u64;
            }
        }
        let steps = self.block.trailing_zeros() as usize;
        let elements = |from: usize| -> Vec<u64> { (0..self.block >> from).map(|k| rotation_galois_element((k << from) as i64, n)).collect() };
        let main = automorphism_sum_classes(n, &elements(0));
        let later = (0..steps).map(|s| (self.block >> (s + 1), automorphism_sum_classes(n, &elements(s + 1)))).collect();
        HyenaNoiseShape { support: slot_support(n, &ids), main, later }
    }

    fn make_output_layout(&self) -> Layout {
        let sh = &self.core.shape;
        let (oh, ow) = (sh.out_h(), sh.out_w());
        let mut placements = Vec::with_capacity(self.batch * sh.output_len());
        for (wi, win) in self.windows.iter().enumerate() {
            let (g, m) = (wi / self.blocks(), wi % self.blocks());
            for k in 0..sh.c_out {
                let (kg, kk) = (k / self.k_t, k % self.k_t);
                let j = (kk + self.k_t - m % self.k_t) % self.k_t;
                let ct = self.psum_index(g, kg, j);
                let element = win.image * sh.output_len() + (k * oh + win.y / sh.stride) * ow + win.x / sh.stride;
                placements.push(Placement { element: element as u32, ct: ct as u32, pos: self.block_slot(m) as u32 });
            }
        }
        Layout::new(Encoding::Batch, self.groups * self.kernel_groups * self.k_t, self.batch * sh.output_len(), placements)
    }

    fn psum_index(&self, g: usize, kg: usize, j: usize) -> usize {
        (g * self.kernel_groups + kg) * self.k_t + j
    }

    /// Input ciphertexts feeding psum (g, kg): one per channel group of kernel group kg's conv
    /// group (a kernel group never spans conv groups unless the layer has one group).
    fn psum_inputs(&self, g: usize) -> Vec<usize> {
        (0..self.core.shape.groups * self.channel_groups).map(|cgg| cgg * self.groups + g).collect()
    }

    fn aggregation_elements(&self) -> Vec<u64> {
        let n = self.core.params.n();
        (0..self.block.trailing_zeros()).map(|i| rotation_galois_element(1i64 << i, n)).collect()
    }

    /// Values per window (C_t RS), channels per window, kernels per W and windows per ciphertext.
    pub fn packing(&self) -> (usize, usize, usize, usize) {
        (self.c_t * self.core.shape.kh * self.core.shape.kw, self.c_t, self.k_t, self.blocks())
    }
}

impl LinearPlan for HyenaConv {
    fn name(&self) -> String {
        if self.batch > 1 {
            format!("hyena-pack+ (batch {})", self.batch)
        } else {
            "hyena-pack".into()
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
        let p = &*self.core.params;
        let top = p.max_level();
        let psums = (self.groups * self.kernel_groups * self.k_t) as u64;
        let inputs = self.psum_inputs(0).len() as u64;
        let rotations = psums * self.block.trailing_zeros() as u64;
        let plain_mults = psums * inputs;
        OpCounts {
            rotations,
            hoisted_decompositions: rotations,
            key_switches: rotations,
            plain_mults,
            scalar_mults: 0,
            additions: plain_mults - psums + rotations,
            mod_switches: psums * top as u64,
            ntts: rotations * (ntt_cost::decomposition(p, top) + ntt_cost::key_switch(p, top)) + psums * (1..=top).map(ntt_cost::mod_switch).sum::<u64>(),
        }
    }

    fn galois_elements(&self) -> Vec<u64> {
        self.aggregation_elements()
    }

    fn weight_bytes(&self) -> usize {
        // One W per (kernel group, channel group of its conv group); the K_t shifts are made
        // when preparing (plaintext rotations), so K_t prepared plaintexts per W are stored.
        self.kernel_groups * self.psum_inputs(0).len() * self.k_t * crate::layout::prepared_plaintext_bytes(&self.core.params)
    }

    /// Every psum is u = sum over channel groups of W * x (W repeats with period K_t windows when
    /// K_t divides the windows per row, which leaves 2 K_t B_w non-zero coefficients instead of
    /// n), then log2(B_w) steps psum += rot_{2^s}(psum), each adding a key switch. The result is
    /// sum_{h in H} sigma_h(u) + sum_s sum_{h in H_s} sigma_h(ks_s) with H = {3^k : k < B_w} and
    /// H_s the elements of the later steps: automorphic images of one polynomial are not
    /// independent (coefficient 0 is fixed by every automorphism and adds up coherently), so the
    /// variance is taken per coefficient class (noise::automorphism_sum_classes).
    fn noise(&self, model: &NoiseModel, input: NoiseEstimate, _bounds: ValueBounds) -> Result<LayerNoise, NnError> {
        check_model(model, &self.core.params)?;
        let top = self.core.params.max_level();
        let ks = model.key_switch(top);
        let HyenaNoiseShape { support, main, later } = &*self.noise_shape;
        let p = PlainNorms::uniform_mod_t(*support as f64, model.t);
        let u = (0..self.psum_inputs(0).len()).fold(model.zero(top), |acc, _| model.add(acc, model.mul_plain(input, p)));
        let bound = self.block as f64 * u.bound + later.iter().map(|(size, _)| *size as f64 * ks.bound).sum::<f64>();
        let psums = (self.groups * self.kernel_groups * self.k_t) as f64;
        let mut profile = NoiseProfile::default();
        for (i, &(count, factor)) in main.iter().enumerate() {
            let variance = factor * u.variance + later.iter().map(|(_, c)| c[i].1 * ks.variance).sum::<f64>();
            profile.push(count * psums, NoiseEstimate { variance, bound, log2_q: u.log2_q });
        }
        Ok(LayerNoise { profile, level: top })
    }

    fn prepare(&self, weights: &[i64]) -> Result<Box<dyn PreparedLayer>, NnError> {
        let sh = &self.core.shape;
        sh.check_weights(weights)?;
        let t = self.core.params.plaintext_modulus().ok_or(lycaon_bfv::BfvError::NotBfv)?.value();
        let encoder = BatchEncoder::new(&self.core.params)?;
        let eval = Evaluator::new(&BfvContext::new(&self.core.params)?);
        let top = self.core.params.max_level();
        let n = self.core.params.n();
        let rs = sh.kh * sh.kw;
        let inputs = self.psum_inputs(0).len();
        // w_shifted[kg][j][input]: window m meets kernel kg K_t + (m + j) mod K_t.
        let prepared = (0..self.kernel_groups * self.k_t * inputs)
            .into_par_iter()
            .map(|idx| {
                let (kg, rest) = (idx / (self.k_t * inputs), idx % (self.k_t * inputs));
                let (j, input) = (rest / inputs, rest % inputs);
                let (conv_group, cg) = (input / self.channel_groups, input % self.channel_groups);
                let mut slots = vec![0u64; n];
                for m in 0..self.blocks() {
                    let k = kg * self.k_t + (m + j) % self.k_t;
                    if k >= sh.c_out {
                        continue;
                    }
                    for c_t in 0..self.c_t {
                        let c = conv_group * sh.in_per_group() + cg * self.c_t + c_t;
                        if cg * self.c_t + c_t >= sh.in_per_group() {
                            continue;
                        }
                        for r in 0..sh.kh {
                            for s in 0..sh.kw {
                                if let Some(w) = sh.weight(weights, k, c, r, s) {
                                    slots[self.block_slot(m) + c_t * rs + r * sh.kw + s] = w.rem_euclid(t as i64) as u64;
                                }
                            }
                        }
                    }
                }
                Ok(eval.prepare_plain(&encoder.encode(&slots)?, top)?)
            })
            .collect::<Result<Vec<_>, NnError>>()?;
        Ok(Box::new(PreparedHyena {
            prepared,
            inputs_per_psum: inputs,
            groups: self.groups,
            kernel_groups: self.kernel_groups,
            k_t: self.k_t,
            input_cts: self.core.input_layout.num_ciphertexts,
            aggregation: self.aggregation_elements(),
        }))
    }
}

struct PreparedHyena {
    prepared: Vec<PreparedPlaintext>,
    inputs_per_psum: usize,
    groups: usize,
    kernel_groups: usize,
    k_t: usize,
    input_cts: usize,
    aggregation: Vec<u64>,
}

impl PreparedLayer for PreparedHyena {
    fn weight_bytes(&self) -> usize {
        self.prepared.first().map_or(0, |p| p.to_bytes().len()) * self.prepared.len()
    }

    fn evaluate(&self, ops: &HeOps, inputs: &[Ciphertext]) -> Result<Vec<Ciphertext>, NnError> {
        if inputs.len() != self.input_cts {
            return Err(NnError::Count { what: "input ciphertexts", expected: self.input_cts, found: inputs.len() });
        }
        (0..self.groups * self.kernel_groups * self.k_t)
            .into_par_iter()
            .map(|idx| {
                let g = idx / (self.kernel_groups * self.k_t);
                let (kg, j) = ((idx / self.k_t) % self.kernel_groups, idx % self.k_t);
                // Steps B and C: the shifted W times each channel group's IF, summed.
                let mut psum = None;
                for input in 0..self.inputs_per_psum {
                    let w = &self.prepared[(kg * self.k_t + j) * self.inputs_per_psum + input];
                    ops.mul_plain_add(&mut psum, &inputs[input * self.groups + g], w)?;
                }
                let mut psum = psum.ok_or(NnError::Shape("no channel group".into()))?;
                // Step D: sum each window's block into its first slot.
                for &e in &self.aggregation {
                    let rotated = ops.galois_hoisted(&psum, &[e])?.pop().ok_or(NnError::Shape("no rotation result".into()))?;
                    let mut acc = Some(psum);
                    ops.add_into(&mut acc, rotated)?;
                    psum = acc.ok_or(NnError::Shape("no sum".into()))?;
                }
                ops.to_lowest(&psum)
            })
            .collect()
    }
}
