//! CKKS on resident memory: ciphertexts, plaintexts and evaluation keys that live in a backend's
//! memory (a GPU's) from upload to download, with the operations of [`Evaluator`] computed where
//! they live. Every operation returns what [`Evaluator`]'s returns, bit for bit, with the same
//! scale and level policy (it asks a keyless host evaluator for the scale arithmetic only).
//!
//! The session boundary is explicit: [`ResidentEvaluator::new`] uploads the evaluation keys once,
//! [`ResidentEvaluator::upload`] and [`ResidentEvaluator::upload_plaintext`] bring operands in,
//! [`ResidentEvaluator::download`] takes a result out (and checks it holds reduced residues).

use std::collections::BTreeMap;
use std::sync::Arc;

use lycaon_backend::{LimbConstant, ResidentBackend};
use lycaon_rlwe::resident::{self as ks, ResidentDecomposed, ResidentKey, ResidentPoly};
use lycaon_rlwe::RlweError;
use num_complex::Complex64;

use crate::evaluator::{constant_residues, scales_close};
use crate::{conjugation_galois_element, rotation_galois_element, Ciphertext, CkksContext, CkksError, EvaluationKeys, Evaluator, Plaintext};

/// A CKKS ciphertext in resident memory: 2 or 3 NTT-form parts over Q_l.
pub struct ResidentCiphertext<B: ResidentBackend> {
    parts: Vec<ResidentPoly<B>>,
    scale: f64,
    log_slots: u32,
}

impl<B: ResidentBackend> ResidentCiphertext<B> {
    pub fn level(&self) -> usize {
        self.parts[0].num_limbs() - 1
    }

    pub fn scale(&self) -> f64 {
        self.scale
    }

    pub fn len(&self) -> usize {
        self.parts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    pub fn slots(&self) -> usize {
        1 << self.log_slots
    }

    pub fn log_slots(&self) -> u32 {
        self.log_slots
    }

    pub(crate) fn part(&self, i: usize) -> &ResidentPoly<B> {
        &self.parts[i]
    }

    pub(crate) fn into_parts<const K: usize>(self) -> [ResidentPoly<B>; K] {
        match self.parts.try_into() {
            Ok(parts) => parts,
            Err(_) => unreachable!("callers ask for the part count they built"),
        }
    }

    /// Sets the scale the ciphertext is read at (metadata only).
    pub(crate) fn set_scale(&mut self, scale: f64) {
        self.scale = scale;
    }

    /// Sets the slot count the ciphertext is read at (metadata only).
    pub(crate) fn set_log_slots(&mut self, log_slots: u32) {
        self.log_slots = log_slots;
    }
}

/// A plaintext in resident memory (NTT form over Q_level).
pub struct ResidentPlaintext<B: ResidentBackend> {
    pub(crate) poly: ResidentPoly<B>,
    pub(crate) scale: f64,
    pub(crate) log_slots: u32,
}

impl<B: ResidentBackend> ResidentPlaintext<B> {
    pub fn level(&self) -> usize {
        self.poly.num_limbs() - 1
    }
}

/// [`Evaluator`]'s operations on resident operands. Holds the session's keys in the backend's
/// memory; never a secret key.
pub struct ResidentEvaluator<B: ResidentBackend> {
    host: Evaluator,
    backend: Arc<B>,
    relin: Option<ResidentKey<B>>,
    galois: BTreeMap<u64, ResidentKey<B>>,
    /// Bootstrapping's encapsulation keys (dense to sparse secret, sparse to dense), if attached.
    encapsulation: Option<[ResidentKey<B>; 2]>,
    /// The NTT form of X^(n/2) over Q (complex constants).
    imag_unit: B::Mem,
}

impl<B: ResidentBackend> ResidentEvaluator<B> {
    /// Uploads the evaluation keys (the session's boundary). Errors: a device failure.
    pub fn new(ctx: &Arc<CkksContext>, backend: Arc<B>, keys: &EvaluationKeys) -> Result<Self, CkksError> {
        let relin = keys.relin.as_ref().map(|rk| ResidentKey::upload(&*backend, rk.key())).transpose()?;
        let mut galois = BTreeMap::new();
        if let Some(gk) = &keys.galois {
            for g in gk.galois_elements() {
                let key = gk.get(g).ok_or(CkksError::Internal("listed Galois key"))?;
                galois.insert(g, ResidentKey::upload(&*backend, key)?);
            }
        }
        let imag_unit = backend.upload(&ctx.imag_unit_ntt)?;
        Ok(Self { host: Evaluator::without_keys(ctx), backend, relin, galois, encapsulation: None, imag_unit })
    }

    /// Uploads a bootstrapper's encapsulation keys (a session's, with its evaluation keys);
    /// [`crate::bootstrap::Bootstrapper::bootstrap_on`] switches with these.
    pub fn attach_encapsulation_keys(&mut self, keys: &crate::bootstrap::EncapsulationKeys) -> Result<(), CkksError> {
        self.encapsulation = Some([ResidentKey::upload(self.b(), &keys.dense_to_sparse)?, ResidentKey::upload(self.b(), &keys.sparse_to_dense)?]);
        Ok(())
    }

    /// Switches to the sparse secret (`to_sparse`) or back with the attached encapsulation keys.
    pub(crate) fn switch_encapsulation_resident(&self, ct: &ResidentCiphertext<B>, to_sparse: bool) -> Result<ResidentCiphertext<B>, CkksError> {
        let keys = self.encapsulation.as_ref().ok_or_else(|| CkksError::InvalidArgument {
            what: "this resident evaluator has no encapsulation keys: upload them with ResidentEvaluator::attach_encapsulation_keys".into(),
        })?;
        if ct.len() != 2 {
            return Err(CkksError::WrongSize { expected: 2, found: ct.len() });
        }
        let key = &keys[usize::from(!to_sparse)];
        let dec = ks::decompose(self.params(), self.b(), &ct.parts[1])?;
        let [mut k0, k1] = ks::key_switch_decomposed(self.params(), self.b(), &dec, key)?;
        self.b().add_assign(&mut k0.mem, &ct.parts[0].mem, &k0.basis)?;
        Ok(ResidentCiphertext { parts: vec![k0, k1], scale: ct.scale, log_slots: ct.log_slots })
    }

    /// Bootstrapping's raise: each part of a level-0 ciphertext, centred mod q_0, as integers
    /// mod Q_top (inverse NTT of the one limb, the centred residues over every prime, forward NTT).
    pub(crate) fn raise_resident(&self, ct: &ResidentCiphertext<B>) -> Result<ResidentCiphertext<B>, CkksError> {
        let params = self.params();
        let top = params.q_at(params.max_level())?.clone();
        let q0 = params.q_at(0)?.clone();
        if ct.level() != 0 {
            return Err(CkksError::InvalidArgument { what: format!("the raise takes a level-0 ciphertext, this one is at level {}", ct.level()) });
        }
        let mut parts = Vec::with_capacity(ct.len());
        for p in &ct.parts {
            let mut coeff = p.duplicate(self.b())?;
            self.b().intt_assign(&mut coeff.mem, &q0)?;
            let mut lifted = self.b().lift_centred(&coeff.mem, &q0, &top)?;
            self.b().ntt_assign(&mut lifted, &top)?;
            parts.push(ResidentPoly { mem: lifted, basis: top.clone() });
        }
        Ok(ResidentCiphertext { parts, scale: ct.scale, log_slots: ct.log_slots })
    }

    pub fn backend(&self) -> &Arc<B> {
        &self.backend
    }

    pub fn context(&self) -> &Arc<CkksContext> {
        self.host.context()
    }

    /// Bytes of evaluation keys held in the backend's memory.
    pub fn key_bytes(&self) -> usize {
        let n = self.context().n();
        self.relin.iter().chain(self.galois.values()).map(|k| k.bytes(n)).sum()
    }

    pub(crate) fn b(&self) -> &B {
        &self.backend
    }

    pub(crate) fn params(&self) -> &Arc<lycaon_rlwe::Parameters> {
        &self.context().params
    }

    pub(crate) fn has_galois_key(&self, galois_element: u64) -> bool {
        self.galois.contains_key(&galois_element)
    }

    /// The key of a rotation by `step` with its Galois element; errors as the host's
    /// (`what` names the caller).
    pub(crate) fn rotation_key(&self, step: i64, what: &str) -> Result<(u64, &ResidentKey<B>), CkksError> {
        let g = rotation_galois_element(step, self.context().n());
        if self.galois.is_empty() {
            return Err(CkksError::MissingGaloisKeys { what: format!("rotation by {step} ({what})") });
        }
        let key = self.galois.get(&g).ok_or_else(|| CkksError::MissingRotationKey { what: format!("rotation by {step} ({what})"), galois_element: g })?;
        Ok((g, key))
    }

    pub(crate) fn wrap_parts(&self, parts: Vec<ResidentPoly<B>>, scale: f64, log_slots: u32) -> ResidentCiphertext<B> {
        ResidentCiphertext { parts, scale, log_slots }
    }

    fn q_at(&self, level: usize) -> Result<&Arc<lycaon_math::RnsBasis>, CkksError> {
        Ok(self.params().q_at(level)?)
    }

    // ------------------------------------------------------------------------------------------
    // The boundary

    pub fn upload(&self, ct: &Ciphertext) -> Result<ResidentCiphertext<B>, CkksError> {
        self.host.check(ct)?;
        let parts = ct.inner.parts().iter().map(|p| ResidentPoly::upload(self.b(), p)).collect::<Result<_, _>>()?;
        Ok(ResidentCiphertext { parts, scale: ct.scale, log_slots: ct.log_slots })
    }

    pub fn upload_plaintext(&self, pt: &Plaintext) -> Result<ResidentPlaintext<B>, CkksError> {
        if pt.params_id != *self.params().id() {
            return Err(RlweError::ParamsMismatch { what: "plaintext" }.into());
        }
        Ok(ResidentPlaintext { poly: ResidentPoly::upload(self.b(), &pt.poly)?, scale: pt.scale, log_slots: pt.log_slots })
    }

    /// [`crate::Encoder::encode_with_slots`] where the plaintext lives: only the slot values cross
    /// to the backend, which runs the inverse FFT, the rounding and the NTT there (bit for bit
    /// the host encoder's result); a plaintext whose coefficients times the scale reach 2^62 is
    /// encoded on the host and uploaded. Errors as the host encoder's.
    pub fn encode(&self, values: &[Complex64], slots: usize, level: usize, scale: f64) -> Result<ResidentPlaintext<B>, CkksError> {
        let ctx = self.context();
        let log_slots = crate::encoding::check_slots(ctx, slots)?;
        if values.len() > slots {
            return Err(CkksError::TooManyValues { slots, found: values.len() });
        }
        let basis = self.params().q_at(level)?.clone();
        let poly = self.encode_poly(values, slots, scale, &basis)?;
        Ok(ResidentPlaintext { poly, scale, log_slots })
    }

    /// [`crate::Encoder`]'s `encode_poly` on the backend: round(scale m) over any basis of these
    /// parameters (Q_l, or Q_l P for the extended products), NTT form; the host path when a
    /// coefficient times the scale reaches 2^62. Errors as the host's.
    pub(crate) fn encode_poly(&self, values: &[Complex64], slots: usize, scale: f64, basis: &Arc<lycaon_math::RnsBasis>) -> Result<ResidentPoly<B>, CkksError> {
        crate::encoding::check_scale(scale)?;
        if let Some((index, v)) = values.iter().enumerate().find(|(_, v)| !v.re.is_finite() || !v.im.is_finite()) {
            return Err(CkksError::NonFiniteValue { index, value: if v.re.is_finite() { v.im } else { v.re } });
        }
        let (mut re, mut im) = (vec![0.0; slots], vec![0.0; slots]);
        for (k, v) in values.iter().enumerate() {
            re[k] = v.re;
            im[k] = v.im;
        }
        let (mem, max) = self.b().encode_slots(&re, &im, &self.context().fft, scale, basis)?;
        let log_q = basis.log2_product();
        if max > 0.0 && (max * scale).log2() >= log_q - 1.0 {
            return Err(CkksError::ScaleOverflow { log_scale: scale.log2(), log_value: max.log2(), level: basis.len() - 1, log_q });
        }
        Ok(match mem {
            Some(mem) => ResidentPoly { mem, basis: basis.clone() },
            None => ResidentPoly::upload(self.b(), &crate::Encoder::new(self.context()).encode_poly(values, slots, scale, basis)?)?,
        })
    }

    /// A resident plaintext back on the host (checked to hold reduced residues).
    pub fn download_plaintext(&self, pt: &ResidentPlaintext<B>) -> Result<Plaintext, CkksError> {
        Ok(Plaintext { params_id: *self.params().id(), poly: pt.poly.download(self.b())?, scale: pt.scale, log_slots: pt.log_slots })
    }

    pub fn download(&self, ct: &ResidentCiphertext<B>) -> Result<Ciphertext, CkksError> {
        let parts = ct.parts.iter().map(|p| p.download(self.b())).collect::<Result<Vec<_>, _>>()?;
        self.host.wrap(parts, ct.scale, ct.log_slots)
    }

    pub(crate) fn copy_of(&self, ct: &ResidentCiphertext<B>) -> Result<ResidentCiphertext<B>, CkksError> {
        self.duplicate(ct)
    }

    /// [`crate::ops::CkksOps::integer_combination`]: each term times its per-limb constants, summed
    /// (every sum fully reduced, so equal to the host's lazy one).
    pub(crate) fn integer_combination_resident(&self, terms: &[(ResidentCiphertext<B>, Vec<u64>)], level: usize, scale: f64) -> Result<ResidentCiphertext<B>, CkksError> {
        let mut acc: Option<ResidentCiphertext<B>> = None;
        for (t, constants) in terms {
            let t = self.drop_to_level(t, level)?;
            let constants: Vec<LimbConstant> = constants.iter().map(|&c| (c, 0)).collect();
            let term = self.times_constants(&t, &constants, scale)?;
            acc = Some(match acc {
                None => term,
                Some(mut a) => {
                    for (x, y) in a.parts.iter_mut().zip(&term.parts) {
                        self.b().add_assign(&mut x.mem, &y.mem, &x.basis)?;
                    }
                    a.log_slots = a.log_slots.max(term.log_slots);
                    a
                }
            });
        }
        let mut out = acc.ok_or(CkksError::Internal("an empty integer combination"))?;
        out.scale = scale;
        Ok(out)
    }

    /// See [`Evaluator::evaluate_chebyshev_to_scale`].
    pub fn evaluate_chebyshev_to_scale(&self, ct: &ResidentCiphertext<B>, poly: &crate::ChebyshevPoly, scale: f64) -> Result<ResidentCiphertext<B>, CkksError> {
        crate::polynomial::evaluate_chebyshev_to_scale(self, ct, poly, scale)
    }

    /// See [`Evaluator::evaluate_chebyshev`].
    pub fn evaluate_chebyshev(&self, ct: &ResidentCiphertext<B>, poly: &crate::ChebyshevPoly) -> Result<ResidentCiphertext<B>, CkksError> {
        crate::polynomial::evaluate_chebyshev(self, ct, poly)
    }

    fn duplicate(&self, ct: &ResidentCiphertext<B>) -> Result<ResidentCiphertext<B>, CkksError> {
        let parts = ct.parts.iter().map(|p| p.duplicate(self.b())).collect::<Result<_, _>>()?;
        Ok(ResidentCiphertext { parts, scale: ct.scale, log_slots: ct.log_slots })
    }

    // ------------------------------------------------------------------------------------------
    // Levels and scales

    /// See [`Evaluator::drop_to_level`].
    pub fn drop_to_level(&self, ct: &ResidentCiphertext<B>, level: usize) -> Result<ResidentCiphertext<B>, CkksError> {
        if level > ct.level() {
            return Err(RlweError::LevelMismatch { lhs: ct.level(), rhs: level }.into());
        }
        let q = self.q_at(level)?;
        let parts = ct.parts.iter().map(|p| p.prefix(self.b(), q)).collect::<Result<_, _>>()?;
        Ok(ResidentCiphertext { parts, scale: ct.scale, log_slots: ct.log_slots })
    }

    /// See [`Evaluator::rescale`].
    pub fn rescale(&self, ct: &ResidentCiphertext<B>) -> Result<ResidentCiphertext<B>, CkksError> {
        let level = ct.level();
        if level == 0 {
            return Err(CkksError::NotEnoughLevels { op: "rescale", needed: 1, level });
        }
        let next = self.q_at(level - 1)?;
        let parts =
            ct.parts.iter().map(|p| Ok(ResidentPoly { mem: self.b().rescale(&p.mem, &p.basis)?, basis: next.clone() })).collect::<Result<_, CkksError>>()?;
        let q_last = self.context().prime_at(level)? as f64;
        Ok(ResidentCiphertext { parts, scale: ct.scale / q_last, log_slots: ct.log_slots })
    }

    /// See [`Evaluator::set_scale`].
    pub fn set_scale(&self, ct: &ResidentCiphertext<B>, target: f64) -> Result<ResidentCiphertext<B>, CkksError> {
        crate::encoding::check_scale(target)?;
        if ct.level() == 0 {
            return Err(CkksError::NotEnoughLevels { op: "set_scale", needed: 1, level: 0 });
        }
        let q = self.context().prime_at(ct.level())? as f64;
        let k = (target * q / ct.scale).round();
        let mut out = self.rescale(&self.mul_integer_big(ct, k)?)?;
        out.scale = target;
        Ok(out)
    }

    fn mul_integer_big(&self, ct: &ResidentCiphertext<B>, k: f64) -> Result<ResidentCiphertext<B>, CkksError> {
        if !(0.0..2f64.powi(127)).contains(&k) {
            return Err(CkksError::InvalidArgument { what: format!("integer factor {k} out of range") });
        }
        let q = self.q_at(ct.level())?;
        let constants: Vec<LimbConstant> = q.moduli().iter().map(|m| (m.reduce_u128(k as u128), 0)).collect();
        self.times_constants(ct, &constants, ct.scale)
    }

    fn times_constants(&self, ct: &ResidentCiphertext<B>, constants: &[LimbConstant], scale: f64) -> Result<ResidentCiphertext<B>, CkksError> {
        let mut out = self.duplicate(ct)?;
        let imag = constants.iter().any(|c| c.1 != 0).then_some(&self.imag_unit);
        for p in &mut out.parts {
            self.b().mul_constants_assign(&mut p.mem, constants, imag, &p.basis)?;
        }
        out.scale = scale;
        Ok(out)
    }

    fn bring_to(&self, ct: &ResidentCiphertext<B>, level: usize, scale: f64) -> Result<ResidentCiphertext<B>, CkksError> {
        if ct.level() > level && !scales_close(ct.scale, scale) {
            let above = self.drop_to_level(ct, level + 1)?;
            return self.set_scale(&above, scale);
        }
        self.drop_to_level(ct, level)
    }

    /// Both operands at one level with matching scales ([`Evaluator`]'s policy), as copies.
    fn align(&self, a: &ResidentCiphertext<B>, b: &ResidentCiphertext<B>) -> Result<(ResidentCiphertext<B>, ResidentCiphertext<B>), CkksError> {
        let level = a.level().min(b.level());
        let (mut a, mut b) = if a.level() > b.level() {
            (self.bring_to(a, level, b.scale)?, self.duplicate(b)?)
        } else if b.level() > a.level() {
            (self.duplicate(a)?, self.bring_to(b, level, a.scale)?)
        } else {
            (self.duplicate(a)?, self.duplicate(b)?)
        };
        if !scales_close(a.scale, b.scale) {
            let (big, small) = if a.scale > b.scale { (a.scale, b.scale) } else { (b.scale, a.scale) };
            let ratio = big / small;
            let k = ratio.round();
            if k < 2.0 || (k - ratio).abs() > crate::SCALE_TOLERANCE * ratio {
                return Err(CkksError::ScaleMismatch { lhs: a.scale, rhs: b.scale });
            }
            if a.scale < b.scale {
                let s = b.scale;
                a = self.mul_integer_big(&a, k)?;
                a.scale = s;
            } else {
                let s = a.scale;
                b = self.mul_integer_big(&b, k)?;
                b.scale = s;
            }
        }
        Ok((a, b))
    }

    // ------------------------------------------------------------------------------------------
    // Additions

    fn combine(&self, a: &ResidentCiphertext<B>, b: &ResidentCiphertext<B>, negate_b: bool) -> Result<ResidentCiphertext<B>, CkksError> {
        let (a, b) = self.align(a, b)?;
        let log_slots = a.log_slots.max(b.log_slots);
        let scale = a.scale;
        let (mut long, short, long_is_a) = if a.len() >= b.len() { (a, b, true) } else { (b, a, false) };
        for (k, p) in long.parts.iter_mut().enumerate() {
            match short.parts.get(k) {
                Some(s) if long_is_a => {
                    if negate_b {
                        self.b().sub_assign(&mut p.mem, &s.mem, &p.basis)?
                    } else {
                        self.b().add_assign(&mut p.mem, &s.mem, &p.basis)?
                    }
                }
                Some(s) => {
                    // p holds b's part: a - b = -(b - a).
                    if negate_b {
                        self.b().sub_assign(&mut p.mem, &s.mem, &p.basis)?;
                        self.b().neg_assign(&mut p.mem, &p.basis)?;
                    } else {
                        self.b().add_assign(&mut p.mem, &s.mem, &p.basis)?;
                    }
                }
                None if !long_is_a && negate_b => self.b().neg_assign(&mut p.mem, &p.basis)?,
                None => {}
            }
        }
        long.scale = scale;
        long.log_slots = log_slots;
        Ok(long)
    }

    /// See [`Evaluator::add`].
    pub fn add(&self, a: &ResidentCiphertext<B>, b: &ResidentCiphertext<B>) -> Result<ResidentCiphertext<B>, CkksError> {
        self.combine(a, b, false)
    }

    /// See [`Evaluator::sub`].
    pub fn sub(&self, a: &ResidentCiphertext<B>, b: &ResidentCiphertext<B>) -> Result<ResidentCiphertext<B>, CkksError> {
        self.combine(a, b, true)
    }

    pub fn negate(&self, a: &ResidentCiphertext<B>) -> Result<ResidentCiphertext<B>, CkksError> {
        let mut out = self.duplicate(a)?;
        for p in &mut out.parts {
            self.b().neg_assign(&mut p.mem, &p.basis)?;
        }
        Ok(out)
    }

    fn plain_at(&self, pt: &ResidentPlaintext<B>, level: usize) -> Result<ResidentPoly<B>, CkksError> {
        if pt.level() < level {
            return Err(CkksError::PlaintextLevelTooLow { plaintext: pt.level(), ciphertext: level });
        }
        Ok(pt.poly.prefix(self.b(), self.q_at(level)?)?)
    }

    fn plain_combine(&self, ct: &ResidentCiphertext<B>, pt: &ResidentPlaintext<B>, sub: bool) -> Result<ResidentCiphertext<B>, CkksError> {
        let p = self.plain_at(pt, ct.level())?;
        if !scales_close(ct.scale, pt.scale) {
            return Err(CkksError::ScaleMismatch { lhs: ct.scale, rhs: pt.scale });
        }
        let mut out = self.duplicate(ct)?;
        let c0 = &mut out.parts[0];
        if sub {
            self.b().sub_assign(&mut c0.mem, &p.mem, &c0.basis)?
        } else {
            self.b().add_assign(&mut c0.mem, &p.mem, &c0.basis)?
        }
        out.log_slots = out.log_slots.max(pt.log_slots);
        Ok(out)
    }

    /// See [`Evaluator::add_plain`].
    pub fn add_plain(&self, ct: &ResidentCiphertext<B>, pt: &ResidentPlaintext<B>) -> Result<ResidentCiphertext<B>, CkksError> {
        self.plain_combine(ct, pt, false)
    }

    /// See [`Evaluator::sub_plain`].
    pub fn sub_plain(&self, ct: &ResidentCiphertext<B>, pt: &ResidentPlaintext<B>) -> Result<ResidentCiphertext<B>, CkksError> {
        self.plain_combine(ct, pt, true)
    }

    /// See [`Evaluator::add_const`].
    pub fn add_const(&self, ct: &ResidentCiphertext<B>, c: Complex64) -> Result<ResidentCiphertext<B>, CkksError> {
        let constants = constant_residues(self.context(), c, ct.scale, ct.level())?;
        let mut out = self.duplicate(ct)?;
        let imag = constants.iter().any(|c| c.1 != 0).then_some(&self.imag_unit);
        let c0 = &mut out.parts[0];
        self.b().add_constants_assign(&mut c0.mem, &constants, imag, &c0.basis)?;
        Ok(out)
    }

    // ------------------------------------------------------------------------------------------
    // Products

    /// See [`Evaluator::mul_plain`].
    pub fn mul_plain(&self, ct: &ResidentCiphertext<B>, pt: &ResidentPlaintext<B>) -> Result<ResidentCiphertext<B>, CkksError> {
        let p = self.plain_at(pt, ct.level())?;
        let mut out = self.duplicate(ct)?;
        for part in &mut out.parts {
            self.b().mul_assign(&mut part.mem, &p.mem, &part.basis)?;
        }
        out.scale = ct.scale * pt.scale;
        out.log_slots = out.log_slots.max(pt.log_slots);
        Ok(out)
    }

    /// See [`Evaluator::mul_const`].
    pub fn mul_const(&self, ct: &ResidentCiphertext<B>, c: f64) -> Result<ResidentCiphertext<B>, CkksError> {
        self.mul_const_complex(ct, Complex64::new(c, 0.0))
    }

    /// See [`Evaluator::mul_const_complex`].
    pub fn mul_const_complex(&self, ct: &ResidentCiphertext<B>, c: Complex64) -> Result<ResidentCiphertext<B>, CkksError> {
        let s = self.host.plaintext_scale_at(ct.level(), ct.scale)?;
        self.mul_const_scaled(ct, c, s)
    }

    /// See [`Evaluator::mul_const_scaled`].
    pub fn mul_const_scaled(&self, ct: &ResidentCiphertext<B>, c: Complex64, const_scale: f64) -> Result<ResidentCiphertext<B>, CkksError> {
        let constants = constant_residues(self.context(), c, const_scale, ct.level())?;
        self.times_constants(ct, &constants, ct.scale * const_scale)
    }

    /// See [`Evaluator::mul_integer`].
    pub fn mul_integer(&self, ct: &ResidentCiphertext<B>, k: i64) -> Result<ResidentCiphertext<B>, CkksError> {
        let constants: Vec<LimbConstant> = self.q_at(ct.level())?.moduli().iter().map(|m| (m.reduce_i64(k), 0)).collect();
        self.times_constants(ct, &constants, ct.scale)
    }

    fn tensor(&self, a: &ResidentCiphertext<B>, b: &ResidentCiphertext<B>) -> Result<([ResidentPoly<B>; 3], f64, u32), CkksError> {
        if a.len() != 2 || b.len() != 2 {
            return Err(CkksError::WrongSize { expected: 2, found: a.len().max(b.len()) });
        }
        let level = a.level().min(b.level());
        let a = if a.level() > level { self.drop_to_level(a, level)? } else { self.duplicate(a)? };
        let b = if b.level() > level { self.drop_to_level(b, level)? } else { self.duplicate(b)? };
        let basis = a.parts[0].basis.clone();
        let [d0, d1, d2] = self.b().tensor([&a.parts[0].mem, &a.parts[1].mem], [&b.parts[0].mem, &b.parts[1].mem], &basis)?;
        let wrap = |mem| ResidentPoly { mem, basis: basis.clone() };
        Ok(([wrap(d0), wrap(d1), wrap(d2)], a.scale * b.scale, a.log_slots.max(b.log_slots)))
    }

    /// See [`Evaluator::mul`] (3 parts, not relinearised).
    pub fn mul(&self, a: &ResidentCiphertext<B>, b: &ResidentCiphertext<B>) -> Result<ResidentCiphertext<B>, CkksError> {
        let (parts, scale, log_slots) = self.tensor(a, b)?;
        Ok(ResidentCiphertext { parts: parts.into(), scale, log_slots })
    }

    /// See [`Evaluator::mul_relin`].
    pub fn mul_relin(&self, a: &ResidentCiphertext<B>, b: &ResidentCiphertext<B>) -> Result<ResidentCiphertext<B>, CkksError> {
        let rk = self.relin.as_ref().ok_or(CkksError::MissingRelinKey)?;
        let ([mut d0, mut d1, d2], scale, log_slots) = self.tensor(a, b)?;
        self.add_switched(&mut d0, &mut d1, &d2, rk)?;
        Ok(ResidentCiphertext { parts: vec![d0, d1], scale, log_slots })
    }

    /// See [`Evaluator::relinearize`].
    pub fn relinearize(&self, ct: &ResidentCiphertext<B>) -> Result<ResidentCiphertext<B>, CkksError> {
        let rk = self.relin.as_ref().ok_or(CkksError::MissingRelinKey)?;
        if ct.len() != 3 {
            return Err(CkksError::WrongSize { expected: 3, found: ct.len() });
        }
        let mut c0 = ct.parts[0].duplicate(self.b())?;
        let mut c1 = ct.parts[1].duplicate(self.b())?;
        self.add_switched(&mut c0, &mut c1, &ct.parts[2], rk)?;
        Ok(ResidentCiphertext { parts: vec![c0, c1], scale: ct.scale, log_slots: ct.log_slots })
    }

    /// (c0, c1) += KeySwitch(c, key).
    fn add_switched(&self, c0: &mut ResidentPoly<B>, c1: &mut ResidentPoly<B>, c: &ResidentPoly<B>, key: &ResidentKey<B>) -> Result<(), CkksError> {
        let dec = ks::decompose(self.params(), self.b(), c)?;
        let [k0, k1] = ks::key_switch_decomposed(self.params(), self.b(), &dec, key)?;
        self.b().add_assign(&mut c0.mem, &k0.mem, &c0.basis)?;
        self.b().add_assign(&mut c1.mem, &k1.mem, &c1.basis)?;
        Ok(())
    }

    /// See [`Evaluator::mul_relin_rescale`].
    pub fn mul_relin_rescale(&self, a: &ResidentCiphertext<B>, b: &ResidentCiphertext<B>) -> Result<ResidentCiphertext<B>, CkksError> {
        self.rescale(&self.mul_relin(a, b)?)
    }

    // ------------------------------------------------------------------------------------------
    // Rotations

    /// See [`Evaluator::rotate`].
    pub fn rotate(&self, ct: &ResidentCiphertext<B>, step: i64) -> Result<ResidentCiphertext<B>, CkksError> {
        let mut v = self.rotate_hoisted(ct, &[step])?;
        v.pop().ok_or(CkksError::Internal("hoisted count"))
    }

    /// See [`Evaluator::rotate_hoisted`]: one ModUp of c_1 shared by every rotation.
    pub fn rotate_hoisted(&self, ct: &ResidentCiphertext<B>, steps: &[i64]) -> Result<Vec<ResidentCiphertext<B>>, CkksError> {
        let n = self.context().n();
        let elements: Vec<(u64, String)> = steps.iter().map(|&s| (rotation_galois_element(s, n), format!("rotation by {s}"))).collect();
        self.galois_hoisted(ct, &elements)
    }

    /// See [`Evaluator::conjugate`].
    pub fn conjugate(&self, ct: &ResidentCiphertext<B>) -> Result<ResidentCiphertext<B>, CkksError> {
        let g = conjugation_galois_element(self.context().n());
        let mut v = self.galois_hoisted(ct, &[(g, "conjugation".to_string())])?;
        v.pop().ok_or(CkksError::Internal("hoisted count"))
    }

    /// See [`Evaluator::apply_galois_hoisted`].
    pub fn apply_galois_hoisted(&self, ct: &ResidentCiphertext<B>, elements: &[u64]) -> Result<Vec<ResidentCiphertext<B>>, CkksError> {
        let e: Vec<(u64, String)> = elements.iter().map(|&g| (g, format!("Galois element {g}"))).collect();
        self.galois_hoisted(ct, &e)
    }

    fn galois_hoisted(&self, ct: &ResidentCiphertext<B>, elements: &[(u64, String)]) -> Result<Vec<ResidentCiphertext<B>>, CkksError> {
        if ct.len() != 2 {
            return Err(CkksError::WrongSize { expected: 2, found: ct.len() });
        }
        if elements.iter().any(|(g, _)| *g != 1) && self.galois.is_empty() {
            let what = elements.iter().find(|(g, _)| *g != 1).map(|(_, w)| w.clone()).unwrap_or_default();
            return Err(CkksError::MissingGaloisKeys { what });
        }
        let mut keys = Vec::with_capacity(elements.len());
        for (g, what) in elements {
            if *g == 1 {
                keys.push(None);
                continue;
            }
            let key = self.galois.get(g).ok_or_else(|| CkksError::MissingRotationKey { what: what.clone(), galois_element: *g })?;
            ks::check_resident_key_level(key, ct.level(), Some(*g))?;
            keys.push(Some(key));
        }
        let dec: Option<ResidentDecomposed<B>> =
            if keys.iter().any(Option::is_some) { Some(ks::decompose(self.params(), self.b(), &ct.parts[1])?) } else { None };
        elements
            .iter()
            .zip(keys)
            .map(|((g, _), key)| match (key, &dec) {
                (Some(key), Some(dec)) => {
                    let [mut k0, k1] = ks::key_switch_decomposed(self.params(), self.b(), dec, key)?;
                    self.b().add_assign(&mut k0.mem, &ct.parts[0].mem, &k0.basis)?;
                    let parts = [k0, k1]
                        .into_iter()
                        .map(|p| Ok(ResidentPoly { mem: self.b().automorphism(&p.mem, *g, &p.basis)?, basis: p.basis }))
                        .collect::<Result<_, CkksError>>()?;
                    Ok(ResidentCiphertext { parts, scale: ct.scale, log_slots: ct.log_slots })
                }
                _ => self.duplicate(ct),
            })
            .collect()
    }
}
