//! The kernels of kernels/*.cu compiled as host C++ (feature `emulate`, see build.rs) behind
//! [`KernelExec`]: every launch walks its grid one thread at a time. [`EmulatedBackend`] is
//! therefore the CUDA backend's host code and kernel arithmetic without a GPU; it is a test tool,
//! far slower than the CPU backend.
//!
//! Before each launch the buffer lengths are checked against what the kernel will index for the
//! given geometry, so a layout bug on the host side fails here, as an [`ExecError`] naming the
//! kernel and the buffer, instead of reading out of bounds (on a GPU it would read garbage or
//! fault).

// The kernels are C++ behind an FFI boundary; every call passes live, correctly sized buffers.
#![allow(unsafe_code)]

use crate::host::{ExecError, ExecResult, IntoInttDims, KernelBackend, KernelExec, LaunchDims};

mod ffi {
    extern "C" {
        pub fn lyc_emulate_ntt_forward_stage(
            gx: u32,
            gy: u32,
            gz: u32,
            bx: u32,
            reversed: i32,
            data: *mut u64,
            roots: *const u64,
            roots_shoup: *const u64,
            mods: *const u64,
            n: u32,
            m: u32,
        );
        pub fn lyc_emulate_ntt_inverse_stage(
            gx: u32,
            gy: u32,
            gz: u32,
            bx: u32,
            reversed: i32,
            data: *mut u64,
            inv_roots: *const u64,
            inv_roots_shoup: *const u64,
            mods: *const u64,
            last_consts: *const u64,
            n: u32,
            h: u32,
        );
        pub fn lyc_emulate_mul_pointwise(gx: u32, gy: u32, gz: u32, bx: u32, reversed: i32, a: *mut u64, b: *const u64, mods: *const u64, n: u32);
        pub fn lyc_emulate_automorphism_ntt(
            gx: u32,
            gy: u32,
            gz: u32,
            bx: u32,
            reversed: i32,
            out: *mut u64,
            input: *const u64,
            n: u32,
            log_n: u32,
            galois: u64,
        );
        pub fn lyc_emulate_convert_scale(
            gx: u32,
            gy: u32,
            gz: u32,
            bx: u32,
            reversed: i32,
            scaled: *mut u64,
            input: *const u64,
            mods_from: *const u64,
            punctured_inv: *const u64,
            n: u32,
        );
        pub fn lyc_emulate_convert_accumulate(
            gx: u32,
            gy: u32,
            gz: u32,
            bx: u32,
            reversed: i32,
            out: *mut u64,
            scaled: *const u64,
            mods_to: *const u64,
            punctured_mod_to: *const u64,
            inv_q_from: *const f64,
            q_mod_to: *const u64,
            n: u32,
            l_from: u32,
            centered: u32,
        );
        pub fn lyc_emulate_inner_product(
            gx: u32,
            gy: u32,
            gz: u32,
            bx: u32,
            reversed: i32,
            out: *mut u64,
            digits: *const u64,
            keys: *const u64,
            mods: *const u64,
            n: u32,
            limbs: u32,
            num_digits: u32,
        );
        pub fn lyc_emulate_ntt_forward_tail(
            gx: u32,
            gy: u32,
            gz: u32,
            bx: u32,
            reversed: i32,
            data: *mut u64,
            roots: *const u64,
            roots_shoup: *const u64,
            mods: *const u64,
            n: u32,
            m_start: u32,
            m_end: u32,
        ) -> i32;
        pub fn lyc_emulate_ntt_inverse_head(
            gx: u32,
            gy: u32,
            gz: u32,
            bx: u32,
            reversed: i32,
            data: *mut u64,
            inv_roots: *const u64,
            inv_roots_shoup: *const u64,
            mods: *const u64,
            last_consts: *const u64,
            n: u32,
            h_min: u32,
        ) -> i32;
        pub fn lyc_emulate_fft_inverse_stage(gx: u32, gy: u32, gz: u32, bx: u32, reversed: i32, re: *mut u64, im: *mut u64, ksi: *const u64, rot_group: *const u64, m: u32, size: u32, len: u32);
        pub fn lyc_emulate_fft_finish(gx: u32, gy: u32, gz: u32, bx: u32, reversed: i32, out_re: *mut u64, out_im: *mut u64, in_re: *const u64, in_im: *const u64, size: u32, log_size: u32, inv_bits: u64);
        pub fn lyc_emulate_abs_max(gx: u32, gy: u32, gz: u32, bx: u32, reversed: i32, partial: *mut u64, re: *const u64, im: *const u64, size: u32);
        pub fn lyc_emulate_encode_round(gx: u32, gy: u32, gz: u32, bx: u32, reversed: i32, out: *mut u64, re: *const u64, im: *const u64, mods: *const u64, n: u32, slots: u32, scale_bits: u64);
        pub fn lyc_emulate_inner_product_intt_head(gx: u32, gy: u32, gz: u32, bx: u32, reversed: i32, out0: *mut u64, out1: *mut u64, digits: *const u64, keys: *const u64, key_limbs: *const u64, mods: *const u64, inv_roots: *const u64, inv_roots_shoup: *const u64, last_consts: *const u64, n: u32, limbs: u32, q_limbs: u32, num_digits: u32, key_digits: u32, key_limbs_total: u32, h_min: u32) -> i32;
        pub fn lyc_emulate_mul_add(gx: u32, gy: u32, gz: u32, bx: u32, reversed: i32, acc: *mut u64, a: *const u64, b: *const u64, mods: *const u64, n: u32);
        pub fn lyc_emulate_add_sub(gx: u32, gy: u32, gz: u32, bx: u32, reversed: i32, a: *mut u64, b: *const u64, mods: *const u64, n: u32, op: u32);
        pub fn lyc_emulate_limb_constants(
            gx: u32,
            gy: u32,
            gz: u32,
            bx: u32,
            reversed: i32,
            a: *mut u64,
            consts: *const u64,
            imag_unit: *const u64,
            mods: *const u64,
            n: u32,
            op: u32,
        );
        pub fn lyc_emulate_tensor(
            gx: u32,
            gy: u32,
            gz: u32,
            bx: u32,
            reversed: i32,
            d0: *mut u64,
            d1: *mut u64,
            d2: *mut u64,
            a0: *const u64,
            a1: *const u64,
            b0: *const u64,
            b1: *const u64,
            mods: *const u64,
            n: u32,
        );
        pub fn lyc_emulate_ntt_forward_last_sub_scale(
            gx: u32,
            gy: u32,
            gz: u32,
            bx: u32,
            reversed: i32,
            out: *mut u64,
            data: *const u64,
            roots: *const u64,
            roots_shoup: *const u64,
            mods: *const u64,
            consts: *const u64,
            n: u32,
        );
        pub fn lyc_emulate_rescale_spread(
            gx: u32,
            gy: u32,
            gz: u32,
            bx: u32,
            reversed: i32,
            out: *mut u64,
            last: *const u64,
            last_mod: *const u64,
            mods: *const u64,
            n: u32,
            q_last: u64,
        );
        pub fn lyc_emulate_inner_product_resident(
            gx: u32,
            gy: u32,
            gz: u32,
            bx: u32,
            reversed: i32,
            out0: *mut u64,
            out1: *mut u64,
            digits: *const u64,
            keys: *const u64,
            key_limbs: *const u64,
            mods: *const u64,
            n: u32,
            limbs: u32,
            num_digits: u32,
            key_digits: u32,
            key_limbs_total: u32,
        );
    }
}

/// Runs launches on the host; `reversed` walks every grid backwards (blocks and threads), which
/// must give the same results if the kernels are free of intra-launch dependencies.
#[derive(Debug, Default, Clone, Copy)]
pub struct EmulatedExec {
    pub reversed: bool,
}

/// The CUDA backend's host code and kernels, run by the host emulation.
pub type EmulatedBackend = KernelBackend<EmulatedExec>;

impl KernelBackend<EmulatedExec> {
    /// Grids walked in launch order.
    pub fn new() -> Self {
        Self::with_exec(EmulatedExec { reversed: false }, "cuda-emulated")
    }

    /// Grids walked backwards.
    pub fn reversed() -> Self {
        Self::with_exec(EmulatedExec { reversed: true }, "cuda-emulated-reversed")
    }
}

impl Default for KernelBackend<EmulatedExec> {
    fn default() -> Self {
        Self::new()
    }
}

/// An error unless `buf` holds at least `needed` words.
fn need(kernel: &str, what: &str, buf: &[u64], needed: usize) -> ExecResult<()> {
    check(buf.len() >= needed, || format!("{kernel}: {what} has {} words, the launch reads {needed}", buf.len()))
}

/// An error unless grid.x blocks of `block` threads cover the work.
fn covers(kernel: &str, d: LaunchDims, work: usize) -> ExecResult<()> {
    check((d.grid.0 as usize) * (d.block as usize) >= work, || format!("{kernel}: grid {d:?} does not cover {work} items"))
}

/// An error with `message` unless `ok`: a launch the kernel could not run correctly.
fn check(ok: bool, message: impl FnOnce() -> String) -> ExecResult<()> {
    if ok {
        Ok(())
    } else {
        Err(ExecError(message()))
    }
}

impl EmulatedExec {
    fn grid(&self, d: LaunchDims) -> (u32, u32, u32, u32, i32) {
        (d.grid.0, d.grid.1, d.grid.2, d.block, self.reversed as i32)
    }
}

impl KernelExec for EmulatedExec {
    type Buf = Vec<u64>;

    fn upload(&self, data: &[u64]) -> ExecResult<Vec<u64>> {
        Ok(data.to_vec())
    }

    fn zeros(&self, len: usize) -> ExecResult<Vec<u64>> {
        Ok(vec![0; len])
    }

    fn download(&self, buf: &Vec<u64>) -> ExecResult<Vec<u64>> {
        Ok(buf.clone())
    }

    fn ntt_forward_stage(
        &self,
        d: LaunchDims,
        data: &mut Vec<u64>,
        roots: &Vec<u64>,
        roots_shoup: &Vec<u64>,
        mods: &Vec<u64>,
        n: u32,
        m: u32,
    ) -> ExecResult<()> {
        let (limbs, n_) = (d.grid.1 as usize, n as usize);
        let k = "lycaon_ntt_forward_stage";
        covers(k, d, n_ / 2)?;
        need(k, "data", data, limbs * n_)?;
        need(k, "roots", roots, limbs * n_)?;
        need(k, "roots_shoup", roots_shoup, limbs * n_)?;
        need(k, "mods", mods, 3 * limbs)?;
        check(m >= 1 && m < n && m.is_power_of_two(), || format!("{k}: stage m = {m} for n = {n}"))?;
        let (gx, gy, gz, bx, rev) = self.grid(d);
        unsafe { ffi::lyc_emulate_ntt_forward_stage(gx, gy, gz, bx, rev, data.as_mut_ptr(), roots.as_ptr(), roots_shoup.as_ptr(), mods.as_ptr(), n, m) };
        Ok(())
    }

    fn ntt_inverse_stage(
        &self,
        d: LaunchDims,
        data: &mut Vec<u64>,
        inv_roots: &Vec<u64>,
        inv_roots_shoup: &Vec<u64>,
        mods: &Vec<u64>,
        last_consts: &Vec<u64>,
        n: u32,
        h: u32,
    ) -> ExecResult<()> {
        let (limbs, n_) = (d.grid.1 as usize, n as usize);
        let k = "lycaon_ntt_inverse_stage";
        covers(k, d, n_ / 2)?;
        need(k, "data", data, limbs * n_)?;
        need(k, "inv_roots", inv_roots, limbs * n_)?;
        need(k, "inv_roots_shoup", inv_roots_shoup, limbs * n_)?;
        need(k, "mods", mods, 3 * limbs)?;
        need(k, "last_consts", last_consts, 4 * limbs)?;
        check(h >= 1 && h < n && h.is_power_of_two(), || format!("{k}: stage h = {h} for n = {n}"))?;
        let (gx, gy, gz, bx, rev) = self.grid(d);
        unsafe {
            ffi::lyc_emulate_ntt_inverse_stage(
                gx,
                gy,
                gz,
                bx,
                rev,
                data.as_mut_ptr(),
                inv_roots.as_ptr(),
                inv_roots_shoup.as_ptr(),
                mods.as_ptr(),
                last_consts.as_ptr(),
                n,
                h,
            )
        };
        Ok(())
    }

    fn mul_pointwise(&self, d: LaunchDims, a: &mut Vec<u64>, b: &Vec<u64>, mods: &Vec<u64>, n: u32) -> ExecResult<()> {
        let (limbs, n_) = (d.grid.1 as usize, n as usize);
        let k = "lycaon_mul_pointwise";
        covers(k, d, n_)?;
        need(k, "a", a, limbs * n_)?;
        need(k, "b", b, limbs * n_)?;
        need(k, "mods", mods, 3 * limbs)?;
        let (gx, gy, gz, bx, rev) = self.grid(d);
        unsafe { ffi::lyc_emulate_mul_pointwise(gx, gy, gz, bx, rev, a.as_mut_ptr(), b.as_ptr(), mods.as_ptr(), n) };
        Ok(())
    }

    fn automorphism_ntt(&self, d: LaunchDims, out: &mut Vec<u64>, input: &Vec<u64>, n: u32, log_n: u32, galois: u64) -> ExecResult<()> {
        let (limbs, n_) = (d.grid.1 as usize, n as usize);
        let k = "lycaon_automorphism_ntt";
        covers(k, d, n_)?;
        need(k, "out", out, limbs * n_)?;
        need(k, "input", input, limbs * n_)?;
        check((1..=31).contains(&log_n) && n == 1 << log_n, || format!("{k}: n = {n}, log_n = {log_n}"))?;
        check(galois % 2 == 1 && galois < 2 * n as u64, || format!("{k}: Galois element {galois}"))?;
        let (gx, gy, gz, bx, rev) = self.grid(d);
        unsafe { ffi::lyc_emulate_automorphism_ntt(gx, gy, gz, bx, rev, out.as_mut_ptr(), input.as_ptr(), n, log_n, galois) };
        Ok(())
    }

    fn convert_scale(&self, d: LaunchDims, scaled: &mut Vec<u64>, input: &Vec<u64>, mods_from: &Vec<u64>, punctured_inv: &Vec<u64>, n: u32) -> ExecResult<()> {
        let (limbs, n_) = (d.grid.1 as usize, n as usize);
        let k = "lycaon_convert_scale";
        covers(k, d, n_)?;
        need(k, "scaled", scaled, limbs * n_)?;
        need(k, "input", input, limbs * n_)?;
        need(k, "mods_from", mods_from, 3 * limbs)?;
        need(k, "punctured_inv", punctured_inv, 2 * limbs)?;
        let (gx, gy, gz, bx, rev) = self.grid(d);
        unsafe { ffi::lyc_emulate_convert_scale(gx, gy, gz, bx, rev, scaled.as_mut_ptr(), input.as_ptr(), mods_from.as_ptr(), punctured_inv.as_ptr(), n) };
        Ok(())
    }

    fn convert_accumulate(
        &self,
        d: LaunchDims,
        out: &mut Vec<u64>,
        scaled: &Vec<u64>,
        mods_to: &Vec<u64>,
        punctured_mod_to: &Vec<u64>,
        inv_q_from: &Vec<u64>,
        q_mod_to: &Vec<u64>,
        n: u32,
        l_from: u32,
        centered: u32,
    ) -> ExecResult<()> {
        let (l_to, n_, l_from_) = (d.grid.1 as usize, n as usize, l_from as usize);
        let k = "lycaon_convert_accumulate";
        covers(k, d, n_)?;
        need(k, "out", out, l_to * n_)?;
        need(k, "scaled", scaled, l_from_ * n_)?;
        need(k, "mods_to", mods_to, 3 * l_to)?;
        need(k, "punctured_mod_to", punctured_mod_to, l_to * l_from_)?;
        need(k, "inv_q_from", inv_q_from, l_from_)?;
        need(k, "q_mod_to", q_mod_to, l_to)?;
        let (gx, gy, gz, bx, rev) = self.grid(d);
        // inv_q_from holds f64 bit patterns; the kernel reads the same words as doubles.
        unsafe {
            ffi::lyc_emulate_convert_accumulate(
                gx,
                gy,
                gz,
                bx,
                rev,
                out.as_mut_ptr(),
                scaled.as_ptr(),
                mods_to.as_ptr(),
                punctured_mod_to.as_ptr(),
                inv_q_from.as_ptr().cast::<f64>(),
                q_mod_to.as_ptr(),
                n,
                l_from,
                centered,
            )
        };
        Ok(())
    }

    fn inner_product(
        &self,
        d: LaunchDims,
        out: &mut Vec<u64>,
        digits: &Vec<u64>,
        keys: &Vec<u64>,
        mods: &Vec<u64>,
        n: u32,
        limbs: u32,
        num_digits: u32,
    ) -> ExecResult<()> {
        let (outputs, n_, limbs_, nd) = (d.grid.2 as usize, n as usize, limbs as usize, num_digits as usize);
        let k = "lycaon_inner_product";
        covers(k, d, n_)?;
        check(d.grid.1 == limbs, || format!("{k}: grid.y = {} must be the limb count {limbs}", d.grid.1))?;
        need(k, "out", out, outputs * limbs_ * n_)?;
        need(k, "digits", digits, nd * limbs_ * n_)?;
        need(k, "keys", keys, outputs * nd * limbs_ * n_)?;
        need(k, "mods", mods, 3 * limbs_)?;
        let (gx, gy, gz, bx, rev) = self.grid(d);
        unsafe { ffi::lyc_emulate_inner_product(gx, gy, gz, bx, rev, out.as_mut_ptr(), digits.as_ptr(), keys.as_ptr(), mods.as_ptr(), n, limbs, num_digits) };
        Ok(())
    }

    fn alloc(&self, len: usize) -> ExecResult<Vec<u64>> {
        // A device's fresh memory holds garbage: fill it with a pattern no kernel output equals
        // by chance, so reading an unwritten word shows up as a difference from the CPU.
        Ok(vec![u64::MAX; len])
    }

    fn write(&self, buf: &mut Vec<u64>, data: &[u64]) -> ExecResult<()> {
        let len = buf.len();
        let dst = buf.get_mut(..data.len()).ok_or_else(|| ExecError(format!("write: {} words into a buffer of {len}", data.len())))?;
        dst.copy_from_slice(data);
        Ok(())
    }

    fn copy(&self, dst: &mut Vec<u64>, dst_at: usize, src: &Vec<u64>, src_at: usize, len: usize) -> ExecResult<()> {
        let (dl, sl) = (dst.len(), src.len());
        match (dst.get_mut(dst_at..dst_at + len), src.get(src_at..src_at + len)) {
            (Some(d), Some(s)) => {
                d.copy_from_slice(s);
                Ok(())
            }
            _ => Err(ExecError(format!("copy: {len} words from {src_at} of {sl} to {dst_at} of {dl}"))),
        }
    }

    fn len(&self, buf: &Vec<u64>) -> usize {
        buf.len()
    }

    fn synchronize(&self) -> ExecResult<()> {
        Ok(())
    }

    fn fill_zero(&self, buf: &mut Vec<u64>, at: usize, len: usize) -> ExecResult<()> {
        let total = buf.len();
        buf.get_mut(at..at + len).ok_or_else(|| ExecError(format!("fill_zero: {len} words at {at} of {total}")))?.fill(0);
        Ok(())
    }

    fn add_sub(&self, d: LaunchDims, a: &mut Vec<u64>, b: &Vec<u64>, mods: &Vec<u64>, n: u32, op: u32) -> ExecResult<()> {
        let (limbs, n_) = (d.grid.1 as usize, n as usize);
        let k = "lycaon_add_sub";
        covers(k, d, n_)?;
        need(k, "a", a, limbs * n_)?;
        need(k, "b", b, limbs * n_)?;
        need(k, "mods", mods, 3 * limbs)?;
        let (gx, gy, gz, bx, rev) = self.grid(d);
        unsafe { ffi::lyc_emulate_add_sub(gx, gy, gz, bx, rev, a.as_mut_ptr(), b.as_ptr(), mods.as_ptr(), n, op) };
        Ok(())
    }

    fn fft_inverse_stage(&self, d: LaunchDims, re: &mut Vec<u64>, im: &mut Vec<u64>, ksi: &Vec<u64>, rot_group: &Vec<u64>, m: u32, size: u32, len: u32) -> ExecResult<()> {
        let (size_, m_) = (size as usize, m as usize);
        let k = "lycaon_fft_inverse_stage";
        covers(k, d, size_ / 2)?;
        check(len >= 2 && len <= size && len.is_power_of_two() && size.is_power_of_two() && (4 * len as usize) <= m_, || format!("{k}: len = {len}, size = {size}, m = {m}"))?;
        need(k, "re", re, size_)?;
        need(k, "im", im, size_)?;
        need(k, "ksi", ksi, 2 * (m_ + 1))?;
        need(k, "rot_group", rot_group, (len / 2) as usize)?;
        let (gx, gy, gz, bx, rev) = self.grid(d);
        unsafe { ffi::lyc_emulate_fft_inverse_stage(gx, gy, gz, bx, rev, re.as_mut_ptr(), im.as_mut_ptr(), ksi.as_ptr(), rot_group.as_ptr(), m, size, len) };
        Ok(())
    }

    fn fft_finish(&self, d: LaunchDims, out: [&mut Vec<u64>; 2], input: [&Vec<u64>; 2], size: u32, log_size: u32, inv_bits: u64) -> ExecResult<()> {
        let size_ = size as usize;
        let k = "lycaon_fft_finish";
        covers(k, d, size_)?;
        check(size == 1 << log_size, || format!("{k}: size {size}, log {log_size}"))?;
        for (name, buf) in [("out_re", &*out[0]), ("out_im", &*out[1]), ("in_re", input[0]), ("in_im", input[1])] {
            need(k, name, buf, size_)?;
        }
        let (gx, gy, gz, bx, rev) = self.grid(d);
        let [o_re, o_im] = out;
        unsafe { ffi::lyc_emulate_fft_finish(gx, gy, gz, bx, rev, o_re.as_mut_ptr(), o_im.as_mut_ptr(), input[0].as_ptr(), input[1].as_ptr(), size, log_size, inv_bits) };
        Ok(())
    }

    fn inner_product_intt_head(&self, d: LaunchDims, out: [&mut Vec<u64>; 2], digits: &Vec<u64>, keys: &Vec<u64>, key_limbs: &Vec<u64>, mods: &Vec<u64>, inv_roots: &Vec<u64>, inv_roots_shoup: &Vec<u64>, last_consts: &Vec<u64>, a: IntoInttDims) -> ExecResult<()> {
        let k = "lycaon_inner_product_intt_head";
        let (n_, p_limbs) = (a.n as usize, d.grid.1 as usize);
        check(d.block.is_power_of_two() && d.grid.0 as usize * 2 * d.block as usize == n_ && d.grid.2 == 2, || format!("{k}: grid {d:?} for n = {}", a.n))?;
        check(2 * d.block as usize <= 4096 && d.shared_bytes == 2 * d.block * 8, || format!("{k}: shared memory {} bytes for {} threads", d.shared_bytes, d.block))?;
        check(a.q_limbs as usize + p_limbs == a.limbs as usize && a.num_digits <= a.key_digits, || format!("{k}: {a:?} with {p_limbs} special primes"))?;
        check(a.h_min >= 1 && a.h_min.is_power_of_two() && (a.n / 2) / a.h_min <= d.block, || format!("{k}: h_min = {} with {} threads", a.h_min, d.block))?;
        need(k, "out0", out[0], p_limbs * n_)?;
        need(k, "out1", out[1], p_limbs * n_)?;
        need(k, "digits", digits, a.num_digits as usize * a.limbs as usize * n_)?;
        need(k, "key_limbs", key_limbs, a.limbs as usize)?;
        check(key_limbs[..a.limbs as usize].iter().all(|&l| l < a.key_limbs_total as u64), || format!("{k}: a key limb index is not below {}", a.key_limbs_total))?;
        need(k, "keys", keys, 2 * a.key_digits as usize * a.key_limbs_total as usize * n_)?;
        need(k, "mods", mods, 3 * p_limbs)?;
        need(k, "inv_roots", inv_roots, p_limbs * n_)?;
        need(k, "inv_roots_shoup", inv_roots_shoup, p_limbs * n_)?;
        need(k, "last_consts", last_consts, 4 * p_limbs)?;
        let (gx, gy, gz, bx, rev) = self.grid(d);
        let [o0, o1] = out;
        let diverged = unsafe {
            ffi::lyc_emulate_inner_product_intt_head(gx, gy, gz, bx, rev, o0.as_mut_ptr(), o1.as_mut_ptr(), digits.as_ptr(), keys.as_ptr(), key_limbs.as_ptr(), mods.as_ptr(), inv_roots.as_ptr(), inv_roots_shoup.as_ptr(), last_consts.as_ptr(), a.n, a.limbs, a.q_limbs, a.num_digits, a.key_digits, a.key_limbs_total, a.h_min)
        };
        check(diverged == 0, || format!("{k}: the threads of a block disagree on the barriers"))
    }

    fn abs_max(&self, d: LaunchDims, partial: &mut Vec<u64>, re: &Vec<u64>, im: &Vec<u64>, size: u32) -> ExecResult<()> {
        let k = "lycaon_abs_max";
        check(d.grid == (1, 1, 1), || format!("{k}: one block, not {:?}", d.grid))?;
        need(k, "partial", partial, d.block as usize)?;
        need(k, "re", re, size as usize)?;
        need(k, "im", im, size as usize)?;
        let (gx, gy, gz, bx, rev) = self.grid(d);
        unsafe { ffi::lyc_emulate_abs_max(gx, gy, gz, bx, rev, partial.as_mut_ptr(), re.as_ptr(), im.as_ptr(), size) };
        Ok(())
    }

    fn encode_round(&self, d: LaunchDims, out: &mut Vec<u64>, re: &Vec<u64>, im: &Vec<u64>, mods: &Vec<u64>, n: u32, slots: u32, scale_bits: u64) -> ExecResult<()> {
        let (limbs, n_) = (d.grid.1 as usize, n as usize);
        let k = "lycaon_encode_round";
        covers(k, d, n_)?;
        check(slots.is_power_of_two() && slots <= n / 2, || format!("{k}: {slots} slots for n = {n}"))?;
        need(k, "out", out, limbs * n_)?;
        need(k, "re", re, slots as usize)?;
        need(k, "im", im, slots as usize)?;
        need(k, "mods", mods, 3 * limbs)?;
        let (gx, gy, gz, bx, rev) = self.grid(d);
        unsafe { ffi::lyc_emulate_encode_round(gx, gy, gz, bx, rev, out.as_mut_ptr(), re.as_ptr(), im.as_ptr(), mods.as_ptr(), n, slots, scale_bits) };
        Ok(())
    }

    fn mul_add(&self, d: LaunchDims, acc: &mut Vec<u64>, a: &Vec<u64>, b: &Vec<u64>, mods: &Vec<u64>, n: u32) -> ExecResult<()> {
        let (limbs, n_) = (d.grid.1 as usize, n as usize);
        let k = "lycaon_mul_add";
        covers(k, d, n_)?;
        need(k, "acc", acc, limbs * n_)?;
        need(k, "a", a, limbs * n_)?;
        need(k, "b", b, limbs * n_)?;
        need(k, "mods", mods, 3 * limbs)?;
        let (gx, gy, gz, bx, rev) = self.grid(d);
        unsafe { ffi::lyc_emulate_mul_add(gx, gy, gz, bx, rev, acc.as_mut_ptr(), a.as_ptr(), b.as_ptr(), mods.as_ptr(), n) };
        Ok(())
    }

    fn limb_constants(&self, d: LaunchDims, a: &mut Vec<u64>, consts: &Vec<u64>, imag_unit: &Vec<u64>, mods: &Vec<u64>, n: u32, op: u32) -> ExecResult<()> {
        let (limbs, n_) = (d.grid.1 as usize, n as usize);
        let k = "lycaon_limb_constants";
        covers(k, d, n_)?;
        need(k, "a", a, limbs * n_)?;
        need(k, "consts", consts, 2 * limbs)?;
        if consts[..2 * limbs].chunks_exact(2).any(|c| c[1] != 0) {
            need(k, "imag_unit", imag_unit, limbs * n_)?;
        }
        need(k, "mods", mods, 3 * limbs)?;
        let (gx, gy, gz, bx, rev) = self.grid(d);
        unsafe { ffi::lyc_emulate_limb_constants(gx, gy, gz, bx, rev, a.as_mut_ptr(), consts.as_ptr(), imag_unit.as_ptr(), mods.as_ptr(), n, op) };
        Ok(())
    }

    fn tensor(&self, d: LaunchDims, out: [&mut Vec<u64>; 3], a: [&Vec<u64>; 2], b: [&Vec<u64>; 2], mods: &Vec<u64>, n: u32) -> ExecResult<()> {
        let (limbs, n_) = (d.grid.1 as usize, n as usize);
        let k = "lycaon_tensor";
        covers(k, d, n_)?;
        for (name, buf) in [("d0", &*out[0]), ("d1", &*out[1]), ("d2", &*out[2]), ("a0", a[0]), ("a1", a[1]), ("b0", b[0]), ("b1", b[1])] {
            need(k, name, buf, limbs * n_)?;
        }
        need(k, "mods", mods, 3 * limbs)?;
        let (gx, gy, gz, bx, rev) = self.grid(d);
        let [d0, d1, d2] = out;
        unsafe {
            ffi::lyc_emulate_tensor(
                gx,
                gy,
                gz,
                bx,
                rev,
                d0.as_mut_ptr(),
                d1.as_mut_ptr(),
                d2.as_mut_ptr(),
                a[0].as_ptr(),
                a[1].as_ptr(),
                b[0].as_ptr(),
                b[1].as_ptr(),
                mods.as_ptr(),
                n,
            )
        };
        Ok(())
    }

    fn ntt_forward_last_sub_scale(
        &self,
        d: LaunchDims,
        out: &mut Vec<u64>,
        data: &Vec<u64>,
        roots: &Vec<u64>,
        roots_shoup: &Vec<u64>,
        mods: &Vec<u64>,
        consts: &Vec<u64>,
        n: u32,
    ) -> ExecResult<()> {
        let (limbs, n_) = (d.grid.1 as usize, n as usize);
        let k = "lycaon_ntt_forward_last_sub_scale";
        covers(k, d, n_ / 2)?;
        need(k, "out", out, limbs * n_)?;
        need(k, "data", data, limbs * n_)?;
        need(k, "roots", roots, limbs * n_)?;
        need(k, "roots_shoup", roots_shoup, limbs * n_)?;
        need(k, "mods", mods, 3 * limbs)?;
        need(k, "consts", consts, 2 * limbs)?;
        let (gx, gy, gz, bx, rev) = self.grid(d);
        unsafe {
            ffi::lyc_emulate_ntt_forward_last_sub_scale(
                gx,
                gy,
                gz,
                bx,
                rev,
                out.as_mut_ptr(),
                data.as_ptr(),
                roots.as_ptr(),
                roots_shoup.as_ptr(),
                mods.as_ptr(),
                consts.as_ptr(),
                n,
            )
        };
        Ok(())
    }

    fn rescale_spread(&self, d: LaunchDims, out: &mut Vec<u64>, last: &Vec<u64>, last_mod: &Vec<u64>, mods: &Vec<u64>, n: u32, q_last: u64) -> ExecResult<()> {
        let (limbs, n_) = (d.grid.1 as usize, n as usize);
        let k = "lycaon_rescale_spread";
        covers(k, d, n_)?;
        need(k, "out", out, limbs * n_)?;
        need(k, "last", last, n_)?;
        need(k, "last_mod", last_mod, limbs)?;
        need(k, "mods", mods, 3 * limbs)?;
        let (gx, gy, gz, bx, rev) = self.grid(d);
        unsafe { ffi::lyc_emulate_rescale_spread(gx, gy, gz, bx, rev, out.as_mut_ptr(), last.as_ptr(), last_mod.as_ptr(), mods.as_ptr(), n, q_last) };
        Ok(())
    }

    fn inner_product_resident(
        &self,
        d: LaunchDims,
        out: [&mut Vec<u64>; 2],
        digits: &Vec<u64>,
        keys: &Vec<u64>,
        key_limbs: &Vec<u64>,
        mods: &Vec<u64>,
        n: u32,
        limbs: u32,
        num_digits: u32,
        key_digits: u32,
        key_limbs_total: u32,
    ) -> ExecResult<()> {
        let (outputs, n_, limbs_, nd) = (d.grid.2 as usize, n as usize, limbs as usize, num_digits as usize);
        let k = "lycaon_inner_product_resident";
        covers(k, d, n_)?;
        check(d.grid.1 <= limbs, || format!("{k}: grid.y = {} exceeds the limb count {limbs}", d.grid.1))?;
        check(num_digits <= key_digits, || format!("{k}: {num_digits} digits, the key has {key_digits}"))?;
        check(outputs == 2, || format!("{k}: grid.z = {outputs}, the kernel writes 2 outputs"))?;
        need(k, "out0", out[0], d.grid.1 as usize * n_)?;
        need(k, "out1", out[1], d.grid.1 as usize * n_)?;
        need(k, "digits", digits, nd * limbs_ * n_)?;
        need(k, "key_limbs", key_limbs, limbs_)?;
        check(key_limbs[..limbs_].iter().all(|&l| l < key_limbs_total as u64), || format!("{k}: a key limb index is not below {key_limbs_total}"))?;
        need(k, "keys", keys, outputs * key_digits as usize * key_limbs_total as usize * n_)?;
        need(k, "mods", mods, 3 * limbs_)?;
        let (gx, gy, gz, bx, rev) = self.grid(d);
        let [out0, out1] = out;
        unsafe {
            ffi::lyc_emulate_inner_product_resident(
                gx,
                gy,
                gz,
                bx,
                rev,
                out0.as_mut_ptr(),
                out1.as_mut_ptr(),
                digits.as_ptr(),
                keys.as_ptr(),
                key_limbs.as_ptr(),
                mods.as_ptr(),
                n,
                limbs,
                num_digits,
                key_digits,
                key_limbs_total,
            )
        };
        Ok(())
    }

    fn ntt_forward_tail(
        &self,
        d: LaunchDims,
        data: &mut Vec<u64>,
        roots: &Vec<u64>,
        roots_shoup: &Vec<u64>,
        mods: &Vec<u64>,
        n: u32,
        m_start: u32,
        m_end: u32,
    ) -> ExecResult<()> {
        let (limbs, n_) = (d.grid.1 as usize, n as usize);
        let k = "lycaon_ntt_forward_tail";
        check_chunks(k, d, n_)?;
        need(k, "data", data, limbs * n_)?;
        need(k, "roots", roots, limbs * n_)?;
        need(k, "roots_shoup", roots_shoup, limbs * n_)?;
        need(k, "mods", mods, 3 * limbs)?;
        // Every stage's groups must lie inside one chunk: t = n / (2 m_start) <= threads.
        check(m_start.is_power_of_two() && (n / 2) / m_start <= d.block && m_end <= n && m_end.is_power_of_two(), || {
            format!("{k}: stages {m_start}..{m_end} with {} threads for n = {n}", d.block)
        })?;
        let (gx, gy, gz, bx, rev) = self.grid(d);
        let diverged = unsafe {
            ffi::lyc_emulate_ntt_forward_tail(gx, gy, gz, bx, rev, data.as_mut_ptr(), roots.as_ptr(), roots_shoup.as_ptr(), mods.as_ptr(), n, m_start, m_end)
        };
        check(diverged == 0, || format!("{k}: the threads of a block disagree on the barriers"))
    }

    fn ntt_inverse_head(
        &self,
        d: LaunchDims,
        data: &mut Vec<u64>,
        inv_roots: &Vec<u64>,
        inv_roots_shoup: &Vec<u64>,
        mods: &Vec<u64>,
        last_consts: &Vec<u64>,
        n: u32,
        h_min: u32,
    ) -> ExecResult<()> {
        let (limbs, n_) = (d.grid.1 as usize, n as usize);
        let k = "lycaon_ntt_inverse_head";
        check_chunks(k, d, n_)?;
        need(k, "data", data, limbs * n_)?;
        need(k, "inv_roots", inv_roots, limbs * n_)?;
        need(k, "inv_roots_shoup", inv_roots_shoup, limbs * n_)?;
        need(k, "mods", mods, 3 * limbs)?;
        need(k, "last_consts", last_consts, 4 * limbs)?;
        check(h_min >= 1 && h_min.is_power_of_two() && (n / 2) / h_min <= d.block, || format!("{k}: h_min = {h_min} with {} threads for n = {n}", d.block))?;
        let (gx, gy, gz, bx, rev) = self.grid(d);
        let diverged = unsafe {
            ffi::lyc_emulate_ntt_inverse_head(
                gx,
                gy,
                gz,
                bx,
                rev,
                data.as_mut_ptr(),
                inv_roots.as_ptr(),
                inv_roots_shoup.as_ptr(),
                mods.as_ptr(),
                last_consts.as_ptr(),
                n,
                h_min,
            )
        };
        check(diverged == 0, || format!("{k}: the threads of a block disagree on the barriers"))
    }
}

/// An error unless the launch tiles each n-word limb with chunks of 2 block words that fit the
/// emulated shared memory (and the launch asks for exactly that much).
fn check_chunks(kernel: &str, d: LaunchDims, n: usize) -> ExecResult<()> {
    let chunk = 2 * d.block as usize;
    check(d.block.is_power_of_two() && d.grid.0 as usize * chunk == n && d.grid.2 == 1, || format!("{kernel}: grid {d:?} does not tile n = {n} in chunks"))?;
    check(chunk <= 4096 && d.shared_bytes as usize == chunk * 8, || format!("{kernel}: {chunk} words of shared memory, {} bytes requested", d.shared_bytes))
}
