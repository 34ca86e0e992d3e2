//! Bindings for a server whose work runs on workers elsewhere (`lycaon.cluster` drives them with
//! Ray): the server side calls a Python fanout object, and each worker process holds a
//! [`LinearWorker`] (the hybrid mode's linear layers) or an [`FheWorker`] (the FHE mode's ops).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

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
    fn key_message(&self, session: u64, message: Vec<u8>) -> lycaon_runtime::Result<()> {
        Python::attach(|py| {
            let what = "sending a session's keys to the workers";
            let bytes = PyBytes::new(py, &message);
            drop(message);
            self.0.call_method1(py, "key_message", (session, bytes)).map(|_| ()).map_err(|e| cluster_err(py, what, e))
        })
    }

    fn keys_complete(&self, session: u64) -> lycaon_runtime::Result<()> {
        Python::attach(|py| {
            self.0.call_method1(py, "keys_complete", (session,)).map(|_| ()).map_err(|e| cluster_err(py, "the workers taking a session's keys", e))
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

/// A session's keys being taken one message at a time: the messages go to a thread that parses
/// them as they come, on a pool of its own (as many threads as the worker's), so that neither
/// batches nor other sessions' keys wait for this session's next message.
struct Arriving {
    messages: std::sync::mpsc::SyncSender<Vec<u8>>,
    parse: std::thread::JoinHandle<lycaon_runtime::Result<usize>>,
}

/// What one worker process of an FHE server holds: the program prepared once and each session's
/// evaluation keys (parsed from the client's messages). Its ops run on `threads` threads (0: all
/// cores).
#[pyclass(module = "lycaon._native")]
pub struct FheWorker {
    inner: Arc<lycaon_runtime::fhe::FheWorker>,
    pool: rayon::ThreadPool,
    arriving: Mutex<HashMap<u64, Arriving>>,
}

impl FheWorker {
    fn arriving(&self) -> PyResult<std::sync::MutexGuard<'_, HashMap<u64, Arriving>>> {
        self.arriving.lock().map_err(|_| LycaonError::new_err("the worker's key store was poisoned"))
    }

    /// Ends the arrival of `session`'s keys: the parse's result.
    fn finish_keys(&self, session: u64) -> PyResult<usize> {
        let Some(a) = self.arriving()?.remove(&session) else {
            return Err(LycaonError::new_err(format!("no key message of session {session} reached this worker")));
        };
        drop(a.messages);
        match a.parse.join() {
            Ok(result) => result.map_err(err),
            Err(_) => Err(LycaonError::new_err("the worker's key parse failed")),
        }
    }
}

fn worker_pool(threads: usize, name: &'static str) -> PyResult<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(move |i| format!("{name}-{i}"))
        .build()
        .map_err(|e| LycaonError::new_err(format!("cannot start the worker's threads: {e}")))
}

#[pymethods]
impl FheWorker {
    #[new]
    #[pyo3(signature = (program_json, threads=0))]
    fn new(py: Python<'_>, program_json: &str, threads: usize) -> PyResult<Self> {
        let program = FheProgram::from_json(program_json).map_err(err)?;
        let pool = worker_pool(threads, "lycaon-fhe-worker")?;
        let backend = crate::fhe::backend_on(None)?;
        let inner = py.detach(|| pool.install(|| lycaon_runtime::fhe::FheWorker::new(program, backend))).map_err(err)?;
        Ok(Self { inner: Arc::new(inner), pool, arriving: Mutex::new(HashMap::new()) })
    }

    #[getter]
    fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// The next of a session's key messages (the key header first), parsed as it comes beside
    /// the ones before it: only a message or two is held beside the parsed keys. Errors: the
    /// message, or one before it, is malformed or not what the program needs.
    fn add_key_message(&self, py: Python<'_>, session: u64, message: Vec<u8>) -> PyResult<()> {
        let sender = match self.arriving()?.entry(session) {
            std::collections::hash_map::Entry::Occupied(a) => a.get().messages.clone(),
            std::collections::hash_map::Entry::Vacant(slot) => {
                // Two messages in flight: the parse of one overlaps the arrival of the next.
                let (messages, queue) = std::sync::mpsc::sync_channel::<Vec<u8>>(1);
                let (inner, pool) = (self.inner.clone(), worker_pool(self.pool.current_num_threads(), "lycaon-fhe-keys")?);
                let parse = std::thread::spawn(move || pool.install(move || inner.add_keys_from(session, &mut |_| Ok(queue.recv().ok()))));
                slot.insert(Arriving { messages: messages.clone(), parse });
                messages
            }
        };
        if py.detach(|| sender.send(message)).is_ok() {
            return Ok(());
        }
        // The parse stopped early: its error says why.
        Err(match self.finish_keys(session) {
            Err(e) => e,
            Ok(_) => LycaonError::new_err("more key messages than the key header announces"),
        })
    }

    /// Every key message of the session has come: waits for the parse; returns the keys' size in
    /// memory. Errors: the messages were incomplete or wrong, or none came.
    fn keys_complete(&self, py: Python<'_>, session: u64) -> PyResult<usize> {
        py.detach(|| self.finish_keys(session))
    }

    fn has_keys(&self, session: u64) -> PyResult<bool> {
        self.inner.has_keys(session).map_err(err)
    }

    fn end_session(&self, session: u64) -> PyResult<()> {
        if let Some(a) = self.arriving()?.remove(&session) {
            // The parse sees the end of its messages and stops with an error nobody needs.
            drop(a.messages);
            let _ = a.parse.join();
        }
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
