//! Homomorphic CKKS operations on ciphertexts in NTT form over Q_l: additions with level and
//! scale alignment, products (plaintext, constant, ciphertext with relinearisation), rescaling by
//! the last prime with rounding, level dropping, and hoisted rotations and conjugation.
//!
//! Scale policy, per operation:
//! - add/sub (ciphertexts): operands at different levels meet at the lower level; if the higher
//!   one's scale differs from the lower one's by more than [`SCALE_TOLERANCE`] (relative), it is
//!   multiplied by the integer round(s_low q_{l+1} / s_high) and rescaled on its way down, which
//!   costs no level beyond the lower operand's. At one level, scales must agree within the
//!   tolerance, or be in an integer ratio k (the smaller side is multiplied by k, exactly);
//!   otherwise `ScaleMismatch`.
//! - mul/mul_relin: scales multiply; rescale divides by q_l. Two ciphertexts at the canonical
//!   scale Delta_l give Delta_{l-1} after the rescale, exactly.
//! - mul_const: the constant is encoded at Delta_{l-1} q_l / s, so the rescale lands on the
//!   canonical scale Delta_{l-1} whatever s was. mul_const_scaled lets the caller pick.
//! - add_const: the constant is scaled by the ciphertext's own scale (no error but rounding).

use std::borrow::Cow;
use std::sync::Arc;

use lycaon_math::num_bigint::BigInt;
use lycaon_math::{mul_accumulate_lazy, reduce_lazy, Ntt, Poly};
use lycaon_rlwe::{keyswitch, GaloisKeys, Parameters, RlweError};
use num_complex::Complex64;
use num_traits::{FromPrimitive, ToPrimitive};
use rayon::prelude::*;

use crate::{conjugation_galois_element, rotation_galois_element, Ciphertext, CkksContext, CkksError, EvaluationKeys, Plaintext};

/// Relative scale difference below which two scales count as equal (2^-40): far below the
/// precision CKKS reaches at any practical scale.
pub const SCALE_TOLERANCE: f64 = 9.094947017729282e-13;

pub(crate) fn scales_close(a: f64, b: f64) -> bool {
    (a - b).abs() <= SCALE_TOLERANCE * a.abs().max(b.abs())
}

/// Residues (re, im) per limb of Q_level of round(c * scale), exactly (128-bit or big integers).
pub(crate) fn constant_residues(ctx: &CkksContext, c: Complex64, scale: f64, level: usize) -> Result<Vec<(u64, u64)>, CkksError> {
    if !c.re.is_finite() || !c.im.is_finite() {
        return Err(CkksError::NonFiniteValue { index: 0, value: if c.re.is_finite() { c.im } else { c.re } });
    }
    crate::encoding::check_scale(scale)?;
    let basis = ctx.params.q_at(level)?;
    let residue = |x: f64| -> Vec<u64> {
        let r = (x * scale).round();
        if r.abs() < 2f64.powi(126) {
            let v = r as i128;
            basis.moduli().iter().map(|q| {
                let m = q.reduce_u128(v.unsigned_abs());
                if v < 0 { q.neg(m) } else { m }
            }).collect()
        } else {
            let v = BigInt::from_f64(r).unwrap_or_default();
            basis.moduli().iter().map(|q| {
                let m = BigInt::from(q.value());
                (((&v % &m) + &m) % &m).to_u64().unwrap_or(0)
            }).collect()
        }
    };
    Ok(residue(c.re).into_iter().zip(residue(c.im)).collect())
}

/// Homomorphic operations. Holds the context and public evaluation keys; never a secret key.
#[derive(Clone, Debug)]
pub struct Evaluator {
    ctx: Arc<CkksContext>,
    keys: EvaluationKeys,
}

impl Evaluator {
    pub fn new(ctx: &Arc<CkksContext>, keys: EvaluationKeys) -> Self {
        Self { ctx: ctx.clone(), keys }
    }

    /// An evaluator without keys: everything but relinearisation and rotations works.
    pub fn without_keys(ctx: &Arc<CkksContext>) -> Self {
        Self::new(ctx, EvaluationKeys::default())
    }

    pub fn context(&self) -> &Arc<CkksContext> {
        &self.ctx
    }

    pub fn keys(&self) -> &EvaluationKeys {
        &self.keys
    }

    pub(crate) fn params(&self) -> &Arc<Parameters> {
        &self.ctx.params
    }

    pub(crate) fn check(&self, ct: &Ciphertext) -> Result<(), CkksError> {
        if ct.inner.params_id() != self.params().id() {
            return Err(RlweError::ParamsMismatch { what: "ciphertext" }.into());
        }
        Ok(())
    }

    fn check_plain(&self, pt: &Plaintext) -> Result<(), CkksError> {
        if pt.params_id != *self.params().id() {
            return Err(RlweError::ParamsMismatch { what: "plaintext" }.into());
        }
        Ok(())
    }

    pub(crate) fn wrap(&self, parts: Vec<Poly<Ntt>>, scale: f64, log_slots: u32) -> Result<Ciphertext, CkksError> {
        Ok(Ciphertext { inner: lycaon_rlwe::Ciphertext::from_parts(self.params(), parts)?, scale, log_slots })
    }

    // ------------------------------------------------------------------------------------------
    // Levels and scales

    /// Drops `levels` levels (the last primes) without touching the scale. Errors if fewer
    /// levels remain (`NotEnoughLevels`).
    pub fn drop_level(&self, ct: &Ciphertext, levels: usize) -> Result<Ciphertext, CkksError> {
        self.check(ct)?;
        if levels > ct.level() {
            return Err(CkksError::NotEnoughLevels { op: "drop_level", needed: levels, level: ct.level() });
        }
        self.drop_to_level(ct, ct.level() - levels)
    }

    /// Drops down to `level` (a no-op at the same level). Errors if `level` is above the
    /// ciphertext's (`LevelMismatch`).
    pub fn drop_to_level(&self, ct: &Ciphertext, level: usize) -> Result<Ciphertext, CkksError> {
        self.check(ct)?;
        if level > ct.level() {
            return Err(RlweError::LevelMismatch { lhs: ct.level(), rhs: level }.into());
        }
        if level == ct.level() {
            return Ok(ct.clone());
        }
        let q = self.params().q_at(level)?;
        let n = self.ctx.n();
        let parts = ct.inner.parts().iter().map(|p| Poly::from_kernel_output(q, p.data()[..q.len() * n].to_vec())).collect();
        self.wrap(parts, ct.scale, ct.log_slots)
    }

    /// Divides by the last prime q_l with rounding: level l -> l - 1, scale s -> s / q_l.
    /// Works on 2- or 3-part ciphertexts. Errors at level 0 (`NotEnoughLevels`).
    pub fn rescale(&self, ct: &Ciphertext) -> Result<Ciphertext, CkksError> {
        self.check(ct)?;
        let level = ct.level();
        if level == 0 {
            return Err(CkksError::NotEnoughLevels { op: "rescale", needed: 1, level });
        }
        let parts = ct.inner.parts().iter().map(|p| self.rescale_poly(p)).collect::<Result<Vec<_>, _>>()?;
        let q_last = self.ctx.prime_at(level)? as f64;
        self.wrap(parts, ct.scale / q_last, ct.log_slots)
    }

    /// (c - [c]_{q_l}) / q_l over Q_{l-1}, all in NTT form: one inverse NTT of the last limb and
    /// one forward NTT per remaining limb (Lattigo's DivRoundByLastModulusNTT).
    pub(crate) fn rescale_poly(&self, p: &Poly<Ntt>) -> Result<Poly<Ntt>, CkksError> {
        let level = p.num_limbs() - 1;
        let n = self.ctx.n();
        let basis = p.basis();
        let q_last = basis.moduli()[level];
        let mut last = p.limb(level).to_vec();
        basis.plans()[level].inverse(&mut last);
        let half = q_last.value() / 2;
        let next = self.params().q_at(level - 1)?.clone();
        let inv = &self.ctx.rescale_inv[level];
        let last_mod = &self.ctx.last_mod[level];
        let mut data = p.data()[..level * n].to_vec();
        data.par_chunks_exact_mut(n).enumerate().for_each(|(i, limb)| {
            let qi = next.moduli()[i];
            let mut r: Vec<u64> = last.iter().map(|&x| if x > half { qi.sub(qi.reduce(x), last_mod[i]) } else { qi.reduce(x) }).collect();
            next.plans()[i].forward(&mut r);
            let c = inv[i];
            for (x, &y) in limb.iter_mut().zip(&r) {
                *x = qi.mul_shoup(qi.sub(*x, y), c.value, c.shoup);
            }
        });
        Ok(Poly::from_kernel_output(&next, data))
    }

    /// Brings the ciphertext to the given scale exactly (to 2^-40 relative), consuming one
    /// level: multiplies by round(target q_l / s) and rescales. Errors at level 0.
    pub fn set_scale(&self, ct: &Ciphertext, target: f64) -> Result<Ciphertext, CkksError> {
        self.check(ct)?;
        crate::encoding::check_scale(target)?;
        if ct.level() == 0 {
            return Err(CkksError::NotEnoughLevels { op: "set_scale", needed: 1, level: 0 });
        }
        let q = self.ctx.prime_at(ct.level())? as f64;
        let k = (target * q / ct.scale).round();
        let mut out = self.rescale(&self.mul_integer_big(ct, k)?)?;
        out.scale = target;
        Ok(out)
    }

    /// Multiplies by a non-negative integer given as f64 (exact up to 2^127), scale unchanged.
    fn mul_integer_big(&self, ct: &Ciphertext, k: f64) -> Result<Ciphertext, CkksError> {
        if !(0.0..2f64.powi(127)).contains(&k) {
            return Err(CkksError::InvalidArgument { what: format!("integer factor {k} out of range") });
        }
        let k = k as u128;
        let q = self.params().q_at(ct.level())?;
        let scalars: Vec<u64> = q.moduli().iter().map(|m| m.reduce_u128(k)).collect();
        let parts = ct.inner.parts().iter().map(|p| p.mul_limb_scalars(&scalars)).collect();
        self.wrap(parts, ct.scale, ct.log_slots)
    }

    /// The ciphertext at `level` and (within tolerance) `scale`, taking the scale fix-up on the
    /// way down when there is a level to spare.
    fn bring_to(&self, ct: &Ciphertext, level: usize, scale: f64) -> Result<Ciphertext, CkksError> {
        if ct.level() > level && !scales_close(ct.scale, scale) {
            let above = self.drop_to_level(ct, level + 1)?;
            return self.set_scale(&above, scale);
        }
        self.drop_to_level(ct, level)
    }

    /// Two operands at one level with matching scales, per the policy in the module docs.
    fn align<'a>(&self, a: &'a Ciphertext, b: &'a Ciphertext) -> Result<(Cow<'a, Ciphertext>, Cow<'a, Ciphertext>), CkksError> {
        self.check(a)?;
        self.check(b)?;
        let (mut a, mut b) = (Cow::Borrowed(a), Cow::Borrowed(b));
        if a.level() > b.level() {
            a = Cow::Owned(self.bring_to(&a, b.level(), b.scale)?);
        } else if b.level() > a.level() {
            b = Cow::Owned(self.bring_to(&b, a.level(), a.scale)?);
        }
        if !scales_close(a.scale, b.scale) {
            let (big, small) = if a.scale > b.scale { (a.scale, b.scale) } else { (b.scale, a.scale) };
            let ratio = big / small;
            let k = ratio.round();
            if k < 2.0 || (k - ratio).abs() > SCALE_TOLERANCE * ratio {
                return Err(CkksError::ScaleMismatch { lhs: a.scale, rhs: b.scale });
            }
            if a.scale < b.scale {
                let mut m = self.mul_integer_big(&a, k)?;
                m.scale = b.scale;
                a = Cow::Owned(m);
            } else {
                let mut m = self.mul_integer_big(&b, k)?;
                m.scale = a.scale;
                b = Cow::Owned(m);
            }
        }
        Ok((a, b))
    }

    // ------------------------------------------------------------------------------------------
    // Additions

    fn combine(&self, a: &Ciphertext, b: &Ciphertext, negate_b: bool) -> Result<Ciphertext, CkksError> {
        let (a, b) = self.align(a, b)?;
        let len = a.len().max(b.len());
        let mut parts = Vec::with_capacity(len);
        for k in 0..len {
            let p = match (a.inner.parts().get(k), b.inner.parts().get(k)) {
                (Some(x), Some(y)) => {
                    let mut x = x.clone();
                    if negate_b { x.sub_assign(y)? } else { x.add_assign(y)? }
                    x
                }
                (Some(x), None) => x.clone(),
                (None, Some(y)) => {
                    let mut y = y.clone();
                    if negate_b {
                        y.neg_assign();
                    }
                    y
                }
                (None, None) => return Err(CkksError::Internal("part count")),
            };
            parts.push(p);
        }
        self.wrap(parts, a.scale, a.log_slots.max(b.log_slots))
    }

    /// a + b. Levels and scales are aligned per the module's policy (the result is at the lower
    /// level, with the scale of the operand at that level). Errors: `ParamsMismatch`,
    /// `ScaleMismatch` (same level, scales neither close nor in an integer ratio).
    pub fn add(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext, CkksError> {
        self.combine(a, b, false)
    }

    /// a - b; contract of [`Self::add`].
    pub fn sub(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext, CkksError> {
        self.combine(a, b, true)
    }

    pub fn negate(&self, a: &Ciphertext) -> Result<Ciphertext, CkksError> {
        self.check(a)?;
        let mut out = a.clone();
        out.inner.parts_mut().iter_mut().for_each(|p| p.neg_assign());
        Ok(out)
    }

    fn plain_at(&self, pt: &Plaintext, level: usize) -> Result<Poly<Ntt>, CkksError> {
        self.check_plain(pt)?;
        if pt.level() < level {
            return Err(CkksError::PlaintextLevelTooLow { plaintext: pt.level(), ciphertext: level });
        }
        let q = self.params().q_at(level)?;
        Ok(Poly::from_kernel_output(q, pt.poly.data()[..q.len() * self.ctx.n()].to_vec()))
    }

    /// ct + pt. The plaintext must be at the ciphertext's level or above (it is truncated) and
    /// at its scale (within tolerance). Errors: `PlaintextLevelTooLow`, `ScaleMismatch`.
    pub fn add_plain(&self, ct: &Ciphertext, pt: &Plaintext) -> Result<Ciphertext, CkksError> {
        self.plain_combine(ct, pt, false)
    }

    /// ct - pt; contract of [`Self::add_plain`].
    pub fn sub_plain(&self, ct: &Ciphertext, pt: &Plaintext) -> Result<Ciphertext, CkksError> {
        self.plain_combine(ct, pt, true)
    }

    fn plain_combine(&self, ct: &Ciphertext, pt: &Plaintext, sub: bool) -> Result<Ciphertext, CkksError> {
        self.check(ct)?;
        let p = self.plain_at(pt, ct.level())?;
        if !scales_close(ct.scale, pt.scale) {
            return Err(CkksError::ScaleMismatch { lhs: ct.scale, rhs: pt.scale });
        }
        let mut out = ct.clone();
        if sub { out.inner.parts_mut()[0].sub_assign(&p)? } else { out.inner.parts_mut()[0].add_assign(&p)? }
        out.log_slots = out.log_slots.max(pt.log_slots);
        Ok(out)
    }

    /// Adds a complex constant to every slot, scaled by the ciphertext's scale (exact rounding).
    pub fn add_const(&self, ct: &Ciphertext, c: Complex64) -> Result<Ciphertext, CkksError> {
        self.check(ct)?;
        let mut out = ct.clone();
        self.add_const_assign(&mut out, c)?;
        Ok(out)
    }

    /// Adds a real constant to every slot; see [`Self::add_const`].
    pub fn add_const_real(&self, ct: &Ciphertext, c: f64) -> Result<Ciphertext, CkksError> {
        self.add_const(ct, Complex64::new(c, 0.0))
    }

    pub(crate) fn add_const_assign(&self, ct: &mut Ciphertext, c: Complex64) -> Result<(), CkksError> {
        let level = ct.level();
        let res = constant_residues(&self.ctx, c, ct.scale, level)?;
        let n = self.ctx.n();
        let moduli = self.params().q_at(level)?.moduli().to_vec();
        let imag = &self.ctx.imag_unit_ntt;
        let c0 = &mut ct.inner.parts_mut()[0];
        c0.data_mut().par_chunks_exact_mut(n).enumerate().for_each(|(i, limb)| {
            let q = moduli[i];
            let (a, b) = res[i];
            if b == 0 {
                limb.iter_mut().for_each(|x| *x = q.add(*x, a));
            } else {
                for (x, &w) in limb.iter_mut().zip(&imag[i * n..(i + 1) * n]) {
                    *x = q.add(*x, q.add(a, q.mul(b, w)));
                }
            }
        });
        Ok(())
    }

    // ------------------------------------------------------------------------------------------
    // Products

    /// ct * pt slot-wise, not rescaled: scale s_ct * s_pt. The plaintext must be at the
    /// ciphertext's level or above. To land on the canonical scale after the rescale, encode the
    /// plaintext at [`Self::plaintext_scale_for`]. Errors: `PlaintextLevelTooLow`.
    pub fn mul_plain(&self, ct: &Ciphertext, pt: &Plaintext) -> Result<Ciphertext, CkksError> {
        self.check(ct)?;
        let p = self.plain_at(pt, ct.level())?;
        let mut out = ct.clone();
        for part in out.inner.parts_mut() {
            mul_assign_par(part, &p);
        }
        out.scale = ct.scale * pt.scale;
        out.log_slots = out.log_slots.max(pt.log_slots);
        Ok(out)
    }

    /// The plaintext (or constant) scale that makes a product with `ct` rescale to the
    /// canonical scale of the level below: Delta_{l-1} q_l / s (Delta_0 at level 0).
    pub fn plaintext_scale_for(&self, ct: &Ciphertext) -> Result<f64, CkksError> {
        self.plaintext_scale_at(ct.level(), ct.scale)
    }

    /// [`Self::plaintext_scale_for`] a ciphertext at `level` and `scale` (a hoisted one, say).
    pub fn plaintext_scale_at(&self, level: usize, scale: f64) -> Result<f64, CkksError> {
        if level == 0 {
            return self.ctx.scale_at(0);
        }
        Ok(self.ctx.scale_at(level - 1)? * self.ctx.prime_at(level)? as f64 / scale)
    }

    /// ct * c for a real constant, not rescaled: the constant is encoded at
    /// [`Self::plaintext_scale_for`], so a rescale afterwards lands on Delta_{l-1}.
    pub fn mul_const(&self, ct: &Ciphertext, c: f64) -> Result<Ciphertext, CkksError> {
        self.mul_const_complex(ct, Complex64::new(c, 0.0))
    }

    /// ct * c for a complex constant (c = a + b i multiplies by a + b X^(n/2)); see [`Self::mul_const`].
    pub fn mul_const_complex(&self, ct: &Ciphertext, c: Complex64) -> Result<Ciphertext, CkksError> {
        self.check(ct)?;
        let s = self.plaintext_scale_for(ct)?;
        self.mul_const_scaled(ct, c, s)
    }

    /// ct * c with the constant encoded as round(c * const_scale); the result's scale is
    /// s_ct * const_scale (not rescaled). Errors: `NonFiniteValue`, `InvalidScale`.
    pub fn mul_const_scaled(&self, ct: &Ciphertext, c: Complex64, const_scale: f64) -> Result<Ciphertext, CkksError> {
        self.check(ct)?;
        let level = ct.level();
        let res = constant_residues(&self.ctx, c, const_scale, level)?;
        let n = self.ctx.n();
        let moduli = self.params().q_at(level)?.moduli().to_vec();
        let imag = &self.ctx.imag_unit_ntt;
        let mut out = ct.clone();
        for part in out.inner.parts_mut() {
            part.data_mut().par_chunks_exact_mut(n).enumerate().for_each(|(i, limb)| {
                let q = moduli[i];
                let (a, b) = res[i];
                if b == 0 {
                    let sc = q.shoup(a);
                    limb.iter_mut().for_each(|x| *x = q.mul_shoup(*x, a, sc));
                } else {
                    for (x, &w) in limb.iter_mut().zip(&imag[i * n..(i + 1) * n]) {
                        *x = q.mul(*x, q.add(a, q.mul(b, w)));
                    }
                }
            });
        }
        out.scale = ct.scale * const_scale;
        Ok(out)
    }

    /// ct * k for an integer k, exactly, scale unchanged.
    pub fn mul_integer(&self, ct: &Ciphertext, k: i64) -> Result<Ciphertext, CkksError> {
        self.check(ct)?;
        let q = self.params().q_at(ct.level())?;
        let scalars: Vec<u64> = q.moduli().iter().map(|m| m.reduce_i64(k)).collect();
        let parts = ct.inner.parts().iter().map(|p| p.mul_limb_scalars(&scalars)).collect();
        self.wrap(parts, ct.scale, ct.log_slots)
    }

    /// Two 2-part operands at one level (the higher dropped; scales need not match).
    fn mul_operands<'a>(&self, a: &'a Ciphertext, b: &'a Ciphertext) -> Result<(Cow<'a, Ciphertext>, Cow<'a, Ciphertext>), CkksError> {
        self.check(a)?;
        self.check(b)?;
        if a.len() != 2 || b.len() != 2 {
            return Err(CkksError::WrongSize { expected: 2, found: a.len().max(b.len()) });
        }
        let level = a.level().min(b.level());
        let a = if a.level() > level { Cow::Owned(self.drop_to_level(a, level)?) } else { Cow::Borrowed(a) };
        let b = if b.level() > level { Cow::Owned(self.drop_to_level(b, level)?) } else { Cow::Borrowed(b) };
        Ok((a, b))
    }

    /// The tensor product (3 parts), not relinearised nor rescaled: scale s_a * s_b, at the
    /// lower of the two levels. Errors: `WrongSize` unless both have 2 parts.
    pub fn mul(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext, CkksError> {
        let (a, b) = self.mul_operands(a, b)?;
        let parts = tensor(&a.inner.parts()[0], &a.inner.parts()[1], &b.inner.parts()[0], &b.inner.parts()[1]);
        self.wrap(parts.to_vec(), a.scale * b.scale, a.log_slots.max(b.log_slots))
    }

    /// Product followed by relinearisation (2 parts), not rescaled. Errors: `MissingRelinKey`,
    /// `WrongSize`.
    pub fn mul_relin(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext, CkksError> {
        let rk = self.keys.relin.as_ref().ok_or(CkksError::MissingRelinKey)?;
        let (a, b) = self.mul_operands(a, b)?;
        let [mut d0, mut d1, d2] = tensor(&a.inner.parts()[0], &a.inner.parts()[1], &b.inner.parts()[0], &b.inner.parts()[1]);
        let [k0, k1] = self.key_switch(&d2, rk.key())?;
        d0.add_assign(&k0)?;
        d1.add_assign(&k1)?;
        self.wrap(vec![d0, d1], a.scale * b.scale, a.log_slots.max(b.log_slots))
    }

    /// Relinearises a 3-part ciphertext. Errors: `MissingRelinKey`, `WrongSize`.
    pub fn relinearize(&self, ct: &Ciphertext) -> Result<Ciphertext, CkksError> {
        self.check(ct)?;
        let rk = self.keys.relin.as_ref().ok_or(CkksError::MissingRelinKey)?;
        if ct.len() != 3 {
            return Err(CkksError::WrongSize { expected: 3, found: ct.len() });
        }
        let parts = ct.inner.parts();
        let [k0, k1] = self.key_switch(&parts[2], rk.key())?;
        let (mut c0, mut c1) = (parts[0].clone(), parts[1].clone());
        c0.add_assign(&k0)?;
        c1.add_assign(&k1)?;
        self.wrap(vec![c0, c1], ct.scale, ct.log_slots)
    }

    fn key_switch(&self, c: &Poly<Ntt>, key: &lycaon_rlwe::KeySwitchKey) -> Result<[Poly<Ntt>; 2], CkksError> {
        let coeff = self.params().backend().intt(c.clone())?;
        let dec = keyswitch::decompose(self.params(), &coeff, c)?;
        Ok(keyswitch::key_switch_decomposed(self.params(), &dec, key)?)
    }

    /// mul_relin then rescale: the usual product of two ciphertexts (one level).
    pub fn mul_relin_rescale(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext, CkksError> {
        self.rescale(&self.mul_relin(a, b)?)
    }

    // ------------------------------------------------------------------------------------------
    // Rotations

    pub(crate) fn galois_keys(&self, what: impl FnOnce() -> String) -> Result<&Arc<GaloisKeys>, CkksError> {
        self.keys.galois.as_ref().ok_or_else(|| CkksError::MissingGaloisKeys { what: what() })
    }

    /// Rotates slots left by `step` (right if negative): slot j receives slot j + step.
    /// Errors: `MissingGaloisKeys`, `MissingRotationKey` (naming the step), `WrongSize`.
    pub fn rotate(&self, ct: &Ciphertext, step: i64) -> Result<Ciphertext, CkksError> {
        let mut v = self.rotate_hoisted(ct, &[step])?;
        v.pop().ok_or(CkksError::Internal("hoisted count"))
    }

    /// Several rotations of one ciphertext sharing a single decomposition of c_1 (hoisting),
    /// the key switches running in parallel. Step 0 returns a copy. Errors as [`Self::rotate`].
    pub fn rotate_hoisted(&self, ct: &Ciphertext, steps: &[i64]) -> Result<Vec<Ciphertext>, CkksError> {
        let n = self.ctx.n();
        let elements: Vec<(u64, String)> = steps.iter().map(|&s| (rotation_galois_element(s, n), format!("rotation by {s}"))).collect();
        self.galois_hoisted(ct, &elements)
    }

    /// Complex conjugation of every slot. Errors: `MissingGaloisKeys`, `MissingRotationKey`.
    pub fn conjugate(&self, ct: &Ciphertext) -> Result<Ciphertext, CkksError> {
        let g = conjugation_galois_element(self.ctx.n());
        let mut v = self.galois_hoisted(ct, &[(g, "conjugation".to_string())])?;
        v.pop().ok_or(CkksError::Internal("hoisted count"))
    }

    /// Applies X -> X^g for each Galois element, sharing one decomposition.
    pub fn apply_galois_hoisted(&self, ct: &Ciphertext, elements: &[u64]) -> Result<Vec<Ciphertext>, CkksError> {
        let e: Vec<(u64, String)> = elements.iter().map(|&g| (g, format!("Galois element {g}"))).collect();
        self.galois_hoisted(ct, &e)
    }

    fn galois_hoisted(&self, ct: &Ciphertext, elements: &[(u64, String)]) -> Result<Vec<Ciphertext>, CkksError> {
        self.check(ct)?;
        if ct.len() != 2 {
            return Err(CkksError::WrongSize { expected: 2, found: ct.len() });
        }
        if elements.iter().all(|(g, _)| *g == 1) {
            return Ok(vec![ct.clone(); elements.len()]);
        }
        let gk = self.galois_keys(|| elements.iter().find(|(g, _)| *g != 1).map(|(_, w)| w.clone()).unwrap_or_default())?;
        for (g, what) in elements {
            if *g != 1 && gk.get(*g).is_none() {
                return Err(CkksError::MissingRotationKey { what: what.clone(), galois_element: *g });
            }
        }
        let params = self.params();
        let backend = params.backend();
        let (c0, c1) = (&ct.inner.parts()[0], &ct.inner.parts()[1]);
        let dec = keyswitch::decompose(params, &backend.intt(c1.clone())?, c1)?;
        elements
            .par_iter()
            .map(|(g, what)| {
                if *g == 1 {
                    return Ok(ct.clone());
                }
                let key = gk.get(*g).ok_or_else(|| CkksError::MissingRotationKey { what: what.clone(), galois_element: *g })?;
                let auto = self.ctx.automorphism(*g)?;
                let [mut k0, k1] = keyswitch::key_switch_decomposed(params, &dec, key)?;
                k0.add_assign(c0)?;
                let parts = vec![backend.automorphism_ntt(&k0, &auto)?, backend.automorphism_ntt(&k1, &auto)?];
                self.wrap(parts, ct.scale, ct.log_slots)
            })
            .collect()
    }
}

/// a *= b point-wise, limbs in parallel.
pub(crate) fn mul_assign_par(a: &mut Poly<Ntt>, b: &Poly<Ntt>) {
    let n = a.n();
    let moduli = a.basis().moduli().to_vec();
    a.data_mut().par_chunks_exact_mut(n).zip(b.data().par_chunks_exact(n)).enumerate().for_each(|(i, (x, y))| {
        let q = moduli[i];
        x.iter_mut().zip(y).for_each(|(u, &v)| *u = q.mul(*u, v));
    });
}

/// (a0 b0, a0 b1 + a1 b0, a1 b1) point-wise, limbs in parallel, the middle term reduced once.
pub(crate) fn tensor(a0: &Poly<Ntt>, a1: &Poly<Ntt>, b0: &Poly<Ntt>, b1: &Poly<Ntt>) -> [Poly<Ntt>; 3] {
    let basis = a0.basis().clone();
    let n = basis.n();
    let limbs: Vec<[Vec<u64>; 3]> = (0..basis.len())
        .into_par_iter()
        .map(|i| {
            let q = basis.moduli()[i];
            let d0 = a0.limb(i).iter().zip(b0.limb(i)).map(|(&x, &y)| q.mul(x, y)).collect();
            let d2 = a1.limb(i).iter().zip(b1.limb(i)).map(|(&x, &y)| q.mul(x, y)).collect();
            let mut acc = vec![0u128; n];
            mul_accumulate_lazy(&mut acc, a0.limb(i), b1.limb(i));
            mul_accumulate_lazy(&mut acc, a1.limb(i), b0.limb(i));
            let mut d1 = vec![0u64; n];
            reduce_lazy(&acc, &mut d1, &q);
            [d0, d1, d2]
        })
        .collect();
    let mut out = [Vec::with_capacity(basis.len() * n), Vec::with_capacity(basis.len() * n), Vec::with_capacity(basis.len() * n)];
    for l in limbs {
        for (o, d) in out.iter_mut().zip(l) {
            o.extend_from_slice(&d);
        }
    }
    out.map(|d| Poly::from_kernel_output(&basis, d))
}
