//! The packing, dataflow and accelerator simulator of HEPack-Sim (000) and the 003 design space.

pub mod accelerator;
pub mod bfv;
pub mod dse;
pub mod models;
pub mod packing;
mod run;

pub use run::{batch_study, reproduction, reproduction_json, simulate, simulate_json, simulate_with, LayerResult, ReproductionRow, SimResult, TOLERANCE};
