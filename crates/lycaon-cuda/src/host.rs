//! The host half of the device backend, written once for every kernel executor: table
//! precomputation, argument layout, launch geometry and the stage loop of the NTT. A
//! [`KernelExec`] only moves words and launches one named kernel; [`crate::CudaBackend`] runs
//! them on a GPU and, in tests, `EmulatedBackend` runs the same kernel sources on the host, so
//! everything in this file is exercised by the emulation tests.
//!
//! The `Backend` methods here upload their operands, launch, and download the result (only the
//! constant tables stay on the device, cached per basis): that trait serves host polynomials.
//! Resident polynomials, with a memory pool and fused kernels, are `ResidentBackend`'s
//! (src/resident.rs, implementation_notes/cuda.md).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use lycaon_backend::{check_inner_product_args, Backend};
use lycaon_math::{bit_reverse, Automorphism, BaseConverter, Coeff, MathError, Modulus, Ntt, Poly, RnsBasis};
use num_traits::ToPrimitive;

/// Threads per block for every kernel (a block never has more threads than the launch has work).
pub const BLOCK_THREADS: usize = 256;

/// A launch geometry: grid.x covers `work` items in blocks of `block` threads; grid.y and grid.z
/// index limbs and outputs; `shared_bytes` of dynamic shared memory per block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchDims {
    pub grid: (u32, u32, u32),
    pub block: u32,
    pub shared_bytes: u32,
}

/// Threads per block of the shared-memory NTT kernels: each block transforms 2 NTT_CHUNK_THREADS
/// words (16 KiB of shared memory).
pub const NTT_CHUNK_THREADS: usize = 1024;

impl LaunchDims {
    pub fn cover(work: usize, y: usize, z: usize) -> Self {
        let block = work.clamp(1, BLOCK_THREADS);
        Self { grid: (work.div_ceil(block) as u32, y as u32, z as u32), block: block as u32, shared_bytes: 0 }
    }

    /// One block per chunk of 2 `threads` words of an n-word limb, the chunk in shared memory.
    pub fn chunks(n: usize, limbs: usize, threads: usize) -> Self {
        Self { grid: ((n / (2 * threads)) as u32, limbs as u32, 1), block: threads as u32, shared_bytes: (2 * threads * 8) as u32 }
    }
}

/// A failure of the device or its driver (never of the arithmetic).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecError(pub String);

pub type ExecResult<T> = Result<T, ExecError>;

/// Buffers of 64-bit words and the seven kernels of kernels/*.cu, one method each with the
/// kernel's exact parameter list (after the launch geometry).
pub trait KernelExec: Send + Sync + std::fmt::Debug {
    type Buf: Send + Sync;

    fn upload(&self, data: &[u64]) -> ExecResult<Self::Buf>;
    fn zeros(&self, len: usize) -> ExecResult<Self::Buf>;
    /// Waits for every launch before it and copies the buffer back.
    fn download(&self, buf: &Self::Buf) -> ExecResult<Vec<u64>>;

    #[allow(clippy::too_many_arguments)]
    fn ntt_forward_stage(
        &self,
        d: LaunchDims,
        data: &mut Self::Buf,
        roots: &Self::Buf,
        roots_shoup: &Self::Buf,
        mods: &Self::Buf,
        n: u32,
        m: u32,
    ) -> ExecResult<()>;
    #[allow(clippy::too_many_arguments)]
    fn ntt_inverse_stage(
        &self,
        d: LaunchDims,
        data: &mut Self::Buf,
        inv_roots: &Self::Buf,
        inv_roots_shoup: &Self::Buf,
        mods: &Self::Buf,
        last_consts: &Self::Buf,
        n: u32,
        h: u32,
    ) -> ExecResult<()>;
    fn mul_pointwise(&self, d: LaunchDims, a: &mut Self::Buf, b: &Self::Buf, mods: &Self::Buf, n: u32) -> ExecResult<()>;
    fn automorphism_ntt(&self, d: LaunchDims, out: &mut Self::Buf, input: &Self::Buf, n: u32, log_n: u32, galois: u64) -> ExecResult<()>;
    fn convert_scale(
        &self,
        d: LaunchDims,
        scaled: &mut Self::Buf,
        input: &Self::Buf,
        mods_from: &Self::Buf,
        punctured_inv: &Self::Buf,
        n: u32,
    ) -> ExecResult<()>;
    /// `inv_q_from` holds f64 bit patterns (`f64::to_bits`); the kernel reads them as doubles.
    #[allow(clippy::too_many_arguments)]
    fn convert_accumulate(
        &self,
        d: LaunchDims,
        out: &mut Self::Buf,
        scaled: &Self::Buf,
        mods_to: &Self::Buf,
        punctured_mod_to: &Self::Buf,
        inv_q_from: &Self::Buf,
        q_mod_to: &Self::Buf,
        n: u32,
        l_from: u32,
        centered: u32,
    ) -> ExecResult<()>;
    #[allow(clippy::too_many_arguments)]
    fn inner_product(
        &self,
        d: LaunchDims,
        out: &mut Self::Buf,
        digits: &Self::Buf,
        keys: &Self::Buf,
        mods: &Self::Buf,
        n: u32,
        limbs: u32,
        num_digits: u32,
    ) -> ExecResult<()>;

    /// Forward stages m_start <= m < m_end in shared memory, chunks of 2 d.block words.
    #[allow(clippy::too_many_arguments)]
    fn ntt_forward_tail(
        &self,
        d: LaunchDims,
        data: &mut Self::Buf,
        roots: &Self::Buf,
        roots_shoup: &Self::Buf,
        mods: &Self::Buf,
        n: u32,
        m_start: u32,
        m_end: u32,
    ) -> ExecResult<()>;
    /// Inverse stages h = n/2 .. h_min in shared memory (with the 1/n of the last when h_min = 1).
    #[allow(clippy::too_many_arguments)]
    fn ntt_inverse_head(
        &self,
        d: LaunchDims,
        data: &mut Self::Buf,
        inv_roots: &Self::Buf,
        inv_roots_shoup: &Self::Buf,
        mods: &Self::Buf,
        last_consts: &Self::Buf,
        n: u32,
        h_min: u32,
    ) -> ExecResult<()>;

    // Resident memory (src/resident.rs): buffers reused through a pool, copies on the device.

    /// A buffer of `len` words whose contents are unspecified.
    fn alloc(&self, len: usize) -> ExecResult<Self::Buf>;
    /// Overwrites the start of `buf` with `data` (host to device).
    fn write(&self, buf: &mut Self::Buf, data: &[u64]) -> ExecResult<()>;
    /// dst[dst_at..dst_at + len] = src[src_at..src_at + len], device to device.
    fn copy(&self, dst: &mut Self::Buf, dst_at: usize, src: &Self::Buf, src_at: usize, len: usize) -> ExecResult<()>;
    fn len(&self, buf: &Self::Buf) -> usize;
    /// buf[at..at + len] = 0 on the device.
    fn fill_zero(&self, buf: &mut Self::Buf, at: usize, len: usize) -> ExecResult<()>;
    /// Waits for every launch and copy issued so far.
    fn synchronize(&self) -> ExecResult<()>;

    fn add_sub(&self, d: LaunchDims, a: &mut Self::Buf, b: &Self::Buf, mods: &Self::Buf, n: u32, op: u32) -> ExecResult<()>;
    fn mul_add(&self, d: LaunchDims, acc: &mut Self::Buf, a: &Self::Buf, b: &Self::Buf, mods: &Self::Buf, n: u32) -> ExecResult<()>;
    #[allow(clippy::too_many_arguments)]
    fn fft_inverse_stage(&self, d: LaunchDims, re: &mut Self::Buf, im: &mut Self::Buf, ksi: &Self::Buf, rot_group: &Self::Buf, m: u32, size: u32, len: u32) -> ExecResult<()>;
    #[allow(clippy::too_many_arguments)]
    fn fft_finish(&self, d: LaunchDims, out: [&mut Self::Buf; 2], input: [&Self::Buf; 2], size: u32, log_size: u32, inv_bits: u64) -> ExecResult<()>;
    /// The special primes' inner products fused with their inverse NTT's first stages
    /// (kernels/inner_product.cu); d = chunks over n, grid.y = special primes, grid.z = 2.
    #[allow(clippy::too_many_arguments)]
    fn inner_product_intt_head(&self, d: LaunchDims, out: [&mut Self::Buf; 2], digits: &Self::Buf, keys: &Self::Buf, key_limbs: &Self::Buf, mods: &Self::Buf, inv_roots: &Self::Buf, inv_roots_shoup: &Self::Buf, last_consts: &Self::Buf, dims: IntoInttDims) -> ExecResult<()>;
    fn abs_max(&self, d: LaunchDims, partial: &mut Self::Buf, re: &Self::Buf, im: &Self::Buf, size: u32) -> ExecResult<()>;
    #[allow(clippy::too_many_arguments)]
    fn encode_round(&self, d: LaunchDims, out: &mut Self::Buf, re: &Self::Buf, im: &Self::Buf, mods: &Self::Buf, n: u32, slots: u32, scale_bits: u64) -> ExecResult<()>;
    #[allow(clippy::too_many_arguments)]
    fn limb_constants(&self, d: LaunchDims, a: &mut Self::Buf, consts: &Self::Buf, imag_unit: &Self::Buf, mods: &Self::Buf, n: u32, op: u32) -> ExecResult<()>;
    #[allow(clippy::too_many_arguments)]
    fn tensor(&self, d: LaunchDims, out: [&mut Self::Buf; 3], a: [&Self::Buf; 2], b: [&Self::Buf; 2], mods: &Self::Buf, n: u32) -> ExecResult<()>;
    #[allow(clippy::too_many_arguments)]
    fn ntt_forward_last_sub_scale(
        &self,
        d: LaunchDims,
        out: &mut Self::Buf,
        data: &Self::Buf,
        roots: &Self::Buf,
        roots_shoup: &Self::Buf,
        mods: &Self::Buf,
        consts: &Self::Buf,
        n: u32,
    ) -> ExecResult<()>;
    #[allow(clippy::too_many_arguments)]
    fn rescale_spread(
        &self,
        d: LaunchDims,
        out: &mut Self::Buf,
        last: &Self::Buf,
        last_mod: &Self::Buf,
        mods: &Self::Buf,
        n: u32,
        q_last: u64,
    ) -> ExecResult<()>;
    #[allow(clippy::too_many_arguments)]
    fn inner_product_resident(
        &self,
        d: LaunchDims,
        out: [&mut Self::Buf; 2],
        digits: &Self::Buf,
        keys: &Self::Buf,
        key_limbs: &Self::Buf,
        mods: &Self::Buf,
        n: u32,
        limbs: u32,
        num_digits: u32,
        key_digits: u32,
        key_limbs_total: u32,
    ) -> ExecResult<()>;
}

/// The scalar arguments of `lycaon_inner_product_intt_head`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntoInttDims {
    pub n: u32,
    /// Limbs of the digits' basis (Q_l P).
    pub limbs: u32,
    /// Limbs of Q_l (the special primes follow).
    pub q_limbs: u32,
    pub num_digits: u32,
    pub key_digits: u32,
    pub key_limbs_total: u32,
    pub h_min: u32,
}

/// floor(2^128 / q) as (high, low) words: lycaon_math::Modulus's Barrett constant, recomputed by
/// the same formula because the math crate keeps it private.
pub fn barrett_ratio(q: u64) -> (u64, u64) {
    let ratio = if q.is_power_of_two() { 1u128 << (128 - q.trailing_zeros()) } else { u128::MAX / q as u128 };
    ((ratio >> 64) as u64, ratio as u64)
}

/// The per-limb modulus words the kernels read (kernels/common.cuh, MOD_STRIDE = 3).
pub fn modulus_words(moduli: &[Modulus]) -> Vec<u64> {
    moduli
        .iter()
        .flat_map(|q| {
            let (hi, lo) = barrett_ratio(q.value());
            [q.value(), hi, lo]
        })
        .collect()
}

/// The host copies of one basis's tables, limb-major (see kernels/ntt.cu).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NttTables {
    pub mods: Vec<u64>,
    pub roots: Vec<u64>,
    pub roots_shoup: Vec<u64>,
    pub inv_roots: Vec<u64>,
    pub inv_roots_shoup: Vec<u64>,
    /// Per limb: n^-1, its Shoup constant, psi^-brv(1) n^-1, its Shoup constant.
    pub last_consts: Vec<u64>,
}

/// The 2n-th root of unity psi that the CPU's NTT plan for `limb` uses: slot 0 of the transform
/// of X is X evaluated at psi^(2 brv(0) + 1) = psi.
pub fn plan_psi(basis: &RnsBasis, limb: usize) -> u64 {
    let mut x = vec![0u64; basis.n()];
    x[1] = 1;
    basis.plans()[limb].forward(&mut x);
    x[0]
}

impl NttTables {
    pub fn new(basis: &RnsBasis) -> Result<Self, MathError> {
        Self::for_limbs(basis, 0..basis.len())
    }

    /// The tables of limbs `limbs` of `basis` only (a rescale transforms the last limb alone).
    pub fn for_limbs(basis: &RnsBasis, limbs: std::ops::Range<usize>) -> Result<Self, MathError> {
        let n = basis.n();
        let log_n = n.trailing_zeros();
        let moduli = basis.moduli().get(limbs.clone()).ok_or(MathError::LimbCount { expected: basis.len(), found: limbs.end })?;
        let mut t = NttTables {
            mods: modulus_words(moduli),
            roots: Vec::with_capacity(basis.len() * n),
            roots_shoup: Vec::with_capacity(basis.len() * n),
            inv_roots: Vec::with_capacity(basis.len() * n),
            inv_roots_shoup: Vec::with_capacity(basis.len() * n),
            last_consts: Vec::with_capacity(basis.len() * 4),
        };
        for (at, (limb, q)) in limbs.zip(moduli).enumerate() {
            let psi = plan_psi(basis, limb);
            let psi_inv = q.inv(psi)?;
            for (base, values, shoups) in [(psi, &mut t.roots, &mut t.roots_shoup), (psi_inv, &mut t.inv_roots, &mut t.inv_roots_shoup)] {
                let mut powers = Vec::with_capacity(n);
                let mut p = 1u64;
                for _ in 0..n {
                    powers.push(p);
                    p = q.mul(p, base);
                }
                for i in 0..n {
                    let w = powers[bit_reverse(i, log_n)];
                    values.push(w);
                    shoups.push(q.shoup(w));
                }
            }
            let n_inv = q.inv(n as u64)?;
            let w_n_inv = q.mul(t.inv_roots[at * n + 1], n_inv);
            t.last_consts.extend([n_inv, q.shoup(n_inv), w_n_inv, q.shoup(w_n_inv)]);
        }
        Ok(t)
    }
}

/// The host copies of one conversion's constants (see kernels/base_conversion.cu).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConversionTables {
    pub mods_from: Vec<u64>,
    pub mods_to: Vec<u64>,
    /// (Q/q_i)^-1 mod q_i and its Shoup constant, per source limb.
    pub punctured_inv: Vec<u64>,
    /// Q/q_i mod p_j at [j l_from + i].
    pub punctured_mod_to: Vec<u64>,
    /// 1.0 / q_i as f64 bit patterns.
    pub inv_q_from: Vec<u64>,
    /// Q mod p_j.
    pub q_mod_to: Vec<u64>,
}

impl ConversionTables {
    pub fn new(conv: &BaseConverter) -> Self {
        let (from, to) = (conv.from_basis(), conv.to_basis());
        let product = from.product();
        let punctured_inv = (0..from.len())
            .flat_map(|i| {
                let c = from.punctured_inverse(i);
                [c.value, c.shoup]
            })
            .collect();
        // The same big-integer formulas as BaseConverter::new.
        let punctured_mod_to =
            to.moduli().iter().flat_map(|p| from.moduli().iter().map(move |q| ((product / q.value()) % p.value()).to_u64().unwrap_or(0))).collect();
        Self {
            mods_from: modulus_words(from.moduli()),
            mods_to: modulus_words(to.moduli()),
            punctured_inv,
            punctured_mod_to,
            inv_q_from: from.moduli().iter().map(|q| (1.0 / q.value() as f64).to_bits()).collect(),
            q_mod_to: to.moduli().iter().map(|p| (product % p.value()).to_u64().unwrap_or(0)).collect(),
        }
    }
}

/// One basis's tables, uploaded.
pub(crate) struct DeviceNttTables<B> {
    pub(crate) mods: B,
    pub(crate) roots: B,
    pub(crate) roots_shoup: B,
    pub(crate) inv_roots: B,
    pub(crate) inv_roots_shoup: B,
    pub(crate) last_consts: B,
    /// The host copy of last_consts (resident ModUp and ModDown scale them per limb).
    pub(crate) last_consts_host: Vec<u64>,
}

pub(crate) struct DeviceConversionTables<B> {
    pub(crate) mods_from: B,
    pub(crate) mods_to: B,
    pub(crate) punctured_inv: B,
    pub(crate) punctured_mod_to: B,
    pub(crate) inv_q_from: B,
    pub(crate) q_mod_to: B,
}

/// A basis or a pair of bases, identified by degree and primes (never by pointer).
type BasisKey = (usize, Vec<u64>);
type ConversionKey = (usize, Vec<u64>, Vec<u64>);
/// Uploaded constant arrays by (what they are, the primes and values they depend on).
pub(crate) type ConstantCache<B> = HashMap<(&'static str, Vec<u64>), Arc<B>>;

fn basis_key(basis: &RnsBasis) -> BasisKey {
    (basis.n(), basis.moduli().iter().map(|q| q.value()).collect())
}

/// [`Backend`] over any [`KernelExec`]. A device failure, and a kernel output that is not made of
/// reduced residues (a kernel bug), are returned as [`MathError::Device`] naming this backend and
/// the step that failed; nothing here panics.
pub struct KernelBackend<E: KernelExec> {
    exec: E,
    name: String,
    ntt_tables: RwLock<HashMap<BasisKey, Arc<DeviceNttTables<E::Buf>>>>,
    conversion_tables: RwLock<HashMap<ConversionKey, Arc<DeviceConversionTables<E::Buf>>>>,
    /// Device memory for resident polynomials, reused by size (crate::resident).
    pub(crate) pool: Arc<crate::pool::BufferPool<E::Buf>>,
    /// Small constant arrays of resident operations, by what they are and the primes they serve.
    pub(crate) constants: RwLock<ConstantCache<E::Buf>>,
    /// Threads per block of the shared-memory NTT kernels (a power of two).
    chunk_threads: usize,
}

impl<E: KernelExec> std::fmt::Debug for KernelBackend<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelBackend").field("name", &self.name).field("exec", &self.exec).finish()
    }
}

impl<E: KernelExec> KernelBackend<E> {
    pub fn with_exec(exec: E, name: impl Into<String>) -> Self {
        Self {
            exec,
            name: name.into(),
            ntt_tables: RwLock::default(),
            conversion_tables: RwLock::default(),
            pool: Arc::default(),
            constants: RwLock::default(),
            chunk_threads: NTT_CHUNK_THREADS,
        }
    }

    /// Shared-memory NTT blocks of `threads` threads (a power of two, at least 1) instead of
    /// [`NTT_CHUNK_THREADS`]: small blocks make the emulation run the global stages and the
    /// shared-memory stages at small degrees.
    pub fn with_chunk_threads(mut self, threads: usize) -> Self {
        self.chunk_threads = threads.max(1).next_power_of_two();
        self
    }

    /// The forward NTT stages m = 1, 2, .. below `m_end` (n for the whole transform) of `limbs`
    /// limbs: one launch per stage while a stage's groups span several chunks, then the remaining
    /// stages in one shared-memory launch.
    pub(crate) fn forward_transform(&self, buf: &mut E::Buf, t: &DeviceNttTables<E::Buf>, n: usize, limbs: usize, m_end: usize) -> Result<(), MathError> {
        let threads = (n / 2).min(self.chunk_threads).max(1);
        let m_tail = n / (2 * threads);
        let dims = LaunchDims::cover(n / 2, limbs, 1);
        let mut m = 1;
        while m < m_end.min(m_tail) {
            self.device("lycaon_ntt_forward_stage", self.exec.ntt_forward_stage(dims, buf, &t.roots, &t.roots_shoup, &t.mods, n as u32, m as u32))?;
            m *= 2;
        }
        if m < m_end {
            let chunks = LaunchDims::chunks(n, limbs, threads);
            self.device(
                "lycaon_ntt_forward_tail",
                self.exec.ntt_forward_tail(chunks, buf, &t.roots, &t.roots_shoup, &t.mods, n as u32, m as u32, m_end as u32),
            )?;
        }
        Ok(())
    }

    /// The whole inverse NTT of `limbs` limbs, its last stage folding in `last_consts`: the first
    /// stages in one shared-memory launch, then one launch per remaining stage.
    pub(crate) fn inverse_transform(&self, buf: &mut E::Buf, t: &DeviceNttTables<E::Buf>, last_consts: &E::Buf, n: usize, limbs: usize) -> Result<(), MathError> {
        let (threads, h_min) = self.ntt_chunking(n);
        let chunks = LaunchDims::chunks(n, limbs, threads);
        self.device(
            "lycaon_ntt_inverse_head",
            self.exec.ntt_inverse_head(chunks, buf, &t.inv_roots, &t.inv_roots_shoup, &t.mods, last_consts, n as u32, h_min as u32),
        )?;
        self.inverse_stages_below(buf, t, last_consts, n, limbs, h_min)
    }

    /// The threads of a shared-memory NTT block for degree n, and the lowest inverse stage the
    /// shared-memory head reaches (every stage h >= h_min: t = n / 2h fits a chunk).
    pub(crate) fn ntt_chunking(&self, n: usize) -> (usize, usize) {
        let threads = (n / 2).min(self.chunk_threads).max(1);
        (threads, (n / (2 * threads)).max(1))
    }

    /// The inverse NTT's global stages after a shared-memory head that stopped at `h_min`:
    /// h = h_min / 2, ..., 1 (the last folding in `last_consts`).
    pub(crate) fn inverse_stages_below(&self, buf: &mut E::Buf, t: &DeviceNttTables<E::Buf>, last_consts: &E::Buf, n: usize, limbs: usize, h_min: usize) -> Result<(), MathError> {
        let dims = LaunchDims::cover(n / 2, limbs, 1);
        let mut h = h_min / 2;
        while h >= 1 {
            self.device(
                "lycaon_ntt_inverse_stage",
                self.exec.ntt_inverse_stage(dims, buf, &t.inv_roots, &t.inv_roots_shoup, &t.mods, last_consts, n as u32, h as u32),
            )?;
            h /= 2;
        }
        Ok(())
    }

    pub fn exec(&self) -> &E {
        &self.exec
    }

    /// A device failure during `operation`, as the math layer's error naming this backend.
    pub(crate) fn device_error(&self, operation: &str, ExecError(message): ExecError) -> MathError {
        MathError::Device { device: self.name.clone(), operation: operation.to_string(), message }
    }

    /// The result of an executor call, its failure named after `operation`.
    pub(crate) fn device<T>(&self, operation: &str, r: ExecResult<T>) -> Result<T, MathError> {
        r.map_err(|e| self.device_error(operation, e))
    }

    /// Wraps kernel output, checking that every residue is reduced (a kernel bug otherwise).
    fn kernel_output<R: lycaon_math::Representation>(&self, kernel: &str, basis: &Arc<RnsBasis>, data: Vec<u64>) -> Result<Poly<R>, MathError> {
        Poly::from_data(basis, data).map_err(|e| self.device_error(kernel, ExecError(format!("the kernel returned an invalid polynomial: {e}"))))
    }

    fn tables(&self, basis: &RnsBasis) -> Result<Arc<DeviceNttTables<E::Buf>>, MathError> {
        self.tables_for(basis, 0..basis.len())
    }

    /// The uploaded tables of limbs `limbs` of `basis`, cached by degree and primes.
    pub(crate) fn tables_for(&self, basis: &RnsBasis, limbs: std::ops::Range<usize>) -> Result<Arc<DeviceNttTables<E::Buf>>, MathError> {
        let key = (basis.n(), basis.moduli().get(limbs.clone()).unwrap_or_default().iter().map(|q| q.value()).collect::<Vec<_>>());
        if let Some(t) = self.ntt_tables.read().ok().and_then(|m| m.get(&key).cloned()) {
            return Ok(t);
        }
        // Plans exist only for NTT-friendly primes, so the inverses below exist.
        let host = NttTables::for_limbs(basis, limbs)?;
        let up = |v: &[u64]| self.device("uploading NTT tables", self.exec.upload(v));
        let t = Arc::new(DeviceNttTables {
            mods: up(&host.mods)?,
            roots: up(&host.roots)?,
            roots_shoup: up(&host.roots_shoup)?,
            inv_roots: up(&host.inv_roots)?,
            inv_roots_shoup: up(&host.inv_roots_shoup)?,
            last_consts: up(&host.last_consts)?,
            last_consts_host: host.last_consts,
        });
        if let Ok(mut m) = self.ntt_tables.write() {
            m.insert(key, t.clone());
        }
        Ok(t)
    }

    pub(crate) fn conversion(&self, conv: &BaseConverter) -> Result<Arc<DeviceConversionTables<E::Buf>>, MathError> {
        let (n, from_primes) = basis_key(conv.from_basis());
        let key = (n, from_primes, basis_key(conv.to_basis()).1);
        if let Some(t) = self.conversion_tables.read().ok().and_then(|m| m.get(&key).cloned()) {
            return Ok(t);
        }
        let host = ConversionTables::new(conv);
        let up = |v: &[u64]| self.device("uploading base-conversion tables", self.exec.upload(v));
        let t = Arc::new(DeviceConversionTables {
            mods_from: up(&host.mods_from)?,
            mods_to: up(&host.mods_to)?,
            punctured_inv: up(&host.punctured_inv)?,
            punctured_mod_to: up(&host.punctured_mod_to)?,
            inv_q_from: up(&host.inv_q_from)?,
            q_mod_to: up(&host.q_mod_to)?,
        });
        if let Ok(mut m) = self.conversion_tables.write() {
            m.insert(key, t.clone());
        }
        Ok(t)
    }

    fn upload(&self, data: &[u64]) -> Result<E::Buf, MathError> {
        self.device("host-to-device upload", self.exec.upload(data))
    }

    fn zeros(&self, len: usize) -> Result<E::Buf, MathError> {
        self.device("allocation", self.exec.zeros(len))
    }

    fn download(&self, buf: &E::Buf) -> Result<Vec<u64>, MathError> {
        self.device("device-to-host download", self.exec.download(buf))
    }
}

impl<E: KernelExec> Backend for KernelBackend<E> {
    fn name(&self) -> &str {
        &self.name
    }

    fn ntt(&self, poly: Poly<Coeff>) -> Result<Poly<Ntt>, MathError> {
        let basis = poly.basis().clone();
        let n = basis.n();
        let t = self.tables(&basis)?;
        let mut data = self.upload(poly.data())?;
        self.forward_transform(&mut data, &t, n, basis.len(), n)?;
        self.kernel_output("lycaon_ntt_forward_tail", &basis, self.download(&data)?)
    }

    fn intt(&self, poly: Poly<Ntt>) -> Result<Poly<Coeff>, MathError> {
        let basis = poly.basis().clone();
        let n = basis.n();
        let t = self.tables(&basis)?;
        let mut data = self.upload(poly.data())?;
        self.inverse_transform(&mut data, &t, &t.last_consts, n, basis.len())?;
        self.kernel_output("lycaon_ntt_inverse_head", &basis, self.download(&data)?)
    }

    fn mul_assign(&self, a: &mut Poly<Ntt>, b: &Poly<Ntt>) -> Result<(), MathError> {
        if !a.basis().same_primes(b.basis()) {
            return Err(MathError::BasisMismatch { lhs: a.num_limbs(), rhs: b.num_limbs() });
        }
        let basis = a.basis().clone();
        let n = basis.n();
        let t = self.tables(&basis)?;
        let mut x = self.upload(a.data())?;
        let y = self.upload(b.data())?;
        self.device("lycaon_mul_pointwise", self.exec.mul_pointwise(LaunchDims::cover(n, basis.len(), 1), &mut x, &y, &t.mods, n as u32))?;
        *a = self.kernel_output("lycaon_mul_pointwise", &basis, self.download(&x)?)?;
        Ok(())
    }

    fn automorphism_ntt(&self, poly: &Poly<Ntt>, auto: &Automorphism) -> Result<Poly<Ntt>, MathError> {
        if auto.n() != poly.n() {
            return Err(MathError::InvalidGaloisElement { galois_element: auto.galois_element(), n: poly.n() });
        }
        let basis = poly.basis().clone();
        let n = basis.n();
        let input = self.upload(poly.data())?;
        let mut out = self.zeros(poly.data().len())?;
        let dims = LaunchDims::cover(n, basis.len(), 1);
        self.device("lycaon_automorphism_ntt", self.exec.automorphism_ntt(dims, &mut out, &input, n as u32, n.trailing_zeros(), auto.galois_element()))?;
        self.kernel_output("lycaon_automorphism_ntt", &basis, self.download(&out)?)
    }

    fn convert_basis(&self, conv: &BaseConverter, poly: &Poly<Coeff>, centered: bool) -> Result<Poly<Coeff>, MathError> {
        let (from, to) = (conv.from_basis(), conv.to_basis());
        if !poly.basis().same_primes(from) {
            return Err(MathError::BasisMismatch { lhs: poly.num_limbs(), rhs: from.len() });
        }
        let n = from.n();
        let t = self.conversion(conv)?;
        let input = self.upload(poly.data())?;
        let mut scaled = self.zeros(poly.data().len())?;
        self.device(
            "lycaon_convert_scale",
            self.exec.convert_scale(LaunchDims::cover(n, from.len(), 1), &mut scaled, &input, &t.mods_from, &t.punctured_inv, n as u32),
        )?;
        let mut out = self.zeros(to.len() * n)?;
        self.device(
            "lycaon_convert_accumulate",
            self.exec.convert_accumulate(
                LaunchDims::cover(n, to.len(), 1),
                &mut out,
                &scaled,
                &t.mods_to,
                &t.punctured_mod_to,
                &t.inv_q_from,
                &t.q_mod_to,
                n as u32,
                from.len() as u32,
                centered as u32,
            ),
        )?;
        self.kernel_output("lycaon_convert_accumulate", to, self.download(&out)?)
    }

    fn inner_product(&self, digits: &[Poly<Ntt>], keys: &[&[Poly<Ntt>]], key_limbs: &[usize], outputs: usize) -> Result<Vec<Poly<Ntt>>, MathError> {
        let basis = check_inner_product_args(digits, keys, key_limbs, outputs)?;
        let (n, limbs) = (basis.n(), basis.len());
        let t = self.tables(&basis)?;
        let digit_words: Vec<u64> = digits.iter().flat_map(|d| d.data().iter().copied()).collect();
        // Gather the key limbs matching the digits' limbs: [o][j][i][k] (kernels/inner_product.cu).
        let mut key_words = Vec::with_capacity(outputs * digits.len() * limbs * n);
        for o in 0..outputs {
            for k in keys {
                for &l in key_limbs {
                    key_words.extend_from_slice(k[o].limb(l));
                }
            }
        }
        let d = self.upload(&digit_words)?;
        let k = self.upload(&key_words)?;
        let mut out = self.zeros(outputs * limbs * n)?;
        let dims = LaunchDims::cover(n, limbs, outputs);
        self.device("lycaon_inner_product", self.exec.inner_product(dims, &mut out, &d, &k, &t.mods, n as u32, limbs as u32, digits.len() as u32))?;
        let words = self.download(&out)?;
        words.chunks_exact(limbs * n).map(|c| self.kernel_output("lycaon_inner_product", &basis, c.to_vec())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lycaon_math::ntt_moduli;

    /// An executor whose device has failed: every call errs.
    #[derive(Debug)]
    struct FailedDevice;

    fn failed<T>() -> ExecResult<T> {
        Err(ExecError("out of memory".into()))
    }

    #[rustfmt::skip]
    impl KernelExec for FailedDevice {
        type Buf = ();
        fn upload(&self, _: &[u64]) -> ExecResult<()> { failed() }
        fn zeros(&self, _: usize) -> ExecResult<()> { failed() }
        fn download(&self, _: &()) -> ExecResult<Vec<u64>> { failed() }
        fn ntt_forward_stage(&self, _: LaunchDims, _: &mut (), _: &(), _: &(), _: &(), _: u32, _: u32) -> ExecResult<()> { failed() }
        fn ntt_inverse_stage(&self, _: LaunchDims, _: &mut (), _: &(), _: &(), _: &(), _: &(), _: u32, _: u32) -> ExecResult<()> { failed() }
        fn mul_pointwise(&self, _: LaunchDims, _: &mut (), _: &(), _: &(), _: u32) -> ExecResult<()> { failed() }
        fn automorphism_ntt(&self, _: LaunchDims, _: &mut (), _: &(), _: u32, _: u32, _: u64) -> ExecResult<()> { failed() }
        fn convert_scale(&self, _: LaunchDims, _: &mut (), _: &(), _: &(), _: &(), _: u32) -> ExecResult<()> { failed() }
        fn convert_accumulate(&self, _: LaunchDims, _: &mut (), _: &(), _: &(), _: &(), _: &(), _: &(), _: u32, _: u32, _: u32) -> ExecResult<()> { failed() }
        fn inner_product(&self, _: LaunchDims, _: &mut (), _: &(), _: &(), _: &(), _: u32, _: u32, _: u32) -> ExecResult<()> { failed() }
        fn ntt_forward_tail(&self, _: LaunchDims, _: &mut (), _: &(), _: &(), _: &(), _: u32, _: u32, _: u32) -> ExecResult<()> { failed() }
        fn ntt_inverse_head(&self, _: LaunchDims, _: &mut (), _: &(), _: &(), _: &(), _: &(), _: u32, _: u32) -> ExecResult<()> { failed() }
        fn alloc(&self, _: usize) -> ExecResult<()> { failed() }
        fn write(&self, _: &mut (), _: &[u64]) -> ExecResult<()> { failed() }
        fn copy(&self, _: &mut (), _: usize, _: &(), _: usize, _: usize) -> ExecResult<()> { failed() }
        fn len(&self, _: &()) -> usize { 0 }
        fn fill_zero(&self, _: &mut (), _: usize, _: usize) -> ExecResult<()> { failed() }
        fn synchronize(&self) -> ExecResult<()> { failed() }
        fn add_sub(&self, _: LaunchDims, _: &mut (), _: &(), _: &(), _: u32, _: u32) -> ExecResult<()> { failed() }
        fn mul_add(&self, _: LaunchDims, _: &mut (), _: &(), _: &(), _: &(), _: u32) -> ExecResult<()> { failed() }
        fn fft_inverse_stage(&self, _: LaunchDims, _: &mut (), _: &mut (), _: &(), _: &(), _: u32, _: u32, _: u32) -> ExecResult<()> { failed() }
        fn fft_finish(&self, _: LaunchDims, _: [&mut (); 2], _: [&(); 2], _: u32, _: u32, _: u64) -> ExecResult<()> { failed() }
        fn abs_max(&self, _: LaunchDims, _: &mut (), _: &(), _: &(), _: u32) -> ExecResult<()> { failed() }
        fn inner_product_intt_head(&self, _: LaunchDims, _: [&mut (); 2], _: &(), _: &(), _: &(), _: &(), _: &(), _: &(), _: &(), _: IntoInttDims) -> ExecResult<()> { failed() }
        fn encode_round(&self, _: LaunchDims, _: &mut (), _: &(), _: &(), _: &(), _: u32, _: u32, _: u64) -> ExecResult<()> { failed() }
        fn limb_constants(&self, _: LaunchDims, _: &mut (), _: &(), _: &(), _: &(), _: u32, _: u32) -> ExecResult<()> { failed() }
        fn tensor(&self, _: LaunchDims, _: [&mut (); 3], _: [&(); 2], _: [&(); 2], _: &(), _: u32) -> ExecResult<()> { failed() }
        fn ntt_forward_last_sub_scale(&self, _: LaunchDims, _: &mut (), _: &(), _: &(), _: &(), _: &(), _: &(), _: u32) -> ExecResult<()> { failed() }
        fn rescale_spread(&self, _: LaunchDims, _: &mut (), _: &(), _: &(), _: &(), _: u32, _: u64) -> ExecResult<()> { failed() }
        fn inner_product_resident(&self, _: LaunchDims, _: [&mut (); 2], _: &(), _: &(), _: &(), _: &(), _: u32, _: u32, _: u32, _: u32, _: u32) -> ExecResult<()> { failed() }
    }

    #[test]
    fn device_failures_are_errors_naming_the_device_and_the_step() {
        let n = 16;
        let q = ntt_moduli(&[50, 40], n, &[]).unwrap();
        let basis = RnsBasis::new(n, &q).unwrap();
        let backend = KernelBackend::with_exec(FailedDevice, "cuda:7");
        let coeff = Poly::<Coeff>::from_data(&basis, vec![1; 2 * n]).unwrap();
        let err = backend.ntt(coeff.clone()).unwrap_err();
        assert_eq!(err, MathError::Device { device: "cuda:7".into(), operation: "uploading NTT tables".into(), message: "out of memory".into() });
        assert_eq!(err.to_string(), "uploading NTT tables failed on device cuda:7: out of memory");
        let ntt = coeff.ntt();
        assert!(matches!(backend.intt(ntt.clone()), Err(MathError::Device { .. })));
        assert!(matches!(backend.mul_assign(&mut ntt.clone(), &ntt), Err(MathError::Device { .. })));
        let auto = Automorphism::new(3, n).unwrap();
        assert!(matches!(backend.automorphism_ntt(&ntt, &auto), Err(MathError::Device { ref operation, .. }) if operation == "host-to-device upload"));
        let conv = BaseConverter::new(basis.prefix(1).unwrap(), RnsBasis::new(n, &q[1..]).unwrap()).unwrap();
        let one = Poly::<Coeff>::from_data(conv.from_basis(), vec![1; n]).unwrap();
        assert!(matches!(backend.convert_basis(&conv, &one, false), Err(MathError::Device { .. })));
        let keys = [vec![ntt.clone()]];
        let refs: Vec<&[Poly<Ntt>]> = keys.iter().map(Vec::as_slice).collect();
        assert!(matches!(backend.inner_product(std::slice::from_ref(&ntt), &refs, &[0, 1], 1), Err(MathError::Device { .. })));
    }

    #[test]
    fn barrett_ratio_matches_the_math_crate() {
        // Modulus::reduce_u128 with the recomputed ratio must agree with the crate's own.
        for q in [3u64, 65537, (1 << 50) - 27, (1 << 61) - 1, 1 << 40] {
            let (hi, lo) = barrett_ratio(q);
            let ratio = ((hi as u128) << 64) | lo as u128;
            assert_eq!(ratio, if q.is_power_of_two() { 1u128 << (128 - q.trailing_zeros()) } else { u128::MAX / q as u128 });
        }
    }

    #[test]
    fn launch_geometry_covers_the_work() {
        assert_eq!(LaunchDims::cover(8, 3, 1), LaunchDims { grid: (1, 3, 1), block: 8, shared_bytes: 0 });
        assert_eq!(LaunchDims::cover(1 << 15, 40, 2), LaunchDims { grid: (128, 40, 2), block: 256, shared_bytes: 0 });
        assert_eq!(LaunchDims::cover(300, 1, 1), LaunchDims { grid: (2, 1, 1), block: 256, shared_bytes: 0 });
        assert_eq!(LaunchDims::chunks(1 << 16, 3, 1024), LaunchDims { grid: (32, 3, 1), block: 1024, shared_bytes: 16384 });
    }

    #[test]
    fn tables_use_the_plans_root() {
        let n = 64;
        let q = ntt_moduli(&[50, 40], n, &[]).unwrap();
        let basis = RnsBasis::new(n, &q).unwrap();
        let t = NttTables::new(&basis).unwrap();
        for (limb, m) in q.iter().enumerate() {
            // roots[1] = psi^brv(1) = psi^(n/2).
            assert_eq!(t.roots[limb * n + 1], m.pow(plan_psi(&basis, limb), (n / 2) as u64));
            assert_eq!(m.pow(plan_psi(&basis, limb), n as u64), m.value() - 1, "psi is a primitive 2n-th root");
            assert_eq!(t.roots[limb * n], 1);
            assert_eq!(m.mul(t.roots[limb * n + 5], t.inv_roots[limb * n + 5]), 1);
        }
    }
}
