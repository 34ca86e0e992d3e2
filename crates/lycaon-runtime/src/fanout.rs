//! A hybrid server's linear layers evaluated by workers in other processes or on other machines
//! (a Ray cluster: ../DESIGN.md, "Growing past one machine").
//!
//! The server decodes a layer's request and adds its own share as it does alone, then hands the
//! input ciphertexts to a [`Fanout`]. The fanout splits the layer's output units
//! ([`lycaon_nn::LinearPlan::output_units`]: output ciphertexts or groups of them, each computed
//! from all the inputs) over its workers and gathers their output ciphertexts in order. The server
//! masks, re-randomises, floods and sends them as it does alone, so a worker never sees a
//! share, a mask or a key other than the session's Galois keys, and the client sees the same
//! protocol. A [`LinearWorker`] holds the program's integer weights (prepared per unit at each
//! evaluation) and, per session, the Galois keys of the layers in flight: they reach it as the
//! client sends them, once per worker, and go when the server drops them.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use lycaon_bfv::rlwe::{Ciphertext, GaloisKeys};
use lycaon_bfv::{BfvContext, Evaluator};

use crate::linear::ServerLayer;
use crate::program::{CompiledProgram, OpKind};
use crate::{Program, Result, RuntimeError, SessionOptions, Weights};

/// Where a server's linear layers run when they do not run in its own process. Calls come from
/// the session threads, several sessions at once; `session` tells them apart.
pub trait Fanout: Send + Sync {
    /// The client of `session` sent the Galois key of `element` for parameter set `set`
    /// (`message` as the client sent it: one key).
    fn key_arrived(&self, session: u64, set: usize, element: u64, message: &[u8]) -> Result<()>;
    /// No later layer of `session` uses that key.
    fn key_departed(&self, session: u64, set: usize, element: u64) -> Result<()>;
    /// The serialised output ciphertexts of linear layer `layer`, all `units` of it in order,
    /// from its serialised input ciphertexts (the client's, the server's share added).
    fn evaluate(&self, session: u64, layer: &str, units: usize, inputs: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>>;
    /// The session is over (finished or failed): drop what it left.
    fn session_ended(&self, session: u64);
}

/// A session's use of a [`Fanout`] for one layer.
pub struct Remote<'a> {
    pub fanout: &'a dyn Fanout,
    pub session: u64,
    pub layer: &'a str,
}

/// What a worker process keeps: the program's linear layers with their integer weights, and per
/// session and parameter set the Galois keys of the layers in flight.
pub struct LinearWorker {
    compiled: CompiledProgram,
    layers: HashMap<String, ServerLayer>,
    evaluators: Vec<Evaluator>,
    keys: Mutex<HashMap<(u64, usize), Arc<GaloisKeys>>>,
}

impl LinearWorker {
    /// The server's program and weights, with the server's session options (the evaluation
    /// level of each layer follows from them as on the server). Nothing is prepared: each
    /// evaluation prepares the weights of its units only.
    pub fn new(program: Program, weights: &Weights, options: SessionOptions) -> Result<Self> {
        let compiled = program.compile()?;
        compiled.check_weights(weights)?;
        let mut layers = HashMap::new();
        for op in compiled.program.ops.iter().filter(|op| matches!(op.kind, OpKind::Linear { .. })) {
            let (name, step) = (&op.name, &compiled.linear[&op.name]);
            let (w, b) = &weights.layers[name];
            layers.insert(name.clone(), ServerLayer::new(name, step, w, b.clone(), options.flood_bits, options.failure_probability, &mut 0)?);
        }
        let evaluators = compiled.param_sets.iter().map(|(_, p, _)| Ok(Evaluator::new(&BfvContext::new(p)?))).collect::<Result<Vec<_>>>()?;
        Ok(Self { compiled, layers, evaluators, keys: Mutex::new(HashMap::new()) })
    }

    fn keys(&self) -> Result<std::sync::MutexGuard<'_, HashMap<(u64, usize), Arc<GaloisKeys>>>> {
        self.keys.lock().map_err(|_| RuntimeError::Protocol("a worker's key store was poisoned by a failed evaluation".into()))
    }

    /// Takes one Galois key of a session (the client's message: exactly the key of `element`).
    pub fn add_key(&self, session: u64, set: usize, element: u64, message: &[u8]) -> Result<()> {
        let (_, params, _) = self.compiled.param_sets.get(set).ok_or_else(|| RuntimeError::Protocol(format!("no parameter set {set} in the program")))?;
        let key = GaloisKeys::from_bytes(params, message).map_err(|e| RuntimeError::Protocol(format!("Galois key {element}: {e}")))?;
        if key.len() != 1 || key.get(element).is_none() {
            return Err(RuntimeError::Protocol(format!("expected the Galois key of element {element} alone")));
        }
        let mut keys = self.keys()?;
        let held = keys.entry((session, set)).or_insert_with(|| Arc::new(GaloisKeys::empty(params)));
        Arc::make_mut(held).merge(key)?;
        Ok(())
    }

    pub fn drop_key(&self, session: u64, set: usize, element: u64) -> Result<()> {
        if let Some(held) = self.keys()?.get_mut(&(session, set)) {
            Arc::make_mut(held).remove(element);
        }
        Ok(())
    }

    pub fn end_session(&self, session: u64) -> Result<()> {
        self.keys()?.retain(|&(s, _), _| s != session);
        Ok(())
    }

    /// The Galois elements of `session` this worker holds, per parameter set (a fanout whose
    /// worker was restarted sends what is missing).
    pub fn held_keys(&self, session: u64) -> Result<Vec<(usize, u64)>> {
        let keys = self.keys()?;
        Ok(keys.iter().filter(|((s, _), _)| *s == session).flat_map(|(&(_, set), k)| k.galois_elements().map(move |g| (set, g))).collect())
    }

    /// Galois keys held over all sessions.
    pub fn keys_held(&self) -> Result<usize> {
        Ok(self.keys()?.values().map(|k| k.len()).sum())
    }

    /// Output units `units` of linear layer `layer` on serialised input ciphertexts: their
    /// serialised output ciphertexts, in order.
    pub fn evaluate(&self, session: u64, layer: &str, units: Range<usize>, inputs: &[Vec<u8>]) -> Result<Vec<Vec<u8>>> {
        let server_layer = self.layers.get(layer).ok_or_else(|| RuntimeError::Protocol(format!("no linear layer '{layer}' in the program")))?;
        let step = &self.compiled.linear[layer];
        let inputs = inputs
            .iter()
            .enumerate()
            .map(|(k, b)| Ciphertext::from_bytes(&step.params, b).map_err(|e| RuntimeError::Protocol(format!("linear '{layer}': input ciphertext {k}: {e}"))))
            .collect::<Result<Vec<_>>>()?;
        let galois = match step.plan.galois_elements().iter().any(|&g| g != 1) {
            true => self.keys()?.get(&(session, step.set)).cloned().ok_or_else(|| {
                RuntimeError::Protocol(format!("linear '{layer}': this worker holds no Galois keys of session {session} for parameter set {}", step.set))
            })?,
            false => Arc::new(GaloisKeys::empty(&step.params)),
        };
        let outputs = server_layer.evaluate_units(step, &self.evaluators[step.set], galois, &inputs, units)?;
        Ok(outputs.iter().map(Ciphertext::to_bytes).collect())
    }
}
