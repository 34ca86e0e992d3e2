//! The CUDA C sources of the kernels, embedded in the binary. NVRTC compiles them as one program
//! (common.cuh first) when a [`crate::CudaBackend`] is created; the `emulate` feature compiles
//! the same files as host C++ (emulate/emulate.cpp includes them in the same order).

/// The kernel files in program order; common.cuh defines what the others use.
pub const KERNEL_FILES: [(&str, &str); 6] = [
    ("common.cuh", include_str!("../kernels/common.cuh")),
    ("ntt.cu", include_str!("../kernels/ntt.cu")),
    ("elementwise.cu", include_str!("../kernels/elementwise.cu")),
    ("base_conversion.cu", include_str!("../kernels/base_conversion.cu")),
    ("inner_product.cu", include_str!("../kernels/inner_product.cu")),
    ("encoding.cu", include_str!("../kernels/encoding.cu")),
];

/// Every `extern "C" __global__` entry point, as the host looks them up by name.
pub const KERNEL_NAMES: [&str; 21] = [
    "lycaon_ntt_forward_stage",
    "lycaon_ntt_inverse_stage",
    "lycaon_mul_pointwise",
    "lycaon_automorphism_ntt",
    "lycaon_convert_scale",
    "lycaon_convert_accumulate",
    "lycaon_inner_product",
    "lycaon_add_sub",
    "lycaon_limb_constants",
    "lycaon_tensor",
    "lycaon_ntt_forward_last_sub_scale",
    "lycaon_rescale_spread",
    "lycaon_inner_product_resident",
    "lycaon_ntt_forward_tail",
    "lycaon_ntt_inverse_head",
    "lycaon_mul_add",
    "lycaon_fft_inverse_stage",
    "lycaon_fft_finish",
    "lycaon_abs_max",
    "lycaon_encode_round",
    "lycaon_inner_product_intt_head",
];

/// The kernels that share data through shared memory and synchronise with barriers (the
/// emulation runs them with one fiber per thread).
pub const BARRIER_KERNELS: [&str; 3] = ["lycaon_ntt_forward_tail", "lycaon_ntt_inverse_head", "lycaon_inner_product_intt_head"];

/// The whole NVRTC program: the files concatenated in order, each under a `#line` directive so
/// that compiler messages name the original file and line.
pub fn program_source() -> String {
    let mut source = String::new();
    for (name, text) in KERNEL_FILES {
        source.push_str(&format!("#line 1 \"{name}\"\n"));
        source.push_str(text);
        source.push('\n');
    }
    source
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_is_defined_once_in_the_program() {
        let source = program_source();
        for name in KERNEL_NAMES {
            let pattern = format!("extern \"C\" __global__ void {name}(");
            assert_eq!(source.matches(&pattern).count(), 1, "{name}");
        }
        // Only the named barrier kernels may synchronise: the emulation runs just those as fibers.
        let code: String = source.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
        for kernel in code.split("extern \"C\" __global__ void ").skip(1) {
            let name = kernel.split('(').next().unwrap_or("");
            let synchronises = kernel.contains("__syncthreads") || kernel.contains("LYC_DYNAMIC_SHARED");
            assert_eq!(synchronises, BARRIER_KERNELS.contains(&name), "{name}");
        }
    }
}
