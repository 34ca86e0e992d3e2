// Just enough of CUDA's device dialect for the kernels in ../kernels to compile as host C++ and
// run one grid thread at a time. Test builds only (feature `emulate`); never part of a GPU build.
//
// Faithfulness: the integer intrinsics are defined exactly (unsigned __int128 products); the
// double intrinsics are plain IEEE operations, which equal CUDA's _rn variants because build.rs
// compiles with -ffp-contract=off and x86-64 uses SSE2 doubles. Running threads one after another
// equals a parallel run only because no kernel reads what another thread of its launch writes
// (the rule stated in kernels/common.cuh); the tests also run every grid backwards to catch a
// kernel that depended on thread order.
#pragma once

#include <cmath>
#include <cstdint>

struct lyc_dim3 {
    unsigned x, y, z;
};

// The current thread's coordinates, set by the launch loops in emulate.cpp. Thread-local because
// Rust's test harness runs tests on several threads at once.
extern thread_local lyc_dim3 blockIdx;
extern thread_local lyc_dim3 threadIdx;
extern thread_local lyc_dim3 blockDim;
extern thread_local lyc_dim3 gridDim;

#define __global__
#define __device__ static
#define __forceinline__ inline

// Kernels with barriers (shared memory) run one fiber per thread: __syncthreads switches back to
// the block's scheduler in emulate.cpp, which resumes every thread of the block in turn.
#define LYC_EMULATION 1
#define LYC_EMULATED_SHARED_WORDS 4096
extern thread_local unsigned long long lyc_emulated_shared[LYC_EMULATED_SHARED_WORDS];
void __syncthreads();

// Reserved-looking names on purpose: they are CUDA's own intrinsics' names.
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}

static inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int b = 0; b < 32; ++b) {
        r = (r << 1) | ((x >> b) & 1u);
    }
    return r;
}

static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __longlong_as_double(long long x) {
    double d;
    __builtin_memcpy(&d, &x, sizeof d);
    return d;
}
static inline long long __double_as_longlong(double d) {
    long long x;
    __builtin_memcpy(&x, &d, sizeof x);
    return x;
}
static inline double __ull2double_rn(unsigned long long x) { return (double)x; }
