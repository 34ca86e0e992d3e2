//! The resident evaluator over host memory (CpuBackend) equals the host evaluator bit for bit;
//! lycaon-cuda runs the same suite over its emulated device.

use std::sync::Arc;

use lycaon_backend::CpuBackend;
use lycaon_ckks::resident_conformance::check_resident_evaluator;

#[test]
fn resident_evaluator_on_host_memory_equals_the_evaluator() {
    check_resident_evaluator(Arc::new(CpuBackend), 1024);
    check_resident_evaluator(Arc::new(CpuBackend), 64);
}

#[test]
fn resident_bootstrap_on_host_memory_equals_the_host_bootstrap() {
    // Sparse slots (packed EvalMod) and full slots, dense secret.
    lycaon_ckks::resident_conformance::check_resident_bootstrap(Arc::new(CpuBackend), 10, 4);
    lycaon_ckks::resident_conformance::check_resident_bootstrap(Arc::new(CpuBackend), 10, 9);
}
