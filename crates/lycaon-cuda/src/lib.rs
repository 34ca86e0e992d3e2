//! A CUDA backend for Lycaon: the hot kernels of [`lycaon_backend::Backend`] (batched negacyclic
//! NTT/INTT over all RNS limbs, point-wise products, automorphisms in NTT form, approximate and
//! centred base conversion, the key-switching inner product) as CUDA C kernels (kernels/*.cu)
//! compiled at run time by NVRTC and run through the CUDA driver.
//!
//! Features:
//! - none (default): a stub. [`CudaBackend::new`] always errors with [`CudaError::NotBuilt`], and
//!   nothing CUDA-related is compiled or linked.
//! - `cuda`: the real backend, over cudarc with the driver and NVRTC loaded at run time (builds
//!   without a CUDA toolkit; needs a driver, NVRTC and a device only to run).
//! - `emulate`: test harness; the same kernel sources compiled as host C++ and run one grid thread
//!   at a time ([`EmulatedBackend`]), compared bit for bit with `CpuBackend`.
//!
//! Status: the kernels' arithmetic and all host code are verified by the emulation. NOTHING HERE
//! HAS EVER RUN ON A GPU; see implementation_notes/cuda.md for what remains to check on one.

pub mod bench;
pub mod kernels;
pub mod pool;

#[cfg(any(feature = "cuda", feature = "emulate"))]
pub mod host;
#[cfg(any(feature = "cuda", feature = "emulate"))]
mod resident;

#[cfg(feature = "emulate")]
mod emulated;
#[cfg(feature = "emulate")]
pub use emulated::{EmulatedBackend, EmulatedExec};

#[cfg(feature = "cuda")]
mod device;
#[cfg(feature = "cuda")]
pub use device::{CudaBackend, CudaExec};

/// Whether this build contains the CUDA backend (the `cuda` feature).
pub const BUILT_WITH_CUDA: bool = cfg!(feature = "cuda");

/// Why no CUDA backend is available, or what failed while setting it up.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CudaError {
    #[error("this build has no CUDA backend: lycaon-cuda was built without the `cuda` feature")]
    NotBuilt,
    #[error("no CUDA driver found (libcuda could not be loaded)")]
    NoDriver,
    #[error("the CUDA driver is present but NVRTC (libnvrtc) could not be loaded")]
    NoNvrtc,
    #[error("no CUDA device found: device {ordinal} requested, {count} present")]
    NoDevice { ordinal: usize, count: usize },
    #[error("CUDA driver error: {0}")]
    Driver(String),
    #[error("NVRTC could not compile the kernels: {0}")]
    Compile(String),
}

/// The device a backend runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub memory_bytes: usize,
}

/// Whether device `ordinal` can be used (driver, NVRTC and device present), without compiling
/// the kernels. Without the `cuda` feature: always [`CudaError::NotBuilt`].
pub fn probe(ordinal: usize) -> Result<DeviceInfo, CudaError> {
    #[cfg(feature = "cuda")]
    {
        device::probe(ordinal)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = ordinal;
        Err(CudaError::NotBuilt)
    }
}

/// The stub in builds without the `cuda` feature: it cannot be constructed.
#[cfg(not(feature = "cuda"))]
#[derive(Debug)]
pub struct CudaBackend {
    never: std::convert::Infallible,
}

#[cfg(not(feature = "cuda"))]
impl CudaBackend {
    /// Always [`CudaError::NotBuilt`]: this build was made without the `cuda` feature.
    pub fn new(ordinal: usize) -> Result<Self, CudaError> {
        let _ = ordinal;
        Err(CudaError::NotBuilt)
    }

    pub fn device_info(&self) -> &DeviceInfo {
        match self.never {}
    }
}

#[cfg(not(feature = "cuda"))]
impl lycaon_backend::Backend for CudaBackend {
    fn name(&self) -> &str {
        match self.never {}
    }
    fn ntt(&self, _: lycaon_math::Poly<lycaon_math::Coeff>) -> Result<lycaon_math::Poly<lycaon_math::Ntt>, lycaon_math::MathError> {
        match self.never {}
    }
    fn intt(&self, _: lycaon_math::Poly<lycaon_math::Ntt>) -> Result<lycaon_math::Poly<lycaon_math::Coeff>, lycaon_math::MathError> {
        match self.never {}
    }
    fn mul_assign(&self, _: &mut lycaon_math::Poly<lycaon_math::Ntt>, _: &lycaon_math::Poly<lycaon_math::Ntt>) -> Result<(), lycaon_math::MathError> {
        match self.never {}
    }
    fn automorphism_ntt(
        &self,
        _: &lycaon_math::Poly<lycaon_math::Ntt>,
        _: &lycaon_math::Automorphism,
    ) -> Result<lycaon_math::Poly<lycaon_math::Ntt>, lycaon_math::MathError> {
        match self.never {}
    }
    fn convert_basis(
        &self,
        _: &lycaon_math::BaseConverter,
        _: &lycaon_math::Poly<lycaon_math::Coeff>,
        _: bool,
    ) -> Result<lycaon_math::Poly<lycaon_math::Coeff>, lycaon_math::MathError> {
        match self.never {}
    }
    fn inner_product(
        &self,
        _: &[lycaon_math::Poly<lycaon_math::Ntt>],
        _: &[&[lycaon_math::Poly<lycaon_math::Ntt>]],
        _: &[usize],
        _: usize,
    ) -> Result<Vec<lycaon_math::Poly<lycaon_math::Ntt>>, lycaon_math::MathError> {
        match self.never {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_the_feature_the_backend_says_why() {
        if BUILT_WITH_CUDA {
            return;
        }
        let err = CudaBackend::new(0).unwrap_err();
        assert_eq!(err, CudaError::NotBuilt);
        assert!(err.to_string().contains("built without the `cuda` feature"));
        assert_eq!(probe(0).unwrap_err(), CudaError::NotBuilt);
    }
}
