// Key-switching inner product: out_o = sum_j digits_j keys_{j,o} point-wise, accumulated in 128
// bits (two words) and reduced once, as CpuBackend::inner_product (mul_accumulate_lazy then
// reduce_lazy). The host gathers, for every output o and digit j, the key limbs that match the
// digits' limbs, so all three arrays share the digits' basis:
//   digits[(j limbs + i) n + k], keys[((o num_digits + j) limbs + i) n + k], out[(o limbs + i) n + k].
// grid.y = limb i, grid.z = output o.
extern "C" __global__ void lycaon_inner_product(u64* out, const u64* digits, const u64* keys, const u64* mods,
                                                u32 n, u32 limbs, u32 num_digits) {
    const u64 k = lyc_thread_x();
    if (k >= n) return;
    const u64 i = blockIdx.y;
    const u64 o = blockIdx.z;
    u64 acc_lo = 0, acc_hi = 0;
    for (u32 j = 0; j < num_digits; ++j) {
        const u64 x = digits[((u64)j * limbs + i) * n + k];
        const u64 y = keys[((o * num_digits + j) * limbs + i) * n + k];
        lyc_mac_u128(&acc_lo, &acc_hi, x, y);
    }
    out[(o * limbs + i) * n + k] = lyc_reduce_u128(acc_lo, acc_hi, mods + i * MOD_STRIDE);
}

// The same inner product against a resident key, its two outputs in two buffers: the key stays
// as uploaded, every output and digit over the key's own extended basis (key_limbs_total limbs),
// and key_limbs[i] names the key limb that matches limb i of the digits:
// keys[((o key_digits + j) key_limbs_total + key_limbs[i]) n + k]. grid.z = output o (2).
extern "C" __global__ void lycaon_inner_product_resident(u64* out0, u64* out1, const u64* digits, const u64* keys,
                                                         const u64* key_limbs, const u64* mods, u32 n, u32 limbs,
                                                         u32 num_digits, u32 key_digits, u32 key_limbs_total) {
    const u64 k = lyc_thread_x();
    if (k >= n) return;
    const u64 i = blockIdx.y;
    const u64 o = blockIdx.z;
    const u64 kl = key_limbs[i];
    u64 acc_lo = 0, acc_hi = 0;
    for (u32 j = 0; j < num_digits; ++j) {
        const u64 x = digits[((u64)j * limbs + i) * n + k];
        const u64 y = keys[((o * key_digits + j) * key_limbs_total + kl) * n + k];
        lyc_mac_u128(&acc_lo, &acc_hi, x, y);
    }
    (o == 0 ? out0 : out1)[i * n + k] = lyc_reduce_u128(acc_lo, acc_hi, mods + i * MOD_STRIDE);
}

// The resident inner product's outputs on the special primes fused with the first stages of their
// inverse NTT (ModDown's first step): block (chunk, special prime j, output o) computes the inner
// products of its 2 blockDim.x coefficients of limb q_limbs + j straight into shared memory, runs
// the inverse stages h = n/2 .. h_min there (as lycaon_ntt_inverse_head, with `last_consts`
// when h_min = 1), and stores them to out_o[j n ..]. Tables and mods are the special primes'.
extern "C" __global__ void lycaon_inner_product_intt_head(u64* out0, u64* out1, const u64* digits, const u64* keys,
                                                          const u64* key_limbs, const u64* mods, const u64* inv_roots,
                                                          const u64* inv_roots_shoup, const u64* last_consts, u32 n,
                                                          u32 limbs, u32 q_limbs, u32 num_digits, u32 key_digits,
                                                          u32 key_limbs_total, u32 h_min) {
    LYC_DYNAMIC_SHARED(s);
    const u64 threads = blockDim.x;
    const u64 pl = blockIdx.y;
    const u64 i = q_limbs + pl;
    const u64 o = blockIdx.z;
    const u64 base = (u64)blockIdx.x * 2 * threads;
    const u64 kl = key_limbs[i];
    const u64* mod = mods + pl * MOD_STRIDE;
    for (u64 half_index = 0; half_index < 2; ++half_index) {
        const u64 local = threadIdx.x + half_index * threads;
        const u64 k = base + local;
        u64 acc_lo = 0, acc_hi = 0;
        for (u32 j = 0; j < num_digits; ++j) {
            const u64 x = digits[((u64)j * limbs + i) * n + k];
            const u64 y = keys[((o * key_digits + j) * key_limbs_total + kl) * n + k];
            lyc_mac_u128(&acc_lo, &acc_hi, x, y);
        }
        s[local] = lyc_reduce_u128(acc_lo, acc_hi, mod);
    }
    __syncthreads();
    const u64 half = n / 2;
    const u64 q = mod[0];
    const u64* c = last_consts + 4 * pl;
    const u64 jb = (u64)blockIdx.x * threads + threadIdx.x;
    for (u64 h = half; h >= h_min && h >= 1; h /= 2) {
        u64 g, x, y;
        lyc_butterfly_pair(jb, half / h, &g, &x, &y);
        lyc_inverse_butterfly(&s[x - base], &s[y - base], inv_roots[pl * n + h + g], inv_roots_shoup[pl * n + h + g], h == 1 ? c : 0, q);
        __syncthreads();
    }
    u64* out = o == 0 ? out0 : out1;
    out[pl * n + base + threadIdx.x] = s[threadIdx.x];
    out[pl * n + base + threadIdx.x + threads] = s[threadIdx.x + threads];
}
