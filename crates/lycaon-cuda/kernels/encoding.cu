// CKKS encoding on the device: the inverse special FFT of the slot values (lycaon_math::SpecialFft,
// the same double operations in the same order, with explicitly rounded intrinsics and no FMA, so
// the coefficients equal the CPU's bit for bit), the largest |coefficient|, and the rounding of
// coefficient times scale into residues of every prime. Doubles travel as their bit patterns in
// u64 buffers (re and im in separate arrays).

__device__ __forceinline__ double lyc_f64(u64 bits) {
    return __longlong_as_double((long long)bits);
}

__device__ __forceinline__ u64 lyc_bits(double x) {
    return (u64)__double_as_longlong(x);
}

// One stage (sub-transform length `len`) of the inverse special FFT on `size` values: for each
// butterfly (chunk, j): u = lo + hi, v = (lo - hi) ksi[(4 len - rot_group[j] mod 4 len) m / (4 len)].
// ksi holds the roots as (re, im) bit pairs; rot_group[j] = 5^j mod m.
extern "C" __global__ void lycaon_fft_inverse_stage(u64* re, u64* im, const u64* ksi, const u64* rot_group, u32 m,
                                                    u32 size, u32 len) {
    const u64 t = lyc_thread_x();
    if (t >= size / 2) return;
    const u64 lenh = len / 2, lenq = 4 * (u64)len;
    const u64 step = m / lenq;
    const u64 chunk = t / lenh, j = t % lenh;
    const u64 lo = chunk * len + j, hi = lo + lenh;
    const u64 idx = (lenq - rot_group[j] % lenq) * step;
    const double wr = lyc_f64(ksi[2 * idx]), wi = lyc_f64(ksi[2 * idx + 1]);
    const double ar = lyc_f64(re[lo]), ai = lyc_f64(im[lo]), br = lyc_f64(re[hi]), bi = lyc_f64(im[hi]);
    const double dr = __dsub_rn(ar, br), di = __dsub_rn(ai, bi);
    re[lo] = lyc_bits(__dadd_rn(ar, br));
    im[lo] = lyc_bits(__dadd_rn(ai, bi));
    re[hi] = lyc_bits(__dsub_rn(__dmul_rn(dr, wr), __dmul_rn(di, wi)));
    im[hi] = lyc_bits(__dadd_rn(__dmul_rn(dr, wi), __dmul_rn(di, wr)));
}

// The inverse FFT's end: out[k] = in[brv(k)] times 1/size (both parts).
extern "C" __global__ void lycaon_fft_finish(u64* out_re, u64* out_im, const u64* in_re, const u64* in_im, u32 size,
                                             u32 log_size, u64 inv_bits) {
    const u64 k = lyc_thread_x();
    if (k >= size) return;
    const u32 src = log_size == 0 ? 0 : lyc_bit_reverse((u32)k, log_size);
    const double inv = lyc_f64(inv_bits);
    out_re[k] = lyc_bits(__dmul_rn(lyc_f64(in_re[src]), inv));
    out_im[k] = lyc_bits(__dmul_rn(lyc_f64(in_im[src]), inv));
}

// partial[t] = max |re[i]|, |im[i]| over i = t, t + blockDim.x, ...: one block; the host takes
// the maximum of the partials (a maximum is exact in any order).
extern "C" __global__ void lycaon_abs_max(u64* partial, const u64* re, const u64* im, u32 size) {
    double best = 0.0;
    for (u64 i = threadIdx.x; i < size; i += blockDim.x) {
        const double a = fabs(lyc_f64(re[i])), b = fabs(lyc_f64(im[i]));
        const double c = a > b ? a : b;
        best = c > best ? c : best;
    }
    partial[threadIdx.x] = lyc_bits(best);
}

// Limb `blockIdx.y` of the encoded polynomial in coefficient form: round(x scale) mod q at
// coefficient k gap (x = re[k]) and n/2 + k gap (x = im[k]), zero elsewhere. |x scale| < 2^62
// (checked by the host from lycaon_abs_max).
extern "C" __global__ void lycaon_encode_round(u64* out, const u64* re, const u64* im, const u64* mods, u32 n, u32 slots,
                                               u64 scale_bits) {
    const u64 k = lyc_thread_x();
    if (k >= n) return;
    const u64 limb = blockIdx.y;
    const u64* mod = mods + limb * MOD_STRIDE;
    const u64 half = n / 2, gap = half / slots;
    const u64 pos = k < half ? k : k - half;
    u64 r = 0;
    if (pos % gap == 0) {
        const double x = lyc_f64(k < half ? re[pos / gap] : im[pos / gap]);
        const long long v = (long long)round(__dmul_rn(x, lyc_f64(scale_bits)));
        const u64 m = lyc_reduce_u128((u64)(v < 0 ? -v : v), 0, mod);
        r = v < 0 && m != 0 ? mod[0] - m : m;
    }
    out[limb * n + k] = r;
}
