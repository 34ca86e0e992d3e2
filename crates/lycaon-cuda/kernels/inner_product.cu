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
