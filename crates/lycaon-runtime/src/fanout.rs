//! A hybrid server's linear layers evaluated by workers in other processes or on other machines
//! (a Ray cluster: ../DESIGN.md, "Growing past one machine").
//!
//! The server decodes a layer's request and adds its own share as it does alone, then hands the
//! input ciphertexts to a [`Fanout`]. The fanout splits the layer's output units
//! ([`lycaon_nn::LinearPlan::output_units`]: each one output ciphertext, computed from all the
//! inputs, or the whole layer as one unit) over its workers. Each worker answers its outputs as
//! the server does alone (`ServerLayer::answer`): subtracts a mask drawn from a fresh seed,
//! re-randomises with the session's public key, floods, switches to level 0 and cuts the
//! response for the wire; it returns the responses and the seed. The server gathers the
//! responses in order and rebuilds its share of the output from the seeds. So the client sees the
//! same protocol, the heavy work and the answering both spread over the workers, and what comes
//! back is the response (a few times smaller than the output ciphertexts). Workers belong to the
//! server's side: they hold the session's public material (public key, Galois keys) and the
//! masks' seeds, never a secret key.
//!
//! A [`LinearWorker`] holds the program's integer weights (prepared per unit at each evaluation)
//! and, per session, the public key and Galois keys of the layers in flight: they reach it as
//! the client sends them, once per worker, and go when the server drops them.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use lycaon_bfv::rlwe::{GaloisKeys, PublicKey, SeededCiphertext};
use lycaon_bfv::{BfvContext, Evaluator};
use lycaon_math::{Sampler, Seed};
use lycaon_nn::harness::LayoutCodec;
use rayon::prelude::*;

use crate::linear::ServerLayer;
use crate::program::{CompiledProgram, OpKind};
use crate::{Program, Result, RuntimeError, SessionOptions, Weights};

/// The `element` under which a fanout passes a session's public key for a parameter set (Galois
/// elements are odd, so 0 names no Galois key).
pub const PUBLIC_KEY: u64 = 0;

/// A worker's answer for a range of output units: the responses to their output ciphertexts, in
/// order, and the seed of the masks they carry (`linear::output_mask`, stream = the output
/// ciphertext's index in the layer).
#[derive(Clone, Debug)]
pub struct Answered {
    pub mask_seed: Seed,
    pub responses: Vec<Vec<u8>>,
}

/// Where a server's linear layers run when they do not run in its own process. Calls come from
/// the session threads, several sessions at once; `session` tells them apart.
pub trait Fanout: Send + Sync {
    /// The client of `session` sent the Galois key of `element` for parameter set `set`, or its
    /// public key for that set when `element` is [`PUBLIC_KEY`] (`message` as the client sent
    /// it: one key).
    fn key_arrived(&self, session: u64, set: usize, element: u64, message: &[u8]) -> Result<()>;
    /// No later layer of `session` uses that key.
    fn key_departed(&self, session: u64, set: usize, element: u64) -> Result<()>;
    /// The answers of linear layer `layer`, all `units` of it in order of their ranges, from its
    /// serialised input ciphertexts (the client's seeded ones, the server's share added). Ranges
    /// best start at multiples of `block` ([`lycaon_nn::LinearPlan::unit_block`]).
    fn evaluate(&self, session: u64, layer: &str, units: usize, block: usize, inputs: Vec<Vec<u8>>) -> Result<Vec<Answered>>;
    /// The session is over (finished or failed): drop what it left.
    fn session_ended(&self, session: u64);
}

/// A session's use of a [`Fanout`] for one layer.
pub struct Remote<'a> {
    pub fanout: &'a dyn Fanout,
    pub session: u64,
    pub layer: &'a str,
}

/// A session's public material for one parameter set on a worker.
#[derive(Clone)]
struct SessionKeys {
    public: Option<Arc<PublicKey>>,
    galois: Arc<GaloisKeys>,
}

/// What a worker process keeps: the program's linear layers with their integer weights, and per
/// session and parameter set the public key and Galois keys of the layers in flight.
pub struct LinearWorker {
    compiled: CompiledProgram,
    layers: HashMap<String, ServerLayer>,
    /// Per parameter set.
    evaluators: Vec<Evaluator>,
    codecs: Vec<LayoutCodec>,
    keys: Mutex<HashMap<(u64, usize), SessionKeys>>,
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
        let codecs = compiled.param_sets.iter().map(|(_, p, _)| Ok(LayoutCodec::new(p)?)).collect::<Result<Vec<_>>>()?;
        Ok(Self { compiled, layers, evaluators, codecs, keys: Mutex::new(HashMap::new()) })
    }

    fn keys(&self) -> Result<std::sync::MutexGuard<'_, HashMap<(u64, usize), SessionKeys>>> {
        self.keys.lock().map_err(|_| RuntimeError::Protocol("a worker's key store was poisoned by a failed evaluation".into()))
    }

    /// Takes one key of a session: the client's message holding exactly the Galois key of
    /// `element`, or its public key when `element` is [`PUBLIC_KEY`].
    pub fn add_key(&self, session: u64, set: usize, element: u64, message: &[u8]) -> Result<()> {
        let (_, params, _) = self.compiled.param_sets.get(set).ok_or_else(|| RuntimeError::Protocol(format!("no parameter set {set} in the program")))?;
        let mut keys = self.keys()?;
        let held = keys.entry((session, set)).or_insert_with(|| SessionKeys { public: None, galois: Arc::new(GaloisKeys::empty(params)) });
        if element == PUBLIC_KEY {
            held.public = Some(Arc::new(PublicKey::from_bytes(params, message).map_err(|e| RuntimeError::Protocol(format!("public key: {e}")))?));
            return Ok(());
        }
        let key = GaloisKeys::from_bytes(params, message).map_err(|e| RuntimeError::Protocol(format!("Galois key {element}: {e}")))?;
        if key.len() != 1 || key.get(element).is_none() {
            return Err(RuntimeError::Protocol(format!("expected the Galois key of element {element} alone")));
        }
        Arc::make_mut(&mut held.galois).merge(key)?;
        Ok(())
    }

    pub fn drop_key(&self, session: u64, set: usize, element: u64) -> Result<()> {
        if let Some(held) = self.keys()?.get_mut(&(session, set)) {
            match element {
                PUBLIC_KEY => held.public = None,
                _ => drop(Arc::make_mut(&mut held.galois).remove(element)),
            }
        }
        Ok(())
    }

    pub fn end_session(&self, session: u64) -> Result<()> {
        self.keys()?.retain(|&(s, _), _| s != session);
        Ok(())
    }

    /// The keys of `session` this worker holds, as (parameter set, Galois element or
    /// [`PUBLIC_KEY`]) (a fanout whose worker was restarted sends what is missing).
    pub fn held_keys(&self, session: u64) -> Result<Vec<(usize, u64)>> {
        let keys = self.keys()?;
        Ok(keys
            .iter()
            .filter(|((s, _), _)| *s == session)
            .flat_map(|(&(_, set), k)| k.public.iter().map(move |_| (set, PUBLIC_KEY)).chain(k.galois.galois_elements().map(move |g| (set, g))))
            .collect())
    }

    /// Keys (public and Galois) held over all sessions.
    pub fn keys_held(&self) -> Result<usize> {
        Ok(self.keys()?.values().map(|k| k.galois.len() + usize::from(k.public.is_some())).sum())
    }

    /// Output units `units` of linear layer `layer` on serialised input ciphertexts, answered:
    /// the responses to their output ciphertexts, in order, with their masks' seed (fresh from
    /// the operating system).
    pub fn evaluate(&self, session: u64, layer: &str, units: Range<usize>, inputs: &[Vec<u8>]) -> Result<Answered> {
        let server_layer = self.layers.get(layer).ok_or_else(|| RuntimeError::Protocol(format!("no linear layer '{layer}' in the program")))?;
        let step = &self.compiled.linear[layer];
        let inputs = inputs
            .par_iter()
            .enumerate()
            .map(|(k, b)| {
                let seeded = SeededCiphertext::from_bytes(&step.params, b).map_err(|e| RuntimeError::Protocol(format!("linear '{layer}': input ciphertext {k}: {e}")))?;
                Ok(seeded.expand(&step.params)?)
            })
            .collect::<Result<Vec<_>>>()?;
        let held = self.keys()?.get(&(session, step.set)).cloned();
        let (public, galois) = match held {
            Some(SessionKeys { public: Some(public), galois }) => (public, galois),
            _ => return Err(RuntimeError::Protocol(format!("linear '{layer}': this worker holds no public key of session {session} for parameter set {}", step.set))),
        };
        let first = units.start;
        let eval = &self.evaluators[step.set];
        let outputs = server_layer.evaluate_units(step, eval, galois, &inputs, units.clone())?;
        if step.plan.output_units() > 1 && outputs.len() != units.len() {
            return Err(RuntimeError::Program(format!("linear '{layer}': units {units:?} gave {} output ciphertexts, not one each", outputs.len())));
        }
        drop(inputs);
        let mask_seed = Sampler::from_os()?.seed();
        let answered = server_layer.answer(step, eval, &self.codecs[step.set], &public, &outputs, first, &mask_seed)?;
        Ok(Answered { mask_seed, responses: answered.into_iter().map(|(bytes, _)| bytes).collect() })
    }
}
