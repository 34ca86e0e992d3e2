//! Serving with every tensor, key and plaintext of a session resident on a device: the session's
//! evaluation keys are uploaded once, each query's input ciphertexts are uploaded, the program runs
//! on a [`ResidentEvaluator`] (lycaon-nn's layers and the bootstrapper are generic over it), and
//! only the output comes back to be re-randomised and flooded on the host. The results equal the
//! host path's bit for bit (the layers' and the bootstrapper's conformance tests).

use std::sync::Arc;

use lycaon_backend::ResidentBackend;
use lycaon_ckks::{Ciphertext, ResidentEvaluator};

use super::executor::{FheExecutable, FheRunStats, SessionKeys};
use crate::device::{Device, DeviceError};
use crate::{Result, RuntimeError};

fn ckks(e: lycaon_ckks::CkksError) -> RuntimeError {
    RuntimeError::Fhe(e.to_string())
}

/// Where a served program keeps its sessions.
#[derive(Clone)]
pub enum ResidentDevice {
    /// Resident memory on the host: the reference implementation of the resident path (tests,
    /// and a check of the path on machines without a GPU).
    Host,
    /// A CUDA device (this build has the `cuda` feature).
    #[cfg(feature = "cuda")]
    Cuda(Arc<lycaon_cuda::CudaBackend>),
}

impl std::fmt::Debug for ResidentDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Host => write!(f, "ResidentDevice::Host"),
            #[cfg(feature = "cuda")]
            Self::Cuda(b) => write!(f, "ResidentDevice::Cuda({})", lycaon_backend::Backend::name(b.as_ref())),
        }
    }
}

impl ResidentDevice {
    /// The resident device for `device`: None for the CPU (host polynomials), the CUDA backend
    /// for `Cuda(n)`. Errors: [`DeviceError::Unavailable`] when this build or machine has no such
    /// device.
    pub fn for_device(device: Device) -> Result<Option<Self>> {
        match device {
            Device::Cpu => Ok(None),
            Device::Cuda(ordinal) => {
                #[cfg(feature = "cuda")]
                {
                    let backend = lycaon_cuda::CudaBackend::new(ordinal).map_err(|reason| DeviceError::Unavailable { device, reason })?;
                    Ok(Some(Self::Cuda(Arc::new(backend))))
                }
                #[cfg(not(feature = "cuda"))]
                {
                    let _ = ordinal;
                    Err(DeviceError::Unavailable { device, reason: lycaon_cuda::CudaError::NotBuilt }.into())
                }
            }
        }
    }

    /// A session on this device with the keys the host received (uploaded now).
    pub fn session(&self, exe: &FheExecutable, keys: &SessionKeys) -> Result<Box<dyn ResidentRun>> {
        match self {
            Self::Host => ResidentSession::<lycaon_backend::CpuBackend>::start(exe, keys, Arc::new(lycaon_backend::CpuBackend)),
            #[cfg(feature = "cuda")]
            Self::Cuda(backend) => ResidentSession::start(exe, keys, backend.clone()),
        }
    }
}

/// One session's program runs on a resident device.
pub trait ResidentRun: Send {
    /// Uploads the inputs, runs the program, downloads the output.
    fn run(&self, exe: &FheExecutable, inputs: Vec<Ciphertext>, progress: &mut dyn FnMut(usize, usize, &str)) -> Result<(Ciphertext, FheRunStats)>;
}

struct ResidentSession<B: ResidentBackend + 'static> {
    keys: SessionKeys<ResidentEvaluator<B>>,
}

impl<B: ResidentBackend + 'static> ResidentSession<B> {
    fn start(exe: &FheExecutable, keys: &SessionKeys, backend: Arc<B>) -> Result<Box<dyn ResidentRun>> {
        let host = keys.ops.evaluator();
        let mut eval = ResidentEvaluator::new(exe.context(), backend, host.keys()).map_err(ckks)?;
        if let Some(e) = &keys.encapsulation {
            eval.attach_encapsulation_keys(e).map_err(ckks)?;
        }
        Ok(Box::new(ResidentSession { keys: SessionKeys::new(eval, keys.encapsulation.clone()) }))
    }
}

impl<B: ResidentBackend + 'static> ResidentRun for ResidentSession<B> {
    fn run(&self, exe: &FheExecutable, inputs: Vec<Ciphertext>, progress: &mut dyn FnMut(usize, usize, &str)) -> Result<(Ciphertext, FheRunStats)> {
        let eval = self.keys.ops.evaluator();
        let inputs = inputs.iter().map(|c| eval.upload(c)).collect::<std::result::Result<Vec<_>, _>>().map_err(ckks)?;
        let (out, stats) = exe.run(&self.keys, inputs, progress)?;
        Ok((eval.download(&out).map_err(ckks)?, stats))
    }
}
