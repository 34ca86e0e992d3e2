// Base conversion Q -> P of a coefficient-form polynomial (lycaon_math::BaseConverter), in two
// launches: scale every source limb, then accumulate every target limb.

// scaled_i = x_i (Q/q_i)^-1 mod q_i; punctured_inv[2 i ..] = that constant and its Shoup constant.
// grid.y = source limb i.
extern "C" __global__ void lycaon_convert_scale(u64* scaled, const u64* input, const u64* mods_from,
                                                const u64* punctured_inv, u32 n) {
    const u64 k = lyc_thread_x();
    if (k >= n) return;
    const u64 i = blockIdx.y;
    const u64 idx = i * n + k;
    scaled[idx] = lyc_mul_shoup(input[idx], punctured_inv[2 * i], punctured_inv[2 * i + 1], mods_from[i * MOD_STRIDE]);
}

// out_j = sum_i scaled_i (Q/q_i mod p_j) mod p_j, accumulated in 128 bits and reduced once
// (convert_approximate: x + u Q for some 0 <= u < L). With `centered`, subtracts v (Q mod p_j)
// where v = round(sum_i scaled_i / q_i) in double precision, summed in the CPU's order with
// explicitly rounded operations (no FMA contraction), so v is the CPU's v (convert_centered).
// punctured_mod_to[j l_from + i] = Q/q_i mod p_j; inv_q_from[i] = 1.0 / q_i; q_mod_to[j] = Q mod p_j.
// grid.y = target limb j.
extern "C" __global__ void lycaon_convert_accumulate(u64* out, const u64* scaled, const u64* mods_to,
                                                     const u64* punctured_mod_to, const double* inv_q_from,
                                                     const u64* q_mod_to, u32 n, u32 l_from, u32 centered) {
    const u64 k = lyc_thread_x();
    if (k >= n) return;
    const u64 j = blockIdx.y;
    const u64* p = mods_to + j * MOD_STRIDE;
    u64 acc_lo = 0, acc_hi = 0;
    for (u32 i = 0; i < l_from; ++i) {
        lyc_mac_u128(&acc_lo, &acc_hi, scaled[(u64)i * n + k], punctured_mod_to[j * l_from + i]);
    }
    u64 r = lyc_reduce_u128(acc_lo, acc_hi, p);
    if (centered) {
        double fraction_sum = 0.0;
        for (u32 i = 0; i < l_from; ++i) {
            fraction_sum = __dadd_rn(fraction_sum, __dmul_rn(__ull2double_rn(scaled[(u64)i * n + k]), inv_q_from[i]));
        }
        const u64 v = (u64)round(fraction_sum);
        r = lyc_sub_mod(r, lyc_mul_mod(v, q_mod_to[j], p), p[0]);
    }
    out[j * n + k] = r;
}

// Rescaling's remainder, spread over the remaining primes: out_i = [x]_{q_last} centred, mod q_i,
// for x = last[k] in [0, q_last): x, or x - q_last when x > q_last / 2. last_mod[i] = q_last mod q_i.
// grid.y = target limb i.
extern "C" __global__ void lycaon_rescale_spread(u64* out, const u64* last, const u64* last_mod, const u64* mods,
                                                 u32 n, u64 q_last) {
    const u64 k = lyc_thread_x();
    if (k >= n) return;
    const u64 i = blockIdx.y;
    const u64* mod = mods + i * MOD_STRIDE;
    const u64 q = mod[0];
    const u64 x = last[k];
    const u64 r = lyc_reduce_u128(x, 0, mod);
    out[i * n + k] = x > q_last / 2 ? lyc_sub_mod(r, last_mod[i], q) : r;
}
