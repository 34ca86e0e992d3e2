//! The CUDA backend on a real device against CpuBackend bit for bit (feature `cuda`). Each test
//! prints why and passes without checking anything when no driver, NVRTC or device is present:
//! `cargo test -p lycaon-cuda --features cuda --release -- --nocapture` shows the reason.
//! NOTE: as of this commit these tests have never run on a GPU.
#![cfg(feature = "cuda")]

mod common;

use lycaon_cuda::CudaBackend;

fn backend_or_skip(test: &str) -> Option<CudaBackend> {
    match CudaBackend::new(0) {
        Ok(b) => Some(b),
        Err(e) => {
            eprintln!("skipping {test}: {e}");
            None
        }
    }
}

#[test]
fn gpu_passes_the_backend_conformance_suite() {
    let Some(gpu) = backend_or_skip("gpu_passes_the_backend_conformance_suite") else { return };
    eprintln!("running on {:?}", gpu.device_info());
    for n in [16, 1024, 1 << 16] {
        lycaon_backend::conformance::check_backend(&gpu, n);
    }
}

#[test]
fn gpu_matches_the_cpu_on_real_prime_sets() {
    let Some(gpu) = backend_or_skip("gpu_matches_the_cpu_on_real_prime_sets") else { return };
    for (i, set) in common::real_prime_sets(24).iter().enumerate() {
        common::check_kernels(&gpu, set, i as u8);
    }
}

#[test]
fn gpu_rejects_what_the_cpu_rejects() {
    let Some(gpu) = backend_or_skip("gpu_rejects_what_the_cpu_rejects") else { return };
    common::check_errors(&gpu);
}

#[test]
fn gpu_bench_agrees_with_the_cpu() {
    let Some(gpu) = backend_or_skip("gpu_bench_agrees_with_the_cpu") else { return };
    let report = lycaon_cuda::bench::bench_backend(&gpu, 16, 24, 5).unwrap();
    eprintln!("{report:#?}");
    assert!(report.kernels.iter().all(|k| k.matches_cpu), "{report:?}");
}

#[test]
fn gpu_resident_ckks_equals_the_host_evaluator() {
    let Some(gpu) = backend_or_skip("gpu_resident_ckks_equals_the_host_evaluator") else { return };
    // Ciphertexts, keys and diagonals in device memory: every ResidentEvaluator operation, the
    // linear transforms and Chebyshev evaluation, bit for bit the host's.
    let gpu = std::sync::Arc::new(gpu);
    for n in [1024, 1 << 13] {
        lycaon_ckks::resident_conformance::check_resident_evaluator(gpu.clone(), n);
    }
    eprintln!("pool: {:?}", gpu.pool_stats());
}

#[test]
fn gpu_shared_memory_ntt_with_small_blocks_matches_the_cpu() {
    let Some(gpu) = backend_or_skip("gpu_shared_memory_ntt_with_small_blocks_matches_the_cpu") else { return };
    // 32-thread blocks make n = 2^16 run 10 global stages around the shared-memory ones.
    lycaon_backend::conformance::check_backend(&gpu.with_chunk_threads(32), 1 << 16);
}

#[test]
fn gpu_bootstrap_equals_the_host_bootstrap() {
    let Some(gpu) = backend_or_skip("gpu_bootstrap_equals_the_host_bootstrap") else { return };
    // The toy shape at n = 2^12 (sparse and full slots), the whole circuit resident.
    let gpu = std::sync::Arc::new(gpu);
    lycaon_ckks::resident_conformance::check_resident_bootstrap(gpu.clone(), 12, 5);
    lycaon_ckks::resident_conformance::check_resident_bootstrap(gpu, 12, 11);
}

#[test]
fn gpu_fhe_layers_equal_the_host() {
    let Some(gpu) = backend_or_skip("gpu_fhe_layers_equal_the_host") else { return };
    // ResNet-20's layer kinds with every tensor, key and plaintext on the device, at n = 2^12.
    lycaon_nn::fhe::resident_conformance::check_resident_layers(std::sync::Arc::new(gpu), 12);
}
