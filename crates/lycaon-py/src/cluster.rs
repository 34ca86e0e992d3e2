//! Bindings for a server whose work runs on workers elsewhere (`lycaon.cluster` drives them with
//! Ray): the server side calls a Python fanout object, and each worker process holds a
//! [`LinearWorker`] (the hybrid mode's linear layers) or an [`FheWorker`] (the FHE mode's ops).

use std::ops::Range;

use lycaon_runtime::fanout::{Answered, Fanout, LinearWorker as Worker};
use lycaon_runtime::fhe::{FheBatch, FheFanout, FheProgram, FheRunStats};
use lycaon_runtime::{Program, RuntimeError, SessionOptions};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::hybrid::{err, session_options, weights_of};
use crate::LycaonError;

/// A Python object with the methods of [`Fanout`] (`lycaon.cluster.RayFanout`).
pub(crate) struct PyFanout(pub(crate) Py<PyAny>);

fn cluster_err(py: Python<'_>, what: &str, e: PyErr) -> RuntimeError {
    // The fanout's own message (for example that a worker died twice); never a share or a key.
    let message = e.value(py).str().map(|s| s.to_string()).unwrap_or_else(|_| "unprintable error".into());
    RuntimeError::Cluster(format!("{what}: {message}"))
}

impl Fanout for PyFanout {
    fn key_arrived(&self, session: u64, set: usize, element: u64, message: &[u8]) -> lycaon_runtime::Result<()> {
        Python::attach(|py| {
            self.0
                .call_method1(py, "key_arrived", (session, set, element, PyBytes::new(py, message)))
                .map(|_| ())
                .map_err(|e| cluster_err(py, "sending a key to the workers", e))
        })
    }

    fn key_departed(&self, session: u64, set: usize, element: u64) -> lycaon_runtime::Result<()> {
        Python::attach(|py| {
            self.0.call_method1(py, "key_departed", (session, set, element)).map(|_| ()).map_err(|e| cluster_err(py, "dropping a key on the workers", e))
        })
    }

    fn evaluate(&self, session: u64, layer: &str, units: usize, block: usize, inputs: Vec<Vec<u8>>) -> lycaon_runtime::Result<Vec<Answered>> {
        Python::attach(|py| {
            let what = format!("linear '{layer}' on the workers");
            let list = PyList::new(py, inputs.iter().map(|b| PyBytes::new(py, b))).map_err(|e| cluster_err(py, &what, e))?;
            drop(inputs);
            let got = self.0.call_method1(py, "evaluate", (session, layer, units, block, list)).map_err(|e| cluster_err(py, &what, e))?;
            let got = got.bind(py).cast::<PyList>().map_err(|_| RuntimeError::Cluster(format!("{what}: the fanout returned no list")))?;
            let bad = |part: &str| RuntimeError::Cluster(format!("{what}: {part} of an answer is not what a worker returns"));
            got.iter()
                .map(|range| {
                    let (seed, responses): (Vec<u8>, Vec<Vec<u8>>) = range.extract().map_err(|_| bad("an answer (mask seed, responses)"))?;
                    let mask_seed: [u8; 32] = seed.try_into().map_err(|_| bad("the mask seed"))?;
                    Ok(Answered { mask_seed, responses })
                })
                .collect()
        })
    }

    fn session_ended(&self, session: u64) {
        tell_session_ended(&self.0, session);
    }
}

/// Tells a fanout a session ended. Best effort: a failure here leaves keys on a worker until it
/// restarts; it is printed only.
fn tell_session_ended(fanout: &Py<PyAny>, session: u64) {
    Python::attach(|py| {
        if let Err(e) = fanout.call_method1(py, "session_ended", (session,)) {
            e.print(py);
        }
    });
}

/// What one worker process holds: the program's linear layers with the server's integer
/// weights, and the Galois keys of its sessions' layers in flight. Its evaluations run on
/// `threads` threads (0: all cores).
#[pyclass(module = "lycaon._native")]
pub struct LinearWorker {
    inner: Worker,
    pool: rayon::ThreadPool,
}

#[pymethods]
impl LinearWorker {
    #[new]
    #[pyo3(signature = (program_json, weights, flood_bits=None, threads=0))]
    fn new(py: Python<'_>, program_json: &str, weights: &Bound<'_, PyDict>, flood_bits: Option<f64>, threads: usize) -> PyResult<Self> {
        let program = Program::from_json(program_json).map_err(err)?;
        let w = weights_of(weights)?;
        let options: SessionOptions = session_options(flood_bits, Some(0))?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("lycaon-worker-{i}"))
            .build()
            .map_err(|e| LycaonError::new_err(format!("cannot start the worker's threads: {e}")))?;
        let inner = py.detach(|| Worker::new(program, &w, options)).map_err(err)?;
        Ok(Self { inner, pool })
    }

    /// Threads an evaluation runs on.
    #[getter]
    fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    fn add_key(&self, py: Python<'_>, session: u64, set: usize, element: u64, message: &[u8]) -> PyResult<()> {
        py.detach(|| self.inner.add_key(session, set, element, message)).map_err(err)
    }

    fn drop_key(&self, session: u64, set: usize, element: u64) -> PyResult<()> {
        self.inner.drop_key(session, set, element).map_err(err)
    }

    fn end_session(&self, session: u64) -> PyResult<()> {
        self.inner.end_session(session).map_err(err)
    }

    /// [(set, element)] of the Galois keys of `session` this worker holds.
    fn held_keys(&self, session: u64) -> PyResult<Vec<(usize, u64)>> {
        self.inner.held_keys(session).map_err(err)
    }

    /// Output units start..end of linear layer `layer` on serialised input ciphertexts,
    /// answered: (the seed of the masks the responses carry, the responses in order). Keys go
    /// in with `add_key`, the public key as element 0.
    fn evaluate<'py>(&self, py: Python<'py>, session: u64, layer: &str, start: usize, end: usize, inputs: Vec<Vec<u8>>) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyList>)> {
        let units: Range<usize> = start..end;
        let out = py.detach(|| self.pool.install(|| self.inner.evaluate(session, layer, units, &inputs))).map_err(err)?;
        Ok((PyBytes::new(py, &out.mask_seed), PyList::new(py, out.responses.iter().map(|b| PyBytes::new(py, b)))?))
    }
}

/// A Python object with the methods of [`FheFanout`] (`lycaon.cluster.RayFheFanout`).
pub(crate) struct PyFheFanout(pub(crate) Py<PyAny>);

impl FheFanout for PyFheFanout {
    fn keys_arrived(&self, session: u64, messages: Vec<Vec<u8>>) -> lycaon_runtime::Result<()> {
        Python::attach(|py| {
            let what = "sending a session's keys to the workers";
            // Each message leaves Rust's memory as it enters Python's (ResNet-20's are gigabytes).
            let list = PyList::new(py, messages.into_iter().map(|b| PyBytes::new(py, &b))).map_err(|e| cluster_err(py, what, e))?;
            self.0.call_method1(py, "keys_arrived", (session, list)).map(|_| ()).map_err(|e| cluster_err(py, what, e))
        })
    }

    fn run(&self, session: u64, batches: Vec<(FheBatch, Vec<Vec<u8>>)>) -> lycaon_runtime::Result<Vec<(Vec<Vec<u8>>, FheRunStats)>> {
        Python::attach(|py| {
            let what = "FHE ops on the workers";
            let items = batches
                .iter()
                .map(|(b, inputs)| Ok((b.to_json(), PyList::new(py, inputs.iter().map(|x| PyBytes::new(py, x)))?)))
                .collect::<PyResult<Vec<_>>>()
                .map_err(|e| cluster_err(py, what, e))?;
            drop(batches);
            let got = self.0.call_method1(py, "run", (session, items)).map_err(|e| cluster_err(py, what, e))?;
            let got = got.bind(py).cast::<PyList>().map_err(|_| RuntimeError::Cluster(format!("{what}: the fanout returned no list")))?;
            let bad = || RuntimeError::Cluster(format!("{what}: an answer is not (ciphertexts, statistics) as a worker returns it"));
            got.iter()
                .map(|answer| {
                    let (outputs, stats): (Vec<Vec<u8>>, String) = answer.extract().map_err(|_| bad())?;
                    Ok((outputs, serde_json::from_str(&stats).map_err(|_| bad())?))
                })
                .collect()
        })
    }

    fn session_ended(&self, session: u64) {
        tell_session_ended(&self.0, session);
    }
}

/// What one worker process of an FHE server holds: the program prepared once and each session's
/// evaluation keys (parsed from the client's messages). Its ops run on `threads` threads (0: all
/// cores).
#[pyclass(module = "lycaon._native")]
pub struct FheWorker {
    inner: lycaon_runtime::fhe::FheWorker,
    pool: rayon::ThreadPool,
}

#[pymethods]
impl FheWorker {
    #[new]
    #[pyo3(signature = (program_json, threads=0))]
    fn new(py: Python<'_>, program_json: &str, threads: usize) -> PyResult<Self> {
        let program = FheProgram::from_json(program_json).map_err(err)?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("lycaon-fhe-worker-{i}"))
            .build()
            .map_err(|e| LycaonError::new_err(format!("cannot start the worker's threads: {e}")))?;
        let backend = crate::fhe::backend_on(None)?;
        let inner = py.detach(|| pool.install(|| lycaon_runtime::fhe::FheWorker::new(program, backend))).map_err(err)?;
        Ok(Self { inner, pool })
    }

    #[getter]
    fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// Takes a session's keys from the client's messages (any iterable of bytes, the key header
    /// first), each taken from it when its turn comes; returns their size in memory.
    fn add_keys(&self, py: Python<'_>, session: u64, messages: &Bound<'_, PyAny>) -> PyResult<usize> {
        let iterator: Py<PyAny> = messages.try_iter()?.into_any().unbind();
        let mut next = |what: &str| -> lycaon_runtime::Result<Option<Vec<u8>>> {
            Python::attach(|py| match iterator.bind(py).call_method0("__next__") {
                Ok(m) => m.extract::<Vec<u8>>().map(Some).map_err(|_| RuntimeError::Protocol(format!("{what}: a key message is not bytes"))),
                Err(e) if e.is_instance_of::<pyo3::exceptions::PyStopIteration>(py) => Ok(None),
                Err(e) => Err(cluster_err(py, &format!("fetching {what}"), e)),
            })
        };
        py.detach(|| self.pool.install(|| self.inner.add_keys_from(session, &mut next))).map_err(err)
    }

    fn has_keys(&self, session: u64) -> PyResult<bool> {
        self.inner.has_keys(session).map_err(err)
    }

    fn end_session(&self, session: u64) -> PyResult<()> {
        self.inner.end_session(session).map_err(err)
    }

    /// Sessions whose keys this worker holds.
    fn sessions_held(&self) -> PyResult<usize> {
        self.inner.sessions_held().map_err(err)
    }

    /// Runs one batch of `session` (`batch_json` as the server cuts it) on its serialised input
    /// ciphertexts: (the serialised outputs in the batch's order, its statistics as JSON).
    fn run<'py>(&self, py: Python<'py>, session: u64, batch_json: &str, inputs: Vec<Vec<u8>>) -> PyResult<(Bound<'py, PyList>, String)> {
        let batch = FheBatch::from_json(batch_json).map_err(err)?;
        let (outputs, stats) = py.detach(|| self.pool.install(|| self.inner.run(session, &batch, &inputs))).map_err(err)?;
        let stats = serde_json::to_string(&stats).map_err(|e| LycaonError::new_err(format!("statistics: {e}")))?;
        Ok((PyList::new(py, outputs.iter().map(|b| PyBytes::new(py, b)))?, stats))
    }
}
