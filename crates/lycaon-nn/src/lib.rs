//! Encrypted network layers on BFV: every convolution and fully connected algorithm of the papers
//! behind one trait.
//!
//! A [`LinearPlan`] is made from a layer shape and parameters alone: it states the layout the
//! client encrypts, the layout of the result, the operation counts, the Galois keys it needs and
//! the bytes up and down, without any weight or key (the planner uses it that way). Given the
//! server's weights it becomes a [`PreparedLayer`] that evaluates on ciphertexts.
//!
//! Algorithms:
//! - [`packed::PackedConv`]: conventional packed convolution (Gazelle, Juvekar et al. 2018) with
//!   hoisted rotations, input-aligned (Sched-IA) or partial-aligned (Sched-PA, Reagen et al. 2021)
//!   schedules and optional plaintext decomposition;
//! - [`padded::PaddedConv`]: padded convolution with scalar weights (one channel per ciphertext);
//! - [`walsh::WalshConv`]: the Walsh-Hadamard convolution with output-channel packing and lazy
//!   reduction (Roh and Choi 2024);
//! - [`coeff::CoeffConv`], [`coeff::CoeffMatVec`]: coefficient-encoded convolution and
//!   matrix-vector product without rotations (Huang et al. 2022);
//! - [`diagonal::DiagonalFc`]: Halevi-Shoup diagonal fully connected layer with baby-step
//!   giant-step and hoisting;
//! - [`hyena::HyenaConv`]: Hyena packing and dataflow (Singh et al. 2024), Hyena-Pack+ with a batch;
//! - [`batchwise::BatchWiseConv`]: BatchWise-Pack and BatchWise-Pack+ (batch-axis packing).
//!
//! FHE mode (CKKS, approximate): [`fhe`] holds the multiplexed parallel convolution (Lee et al.
//! 2022) with its packing, global average pooling, a fully connected layer and residual additions.
//!
//! Everything in the BFV layers is exact: a layer decrypts to the integer convolution modulo t, times the output
//! layout's `scale` (1 for all but the Walsh-Hadamard convolution).

pub mod algorithm;
pub mod batchwise;
pub mod calibrate;
pub mod coeff;
pub mod counting;
pub mod diagonal;
pub mod fhe;
mod grid;
pub mod harness;
pub mod hyena;
pub mod layout;
pub mod noise;
pub mod packed;
pub mod padded;
pub mod shape;
pub mod walsh;

use lycaon_bfv::noise::{NoiseEstimate, NoiseModel};
use lycaon_bfv::rlwe::{Ciphertext, GaloisKeys, Parameters};
use lycaon_bfv::{BfvError, Evaluator};

pub use counting::{CountingBackend, HeOps, NttCounter, OpCounts};
pub use layout::{Encoding, Layout};
pub use noise::{Flooding, LayerNoise, ResponseDrop, ValueBounds};
pub use shape::{conv_reference, ConvShape};

/// Errors of the network layer, each naming what is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NnError {
    #[error(transparent)]
    Bfv(#[from] BfvError),
    #[error("invalid layer shape: {0}")]
    Shape(String),
    #[error("{algorithm} cannot run this layer: {reason}")]
    Unsupported { algorithm: &'static str, reason: String },
    #[error("expected {expected} {what}, got {found}")]
    Count { what: &'static str, expected: usize, found: usize },
}

impl From<lycaon_bfv::rlwe::RlweError> for NnError {
    fn from(e: lycaon_bfv::rlwe::RlweError) -> Self {
        Self::Bfv(e.into())
    }
}

impl From<lycaon_math::MathError> for NnError {
    fn from(e: lycaon_math::MathError) -> Self {
        Self::Bfv(e.into())
    }
}

/// Bytes moved and stored by one layer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LayerCost {
    /// Client to server: the input ciphertexts, seeded (c_1 replaced by a 32-byte seed).
    pub up_bytes: usize,
    /// Server to client: the output ciphertexts at the lowest level (only the coefficients that
    /// carry outputs for coefficient-encoded layers).
    pub down_bytes: usize,
    /// Galois keys the layer needs, as serialised (seeded).
    pub key_bytes: usize,
}

/// What every plan holds: its parameters, the layer and the two layouts. The layouts are shared
/// (they can hold millions of placements) so that [`LinearPlan::with_params`] copies nothing big.
#[derive(Clone, Debug)]
pub struct PlanCore {
    pub params: std::sync::Arc<Parameters>,
    pub shape: ConvShape,
    /// Where the client puts each input element.
    pub input_layout: std::sync::Arc<Layout>,
    /// Where each output element is found after decryption (and the factor it carries).
    pub output_layout: std::sync::Arc<Layout>,
}

impl PlanCore {
    pub fn new(params: &std::sync::Arc<Parameters>, shape: ConvShape, input_layout: Layout, output_layout: Layout) -> Self {
        Self { params: params.clone(), shape, input_layout: std::sync::Arc::new(input_layout), output_layout: std::sync::Arc::new(output_layout) }
    }

    /// This core under `params`, which must have the same ring degree and plaintext modulus: a
    /// plan's layouts and structure depend on those two alone, never on the ciphertext or special
    /// primes, so they carry over unchanged.
    pub fn with_params(&self, params: &std::sync::Arc<Parameters>) -> Result<Self, NnError> {
        let t = |p: &Parameters| p.plaintext_modulus().map(|t| t.value());
        if params.n() != self.params.n() || t(params) != t(&self.params) {
            return Err(NnError::Unsupported {
                algorithm: "plan re-parameterisation",
                reason: format!("the plan was built for n = {} and t = {:?}, not n = {} and t = {:?}", self.params.n(), t(&self.params), params.n(), t(params)),
            });
        }
        Ok(Self { params: params.clone(), ..self.clone() })
    }
}

/// A layer algorithm for one shape and parameter set, before any weight or key is known.
pub trait LinearPlan: Send + Sync {
    /// The algorithm's name as benchmarks print it.
    fn name(&self) -> String;
    fn core(&self) -> &PlanCore;
    fn shape(&self) -> &ConvShape {
        &self.core().shape
    }
    fn params(&self) -> &std::sync::Arc<Parameters> {
        &self.core().params
    }
    /// Where the client puts each input element.
    fn input_layout(&self) -> &Layout {
        &self.core().input_layout
    }
    /// Where each output element is found after decryption (and the factor it carries).
    fn output_layout(&self) -> &Layout {
        &self.core().output_layout
    }
    /// The same plan under other parameters with the same n and t, without rebuilding it (only
    /// the ciphertext and special primes may differ): what the planner prices many moduli
    /// chains with. Everything it reports equals what [`crate::algorithm::Algorithm::build`]
    /// under `params` would give.
    fn with_params(&self, params: &std::sync::Arc<Parameters>) -> Result<Box<dyn LinearPlan>, NnError>;
    /// The operations one evaluation performs.
    fn counts(&self) -> OpCounts;
    /// The Galois elements the server needs keys for.
    fn galois_elements(&self) -> Vec<u64>;
    /// How many lazy accumulators each input ciphertext feeds at once in the scalar
    /// multiply-accumulates (the cost model prices a wider fan-out higher: more memory traffic).
    fn scalar_mac_fanout(&self) -> usize {
        1
    }
    /// Images evaluated at once (the input is `batch` tensors one after the other).
    fn batch(&self) -> usize {
        1
    }
    /// Bytes of the server's weights in the form this algorithm evaluates with (what
    /// [`PreparedLayer::weight_bytes`] then measures).
    fn weight_bytes(&self) -> usize;
    /// Turns the server's weights (`shape().weight_len()` integers, [out][in/groups][kh][kw]) into
    /// the form the algorithm evaluates with.
    fn prepare(&self, weights: &[i64]) -> Result<Box<dyn PreparedLayer>, NnError>;
    /// Prepares and evaluates in one pass without holding every prepared weight at once, for a
    /// server that cannot keep a large layer prepared (an ImageNet layer's prepared form takes
    /// gigabytes). The same outputs as `prepare(weights)?.evaluate(ops, inputs)`; algorithms that
    /// can prepare per block of output channels override it.
    fn evaluate_streaming(&self, ops: &HeOps, inputs: &[Ciphertext], weights: &[i64]) -> Result<Vec<Ciphertext>, NnError> {
        self.prepare(weights)?.evaluate(ops, inputs)
    }
    /// Parts of the output computed apart from each other, each from all the inputs: what a
    /// server fans out over workers. Either one unit per output ciphertext (unit u is output
    /// ciphertext u) or 1, where the algorithm evaluates its outputs together.
    fn output_units(&self) -> usize {
        1
    }
    /// Consecutive units that share prepared weights: a range of units that cuts such a block
    /// prepares its weights once more, so a fanout cuts at multiples of it where it can.
    fn unit_block(&self) -> usize {
        1
    }
    /// The output ciphertexts of `units`, in order, as `evaluate_streaming` computes them: over
    /// consecutive ranges that cover `0..output_units()`, the concatenation equals its outputs.
    fn evaluate_units(&self, ops: &HeOps, inputs: &[Ciphertext], weights: &[i64], units: std::ops::Range<usize>) -> Result<Vec<Ciphertext>, NnError> {
        check_units(&units, self.output_units())?;
        if units.is_empty() {
            return Ok(Vec::new());
        }
        self.evaluate_streaming(ops, inputs, weights)
    }

    /// The noise of the output ciphertexts, from the operations `evaluate` performs, for inputs
    /// with noise `input` (as the client sends them, at the top level) and values within
    /// `bounds`; no key or weight needed. The result is taken before the final modulus switch:
    /// [`LayerNoise::practical_budget`] and [`LayerNoise::worst_case_budget`] give the budgets of
    /// the outputs as sent. Errors when `model` was made for other parameters.
    fn noise(&self, model: &NoiseModel, input: NoiseEstimate, bounds: ValueBounds) -> Result<LayerNoise, NnError>;

    /// Bytes up and down and key bytes, from the layouts and parameters.
    fn cost(&self) -> LayerCost {
        let params = self.params();
        let input = self.input_layout();
        let output = self.output_layout();
        let up = input.num_ciphertexts * layout::seeded_ciphertext_bytes(params, params.max_level());
        let down = output.down_bytes(params);
        let key_bytes = self.galois_elements().iter().filter(|&&g| g != 1).count() * layout::galois_key_bytes(params);
        LayerCost { up_bytes: up, down_bytes: down, key_bytes }
    }
}

/// A layer with its weights in the form its algorithm needs: what the server keeps in memory.
pub trait PreparedLayer: Send + Sync {
    /// Bytes of weight storage in this form.
    fn weight_bytes(&self) -> usize;
    /// Evaluates on the client's input ciphertexts and returns the outputs at the lowest level,
    /// ready to be masked and sent.
    fn evaluate(&self, ops: &HeOps, inputs: &[Ciphertext]) -> Result<Vec<Ciphertext>, NnError>;
}

/// An error unless `units` lies within `0..total`.
pub fn check_units(units: &std::ops::Range<usize>, total: usize) -> Result<(), NnError> {
    if units.start > units.end || units.end > total {
        return Err(NnError::Shape(format!("output units {units:?} asked of a layer with {total}")));
    }
    Ok(())
}

/// Runs a prepared layer without instrumentation.
pub fn evaluate(layer: &dyn PreparedLayer, eval: &Evaluator, keys: &GaloisKeys, inputs: &[Ciphertext]) -> Result<Vec<Ciphertext>, NnError> {
    layer.evaluate(&HeOps::new(eval.clone(), keys.clone()), inputs)
}
