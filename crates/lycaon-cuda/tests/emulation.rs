//! The CUDA kernels, compiled as host C++ and run one grid thread at a time, against CpuBackend
//! bit for bit (feature `emulate`). This checks the kernels' arithmetic and the backend's host
//! code; it cannot check anything about a real device (see tests/gpu.rs).
#![cfg(feature = "emulate")]

mod common;

use lycaon_backend::conformance::check_backend;
use lycaon_cuda::host::{KernelExec, LaunchDims};
use lycaon_cuda::{EmulatedBackend, EmulatedExec};

#[test]
fn emulated_kernels_pass_the_backend_conformance_suite() {
    for n in [16, 1024] {
        check_backend(&EmulatedBackend::new(), n);
        check_backend(&EmulatedBackend::reversed(), n);
    }
}

#[test]
fn emulated_kernels_match_the_cpu_on_real_prime_sets() {
    for (i, set) in common::real_prime_sets(5).iter().enumerate() {
        common::check_kernels(&EmulatedBackend::new(), set, i as u8);
    }
}

#[test]
fn walking_grids_backwards_changes_nothing() {
    // Any dependence between threads of one launch would show as a difference here.
    for (i, set) in common::real_prime_sets(3).iter().enumerate() {
        common::check_kernels(&EmulatedBackend::reversed(), set, 100 + i as u8);
    }
}

#[test]
fn emulated_backend_rejects_what_the_cpu_rejects() {
    common::check_errors(&EmulatedBackend::new());
}

#[test]
fn bench_reports_agreement_for_the_emulation() {
    let report = lycaon_cuda::bench::bench_backend(&EmulatedBackend::new(), 8, 3, 1).unwrap();
    assert!(report.kernels.iter().all(|k| k.matches_cpu), "{report:?}");
}

#[test]
fn a_launch_the_kernel_cannot_run_is_an_error_not_a_panic() {
    let exec = EmulatedExec::default();
    let (mut short, other) = (vec![0u64; 8], vec![0u64; 16]);
    let err = exec.mul_pointwise(LaunchDims::cover(16, 1, 1), &mut short, &other, &vec![0; 3], 16).unwrap_err();
    assert!(err.0.contains("lycaon_mul_pointwise: a has 8 words, the launch reads 16"), "{err:?}");
    let err = exec.automorphism_ntt(LaunchDims::cover(16, 1, 1), &mut other.clone(), &other, 16, 40, 3).unwrap_err();
    assert!(err.0.contains("log_n = 40"), "{err:?}");
}

#[test]
fn resident_ckks_on_the_emulated_device_equals_the_host_evaluator() {
    use std::sync::Arc;
    // Every ResidentEvaluator operation (add, products, rescale, ModUp/ModDown key switching,
    // hoisted rotations, errors) through the kernels, against lycaon_ckks::Evaluator.
    lycaon_ckks::resident_conformance::check_resident_evaluator(Arc::new(EmulatedBackend::new()), 256);
    lycaon_ckks::resident_conformance::check_resident_evaluator(Arc::new(EmulatedBackend::reversed()), 64);
}

#[test]
fn resident_operations_reuse_pooled_memory_after_the_first() {
    use std::sync::Arc;
    let backend = Arc::new(EmulatedBackend::new());
    let (eval, a, b) = lycaon_ckks::resident_conformance::session(backend.clone(), 64);
    let step = |_: usize| {
        let p = eval.mul_relin_rescale(&a, &b).unwrap();
        let r = eval.rotate_hoisted(&p, &[1, -3]).unwrap();
        eval.add(&r[0], &r[1]).unwrap()
    };
    drop(step(0));
    let warm = backend.pool_stats();
    for i in 0..3 {
        drop(step(i));
    }
    let after = backend.pool_stats();
    assert_eq!(after.allocations, warm.allocations, "an operation allocated device memory after warm-up: {warm:?} -> {after:?}");
    assert!(after.reuses > warm.reuses);
}

#[test]
fn shared_memory_ntt_with_blocks_of_any_size_matches_the_cpu() {
    // Small blocks make n = 1024 run global stages before the shared-memory tail (forward) and
    // after the shared-memory head (inverse); 512 threads do the whole transform in shared memory.
    for threads in [1, 4, 32, 512] {
        check_backend(&EmulatedBackend::new().with_chunk_threads(threads), 1024);
    }
    check_backend(&EmulatedBackend::reversed().with_chunk_threads(8), 1024);
    let small_blocks = std::sync::Arc::new(EmulatedBackend::reversed().with_chunk_threads(16));
    lycaon_ckks::resident_conformance::check_resident_evaluator(small_blocks, 256);
}

#[test]
fn bootstrapping_on_the_emulated_device_equals_the_host_bootstrap() {
    // The whole circuit resident on the device (ModRaise with the encapsulation key switches,
    // CoeffsToSlots, EvalMod's Chebyshev evaluation and double angles, SlotsToCoeffs), through
    // the kernels, bit for bit the host's bootstrap: toy shape, n = 1024, 16 slots.
    lycaon_ckks::resident_conformance::check_resident_bootstrap(std::sync::Arc::new(EmulatedBackend::new()), 10, 4);
}

#[test]
fn the_fhe_layers_on_the_emulated_device_equal_the_host() {
    // MPConv, the BSGS convolution, CAConv/RAConv and pooling + FC with every tensor, key and
    // plaintext on the device (plaintexts encoded there), through the kernels: ResNet-20's layers
    // at n = 2048. Small NTT blocks keep the fiber emulation quick.
    lycaon_nn::fhe::resident_conformance::check_resident_layers(std::sync::Arc::new(EmulatedBackend::new().with_chunk_threads(64)), 11);
}
