//! Bindings of the hybrid-mode planner (noise and cost models, per-layer tuning): JSON in, JSON
//! out, the GIL released while it calibrates and searches.

use pyo3::prelude::*;

use crate::LycaonError;

/// Tunes a network's linear layers (see `lycaon_plan::hybrid::plan_json` for the request) and
/// returns the plan as JSON.
#[pyfunction]
pub fn plan_json(py: Python<'_>, request: &str) -> PyResult<String> {
    let request = request.to_owned();
    py.detach(move || lycaon_plan::hybrid::plan_json(&request)).map_err(|e| LycaonError::new_err(e.to_string()))
}

/// The rotation-keyset planner (power-of-two, all-required and level-aware keysets with their
/// exact key bytes and predicted rotation latency; see `lycaon_plan::keyset::keyset_json`).
#[pyfunction]
pub fn keyset_json(py: Python<'_>, request: &str) -> PyResult<String> {
    let request = request.to_owned();
    py.detach(move || lycaon_plan::keyset::keyset_json(&request)).map_err(|e| LycaonError::new_err(e.to_string()))
}
