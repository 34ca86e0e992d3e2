//! Client and server sessions of hybrid inference over any `lycaon_mpc::Channel` (TCP or in
//! memory).
//!
//! Messages, in order (implementation_notes/hybrid-runtime.md):
//! 1. client: hello (magic, protocol version, what it wants: an inference or only the program);
//! 2. server: the public program (JSON) or an error;
//! 3. both: the silent-OT setup of the two-party layer;
//! 4. per op: a linear layer is the client's keys that layer is the first to need, one key per
//!    message (`program::KeyStep`: a parameter set's public key, Galois keys, seeded; both sides
//!    drop each after its last layer), one request (the client's encrypted share) and one
//!    response (the masked, re-randomised, flooded result); truncation, ReLU, clip (ReLU6), max-pooling and
//!    ring conversions are two-party protocols; pooling sums, flattening, additions and
//!    concatenation are local; each side frees its shares of a tensor once its last reader has
//!    run (`CompiledProgram::drop_after`);
//! 5. the output: the server's shares of the logits, or (reveal = label) a secure argmax whose
//!    result only the client learns; then the server's per-layer compute times.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use lycaon_mpc::channel::ChannelStats;
use lycaon_mpc::{nonlinear, Channel, OtKind, Party, Role, ShareRing};
use serde::Serialize;

use crate::fanout::{Fanout, Remote, PUBLIC_KEY};
use crate::hello::{Hello, Mode, PublicModel, Want};
use crate::linear::{ClientKeySet, ServerKeySet, ServerLayer};
use crate::program::{CompiledProgram, LinearStep, OpKind, Program, Reveal, Weights};
use crate::wire;
use crate::{Result, RuntimeError};

/// Server-side settings of a session.
#[derive(Clone, Copy, Debug)]
pub struct SessionOptions {
    /// Statistical security of the noise flooding, bits (0 turns flooding off: tests only).
    pub flood_bits: f64,
    /// Decryption-failure probability the flooding's noise bound is taken at.
    pub failure_probability: f64,
    /// Memory for prepared weights (bytes): layers are kept prepared, in program order, while
    /// they fit; the rest are prepared at each evaluation and dropped after it.
    pub prepared_weights_bytes: usize,
}

/// Default memory for prepared weights: every layer of the CIFAR and MNIST networks fits, an
/// ImageNet network's server stays within a few GiB.
pub const DEFAULT_PREPARED_WEIGHTS_BYTES: usize = 1 << 30;

impl Default for SessionOptions {
    fn default() -> Self {
        Self { flood_bits: 40.0, failure_probability: 2f64.powi(-40), prepared_weights_bytes: DEFAULT_PREPARED_WEIGHTS_BYTES }
    }
}

/// COTs a comparison of `bits`-bit values takes over COT leaves, about (the compact set's
/// sessions; implementation_notes/two-party.md: 135 for 63 bits with 3-bit digits). A large
/// session's leaves take one vector correlation per digit instead, about a third of the leaf
/// COTs' LPN work; the estimate only decides whether the program is worth large iterations.
fn comparison_cots(bits: u32) -> f64 {
    2.2 * bits as f64
}

/// The silent-OT parameters of a session, the same on both sides (derived from the public
/// program): the compact set when the program needs fewer COTs than half an iteration of the
/// large one, which would otherwise cost a whole 10-million-COT iteration.
pub fn ot_kind(compiled: &CompiledProgram) -> OtKind {
    let mut cots = 0.0;
    for op in &compiled.program.ops {
        let bits = compiled.rings[&op.output].bits();
        let elements = compiled.len_of(&op.output) as f64;
        // A comparison of the bits the input's bound needs (nonlinear::relu_up_to), at most
        // the ring's + 1, after one correlated OT that moves the shares to the narrow ring.
        let bounded = |bound: Option<u64>| comparison_cots(bound.map_or(bits + 1, |b| nonlinear::magnitude_bits(b).min(bits + 1)));
        let input_bound = op.inputs.first().and_then(|i| compiled.bounds.get(i).copied());
        cots += match &op.kind {
            // DReLU: one correlated OT and one comparison; then two correlated OTs.
            OpKind::Relu => elements * (bounded(input_bound) + 3.0),
            // Clip: one ReLU on twice the elements.
            OpKind::Clip { max } => 2.0 * elements * (bounded(input_bound.map(|b| b + max.unsigned_abs())) + 3.0),
            OpKind::Maxpool { kernel, .. } => {
                let pool = MaxPoolPlan::of(compiled, op, *kernel);
                let per = if pool.bound.is_some() { bounded(pool.bound.map(|b| 2 * b)) } else { 2.0 * comparison_cots(bits) };
                pool.comparisons as f64 * (per + 3.0)
            }
            // Exact truncation: one comparison of shift bits, two correlated OTs.
            OpKind::Truncate { shift } if compiled.program.exact_truncation => elements * (comparison_cots(*shift) + 2.0),
            OpKind::Truncate { .. } => elements * 2.0,
            _ => 0.0,
        };
    }
    if cots < 5e6 {
        OtKind::SilentCompact
    } else {
        OtKind::Silent
    }
}

/// A model ready to serve: the compiled program, weights prepared per linear layer.
pub struct ServedModel {
    pub compiled: CompiledProgram,
    layers: HashMap<String, ServerLayer>,
    public_json: String,
    pub options: SessionOptions,
    /// Where the linear layers run when not in this process (`fanout`).
    fanout: Option<Arc<dyn Fanout>>,
}

impl ServedModel {
    pub fn new(program: Program, weights: &Weights, options: SessionOptions) -> Result<Self> {
        let public_json = PublicModel::json(Mode::Hybrid, &program.to_json())?;
        let compiled = program.compile()?;
        compiled.check_weights(weights)?;
        let mut layers = HashMap::new();
        let mut budget = options.prepared_weights_bytes;
        // In program order, so the first layers (the largest feature maps) are the kept ones.
        for op in compiled.program.ops.iter().filter(|op| matches!(op.kind, OpKind::Linear { .. })) {
            let (name, step) = (&op.name, &compiled.linear[&op.name]);
            let (w, b) = &weights.layers[name];
            layers.insert(name.clone(), ServerLayer::new(name, step, w, b.clone(), options.flood_bits, options.failure_probability, &mut budget)?);
        }
        Ok(Self { compiled, layers, public_json, options, fanout: None })
    }

    /// The model with its linear layers evaluated by `fanout`'s workers. The server keeps its
    /// weights as integers only (for the bias; the workers prepare theirs).
    pub fn with_fanout(program: Program, weights: &Weights, mut options: SessionOptions, fanout: Arc<dyn Fanout>) -> Result<Self> {
        options.prepared_weights_bytes = 0;
        Ok(Self { fanout: Some(fanout), ..Self::new(program, weights, options)? })
    }

    /// `f` of each linear layer, in program order.
    fn per_layer<T>(&self, f: impl Fn(&ServerLayer) -> T) -> Vec<(String, T)> {
        self.compiled.program.ops.iter().filter_map(|op| self.layers.get(&op.name).map(|l| (op.name.clone(), f(l)))).collect()
    }

    /// Whether each linear layer's prepared weights stay in memory (else prepared per evaluation).
    pub fn kept_prepared(&self) -> Vec<(String, bool)> {
        self.per_layer(|l| l.keeps_prepared())
    }

    /// log2 of the flooding bound of each linear layer (0: none).
    pub fn flooding(&self) -> Vec<(String, u32)> {
        self.per_layer(|l| l.flood_log2())
    }

    /// Bytes of each linear layer's prepared weights ([`ServerLayer::prepared_bytes`]), kept
    /// for the server's life or prepared per evaluation (see [`SessionOptions::prepared_weights_bytes`]).
    pub fn prepared_bytes(&self) -> Vec<(String, usize)> {
        self.per_layer(|l| l.prepared_bytes())
    }

    /// The low bits each linear layer's responses drop.
    pub fn response_drops(&self) -> Vec<(String, lycaon_nn::ResponseDrop)> {
        self.per_layer(|l| l.response_drop())
    }
}

/// One op as one side saw it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LayerRecord {
    pub name: String,
    pub op: String,
    /// Wall time of the op on this side.
    pub seconds: f64,
    /// The client's own computation (encryption and decryption of a linear layer).
    pub client_s: f64,
    /// The server's evaluation of a linear layer (reported by the server at the end).
    pub server_s: f64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub rounds: u64,
}

/// What the client gets.
#[derive(Clone, Debug, Serialize)]
pub struct ClientOutcome {
    pub program: Program,
    /// The logits (integers at scale 2^fraction_bits), when the server reveals them.
    pub logits: Option<Vec<i64>>,
    pub label: usize,
    /// Key generation, key upload and OT setup, then the ops.
    pub setup: LayerRecord,
    pub layers: Vec<LayerRecord>,
    pub total_s: f64,
    pub bytes: u64,
    pub rounds: u64,
    /// Where the time went (see [`ClientOutcome::account`]): the client's key generation,
    /// encryption and decryption; the server's homomorphic evaluation; what the link adds; and
    /// the rest, the two parties' computation inside the two-party protocols.
    pub client_s: f64,
    pub server_s: f64,
    pub comm_s: f64,
    pub two_party_s: f64,
}

impl ClientOutcome {
    /// Splits the total time: client and server computation as measured, communication as the
    /// link adds it (bytes over the bandwidth, one one-way delay each way per round), and the
    /// two-party protocols' computation as the remainder.
    pub fn account(&mut self, link: lycaon_mpc::LinkModel) {
        self.client_s = self.setup.client_s + self.layers.iter().map(|l| l.client_s).sum::<f64>();
        self.server_s = self.layers.iter().map(|l| l.server_s).sum();
        self.comm_s = link.transmission(self.bytes as usize).as_secs_f64() + 2.0 * self.rounds as f64 * link.latency.as_secs_f64();
        self.two_party_s = (self.total_s - self.client_s - self.server_s - self.comm_s).max(0.0);
    }
}

/// What the server records of a session (never a secret or an intermediate value).
#[derive(Clone, Debug, Default, Serialize)]
pub struct ServerSummary {
    pub layers: Vec<LayerRecord>,
    pub total_s: f64,
    pub bytes: u64,
}

fn stats_diff(before: ChannelStats, after: ChannelStats, record: &mut LayerRecord) {
    let d = after.since(&before);
    record.bytes_sent = d.bytes_sent;
    record.bytes_received = d.bytes_received;
    record.rounds = d.rounds;
}

/// Runs the server's half of one session on `channel`. Errors are also sent to the client.
pub fn serve_session(model: &ServedModel, channel: &mut dyn Channel) -> Result<ServerSummary> {
    let hello = channel.recv().map_err(RuntimeError::from).and_then(|h| Hello::parse(&h));
    let hello = wire::tell_peer(channel, hello)?;
    serve_after_hello(model, channel, hello)
}

/// [`serve_session`] once the hello is read (the server reads it to choose the mode).
pub fn serve_after_hello(model: &ServedModel, channel: &mut dyn Channel, hello: Hello) -> Result<ServerSummary> {
    serve_after_hello_with(model, channel, hello, &mut |_, _, _| {})
}

/// [`serve_after_hello`] calling `progress(done, total, op name)` after every op.
pub fn serve_after_hello_with(
    model: &ServedModel,
    channel: &mut dyn Channel,
    hello: Hello,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<ServerSummary> {
    let result = serve_inner(model, channel, hello, progress);
    wire::tell_peer(channel, result)
}

fn serve_inner(model: &ServedModel, channel: &mut dyn Channel, hello: Hello, progress: &mut dyn FnMut(usize, usize, &str)) -> Result<ServerSummary> {
    let began = Instant::now();
    hello.check_mode(Mode::Hybrid)?;
    wire::send(channel, model.public_json.as_bytes())?;
    if hello.want == Want::Program {
        return Ok(ServerSummary::default());
    }
    let compiled = &model.compiled;
    // The keys of the layers in flight (program::KeyStep), per parameter set.
    let mut keys: Vec<Option<ServerKeySet>> = (0..compiled.param_sets.len()).map(|_| None).collect();
    let mut party = Party::new(Role::P0, channel, ot_kind(compiled))?;
    let mut values: HashMap<String, Vec<u64>> = HashMap::new();
    values.insert(compiled.program.input.clone(), vec![0; compiled.len_of(&compiled.program.input)]);
    let mut summary = ServerSummary::default();
    let layers = &model.layers;
    let session = NEXT_SESSION.fetch_add(1, Ordering::Relaxed);
    let _ended = model.fanout.as_deref().map(|fanout| SessionEnd { fanout, session });
    summary.layers = run_ops(
        &mut party,
        compiled,
        &mut values,
        &mut |party, op, step, share, record| {
            let schedule = &compiled.keys[&op.name];
            let set = &mut keys[step.set];
            let fanout = model.fanout.as_deref();
            if schedule.public_key_arrives {
                let message = wire::recv(party.channel(), "a public key")?;
                *set = Some(ServerKeySet::from_public_key(&step.params, &message)?);
                if let Some(f) = fanout {
                    f.key_arrived(session, step.set, PUBLIC_KEY, &message)?;
                }
            }
            let held = set.as_mut().ok_or_else(|| RuntimeError::Program(format!("linear '{}': its parameter set's keys were dropped", op.name)))?;
            for &g in &schedule.arrive {
                let message = wire::recv(party.channel(), "a Galois key")?;
                // With a fanout only the workers rotate: the server keeps no Galois key.
                match fanout {
                    Some(f) => f.key_arrived(session, step.set, g, &message)?,
                    None => held.receive_galois_key(g, &message)?,
                }
            }
            let request = wire::recv(party.channel(), "a layer request")?;
            let t0 = Instant::now();
            let remote = fanout.map(|fanout| Remote { fanout, session, layer: &op.name });
            let (response, out) = layers[&op.name].evaluate(step, held, &request, &share, remote)?;
            record.server_s = t0.elapsed().as_secs_f64();
            wire::send(party.channel(), &response)?;
            for &g in &schedule.depart {
                held.drop_galois_key(g);
                if let Some(f) = fanout {
                    f.key_departed(session, step.set, g)?;
                }
            }
            if schedule.public_key_departs {
                *set = None;
                if let Some(f) = fanout {
                    f.key_departed(session, step.set, PUBLIC_KEY)?;
                }
            }
            Ok(out)
        },
        progress,
    )?;
    reveal(&mut party, compiled, &values)?;
    let report = serde_json::to_vec(&summary.layers.iter().map(|l| l.server_s).collect::<Vec<_>>()).expect("floats serialise");
    wire::send(party.channel(), &report)?;
    summary.total_s = began.elapsed().as_secs_f64();
    summary.bytes = party.channel().stats().total_bytes();
    Ok(summary)
}

/// Numbers the sessions of this process for a fanout's workers.
static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

/// Tells the fanout a session is over however it ends.
struct SessionEnd<'a> {
    fanout: &'a dyn Fanout,
    session: u64,
}

impl Drop for SessionEnd<'_> {
    fn drop(&mut self) {
        self.fanout.session_ended(self.session);
    }
}

/// Asks a server (of either mode) what it serves: its mode and public program.
pub fn fetch_public(channel: &mut dyn Channel) -> Result<PublicModel> {
    channel.send(&Hello { want: Want::Program, mode: None }.to_bytes())?;
    PublicModel::parse(&wire::recv(channel, "the server's description")?)
}

/// The hybrid program of a `PublicModel` (an error naming the mode otherwise).
pub fn hybrid_program(public: PublicModel) -> Result<Program> {
    if public.mode != Mode::Hybrid {
        return Err(RuntimeError::Refused(format!("this server serves the {} mode; run the client with --mode {}", public.mode.name(), public.mode.name())));
    }
    Program::from_json(&public.program.to_string())
}

/// Asks a hybrid server for its public program only.
pub fn fetch_program(channel: &mut dyn Channel) -> Result<Program> {
    hybrid_program(fetch_public(channel)?)
}

/// Runs the client's half: `input` is the image as integers at scale 2^fraction_bits (the
/// program's input shape, flat). `progress(done, total, op name)` is called after every op.
pub fn run_client(channel: &mut dyn Channel, input: &[i64], progress: &mut dyn FnMut(usize, usize, &str)) -> Result<ClientOutcome> {
    let began = Instant::now();
    channel.send(&Hello { want: Want::Inference, mode: Some(Mode::Hybrid) }.to_bytes())?;
    let program = hybrid_program(PublicModel::parse(&wire::recv(channel, "the program")?)?)?;
    let compiled = program.clone().compile()?;
    let in_len = compiled.len_of(&compiled.program.input);
    if input.len() != in_len {
        return Err(RuntimeError::Program(format!("the input has {} values, the model takes {in_len} ({:?})", input.len(), compiled.program.input_shape)));
    }
    let mut setup = LayerRecord { name: "setup".into(), op: "keys+ot".into(), ..Default::default() };
    let t0 = Instant::now();
    // Keys are made and sent when the layers need them (program::KeyStep) and counted here.
    let mut keys: Vec<Option<ClientKeySet>> = (0..compiled.param_sets.len()).map(|_| None).collect();
    let mut key_costs: HashMap<String, (f64, u64)> = HashMap::new();
    let mut party = Party::new(Role::P1, channel, ot_kind(&compiled))?;
    setup.seconds = t0.elapsed().as_secs_f64();
    stats_diff(ChannelStats::default(), party.channel().stats(), &mut setup);
    let input_ring = compiled.rings[&compiled.program.input];
    let mut values: HashMap<String, Vec<u64>> = HashMap::new();
    values.insert(compiled.program.input.clone(), input.iter().map(|&v| input_ring.from_signed(v)).collect());
    let mut layers = run_ops(
        &mut party,
        &compiled,
        &mut values,
        &mut |party, op, step, share, record| {
            let schedule = &compiled.keys[&op.name];
            let (t0, sent) = (Instant::now(), party.channel().stats().bytes_sent);
            let set = &mut keys[step.set];
            if schedule.public_key_arrives {
                let fresh = ClientKeySet::generate(&step.params)?;
                wire::send(party.channel(), &fresh.public_key_upload()?)?;
                *set = Some(fresh);
            }
            let keys = set.as_mut().ok_or_else(|| RuntimeError::Program(format!("linear '{}': its parameter set's keys were dropped", op.name)))?;
            for &g in &schedule.arrive {
                wire::send(party.channel(), &keys.galois_key_upload(g)?)?;
            }
            key_costs.insert(op.name.clone(), (t0.elapsed().as_secs_f64(), party.channel().stats().bytes_sent - sent));
            let t0 = Instant::now();
            let request = keys.encrypt_share(step, &share)?;
            record.client_s = t0.elapsed().as_secs_f64();
            wire::send(party.channel(), &request)?;
            let response = wire::recv(party.channel(), "a layer response")?;
            let t0 = Instant::now();
            let out = keys.decrypt_response(step, &response)?;
            record.client_s += t0.elapsed().as_secs_f64();
            if schedule.public_key_departs {
                *set = None;
            }
            Ok(out)
        },
        progress,
    )?;
    // Key generation and upload count as setup, as when they all came first.
    for layer in &mut layers {
        if let Some((seconds, bytes)) = key_costs.remove(&layer.name) {
            layer.seconds -= seconds;
            layer.bytes_sent -= bytes;
            setup.seconds += seconds;
            setup.client_s += seconds;
            setup.bytes_sent += bytes;
        }
    }
    let (logits, label) = learn_output(&mut party, &compiled, &values)?;
    let report = wire::recv(party.channel(), "the server's timings")?;
    let server_s: Vec<f64> = serde_json::from_slice(&report).map_err(|e| RuntimeError::Protocol(format!("the server's timings: {e}")))?;
    if server_s.len() != layers.len() {
        return Err(RuntimeError::Protocol(format!("{} server timings for {} ops", server_s.len(), layers.len())));
    }
    for (l, s) in layers.iter_mut().zip(server_s) {
        l.server_s = s;
    }
    let stats = party.channel().stats();
    Ok(ClientOutcome {
        program,
        logits,
        label,
        setup,
        layers,
        total_s: began.elapsed().as_secs_f64(),
        bytes: stats.total_bytes(),
        rounds: stats.rounds,
        client_s: 0.0,
        server_s: 0.0,
        comm_s: 0.0,
        two_party_s: 0.0,
    })
}

/// The half of a linear layer one side runs: from its share of the input (already in the layer's
/// ring) to its share of the output, filling in its times.
type LinearHalf<'a> = dyn FnMut(&mut Party, &crate::program::Op, &LinearStep, Vec<u64>, &mut LayerRecord) -> Result<Vec<u64>> + 'a;

/// Runs every op in order on this side's shares, one record per op; `progress(done, total, name)`
/// after each.
fn run_ops(
    party: &mut Party,
    compiled: &CompiledProgram,
    values: &mut HashMap<String, Vec<u64>>,
    linear: &mut LinearHalf,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<Vec<LayerRecord>> {
    let total = compiled.program.ops.len();
    let mut records = Vec::with_capacity(total);
    for (i, op) in compiled.program.ops.iter().enumerate() {
        let before = party.channel().stats();
        let started = Instant::now();
        let mut record = LayerRecord { name: op.name.clone(), op: op.kind_name().into(), ..Default::default() };
        let drops = &compiled.drop_after[i];
        let last_read = |tensor: &String| drops.contains(tensor);
        let out = match op.kind {
            OpKind::Linear { .. } => {
                let ring = compiled.rings[&op.output];
                // The input's shares are moved rather than copied when nothing reads them later.
                let input = &op.inputs[0];
                let share = if compiled.rings[input] == ring && last_read(input) {
                    values.remove(input).ok_or_else(|| missing(input))?
                } else {
                    in_ring(party, compiled, input, ring, values)?
                };
                linear(party, op, &compiled.linear[&op.name], share, &mut record)?
            }
            OpKind::Flatten if last_read(&op.inputs[0]) => values.remove(&op.inputs[0]).ok_or_else(|| missing(&op.inputs[0]))?,
            _ => nonlinear_op(party, compiled, op, values)?,
        };
        record.seconds = started.elapsed().as_secs_f64();
        stats_diff(before, party.channel().stats(), &mut record);
        values.insert(op.output.clone(), out);
        // Free what no later op reads (the output tensor is kept for the reveal).
        for tensor in drops {
            values.remove(tensor);
        }
        records.push(record);
        progress(i + 1, total, &op.name);
    }
    Ok(records)
}

/// A tensor that should be live is not (a bug in the runtime's bookkeeping, not in the input).
fn missing(tensor: &str) -> RuntimeError {
    RuntimeError::Program(format!("tensor '{tensor}' was freed before its last reader"))
}

/// Shares of `tensor` in `ring` (converted by the two-party protocol when it lives elsewhere).
fn in_ring(party: &mut Party, compiled: &CompiledProgram, tensor: &str, ring: ShareRing, values: &HashMap<String, Vec<u64>>) -> Result<Vec<u64>> {
    let from = compiled.rings[tensor];
    let v = values.get(tensor).ok_or_else(|| missing(tensor))?;
    if from == ring {
        return Ok(v.clone());
    }
    Ok(nonlinear::convert(party, from, ring, v)?)
}

/// Window positions of a pooling op over a (C, H, W) input, window-major; None is padding.
fn windows(shape: &[usize], kernel: [usize; 2], stride: [usize; 2], pads: [usize; 4]) -> Vec<Option<usize>> {
    let (c, h, w) = (shape[0], shape[1] as isize, shape[2] as isize);
    let oh = (shape[1] + pads[0] + pads[2] - kernel[0]) / stride[0] + 1;
    let ow = (shape[2] + pads[1] + pads[3] - kernel[1]) / stride[1] + 1;
    let mut out = Vec::with_capacity(c * oh * ow * kernel[0] * kernel[1]);
    for ch in 0..c {
        for oy in 0..oh {
            for ox in 0..ow {
                for ky in 0..kernel[0] {
                    for kx in 0..kernel[1] {
                        let y = (oy * stride[0] + ky) as isize - pads[0] as isize;
                        let x = (ox * stride[1] + kx) as isize - pads[1] as isize;
                        out.push(((0..h).contains(&y) && (0..w).contains(&x)).then(|| ch * (h * w) as usize + (y * w + x) as usize));
                    }
                }
            }
        }
    }
    out
}

/// How the runtime max-pools: whole windows, or rows then columns where that takes fewer
/// comparisons (overlapping windows: 3x3 at stride 2 takes 6 per output instead of 8); and,
/// where the program bounds the values so that every difference is within
/// `nonlinear::bounded_range`, the bound (`nonlinear::max_pool_up_to`: on Z_p one comparison of
/// the bound's bits, not two of the ring's).
struct MaxPoolPlan {
    separable: bool,
    bound: Option<u64>,
    comparisons: usize,
}

impl MaxPoolPlan {
    fn of(compiled: &CompiledProgram, op: &crate::program::Op, kernel: [usize; 2]) -> Self {
        let (input, output) = (&compiled.shapes[&op.inputs[0]], &compiled.shapes[&op.output]);
        let (channels, h, oh, ow) = (input[0], input[1], output[1], output[2]);
        let whole = oh * ow * (kernel[0] * kernel[1] - 1);
        let separable = h * ow * (kernel[1] - 1) + oh * ow * (kernel[0] - 1);
        let ring = compiled.rings[&op.output];
        let bound = compiled.bounds.get(&op.inputs[0]).copied().filter(|b| b.checked_mul(2).is_some_and(|d| d <= nonlinear::bounded_range(ring)));
        MaxPoolPlan { separable: separable < whole, bound, comparisons: channels * separable.min(whole) }
    }
}

/// The ops both parties run alike on their shares.
fn nonlinear_op(party: &mut Party, compiled: &CompiledProgram, op: &crate::program::Op, values: &HashMap<String, Vec<u64>>) -> Result<Vec<u64>> {
    let ring = compiled.rings[&op.output];
    let x = values.get(&op.inputs[0]).ok_or_else(|| missing(&op.inputs[0]))?;
    let p0 = party.role() == Role::P0;
    Ok(match &op.kind {
        // A truncation may write into the next linear layer's ring (program::retarget).
        OpKind::Truncate { shift } if compiled.program.exact_truncation => {
            let from = compiled.rings[&op.inputs[0]];
            chunked(x, NONLINEAR_CHUNK, |part| Ok(nonlinear::truncate_exact_into(party, from, ring, part, *shift)?))?
        }
        OpKind::Truncate { shift } => {
            let from = compiled.rings[&op.inputs[0]];
            chunked(x, NONLINEAR_CHUNK, |part| Ok(nonlinear::truncate_into(party, from, ring, part, *shift)?))?
        }
        // The comparison takes the bits the program's bound on the input needs (after a
        // truncation far fewer than the ring's); inputs are within a quarter of the ring anyway
        // (compile checks the accumulators).
        OpKind::Relu => {
            let bound = compiled.bounds.get(&op.inputs[0]).map_or(nonlinear::bounded_range(ring), |&b| b.min(nonlinear::bounded_range(ring)));
            chunked(x, NONLINEAR_CHUNK, |part| Ok(nonlinear::relu_up_to(party, ring, part, bound)?))?
        }
        // min(max(x, 0), M) = relu(x) - relu(x - M), both ReLUs in one batch (one comparison
        // round trip for both halves); party 0 alone subtracts the public M from its share.
        OpKind::Clip { max } => {
            let m = ring.from_signed(*max);
            let range = nonlinear::bounded_range(ring);
            let bound = compiled.bounds.get(&op.inputs[0]).and_then(|&b| b.checked_add(max.unsigned_abs())).map_or(range, |b| b.min(range));
            chunked(x, NONLINEAR_CHUNK / 2, |part| {
                let shifted = part.iter().map(|&v| if p0 { ring.sub(v, m) } else { v });
                let both: Vec<u64> = part.iter().copied().chain(shifted).collect();
                let r = nonlinear::relu_up_to(party, ring, &both, bound)?;
                let (low, high) = r.split_at(part.len());
                Ok(low.iter().zip(high).map(|(&a, &b)| ring.sub(a, b)).collect())
            })?
        }
        OpKind::Maxpool { kernel, stride, pads } => {
            let pool = MaxPoolPlan::of(compiled, op, *kernel);
            // Padding is a public value at or below every activation: party 0 holds it, party 1 zero.
            let floor = pool.bound.unwrap_or(ring.max_positive() / 4);
            let pad = if p0 { ring.from_signed(-(floor as i64)) } else { 0 };
            let mut pass = |shape: &[usize], x: &[u64], kernel: [usize; 2], stride: [usize; 2], pads: [usize; 4]| -> Result<Vec<u64>> {
                let size = kernel[0] * kernel[1];
                let gathered: Vec<u64> = windows(shape, kernel, stride, pads).into_iter().map(|i| i.map_or(pad, |i| x[i])).collect();
                // Whole windows per chunk.
                chunked(&gathered, (NONLINEAR_CHUNK / size).max(1) * size, |part| {
                    Ok(match pool.bound {
                        Some(bound) => nonlinear::max_pool_up_to(party, ring, part, size, bound)?,
                        None => nonlinear::max_pool(party, ring, part, size)?,
                    })
                })
            };
            let shape = &compiled.shapes[&op.inputs[0]];
            if pool.separable {
                // Along each row, then along each column of the row maxima.
                let rows = pass(shape, x, [1, kernel[1]], [1, stride[1]], [0, pads[1], 0, pads[3]])?;
                let row_shape = [shape[0], shape[1], compiled.shapes[&op.output][2]];
                pass(&row_shape, &rows, [kernel[0], 1], [stride[0], 1], [pads[0], 0, pads[2], 0])?
            } else {
                pass(shape, x, *kernel, *stride, *pads)?
            }
        }
        OpKind::Sumpool { kernel, stride, pads, multiplier } => {
            let m = ring.from_signed(*multiplier);
            let size = kernel[0] * kernel[1];
            let positions = windows(&compiled.shapes[&op.inputs[0]], *kernel, *stride, *pads);
            positions.chunks(size).map(|w| ring.mul(w.iter().flatten().fold(0, |acc, &i| ring.add(acc, x[i])), m)).collect()
        }
        OpKind::GlobalSumpool { multiplier } => {
            let m = ring.from_signed(*multiplier);
            let s = &compiled.shapes[&op.inputs[0]];
            x.chunks(s[1] * s[2]).map(|c| ring.mul(c.iter().fold(0, |acc, &v| ring.add(acc, v)), m)).collect()
        }
        OpKind::Flatten => x.clone(),
        OpKind::Add => {
            let y = in_ring(party, compiled, &op.inputs[1], ring, values)?;
            x.iter().zip(&y).map(|(&a, &b)| ring.add(a, b)).collect()
        }
        OpKind::Concat => {
            let mut out = x.clone();
            for name in &op.inputs[1..] {
                out.extend(in_ring(party, compiled, name, ring, values)?);
            }
            out
        }
        OpKind::Linear { .. } => unreachable!("linear ops are run by the session loops"),
    })
}

/// Elements a two-party op takes in one batch. A comparison's OT messages take a few KB per
/// element while a batch is in flight, so an ImageNet layer's million elements at once cost
/// gigabytes; chunks of 2^17 bound that to a few hundred MB, for a few more rounds.
pub const NONLINEAR_CHUNK: usize = 1 << 17;

/// `f` on consecutive chunks of `x` of at most `chunk` elements, the results concatenated. Both
/// parties chunk alike (the sizes come from the public program).
fn chunked(x: &[u64], chunk: usize, mut f: impl FnMut(&[u64]) -> Result<Vec<u64>>) -> Result<Vec<u64>> {
    if x.len() <= chunk {
        return f(x);
    }
    let mut out = Vec::with_capacity(x.len());
    for part in x.chunks(chunk) {
        out.extend(f(part)?);
    }
    Ok(out)
}

/// Shares of d_i = x_i - max(x), and the boolean shares of [d_i >= 0] (the maximal indices).
fn argmax_bits(party: &mut Party, ring: ShareRing, x: &[u64]) -> Result<Vec<bool>> {
    let m = nonlinear::max_pool(party, ring, x, x.len())?[0];
    let d: Vec<u64> = x.iter().map(|&v| ring.sub(v, m)).collect();
    Ok(nonlinear::drelu(party, ring, &d)?)
}

fn reveal(party: &mut Party, compiled: &CompiledProgram, values: &HashMap<String, Vec<u64>>) -> Result<()> {
    let ring = compiled.rings[&compiled.program.output];
    let out = values.get(&compiled.program.output).ok_or_else(|| missing(&compiled.program.output))?;
    match compiled.program.reveal {
        Reveal::Logits => party.channel().send_words(out, ring.bits())?,
        Reveal::Label => {
            let bits = argmax_bits(party, ring, out)?;
            party.channel().send_bits(&bits)?;
        }
    }
    Ok(())
}

fn learn_output(party: &mut Party, compiled: &CompiledProgram, values: &HashMap<String, Vec<u64>>) -> Result<(Option<Vec<i64>>, usize)> {
    let ring = compiled.rings[&compiled.program.output];
    let out = values.get(&compiled.program.output).ok_or_else(|| missing(&compiled.program.output))?;
    match compiled.program.reveal {
        Reveal::Logits => {
            let theirs = party.channel().recv_words(out.len(), ring.bits())?;
            ring.check("the server's output share", &theirs)?;
            let logits: Vec<i64> = out.iter().zip(&theirs).map(|(&a, &b)| ring.to_signed(ring.add(a, b))).collect();
            let label = (0..logits.len()).max_by_key(|&i| (logits[i], std::cmp::Reverse(i))).unwrap_or(0);
            Ok((Some(logits), label))
        }
        Reveal::Label => {
            let mine = argmax_bits(party, ring, out)?;
            let theirs = party.channel().recv_bits(out.len())?;
            let label = mine.iter().zip(&theirs).position(|(&a, &b)| a ^ b).unwrap_or(0);
            Ok((None, label))
        }
    }
}

/// Runs both halves in this process over an in-memory channel with an emulated link.
pub fn run_local(
    model: &ServedModel,
    input: &[i64],
    link: lycaon_mpc::LinkModel,
    progress: &mut (dyn FnMut(usize, usize, &str) + Send),
) -> Result<(ClientOutcome, ServerSummary)> {
    let (mut server_end, mut client_end) = lycaon_mpc::channel::MemoryChannel::pair_with(link, std::time::Duration::from_secs(600));
    std::thread::scope(|scope| {
        let client = scope.spawn(move || run_client(&mut client_end, input, progress));
        let server = serve_session(model, &mut server_end);
        drop(server_end);
        let client = client.join().map_err(|_| RuntimeError::Protocol("the client thread panicked".into()))?;
        // One side failing makes the other see a closed channel: report the cause.
        match (client, server) {
            (Ok(c), Ok(s)) => Ok((c, s)),
            (Err(cause), Err(RuntimeError::Mpc(lycaon_mpc::MpcError::PeerClosed(_)))) | (Err(cause), Ok(_)) | (_, Err(cause)) => Err(cause),
        }
    })
}
