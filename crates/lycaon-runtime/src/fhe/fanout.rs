//! An FHE session's ops run by workers in other processes or on other machines (a Ray cluster:
//! ../DESIGN.md, "Growing past one machine").
//!
//! The server keeps the session: the client's connection, the query protocol, the public key
//! that re-randomises answers. It checks the client's keys as they arrive and passes the
//! messages on ([`FheFanout::key_message`]); each worker parses them once, so the evaluation
//! and bootstrapping keys (gigabytes at logN = 16) live on the workers, not on the server.
//!
//! Per query the server cuts the program into steps ([`FheExecutable::schedule`]). The units of
//! work are ops, and the terms of an op that sums one layer per input part (an MPConv or the
//! pooling layer reading a tensor of several ciphertexts): each term runs apart and the server
//! adds them (no key needed) in the order one machine does. A step is either a wave of
//! independent units (the parts of a tensor larger than one ciphertext: their convolutions,
//! bootstraps and activations), split into one batch per worker, or a chain of units each of
//! which needs the one before, run whole by one worker (so a network held in one ciphertext
//! moves nothing between its ops). A batch carries the ciphertexts it reads and returns those
//! that later steps read; each op runs, with its refreshes, exactly as on one machine, so the
//! logits are bit for bit one machine's.

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

/// A unit of work: an op (with its refreshes), one term of an op that sums one layer per input
/// part, or the sum of such an op's terms and its bias.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Op(usize),
    /// (op, input part).
    Term(usize, usize),
    /// The op whose terms are summed (on the server: it needs no key).
    Finish(usize),
}

/// Units one worker runs in order, the ciphertexts they read that it is given, and those it
/// returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FheBatch {
    pub units: Vec<Unit>,
    /// The ciphertexts the batch is given (read before any of its units writes them).
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

/// One step of a query: the sums the server finishes itself, then the batches the workers run
/// at once (either may be empty).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FheStep {
    pub local: Vec<Unit>,
    pub batches: Vec<FheBatch>,
}

/// The name of term `k` of the op writing `output`.
fn term_name(output: &str, k: usize) -> String {
    format!("{output}~{k}")
}

impl FheExecutable {
    /// What a unit reads and writes (an op: its inputs and refreshed tensors; its output and
    /// the refreshed tensors).
    fn reads_writes(&self, unit: Unit) -> (Vec<String>, Vec<String>) {
        let ops = &self.program().ops;
        match unit {
            Unit::Op(i) => {
                let op = &ops[i];
                let refreshed = op.refresh.iter().map(|r| r.tensor.clone());
                (op.inputs.iter().cloned().chain(refreshed.clone()).collect(), std::iter::once(op.output.clone()).chain(refreshed).collect())
            }
            Unit::Term(i, k) => (vec![ops[i].inputs[k].clone()], vec![term_name(&ops[i].output, k)]),
            Unit::Finish(i) => (self.split_terms(i).unwrap_or_default().into_iter().map(|k| term_name(&ops[i].output, k)).collect(), vec![ops[i].output.clone()]),
        }
    }

    /// The steps of one query over `workers` workers (module docs). Each unit goes in the
    /// first wave after the units whose results it reads, and no earlier than any unit that
    /// reads or writes a tensor it writes; a wave's sums run on the server, its other units
    /// are cut into at most `workers` batches of consecutive units; consecutive waves that make
    /// one batch each (one unit, or one worker) and no sum make one chain.
    pub fn schedule(&self, workers: usize) -> Vec<FheStep> {
        let units: Vec<Unit> = (0..self.program().ops.len())
            .flat_map(|i| match self.split_terms(i) {
                Some(parts) => parts.into_iter().map(|k| Unit::Term(i, k)).chain([Unit::Finish(i)]).collect(),
                None => vec![Unit::Op(i)],
            })
            .collect();
        let rw: Vec<(Vec<String>, Vec<String>)> = units.iter().map(|&u| self.reads_writes(u)).collect();
        let mut wave_of = Vec::with_capacity(units.len());
        let (mut written, mut read): (HashMap<&str, usize>, HashMap<&str, usize>) = (HashMap::new(), HashMap::new());
        for (reads, writes) in &rw {
            let after_writers = reads.iter().filter_map(|t| written.get(t.as_str()).map(|w| w + 1));
            let not_before = writes.iter().flat_map(|t| [read.get(t.as_str()).copied(), written.get(t.as_str()).copied()]).flatten();
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
        let mut by_wave: Vec<Vec<usize>> = vec![Vec::new(); wave_of.iter().max().map_or(0, |w| w + 1)];
        for (u, &w) in wave_of.iter().enumerate() {
            by_wave[w].push(u);
        }
        // Steps as unit indices: (on the server, per batch).
        let mut steps: Vec<(Vec<usize>, Vec<Vec<usize>>)> = Vec::new();
        let mut chain_open = false;
        for wave in by_wave {
            let (local, remote): (Vec<usize>, Vec<usize>) = wave.into_iter().partition(|&u| matches!(units[u], Unit::Finish(_)));
            let (n, parts) = (remote.len(), workers.clamp(1, remote.len().max(1)));
            if local.is_empty() && parts == 1 && n > 0 {
                if chain_open {
                    steps.last_mut().expect("an open chain").1[0].extend(remote);
                } else {
                    steps.push((Vec::new(), vec![remote]));
                    chain_open = true;
                }
                continue;
            }
            let batches = if n == 0 { Vec::new() } else { (0..parts).map(|k| remote[n * k / parts..n * (k + 1) / parts].to_vec()).collect() };
            steps.push((local, batches));
            chain_open = false;
        }
        // Each batch's inputs (what it reads before writing) and outputs (what it writes that a
        // later step reads, or the program's output).
        let mut step_of = vec![0; units.len()];
        for (s, (local, batches)) in steps.iter().enumerate() {
            for &u in local.iter().chain(batches.iter().flatten()) {
                step_of[u] = s;
            }
        }
        let mut last_step: HashMap<&str, usize> = HashMap::new();
        for (u, (reads, _)) in rw.iter().enumerate() {
            for t in reads {
                let e = last_step.entry(t).or_insert(step_of[u]);
                *e = (*e).max(step_of[u]);
            }
        }
        let output = &self.program().output;
        steps
            .into_iter()
            .enumerate()
            .map(|(s, (local, batches))| FheStep {
                local: local.into_iter().map(|u| units[u]).collect(),
                batches: batches
                    .into_iter()
                    .map(|members| {
                        let (mut inputs, mut outputs, mut own): (Vec<String>, Vec<String>, HashSet<&str>) = (Vec::new(), Vec::new(), HashSet::new());
                        for &u in &members {
                            for t in &rw[u].0 {
                                if !own.contains(t.as_str()) && !inputs.contains(t) {
                                    inputs.push(t.clone());
                                }
                            }
                            own.extend(rw[u].1.iter().map(String::as_str));
                        }
                        for &u in &members {
                            for t in &rw[u].1 {
                                let later = last_step.get(t.as_str()).is_some_and(|&l| l > s) || t == output;
                                if later && !outputs.contains(t) {
                                    outputs.push(t.clone());
                                }
                            }
                        }
                        FheBatch { units: members.into_iter().map(|u| units[u]).collect(), inputs, outputs }
                    })
                    .collect(),
            })
            .collect()
    }
}

/// Where an FHE server's ops run when they do not run in its own process. Calls come from the
/// session threads, several sessions at once; `session` tells them apart.
pub trait FheFanout: Send + Sync {
    /// The next key message of `session` as the client sent it (the key header first), passed
    /// on as it comes so that no process holds every message at once (LeNet-5's are 4.3 GB for
    /// 10.8 GB of keys); the server checks each against the program as it forwards it.
    fn key_message(&self, session: u64, message: Vec<u8>) -> Result<()>;
    /// Every key message of `session` has been forwarded and checked: the workers finish
    /// taking the keys (errors: no worker could).
    fn keys_complete(&self, session: u64) -> Result<()>;
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

fn parse(ctx: &lycaon_ckks::CkksContext, name: &str, bytes: &[u8]) -> Result<Ciphertext> {
    Ciphertext::from_bytes(ctx, bytes).map_err(|e| RuntimeError::Protocol(format!("ciphertext '{name}': {e}")))
}

impl FheExecutable {
    /// [`FheExecutable::run`] with its work on `fanout`'s `workers` workers, which hold
    /// `session`'s keys; the server itself (`local`: its session, which holds no evaluation
    /// key) only adds terms. The same operations on the same ciphertexts, so the same output
    /// bit for bit. `progress` is called after every step.
    pub fn run_on(
        &self,
        fanout: &dyn FheFanout,
        session: u64,
        workers: usize,
        local: &SessionKeys,
        inputs: Vec<Ciphertext>,
        progress: &mut dyn FnMut(usize, usize, &str),
    ) -> Result<(Ciphertext, FheRunStats)> {
        let p = self.program();
        let names = p.input_names()?;
        self.check_inputs(&inputs)?;
        let mut values: HashMap<String, Vec<u8>> = names.into_iter().zip(inputs.iter().map(Ciphertext::to_bytes)).collect();
        drop(inputs);
        let late = std::sync::atomic::AtomicU64::new(0);
        let mut stats = FheRunStats::default();
        let (total, mut done) = (p.ops.len(), 0);
        let steps = self.schedule(workers);
        // The tensors each step's successors read from the server.
        let reads = |step: &FheStep| -> Vec<String> {
            step.batches.iter().flat_map(|b| b.inputs.iter().cloned()).chain(step.local.iter().flat_map(|&u| self.reads_writes(u).0)).collect()
        };
        let mut needed_after: Vec<HashSet<String>> = vec![HashSet::new(); steps.len()];
        for s in (0..steps.len().saturating_sub(1)).rev() {
            let mut next = needed_after[s + 1].clone();
            next.extend(reads(&steps[s + 1]));
            needed_after[s] = next;
        }
        for (s, step) in steps.into_iter().enumerate() {
            let mut last = String::new();
            // A batch is given its inputs as the step begins (a sum of the same wave writes
            // nothing the batch reads, but the order is one machine's either way).
            let batches = step
                .batches
                .into_iter()
                .map(|b| {
                    let given = b.inputs.iter().map(|t| values.get(t).cloned().ok_or_else(|| invalid(format!("a batch reads '{t}', which is not live")))).collect::<Result<Vec<_>>>()?;
                    Ok((b, given))
                })
                .collect::<Result<Vec<_>>>()?;
            for &unit in &step.local {
                let Unit::Finish(i) = unit else { return Err(invalid("the server runs only the sums of terms")) };
                let terms = self.reads_writes(unit).0.iter().map(|t| parse(self.context(), t, values.get(t).ok_or_else(|| invalid(format!("term '{t}' is not live")))?)).collect::<Result<Vec<_>>>()?;
                let t0 = std::time::Instant::now();
                let y = self.finish(local, i, terms, &late)?;
                stats.conv_s += t0.elapsed().as_secs_f64();
                values.insert(p.ops[i].output.clone(), y.to_bytes());
                stats.ops.push((p.ops[i].name.clone(), t0.elapsed().as_secs_f64()));
                (done, last) = (done + 1, p.ops[i].name.clone());
            }
            if !batches.is_empty() {
                let wanted: Vec<(Vec<String>, Vec<Unit>)> = batches.iter().map(|(b, _)| (b.outputs.clone(), b.units.clone())).collect();
                let answers = fanout.run(session, batches)?;
                if answers.len() != wanted.len() {
                    return Err(RuntimeError::Cluster(format!("the workers answered {} batches of {}", answers.len(), wanted.len())));
                }
                for ((names, units), (outputs, part)) in wanted.into_iter().zip(answers) {
                    if outputs.len() != names.len() {
                        return Err(RuntimeError::Cluster(format!("a worker returned {} ciphertexts for {} wanted", outputs.len(), names.len())));
                    }
                    values.extend(names.into_iter().zip(outputs));
                    merge(&mut stats, part);
                    for u in units {
                        if let Unit::Op(i) = u {
                            (done, last) = (done + 1, p.ops[i].name.clone());
                        }
                    }
                }
            }
            // What no later step reads goes.
            values.retain(|t, _| t == &p.output || needed_after[s].contains(t.as_str()));
            progress(done, total, &last);
        }
        stats.late_encodings += late.into_inner();
        let out = values.remove(&p.output).ok_or_else(|| invalid(format!("the output '{}' was never written", p.output)))?;
        Ok((parse(self.context(), &p.output, &out)?, stats))
    }

    /// A worker's part of [`Self::run_on`]: the batch's units in order on its given ciphertexts.
    pub fn run_batch(&self, keys: &SessionKeys, batch: &FheBatch, inputs: &[Vec<u8>]) -> Result<(Vec<Vec<u8>>, FheRunStats)> {
        let p = self.program();
        if inputs.len() != batch.inputs.len() {
            return Err(RuntimeError::Protocol(format!("a batch names {} input ciphertexts and brings {}", batch.inputs.len(), inputs.len())));
        }
        for &u in &batch.units {
            let ok = match u {
                Unit::Op(i) => i < p.ops.len(),
                Unit::Term(i, k) => i < p.ops.len() && self.split_terms(i).is_some_and(|parts| parts.contains(&k)),
                Unit::Finish(i) => i < p.ops.len() && self.split_terms(i).is_some(),
            };
            if !ok {
                return Err(RuntimeError::Protocol(format!("a batch runs {u:?}, which this program does not have")));
            }
        }
        let ctx = self.context();
        let mut values = HashMap::with_capacity(inputs.len());
        for (name, bytes) in batch.inputs.iter().zip(inputs) {
            values.insert(name.clone(), parse(ctx, name, bytes)?);
        }
        // Each tensor goes after the batch's last unit that reads it, unless the batch returns it.
        let mut last: HashMap<String, usize> = HashMap::new();
        for (pos, &u) in batch.units.iter().enumerate() {
            for t in self.reads_writes(u).0 {
                last.insert(t, pos);
            }
        }
        for t in &batch.outputs {
            last.remove(t);
        }
        let late = std::sync::atomic::AtomicU64::new(0);
        let mut stats = FheRunStats::default();
        let keep = HashMap::new();
        for (pos, &u) in batch.units.iter().enumerate() {
            match u {
                Unit::Op(i) => self.step_with(keys, i, &mut values, &late, &mut stats, &keep)?,
                Unit::Term(i, k) => {
                    let input = &p.ops[i].inputs[k];
                    let x = values.get(input).ok_or_else(|| invalid(format!("a term reads '{input}', which is not live")))?;
                    let t0 = std::time::Instant::now();
                    let y = self.term(keys, i, k, x, &mut stats)?;
                    stats.ops.push((format!("{}~{k}", p.ops[i].name), t0.elapsed().as_secs_f64()));
                    values.insert(term_name(&p.ops[i].output, k), y);
                }
                Unit::Finish(i) => {
                    let terms = self.reads_writes(u).0.iter().map(|t| values.get(t).cloned().ok_or_else(|| invalid(format!("term '{t}' is not live")))).collect::<Result<Vec<_>>>()?;
                    values.insert(p.ops[i].output.clone(), self.finish(keys, i, terms, &late)?);
                }
            }
            values.retain(|t, _| last.get(t).is_none_or(|&l| l > pos));
        }
        stats.late_encodings = late.into_inner();
        let outputs = batch
            .outputs
            .iter()
            .map(|t| values.get(t).map(Ciphertext::to_bytes).ok_or_else(|| invalid(format!("a batch returns '{t}', which its units never wrote"))))
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

    /// Takes `session`'s keys from the client's messages ([`FheFanout::key_message`]); returns
    /// their size in memory.
    pub fn add_keys(&self, session: u64, messages: &[Vec<u8>]) -> Result<usize> {
        let mut it = messages.iter();
        let size = self.add_keys_from(session, &mut |_| Ok(it.next().cloned()))?;
        if it.next().is_some() {
            return Err(RuntimeError::Protocol("more key messages than the key header announces".into()));
        }
        Ok(size)
    }

    /// [`Self::add_keys`] from a source that gives one message at a time (None when there are
    /// no more), so that only one message is held beside the parsed keys (ResNet-20's are
    /// 4.3 GB of messages for 10.8 GB of keys).
    pub fn add_keys_from(&self, session: u64, next: &mut dyn FnMut(&str) -> Result<Option<Vec<u8>>>) -> Result<usize> {
        let mut next = |what: &str| next(what)?.ok_or_else(|| RuntimeError::Protocol(format!("the key messages end before {what}")));
        let (keys, accepted) = parse_keys(&self.exe, &mut next, KeyUse::Evaluate { prepare_host: true })?;
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
