// Negacyclic NTT over all RNS limbs: one launch per butterfly stage (grid.y = limb), so the
// stages' cross-thread dependencies are ordered by the stream, not by __syncthreads.
//
// Algorithm: Harvey's lazy butterflies (values in [0, 4q) forward, [0, 2q) inverse), as
// lycaon_math::HarveyNtt, with the twiddles psi^brv(i) built on the host from the psi that the
// CPU's NTT plan uses (read off its transform of X). Outputs are fully reduced, so they equal the
// CPU's (tfhe-ntt) outputs bit for bit: the same transform, the same bit-reversed slot order.
//
// Tables are limb-major, n words per limb: roots[limb n + m + i] = psi^brv(m + i) mod q_limb.

// Butterfly j of a stage whose groups hold t butterflies each: its group i and the two slots
// x, y = x + t it combines (the same indexing for the forward and the inverse stages).
__device__ __forceinline__ void lyc_butterfly_pair(u64 j, u64 t, u64* i, u64* x, u64* y) {
    *i = j / t;
    *x = 2 * *i * t + (j - *i * t);
    *y = *x + t;
}

// One forward (Cooley-Tukey, Harvey lazy) butterfly on a[x], a[y] with twiddle w: inputs in
// [0, 4q), outputs in [0, 4q), or in [0, q) when `last` (the transform's last stage).
__device__ __forceinline__ void lyc_forward_butterfly(u64* ax, u64* ay, u64 w, u64 w_shoup, u64 q, bool last) {
    const u64 two_q = 2 * q;
    u64 u = *ax;
    if (u >= two_q) u -= two_q;
    const u64 v = lyc_mul_shoup_lazy(*ay, w, w_shoup, q);
    u64 out_x = u + v;
    u64 out_y = u + two_q - v;
    if (last) {
        if (out_x >= two_q) out_x -= two_q;
        if (out_x >= q) out_x -= q;
        if (out_y >= two_q) out_y -= two_q;
        if (out_y >= q) out_y -= q;
    }
    *ax = out_x;
    *ay = out_y;
}

// One inverse (Gentleman-Sande) butterfly on a[x], a[y] in [0, 2q): twiddle w for a stage before
// the last (outputs in [0, 2q)); for the last stage (`c` non-null: n^-1 and psi^-brv(1) n^-1 with
// their Shoup constants) the 1/n scaling and a full reduction to [0, q).
__device__ __forceinline__ void lyc_inverse_butterfly(u64* ax, u64* ay, u64 w, u64 w_shoup, const u64* c, u64 q) {
    const u64 two_q = 2 * q;
    const u64 u = *ax;
    const u64 v = *ay;
    if (c == 0) {
        u64 sum = u + v;
        if (sum >= two_q) sum -= two_q;
        *ax = sum;
        *ay = lyc_mul_shoup_lazy(u + two_q - v, w, w_shoup, q);
    } else {
        *ax = lyc_mul_shoup(u + v, c[0], c[1], q);
        *ay = lyc_mul_shoup(u + two_q - v, c[2], c[3], q);
    }
}

// Forward stage with m groups (m = 1, 2, ..., n/2) of t = n / (2m) butterflies each; the last
// stage (m = n/2) also reduces its outputs to [0, q).
extern "C" __global__ void lycaon_ntt_forward_stage(u64* data, const u64* roots, const u64* roots_shoup,
                                                    const u64* mods, u32 n, u32 m) {
    const u64 j = lyc_thread_x();
    const u64 half = n / 2;
    if (j >= half) return;
    const u64 limb = blockIdx.y;
    u64 i, x, y;
    lyc_butterfly_pair(j, half / m, &i, &x, &y);
    u64* a = data + limb * n;
    lyc_forward_butterfly(&a[x], &a[y], roots[limb * n + m + i], roots_shoup[limb * n + m + i], mods[limb * MOD_STRIDE], m == half);
}

// Inverse stage with h groups (h = n/2, ..., 2, 1) of t = n / (2h) butterflies each, twiddles
// psi^-brv(h + i). The last stage (h = 1) folds in the 1/n scaling and reduces to [0, q):
// last_consts[4 limb ..] = n^-1, its Shoup constant, psi^-brv(1) n^-1, its Shoup constant.
extern "C" __global__ void lycaon_ntt_inverse_stage(u64* data, const u64* inv_roots, const u64* inv_roots_shoup,
                                                    const u64* mods, const u64* last_consts, u32 n, u32 h) {
    const u64 j = lyc_thread_x();
    const u64 half = n / 2;
    if (j >= half) return;
    const u64 limb = blockIdx.y;
    u64 i, x, y;
    lyc_butterfly_pair(j, half / h, &i, &x, &y);
    u64* a = data + limb * n;
    const u64* c = h == 1 ? last_consts + 4 * limb : 0;
    lyc_inverse_butterfly(&a[x], &a[y], inv_roots[limb * n + h + i], inv_roots_shoup[limb * n + h + i], c, mods[limb * MOD_STRIDE]);
}

// The last forward stage (m = n/2) of `data`'s transform fused with the final step of ModDown and
// of rescaling: out = (out - NTT(data)) c mod q, with c and its Shoup constant at consts[2 limb ..].
// Each thread owns its two slots in both buffers, so the fusion adds no cross-thread dependency.
extern "C" __global__ void lycaon_ntt_forward_last_sub_scale(u64* out, const u64* data, const u64* roots,
                                                             const u64* roots_shoup, const u64* mods,
                                                             const u64* consts, u32 n) {
    const u64 j = lyc_thread_x();
    const u64 half = n / 2;
    if (j >= half) return;
    const u64 limb = blockIdx.y;
    const u64 q = mods[limb * MOD_STRIDE];
    const u64 x = 2 * j, y = x + 1;
    u64 out_x = data[limb * n + x], out_y = data[limb * n + y];
    lyc_forward_butterfly(&out_x, &out_y, roots[limb * n + half + j], roots_shoup[limb * n + half + j], q, true);
    const u64 c = consts[2 * limb], c_shoup = consts[2 * limb + 1];
    u64* o = out + limb * n;
    o[x] = lyc_mul_shoup(lyc_sub_mod(o[x], out_x, q), c, c_shoup, q);
    o[y] = lyc_mul_shoup(lyc_sub_mod(o[y], out_y, q), c, c_shoup, q);
}

// The forward stages m_start <= m < m_end (each with t = n / (2m) <= blockDim.x) of every chunk of
// 2 blockDim.x consecutive words in shared memory: once a stage's groups fit in a chunk, all later
// stages stay inside it, so one launch replaces log2(2 blockDim.x) global passes. Block
// (blockIdx.x, limb) loads its chunk, runs the stages with a barrier after each, and stores it;
// the butterflies are those of lycaon_ntt_forward_stage, so the outputs are identical.
extern "C" __global__ void lycaon_ntt_forward_tail(u64* data, const u64* roots, const u64* roots_shoup, const u64* mods,
                                                   u32 n, u32 m_start, u32 m_end) {
    LYC_DYNAMIC_SHARED(s);
    const u64 threads = blockDim.x;
    const u64 limb = blockIdx.y;
    const u64 base = (u64)blockIdx.x * 2 * threads;
    const u64 half = n / 2;
    const u64 q = mods[limb * MOD_STRIDE];
    u64* a = data + limb * n;
    const u64* w_table = roots + limb * n;
    const u64* ws_table = roots_shoup + limb * n;
    s[threadIdx.x] = a[base + threadIdx.x];
    s[threadIdx.x + threads] = a[base + threadIdx.x + threads];
    __syncthreads();
    const u64 j = (u64)blockIdx.x * threads + threadIdx.x;
    for (u64 m = m_start; m < m_end; m *= 2) {
        u64 i, x, y;
        lyc_butterfly_pair(j, half / m, &i, &x, &y);
        lyc_forward_butterfly(&s[x - base], &s[y - base], w_table[m + i], ws_table[m + i], q, m == half);
        __syncthreads();
    }
    a[base + threadIdx.x] = s[threadIdx.x];
    a[base + threadIdx.x + threads] = s[threadIdx.x + threads];
}

// The inverse stages h = n/2, n/4, ..., h_min (t = n / (2h) <= blockDim.x) in shared memory, as
// lycaon_ntt_inverse_stage computes them (including the last stage's 1/n when h_min = 1): the
// first log2(2 blockDim.x) stages of the inverse transform in one launch.
extern "C" __global__ void lycaon_ntt_inverse_head(u64* data, const u64* inv_roots, const u64* inv_roots_shoup,
                                                   const u64* mods, const u64* last_consts, u32 n, u32 h_min) {
    LYC_DYNAMIC_SHARED(s);
    const u64 threads = blockDim.x;
    const u64 limb = blockIdx.y;
    const u64 base = (u64)blockIdx.x * 2 * threads;
    const u64 half = n / 2;
    const u64 q = mods[limb * MOD_STRIDE];
    u64* a = data + limb * n;
    const u64* c = last_consts + 4 * limb;
    s[threadIdx.x] = a[base + threadIdx.x];
    s[threadIdx.x + threads] = a[base + threadIdx.x + threads];
    __syncthreads();
    const u64 j = (u64)blockIdx.x * threads + threadIdx.x;
    for (u64 h = half; h >= h_min && h >= 1; h /= 2) {
        u64 i, x, y;
        lyc_butterfly_pair(j, half / h, &i, &x, &y);
        lyc_inverse_butterfly(&s[x - base], &s[y - base], inv_roots[limb * n + h + i], inv_roots_shoup[limb * n + h + i], h == 1 ? c : 0, q);
        __syncthreads();
    }
    a[base + threadIdx.x] = s[threadIdx.x];
    a[base + threadIdx.x + threads] = s[threadIdx.x + threads];
}
