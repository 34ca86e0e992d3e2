//! The public description of a network as the hybrid runtime executes it, and the server's
//! weights. The JSON format is documented in implementation_notes/hybrid-runtime.md; Python's
//! `lycaon.hybrid.compile_program` writes it from a quantised model and a plan.
//!
//! Ops ([`OpKind`]): `linear` (BFV), `truncate`, `relu`, `clip` (ReLU6: min(max(x, 0), max),
//! one batched bounded ReLU on [x ; x - max]) and `maxpool` (two-party), `sumpool`,
//! `global_sumpool`, `flatten`, `add` and `concat` (local on shares). Compiling a program also
//! works out where each tensor is read for the last time ([`CompiledProgram::drop_after`]), so
//! a session frees activations as it goes.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use lycaon_bfv::rlwe::Parameters;
use lycaon_mpc::ShareRing;
use lycaon_nn::algorithm::Algorithm;
use lycaon_nn::{ConvShape, LinearPlan};
use lycaon_plan::hybrid::{ParamChoice, ShapeSpec};
use serde::{Deserialize, Serialize};

use crate::{Result, RuntimeError};

/// The version of the program format and of the session protocol.
pub const PROGRAM_VERSION: u32 = 2;

/// What the client learns at the end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reveal {
    /// The output tensor (logits).
    #[default]
    Logits,
    /// Only the index of the largest output (a secure argmax; ties reveal every maximal index).
    Label,
}

/// One operation on shared tensors (flat vectors, C-order of their shapes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum OpKind {
    /// W x + b, the integer accumulator (no truncation), under BFV with the planned algorithm.
    Linear {
        algorithm: String,
        params: ParamChoice,
        shape: ShapeSpec,
        #[serde(default)]
        has_bias: bool,
    },
    /// floor(x / 2^shift): exactly (`lycaon_mpc::nonlinear::truncate_exact`), or off by at most
    /// one unit when the program asks for faithful truncation (`Program::exact_truncation`).
    Truncate {
        shift: u32,
    },
    /// max(x, 0) (`lycaon_mpc::nonlinear::relu_bounded`: inputs within a quarter of the ring).
    Relu,
    /// min(max(x, 0), max): ReLU6 at the activation scale (max = round(6 2^f)). One batched
    /// `relu_bounded` on [x ; x - max] (party 0 subtracts max from its share), then
    /// y = relu(x) - relu(x - max) in the ring. Inputs within a quarter of the ring, as for
    /// ReLU; max must be positive and below an eighth of the ring (compile checks both), so
    /// x - max stays in range.
    Clip {
        max: i64,
    },
    /// Window maximum; padding counts as minus infinity.
    Maxpool {
        kernel: [usize; 2],
        stride: [usize; 2],
        #[serde(default)]
        pads: [usize; 4],
    },
    /// Window sum times a public multiplier (zero padding); local on shares.
    Sumpool {
        kernel: [usize; 2],
        stride: [usize; 2],
        #[serde(default)]
        pads: [usize; 4],
        multiplier: i64,
    },
    /// Sum over all positions of each channel times a public multiplier: (C, H, W) -> (C, 1, 1).
    GlobalSumpool {
        multiplier: i64,
    },
    Flatten,
    Add,
    Concat,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Op {
    pub name: String,
    pub inputs: Vec<String>,
    pub output: String,
    #[serde(flatten)]
    pub kind: OpKind,
}

impl Op {
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            OpKind::Linear { .. } => "linear",
            OpKind::Truncate { .. } => "truncate",
            OpKind::Relu => "relu",
            OpKind::Clip { .. } => "clip",
            OpKind::Maxpool { .. } => "maxpool",
            OpKind::Sumpool { .. } => "sumpool",
            OpKind::GlobalSumpool { .. } => "global_sumpool",
            OpKind::Flatten => "flatten",
            OpKind::Add => "add",
            OpKind::Concat => "concat",
        }
    }
}

/// A network as the runtime runs it: public (the server sends it to every client).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Program {
    pub version: u32,
    pub name: String,
    pub input: String,
    pub input_shape: Vec<usize>,
    /// The input is round(x 2^f); the outputs are at scale 2^f.
    pub fraction_bits: u32,
    pub output: String,
    #[serde(default)]
    pub reveal: Reveal,
    /// Exact two-party truncation (the default: logits bit for bit those of the fixed-point
    /// model), or the faithful one (off by at most one unit each; about 7 fewer rounds per
    /// truncation, for slow links).
    #[serde(default = "exact_by_default")]
    pub exact_truncation: bool,
    pub ops: Vec<Op>,
    /// Anything the server wants the client to see (model name, preprocessing, class names).
    #[serde(default)]
    pub metadata: serde_json::Value,
}

fn exact_by_default() -> bool {
    true
}

/// The server's integer weights: per linear op, [out][in/groups][kh][kw] and the bias (at the
/// accumulator's scale).
#[derive(Clone, Debug, Default)]
pub struct Weights {
    pub layers: BTreeMap<String, (Vec<i64>, Option<Vec<i64>>)>,
}

/// A linear op made ready: its plan (layouts, Galois elements) and parameters.
pub struct LinearStep {
    pub plan: Box<dyn LinearPlan>,
    pub params: Arc<Parameters>,
    pub choice: ParamChoice,
    pub shape: ConvShape,
    /// Index of the op's parameter set in [`CompiledProgram::param_sets`].
    pub set: usize,
}

/// The ring a truncation of `tensor` (from `from`, by `shift` bits) writes its result in: that of
/// the first linear layer the value reaches through ops that keep their input's ring (ReLU,
/// clip, pooling, flatten, the first input of an add or concat), or that of an add's or
/// concat's first input where it reaches one as another input, so no conversion runs before
/// that layer or at that add. Only when that prime ring is wide enough: p' >= p >> (shift - 2)
/// keeps the truncated value (at most p / 2^(shift + 2), the truncation's range) within a sixteenth of p', room
/// for the residual sums and the quarter that ReLU and max-pooling need.
fn retarget(tensor: &str, from: ShareRing, shift: u32, consumers: &HashMap<&str, Vec<&Op>>, rings: &HashMap<String, ShareRing>) -> Option<ShareRing> {
    let (ShareRing::Prime(p), true) = (from, shift >= 2) else { return None };
    let mut frontier = vec![tensor];
    let mut seen = std::collections::HashSet::new();
    while let Some(t) = frontier.pop() {
        for op in consumers.get(t).into_iter().flatten() {
            let target = match op.kind {
                OpKind::Linear { .. } => Some(rings[&op.output]),
                OpKind::Relu | OpKind::Clip { .. } | OpKind::Maxpool { .. } | OpKind::Flatten => None,
                // Window sums times a multiplier grow by more than the sixteenth of headroom a
                // narrower ring would leave: pools stay in the ring the planner sized for them.
                OpKind::Sumpool { .. } | OpKind::GlobalSumpool { .. } => return None,
                // The first input of an add or concat: the sum's ring is this value's, so the
                // walk goes on (a pool after the sum adds in the ring the planner widened for
                // it, which taking another input's ring here would give up).
                OpKind::Add | OpKind::Concat if op.inputs[0] == t => None,
                // Another input of an add or concat: the sum or stack lives in the first input's
                // ring, when that is already known (its producer came first), so no conversion
                // runs there.
                OpKind::Add | OpKind::Concat => match rings.get(&op.inputs[0]) {
                    Some(&ring) => Some(ring),
                    None => continue,
                },
                _ => continue,
            };
            match target {
                Some(ShareRing::Prime(q)) if q.value() >= p.value() >> (shift - 2) => return target,
                Some(_) => return None,
                None if seen.insert(op.output.as_str()) => frontier.insert(0, op.output.as_str()),
                None => {}
            }
        }
    }
    None
}

/// A validated program: every tensor's shape and share ring, every linear op's plan.
pub struct CompiledProgram {
    pub program: Program,
    pub shapes: HashMap<String, Vec<usize>>,
    pub rings: HashMap<String, ShareRing>,
    /// Per tensor, the largest |x| it can hold given the invariant the runtime rests on (a
    /// linear layer's accumulators are within a quarter of its plaintext modulus, which the
    /// compiler checks; truncation is only exact there); absent where nothing bounds it (the
    /// client's input). Max-pooling uses it to compare with one comparison instead of two.
    pub bounds: HashMap<String, u64>,
    pub linear: HashMap<String, LinearStep>,
    /// The distinct parameter sets, in order of first use, each with the Galois elements its
    /// layers need (sorted, deduplicated).
    pub param_sets: Vec<(ParamChoice, Arc<Parameters>, Vec<u64>)>,
    /// Per op, the tensors it reads for the last time (sorted): both sides free their shares of
    /// them once the op has run, so a session holds only the live activations. The program's
    /// output is never among them (it is kept for the reveal); a tensor nothing reads is freed
    /// right after the op that writes it (the input: after the first op).
    pub drop_after: Vec<Vec<String>>,
    /// Per linear op (by name), the client's keys that cross just before it and those both
    /// sides drop after it.
    pub keys: HashMap<String, KeyStep>,
}

/// When a client's public keys for a linear layer cross and when they are dropped: a parameter
/// set's public key just before its first layer, each Galois key just before the first layer
/// that rotates by it, each in a message of its own; both dropped after their last layer. So a
/// party holds the keys of the layers in flight only, and no message holds more than one key
/// (MobileNetV1 under the conventional packed convolution needs 1.6 GB of Galois keys: more than
/// a message may carry, and more than a 4 GiB party could hold expanded).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyStep {
    pub public_key_arrives: bool,
    /// Galois elements whose keys cross before the layer, in this order.
    pub arrive: Vec<u64>,
    /// Galois elements whose keys no later layer of the set uses.
    pub depart: Vec<u64>,
    pub public_key_departs: bool,
}

/// [`CompiledProgram::keys`] for the linear ops of `ops` in order.
fn key_schedule(ops: &[Op], linear: &HashMap<String, LinearStep>) -> HashMap<String, KeyStep> {
    let layers: Vec<(&str, usize, Vec<u64>)> = ops
        .iter()
        .filter_map(|op| linear.get(&op.name).map(|step| (op, step)))
        .map(|(op, step)| {
            let mut elements: Vec<u64> = step.plan.galois_elements().into_iter().filter(|&g| g != 1).collect();
            elements.sort_unstable();
            elements.dedup();
            (op.name.as_str(), step.set, elements)
        })
        .collect();
    let mut out: HashMap<String, KeyStep> = layers.iter().map(|(name, _, _)| (name.to_string(), KeyStep::default())).collect();
    let (mut first, mut last) = (HashMap::new(), HashMap::new());
    for (name, set, elements) in &layers {
        // None stands for the set's public key.
        for key in std::iter::once(None).chain(elements.iter().map(|&g| Some(g))) {
            first.entry((*set, key)).or_insert(*name);
            last.insert((*set, key), *name);
        }
    }
    for (name, set, elements) in &layers {
        let step = out.get_mut(*name).expect("every layer has a step");
        step.public_key_arrives = first[&(*set, None)] == *name;
        step.public_key_departs = last[&(*set, None)] == *name;
        step.arrive = elements.iter().copied().filter(|&g| first[&(*set, Some(g))] == *name).collect();
        step.depart = elements.iter().copied().filter(|&g| last[&(*set, Some(g))] == *name).collect();
    }
    out
}

fn bad(msg: impl Into<String>) -> RuntimeError {
    RuntimeError::Program(msg.into())
}

fn pooled(op: &Op, x: &[usize], kernel: [usize; 2], stride: [usize; 2], pads: [usize; 4]) -> Result<Vec<usize>> {
    if x.len() != 3 {
        return Err(bad(format!("{} '{}': needs a (C, H, W) input, got {x:?}", op.kind_name(), op.name)));
    }
    if kernel.contains(&0) || stride.contains(&0) {
        return Err(bad(format!("{} '{}': kernel and stride must be positive", op.kind_name(), op.name)));
    }
    let (h, w) = (x[1] + pads[0] + pads[2], x[2] + pads[1] + pads[3]);
    if h < kernel[0] || w < kernel[1] {
        return Err(bad(format!("{} '{}': kernel {kernel:?} larger than the padded input {h}x{w}", op.kind_name(), op.name)));
    }
    Ok(vec![x[0], (h - kernel[0]) / stride[0] + 1, (w - kernel[1]) / stride[1] + 1])
}

impl Program {
    pub fn from_json(json: &str) -> Result<Self> {
        serde_json::from_str(json).map_err(|e| bad(format!("malformed program JSON: {e}")))
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a program serialises")
    }

    /// A content hash of the public program (what both sides agree on).
    pub fn digest(&self) -> [u8; 32] {
        *blake3::hash(self.to_json().as_bytes()).as_bytes()
    }

    /// The ops reading each tensor, in program order.
    fn consumers(&self) -> HashMap<&str, Vec<&Op>> {
        let mut out: HashMap<&str, Vec<&Op>> = HashMap::new();
        for op in &self.ops {
            for input in &op.inputs {
                out.entry(input.as_str()).or_default().push(op);
            }
        }
        out
    }

    /// Per op, the tensors whose last reader it is (see [`CompiledProgram::drop_after`]).
    fn drop_after(&self) -> Vec<Vec<String>> {
        let mut last_use: HashMap<&str, usize> = HashMap::from([(self.input.as_str(), 0)]);
        for (i, op) in self.ops.iter().enumerate() {
            last_use.insert(op.output.as_str(), i);
            for input in &op.inputs {
                last_use.insert(input.as_str(), i);
            }
        }
        let mut out = vec![Vec::new(); self.ops.len()];
        for (tensor, i) in last_use {
            if tensor != self.output {
                out[i].push(tensor.to_string());
            }
        }
        for tensors in &mut out {
            tensors.sort_unstable();
        }
        out
    }

    /// Validates the program, infers shapes and rings and builds every linear layer's plan.
    pub fn compile(self) -> Result<CompiledProgram> {
        if self.version != PROGRAM_VERSION {
            return Err(bad(format!("program version {} is not supported (this build runs version {PROGRAM_VERSION})", self.version)));
        }
        if self.input_shape.is_empty() || self.input_shape.len() > 3 || self.input_shape.contains(&0) {
            return Err(bad(format!("input shape {:?} must be (C, H, W) or (F,) with positive sizes", self.input_shape)));
        }
        if self.fraction_bits > 30 {
            return Err(bad(format!("{} fraction bits is more than the 30 the runtime accepts", self.fraction_bits)));
        }
        let mut shapes: HashMap<String, Vec<usize>> = HashMap::from([(self.input.clone(), self.input_shape.clone())]);
        let mut rings: HashMap<String, ShareRing> = HashMap::new();
        let mut linear = HashMap::new();
        let mut param_sets: Vec<(ParamChoice, Arc<Parameters>, Vec<u64>)> = Vec::new();
        let mut names = std::collections::HashSet::new();
        // The input's ring is the first linear layer's plaintext modulus.
        let mut first_ring = None;
        for op in &self.ops {
            if !names.insert(op.name.clone()) {
                return Err(bad(format!("op name '{}' is used twice", op.name)));
            }
            if shapes.contains_key(&op.output) {
                return Err(bad(format!("{} '{}': tensor '{}' is written twice", op.kind_name(), op.name, op.output)));
            }
            let ins: Vec<Vec<usize>> = op
                .inputs
                .iter()
                .map(|i| shapes.get(i).cloned().ok_or_else(|| bad(format!("{} '{}': input '{i}' is not produced by any earlier op", op.kind_name(), op.name))))
                .collect::<Result<_>>()?;
            let arity_ok = match op.kind {
                OpKind::Add => ins.len() == 2,
                OpKind::Concat => ins.len() >= 2,
                _ => ins.len() == 1,
            };
            if !arity_ok {
                return Err(bad(format!("{} '{}': wrong number of inputs ({})", op.kind_name(), op.name, ins.len())));
            }
            let x = &ins[0];
            let out_shape = match &op.kind {
                OpKind::Linear { algorithm, params, shape, .. } => {
                    let conv = shape.conv_shape();
                    conv.validate().map_err(|e| bad(format!("linear '{}': {e}", op.name)))?;
                    let expected: Vec<usize> = if conv.is_fully_connected() { vec![conv.c_in] } else { vec![conv.c_in, conv.h, conv.w] };
                    let fits =
                        x == &expected || (conv.is_fully_connected() && x.iter().product::<usize>() == conv.c_in && x.len() == 3 && x[1] == 1 && x[2] == 1);
                    if !fits {
                        return Err(bad(format!("linear '{}': input shape {x:?} does not match the layer shape {expected:?}", op.name)));
                    }
                    let alg = Algorithm::parse(algorithm).map_err(|e| bad(format!("linear '{}': {e}", op.name)))?;
                    let p = params.parameters().map_err(|e| bad(format!("linear '{}': parameters {}: {e}", op.name, params.label())))?;
                    let plan = alg.build(&conv, &p).map_err(|e| bad(format!("linear '{}': {e}", op.name)))?;
                    if plan.batch() != 1 {
                        return Err(bad(format!("linear '{}': batched algorithms run one image at a time here", op.name)));
                    }
                    let t = p.plaintext_modulus().ok_or_else(|| bad(format!("linear '{}': not a BFV parameter set", op.name)))?.value();
                    let ring = ShareRing::prime(t).map_err(|e| bad(format!("linear '{}': {e}", op.name)))?;
                    first_ring.get_or_insert(ring);
                    rings.insert(op.output.clone(), ring);
                    let set = match param_sets.iter().position(|(c, _, _)| c == params) {
                        Some(i) => i,
                        None => {
                            param_sets.push((params.clone(), p.clone(), Vec::new()));
                            param_sets.len() - 1
                        }
                    };
                    param_sets[set].2.extend(plan.galois_elements().into_iter().filter(|&g| g != 1));
                    let out = if conv.is_fully_connected() { vec![conv.c_out] } else { vec![conv.c_out, conv.out_h(), conv.out_w()] };
                    linear.insert(op.name.clone(), LinearStep { plan, params: p, choice: params.clone(), shape: conv, set });
                    out
                }
                OpKind::Truncate { shift } => {
                    if *shift == 0 || *shift > 40 {
                        return Err(bad(format!("truncate '{}': shift {shift} must be in 1..=40", op.name)));
                    }
                    x.clone()
                }
                OpKind::Relu => x.clone(),
                OpKind::Clip { max } => {
                    if *max <= 0 {
                        return Err(bad(format!("clip '{}': max {max} must be positive", op.name)));
                    }
                    x.clone()
                }
                OpKind::Maxpool { kernel, stride, pads } => pooled(op, x, *kernel, *stride, *pads)?,
                OpKind::Sumpool { kernel, stride, pads, .. } => pooled(op, x, *kernel, *stride, *pads)?,
                OpKind::GlobalSumpool { .. } => {
                    if x.len() != 3 {
                        return Err(bad(format!("global_sumpool '{}': needs a (C, H, W) input, got {x:?}", op.name)));
                    }
                    vec![x[0], 1, 1]
                }
                OpKind::Flatten => vec![x.iter().product()],
                OpKind::Add => {
                    if ins[0] != ins[1] {
                        return Err(bad(format!("add '{}': inputs of shapes {:?} and {:?}", op.name, ins[0], ins[1])));
                    }
                    x.clone()
                }
                OpKind::Concat => {
                    if ins.iter().any(|s| s.len() != 3 || s[1..] != x[1..]) {
                        return Err(bad(format!("concat '{}': needs (C, H, W) inputs of one spatial size, got {ins:?}", op.name)));
                    }
                    vec![ins.iter().map(|s| s[0]).sum(), x[1], x[2]]
                }
            };
            shapes.insert(op.output.clone(), out_shape);
        }
        let first_ring = first_ring.ok_or_else(|| bad("the program has no linear layer"))?;
        rings.insert(self.input.clone(), first_ring);
        // Rings of the non-linear ops' outputs: that of their first input, but a truncation
        // writes straight into the ring of the linear layer its value goes to (see `retarget`).
        let consumers = self.consumers();
        for op in &self.ops {
            if !matches!(op.kind, OpKind::Linear { .. }) {
                let from = rings[&op.inputs[0]];
                let ring = match op.kind {
                    OpKind::Truncate { shift } => retarget(&op.output, from, shift, &consumers, &rings).unwrap_or(from),
                    _ => from,
                };
                if let OpKind::Clip { max } = op.kind {
                    // x - max must stay within the quarter of the ring that relu_bounded takes
                    // for every x the compiler admits (|x| within an eighth).
                    if max as u128 >= (ring.modulus() - 1) / 8 {
                        return Err(bad(format!("clip '{}': max {max} is not below an eighth of its {}-bit share ring", op.name, ring.bits())));
                    }
                }
                rings.insert(op.output.clone(), ring);
            }
        }
        let bounds = self.magnitude_bounds(&shapes, &rings);
        let out = shapes.get(&self.output).ok_or_else(|| bad(format!("output tensor '{}' is not produced by any op", self.output)))?;
        if out.iter().product::<usize>() == 0 {
            return Err(bad("the output tensor is empty"));
        }
        for set in &mut param_sets {
            set.2.sort_unstable();
            set.2.dedup();
        }
        let drop_after = self.drop_after();
        let keys = key_schedule(&self.ops, &linear);
        Ok(CompiledProgram { program: self, shapes, rings, bounds, linear, param_sets, drop_after, keys })
    }

    /// [`CompiledProgram::bounds`], in program order: a truncation by s divides its input's
    /// bound by 2^s (plus two units: floor, and a faithful truncation's error); ReLU, max-pooling
    /// and flattening keep it, clip caps it, sums add it up.
    fn magnitude_bounds(&self, shapes: &HashMap<String, Vec<usize>>, rings: &HashMap<String, ShareRing>) -> HashMap<String, u64> {
        let mut bounds: HashMap<String, u64> = HashMap::new();
        for op in &self.ops {
            let ins: Option<Vec<u64>> = op.inputs.iter().map(|i| bounds.get(i).copied()).collect();
            let first = ins.as_ref().map(|b| b[0]);
            let bound = match &op.kind {
                OpKind::Linear { .. } => Some(lycaon_mpc::nonlinear::bounded_range(rings[&op.output])),
                OpKind::Truncate { shift } => first.map(|b| (b >> shift) + 2),
                OpKind::Relu | OpKind::Maxpool { .. } | OpKind::Flatten => first,
                OpKind::Clip { max } => first.map(|b| b.min(*max as u64)),
                OpKind::Sumpool { kernel, multiplier, .. } => {
                    first.and_then(|b| b.checked_mul((kernel[0] * kernel[1]) as u64)?.checked_mul(multiplier.unsigned_abs()))
                }
                OpKind::GlobalSumpool { multiplier } => {
                    let s = &shapes[&op.inputs[0]];
                    first.and_then(|b| b.checked_mul((s[1] * s[2]) as u64)?.checked_mul(multiplier.unsigned_abs()))
                }
                OpKind::Add => ins.and_then(|b| b[0].checked_add(b[1])),
                OpKind::Concat => ins.map(|b| b.into_iter().max().unwrap_or(0)),
            };
            if let Some(b) = bound {
                bounds.insert(op.output.clone(), b);
            }
        }
        bounds
    }
}

impl CompiledProgram {
    pub fn len_of(&self, tensor: &str) -> usize {
        self.shapes[tensor].iter().product()
    }

    /// Checks the server's weights against the program: every linear op has weights of the
    /// right length, a bias exactly when the op says so, and nothing else.
    pub fn check_weights(&self, weights: &Weights) -> Result<()> {
        for op in &self.program.ops {
            if let OpKind::Linear { has_bias, .. } = op.kind {
                let step = &self.linear[&op.name];
                let (w, b) = weights.layers.get(&op.name).ok_or_else(|| RuntimeError::Weights(format!("no weights for linear '{}'", op.name)))?;
                if w.len() != step.shape.weight_len() {
                    return Err(RuntimeError::Weights(format!("linear '{}': {} weights, expected {}", op.name, w.len(), step.shape.weight_len())));
                }
                match (b, has_bias) {
                    (Some(b), true) if b.len() == step.shape.c_out => {}
                    (None, false) => {}
                    (Some(b), true) => return Err(RuntimeError::Weights(format!("linear '{}': {} biases, expected {}", op.name, b.len(), step.shape.c_out))),
                    (Some(_), false) => return Err(RuntimeError::Weights(format!("linear '{}': a bias was given but the program says it has none", op.name))),
                    (None, true) => return Err(RuntimeError::Weights(format!("linear '{}': the program says it has a bias but none was given", op.name))),
                }
            }
        }
        if let Some(extra) = weights.layers.keys().find(|k| !self.linear.contains_key(*k)) {
            return Err(RuntimeError::Weights(format!("weights for '{extra}', which is not a linear op of the program")));
        }
        Ok(())
    }
}
