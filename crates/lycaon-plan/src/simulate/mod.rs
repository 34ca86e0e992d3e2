//! The packing, dataflow and accelerator simulator of HEPack-Sim (000) and the 003 design space.

pub mod accelerator;
pub mod dse;
pub mod models;
pub mod packing;
