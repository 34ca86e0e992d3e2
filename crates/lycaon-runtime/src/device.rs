//! The choice of device: the only place above the backend that knows the CUDA backend exists
//! (DESIGN.md, layer 7). Everything here works without a GPU: a build without the `cuda`
//! feature, or a machine without a device, reports why through [`probe`].

pub use lycaon_cuda::{bench, probe, CudaBackend, BUILT_WITH_CUDA};
