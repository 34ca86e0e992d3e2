//! With the `emulate` feature, compiles the CUDA kernels as host C++ (see emulate/emulate.cpp).
//! Without it there is nothing to build: the `cuda` feature compiles the kernels at run time.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "emulate")]
    if std::env::var_os("CARGO_FEATURE_EMULATE").is_some() {
        for file in ["emulate/emulate.cpp", "emulate/cuda_shim.h", "kernels"] {
            println!("cargo:rerun-if-changed={file}");
        }
        cc::Build::new()
            .cpp(true)
            .file("emulate/emulate.cpp")
            .flag_if_supported("-std=c++17")
            // CUDA's __dadd_rn/__dmul_rn never fuse; neither may the host compiler.
            .flag_if_supported("-ffp-contract=off")
            .opt_level(2)
            .warnings(true)
            .compile("lycaon_cuda_emulate");
    }
}
