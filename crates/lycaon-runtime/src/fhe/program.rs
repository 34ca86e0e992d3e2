//! The FHE mode's program: what the server runs on one encrypted input, as data (serde JSON,
//! versioned). It names the CKKS parameters, how the input is packed into the slots, where the
//! logits come out, and the operations in order, each with the tensors it reads and writes, the
//! level it runs at and the tensors bootstrapped ("refreshed") before it. The client's keys
//! follow from it ([`FheProgram::key_plan`]); so do the planner's figures (levels, bootstraps).
//!
//! A program carries the server's weights (matrix entries, per-slot coefficients); its public
//! part ([`FheProgram::public`]) is what a client receives: the same program with every weight
//! removed, which still has every key and level a client needs.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use lycaon_ckks::bootstrap::BootstrapParams;
use lycaon_ckks::rlwe::{Parameters, ParametersLiteral};
use lycaon_ckks::CkksContext;
use lycaon_nn::fhe::ConvMethod;
use serde::{Deserialize, Serialize};

use crate::{Result, RuntimeError};

/// Version of the program format; a program of another version is refused.
pub const FHE_PROGRAM_FORMAT: u32 = 1;

fn invalid(what: impl Into<String>) -> RuntimeError {
    RuntimeError::Program(what.into())
}

/// The CKKS parameter set of a program, by how to build it (deterministic).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FheParameters {
    /// `lycaon_ckks::scale_stable_literal`: q_0 of `log_q0` bits, `levels` primes keeping the
    /// scale at 2^log_scale, special primes of `p_bits`; ring degree `n`.
    ScaleStable { n: usize, log_q0: u32, log_scale: u32, levels: usize, p_bits: Vec<u32> },
    /// A bootstrappable set by the name of its shape (`logn16_full_slots`, `logn16_slots14`).
    Bootstrappable { shape: String },
}

/// The sparse slot counts 2^k a shape may bootstrap at (`logn16_slots{k}`), each measured at
/// logN = 16 (`cargo run --release -p lycaon-ckks --example bootstrap_stages -- 3 K`).
pub const SPARSE_BOOTSTRAP_LOG_SLOTS: std::ops::RangeInclusive<u32> = 11..=14;

/// The bootstrapping shapes a program may name: `logn16_full_slots`, and `logn16_slots{k}` for k
/// in [`SPARSE_BOOTSTRAP_LOG_SLOTS`]: the same ring and modulus chain, bootstrapping 2^k slots.
/// Program ops always see n/2 slots; a sparse shape bootstraps a refreshed tensor as a
/// 2^k-slot message, which is right only when the tensor repeats every 2^k slots (the
/// multiplexed packing's copies: the compiler checks it), and then costs one EvalMod instead
/// of two, and shorter CoeffsToSlots and SlotsToCoeffs.
pub fn bootstrap_shape(name: &str) -> Result<BootstrapParams> {
    let full = BootstrapParams::logn16_full_slots();
    if name == "logn16_full_slots" {
        return Ok(full);
    }
    match name.strip_prefix("logn16_slots").and_then(|k| k.parse::<u32>().ok()) {
        Some(log_slots) if SPARSE_BOOTSTRAP_LOG_SLOTS.contains(&log_slots) => Ok(BootstrapParams { log_slots, ..full }),
        _ => Err(invalid(format!(
            "unknown bootstrapping shape '{name}' (this build knows logn16_full_slots and logn16_slots{}..{})",
            SPARSE_BOOTSTRAP_LOG_SLOTS.start(),
            SPARSE_BOOTSTRAP_LOG_SLOTS.end()
        ))),
    }
}

/// The name of the shape that bootstraps tensors repeating every `period` slots: the sparsest
/// measured one whose slot count the period (rounded up to a power of two) divides.
pub fn bootstrap_shape_for_period(period: usize) -> String {
    let log = period.max(1).next_power_of_two().trailing_zeros().max(*SPARSE_BOOTSTRAP_LOG_SLOTS.start());
    if SPARSE_BOOTSTRAP_LOG_SLOTS.contains(&log) {
        format!("logn16_slots{log}")
    } else {
        "logn16_full_slots".into()
    }
}

impl FheParameters {
    /// The literal and the scale of the top level.
    pub fn literal(&self) -> Result<(ParametersLiteral, f64)> {
        match self {
            Self::ScaleStable { n, log_q0, log_scale, levels, p_bits } => {
                let lit = lycaon_ckks::scale_stable_literal(*n, *log_q0, *log_scale, *levels, p_bits).map_err(|e| invalid(format!("parameters: {e}")))?;
                Ok((lit, 2f64.powi(*log_scale as i32)))
            }
            Self::Bootstrappable { shape } => {
                let bp = bootstrap_shape(shape)?;
                let lit = bp.literal().map_err(|e| invalid(format!("parameters: {e}")))?;
                let scale = bp.top_scale(&lit);
                Ok((lit, scale))
            }
        }
    }

    /// The context on `backend` (128-bit security checked by rlwe).
    pub fn context(&self, backend: Arc<dyn lycaon_backend::Backend>) -> Result<Arc<CkksContext>> {
        let (lit, scale) = self.literal()?;
        let params = Parameters::with_backend(lit, backend).map_err(|e| invalid(format!("parameters: {e}")))?;
        CkksContext::new(&params, scale).map_err(|e| invalid(format!("parameters: {e}")))
    }

    pub fn bootstrap(&self) -> Result<Option<BootstrapParams>> {
        match self {
            Self::ScaleStable { .. } => Ok(None),
            Self::Bootstrappable { shape } => bootstrap_shape(shape).map(Some),
        }
    }
}

/// Where the input tensor (flattened, C-order) sits in the slots.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum InputPacking {
    /// Value i at slot `index[i] + k period` for every copy k (period divides the slot count).
    Slots { index: Vec<u32>, period: usize },
    /// The multiplexed packing (Lee et al. 2022) of a (C, h, w) tensor with gap `gap`; `image`:
    /// the (rows, cols) the tensor really has when the (power-of-two) grid is larger.
    Multiplexed {
        channels: usize,
        height: usize,
        width: usize,
        gap: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        image: Option<[usize; 2]>,
        /// Channels per ciphertext when the tensor takes several ([`Layout::parts`]); the
        /// client encrypts one ciphertext per part, in order ([`FheProgram::input_names`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        part_channels: Option<usize>,
        /// The input (C, H, W) arrives space-to-depth by this factor f: (C f^2, ceil(H / f),
        /// ceil(W / f)), which `channels` and the grid describe
        /// (`compile::space_to_depth::rearrange`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        space_to_depth: Option<usize>,
    },
}

/// The name of part `k` of a tensor held in `parts` ciphertexts (the tensor's own name when
/// it takes one).
pub fn part_name(tensor: &str, k: usize, parts: usize) -> String {
    if parts == 1 {
        tensor.to_string()
    } else {
        format!("{tensor}#{k}")
    }
}

/// Values at some slots (the rest zero): biases and per-slot coefficients.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SlotValues {
    pub slots: Vec<u32>,
    pub values: Vec<f64>,
}

impl SlotValues {
    /// The dense vector of `len` slots.
    pub fn dense(&self, len: usize) -> Result<Vec<f64>> {
        if self.slots.len() != self.values.len() {
            return Err(invalid(format!("slot values: {} slots but {} values", self.slots.len(), self.values.len())));
        }
        let mut v = vec![0.0; len];
        for (&s, &x) in self.slots.iter().zip(&self.values) {
            let s = s as usize;
            if s >= len {
                return Err(invalid(format!("slot values: slot {s} of {len}")));
            }
            if !x.is_finite() {
                return Err(invalid("slot values: a value that is not finite"));
            }
            v[s] = x;
        }
        Ok(v)
    }

    /// A dense vector's non-zero slots.
    pub fn from_dense(v: &[f64]) -> Self {
        let (slots, values) = v.iter().enumerate().filter(|(_, x)| **x != 0.0).map(|(i, &x)| (i as u32, x)).unzip();
        Self { slots, values }
    }
}

/// A multiplexed layout (C, h, w, gap) over the program's slots: an h x w power-of-two grid
/// holding an image of `image` = (rows, cols) pixels in its top-left corner (absent: the
/// whole grid), zeros elsewhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    pub channels: usize,
    pub height: usize,
    pub width: usize,
    pub gap: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<[usize; 2]>,
}

impl Layout {
    /// A tensor too large for one ciphertext is split by channels: part k holds channels
    /// k P .. min((k + 1) P, C) (P = `part_channels`), each in the multiplexed layout of its
    /// own channel count on the same grid. `None`: one part, this layout.
    pub fn parts(&self, part_channels: Option<usize>) -> Result<Vec<(std::ops::Range<usize>, Layout)>> {
        let per = part_channels.unwrap_or(self.channels);
        if per == 0 || self.channels == 0 {
            return Err(invalid(format!("a tensor of {} channels in parts of {per}", self.channels)));
        }
        Ok((0..self.channels.div_ceil(per))
            .map(|k| {
                let range = k * per..((k + 1) * per).min(self.channels);
                (range.clone(), Layout { channels: range.len(), ..*self })
            })
            .collect())
    }

    /// Columns `cols` of each of the `rows` rows of width `width` of a row-major matrix, as a
    /// row-major block: a part's input channels of a weight tensor.
    pub fn column_block(m: &[f64], rows: usize, width: usize, cols: std::ops::Range<usize>) -> Vec<f64> {
        (0..rows).flat_map(|r| m[r * width + cols.start..r * width + cols.end].iter().copied()).collect()
    }

    /// lycaon-nn's layout of this one on `slots` slots.
    pub fn multiplexed(&self, slots: usize) -> std::result::Result<lycaon_nn::fhe::MultiplexedLayout, lycaon_nn::fhe::FheError> {
        let l = lycaon_nn::fhe::MultiplexedLayout::new(self.channels, self.height, self.width, self.gap, slots)?;
        match self.image {
            Some([rows, cols]) => l.with_valid(rows, cols),
            None => Ok(l),
        }
    }

    /// The program's form of lycaon-nn's layout (`image` only when smaller than the grid).
    pub fn of(l: &lycaon_nn::fhe::MultiplexedLayout) -> Self {
        Self { channels: l.channels, height: l.height, width: l.width, gap: l.gap, image: (!l.is_full()).then_some([l.rows, l.cols]) }
    }
}

/// One operation's computation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FheOpKind {
    /// A plaintext matrix on the slots by the diagonal method (baby-step giant-step, double
    /// hoisting), one level: entry (rows[i], cols[i]) = values[i]; with `period`, the matrix
    /// acts on each block of `period` slots alike (rows and cols below `period`). Then the
    /// rotate-and-adds of `sum_steps` (left rotations), then `bias`.
    Linear {
        rows: Vec<u32>,
        cols: Vec<u32>,
        values: Vec<f64>,
        #[serde(default)]
        period: Option<usize>,
        #[serde(default)]
        sum_steps: Vec<i64>,
        #[serde(default)]
        bias: Option<SlotValues>,
    },
    /// x + rot(x, s) for each s in turn (a vector repeated to fill the slots), no level.
    Replicate { steps: Vec<i64> },
    /// The same ciphertext under another name (a flatten).
    Alias,
    /// a x^2 + b x + c slot-wise; `a` absent: monic (one level), else two levels.
    Quadratic {
        #[serde(default)]
        a: Option<SlotValues>,
        #[serde(default)]
        b: Option<SlotValues>,
        #[serde(default)]
        c: Option<SlotValues>,
    },
    /// b x + c slot-wise, one level.
    ScaleShift {
        b: SlotValues,
        #[serde(default)]
        c: Option<SlotValues>,
    },
    /// Residual addition of the two inputs (same packing).
    Add,
    /// Multiplexed convolution (lycaon-nn's MpConv or BsgsConv): padding k/2, two levels, then `bias`.
    MpConv {
        input: Layout,
        out_channels: usize,
        kernel: usize,
        stride: usize,
        weights: Vec<f64>,
        #[serde(default)]
        bias: Option<SlotValues>,
        /// Only the top-left (rows, cols) outputs kept (an average pooling's floor); absent:
        /// all ceil(rows / stride) x ceil(cols / stride).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output_image: Option<[usize; 2]>,
        /// The algorithm: "mpconv" (Lee et al., the default) or "bsgs" (block diagonals).
        #[serde(default, skip_serializing_if = "ConvMethod::is_mpconv")]
        method: ConvMethod,
        /// An input in several ciphertexts ([`Layout::parts`] of `input`, the op's inputs in
        /// order): its channels per part. `weights` are then [out_channels][input.channels][k][k]
        /// and the op sums one convolution per part.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        part_channels: Option<usize>,
    },
    /// HyPHEN (002 Sec. 4): CAConv to one ciphertext per channel, the per-channel quadratic
    /// a x^2 + b x + c (`a` absent: monic), RAConv back, then `bias`.
    Hyphen {
        input: Layout,
        mid_channels: usize,
        kernel1: usize,
        weights1: Vec<f64>,
        out_channels: usize,
        kernel2: usize,
        weights2: Vec<f64>,
        #[serde(default)]
        a: Option<Vec<f64>>,
        b: Vec<f64>,
        c: Vec<f64>,
        #[serde(default)]
        bias: Option<SlotValues>,
    },
    /// ReLU by Lee et al.'s composite minimax sign: u = x / bound, the Chebyshev stages on [-1, 1]
    /// (the last folded into the step bound (1 + p) / 2), then u * step; bootstraps inside where
    /// [`composite_relu_schedule`] puts them.
    CompositeRelu { bound: f64, stages: Vec<Vec<f64>>, depths: Vec<usize> },
    /// Global average pooling and a fully connected layer (lycaon-nn's AvgPoolFc), one level;
    /// an input in several ciphertexts (`part_channels` as for MpConv): one layer per part on
    /// its columns of `weights` [n_out][input.channels], summed, `bias` once.
    PoolFc {
        input: Layout,
        n_out: usize,
        weights: Vec<f64>,
        bias: Vec<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        part_channels: Option<usize>,
    },
}

/// A tensor bootstrapped before an operation: multiplied by 1/bound (one level), bootstrapped to
/// the top residual level, multiplied back by the bound.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Refresh {
    pub tensor: String,
    pub bound: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FheOp {
    pub name: String,
    pub inputs: Vec<String>,
    pub output: String,
    /// Level of the ciphertext the op reads (after its refreshes): the compiler's level plan.
    pub level: usize,
    /// Levels the op consumes (a composite ReLU: 0 here, its schedule decides).
    pub depth: usize,
    #[serde(default)]
    pub refresh: Vec<Refresh>,
    #[serde(flatten)]
    pub kind: FheOpKind,
}

/// The FHE program of one network.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FheProgram {
    pub format: u32,
    pub name: String,
    pub parameters: FheParameters,
    pub input: String,
    pub input_shape: Vec<usize>,
    pub input_packing: InputPacking,
    /// Level the client encrypts at.
    pub input_level: usize,
    pub output: String,
    /// Slot of each logit in the output ciphertext.
    pub output_slots: Vec<u32>,
    pub ops: Vec<FheOp>,
    /// Rotation step -> the highest level it is used at (the level-aware keyset, 004).
    pub rotation_levels: BTreeMap<i64, usize>,
    /// Highest level a ciphertext product is relinearised at (None: no products).
    #[serde(default)]
    pub relin_level: Option<usize>,
    /// What clients are told besides the program (labels, preprocessing).
    #[serde(default)]
    pub metadata: serde_json::Value,
}

/// Where a composite ReLU whose input is at `level` bootstraps: flags (bootstrap u = x / B, then
/// one per later stage: bootstrap that stage's input) and the output level. Fewest bootstraps
/// first, then the highest output level; the output keeps at least one level (a later refresh
/// spends it on its own scaling).
pub fn composite_relu_schedule(stage_depths: &[usize], level: usize, top: usize) -> Result<(Vec<bool>, usize)> {
    if level < 1 {
        return Err(invalid(format!("a composite ReLU needs its input at level 1 or above (for x / B), not {level}")));
    }
    if stage_depths.len() > 16 {
        return Err(invalid(format!("a composite ReLU of {} stages (at most 16)", stage_depths.len())));
    }
    let k = stage_depths.len();
    let mut best: Option<(usize, i64, Vec<bool>)> = None;
    // Python's itertools.product((False, True), repeat=k) order: the first flag most significant.
    for mask in 0u32..(1 << k) {
        let flags: Vec<bool> = (0..k).map(|i| mask >> (k - 1 - i) & 1 == 1).collect();
        let lu = if flags.first() == Some(&true) { top as i64 } else { level as i64 - 1 };
        let (mut lc, mut fits) = (lu, true);
        for (i, &d) in stage_depths.iter().enumerate() {
            if i > 0 && flags[i] {
                lc = top as i64;
            }
            fits &= lc >= d as i64;
            lc -= d as i64;
        }
        let out = lu.min(lc) - 1;
        if fits && out >= 1 {
            let key = (flags.iter().filter(|&&f| f).count(), -out, flags);
            if best.as_ref().is_none_or(|b| key < *b) {
                best = Some(key);
            }
        }
    }
    let (_, neg_out, flags) =
        best.ok_or_else(|| invalid(format!("a composite ReLU of stage depths {stage_depths:?} does not fit {top} levels between bootstraps")))?;
    Ok((flags, (-neg_out) as usize))
}

impl FheProgram {
    pub fn from_json(text: &str) -> Result<Self> {
        let p: Self = serde_json::from_str(text).map_err(|e| invalid(format!("malformed FHE program JSON: {e}")))?;
        p.validate()?;
        Ok(p)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a program serialises")
    }

    /// The program without the server's weights: what a client receives.
    pub fn public(&self) -> Self {
        let mut p = self.clone();
        for op in &mut p.ops {
            op.kind = match &op.kind {
                FheOpKind::Linear { sum_steps, period, .. } => {
                    FheOpKind::Linear { rows: vec![], cols: vec![], values: vec![], period: *period, sum_steps: sum_steps.clone(), bias: None }
                }
                FheOpKind::Quadratic { a, .. } => FheOpKind::Quadratic { a: a.as_ref().map(|_| SlotValues::default()), b: None, c: None },
                FheOpKind::ScaleShift { .. } => FheOpKind::ScaleShift { b: SlotValues::default(), c: None },
                FheOpKind::MpConv { input, out_channels, kernel, stride, output_image, method, part_channels, .. } => FheOpKind::MpConv {
                    input: *input,
                    out_channels: *out_channels,
                    kernel: *kernel,
                    stride: *stride,
                    weights: vec![],
                    bias: None,
                    output_image: *output_image,
                    method: *method,
                    part_channels: *part_channels,
                },
                FheOpKind::Hyphen { input, mid_channels, kernel1, out_channels, kernel2, a, .. } => FheOpKind::Hyphen {
                    input: *input,
                    mid_channels: *mid_channels,
                    kernel1: *kernel1,
                    weights1: vec![],
                    out_channels: *out_channels,
                    kernel2: *kernel2,
                    weights2: vec![],
                    a: a.as_ref().map(|_| vec![]),
                    b: vec![],
                    c: vec![],
                    bias: None,
                },
                FheOpKind::CompositeRelu { depths, .. } => FheOpKind::CompositeRelu { bound: 1.0, stages: vec![], depths: depths.clone() },
                FheOpKind::PoolFc { input, n_out, part_channels, .. } => {
                    FheOpKind::PoolFc { input: *input, n_out: *n_out, weights: vec![], bias: vec![], part_channels: *part_channels }
                }
                other => other.clone(),
            };
            for r in &mut op.refresh {
                r.bound = 1.0;
            }
        }
        p
    }

    /// Checks what can be checked without a context: format, tensor names read before written,
    /// levels within the plan, the output slots.
    pub fn validate(&self) -> Result<()> {
        if self.format != FHE_PROGRAM_FORMAT {
            return Err(invalid(format!("FHE program format {} (this build reads {FHE_PROGRAM_FORMAT})", self.format)));
        }
        let inputs = self.input_names()?;
        let mut known: HashSet<&str> = inputs.iter().map(String::as_str).collect();
        for op in &self.ops {
            if op.inputs.is_empty() {
                return Err(invalid(format!("op '{}' reads no tensor", op.name)));
            }
            for t in op.inputs.iter().chain(op.refresh.iter().map(|r| &r.tensor)) {
                if !known.contains(t.as_str()) {
                    return Err(invalid(format!("op '{}' reads '{t}' before it is written", op.name)));
                }
            }
            if let Some(r) = op.refresh.iter().find(|r| !(r.bound.is_finite() && r.bound > 0.0)) {
                return Err(invalid(format!("op '{}': refresh bound {} of '{}' is not a positive number", op.name, r.bound, r.tensor)));
            }
            let arity = match &op.kind {
                FheOpKind::Add => 2,
                FheOpKind::MpConv { input, part_channels, .. } | FheOpKind::PoolFc { input, part_channels, .. } => input.parts(*part_channels)?.len(),
                _ => 1,
            };
            if op.inputs.len() != arity {
                return Err(invalid(format!("op '{}' reads {} tensors, its kind takes {arity}", op.name, op.inputs.len())));
            }
            if op.level > self.input_level.max(self.top_residual_level()) {
                return Err(invalid(format!("op '{}' at level {} above the top {}", op.name, op.level, self.input_level)));
            }
            known.insert(op.output.as_str());
        }
        if !known.contains(self.output.as_str()) {
            return Err(invalid(format!("the output '{}' is never written", self.output)));
        }
        if self.output_slots.is_empty() {
            return Err(invalid("no output slots"));
        }
        Ok(())
    }

    /// The names of the input's ciphertexts, in the order the client sends them: the input's
    /// name, or its parts' ([`part_name`]) when it takes several.
    pub fn input_names(&self) -> Result<Vec<String>> {
        let parts = match &self.input_packing {
            InputPacking::Multiplexed { channels, height, width, gap, image, part_channels, .. } => {
                Layout { channels: *channels, height: *height, width: *width, gap: *gap, image: *image }.parts(*part_channels)?.len()
            }
            InputPacking::Slots { .. } => 1,
        };
        Ok((0..parts).map(|k| part_name(&self.input, k, parts)).collect())
    }

    /// The level bootstraps land at: the input level (the top residual level of a
    /// bootstrappable set).
    pub fn top_residual_level(&self) -> usize {
        self.input_level
    }

    /// Bootstraps one inference runs: every refresh, and those inside composite ReLUs at the
    /// levels the plan gives them.
    pub fn bootstraps(&self) -> Result<usize> {
        let mut count = 0;
        for op in &self.ops {
            count += op.refresh.len();
            if let FheOpKind::CompositeRelu { depths, .. } = &op.kind {
                count += composite_relu_schedule(depths, op.level, self.top_residual_level())?.0.iter().filter(|&&f| f).count();
            }
        }
        Ok(count)
    }

    /// Which ops read each tensor last (index into `ops`), so executors can free tensors.
    pub fn last_reads(&self) -> HashMap<String, usize> {
        let mut last = HashMap::new();
        for (i, op) in self.ops.iter().enumerate() {
            for t in op.inputs.iter().chain(op.refresh.iter().map(|r| &r.tensor)) {
                last.insert(t.clone(), i);
            }
        }
        last.insert(self.output.clone(), usize::MAX);
        last
    }

    /// The keys a client generates for this program: (rotation step, level) pairs and the
    /// relinearisation level (the bootstrapping circuit's own keys come on top:
    /// [`crate::fhe::keys`]).
    pub fn key_plan(&self) -> (Vec<(i64, usize)>, Option<usize>) {
        (self.rotation_levels.iter().map(|(&s, &l)| (s, l)).collect(), self.relin_level)
    }
}
