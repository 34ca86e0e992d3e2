// Shared device arithmetic for Lycaon's CUDA kernels. Every kernel file is compiled after this
// one in a single NVRTC program (src/kernels.rs concatenates them), and the host emulation
// (emulate/emulate.cpp) includes the same files in the same order.
//
// Residues are 64-bit words below q < 2^62. Each helper repeats, step by step, the arithmetic of
// lycaon_math::Modulus (Barrett with floor(2^128 / q), Shoup with floor(w 2^64 / q)), so that a
// kernel's outputs equal the CPU's bit for bit.
//
// Rule for every kernel here: no thread reads a word that another thread of the same launch
// writes, except through shared memory between two __syncthreads() barriers that every thread of
// the block reaches (the NTT's tail and head kernels). Other cross-thread dependencies (the NTT's
// global stages) are separate launches. That is what makes the emulation (blocks one after
// another; threads one after another, or, in a kernel with barriers, one fiber per thread
// switched at each barrier) equal to any parallel schedule on a device.

// Dynamic shared memory (the launch sizes it). The emulation hands each block one host array.
#ifdef LYC_EMULATION
#define LYC_DYNAMIC_SHARED(name) u64* name = lyc_emulated_shared
#else
#define LYC_DYNAMIC_SHARED(name) extern __shared__ u64 name[]
#endif

typedef unsigned long long u64;
typedef unsigned int u32;

// Per-limb modulus parameters, MOD_STRIDE words per limb: q, then floor(2^128 / q) as its high
// and low words.
#define MOD_STRIDE 3

// x mod q for the 128-bit x = hi 2^64 + lo: Modulus::reduce_u128 word by word (the quotient
// estimate from the 128-bit ratio is off by at most 2, hence two corrections).
__device__ __forceinline__ u64 lyc_reduce_u128(u64 lo, u64 hi, const u64* mod) {
    const u64 q = mod[0], ratio_hi = mod[1], ratio_lo = mod[2];
    const u64 lo_lo = __umul64hi(lo, ratio_lo);
    const u64 lo_hi_low = lo * ratio_hi;
    const u64 lo_hi_high = __umul64hi(lo, ratio_hi);
    const u64 hi_lo_low = hi * ratio_lo;
    const u64 hi_lo_high = __umul64hi(hi, ratio_lo);
    // mid = lo_lo + low(lo * ratio_hi) + low(hi * ratio_lo) < 3 2^64: keep its carries.
    const u64 mid1 = lo_lo + lo_hi_low;
    u64 carry = mid1 < lo_lo;
    const u64 mid2 = mid1 + hi_lo_low;
    carry += mid2 < mid1;
    // Only the low word of the quotient estimate matters (the CPU truncates it too).
    const u64 q_hat = hi * ratio_hi + lo_hi_high + hi_lo_high + carry;
    u64 r = lo - q_hat * q;
    if (r >= q) r -= q;
    if (r >= q) r -= q;
    return r;
}

// a b mod q (Modulus::mul).
__device__ __forceinline__ u64 lyc_mul_mod(u64 a, u64 b, const u64* mod) {
    return lyc_reduce_u128(a * b, __umul64hi(a, b), mod);
}

// a w mod q in [0, 2q) for any 64-bit a, with w's Shoup constant (HarveyNtt::mul_lazy).
__device__ __forceinline__ u64 lyc_mul_shoup_lazy(u64 a, u64 w, u64 w_shoup, u64 q) {
    const u64 q_hat = __umul64hi(a, w_shoup);
    return a * w - q_hat * q;
}

// a w mod q in [0, q) (Modulus::mul_shoup).
__device__ __forceinline__ u64 lyc_mul_shoup(u64 a, u64 w, u64 w_shoup, u64 q) {
    const u64 r = lyc_mul_shoup_lazy(a, w, w_shoup, q);
    return r >= q ? r - q : r;
}

// a - b mod q for a, b in [0, q) (Modulus::sub).
__device__ __forceinline__ u64 lyc_sub_mod(u64 a, u64 b, u64 q) {
    return a >= b ? a - b : a + q - b;
}

// acc += a b on a 128-bit accumulator held as two words (u128 wraps the same way).
__device__ __forceinline__ void lyc_mac_u128(u64* acc_lo, u64* acc_hi, u64 a, u64 b) {
    const u64 lo = a * b;
    const u64 sum = *acc_lo + lo;
    *acc_hi += __umul64hi(a, b) + (sum < lo);
    *acc_lo = sum;
}

// The low log_n bits of k reversed (lycaon_math::bit_reverse), 1 <= log_n <= 31.
__device__ __forceinline__ u32 lyc_bit_reverse(u32 k, u32 log_n) {
    return __brev(k) >> (32 - log_n);
}

// The global thread index along x: the coefficient (or butterfly) this thread handles.
__device__ __forceinline__ u64 lyc_thread_x() {
    return (u64)blockIdx.x * blockDim.x + threadIdx.x;
}
