//! Ring-LWE layer shared by BFV and CKKS.
pub mod wire;
