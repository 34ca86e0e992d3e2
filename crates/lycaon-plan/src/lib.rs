//! Cost models that never hold a key: the packing, dataflow and accelerator simulator.

pub mod simulate;
