//! The choice of device: the only place above the backend that knows the CUDA backend exists
//! (DESIGN.md, layer 7). A [`Device`] names where the kernels run ("cpu", "cuda:0") and builds
//! the matching [`Backend`]; every layer below takes that backend as an `Arc<dyn Backend>` and
//! never asks which device it is. There is no current device: callers pass one.
//!
//! Everything here works without a GPU: a build without the `cuda` feature, or a machine without
//! a driver or device, gets an error from [`Device::backend`] saying which ([`probe`] reports the
//! same without compiling the kernels).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use lycaon_backend::{Backend, RayonBackend};

pub use lycaon_cuda::{bench, probe, CudaError, DeviceInfo, BUILT_WITH_CUDA};

use crate::RuntimeError;

/// Where the homomorphic kernels run. Written and parsed as PyTorch writes devices: "cpu",
/// "cuda" (device 0), "cuda:N".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Device {
    /// Every core of this machine ([`RayonBackend`], bit for bit the CPU reference).
    #[default]
    Cpu,
    /// CUDA device number N (the CUDA backend, bit for bit the CPU reference).
    Cuda(usize),
}

/// A device name that is not one, or a device that cannot be used here.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    #[error("unknown device {name:?}: expected \"cpu\", \"cuda\" or \"cuda:N\" with N a device number (\"cuda:0\")")]
    Unknown { name: String },
    #[error("device {device} is not available: {reason}")]
    Unavailable { device: Device, reason: CudaError },
}

impl Device {
    /// "cpu" -> `Cpu`; "cuda" -> `Cuda(0)`; "cuda:N" -> `Cuda(N)` for a decimal N. Surrounding
    /// whitespace is ignored; anything else is [`DeviceError::Unknown`]. Whether the device
    /// exists is checked by [`Self::backend`], not here.
    pub fn parse(name: &str) -> Result<Self, DeviceError> {
        let unknown = || DeviceError::Unknown { name: name.to_string() };
        match name.trim() {
            "cpu" => Ok(Self::Cpu),
            "cuda" => Ok(Self::Cuda(0)),
            other => {
                let ordinal = other.strip_prefix("cuda:").ok_or_else(unknown)?;
                if ordinal.is_empty() || !ordinal.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(unknown());
                }
                ordinal.parse().map(Self::Cuda).map_err(|_| unknown())
            }
        }
    }

    /// The backend that runs kernels on this device: [`RayonBackend`] for `Cpu`; for `Cuda(n)`
    /// the CUDA backend on device n, with its kernels compiled (seconds; keep the backend and
    /// share it). Errors: [`DeviceError::Unavailable`] naming why when this build has no `cuda`
    /// feature, or the driver, NVRTC or device n is missing, or the kernels fail to compile.
    pub fn backend(&self) -> Result<Arc<dyn Backend>, RuntimeError> {
        match *self {
            Self::Cpu => Ok(RayonBackend::shared()),
            Self::Cuda(ordinal) => match lycaon_cuda::CudaBackend::new(ordinal) {
                Ok(backend) => Ok(Arc::new(backend)),
                Err(reason) => Err(DeviceError::Unavailable { device: *self, reason }.into()),
            },
        }
    }
}

impl FromStr for Device {
    type Err = DeviceError;

    fn from_str(name: &str) -> Result<Self, DeviceError> {
        Self::parse(name)
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cpu => f.write_str("cpu"),
            Self::Cuda(ordinal) => write!(f, "cuda:{ordinal}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lycaon_math::{ntt_moduli, RnsBasis, Sampler};

    #[test]
    fn parses_the_names_pytorch_uses() {
        assert_eq!(Device::parse("cpu").unwrap(), Device::Cpu);
        assert_eq!(Device::parse("cuda").unwrap(), Device::Cuda(0));
        assert_eq!(Device::parse("cuda:0").unwrap(), Device::Cuda(0));
        assert_eq!(Device::parse(" cuda:12 ").unwrap(), Device::Cuda(12));
        assert_eq!("cuda:3".parse::<Device>().unwrap(), Device::Cuda(3));
        for bad in ["", "gpu", "CPU", "cuda:", "cuda:-1", "cuda:+1", "cuda:x", "cuda:0:1", "cuda0", "cpu:0", "cuda:99999999999999999999999"] {
            let err = Device::parse(bad).unwrap_err();
            assert_eq!(err, DeviceError::Unknown { name: bad.to_string() });
            assert!(err.to_string().contains("expected \"cpu\", \"cuda\" or \"cuda:N\""), "{err}");
        }
    }

    #[test]
    fn displays_as_it_parses() {
        assert_eq!(Device::Cpu.to_string(), "cpu");
        assert_eq!(Device::Cuda(0).to_string(), "cuda:0");
        assert_eq!(Device::Cuda(7).to_string(), "cuda:7");
        for device in [Device::Cpu, Device::Cuda(0), Device::Cuda(3)] {
            assert_eq!(Device::parse(&device.to_string()).unwrap(), device);
        }
        assert_eq!(Device::default(), Device::Cpu);
    }

    #[test]
    fn the_cpu_backend_runs_and_agrees_with_the_reference() {
        let backend = Device::Cpu.backend().unwrap();
        let n = 64;
        let q = ntt_moduli(&[50, 45], n, &[]).unwrap();
        let basis = RnsBasis::new(n, &q).unwrap();
        let a = Sampler::from_seed([5; 32]).uniform_poly(&basis);
        let coeff = backend.intt(a.clone()).unwrap();
        assert_eq!(coeff, a.clone().intt());
        assert_eq!(backend.ntt(coeff).unwrap(), a);
        lycaon_backend::conformance::check_backend(backend.as_ref(), 1024);
    }

    #[test]
    fn cuda_without_a_usable_device_says_why() {
        // On a machine with a usable GPU and a `cuda` build this device is real; nothing to check.
        let device = Device::Cuda(0);
        let Err(err) = device.backend() else { return };
        let RuntimeError::Device(DeviceError::Unavailable { device: named, reason }) = &err else { panic!("unexpected error {err:?}") };
        assert_eq!(*named, device);
        if let Err(why) = probe(0) {
            assert_eq!(*reason, why, "the backend and probe give the same reason");
        }
        let text = err.to_string();
        assert!(text.starts_with("device cuda:0 is not available: "), "{text}");
        assert!(text.ends_with(&reason.to_string()), "{text}");
        if !BUILT_WITH_CUDA {
            assert_eq!(*reason, CudaError::NotBuilt);
            assert!(text.contains("built without the `cuda` feature"), "{text}");
        }
        // A device number far past any machine's count is never there, in any build.
        let err = Device::Cuda(4096).backend().expect_err("no machine has 4097 GPUs");
        assert!(err.to_string().starts_with("device cuda:4096 is not available: "), "{err}");
    }
}
