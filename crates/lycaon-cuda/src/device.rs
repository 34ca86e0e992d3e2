//! The GPU executor (feature `cuda`): the CUDA driver and NVRTC through cudarc, both loaded at run
//! time, so this compiles without a CUDA toolkit and fails only when run without a driver.
//!
//! NOT YET RUN ON A GPU. The kernels' arithmetic and the host code above this file are verified
//! by the host emulation (tests/emulation.rs); this file's launches, copies and compilation
//! options have only been type-checked. tests/gpu.rs is the check to run on a device.

// Kernel launches through the driver API are unsafe by nature: argument lists must match the
// kernels' signatures, which KernelExec's methods spell out one to one.
#![allow(unsafe_code)]

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};

use crate::host::{ExecError, ExecResult, IntoInttDims, KernelBackend, KernelExec, LaunchDims};
use crate::kernels::{program_source, KERNEL_NAMES};
use crate::{CudaError, DeviceInfo};

fn driver_err(what: &str) -> impl Fn(cudarc::driver::DriverError) -> ExecError + '_ {
    move |e| ExecError(format!("{what}: {e}"))
}

/// Whether the driver and NVRTC libraries load, and the device exists.
pub fn probe(ordinal: usize) -> Result<DeviceInfo, CudaError> {
    // Safety: only tries to dlopen the libraries.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(CudaError::NoDriver);
    }
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(CudaError::NoNvrtc);
    }
    let count = match CudaContext::device_count() {
        Ok(c) => c,
        // cuInit itself reports a machine with a driver but no GPU.
        Err(e) if format!("{e:?}").contains("CUDA_ERROR_NO_DEVICE") => 0,
        Err(e) => return Err(CudaError::Driver(e.to_string())),
    };
    if ordinal >= count.max(0) as usize {
        return Err(CudaError::NoDevice { ordinal, count: count.max(0) as usize });
    }
    let ctx = CudaContext::new(ordinal).map_err(|e| CudaError::Driver(e.to_string()))?;
    let name = ctx.name().map_err(|e| CudaError::Driver(e.to_string()))?;
    let (major, minor) = ctx.compute_capability().map_err(|e| CudaError::Driver(e.to_string()))?;
    let memory_bytes = ctx.total_mem().map_err(|e| CudaError::Driver(e.to_string()))?;
    Ok(DeviceInfo { ordinal, name, compute_capability: (major, minor), memory_bytes })
}

/// One device, one stream, and the compiled kernels.
pub struct CudaExec {
    info: DeviceInfo,
    stream: Arc<CudaStream>,
    /// In KERNEL_NAMES order.
    functions: Vec<CudaFunction>,
}

impl std::fmt::Debug for CudaExec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaExec").field("device", &self.info).finish()
    }
}

impl CudaExec {
    pub fn new(ordinal: usize) -> Result<Self, CudaError> {
        let info = probe(ordinal)?;
        let ctx = CudaContext::new(ordinal).map_err(|e| CudaError::Driver(e.to_string()))?;
        let (major, minor) = info.compute_capability;
        let opts = CompileOptions {
            // No FMA contraction: the centred base conversion's floating-point sum must round
            // like the CPU's (the kernel also uses explicit _rn intrinsics).
            fmad: Some(false),
            options: vec![format!("--gpu-architecture=compute_{major}{minor}")],
            name: Some("lycaon_kernels.cu".into()),
            ..Default::default()
        };
        let ptx = compile_ptx_with_opts(program_source(), opts).map_err(|e| CudaError::Compile(e.to_string()))?;
        let module = ctx.load_module(ptx).map_err(|e| CudaError::Driver(e.to_string()))?;
        let functions = KERNEL_NAMES
            .iter()
            .map(|name| module.load_function(name).map_err(|e| CudaError::Driver(format!("loading {name}: {e}"))))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { info, stream: ctx.default_stream(), functions })
    }

    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn function(&self, name: &str) -> ExecResult<&CudaFunction> {
        KERNEL_NAMES
            .iter()
            .position(|k| *k == name)
            .and_then(|i| self.functions.get(i))
            .ok_or_else(|| ExecError(format!("kernel {name} is not in the compiled program")))
    }
}

fn config(d: LaunchDims) -> LaunchConfig {
    LaunchConfig { grid_dim: d.grid, block_dim: (d.block, 1, 1), shared_mem_bytes: d.shared_bytes }
}

/// The CUDA backend: [`KernelBackend`] over a GPU.
pub type CudaBackend = KernelBackend<CudaExec>;

impl KernelBackend<CudaExec> {
    /// Opens device `ordinal` and compiles the kernels; errors name what is missing (driver,
    /// NVRTC, device) or what failed.
    pub fn new(ordinal: usize) -> Result<Self, CudaError> {
        let exec = CudaExec::new(ordinal)?;
        Ok(Self::with_exec(exec, format!("cuda:{ordinal}")))
    }

    pub fn device_info(&self) -> &DeviceInfo {
        self.exec().info()
    }
}

macro_rules! launch {
    ($self:ident, $name:literal, $dims:expr, $($arg:expr),* $(,)?) => {{
        let mut builder = $self.stream.launch_builder($self.function($name)?);
        $( builder.arg($arg); )*
        // Safety: the argument list matches the kernel's signature in kernels/*.cu, and the
        // host code sizes every buffer for the launch geometry (checked in the emulation).
        unsafe { builder.launch(config($dims)) }.map(|_| ()).map_err(driver_err($name))
    }};
}

impl KernelExec for CudaExec {
    type Buf = CudaSlice<u64>;

    fn upload(&self, data: &[u64]) -> ExecResult<CudaSlice<u64>> {
        self.stream.clone_htod(data).map_err(driver_err("host-to-device copy"))
    }

    fn zeros(&self, len: usize) -> ExecResult<CudaSlice<u64>> {
        self.stream.alloc_zeros(len).map_err(driver_err("allocation"))
    }

    fn download(&self, buf: &CudaSlice<u64>) -> ExecResult<Vec<u64>> {
        let out = self.stream.clone_dtoh(buf).map_err(driver_err("device-to-host copy"))?;
        self.stream.synchronize().map_err(driver_err("synchronize"))?;
        Ok(out)
    }

    fn ntt_forward_stage(
        &self,
        d: LaunchDims,
        data: &mut CudaSlice<u64>,
        roots: &CudaSlice<u64>,
        roots_shoup: &CudaSlice<u64>,
        mods: &CudaSlice<u64>,
        n: u32,
        m: u32,
    ) -> ExecResult<()> {
        launch!(self, "lycaon_ntt_forward_stage", d, data, roots, roots_shoup, mods, &n, &m)
    }

    fn ntt_inverse_stage(
        &self,
        d: LaunchDims,
        data: &mut CudaSlice<u64>,
        inv_roots: &CudaSlice<u64>,
        inv_roots_shoup: &CudaSlice<u64>,
        mods: &CudaSlice<u64>,
        last_consts: &CudaSlice<u64>,
        n: u32,
        h: u32,
    ) -> ExecResult<()> {
        launch!(self, "lycaon_ntt_inverse_stage", d, data, inv_roots, inv_roots_shoup, mods, last_consts, &n, &h)
    }

    fn mul_pointwise(&self, d: LaunchDims, a: &mut CudaSlice<u64>, b: &CudaSlice<u64>, mods: &CudaSlice<u64>, n: u32) -> ExecResult<()> {
        launch!(self, "lycaon_mul_pointwise", d, a, b, mods, &n)
    }

    fn automorphism_ntt(&self, d: LaunchDims, out: &mut CudaSlice<u64>, input: &CudaSlice<u64>, n: u32, log_n: u32, galois: u64) -> ExecResult<()> {
        launch!(self, "lycaon_automorphism_ntt", d, out, input, &n, &log_n, &galois)
    }

    fn convert_scale(
        &self,
        d: LaunchDims,
        scaled: &mut CudaSlice<u64>,
        input: &CudaSlice<u64>,
        mods_from: &CudaSlice<u64>,
        punctured_inv: &CudaSlice<u64>,
        n: u32,
    ) -> ExecResult<()> {
        launch!(self, "lycaon_convert_scale", d, scaled, input, mods_from, punctured_inv, &n)
    }

    fn convert_accumulate(
        &self,
        d: LaunchDims,
        out: &mut CudaSlice<u64>,
        scaled: &CudaSlice<u64>,
        mods_to: &CudaSlice<u64>,
        punctured_mod_to: &CudaSlice<u64>,
        inv_q_from: &CudaSlice<u64>,
        q_mod_to: &CudaSlice<u64>,
        n: u32,
        l_from: u32,
        centered: u32,
    ) -> ExecResult<()> {
        // inv_q_from holds f64 bit patterns: the kernel's `const double*` reads the same words.
        launch!(self, "lycaon_convert_accumulate", d, out, scaled, mods_to, punctured_mod_to, inv_q_from, q_mod_to, &n, &l_from, &centered)
    }

    fn inner_product(
        &self,
        d: LaunchDims,
        out: &mut CudaSlice<u64>,
        digits: &CudaSlice<u64>,
        keys: &CudaSlice<u64>,
        mods: &CudaSlice<u64>,
        n: u32,
        limbs: u32,
        num_digits: u32,
    ) -> ExecResult<()> {
        launch!(self, "lycaon_inner_product", d, out, digits, keys, mods, &n, &limbs, &num_digits)
    }

    fn alloc(&self, len: usize) -> ExecResult<CudaSlice<u64>> {
        // Safety: the pool hands such buffers only to code that writes every word it later reads
        // (checked in the emulation, whose fresh buffers hold a pattern no kernel output equals).
        unsafe { self.stream.alloc(len) }.map_err(driver_err("allocation"))
    }

    fn write(&self, buf: &mut CudaSlice<u64>, data: &[u64]) -> ExecResult<()> {
        if data.len() > buf.len() {
            return Err(ExecError(format!("write: {} words into a buffer of {}", data.len(), buf.len())));
        }
        self.stream.memcpy_htod(data, &mut buf.slice_mut(..data.len())).map_err(driver_err("host-to-device copy"))
    }

    fn copy(&self, dst: &mut CudaSlice<u64>, dst_at: usize, src: &CudaSlice<u64>, src_at: usize, len: usize) -> ExecResult<()> {
        if dst_at + len > dst.len() || src_at + len > src.len() {
            return Err(ExecError(format!("copy: {len} words from {src_at} of {} to {dst_at} of {}", src.len(), dst.len())));
        }
        self.stream.memcpy_dtod(&src.slice(src_at..src_at + len), &mut dst.slice_mut(dst_at..dst_at + len)).map_err(driver_err("device-to-device copy"))
    }

    fn len(&self, buf: &CudaSlice<u64>) -> usize {
        buf.len()
    }

    fn fill_zero(&self, buf: &mut CudaSlice<u64>, at: usize, len: usize) -> ExecResult<()> {
        if at + len > buf.len() {
            return Err(ExecError(format!("fill_zero: {len} words at {at} of {}", buf.len())));
        }
        self.stream.memset_zeros(&mut buf.slice_mut(at..at + len)).map_err(driver_err("memset"))
    }

    fn synchronize(&self) -> ExecResult<()> {
        self.stream.synchronize().map_err(driver_err("synchronize"))
    }

    fn add_sub(&self, d: LaunchDims, a: &mut CudaSlice<u64>, b: &CudaSlice<u64>, mods: &CudaSlice<u64>, n: u32, op: u32) -> ExecResult<()> {
        launch!(self, "lycaon_add_sub", d, a, b, mods, &n, &op)
    }

    fn fft_inverse_stage(&self, d: LaunchDims, re: &mut CudaSlice<u64>, im: &mut CudaSlice<u64>, ksi: &CudaSlice<u64>, rot_group: &CudaSlice<u64>, m: u32, size: u32, len: u32) -> ExecResult<()> {
        launch!(self, "lycaon_fft_inverse_stage", d, re, im, ksi, rot_group, &m, &size, &len)
    }

    fn fft_finish(&self, d: LaunchDims, out: [&mut CudaSlice<u64>; 2], input: [&CudaSlice<u64>; 2], size: u32, log_size: u32, inv_bits: u64) -> ExecResult<()> {
        let [o_re, o_im] = out;
        launch!(self, "lycaon_fft_finish", d, o_re, o_im, input[0], input[1], &size, &log_size, &inv_bits)
    }

    fn inner_product_intt_head(&self, d: LaunchDims, out: [&mut CudaSlice<u64>; 2], digits: &CudaSlice<u64>, keys: &CudaSlice<u64>, key_limbs: &CudaSlice<u64>, mods: &CudaSlice<u64>, inv_roots: &CudaSlice<u64>, inv_roots_shoup: &CudaSlice<u64>, last_consts: &CudaSlice<u64>, a: IntoInttDims) -> ExecResult<()> {
        let [o0, o1] = out;
        launch!(self, "lycaon_inner_product_intt_head", d, o0, o1, digits, keys, key_limbs, mods, inv_roots, inv_roots_shoup, last_consts, &a.n, &a.limbs, &a.q_limbs, &a.num_digits, &a.key_digits, &a.key_limbs_total, &a.h_min)
    }

    fn abs_max(&self, d: LaunchDims, partial: &mut CudaSlice<u64>, re: &CudaSlice<u64>, im: &CudaSlice<u64>, size: u32) -> ExecResult<()> {
        launch!(self, "lycaon_abs_max", d, partial, re, im, &size)
    }

    fn encode_round(&self, d: LaunchDims, out: &mut CudaSlice<u64>, re: &CudaSlice<u64>, im: &CudaSlice<u64>, mods: &CudaSlice<u64>, n: u32, slots: u32, scale_bits: u64) -> ExecResult<()> {
        launch!(self, "lycaon_encode_round", d, out, re, im, mods, &n, &slots, &scale_bits)
    }

    fn mul_add(&self, d: LaunchDims, acc: &mut CudaSlice<u64>, a: &CudaSlice<u64>, b: &CudaSlice<u64>, mods: &CudaSlice<u64>, n: u32) -> ExecResult<()> {
        launch!(self, "lycaon_mul_add", d, acc, a, b, mods, &n)
    }

    fn limb_constants(
        &self,
        d: LaunchDims,
        a: &mut CudaSlice<u64>,
        consts: &CudaSlice<u64>,
        imag_unit: &CudaSlice<u64>,
        mods: &CudaSlice<u64>,
        n: u32,
        op: u32,
    ) -> ExecResult<()> {
        launch!(self, "lycaon_limb_constants", d, a, consts, imag_unit, mods, &n, &op)
    }

    fn tensor(
        &self,
        d: LaunchDims,
        out: [&mut CudaSlice<u64>; 3],
        a: [&CudaSlice<u64>; 2],
        b: [&CudaSlice<u64>; 2],
        mods: &CudaSlice<u64>,
        n: u32,
    ) -> ExecResult<()> {
        let [d0, d1, d2] = out;
        launch!(self, "lycaon_tensor", d, d0, d1, d2, a[0], a[1], b[0], b[1], mods, &n)
    }

    fn ntt_forward_last_sub_scale(
        &self,
        d: LaunchDims,
        out: &mut CudaSlice<u64>,
        data: &CudaSlice<u64>,
        roots: &CudaSlice<u64>,
        roots_shoup: &CudaSlice<u64>,
        mods: &CudaSlice<u64>,
        consts: &CudaSlice<u64>,
        n: u32,
    ) -> ExecResult<()> {
        launch!(self, "lycaon_ntt_forward_last_sub_scale", d, out, data, roots, roots_shoup, mods, consts, &n)
    }

    fn rescale_spread(
        &self,
        d: LaunchDims,
        out: &mut CudaSlice<u64>,
        last: &CudaSlice<u64>,
        last_mod: &CudaSlice<u64>,
        mods: &CudaSlice<u64>,
        n: u32,
        q_last: u64,
    ) -> ExecResult<()> {
        launch!(self, "lycaon_rescale_spread", d, out, last, last_mod, mods, &n, &q_last)
    }

    fn inner_product_resident(
        &self,
        d: LaunchDims,
        out: [&mut CudaSlice<u64>; 2],
        digits: &CudaSlice<u64>,
        keys: &CudaSlice<u64>,
        key_limbs: &CudaSlice<u64>,
        mods: &CudaSlice<u64>,
        n: u32,
        limbs: u32,
        num_digits: u32,
        key_digits: u32,
        key_limbs_total: u32,
    ) -> ExecResult<()> {
        let [out0, out1] = out;
        launch!(self, "lycaon_inner_product_resident", d, out0, out1, digits, keys, key_limbs, mods, &n, &limbs, &num_digits, &key_digits, &key_limbs_total)
    }

    fn ntt_forward_tail(
        &self,
        d: LaunchDims,
        data: &mut CudaSlice<u64>,
        roots: &CudaSlice<u64>,
        roots_shoup: &CudaSlice<u64>,
        mods: &CudaSlice<u64>,
        n: u32,
        m_start: u32,
        m_end: u32,
    ) -> ExecResult<()> {
        launch!(self, "lycaon_ntt_forward_tail", d, data, roots, roots_shoup, mods, &n, &m_start, &m_end)
    }

    fn ntt_inverse_head(
        &self,
        d: LaunchDims,
        data: &mut CudaSlice<u64>,
        inv_roots: &CudaSlice<u64>,
        inv_roots_shoup: &CudaSlice<u64>,
        mods: &CudaSlice<u64>,
        last_consts: &CudaSlice<u64>,
        n: u32,
        h_min: u32,
    ) -> ExecResult<()> {
        launch!(self, "lycaon_ntt_inverse_head", d, data, inv_roots, inv_roots_shoup, mods, last_consts, &n, &h_min)
    }
}
