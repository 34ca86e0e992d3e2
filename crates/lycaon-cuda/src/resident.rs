//! [`ResidentBackend`] for the kernel backend: polynomials live in device buffers from the
//! backend's pool and cross to the host only in `upload` and `download`. Constant tables (NTT
//! twiddles, conversion constants, per-limb factors) are uploaded once and cached by the primes
//! they serve; only an operation's own small constants (2 words per limb) travel per call.
//!
//! Fusions that save a pass over the data:
//! - ModUp: the inverse NTT's last stage multiplies by n^-1 (Q_d/q_i)^-1 at once, so it emits the
//!   scaled residues the base conversion accumulates (no separate scaling launch).
//! - ModDown: the same for P's inverse NTT; and the forward NTT's last stage of the correction
//!   computes (x - correction) P^-1 in place (`lycaon_ntt_forward_last_sub_scale`).
//! - Rescale: the last limb's inverse NTT, the centred remainder spread over the other primes in
//!   one launch, and their forward NTT whose last stage subtracts and multiplies by q_l^-1.

use std::ops::Range;
use std::sync::Arc;

use lycaon_backend::resident::{check_key_args, check_len, check_slot_values, mod_down_constants, rescale_constants, NARROW_ENCODING_LIMIT};
use lycaon_backend::{KeyLayout, LimbConstant, ResidentBackend};
use lycaon_math::{BaseConverter, MathError, RnsBasis, SpecialFft};

use crate::host::{DeviceNttTables, ExecResult, KernelBackend, KernelExec, LaunchDims};
use crate::pool::{PoolStats, PooledBuf};

type Tables<E> = Arc<DeviceNttTables<<E as KernelExec>::Buf>>;

impl<E: KernelExec> KernelBackend<E>
where
    E::Buf: 'static,
{
    /// What the resident memory pool has done so far.
    pub fn pool_stats(&self) -> PoolStats {
        self.pool.stats()
    }

    fn run(&self, op: &str, r: ExecResult<()>) -> Result<(), MathError> {
        self.device(op, r)
    }

    fn take(&self, len: usize) -> Result<PooledBuf<E::Buf>, MathError> {
        self.pool.take(len, |l| self.device("allocation", self.exec().alloc(l)))
    }

    /// A copy of words `range` of `src` in a fresh pooled buffer.
    fn copy_out(&self, src: &PooledBuf<E::Buf>, range: Range<usize>) -> Result<PooledBuf<E::Buf>, MathError> {
        let mut out = self.take(range.len())?;
        self.run("device-to-device copy", self.exec().copy(out.buf_mut(), 0, src.buf(), range.start, range.len()))?;
        Ok(out)
    }

    /// A small constant array, uploaded once per (kind, key).
    fn constant(&self, kind: &'static str, key: Vec<u64>, words: impl FnOnce() -> Result<Vec<u64>, MathError>) -> Result<Arc<E::Buf>, MathError> {
        let k = (kind, key);
        if let Some(c) = self.constants.read().ok().and_then(|m| m.get(&k).cloned()) {
            return Ok(c);
        }
        let c = Arc::new(self.device("uploading constants", self.exec().upload(&words()?))?);
        if let Ok(mut m) = self.constants.write() {
            m.insert(k, c.clone());
        }
        Ok(c)
    }

    /// Per-call constants (an operation's own, 2 words per limb), in a pooled buffer.
    fn per_call(&self, words: &[u64]) -> Result<PooledBuf<E::Buf>, MathError> {
        let mut b = self.take(words.len())?;
        self.run("host-to-device upload", self.exec().write(b.buf_mut(), words))?;
        Ok(b)
    }

    fn primes(basis: &RnsBasis) -> Vec<u64> {
        basis.moduli().iter().map(|q| q.value()).collect()
    }

    /// The forward NTT (without its last stage with `skip_last`, for a fused last stage).
    fn forward_stages(&self, buf: &mut E::Buf, t: &Tables<E>, n: usize, limbs: usize, skip_last: bool) -> Result<(), MathError> {
        self.forward_transform(buf, t, n, limbs, if skip_last { n / 2 } else { n })
    }

    /// The inverse NTT, its last stage folding in `last_consts` (n^-1 and psi^-brv(1) n^-1 per
    /// limb, possibly times a per-limb factor).
    fn inverse_stages(&self, buf: &mut E::Buf, t: &Tables<E>, last_consts: &E::Buf, n: usize, limbs: usize) -> Result<(), MathError> {
        self.inverse_transform(buf, t, last_consts, n, limbs)
    }

    /// The inverse NTT's last-stage constants with limb i's multiplied by `factors[i]` (each
    /// with its Shoup constant), so that the transform returns x_i factor_i in one pass.
    fn scaled_last_consts(&self, t: &Tables<E>, basis: &RnsBasis, limbs: Range<usize>, factors: &[u64]) -> Result<Arc<E::Buf>, MathError> {
        let moduli = &basis.moduli()[limbs];
        let mut key: Vec<u64> = moduli.iter().map(|q| q.value()).collect();
        key.extend_from_slice(factors);
        self.constant("inverse NTT last stage, scaled", key, || {
            Ok(moduli
                .iter()
                .zip(factors)
                .enumerate()
                .flat_map(|(i, (q, &f))| {
                    let c = &t.last_consts_host[4 * i..4 * i + 4];
                    let (a, b) = (q.mul(c[0], f), q.mul(c[2], f));
                    [a, q.shoup(a), b, q.shoup(b)]
                })
                .collect())
        })
    }

    /// out = (x - NTT(data)) * c per limb: the forward transform of `data` with its last stage
    /// fused with the subtraction and the scaling (`consts`: c and its Shoup constant per limb).
    #[allow(clippy::too_many_arguments)]
    fn sub_scaled_ntt(
        &self,
        x: &PooledBuf<E::Buf>,
        words: usize,
        mut data: PooledBuf<E::Buf>,
        t: &Tables<E>,
        consts: &E::Buf,
        n: usize,
        limbs: usize,
    ) -> Result<PooledBuf<E::Buf>, MathError> {
        self.forward_stages(data.buf_mut(), t, n, limbs, true)?;
        let mut out = self.copy_out(x, 0..words)?;
        let dims = LaunchDims::cover(n / 2, limbs, 1);
        self.run(
            "lycaon_ntt_forward_last_sub_scale",
            self.exec().ntt_forward_last_sub_scale(dims, out.buf_mut(), data.buf(), &t.roots, &t.roots_shoup, &t.mods, consts, n as u32),
        )?;
        Ok(out)
    }

    /// ModDown after the inverse NTT of the P part (`p_scaled`: its residues times P's punctured
    /// inverses): the conversion to Q_l, then (x_Q - correction) P^-1 fused into the forward
    /// NTT's last stage; x_Q is the first |Q_l| limbs of `x`.
    fn mod_down_tail(&self, x: &PooledBuf<E::Buf>, p_scaled: PooledBuf<E::Buf>, conv: &BaseConverter) -> Result<PooledBuf<E::Buf>, MathError> {
        let (p, q) = (conv.from_basis(), conv.to_basis());
        let n = q.n();
        let correction = self.accumulate(conv, p_scaled.buf(), n)?;
        let mut key = Self::primes(p);
        key.extend(Self::primes(q));
        let inverses = mod_down_constants(conv)?;
        let inverses = self.constant("ModDown: P^-1 mod q_i", key, || Ok(Self::shoup_words(&inverses)))?;
        let t_q = self.tables_for(q, 0..q.len())?;
        self.sub_scaled_ntt(x, q.len() * n, correction, &t_q, &inverses, n, q.len())
    }

    fn shoup_words(c: &[lycaon_math::ShoupConstant]) -> Vec<u64> {
        c.iter().flat_map(|c| [c.value, c.shoup]).collect()
    }

    /// Base conversion of `scaled` (already multiplied by the punctured inverses) to `conv`'s
    /// target basis, approximate variant.
    fn accumulate(&self, conv: &BaseConverter, scaled: &E::Buf, n: usize) -> Result<PooledBuf<E::Buf>, MathError> {
        let ct = self.conversion(conv)?;
        let (from, to) = (conv.from_basis(), conv.to_basis());
        let mut out = self.take(to.len() * n)?;
        let dims = LaunchDims::cover(n, to.len(), 1);
        self.run(
            "lycaon_convert_accumulate",
            self.exec().convert_accumulate(
                dims,
                out.buf_mut(),
                scaled,
                &ct.mods_to,
                &ct.punctured_mod_to,
                &ct.inv_q_from,
                &ct.q_mod_to,
                n as u32,
                from.len() as u32,
                0,
            ),
        )?;
        Ok(out)
    }

    fn constants_op(
        &self,
        a: &mut PooledBuf<E::Buf>,
        constants: &[LimbConstant],
        imag_unit: Option<&PooledBuf<E::Buf>>,
        basis: &RnsBasis,
        op: u32,
    ) -> Result<(), MathError> {
        check_len("constants", a.len(), basis)?;
        if constants.len() != basis.len() {
            return Err(MathError::LimbCount { expected: basis.len(), found: constants.len() });
        }
        let needs_imag = constants.iter().any(|c| c.1 != 0);
        if needs_imag && imag_unit.is_none_or(|w| w.len() < a.len()) {
            return Err(self.device_error("constants", crate::host::ExecError("an imaginary part needs the imaginary unit over the operand's primes".into())));
        }
        let words: Vec<u64> = constants.iter().flat_map(|&(re, im)| [re, im]).collect();
        let c = self.per_call(&words)?;
        let t = self.tables_for(basis, 0..basis.len())?;
        // Without an imaginary part the kernel never reads imag_unit: any buffer stands in.
        let w = imag_unit.map(PooledBuf::buf).unwrap_or(c.buf());
        let n = basis.n();
        self.run("lycaon_limb_constants", self.exec().limb_constants(LaunchDims::cover(n, basis.len(), 1), a.buf_mut(), c.buf(), w, &t.mods, n as u32, op))
    }
}

impl<E: KernelExec> ResidentBackend for KernelBackend<E>
where
    E::Buf: 'static,
{
    type Mem = PooledBuf<E::Buf>;

    fn name(&self) -> &str {
        lycaon_backend::Backend::name(self)
    }

    fn synchronize(&self) -> Result<(), MathError> {
        self.run("synchronize", self.exec().synchronize())
    }

    fn allocations(&self) -> Option<usize> {
        Some(self.pool.stats().allocations)
    }

    fn upload(&self, words: &[u64]) -> Result<Self::Mem, MathError> {
        self.per_call(words)
    }

    fn download(&self, mem: &Self::Mem) -> Result<Vec<u64>, MathError> {
        self.device("device-to-host download", self.exec().download(mem.buf()))
    }

    fn alloc(&self, words: usize) -> Result<Self::Mem, MathError> {
        self.take(words)
    }

    fn len(&self, mem: &Self::Mem) -> usize {
        mem.len()
    }

    fn zero_words(&self, mem: &mut Self::Mem, at: usize, len: usize) -> Result<(), MathError> {
        self.run("memset", self.exec().fill_zero(mem.buf_mut(), at, len))
    }

    fn copy_words(&self, dst: &mut Self::Mem, dst_at: usize, src: &Self::Mem, src_at: usize, len: usize) -> Result<(), MathError> {
        self.run("device-to-device copy", self.exec().copy(dst.buf_mut(), dst_at, src.buf(), src_at, len))
    }

    fn ntt_assign(&self, a: &mut Self::Mem, basis: &RnsBasis) -> Result<(), MathError> {
        check_len("ntt", a.len(), basis)?;
        let t = self.tables_for(basis, 0..basis.len())?;
        self.forward_stages(a.buf_mut(), &t, basis.n(), basis.len(), false)
    }

    fn intt_assign(&self, a: &mut Self::Mem, basis: &RnsBasis) -> Result<(), MathError> {
        check_len("intt", a.len(), basis)?;
        let t = self.tables_for(basis, 0..basis.len())?;
        self.inverse_stages(a.buf_mut(), &t, &t.last_consts, basis.n(), basis.len())
    }

    fn add_assign(&self, a: &mut Self::Mem, b: &Self::Mem, basis: &RnsBasis) -> Result<(), MathError> {
        check_len("add", a.len(), basis)?;
        check_len("add", b.len(), basis)?;
        let t = self.tables_for(basis, 0..basis.len())?;
        let n = basis.n();
        self.run("lycaon_add_sub", self.exec().add_sub(LaunchDims::cover(n, basis.len(), 1), a.buf_mut(), b.buf(), &t.mods, n as u32, 0))
    }

    fn sub_assign(&self, a: &mut Self::Mem, b: &Self::Mem, basis: &RnsBasis) -> Result<(), MathError> {
        check_len("sub", a.len(), basis)?;
        check_len("sub", b.len(), basis)?;
        let t = self.tables_for(basis, 0..basis.len())?;
        let n = basis.n();
        self.run("lycaon_add_sub", self.exec().add_sub(LaunchDims::cover(n, basis.len(), 1), a.buf_mut(), b.buf(), &t.mods, n as u32, 1))
    }

    fn neg_assign(&self, a: &mut Self::Mem, basis: &RnsBasis) -> Result<(), MathError> {
        // -x = x (q - 1) mod q, exactly.
        let minus_one: Vec<LimbConstant> = basis.moduli().iter().map(|q| (q.value() - 1, 0)).collect();
        self.constants_op(a, &minus_one, None, basis, 0)
    }

    fn mul_assign(&self, a: &mut Self::Mem, b: &Self::Mem, basis: &RnsBasis) -> Result<(), MathError> {
        check_len("mul", a.len(), basis)?;
        check_len("mul", b.len(), basis)?;
        let t = self.tables_for(basis, 0..basis.len())?;
        let n = basis.n();
        self.run("lycaon_mul_pointwise", self.exec().mul_pointwise(LaunchDims::cover(n, basis.len(), 1), a.buf_mut(), b.buf(), &t.mods, n as u32))
    }

    fn mul_add_assign(&self, acc: &mut Self::Mem, a: &Self::Mem, b: &Self::Mem, basis: &RnsBasis) -> Result<(), MathError> {
        for x in [acc.len(), a.len(), b.len()] {
            check_len("mul_add", x, basis)?;
        }
        let t = self.tables_for(basis, 0..basis.len())?;
        let n = basis.n();
        self.run("lycaon_mul_add", self.exec().mul_add(LaunchDims::cover(n, basis.len(), 1), acc.buf_mut(), a.buf(), b.buf(), &t.mods, n as u32))
    }

    fn mul_constants_assign(&self, a: &mut Self::Mem, constants: &[LimbConstant], imag_unit: Option<&Self::Mem>, basis: &RnsBasis) -> Result<(), MathError> {
        self.constants_op(a, constants, imag_unit, basis, 0)
    }

    fn add_constants_assign(&self, a: &mut Self::Mem, constants: &[LimbConstant], imag_unit: Option<&Self::Mem>, basis: &RnsBasis) -> Result<(), MathError> {
        self.constants_op(a, constants, imag_unit, basis, 1)
    }

    fn tensor(&self, a: [&Self::Mem; 2], b: [&Self::Mem; 2], basis: &RnsBasis) -> Result<[Self::Mem; 3], MathError> {
        for x in a.iter().chain(&b) {
            check_len("tensor", x.len(), basis)?;
        }
        let t = self.tables_for(basis, 0..basis.len())?;
        let (n, words) = (basis.n(), basis.len() * basis.n());
        let (mut d0, mut d1, mut d2) = (self.take(words)?, self.take(words)?, self.take(words)?);
        self.run(
            "lycaon_tensor",
            self.exec().tensor(
                LaunchDims::cover(n, basis.len(), 1),
                [d0.buf_mut(), d1.buf_mut(), d2.buf_mut()],
                [a[0].buf(), a[1].buf()],
                [b[0].buf(), b[1].buf()],
                &t.mods,
                n as u32,
            ),
        )?;
        Ok([d0, d1, d2])
    }

    fn rescale(&self, x: &Self::Mem, basis: &RnsBasis) -> Result<Self::Mem, MathError> {
        check_len("rescale", x.len(), basis)?;
        let l = basis.len().checked_sub(1).filter(|&l| l > 0).ok_or(MathError::EmptyBasis)?;
        let n = basis.n();
        let q_last = basis.moduli()[l].value();
        let mut last = self.copy_out(x, l * n..(l + 1) * n)?;
        let t_last = self.tables_for(basis, l..l + 1)?;
        self.inverse_stages(last.buf_mut(), &t_last, &t_last.last_consts, n, 1)?;
        let (inverses, last_mod) = rescale_constants(basis)?;
        let primes = Self::primes(basis);
        let last_mod = self.constant("rescale: q_l mod q_i", primes.clone(), || Ok(last_mod))?;
        let inverses = self.constant("rescale: q_l^-1 mod q_i", primes, || Ok(Self::shoup_words(&inverses)))?;
        let t = self.tables_for(basis, 0..l)?;
        let mut spread = self.take(l * n)?;
        self.run(
            "lycaon_rescale_spread",
            self.exec().rescale_spread(LaunchDims::cover(n, l, 1), spread.buf_mut(), last.buf(), &last_mod, &t.mods, n as u32, q_last),
        )?;
        self.sub_scaled_ntt(x, l * n, spread, &t, &inverses, n, l)
    }

    fn encode_slots(&self, re: &[f64], im: &[f64], fft: &SpecialFft, scale: f64, basis: &RnsBasis) -> Result<(Option<Self::Mem>, f64), MathError> {
        let slots = check_slot_values(re, im, basis)?;
        let n = basis.n();
        let m = fft.m();
        let ksi = self.constant("special FFT roots", vec![n as u64], || Ok(fft.roots().iter().flat_map(|c| [c.re.to_bits(), c.im.to_bits()]).collect()))?;
        let rot = self.constant("special FFT 5^j", vec![n as u64], || Ok(fft.rot_group().iter().map(|&g| g as u64).collect()))?;
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<u64>>();
        let (mut a_re, mut a_im) = (self.per_call(&bits(re))?, self.per_call(&bits(im))?);
        let mut len = slots;
        while len >= 2 {
            let d = LaunchDims::cover(slots / 2, 1, 1);
            self.run("lycaon_fft_inverse_stage", self.exec().fft_inverse_stage(d, a_re.buf_mut(), a_im.buf_mut(), &ksi, &rot, m as u32, slots as u32, len as u32))?;
            len /= 2;
        }
        let (mut c_re, mut c_im) = (self.take(slots)?, self.take(slots)?);
        let inv = 1.0 / slots as f64;
        self.run(
            "lycaon_fft_finish",
            self.exec().fft_finish(LaunchDims::cover(slots, 1, 1), [c_re.buf_mut(), c_im.buf_mut()], [a_re.buf(), a_im.buf()], slots as u32, slots.trailing_zeros(), inv.to_bits()),
        )?;
        let threads = slots.min(crate::host::BLOCK_THREADS);
        let mut partial = self.take(threads)?;
        let one_block = LaunchDims { grid: (1, 1, 1), block: threads as u32, shared_bytes: 0 };
        self.run("lycaon_abs_max", self.exec().abs_max(one_block, partial.buf_mut(), c_re.buf(), c_im.buf(), slots as u32))?;
        let max = self.download(&partial)?.into_iter().map(f64::from_bits).fold(0.0, f64::max);
        if max * scale >= NARROW_ENCODING_LIMIT {
            return Ok((None, max));
        }
        let t = self.tables_for(basis, 0..basis.len())?;
        let mut out = self.take(basis.len() * n)?;
        self.run(
            "lycaon_encode_round",
            self.exec().encode_round(LaunchDims::cover(n, basis.len(), 1), out.buf_mut(), c_re.buf(), c_im.buf(), &t.mods, n as u32, slots as u32, scale.to_bits()),
        )?;
        self.forward_stages(out.buf_mut(), &t, n, basis.len(), false)?;
        Ok((Some(out), max))
    }

    fn lift_centred(&self, x: &Self::Mem, from: &RnsBasis, to: &RnsBasis) -> Result<Self::Mem, MathError> {
        check_len("lift_centred", x.len(), from)?;
        if from.len() != 1 {
            return Err(MathError::LimbCount { expected: 1, found: from.len() });
        }
        let n = to.n();
        let q0 = from.moduli()[0].value();
        let mut key = vec![q0];
        key.extend(Self::primes(to));
        let q0_mod = self.constant("lift: q_0 mod q_i", key, || Ok(to.moduli().iter().map(|q| q.reduce(q0)).collect()))?;
        let t = self.tables_for(to, 0..to.len())?;
        let mut out = self.take(to.len() * n)?;
        // The rescale's spread kernel with q_0 as the "last" prime: centred residues mod every q_i.
        self.run("lycaon_rescale_spread", self.exec().rescale_spread(LaunchDims::cover(n, to.len(), 1), out.buf_mut(), x.buf(), &q0_mod, &t.mods, n as u32, q0))?;
        Ok(out)
    }

    fn mod_up(&self, c: &Self::Mem, q: &RnsBasis, digits: &[Range<usize>], mod_up: &[BaseConverter], qp: &RnsBasis) -> Result<Self::Mem, MathError> {
        check_len("mod_up", c.len(), q)?;
        if digits.len() != mod_up.len() || digits.iter().any(|r| r.end > q.len()) {
            return Err(MathError::LimbCount { expected: digits.len(), found: mod_up.len() });
        }
        let n = q.n();
        // The inverse NTT of c, limb i scaled by (Q_d / q_i)^-1 for its digit d: the first step of
        // each digit's base conversion, fused into the transform's last stage.
        let mut factors = vec![0u64; q.len()];
        for (range, conv) in digits.iter().zip(mod_up) {
            for (local, i) in range.clone().enumerate() {
                factors[i] = conv.from_basis().punctured_inverse(local).value;
            }
        }
        let t = self.tables_for(q, 0..q.len())?;
        let last = self.scaled_last_consts(&t, q, 0..q.len(), &factors)?;
        let mut scaled = self.copy_out(c, 0..c.len())?;
        self.inverse_stages(scaled.buf_mut(), &t, &last, n, q.len())?;
        let digit_words = qp.len() * n;
        let mut out = self.take(digits.len() * digit_words)?;
        for (d, (range, conv)) in digits.iter().zip(mod_up).enumerate() {
            let own = self.copy_out(&scaled, range.start * n..range.end * n)?;
            let mut rest = self.accumulate(conv, own.buf(), n)?;
            let t_rest = self.tables_for(conv.to_basis(), 0..conv.to_basis().len())?;
            self.forward_stages(rest.buf_mut(), &t_rest, n, conv.to_basis().len(), false)?;
            // In Q_l P order: the other primes before the digit's, its own (from c), the rest.
            let at = d * digit_words;
            let (before, own_len) = (range.start * n, range.len() * n);
            let e = self.exec();
            self.run("device-to-device copy", e.copy(out.buf_mut(), at, rest.buf(), 0, before))?;
            self.run("device-to-device copy", e.copy(out.buf_mut(), at + before, c.buf(), before, own_len))?;
            self.run("device-to-device copy", e.copy(out.buf_mut(), at + before + own_len, rest.buf(), before, rest.len() - before))?;
        }
        Ok(out)
    }

    fn key_inner_product(
        &self,
        digits: &Self::Mem,
        count: usize,
        key: &Self::Mem,
        layout: KeyLayout,
        key_limbs: &[usize],
        qp: &RnsBasis,
    ) -> Result<[Self::Mem; 2], MathError> {
        check_key_args(digits.len(), count, key.len(), layout, key_limbs, qp)?;
        let n = qp.n();
        let limbs_words: Vec<u64> = key_limbs.iter().map(|&l| l as u64).collect();
        let limbs = self.constant("key limbs", limbs_words.clone(), || Ok(limbs_words))?;
        let t = self.tables_for(qp, 0..qp.len())?;
        let (mut u0, mut u1) = (self.take(qp.len() * n)?, self.take(qp.len() * n)?);
        let dims = LaunchDims::cover(n, qp.len(), 2);
        self.run(
            "lycaon_inner_product_resident",
            self.exec().inner_product_resident(
                dims,
                [u0.buf_mut(), u1.buf_mut()],
                digits.buf(),
                key.buf(),
                &limbs,
                &t.mods,
                n as u32,
                qp.len() as u32,
                count as u32,
                layout.digits as u32,
                layout.limbs as u32,
            ),
        )?;
        Ok([u0, u1])
    }

    fn key_switch(&self, digits: &Self::Mem, count: usize, key: &Self::Mem, layout: KeyLayout, key_limbs: &[usize], qp: &RnsBasis, conv: &BaseConverter) -> Result<[Self::Mem; 2], MathError> {
        check_key_args(digits.len(), count, key.len(), layout, key_limbs, qp)?;
        let (p, q) = (conv.from_basis(), conv.to_basis());
        let n = qp.n();
        if q.len() + p.len() != qp.len() {
            return Err(MathError::LimbCount { expected: qp.len(), found: q.len() + p.len() });
        }
        let limbs_words: Vec<u64> = key_limbs.iter().map(|&l| l as u64).collect();
        let limbs = self.constant("key limbs", limbs_words.clone(), || Ok(limbs_words))?;
        // The inner products on Q_l's primes, as the unfused kernel computes them.
        let t_qp = self.tables_for(qp, 0..qp.len())?;
        let (mut u0, mut u1) = (self.take(q.len() * n)?, self.take(q.len() * n)?);
        self.run(
            "lycaon_inner_product_resident",
            self.exec().inner_product_resident(LaunchDims::cover(n, q.len(), 2), [u0.buf_mut(), u1.buf_mut()], digits.buf(), key.buf(), &limbs, &t_qp.mods, n as u32, qp.len() as u32, count as u32, layout.digits as u32, layout.limbs as u32),
        )?;
        // On P's primes, fused with ModDown's inverse NTT (its last stage scaled for the conversion).
        let t_p = self.tables_for(p, 0..p.len())?;
        let factors: Vec<u64> = (0..p.len()).map(|i| p.punctured_inverse(i).value).collect();
        let last = self.scaled_last_consts(&t_p, p, 0..p.len(), &factors)?;
        let (threads, h_min) = self.ntt_chunking(n);
        let (mut p0, mut p1) = (self.take(p.len() * n)?, self.take(p.len() * n)?);
        let d = LaunchDims { grid: ((n / (2 * threads)) as u32, p.len() as u32, 2), block: threads as u32, shared_bytes: (2 * threads * 8) as u32 };
        let dims = crate::host::IntoInttDims {
            n: n as u32,
            limbs: qp.len() as u32,
            q_limbs: q.len() as u32,
            num_digits: count as u32,
            key_digits: layout.digits as u32,
            key_limbs_total: layout.limbs as u32,
            h_min: h_min as u32,
        };
        self.run(
            "lycaon_inner_product_intt_head",
            self.exec().inner_product_intt_head(d, [p0.buf_mut(), p1.buf_mut()], digits.buf(), key.buf(), &limbs, &t_p.mods, &t_p.inv_roots, &t_p.inv_roots_shoup, &last, dims),
        )?;
        self.inverse_stages_below(p0.buf_mut(), &t_p, &last, n, p.len(), h_min)?;
        self.inverse_stages_below(p1.buf_mut(), &t_p, &last, n, p.len(), h_min)?;
        Ok([self.mod_down_tail(&u0, p0, conv)?, self.mod_down_tail(&u1, p1, conv)?])
    }

    fn mod_down(&self, x: &Self::Mem, conv: &BaseConverter) -> Result<Self::Mem, MathError> {
        let (p, q) = (conv.from_basis(), conv.to_basis());
        let n = q.n();
        if x.len() != (p.len() + q.len()) * n {
            return Err(MathError::LimbCount { expected: p.len() + q.len(), found: x.len() / n.max(1) });
        }
        let qn = q.len() * n;
        let mut p_part = self.copy_out(x, qn..x.len())?;
        let factors: Vec<u64> = (0..p.len()).map(|i| p.punctured_inverse(i).value).collect();
        let t_p = self.tables_for(p, 0..p.len())?;
        let last = self.scaled_last_consts(&t_p, p, 0..p.len(), &factors)?;
        self.inverse_stages(p_part.buf_mut(), &t_p, &last, n, p.len())?;
        self.mod_down_tail(x, p_part, conv)
    }

    fn automorphism(&self, a: &Self::Mem, galois_element: u64, basis: &RnsBasis) -> Result<Self::Mem, MathError> {
        check_len("automorphism", a.len(), basis)?;
        let n = basis.n();
        // The kernel computes the permutation itself; g must be odd and below 2n.
        if galois_element.is_multiple_of(2) || galois_element >= 2 * n as u64 {
            return Err(MathError::InvalidGaloisElement { galois_element, n });
        }
        let mut out = self.take(a.len())?;
        self.run(
            "lycaon_automorphism_ntt",
            self.exec().automorphism_ntt(LaunchDims::cover(n, basis.len(), 1), out.buf_mut(), a.buf(), n as u32, n.trailing_zeros(), galois_element),
        )?;
        Ok(out)
    }
}
