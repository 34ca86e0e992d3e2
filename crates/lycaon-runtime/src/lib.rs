//! Executes a plan: the client and server sessions of private inference in both modes (DESIGN.md),
//! over TCP or in memory, on the device [`Device`] chooses. The FHE mode is in [`fhe`]; what
//! follows describes the hybrid mode.
//!
//! A [`Program`] is the public description of a quantised network (architecture, the planned
//! algorithm and BFV parameters of every linear layer, truncation shifts); the server adds its
//! [`Weights`]. A session runs the program on additive shares modulo each layer's plaintext
//! prime: linear layers under BFV on the server (the client's share encrypted, the server's share
//! added in the clear, a fresh mask subtracted, the response re-randomised and flooded), and
//! truncation, ReLU and max-pooling as two-party protocols (`lycaon-mpc`). Only the client ever
//! holds a secret key; the server sees ciphertexts and its own uniformly masked shares.

pub mod ckks_bench;
pub mod device;
pub mod fanout;
pub mod fhe;
pub mod hello;
pub mod linear;
pub mod program;
pub mod resident_bench;
pub mod server;
pub mod session;
mod wire;

pub use device::Device;
pub use hello::Mode;
/// The kernels' interface; [`Device::backend`] gives the one to use.
pub use lycaon_backend::Backend;
pub use program::{Op, OpKind, Program, Reveal, Weights};
pub use server::{Served, Server, ServerOptions};
pub use session::{ClientOutcome, LayerRecord, SessionOptions};

/// Errors of a session, each naming what is wrong. Nothing secret is ever put into one.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("invalid program: {0}")]
    Program(String),
    #[error("invalid weights: {0}")]
    Weights(String),
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("the server refused the session: {0}")]
    Refused(String),
    #[error(transparent)]
    Mpc(#[from] lycaon_mpc::MpcError),
    #[error(transparent)]
    Nn(#[from] lycaon_nn::NnError),
    #[error(transparent)]
    Bfv(#[from] lycaon_bfv::BfvError),
    #[error(transparent)]
    Plan(#[from] lycaon_plan::PlanError),
    #[error("FHE evaluation: {0}")]
    Fhe(String),
    #[error("invalid model graph: {0}")]
    Graph(String),
    #[error("cannot compile for the FHE mode: {0}")]
    Compile(String),
    #[error(transparent)]
    Device(#[from] device::DeviceError),
    #[error("the cluster: {0}")]
    Cluster(String),
}

impl From<lycaon_bfv::rlwe::RlweError> for RuntimeError {
    fn from(e: lycaon_bfv::rlwe::RlweError) -> Self {
        Self::Bfv(e.into())
    }
}

impl From<lycaon_math::MathError> for RuntimeError {
    fn from(e: lycaon_math::MathError) -> Self {
        Self::Bfv(e.into())
    }
}

pub type Result<T> = std::result::Result<T, RuntimeError>;

/// The link model of a name the planner knows (`lan`, `wan`, `2gbps`, `100mbps,10ms`) or `none`
/// (no emulation).
pub fn link_model(text: &str) -> Result<lycaon_mpc::LinkModel> {
    if text.trim().eq_ignore_ascii_case("none") {
        return Ok(lycaon_mpc::LinkModel::UNLIMITED);
    }
    let link = lycaon_plan::costs::Link::parse(text)?;
    Ok(lycaon_mpc::LinkModel::new(Some(link.bandwidth_bits_per_s / 8.0), std::time::Duration::from_secs_f64(link.one_way_delay_s))?)
}
