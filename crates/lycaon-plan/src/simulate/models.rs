//! Layer specifications of the networks that 000 (HEPack-Sim) and 003 evaluate.

use serde::{Deserialize, Serialize};

/// What a linear layer computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LayerKind {
    /// A dense convolution: every output channel reads every input channel.
    Conv,
    /// A depthwise convolution: output channel `i` reads input channel `i` only.
    Depthwise,
    /// A fully connected layer: `c_out x c_in` matrix times a vector (`h = w = k = 1`).
    FullyConnected,
    /// A matrix product with a weight matrix, as GNMT's LSTM gates and attention
    /// (`c_out x c_in` matrix times a vector, repeated `count` times).
    MatMul,
}

/// One linear layer: an `h x w x c_in` input, `c_out` filters of `k x k`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerSpec {
    /// The layer's name in the network.
    pub name: String,
    /// What the layer computes.
    pub kind: LayerKind,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Input channels.
    pub c_in: usize,
    /// Output channels.
    pub c_out: usize,
    /// Filter side.
    pub k: usize,
    /// Stride.
    pub stride: usize,
    /// Zero padding on each side.
    pub pad: usize,
    /// How many times the layer runs per inference (GNMT's time steps; 1 for a CNN layer).
    #[serde(default = "one")]
    pub count: usize,
}

fn one() -> usize {
    1
}

/// A network: a name and its linear layers in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Model {
    /// The network's name.
    pub name: String,
    /// Its linear layers in order.
    pub layers: Vec<LayerSpec>,
}
