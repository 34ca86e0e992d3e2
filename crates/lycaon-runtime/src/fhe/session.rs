//! FHE-mode sessions over any channel, after the shared hello (`crate::hello`):
//!
//! 1. server: `{"mode": "fhe", "program": <the public program>}`;
//! 2. client: the key header (JSON: how many Galois-key messages follow, whether a
//!    relinearisation key and encapsulation keys come), then its public key, the relinearisation
//!    key, each Galois key in a message of its own (a ResNet-20 upload is about 5 GB: no message
//!    holds more than one key, and the server parses each as it arrives) and the encapsulation
//!    keys; the server answers with the keys' size in memory;
//! 3. per query: the client's encrypted input (seeded); the server answers with optional
//!    progress messages and then the result: its statistics (JSON) and the logits' ciphertext,
//!    re-randomised with a fresh public-key encryption of zero and noise-flooded ([`Flooding`]).
//!
//! The client holds the secret key ([`FheClient`]); the server holds the client's public keys
//! only ([`SessionKeys`]).

use std::sync::Arc;
use std::time::Instant;

use lycaon_ckks::bootstrap::{Bootstrapper, EncapsulationKeys};
use lycaon_ckks::rlwe::{GaloisKeys, KeySwitchKey, PublicKey, RelinKey, SecretKey};
use lycaon_ckks::{
    conjugation_galois_element, rotation_galois_element, Ciphertext, CkksContext, Decryptor, Encoder, EvaluationKeys, Evaluator, PublicKeyEncryptor,
    SecretKeyEncryptor, SeededCiphertext,
};
use lycaon_math::Sampler;
use lycaon_mpc::Channel;
use serde::{Deserialize, Serialize};

use super::executor::{FheExecutable, FheRunStats, SessionKeys};
use super::fanout::FheFanout;
use super::program::{FheProgram, InputPacking, Layout};
use crate::hello::{Hello, Mode, PublicModel, Want};
use crate::wire;
use crate::{Result, RuntimeError};

const QUERY: u8 = b'Q';
const PROGRESS: u8 = b'P';
const RESULT: u8 = b'R';

fn ckks(e: lycaon_ckks::CkksError) -> RuntimeError {
    RuntimeError::Fhe(e.to_string())
}

fn rlwe(e: lycaon_ckks::rlwe::RlweError) -> RuntimeError {
    RuntimeError::Fhe(e.to_string())
}

/// Noise flooding of the FHE mode's answers: uniform noise in [-2^log2, 2^log2] on every
/// coefficient of c_0, on top of a fresh public-key encryption of zero. It hides a noise term
/// of size B with statistical distance at most n B / 2^(log2 + 1) (one coordinate at a time,
/// summed over the n coefficients), and costs about log2 + log2(sqrt(n / 3)) - log2(scale)
/// bits of the logits' precision.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Flooding {
    pub log2: u32,
    /// Bits of precision (relative to 1) the flooding leaves in each logit, about.
    pub precision_bits: f64,
    /// log2 of the statistical-distance bound for a rescale-sized noise term (6 sigma).
    pub distance_log2: f64,
}

impl Flooding {
    /// The flooding that leaves `precision_bits` in logits at scale `scale` on ring degree `n`.
    pub fn for_precision(n: usize, scale: f64, precision_bits: f64) -> Self {
        let spread = (n as f64 / 3.0).sqrt().log2();
        let log2 = (scale.log2() - precision_bits - spread).floor().max(0.0) as u32;
        // A rescale leaves rounding noise e_0 + e_1 s per coefficient (e_i uniform in [-1/2, 1/2],
        // s ternary with about 2n/3 non-zero coefficients): sigma = sqrt((1 + 2n/3) / 12); 6 sigma.
        let rescale_noise = 6.0 * ((1.0 + 2.0 * n as f64 / 3.0) / 12.0).sqrt();
        let distance_log2 = (n as f64).log2() + rescale_noise.log2() - (log2 as f64 + 1.0);
        Self { log2, precision_bits: scale.log2() - log2 as f64 - spread, distance_log2 }
    }
}

/// Server-side settings of FHE sessions.
#[derive(Clone, Copy, Debug)]
pub struct FheSessionOptions {
    /// Precision the flooding leaves in the logits (bits); None: no flooding (tests only).
    pub flood_precision_bits: Option<f64>,
}

impl Default for FheSessionOptions {
    fn default() -> Self {
        Self { flood_precision_bits: Some(20.0) }
    }
}

/// A program ready to serve.
pub struct FheServed {
    pub exe: Arc<FheExecutable>,
    public_json: String,
    pub options: FheSessionOptions,
    /// Where each session's tensors and keys stay between operations; None: host polynomials
    /// through the executable's backend.
    pub resident: Option<super::resident::ResidentDevice>,
    /// Where each session's ops run when not here ([`super::fanout`]), and over how many
    /// workers a step's independent ops are spread. The server then keeps no evaluation key.
    pub fanout: Option<(Arc<dyn FheFanout>, usize)>,
}

impl FheServed {
    pub fn new(program: FheProgram, backend: Arc<dyn lycaon_backend::Backend>, options: FheSessionOptions) -> Result<Self> {
        let public_json = PublicModel::json(Mode::Fhe, &program.public().to_json())?;
        let exe = Arc::new(FheExecutable::new(program, backend)?);
        Ok(Self { exe, public_json, options, resident: None, fanout: None })
    }

    pub fn name(&self) -> &str {
        &self.exe.program().name
    }
}

/// What the client announces before its keys.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyHeader {
    pub galois: usize,
    pub relin: bool,
    pub encapsulation: bool,
}

impl KeyHeader {
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        serde_json::from_slice(bytes).map_err(|e| RuntimeError::Protocol(format!("the key header: {e}")))
    }
}

/// The keys' size in memory, as the server accepted them.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct KeysAccepted {
    pub key_bytes: usize,
    pub galois_keys: usize,
}

/// Statistics of one query, as the server reports them.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct QueryReport {
    pub server_s: f64,
    #[serde(flatten)]
    pub run: FheRunStats,
    pub flood_log2: u32,
}

/// What a server records of an FHE session (no secret, no value).
#[derive(Clone, Debug, Default, Serialize)]
pub struct FheServerSummary {
    pub queries: usize,
    pub key_bytes: usize,
    pub total_s: f64,
    pub bytes: u64,
}

/// Whether an inference of `program` bootstraps at all: a program on bootstrappable parameters
/// that never does needs none of the circuit's keys (gigabytes at logN = 16).
fn bootstraps(program: &FheProgram) -> bool {
    program.bootstraps().map_or(true, |b| b > 0)
}

/// The Galois elements and levels, the relinearisation level and whether encapsulation keys are
/// needed: the program's own keys and, for a program that bootstraps, the circuit's, each element
/// once at the highest level either needs.
pub fn key_plan(program: &FheProgram, ctx: &Arc<CkksContext>, bootstrapper: Option<&Bootstrapper>) -> (Vec<(u64, usize)>, Option<usize>, bool) {
    let n = ctx.n();
    let mut levels: std::collections::BTreeMap<u64, usize> = std::collections::BTreeMap::new();
    let mut add = |g: u64, l: usize| {
        if g != 1 {
            let e = levels.entry(g).or_insert(l);
            *e = (*e).max(l);
        }
    };
    let (rotations, mut relin) = program.key_plan();
    for (s, l) in rotations {
        add(rotation_galois_element(s, n), l);
    }
    let mut encapsulation = false;
    if let Some(b) = bootstrapper {
        let r = b.rotations();
        for (s, l) in r.rotations {
            add(rotation_galois_element(s, n), l);
        }
        add(conjugation_galois_element(n), r.conjugation_level);
        relin = Some(relin.unwrap_or(0).max(r.relin_level));
        encapsulation = b.params().encapsulation_weight.is_some();
    }
    (levels.into_iter().collect(), relin, encapsulation)
}

/// Serves one FHE session after its hello. Errors are also sent to the client.
pub fn serve_after_hello(served: &FheServed, channel: &mut dyn Channel, hello: Hello) -> Result<FheServerSummary> {
    let result = serve_inner(served, channel, hello);
    wire::tell_peer(channel, result)
}

/// Serves one FHE session on `channel`, hello included (tests, in-memory runs).
pub fn serve_session(served: &FheServed, channel: &mut dyn Channel) -> Result<FheServerSummary> {
    let hello = channel.recv().map_err(RuntimeError::from).and_then(|h| Hello::parse(&h));
    let hello = wire::tell_peer(channel, hello)?;
    serve_after_hello(served, channel, hello)
}

fn serve_inner(served: &FheServed, channel: &mut dyn Channel, hello: Hello) -> Result<FheServerSummary> {
    let began = Instant::now();
    hello.check_mode(Mode::Fhe)?;
    wire::send(channel, served.public_json.as_bytes())?;
    let mut summary = FheServerSummary::default();
    if hello.want == Want::Program {
        return Ok(summary);
    }
    let exe = &served.exe;
    if served.fanout.is_some() && served.resident.is_some() {
        return Err(RuntimeError::Protocol("a server whose sessions run on workers keeps no tensors on a device".into()));
    }
    let (keys, remote) = match &served.fanout {
        None => (receive_keys(exe, channel, &mut summary, KeyUse::Evaluate { prepare_host: served.resident.is_none() })?, None),
        Some((fanout, workers)) => {
            // Each message goes on to the workers as it comes: the server never holds them all.
            let session = RemoteSession::new(fanout.as_ref(), *workers);
            let mut forward = |what: &str| -> Result<Vec<u8>> {
                let m = wire::recv(channel, what)?;
                fanout.key_message(session.id, m.clone())?;
                Ok(m)
            };
            let (keys, accepted) = parse_keys(exe, &mut forward, KeyUse::Forward)?;
            fanout.keys_complete(session.id)?;
            summary.key_bytes = accepted.key_bytes;
            wire::send(channel, &serde_json::to_vec(&accepted).expect("JSON"))?;
            (keys, Some(session))
        }
    };
    // A resident device takes the session's keys once (uploaded), then every query's inputs.
    let resident = served.resident.as_ref().map(|d| d.session(exe, &keys.session)).transpose()?;
    loop {
        let message = match wire::recv(channel, "a query") {
            Ok(m) => m,
            Err(RuntimeError::Mpc(lycaon_mpc::MpcError::PeerClosed(_))) => break,
            Err(e) => return Err(e),
        };
        if message.first() != Some(&QUERY) {
            return Err(RuntimeError::Protocol("expected a query".into()));
        }
        let t0 = Instant::now();
        let ctx = exe.context();
        let inputs = read_inputs(ctx, &message[1..], exe.program().input_names()?.len())?;
        drop(message);
        let mut progress = |done: usize, total: usize, op: &str| {
            let mut m = vec![PROGRESS];
            m.extend(serde_json::to_vec(&serde_json::json!({"done": done, "total": total, "step": op})).expect("JSON"));
            let _ = wire::send(channel, &m);
        };
        let (out, stats) = match (&resident, &remote) {
            (Some(session), _) => session.run(exe, inputs, &mut progress)?,
            (None, Some(r)) => exe.run_on(r.fanout, r.id, r.workers, &keys, inputs, &mut progress)?,
            (None, None) => exe.run(&keys, inputs, &mut progress)?,
        };
        let (out, flood_log2) = finish_answer(served, &keys, out)?;
        let report = report_of(&stats, t0.elapsed().as_secs_f64(), flood_log2);
        let mut w = wire::Writer::default();
        w.blob(&serde_json::to_vec(&report).expect("JSON"));
        w.blob(&out.to_bytes());
        let mut m = vec![RESULT];
        m.extend(w.finish());
        wire::send(channel, &m)?;
        summary.queries += 1;
    }
    summary.total_s = began.elapsed().as_secs_f64();
    summary.bytes = channel.stats().total_bytes();
    Ok(summary)
}

/// A session whose ops run on a fanout's workers; they drop its keys when it ends, however it ends.
struct RemoteSession<'a> {
    fanout: &'a dyn FheFanout,
    id: u64,
    workers: usize,
}

impl<'a> RemoteSession<'a> {
    fn new(fanout: &'a dyn FheFanout, workers: usize) -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Self { fanout, id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed), workers }
    }
}

impl Drop for RemoteSession<'_> {
    fn drop(&mut self) {
        self.fanout.session_ended(self.id);
    }
}

/// A query's input ciphertexts: their count, then each (seeded) as a blob.
fn read_inputs(ctx: &Arc<CkksContext>, bytes: &[u8], want: usize) -> Result<Vec<Ciphertext>> {
    let mut r = wire::Reader::new(bytes);
    let count = r.u32()? as usize;
    if count != want {
        return Err(RuntimeError::Protocol(format!("the query holds {count} input ciphertexts; the program takes {want}")));
    }
    let inputs = (0..count).map(|_| SeededCiphertext::from_bytes(ctx, r.blob()?).map_err(ckks)?.expand(ctx).map_err(ckks)).collect::<Result<Vec<_>>>()?;
    r.finish("query")?;
    Ok(inputs)
}

fn report_of(stats: &FheRunStats, server_s: f64, flood_log2: u32) -> QueryReport {
    QueryReport { server_s, run: stats.clone(), flood_log2 }
}

/// Re-randomises (a fresh public-key encryption of zero) and floods the answer.
fn finish_answer(served: &FheServed, keys: &ServerKeys, out: Ciphertext) -> Result<(Ciphertext, u32)> {
    let ctx = served.exe.context();
    let encoder = Encoder::new(ctx);
    let zero = encoder.encode_real(&vec![0.0; out.slots()], out.level(), out.scale()).map_err(ckks)?;
    let fresh = PublicKeyEncryptor::new(ctx, keys.public.clone()).map_err(ckks)?.encrypt(&zero).map_err(ckks)?;
    let mut out = keys.session.ops.evaluator().add(&out, &fresh).map_err(ckks)?;
    let Some(bits) = served.options.flood_precision_bits else { return Ok((out, 0)) };
    let flooding = Flooding::for_precision(ctx.n(), out.scale(), bits);
    if flooding.log2 > 0 {
        let params = ctx.params();
        let mut sampler = Sampler::from_os()?;
        let positions: Vec<usize> = (0..params.n()).collect();
        let noise = crate::linear::flooding_poly(params, out.level(), &positions, flooding.log2, &mut sampler)?;
        let mut inner = out.inner().clone();
        inner.parts_mut()[0].add_assign(&noise)?;
        out = Ciphertext::from_inner(ctx, inner, out.scale(), out.slots()).map_err(ckks)?;
    }
    Ok((out, flooding.log2))
}

/// A session's keys on the server: evaluation and encapsulation keys, and the public key that
/// re-randomises answers through a `PublicKeyEncryptor` (which cannot be built from a secret key:
/// the compile-fail test on that type). No field of a server session can hold a secret key, and
/// a secret key sent where the public key goes is refused by its wire kind (tests/fhe.rs).
pub struct ServerKeys {
    pub session: SessionKeys,
    public: Arc<PublicKey>,
}

impl std::ops::Deref for ServerKeys {
    type Target = SessionKeys;
    fn deref(&self) -> &SessionKeys {
        &self.session
    }
}

/// Receives a client's keys ([`FheClient::send_keys`]) as a server session does, for running
/// the executable directly (embedding, tests) instead of through the query protocol.
pub fn accept_keys(exe: &FheExecutable, channel: &mut dyn Channel) -> Result<SessionKeys> {
    let keys = receive_keys(exe, channel, &mut FheServerSummary::default(), KeyUse::Evaluate { prepare_host: true })?;
    Ok(keys.session)
}

/// What a server does with a session's keys as they arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyUse {
    /// Keep them to evaluate with; `prepare_host`: encode the bootstrapper's diagonals on the
    /// host with them (a resident session encodes its own on its device instead).
    Evaluate { prepare_host: bool },
    /// Check each and pass the messages on (the session's ops run on workers,
    /// [`super::fanout`]): the server keeps the public key alone.
    Forward,
}

/// A server session's keys from the client, answered with their size.
fn receive_keys(exe: &FheExecutable, channel: &mut dyn Channel, summary: &mut FheServerSummary, usage: KeyUse) -> Result<ServerKeys> {
    let (keys, accepted) = parse_keys(exe, &mut |what| wire::recv(channel, what), usage)?;
    summary.key_bytes = accepted.key_bytes;
    wire::send(channel, &serde_json::to_vec(&accepted).expect("JSON"))?;
    Ok(keys)
}

/// The keys of a session from its messages as the client sends them (`next(what)` gives the
/// next one): the key header, the public key, the relinearisation key, each Galois key, the
/// encapsulation keys; each checked against the program as it comes.
pub(crate) fn parse_keys(exe: &FheExecutable, next: &mut dyn FnMut(&str) -> Result<Vec<u8>>, usage: KeyUse) -> Result<(ServerKeys, KeysAccepted)> {
    let ctx = exe.context();
    let params = ctx.params();
    let keep = usage != KeyUse::Forward;
    let header = KeyHeader::parse(&next("the key header")?)?;
    // What can be checked before the bootstrapping circuit is built (seconds, at logN = 16).
    let bootstrapping = bootstraps(exe.program());
    let encapsulated = bootstrapping && exe.bootstrap_params().is_some_and(|b| b.encapsulation_weight.is_some());
    if header.encapsulation != encapsulated {
        return Err(RuntimeError::Protocol(format!(
            "the client announces encapsulation keys: {}; this program's bootstrapping needs them: {encapsulated}",
            header.encapsulation
        )));
    }
    let boot = exe.bootstrap_params().filter(|_| bootstrapping).map(|_| exe.bootstrapper()).transpose()?;
    let (plan, relin_level, encapsulate) = key_plan(exe.program(), ctx, boot);
    if header.galois > plan.len() || header.relin != relin_level.is_some() || header.encapsulation != encapsulate {
        return Err(RuntimeError::Protocol(format!(
            "the client announces {} Galois keys, relinearisation {}, encapsulation {}; the program needs {} Galois keys, relinearisation {}, encapsulation {}",
            header.galois,
            header.relin,
            header.encapsulation,
            plan.len(),
            relin_level.is_some(),
            encapsulate
        )));
    }
    let public = Arc::new(PublicKey::from_bytes(params, &next("the public key")?).map_err(rlwe)?);
    let mut key_bytes = 0;
    let relin = if header.relin {
        let r = RelinKey::from_bytes(params, &next("the relinearisation key")?).map_err(rlwe)?;
        key_bytes += r.key().memory_bytes();
        keep.then(|| Arc::new(r))
    } else {
        None
    };
    let mut galois: Option<GaloisKeys> = None;
    let mut levels: std::collections::BTreeMap<u64, usize> = std::collections::BTreeMap::new();
    for _ in 0..header.galois {
        let part = GaloisKeys::from_bytes(params, &next("a Galois key")?).map_err(rlwe)?;
        if part.len() != 1 {
            return Err(RuntimeError::Protocol(format!("a Galois-key message holds {} keys (one each)", part.len())));
        }
        key_bytes += part.memory_bytes();
        for g in part.galois_elements() {
            levels.insert(g, part.level_of(g).unwrap_or(0));
        }
        if !keep {
            continue;
        }
        match &mut galois {
            Some(g) => g.merge(part).map_err(rlwe)?,
            None => galois = Some(part),
        }
    }
    if let Some((g, l)) = plan.iter().find(|(g, l)| levels.get(g).is_none_or(|have| have < l)) {
        return Err(RuntimeError::Protocol(format!("the keys lack the Galois key of element {g} at level {l}")));
    }
    let encapsulation = if header.encapsulation {
        let dense_to_sparse = Arc::new(KeySwitchKey::from_bytes(params, &next("an encapsulation key")?).map_err(rlwe)?);
        let sparse_to_dense = Arc::new(KeySwitchKey::from_bytes(params, &next("an encapsulation key")?).map_err(rlwe)?);
        let keys = EncapsulationKeys { dense_to_sparse, sparse_to_dense };
        key_bytes += keys.memory_bytes();
        keep.then_some(keys)
    } else {
        None
    };
    let accepted = KeysAccepted { key_bytes, galois_keys: levels.len() };
    let session = SessionKeys::new(Evaluator::new(ctx, EvaluationKeys { relin, galois: galois.map(Arc::new) }), encapsulation);
    // The bootstrapper's diagonals (over Q_l P, kept for every later session of this server)
    // are encoded with the first session's keys, before its first image rather than during it.
    if let Some(b) = boot.filter(|_| usage == KeyUse::Evaluate { prepare_host: true }) {
        b.prepare_with(session.ops.evaluator(), session.encapsulation.as_ref()).map_err(ckks)?;
    }
    Ok((ServerKeys { session, public }, accepted))
}

/// The client of the FHE mode: the secret key (never leaves), key generation, packing,
/// encryption and decryption, from the public program alone.
pub struct FheClient {
    program: FheProgram,
    ctx: Arc<CkksContext>,
    secret: Arc<SecretKey>,
    sampler: Sampler,
    /// Every key at the top level instead of the highest level it is used at (004's
    /// "all-required" keyset; benchmarks compare it with the level-aware default).
    all_at_top: bool,
}

impl FheClient {
    pub fn new(program: FheProgram, backend: Arc<dyn lycaon_backend::Backend>) -> Result<Self> {
        program.validate()?;
        let ctx = program.parameters.context(backend)?;
        let mut sampler = Sampler::from_os()?;
        let secret = Arc::new(SecretKey::generate(ctx.params(), &mut sampler).map_err(rlwe)?);
        Ok(Self { program, ctx, secret, sampler, all_at_top: false })
    }

    /// Makes every key at the top level (004's "all-required" keyset) instead of the level-aware one.
    pub fn with_keys_at_top(mut self, on: bool) -> Self {
        self.all_at_top = on;
        self
    }

    pub fn program(&self) -> &FheProgram {
        &self.program
    }

    /// Generates the keys and sends them, one key per message, each dropped once sent;
    /// `stage(text)` hears what is being made. Returns the bytes sent.
    pub fn send_keys(&mut self, channel: &mut dyn Channel, stage: &mut dyn FnMut(&str)) -> Result<(u64, KeysAccepted)> {
        let before = channel.stats().bytes_sent;
        let boot = match self.program.parameters.bootstrap()?.filter(|_| bootstraps(&self.program)) {
            Some(bp) => {
                stage("building the bootstrapping circuit's key plan");
                Some(Bootstrapper::new(&self.ctx, bp).map_err(ckks)?)
            }
            None => None,
        };
        let (mut plan, mut relin_level, encapsulate) = key_plan(&self.program, &self.ctx, boot.as_ref());
        if self.all_at_top {
            let top = self.ctx.max_level();
            plan.iter_mut().for_each(|(_, l)| *l = top);
            relin_level = relin_level.map(|_| top);
        }
        let header = KeyHeader { galois: plan.len(), relin: relin_level.is_some(), encapsulation: encapsulate };
        wire::send(channel, &serde_json::to_vec(&header).expect("JSON"))?;
        let (sk, sampler) = (&self.secret, &mut self.sampler);
        wire::send(channel, &PublicKey::generate(sk, sampler).map_err(rlwe)?.to_bytes())?;
        if let Some(level) = relin_level {
            wire::send(channel, &RelinKey::generate_at(sk, level, sampler).map_err(rlwe)?.to_bytes())?;
        }
        stage(&format!("generating and sending {} Galois keys by level", plan.len()));
        for pair in &plan {
            wire::send(channel, &GaloisKeys::generate_at(sk, std::slice::from_ref(pair), sampler).map_err(rlwe)?.to_bytes())?;
        }
        if let Some(b) = &boot {
            if let Some(keys) = b.generate_encapsulation_keys(sk, sampler).map_err(ckks)? {
                wire::send(channel, &keys.dense_to_sparse.to_bytes())?;
                wire::send(channel, &keys.sparse_to_dense.to_bytes())?;
            }
        }
        let accepted: KeysAccepted = serde_json::from_slice(&wire::recv(channel, "the key acknowledgement")?)
            .map_err(|e| RuntimeError::Protocol(format!("the key acknowledgement: {e}")))?;
        Ok((channel.stats().bytes_sent - before, accepted))
    }

    /// The slots of an input tensor (C-order, the program's input shape): one vector per
    /// input ciphertext ([`FheProgram::input_names`]).
    pub fn pack(&self, x: &[f64]) -> Result<Vec<Vec<f64>>> {
        let p = &self.program;
        let want: usize = p.input_shape.iter().product();
        if x.len() != want {
            return Err(RuntimeError::Program(format!("the input has {} values, the model takes {want} ({:?})", x.len(), p.input_shape)));
        }
        if let Some(v) = x.iter().find(|v| !v.is_finite()) {
            return Err(RuntimeError::Program(format!("the input holds {v}, not a finite number")));
        }
        let slots = self.ctx.max_slots();
        match &p.input_packing {
            InputPacking::Slots { index, period } => {
                if index.len() != want || *period == 0 || slots % period != 0 || index.iter().any(|&i| i as usize >= *period) {
                    return Err(RuntimeError::Program("the program's input packing does not fit its input".into()));
                }
                let mut v = vec![0.0; slots];
                for copy in 0..slots / period {
                    for (&i, &value) in index.iter().zip(x) {
                        v[i as usize + copy * period] = value;
                    }
                }
                Ok(vec![v])
            }
            InputPacking::Multiplexed { channels, height, width, gap, image, part_channels, space_to_depth } => {
                let fhe = |e: lycaon_nn::fhe::FheError| RuntimeError::Fhe(e.to_string());
                let whole = Layout { channels: *channels, height: *height, width: *width, gap: *gap, image: *image };
                let rearranged;
                let x = match space_to_depth {
                    Some(f) if p.input_shape.len() == 3 && *f > 0 && *channels == p.input_shape[0] * f * f => {
                        rearranged = crate::fhe::compile::space_to_depth::rearrange(x, &p.input_shape, *f);
                        &rearranged[..]
                    }
                    Some(f) => {
                        return Err(RuntimeError::Program(format!(
                            "the program's input packing (space-to-depth by {f}) does not fit its input {:?}",
                            p.input_shape
                        )))
                    }
                    None => x,
                };
                let parts = whole.parts(*part_channels)?; // refuses zero channels
                let area = x.len() / channels;
                parts
                    .into_iter()
                    .map(|(range, part)| {
                        let l = part.multiplexed(slots).map_err(fhe)?;
                        l.pack(&x[range.start * area..range.end * area]).map_err(fhe)
                    })
                    .collect()
            }
        }
    }

    /// The input packed and encrypted (secret key, seeded) at the program's input level, one
    /// ciphertext per part.
    pub fn encrypt(&mut self, x: &[f64]) -> Result<Vec<SeededCiphertext>> {
        let level = self.program.input_level;
        let encoder = Encoder::new(&self.ctx);
        let mut encryptor = SecretKeyEncryptor::new(&self.ctx, self.secret.clone()).map_err(ckks)?;
        let scale = self.ctx.scale_at(level).map_err(ckks)?;
        let mut out = Vec::new();
        for v in self.pack(x)? {
            out.push(encryptor.encrypt(&encoder.encode_real(&v, level, scale).map_err(ckks)?).map_err(ckks)?);
        }
        Ok(out)
    }

    /// The logits of an answer.
    pub fn decrypt(&self, ct: &Ciphertext) -> Result<Vec<f64>> {
        let pt = Decryptor::new(&self.ctx, &self.secret).map_err(ckks)?.decrypt(ct).map_err(ckks)?;
        let v = Encoder::new(&self.ctx).decode_real(&pt).map_err(ckks)?;
        self.program
            .output_slots
            .iter()
            .map(|&s| v.get(s as usize).copied().ok_or_else(|| RuntimeError::Program(format!("output slot {s} of {}", v.len()))))
            .collect()
    }

    /// One query on an open session: encrypt, send, wait (hearing progress), decrypt.
    pub fn query(&mut self, channel: &mut dyn Channel, x: &[f64], progress: &mut dyn FnMut(usize, usize, &str)) -> Result<QueryOutcome> {
        let t0 = Instant::now();
        let inputs = self.encrypt(x)?;
        let mut w = wire::Writer::default();
        w.u32(inputs.len() as u32);
        for ct in inputs {
            w.blob(&ct.to_bytes());
        }
        let mut m = vec![QUERY];
        m.extend(w.finish());
        let up = m.len();
        let client_encrypt_s = t0.elapsed().as_secs_f64();
        wire::send(channel, &m)?;
        drop(m);
        let sent_at = Instant::now();
        let answer = loop {
            let message = wire::recv(channel, "the answer")?;
            match message.first() {
                Some(&PROGRESS) => {
                    if let Ok(p) = serde_json::from_slice::<serde_json::Value>(&message[1..]) {
                        progress(p["done"].as_u64().unwrap_or(0) as usize, p["total"].as_u64().unwrap_or(0) as usize, p["step"].as_str().unwrap_or(""));
                    }
                }
                Some(&RESULT) => break message,
                _ => return Err(RuntimeError::Protocol("expected the answer".into())),
            }
        };
        let waited = sent_at.elapsed().as_secs_f64();
        let mut r = wire::Reader::new(&answer[1..]);
        let report: QueryReport = serde_json::from_slice(r.blob()?).map_err(|e| RuntimeError::Protocol(format!("the answer's report: {e}")))?;
        let ct_bytes = r.blob()?;
        r.finish("answer")?;
        let t1 = Instant::now();
        let ct = Ciphertext::from_bytes(&self.ctx, ct_bytes).map_err(ckks)?;
        let logits = self.decrypt(&ct)?;
        let client_s = client_encrypt_s + t1.elapsed().as_secs_f64();
        Ok(QueryOutcome {
            label: logits.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i),
            logits,
            total_s: t0.elapsed().as_secs_f64(),
            client_s,
            comm_s: (waited - report.server_s).max(0.0),
            up_bytes: up as u64,
            down_bytes: answer.len() as u64,
            report,
        })
    }
}

/// What a client gets from one query.
#[derive(Clone, Debug, Serialize)]
pub struct QueryOutcome {
    pub logits: Vec<f64>,
    pub label: usize,
    pub total_s: f64,
    pub client_s: f64,
    pub comm_s: f64,
    pub up_bytes: u64,
    pub down_bytes: u64,
    pub report: QueryReport,
}

/// Opens an FHE session: hello, the public program, the client and its keys sent
/// (`keys_at_top`: 004's all-required keyset instead of the level-aware one).
pub fn open_session(
    channel: &mut dyn Channel,
    backend: Arc<dyn lycaon_backend::Backend>,
    keys_at_top: bool,
    stage: &mut dyn FnMut(&str),
) -> Result<(FheClient, u64, KeysAccepted)> {
    channel.send(&Hello { want: Want::Inference, mode: Some(Mode::Fhe) }.to_bytes())?;
    let public = PublicModel::parse(&wire::recv(channel, "the program")?)?;
    let program = fhe_program(public)?;
    let mut client = FheClient::new(program, backend)?.with_keys_at_top(keys_at_top);
    let (bytes, accepted) = client.send_keys(channel, stage)?;
    Ok((client, bytes, accepted))
}

/// The FHE program of a `PublicModel` (an error naming the mode otherwise).
pub fn fhe_program(public: PublicModel) -> Result<FheProgram> {
    if public.mode != Mode::Fhe {
        return Err(RuntimeError::Refused(format!("this server serves the {} mode; run the client with --mode {}", public.mode.name(), public.mode.name())));
    }
    FheProgram::from_json(&public.program.to_string())
}
