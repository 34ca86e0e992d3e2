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

// a = a + b (op 0) or a - b (op 1) point-wise, all values in [0, q).
extern "C" __global__ void lycaon_add_sub(u64* a, const u64* b, const u64* mods, u32 n, u32 op) {
    const u64 k = lyc_thread_x();
    if (k >= n) return;
    const u64 limb = blockIdx.y;
    const u64 idx = limb * n + k;
    const u64 q = mods[limb * MOD_STRIDE];
    if (op == 0) {
        const u64 s = a[idx] + b[idx];
        a[idx] = s >= q ? s - q : s;
    } else {
        a[idx] = lyc_sub_mod(a[idx], b[idx], q);
    }
}

// Limb i of a times (op 0) or plus (op 1) the constant c_i = re_i + im_i w_i, where w is the NTT
// form of X^(n/2) (imag_unit, read only when im_i != 0): consts[2 i ..] = re_i, im_i.
extern "C" __global__ void lycaon_limb_constants(u64* a, const u64* consts, const u64* imag_unit, const u64* mods,
                                                 u32 n, u32 op) {
    const u64 k = lyc_thread_x();
    if (k >= n) return;
    const u64 limb = blockIdx.y;
    const u64 idx = limb * n + k;
    const u64* mod = mods + limb * MOD_STRIDE;
    const u64 q = mod[0];
    u64 c = consts[2 * limb];
    const u64 im = consts[2 * limb + 1];
    if (im != 0) {
        const u64 s = c + lyc_mul_mod(im, imag_unit[idx], mod);
        c = s >= q ? s - q : s;
    }
    if (op == 0) {
        a[idx] = lyc_mul_mod(a[idx], c, mod);
    } else {
        const u64 s = a[idx] + c;
        a[idx] = s >= q ? s - q : s;
    }
}

// The tensor product of (a0, a1) and (b0, b1): d0 = a0 b0, d1 = a0 b1 + a1 b0 (one 128-bit sum,
// reduced once), d2 = a1 b1.
extern "C" __global__ void lycaon_tensor(u64* d0, u64* d1, u64* d2, const u64* a0, const u64* a1, const u64* b0,
                                         const u64* b1, const u64* mods, u32 n) {
    const u64 k = lyc_thread_x();
    if (k >= n) return;
    const u64 limb = blockIdx.y;
    const u64 idx = limb * n + k;
    const u64* mod = mods + limb * MOD_STRIDE;
    d0[idx] = lyc_mul_mod(a0[idx], b0[idx], mod);
    d2[idx] = lyc_mul_mod(a1[idx], b1[idx], mod);
    u64 lo = 0, hi = 0;
    lyc_mac_u128(&lo, &hi, a0[idx], b1[idx]);
    lyc_mac_u128(&lo, &hi, a1[idx], b0[idx]);
    d1[idx] = lyc_reduce_u128(lo, hi, mod);
}

// acc += a b point-wise (one term of a plaintext-ciphertext dot product), fully reduced.
extern "C" __global__ void lycaon_mul_add(u64* acc, const u64* a, const u64* b, const u64* mods, u32 n) {
    const u64 k = lyc_thread_x();
    if (k >= n) return;
    const u64 limb = blockIdx.y;
    const u64 idx = limb * n + k;
    const u64* mod = mods + limb * MOD_STRIDE;
    const u64 q = mod[0];
    const u64 s = acc[idx] + lyc_mul_mod(a[idx], b[idx], mod);
    acc[idx] = s >= q ? s - q : s;
}
