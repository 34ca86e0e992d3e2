//! An FHE session's ops run by workers in other processes or on other machines (a Ray cluster:
//! ../DESIGN.md, "Growing past one machine").
//!
//! The server keeps the session: the client's connection, the query protocol, the public key
//! that re-randomises answers. It checks the client's keys as they arrive and passes the
//! messages on ([`FheFanout::keys_arrived`]); each worker parses them once, so the evaluation
//! and bootstrapping keys (gigabytes at logN = 16) live on the workers, not on the server.
//!
//! Per query the server cuts the program into [`schedule`]d steps. A step is either a wave of
//! independent ops (the parts of a tensor larger than one ciphertext: their convolutions,
//! bootstraps and activations), split into one batch per worker, or a chain of ops each of
//! which needs the one before, run whole by one worker (so a network held in one ciphertext
//! moves nothing between its ops). A batch carries the ciphertexts it reads and returns those
//! that later steps read; each op runs, with its refreshes, exactly as on one machine
//! ([`FheExecutable::step`]), so the logits are bit for bit one machine's.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use lycaon_ckks::Ciphertext;
use serde::{Deserialize, Serialize};

use super::executor::{FheExecutable, FheRunStats, SessionKeys};
use super::program::FheProgram;
use super::session::{parse_keys, KeyUse};
use crate::{Result, RuntimeError};

fn invalid(what: impl Into<String>) -> RuntimeError {
    RuntimeError::Program(what.into())
}

/// Ops one worker runs in order, the tensors they read that it is given, and those it returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FheBatch {
    /// Indices into the program's ops, in the order they run.
    pub ops: Vec<usize>,
    /// The ciphertexts the batch is given (read before any of its ops writes them).
    pub inputs: Vec<String>,
    /// The ciphertexts it returns, in this order: what later steps read, and the program's output.
    pub outputs: Vec<String>,
}

impl FheBatch {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a batch is JSON")
    }

    pub fn from_json(text: &str) -> Result<Self> {
        serde_json::from_str(text).map_err(|e| RuntimeError::Protocol(format!("a malformed batch: {e}")))
    }
}

/// What each op reads (its inputs and the tensors it refreshes) and writes (its output and the
/// refreshed tensors).
fn reads_writes(program: &FheProgram) -> Vec<(Vec<&str>, Vec<&str>)> {
    program
        .ops
        .iter()
        .map(|op| {
            let refreshed = op.refresh.iter().map(|r| r.tensor.as_str());
            (op.inputs.iter().map(String::as_str).chain(refreshed.clone()).collect(), std::iter::once(op.output.as_str()).chain(refreshed).collect())
        })
        .collect()
}

/// The steps of one query over `workers` workers (module docs). Each op goes in the first wave
/// after the ops whose results it reads, and no earlier than any op that reads or writes a
/// tensor it writes; a wave of several ops is cut into at most `workers` batches of
/// consecutive ops; consecutive waves that make one batch each (one op, or one worker) make one
/// chain.
pub fn schedule(program: &FheProgram, workers: usize) -> Vec<Vec<FheBatch>> {
    let rw = reads_writes(program);
    let mut wave_of = Vec::with_capacity(rw.len());
    let (mut written, mut read): (HashMap<&str, usize>, HashMap<&str, usize>) = (HashMap::new(), HashMap::new());
    for (reads, writes) in &rw {
        let after_writers = reads.iter().filter_map(|t| written.get(t).map(|w| w + 1));
        let not_before = writes.iter().flat_map(|t| [read.get(t).copied(), written.get(t).copied()]).flatten();
        let wave = after_writers.chain(not_before).max().unwrap_or(0);
        for t in reads {
            let r = read.entry(t).or_insert(wave);
            *r = (*r).max(wave);
        }
        for t in writes {
            written.insert(t, wave);
        }
        wave_of.push(wave);
    }
    let waves = wave_of.iter().max().map_or(0, |w| w + 1);
    let mut by_wave: Vec<Vec<usize>> = vec![Vec::new(); waves];
    for (i, &w) in wave_of.iter().enumerate() {
        by_wave[w].push(i);
    }
    // A chain of single-op waves is one batch; a wave of several is cut into batches.
    enum Step {
        Chain(Vec<usize>),
        Wave(Vec<Vec<usize>>),
    }
    let mut steps: Vec<Step> = Vec::new();
    for ops in by_wave {
        let (n, parts) = (ops.len(), workers.clamp(1, ops.len()));
        match (parts, steps.last_mut()) {
            (1, Some(Step::Chain(chain))) => chain.extend(ops),
            (1, _) => steps.push(Step::Chain(ops)),
            _ => steps.push(Step::Wave((0..parts).map(|k| ops[n * k / parts..n * (k + 1) / parts].to_vec()).collect())),
        }
    }
    let steps = steps
        .into_iter()
        .map(|s| match s {
            Step::Chain(ops) => vec![ops],
            Step::Wave(batches) => batches,
        })
        .collect();
    with_inputs_outputs(program, &rw, steps)
}

/// Each batch's inputs (what it reads before writing) and outputs (what it writes that a later
/// step reads, or the program's output).
fn with_inputs_outputs(program: &FheProgram, rw: &[(Vec<&str>, Vec<&str>)], steps: Vec<Vec<Vec<usize>>>) -> Vec<Vec<FheBatch>> {
    let mut step_of = vec![0; rw.len()];
    for (s, step) in steps.iter().enumerate() {
        for &i in step.iter().flatten() {
            step_of[i] = s;
        }
    }
    // The last step that reads each tensor.
    let mut last_step: HashMap<&str, usize> = HashMap::new();
    for (i, (reads, _)) in rw.iter().enumerate() {
        for t in reads {
            let e = last_step.entry(t).or_insert(step_of[i]);
            *e = (*e).max(step_of[i]);
        }
    }
    steps
        .into_iter()
        .enumerate()
        .map(|(s, step)| {
            step.into_iter()
                .map(|ops| {
                    let (mut inputs, mut outputs, mut own): (Vec<String>, Vec<String>, HashSet<&str>) = (Vec::new(), Vec::new(), HashSet::new());
                    for &i in &ops {
                        let (reads, writes) = &rw[i];
                        for t in reads {
                            if !own.contains(t) && !inputs.iter().any(|x| x == t) {
                                inputs.push(t.to_string());
                            }
                        }
                        own.extend(writes.iter().copied());
                    }
                    for &i in &ops {
                        for t in &rw[i].1 {
                            let later = last_step.get(t).is_some_and(|&l| l > s) || *t == program.output;
                            if later && !outputs.iter().any(|x| x == t) {
                                outputs.push(t.to_string());
                            }
                        }
                    }
                    FheBatch { ops, inputs, outputs }
                })
                .collect()
        })
        .collect()
}

/// Where an FHE server's ops run when they do not run in its own process. Calls come from the
/// session threads, several sessions at once; `session` tells them apart.
pub trait FheFanout: Send + Sync {
    /// The key messages of `session` as the client sent them (the key header first), already
    /// checked against the program by the server.
    fn keys_arrived(&self, session: u64, messages: Vec<Vec<u8>>) -> Result<()>;
    /// Runs the batches of one step, concurrently where it can, each with its serialised input
    /// ciphertexts; returns per batch, in order, its serialised outputs and its statistics.
    fn run(&self, session: u64, batches: Vec<(FheBatch, Vec<Vec<u8>>)>) -> Result<Vec<(Vec<Vec<u8>>, FheRunStats)>>;
    /// The session is over (finished or failed): drop its keys.
    fn session_ended(&self, session: u64);
}

/// Adds a batch's statistics to the query's.
fn merge(total: &mut FheRunStats, part: FheRunStats) {
    total.bootstraps += part.bootstraps;
    total.bootstrap_s += part.bootstrap_s;
    total.conv_s += part.conv_s;
    total.quadratic_s += part.quadratic_s;
    total.relu_s += part.relu_s;
    total.other_s += part.other_s;
    total.late_encodings += part.late_encodings;
    total.ops.extend(part.ops);
}

impl FheExecutable {
    /// [`FheExecutable::run`] with every op on `fanout`'s workers, which hold `session`'s keys:
    /// the same ops on the same ciphertexts, so the same output bit for bit. `progress` is
    /// called after every step.
    pub fn run_on(
        &self,
        fanout: &dyn FheFanout,
        session: u64,
        workers: usize,
        inputs: Vec<Ciphertext>,
        progress: &mut dyn FnMut(usize, usize, &str),
    ) -> Result<(Ciphertext, FheRunStats)> {
        let p = self.program();
        let names = p.input_names()?;
        self.check_inputs(&inputs)?;
        let mut values: HashMap<String, Vec<u8>> = names.into_iter().zip(inputs.iter().map(Ciphertext::to_bytes)).collect();
        drop(inputs);
        let mut stats = FheRunStats::default();
        let (total, mut done) = (p.ops.len(), 0);
        let steps = schedule(p, workers);
        // The tensors each step's successors read from the server.
        let mut needed_after: Vec<HashSet<String>> = vec![HashSet::new(); steps.len()];
        for s in (0..steps.len().saturating_sub(1)).rev() {
            let mut next = needed_after[s + 1].clone();
            next.extend(steps[s + 1].iter().flat_map(|b| b.inputs.iter().cloned()));
            needed_after[s] = next;
        }
        for (s, step) in steps.into_iter().enumerate() {
            let batches = step
                .into_iter()
                .map(|b| {
                    let given = b.inputs.iter().map(|t| values.get(t).cloned().ok_or_else(|| invalid(format!("a batch reads '{t}', which is not live")))).collect::<Result<Vec<_>>>()?;
                    Ok((b, given))
                })
                .collect::<Result<Vec<_>>>()?;
            let wanted: Vec<(Vec<String>, usize)> = batches.iter().map(|(b, _)| (b.outputs.clone(), b.ops.len())).collect();
            let last = batches.iter().flat_map(|(b, _)| b.ops.iter()).max().map(|&i| p.ops[i].name.clone()).unwrap_or_default();
            let answers = fanout.run(session, batches)?;
            if answers.len() != wanted.len() {
                return Err(RuntimeError::Cluster(format!("the workers answered {} batches of {}", answers.len(), wanted.len())));
            }
            for ((names, ops), (outputs, part)) in wanted.into_iter().zip(answers) {
                if outputs.len() != names.len() {
                    return Err(RuntimeError::Cluster(format!("a worker returned {} ciphertexts for {} wanted", outputs.len(), names.len())));
                }
                values.extend(names.into_iter().zip(outputs));
                merge(&mut stats, part);
                done += ops;
            }
            // What no later step reads goes.
            values.retain(|t, _| t == &p.output || needed_after[s].contains(t.as_str()));
            progress(done, total, &last);
        }
        let out = values.remove(&p.output).ok_or_else(|| invalid(format!("the output '{}' was never written", p.output)))?;
        Ok((Ciphertext::from_bytes(self.context(), &out).map_err(|e| RuntimeError::Cluster(format!("the output from the workers: {e}")))?, stats))
    }

    /// A worker's part of [`Self::run_on`]: the batch's ops in order on its given ciphertexts.
    pub fn run_batch(&self, keys: &SessionKeys, batch: &FheBatch, inputs: &[Vec<u8>]) -> Result<(Vec<Vec<u8>>, FheRunStats)> {
        let p = self.program();
        if inputs.len() != batch.inputs.len() {
            return Err(RuntimeError::Protocol(format!("a batch names {} input ciphertexts and brings {}", batch.inputs.len(), inputs.len())));
        }
        if let Some(&i) = batch.ops.iter().find(|&&i| i >= p.ops.len()) {
            return Err(RuntimeError::Protocol(format!("a batch runs op {i}; the program has {}", p.ops.len())));
        }
        let ctx = self.context();
        let mut values = HashMap::with_capacity(inputs.len());
        for (name, bytes) in batch.inputs.iter().zip(inputs) {
            let ct = Ciphertext::from_bytes(ctx, bytes).map_err(|e| RuntimeError::Protocol(format!("input ciphertext '{name}' of a batch: {e}")))?;
            values.insert(name.clone(), ct);
        }
        // Each tensor goes after the batch's last op that reads it, unless the batch returns it.
        let mut last: HashMap<String, usize> = HashMap::new();
        for &i in &batch.ops {
            let op = &p.ops[i];
            for t in op.inputs.iter().chain(op.refresh.iter().map(|r| &r.tensor)) {
                last.insert(t.clone(), i);
            }
        }
        for t in &batch.outputs {
            last.insert(t.clone(), usize::MAX);
        }
        let late = std::sync::atomic::AtomicU64::new(0);
        let mut stats = FheRunStats::default();
        for &i in &batch.ops {
            self.step_with(keys, i, &mut values, &late, &mut stats, &last)?;
        }
        stats.late_encodings = late.into_inner();
        let outputs = batch
            .outputs
            .iter()
            .map(|t| values.get(t).map(Ciphertext::to_bytes).ok_or_else(|| invalid(format!("a batch returns '{t}', which its ops never wrote"))))
            .collect::<Result<_>>()?;
        Ok((outputs, stats))
    }
}

/// What a worker process holds: the program prepared once, and each session's keys (parsed
/// from the messages the client sent, once per worker).
pub struct FheWorker {
    exe: FheExecutable,
    sessions: Mutex<HashMap<u64, Arc<SessionKeys>>>,
}

impl FheWorker {
    pub fn new(program: FheProgram, backend: Arc<dyn lycaon_backend::Backend>) -> Result<Self> {
        Ok(Self { exe: FheExecutable::new(program, backend)?, sessions: Mutex::new(HashMap::new()) })
    }

    pub fn executable(&self) -> &FheExecutable {
        &self.exe
    }

    fn sessions(&self) -> Result<std::sync::MutexGuard<'_, HashMap<u64, Arc<SessionKeys>>>> {
        self.sessions.lock().map_err(|_| RuntimeError::Protocol("a worker's session store was poisoned".into()))
    }

    /// Takes `session`'s keys from the client's messages ([`FheFanout::keys_arrived`]); returns
    /// their size in memory.
    pub fn add_keys(&self, session: u64, messages: &[Vec<u8>]) -> Result<usize> {
        let mut it = messages.iter();
        let mut next = |what: &str| it.next().cloned().ok_or_else(|| RuntimeError::Protocol(format!("the key messages end before {what}")));
        let (keys, accepted) = parse_keys(&self.exe, &mut next, KeyUse::Evaluate { prepare_host: true }, None)?;
        if it.next().is_some() {
            return Err(RuntimeError::Protocol("more key messages than the key header announces".into()));
        }
        self.sessions()?.insert(session, Arc::new(keys.session));
        Ok(accepted.key_bytes)
    }

    pub fn has_keys(&self, session: u64) -> Result<bool> {
        Ok(self.sessions()?.contains_key(&session))
    }

    pub fn end_session(&self, session: u64) -> Result<()> {
        self.sessions()?.remove(&session);
        Ok(())
    }

    /// Sessions whose keys this worker holds.
    pub fn sessions_held(&self) -> Result<usize> {
        Ok(self.sessions()?.len())
    }

    /// Runs one batch of `session` ([`FheExecutable::run_batch`]).
    pub fn run(&self, session: u64, batch: &FheBatch, inputs: &[Vec<u8>]) -> Result<(Vec<Vec<u8>>, FheRunStats)> {
        let keys = self.sessions()?.get(&session).cloned().ok_or_else(|| RuntimeError::Protocol(format!("this worker holds no keys of session {session}")))?;
        self.exe.run_batch(&keys, batch, inputs)
    }
}
