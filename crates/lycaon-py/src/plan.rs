//! Bindings of the planning layer: the packing, dataflow and accelerator simulator (JSON in, JSON
//! out, so the Python side builds sweeps and reports from plain data).

use lycaon_plan::PlanError;
use pyo3::prelude::*;

use crate::LycaonError;

fn plan_err(e: PlanError) -> PyErr {
    LycaonError::new_err(e.to_string())
}

/// Runs a simulation request (`{"model", "packing", "arch", "batch"}` as JSON) and returns a JSON
/// list of results, one per packing. Releases the GIL while it runs.
#[pyfunction]
pub fn simulate_json(py: Python<'_>, request: &str) -> PyResult<String> {
    let request = request.to_owned();
    py.detach(move || lycaon_plan::simulate::simulate_json(&request)).map_err(plan_err)
}

/// The reproduction table against 000 (Hyena, IEEE S&P 2024) as JSON. Releases the GIL.
#[pyfunction]
pub fn reproduction_json(py: Python<'_>) -> PyResult<String> {
    py.detach(lycaon_plan::simulate::reproduction_json).map_err(plan_err)
}

/// The 003 (Cheetah) design-space exploration as JSON: HE-PTune per layer, every design of the
/// sweep, the Pareto fronts of latency against area and power, and Table VI. Releases the GIL.
#[pyfunction]
pub fn dse_json(py: Python<'_>, request: &str) -> PyResult<String> {
    let request = request.to_owned();
    py.detach(move || lycaon_plan::simulate::dse::dse_json(&request)).map_err(plan_err)
}

/// The reproduction table against 003 (Cheetah, HPCA 2021) as JSON. Releases the GIL.
#[pyfunction]
pub fn reproduction_003_json(py: Python<'_>) -> PyResult<String> {
    py.detach(lycaon_plan::simulate::dse::reproduction_003_json).map_err(plan_err)
}

/// The TOML text of a built-in architecture (`hyena` or `f1`), the starting point of a custom one.
#[pyfunction]
pub fn arch_toml(name: &str) -> PyResult<String> {
    lycaon_plan::simulate::accelerator::ArchConfig::from_name_or_toml(name).and_then(|a| a.to_toml()).map_err(plan_err)
}
