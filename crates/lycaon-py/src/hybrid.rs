//! Bindings of the hybrid runtime: a server that serves a compiled program with the server's
//! weights, a client that runs one inference against it, and both roles in one process.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use lycaon_mpc::tcp::TcpChannel;
use lycaon_runtime::fanout::Fanout;
use lycaon_runtime::server::LogSink;
use lycaon_runtime::session::{fetch_program, fetch_public, run_client, run_local, ServedModel};
use lycaon_runtime::{link_model, Program, RuntimeError, Served, Server, ServerOptions, SessionOptions, Weights};
use numpy::PyReadonlyArray1;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde::Deserialize;

use crate::LycaonError;

pub(crate) fn err(e: RuntimeError) -> PyErr {
    LycaonError::new_err(e.to_string())
}

pub(crate) fn json_err(what: &str, e: serde_json::Error) -> PyErr {
    LycaonError::new_err(format!("malformed {what} JSON: {e}"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServerOptionsJson {
    #[serde(default)]
    max_sessions: Option<usize>,
    #[serde(default)]
    timeout_s: Option<f64>,
    #[serde(default)]
    max_message_bytes: Option<usize>,
    #[serde(default)]
    link: Option<String>,
    #[serde(default)]
    flood_bits: Option<f64>,
    #[serde(default)]
    prepared_weights_bytes: Option<usize>,
    #[serde(default)]
    metadata: Option<serde_json::Value>,
    /// FHE mode: bits of precision the answers' noise flooding leaves in the logits (0: none).
    #[serde(default)]
    pub(crate) flood_precision_bits: Option<f64>,
    /// FHE mode: where the server's CKKS work runs, "cpu" (default) or "cuda:N".
    #[serde(default)]
    pub(crate) device: Option<String>,
}

impl ServerOptionsJson {
    pub(crate) fn server_options(&self) -> PyResult<ServerOptions> {
        let mut options = ServerOptions { timeout: timeout(self.timeout_s)?, ..ServerOptions::default() };
        if let Some(m) = self.max_sessions {
            options.max_sessions = m;
        }
        if let Some(m) = self.max_message_bytes {
            options.max_message_bytes = m;
        }
        options.link = link_model(self.link.as_deref().unwrap_or("none")).map_err(err)?;
        Ok(options)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientOptionsJson {
    #[serde(default)]
    timeout_s: Option<f64>,
    #[serde(default)]
    link: Option<String>,
    #[serde(default)]
    flood_bits: Option<f64>,
}

pub(crate) fn timeout(s: Option<f64>) -> PyResult<Duration> {
    let s = s.unwrap_or(120.0);
    if !(s.is_finite() && s > 0.0) {
        return Err(LycaonError::new_err(format!("timeout_s must be a positive number of seconds, not {s}")));
    }
    Ok(Duration::from_secs_f64(s))
}

pub(crate) fn session_options(flood_bits: Option<f64>, prepared_weights_bytes: Option<usize>) -> PyResult<SessionOptions> {
    let mut o = SessionOptions::default();
    if let Some(b) = prepared_weights_bytes {
        o.prepared_weights_bytes = b;
    }
    if let Some(f) = flood_bits {
        if !(f.is_finite() && (0.0..=80.0).contains(&f)) {
            return Err(LycaonError::new_err(format!("flood_bits must be in [0, 80], not {f}")));
        }
        o.flood_bits = f;
    }
    Ok(o)
}

fn vector(v: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<i64>> {
    let arr: PyReadonlyArray1<i64> = v.extract().map_err(|_| LycaonError::new_err(format!("{what} must be a 1-D numpy int64 array")))?;
    Ok(arr.as_slice().map_err(|_| LycaonError::new_err(format!("{what} must be contiguous")))?.to_vec())
}

/// {name: {"weight": int64 array, "bias": int64 array (optional)}} to the runtime's weights.
pub(crate) fn weights_of(d: &Bound<'_, PyDict>) -> PyResult<Weights> {
    let mut w = Weights::default();
    for (k, v) in d.iter() {
        let name: String = k.extract().map_err(|_| LycaonError::new_err("weight names must be strings"))?;
        let layer = v.cast::<PyDict>().map_err(|_| LycaonError::new_err(format!("weights['{name}'] must be a dict with 'weight' and optionally 'bias'")))?;
        let weight = layer.get_item("weight")?.ok_or_else(|| LycaonError::new_err(format!("weights['{name}'] has no 'weight'")))?;
        let bias = match layer.get_item("bias")? {
            Some(b) if !b.is_none() => Some(vector(&b, &format!("weights['{name}']['bias']"))?),
            _ => None,
        };
        w.layers.insert(name.clone(), (vector(&weight, &format!("weights['{name}']['weight']"))?, bias));
    }
    Ok(w)
}

fn served_model(
    program_json: &str,
    weights: &Bound<'_, PyDict>,
    flood_bits: Option<f64>,
    prepared_weights_bytes: Option<usize>,
    metadata: Option<serde_json::Value>,
    fanout: Option<Py<PyAny>>,
) -> PyResult<(ServedModel, Weights)> {
    let mut program = Program::from_json(program_json).map_err(err)?;
    if let Some(m) = metadata {
        program.metadata = m;
    }
    let w = weights_of(weights)?;
    let options = session_options(flood_bits, prepared_weights_bytes)?;
    let model = match fanout {
        None => weights.py().detach(|| ServedModel::new(program, &w, options)),
        Some(f) => {
            let fanout: Arc<dyn Fanout> = Arc::new(crate::cluster::PyFanout(f));
            weights.py().detach(|| ServedModel::with_fanout(program, &w, options, fanout))
        }
    }
    .map_err(err)?;
    Ok((model, w))
}

/// A server for one model in either mode (`HybridServer(...)` or `HybridServer.fhe(...)`): one
/// wire, one port, one session loop.
#[pyclass(module = "lycaon._native")]
pub struct HybridServer {
    model: Served,
    options: ServerOptions,
    running: Mutex<Option<(Arc<AtomicBool>, Arc<LogSink>, JoinHandle<()>)>>,
    log: Mutex<Option<Arc<LogSink>>>,
}

impl HybridServer {
    pub(crate) fn with(model: Served, options: ServerOptions) -> Self {
        Self { model, options, running: Mutex::new(None), log: Mutex::new(None) }
    }
}

#[pymethods]
impl HybridServer {
    /// With `fanout` (an object with the methods of `lycaon.cluster.RayFanout`), the linear
    /// layers run on its workers.
    #[new]
    #[pyo3(signature = (program_json, weights, options_json, fanout=None))]
    fn new(program_json: &str, weights: &Bound<'_, PyDict>, options_json: &str, fanout: Option<Py<PyAny>>) -> PyResult<Self> {
        let o: ServerOptionsJson = serde_json::from_str(options_json).map_err(|e| json_err("server options", e))?;
        let (model, _) = served_model(program_json, weights, o.flood_bits, o.prepared_weights_bytes, o.metadata.clone(), fanout)?;
        Ok(Self::with(Served::Hybrid(Arc::new(model)), o.server_options()?))
    }

    /// A server of an FHE program (`lycaon.fhe`'s compilers write it): the runtime prepares
    /// the program once and serves sessions that bring their public keys. With `fanout` (an
    /// object with the methods of `lycaon.cluster.RayFheFanout`), each session's ops run on its
    /// `width` workers and this server keeps no evaluation key.
    #[staticmethod]
    #[pyo3(signature = (program_json, options_json, fanout=None))]
    fn fhe(py: Python<'_>, program_json: &str, options_json: &str, fanout: Option<Py<PyAny>>) -> PyResult<Self> {
        let o: ServerOptionsJson = serde_json::from_str(options_json).map_err(|e| json_err("server options", e))?;
        let mut served = crate::fhe::served(py, program_json, o.metadata.clone(), o.flood_precision_bits, o.device.as_deref())?;
        if let Some(f) = fanout {
            if served.resident.is_some() {
                return Err(LycaonError::new_err("a server whose sessions run on workers keeps no tensors on a device: give device='cpu'"));
            }
            let width: usize = f.bind(py).getattr("width")?.extract()?;
            served.fanout = Some((Arc::new(crate::cluster::PyFheFanout(f)), width.max(1)));
        }
        Ok(Self::with(Served::Fhe(Arc::new(served)), o.server_options()?))
    }

    /// "hybrid" or "fhe".
    #[getter]
    fn mode(&self) -> &'static str {
        self.model.mode().name()
    }

    /// Starts serving on `addr` in background threads; returns the bound address.
    fn start(&self, addr: &str) -> PyResult<String> {
        let mut running = self.running.lock().map_err(|_| LycaonError::new_err("server state poisoned"))?;
        if running.is_some() {
            return Err(LycaonError::new_err("the server is already running; stop() it first"));
        }
        let server = Server::bind(self.model.clone(), addr, self.options).map_err(err)?;
        let bound = server.local_addr().to_string();
        let (stop, log) = (server.stopper(), server.log.clone());
        let handle = std::thread::Builder::new()
            .name("lycaon-accept".into())
            .spawn(move || server.run())
            .map_err(|e| LycaonError::new_err(format!("cannot start the server thread: {e}")))?;
        *self.log.lock().map_err(|_| LycaonError::new_err("server state poisoned"))? = Some(log.clone());
        *running = Some((stop, log, handle));
        Ok(bound)
    }

    /// Stops accepting connections (sessions in progress finish on their own threads).
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        let taken = self.running.lock().map_err(|_| LycaonError::new_err("server state poisoned"))?.take();
        if let Some((stop, _, handle)) = taken {
            stop.store(true, Ordering::Relaxed);
            py.detach(|| handle.join()).map_err(|_| LycaonError::new_err("the accept loop panicked"))?;
        }
        Ok(())
    }

    /// Serves on `addr` until interrupted (Ctrl-C), printing log lines to stderr.
    fn serve(&self, py: Python<'_>, addr: &str) -> PyResult<()> {
        self.start(addr)?;
        if let Some(log) = self.log.lock().map_err(|_| LycaonError::new_err("server state poisoned"))?.as_ref() {
            // What is logged from here on is printed as it comes: sessions, their progress, errors.
            let so_far = log.lines();
            log.set_echo(true);
            for line in so_far {
                eprintln!("{line}");
            }
        }
        loop {
            py.detach(|| std::thread::sleep(Duration::from_millis(200)));
            if let Err(e) = py.check_signals() {
                self.stop(py)?;
                return Err(e);
            }
        }
    }

    /// Every log line since start (JSON): sessions, per-op timings and bytes, errors.
    fn logs(&self) -> PyResult<Vec<String>> {
        Ok(self.log.lock().map_err(|_| LycaonError::new_err("server state poisoned"))?.as_ref().map(|l| l.lines()).unwrap_or_default())
    }

    /// The public program the server sends to clients (JSON).
    fn program_json(&self) -> String {
        match &self.model {
            Served::Hybrid(m) => m.compiled.program.to_json(),
            Served::Fhe(m) => m.exe.program().public().to_json(),
        }
    }

    /// log2 of each linear layer's flooding bound (hybrid mode; empty in the FHE mode).
    fn flooding(&self) -> Vec<(String, u32)> {
        match &self.model {
            Served::Hybrid(m) => m.flooding(),
            Served::Fhe(_) => Vec::new(),
        }
    }
}

pub(crate) fn call_progress(progress: &Option<Py<PyAny>>, done: usize, total: usize, name: &str) {
    if let Some(cb) = progress {
        Python::attach(|py| {
            let _ = cb.call1(py, (done, total, name));
        });
    }
}

/// Runs one inference against a server; returns the outcome as JSON.
#[pyfunction]
#[pyo3(signature = (addr, x_int, options_json = "{}", progress = None))]
pub fn hybrid_infer(py: Python<'_>, addr: &str, x_int: &Bound<'_, PyAny>, options_json: &str, progress: Option<Py<PyAny>>) -> PyResult<String> {
    let o: ClientOptionsJson = serde_json::from_str(options_json).map_err(|e| json_err("client options", e))?;
    let x = vector(x_int, "x_int")?;
    let link = link_model(o.link.as_deref().unwrap_or("none")).map_err(err)?;
    let t = timeout(o.timeout_s)?;
    let mut outcome = py
        .detach(|| -> lycaon_runtime::Result<_> {
            let mut ch = TcpChannel::connect(addr, link, t)?;
            run_client(&mut ch, &x, &mut |d, n, name| call_progress(&progress, d, n, name))
        })
        .map_err(err)?;
    outcome.account(link);
    serde_json::to_string(&outcome).map_err(|e| LycaonError::new_err(e.to_string()))
}

/// The public program a server serves (JSON), without running an inference.
#[pyfunction]
#[pyo3(signature = (addr, options_json = "{}"))]
pub fn hybrid_fetch_program(py: Python<'_>, addr: &str, options_json: &str) -> PyResult<String> {
    let o: ClientOptionsJson = serde_json::from_str(options_json).map_err(|e| json_err("client options", e))?;
    let t = timeout(o.timeout_s)?;
    let program = py
        .detach(|| -> lycaon_runtime::Result<_> {
            let mut ch = TcpChannel::connect(addr, lycaon_mpc::LinkModel::UNLIMITED, t)?;
            fetch_program(&mut ch)
        })
        .map_err(err)?;
    Ok(program.to_json())
}

/// What a server serves, `{"mode": "hybrid" | "fhe", "program": ...}` (JSON), for either mode.
#[pyfunction]
#[pyo3(signature = (addr, options_json = "{}"))]
pub fn fetch_public_model(py: Python<'_>, addr: &str, options_json: &str) -> PyResult<String> {
    let o: ClientOptionsJson = serde_json::from_str(options_json).map_err(|e| json_err("client options", e))?;
    let t = timeout(o.timeout_s)?;
    let public = py
        .detach(|| -> lycaon_runtime::Result<_> {
            let mut ch = TcpChannel::connect(addr, lycaon_mpc::LinkModel::UNLIMITED, t)?;
            fetch_public(&mut ch)
        })
        .map_err(err)?;
    serde_json::to_string(&public).map_err(|e| LycaonError::new_err(e.to_string()))
}

/// Both roles in this process over an emulated link; returns the client's outcome (JSON) with
/// the server's summary under "server".
#[pyfunction]
#[pyo3(signature = (program_json, weights, x_int, options_json = "{}", progress = None))]
pub fn hybrid_local(
    py: Python<'_>,
    program_json: &str,
    weights: &Bound<'_, PyDict>,
    x_int: &Bound<'_, PyAny>,
    options_json: &str,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let o: ClientOptionsJson = serde_json::from_str(options_json).map_err(|e| json_err("options", e))?;
    let (model, _) = served_model(program_json, weights, o.flood_bits, None, None, None)?;
    let x = vector(x_int, "x_int")?;
    let link = link_model(o.link.as_deref().unwrap_or("none")).map_err(err)?;
    let (mut client, server) = py.detach(|| run_local(&model, &x, link, &mut |d, n, name| call_progress(&progress, d, n, name))).map_err(err)?;
    client.account(link);
    let mut v = serde_json::to_value(&client).map_err(|e| LycaonError::new_err(e.to_string()))?;
    v["server"] = serde_json::to_value(&server).map_err(|e| LycaonError::new_err(e.to_string()))?;
    Ok(v.to_string())
}
