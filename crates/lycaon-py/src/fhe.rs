//! Bindings of the runtime's FHE mode: a program served by `HybridServer.fhe`, and the client's
//! session (`FheSession`: remote over TCP, or local with the server's half on a thread of this
//! process over an in-memory channel). The secret key stays inside the session object: it has
//! no method that returns it.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use lycaon_mpc::channel::MemoryChannel;
use lycaon_mpc::tcp::TcpChannel;
use lycaon_mpc::Channel;
use lycaon_runtime::fhe::session::{serve_session, FheServerSummary, KeysAccepted};
use lycaon_runtime::fhe::{open_session, FheClient, FheProgram, FheServed, FheSessionOptions};
use numpy::PyReadonlyArray1;
use pyo3::prelude::*;
use serde::Deserialize;

use crate::hybrid::{call_progress, err, json_err, timeout};
use crate::LycaonError;

/// The backend on `device` ("cpu" when None; "cuda:N"): the runtime's choice, with its error.
pub(crate) fn backend_on(device: Option<&str>) -> PyResult<Arc<dyn lycaon_runtime::Backend>> {
    let device = lycaon_runtime::Device::parse(device.unwrap_or("cpu")).map_err(|e| LycaonError::new_err(e.to_string()))?;
    device.backend().map_err(err)
}

/// The served program (`program_json` as `lycaon.fhe.compile_model` writes it) on `device`
/// ("cpu" when None): on "cuda:N" every session's tensors, keys and plaintexts stay on the GPU
/// (the runtime's resident path; the host prepares the program on every core).
pub(crate) fn served(py: Python<'_>, program_json: &str, metadata: Option<serde_json::Value>, flood_precision_bits: Option<f64>, device: Option<&str>) -> PyResult<FheServed> {
    let device = lycaon_runtime::Device::parse(device.unwrap_or("cpu")).map_err(|e| LycaonError::new_err(e.to_string()))?;
    let resident = py.detach(|| lycaon_runtime::fhe::ResidentDevice::for_device(device)).map_err(err)?;
    let backend = if resident.is_some() { lycaon_runtime::Device::Cpu.backend().map_err(err)? } else { device.backend().map_err(err)? };
    let mut program = FheProgram::from_json(program_json).map_err(err)?;
    if let Some(m) = metadata {
        program.metadata = m;
    }
    let options = match flood_precision_bits {
        None => FheSessionOptions::default(),
        Some(b) if b == 0.0 => FheSessionOptions { flood_precision_bits: None },
        Some(b) if b.is_finite() && b > 0.0 && b <= 60.0 => FheSessionOptions { flood_precision_bits: Some(b) },
        Some(b) => return Err(LycaonError::new_err(format!("flood_precision_bits must be 0 (no flooding) or in (0, 60], not {b}"))),
    };
    let mut served = py.detach(|| FheServed::new(program, backend, options)).map_err(err)?;
    served.resident = resident;
    Ok(served)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionOptionsJson {
    #[serde(default)]
    timeout_s: Option<f64>,
    #[serde(default)]
    flood_precision_bits: Option<f64>,
    /// "level-aware" (default) or "all-required" (every key at the top level; benchmarks).
    #[serde(default)]
    keyset: Option<String>,
    /// Where this process's CKKS work runs: "cpu" (default) or "cuda:N".
    #[serde(default)]
    device: Option<String>,
}

fn keys_at_top(o: &SessionOptionsJson) -> PyResult<bool> {
    match o.keyset.as_deref() {
        None | Some("level-aware") => Ok(false),
        Some("all-required") => Ok(true),
        Some(other) => Err(LycaonError::new_err(format!("keyset '{other}': level-aware or all-required"))),
    }
}

/// One client's FHE session: its keys made and sent at the start, then any number of queries.
#[pyclass(module = "lycaon._native")]
pub struct FheSession {
    inner: Mutex<Option<Open>>,
    program_json: String,
    keys: KeysAccepted,
    upload_bytes: u64,
    keys_s: f64,
}

struct Open {
    client: FheClient,
    channel: Box<dyn Channel + Send>,
    /// The server's half of a local session.
    server: Option<JoinHandle<lycaon_runtime::Result<FheServerSummary>>>,
}

fn call_stage(cb: &Option<Py<PyAny>>, what: &str) {
    if let Some(cb) = cb {
        Python::attach(|py| {
            let _ = cb.call1(py, (what,));
        });
    }
}

impl FheSession {
    fn opened(
        mut channel: Box<dyn Channel + Send>,
        server: Option<JoinHandle<lycaon_runtime::Result<FheServerSummary>>>,
        backend: Arc<dyn lycaon_runtime::Backend>,
        at_top: bool,
        on_keys: &Option<Py<PyAny>>,
    ) -> lycaon_runtime::Result<Self> {
        let t0 = std::time::Instant::now();
        let (client, upload_bytes, keys) = open_session(channel.as_mut(), backend, at_top, &mut |what| call_stage(on_keys, what))?;
        let program_json = client.program().to_json();
        Ok(Self { inner: Mutex::new(Some(Open { client, channel, server })), program_json, keys, upload_bytes, keys_s: t0.elapsed().as_secs_f64() })
    }
}

#[pymethods]
impl FheSession {
    /// Connects to an FHE server at `addr` and makes and sends this client's keys.
    /// `on_keys(stage)` hears the key-generation stages.
    #[staticmethod]
    #[pyo3(signature = (addr, options_json = "{}", on_keys = None))]
    fn connect(py: Python<'_>, addr: &str, options_json: &str, on_keys: Option<Py<PyAny>>) -> PyResult<Self> {
        let o: SessionOptionsJson = serde_json::from_str(options_json).map_err(|e| json_err("session options", e))?;
        let t = timeout(Some(o.timeout_s.unwrap_or(3600.0)))?;
        let at_top = keys_at_top(&o)?;
        let backend = backend_on(o.device.as_deref())?;
        py.detach(|| -> lycaon_runtime::Result<Self> {
            let channel = TcpChannel::connect(addr, lycaon_mpc::LinkModel::UNLIMITED, t)?;
            Self::opened(Box::new(channel), None, backend, at_top, &on_keys)
        })
        .map_err(err)
    }

    /// Both halves in this process: the server's on a thread, over an in-memory channel (the
    /// same protocol and bytes as over TCP).
    #[staticmethod]
    #[pyo3(signature = (program_json, options_json = "{}", on_keys = None))]
    fn local(py: Python<'_>, program_json: &str, options_json: &str, on_keys: Option<Py<PyAny>>) -> PyResult<Self> {
        let o: SessionOptionsJson = serde_json::from_str(options_json).map_err(|e| json_err("session options", e))?;
        // One backend for both halves (a CUDA device compiles its kernels once).
        let backend = backend_on(o.device.as_deref())?;
        let served = Arc::new(served(py, program_json, None, o.flood_precision_bits, o.device.as_deref())?);
        let t = timeout(Some(o.timeout_s.unwrap_or(3600.0)))?;
        let at_top = keys_at_top(&o)?;
        py.detach(|| -> lycaon_runtime::Result<Self> {
            let (mut server_end, client_end) = MemoryChannel::pair_with(lycaon_mpc::LinkModel::UNLIMITED, t);
            let handle = std::thread::Builder::new()
                .name("lycaon-fhe-local-server".into())
                .spawn(move || serve_session(&served, &mut server_end))
                .map_err(|e| lycaon_runtime::RuntimeError::Protocol(format!("cannot start the server thread: {e}")))?;
            Self::opened(Box::new(client_end), Some(handle), backend, at_top, &on_keys)
        })
        .map_err(err)
    }

    /// The public program (JSON).
    #[getter]
    fn program_json(&self) -> String {
        self.program_json.clone()
    }

    /// {"upload_bytes", "key_bytes" (in memory on the server, or on each of its Ray workers), "galois_keys", "keys_s"}.
    #[getter]
    fn keys(&self) -> String {
        serde_json::json!({"upload_bytes": self.upload_bytes, "key_bytes": self.keys.key_bytes, "galois_keys": self.keys.galois_keys, "keys_s": self.keys_s}).to_string()
    }

    /// One query: `x` the model-ready input (float64, flattened C-order); returns the outcome
    /// (JSON: logits, label, timings, bytes, the server's report).
    #[pyo3(signature = (x, progress = None))]
    fn infer(&self, py: Python<'_>, x: PyReadonlyArray1<'_, f64>, progress: Option<Py<PyAny>>) -> PyResult<String> {
        let x = x.as_slice().map_err(|_| LycaonError::new_err("x must be a contiguous float64 array"))?.to_vec();
        let mut guard = self.inner.lock().map_err(|_| LycaonError::new_err("the session's lock is poisoned"))?;
        let open = guard.as_mut().ok_or_else(|| LycaonError::new_err("the session is closed"))?;
        let outcome = py.detach(|| open.client.query(open.channel.as_mut(), &x, &mut |d, n, name| call_progress(&progress, d, n, name))).map_err(err)?;
        serde_json::to_string(&outcome).map_err(|e| LycaonError::new_err(e.to_string()))
    }

    /// Ends the session (a local server's half finishes and its summary comes back as JSON).
    fn close(&self, py: Python<'_>) -> PyResult<Option<String>> {
        let taken = self.inner.lock().map_err(|_| LycaonError::new_err("the session's lock is poisoned"))?.take();
        let Some(open) = taken else { return Ok(None) };
        let Open { client, channel, server } = open;
        drop(client);
        drop(channel);
        match server {
            Some(handle) => {
                let summary = py.detach(|| handle.join()).map_err(|_| LycaonError::new_err("the local server thread panicked"))?.map_err(err)?;
                Ok(Some(serde_json::to_string(&summary).map_err(|e| LycaonError::new_err(e.to_string()))?))
            }
            None => Ok(None),
        }
    }
}

/// The rotation keys a program's ops use (JSON {step: highest level}), as the runtime derives
/// them from its layers: what `rotation_levels` must hold (for a program cut after some ops).
/// Releases the GIL.
#[pyfunction]
pub fn fhe_rotation_plan(py: Python<'_>, program_json: &str) -> PyResult<String> {
    let plan = py.detach(|| -> lycaon_runtime::Result<_> {
        let program = FheProgram::from_json(program_json)?;
        lycaon_runtime::fhe::FheExecutable::rotation_plan(program, lycaon_runtime::Device::Cpu.backend()?)
    });
    serde_json::to_string(&plan.map_err(err)?).map_err(|e| LycaonError::new_err(e.to_string()))
}

/// The steps of one query with the ops on `workers` workers (JSON: [{"local": [unit],
/// "batches": [{"units", "inputs", "outputs"}]}], units as {"op": i}, {"term": [i, part]} or
/// {"finish": i}), as a server with a Ray fanout cuts it (`lycaon bench scale` models N machines
/// from it). Prepares the program. Releases the GIL.
#[pyfunction]
pub fn fhe_schedule(py: Python<'_>, program_json: &str, workers: usize) -> PyResult<String> {
    let steps = py.detach(|| -> lycaon_runtime::Result<_> {
        let program = FheProgram::from_json(program_json)?;
        Ok(lycaon_runtime::fhe::FheExecutable::new(program, lycaon_runtime::Device::Cpu.backend()?)?.schedule(workers))
    });
    let steps: Vec<serde_json::Value> =
        steps.map_err(err)?.into_iter().map(|s| serde_json::json!({"local": s.local, "batches": s.batches})).collect();
    serde_json::to_string(&steps).map_err(|e| LycaonError::new_err(e.to_string()))
}

/// What a program implies (JSON): bootstraps an inference runs (refreshes and those inside
/// composite ReLUs, at the levels the plan gives them), rotation keys by level, the
/// relinearisation level, the ops by kind. The planner's FHE figures come from here.
#[pyfunction]
pub fn fhe_program_facts(program_json: &str) -> PyResult<String> {
    let program = FheProgram::from_json(program_json).map_err(err)?;
    let bootstraps = program.bootstraps().map_err(err)?;
    let mut kinds: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for op in &program.ops {
        let kind = serde_json::to_value(&op.kind).ok().and_then(|v| v.get("kind").and_then(|k| k.as_str().map(str::to_owned))).unwrap_or_default();
        *kinds.entry(kind).or_default() += 1;
    }
    Ok(serde_json::json!({
        "bootstraps": bootstraps,
        "refreshes": program.ops.iter().map(|op| op.refresh.len()).sum::<usize>(),
        "rotation_keys": program.rotation_levels.len(),
        "rotation_levels": program.rotation_levels,
        "relin_level": program.relin_level,
        "input_level": program.input_level,
        "ops": kinds,
    })
    .to_string())
}

/// Compiles a model-front graph (JSON from `lycaon.frontend.graph_json`, batch-norm folded and
/// quadratics made monic) to the FHE program (JSON) under `options_json` (lycaon-runtime's
/// `CompileOptions`: name, metadata, path, log_scale, log_q0, p_bits, log_n, bounds,
/// relu_degrees, hyphen, placement, bootstrap_shape). Releases the GIL.
#[pyfunction]
#[pyo3(signature = (graph_json, options_json = "{}"))]
pub fn fhe_compile(py: Python<'_>, graph_json: &str, options_json: &str) -> PyResult<String> {
    py.detach(|| lycaon_runtime::fhe::compile::compile_json(graph_json, options_json)).map_err(err)
}

/// The compiler path a graph takes under `options_json` and why: JSON {"path": "leveled" |
/// "bootstrapped", "reason"}.
#[pyfunction]
#[pyo3(signature = (graph_json, options_json = "{}"))]
pub fn fhe_compile_path(py: Python<'_>, graph_json: &str, options_json: &str) -> PyResult<String> {
    py.detach(|| -> lycaon_runtime::Result<String> {
        let graph = lycaon_runtime::fhe::ModelGraph::from_json(graph_json)?;
        let options = lycaon_runtime::fhe::CompileOptions::from_json(options_json)?;
        let choice = lycaon_runtime::fhe::choose_path(&graph, &options)?;
        serde_json::to_string(&choice).map_err(|e| lycaon_runtime::RuntimeError::Compile(e.to_string()))
    })
    .map_err(err)
}
