//! Bindings of the runtime's CKKS benchmark (`lycaon bench ckks`, Lycaon's side).

use pyo3::prelude::*;

use crate::fhe::backend_on;
use crate::hybrid::{err, json_err};

/// Each CKKS operation timed on this machine's CPU backend (the runtime's choice), its
/// precision and key bytes: `spec_json` = {log_n, log_q, log_p, log_scale, reps, lt_diagonals,
/// lt_level, hoisted, poly_degree, seed}; returns JSON. `device`: "cpu" or "cuda:N".
#[pyfunction]
#[pyo3(signature = (spec_json, device = "cpu"))]
pub fn ckks_bench_ops(py: Python<'_>, spec_json: &str, device: &str) -> PyResult<String> {
    let spec: lycaon_runtime::ckks_bench::OpsSpec = serde_json::from_str(spec_json).map_err(|e| json_err("benchmark spec", e))?;
    let backend = backend_on(Some(device))?;
    let out = py.detach(|| lycaon_runtime::ckks_bench::op_timings(&spec, backend)).map_err(err)?;
    Ok(out.to_string())
}

/// One logN = 16 full-slot bootstrapping, timed (keys, first call, second call); returns JSON.
/// On "cuda:N" the ciphertext, keys and diagonals stay in the device's memory (the resident
/// path), and the result is compared bit for bit with the host's bootstrap.
#[pyfunction]
#[pyo3(signature = (seed = 1, device = "cpu"))]
pub fn ckks_bench_bootstrap(py: Python<'_>, seed: u64, device: &str) -> PyResult<String> {
    let device = lycaon_runtime::Device::parse(device).map_err(|e| crate::ParameterError::new_err(e.to_string()))?;
    let out = py.detach(|| lycaon_runtime::resident_bench::bootstrap_timing_on(seed, device)).map_err(err)?;
    Ok(out.to_string())
}
