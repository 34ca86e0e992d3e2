// Element-wise kernels over all limbs: one thread per coefficient, grid.y = limb.

// a *= b point-wise (Poly<Ntt>::mul_assign).
extern "C" __global__ void lycaon_mul_pointwise(u64* a, const u64* b, const u64* mods, u32 n) {
    const u64 k = lyc_thread_x();
    if (k >= n) return;
    const u64 limb = blockIdx.y;
    const u64 idx = limb * n + k;
    a[idx] = lyc_mul_mod(a[idx], b[idx], mods + limb * MOD_STRIDE);
}

// X -> X^g in NTT form: output slot k reads input slot brv(((2 brv(k) + 1) g mod 2n - 1) / 2)
// (Automorphism::ntt_source, computed here instead of uploading the table). `out` and `input`
// must not overlap.
extern "C" __global__ void lycaon_automorphism_ntt(u64* out, const u64* input, u32 n, u32 log_n, u64 galois) {
    const u64 k = lyc_thread_x();
    if (k >= n) return;
    const u64 limb = blockIdx.y;
    const u64 two_n = 2 * (u64)n;
    const u64 exponent = ((2 * (u64)lyc_bit_reverse((u32)k, log_n) + 1) * galois) % two_n;
    const u32 source = lyc_bit_reverse((u32)((exponent - 1) / 2), log_n);
    out[limb * n + k] = input[limb * n + source];
}
