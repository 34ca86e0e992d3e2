//! Cost models that never hold a key: the hybrid-mode tuner, the rotation-keyset planner, and the packing, dataflow and accelerator simulator.
//!
//! [`keyset`] plans rotation keys after 004 (Joo et al.): the rotation table of a plan and the
//! power-of-two, all-required and level-aware keysets with exact bytes and predicted latency.
//!
//! [`simulate`] models the packings and dataflows of 000 (Singh et al., "Hyena: Balancing
//! Packing, Reuse, and Rotations for Encrypted Inference", IEEE S&P 2024) on a parameterised
//! accelerator, the way the paper's HEPack-Sim does, and reproduces its headline figures.

pub mod costs;
pub mod hybrid;
pub mod keyset;
pub mod simulate;

/// Errors of the planning layer, each naming what is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("unknown model {name:?}; built-in models: {known} (or pass a layer list)")]
    UnknownModel { name: String, known: String },
    #[error("unknown packing {name:?}; known packings: {known} (or \"all\")")]
    UnknownPacking { name: String, known: String },
    #[error("unknown architecture {name:?}; built-in: hyena, f1 (or pass TOML text)")]
    UnknownArch { name: String },
    #[error("invalid architecture: {reason}")]
    InvalidArch { reason: String },
    #[error("layer {layer:?} is invalid: {reason}")]
    InvalidLayer { layer: String, reason: String },
    #[error("model {model:?} is invalid: {reason}")]
    InvalidModel { model: String, reason: String },
    #[error("cannot read the model file: {reason}")]
    ModelFile { reason: String },
    #[error("{packing} cannot pack layer {layer:?}: {reason}")]
    Unpackable { packing: String, layer: String, reason: String },
    #[error("invalid HE parameters: {reason}")]
    InvalidParams { reason: String },
    #[error("invalid batch size {batch}: {reason}")]
    InvalidBatch { batch: usize, reason: String },
    #[error("invalid simulation request: {reason}")]
    InvalidRequest { reason: String },
    #[error("invalid planning request: {0}")]
    Invalid(String),
    #[error("no feasible plan: {0}")]
    Infeasible(String),
    #[error("{0}")]
    Io(String),
    #[error("rotation step {step} is invalid: {reason}")]
    InvalidRotation { step: i64, reason: String },
    #[error("level {level} is above the top level {top} of the parameters")]
    LevelAboveTop { level: usize, top: usize },
    #[error("no key of the {keyset} keyset can realise {rotation} at level {level}: {reason}; build the keyset from this rotation table")]
    MissingRotationKey { keyset: String, rotation: String, level: usize, reason: String },
    #[error(transparent)]
    Nn(#[from] lycaon_nn::NnError),
    #[error(transparent)]
    Rlwe(#[from] lycaon_bfv::rlwe::RlweError),
}
