//! CKKS plaintexts: round(scale * m) for a polynomial m whose canonical embedding holds the slot
//! values, in NTT form over Q_l. s slots (a power of two up to n/2) live in the subring of
//! Y = X^(n / 2s); read with all n/2 slots, such a message appears replicated n / 2s times.

use std::sync::Arc;

use lycaon_math::num_bigint::BigInt;
use lycaon_math::{Ntt, Poly, RnsBasis};
use lycaon_rlwe::wire::ParamsId;
use num_complex::Complex64;
use num_traits::{FromPrimitive, ToPrimitive};
use rayon::prelude::*;

use crate::{CkksContext, CkksError};

/// An encoded message at a level, with its scale and slot count.
#[derive(Clone, Debug, PartialEq)]
pub struct Plaintext {
    pub(crate) params_id: ParamsId,
    pub(crate) poly: Poly<Ntt>,
    pub(crate) scale: f64,
    pub(crate) log_slots: u32,
}

impl Plaintext {
    pub fn level(&self) -> usize {
        self.poly.num_limbs() - 1
    }

    pub fn scale(&self) -> f64 {
        self.scale
    }

    pub fn slots(&self) -> usize {
        1 << self.log_slots
    }

    pub fn params_id(&self) -> &ParamsId {
        &self.params_id
    }

    /// The polynomial round(scale * m) in NTT form over Q_level.
    pub fn poly(&self) -> &Poly<Ntt> {
        &self.poly
    }
}

/// Encodes and decodes through the canonical embedding. Cheap to build; holds the context.
#[derive(Clone, Debug)]
pub struct Encoder {
    ctx: Arc<CkksContext>,
}

/// One scaled-and-rounded coefficient: i128 covers |x| < 2^126, the big path anything else.
enum Rounded {
    /// |x| < 2^63: one 64-bit Barrett reduction per residue.
    Narrow(Vec<i64>),
    Wide(Vec<i128>),
    Big(Vec<BigInt>),
}

pub(crate) fn check_slots(ctx: &CkksContext, slots: usize) -> Result<u32, CkksError> {
    if slots == 0 || !slots.is_power_of_two() || slots > ctx.max_slots() {
        return Err(CkksError::InvalidSlots { slots, max: ctx.max_slots() });
    }
    Ok(slots.trailing_zeros())
}

pub(crate) fn check_scale(scale: f64) -> Result<(), CkksError> {
    if !scale.is_finite() || scale < 1.0 {
        return Err(CkksError::InvalidScale { scale });
    }
    Ok(())
}

impl Encoder {
    pub fn new(ctx: &Arc<CkksContext>) -> Self {
        Self { ctx: ctx.clone() }
    }

    pub fn context(&self) -> &Arc<CkksContext> {
        &self.ctx
    }

    /// Encodes complex values into `values.len().next_power_of_two()` slots (at least one),
    /// zero-padded, at `level` and `scale`.
    ///
    /// Errors: `TooManyValues` beyond n/2 values, `NonFiniteValue`, `InvalidScale` (not finite
    /// or < 1), `LevelOutOfRange`, `ScaleOverflow` when scale * max |coefficient| reaches Q_l / 2.
    pub fn encode(&self, values: &[Complex64], level: usize, scale: f64) -> Result<Plaintext, CkksError> {
        let slots = values.len().max(1).next_power_of_two();
        if slots > self.ctx.max_slots() {
            return Err(CkksError::TooManyValues { slots: self.ctx.max_slots(), found: values.len() });
        }
        self.encode_with_slots(values, slots, level, scale)
    }

    /// Encodes real values (imaginary parts zero); see [`Self::encode`].
    pub fn encode_real(&self, values: &[f64], level: usize, scale: f64) -> Result<Plaintext, CkksError> {
        let c: Vec<Complex64> = values.iter().map(|&x| Complex64::new(x, 0.0)).collect();
        self.encode(&c, level, scale)
    }

    /// Encodes into exactly `slots` slots (a power of two up to n/2); shorter inputs are
    /// zero-padded. Errors as [`Self::encode`], plus `InvalidSlots`.
    pub fn encode_with_slots(&self, values: &[Complex64], slots: usize, level: usize, scale: f64) -> Result<Plaintext, CkksError> {
        let log_slots = check_slots(&self.ctx, slots)?;
        if values.len() > slots {
            return Err(CkksError::TooManyValues { slots, found: values.len() });
        }
        let basis = self.ctx.params.q_at(level)?.clone();
        let poly = self.encode_poly(values, slots, scale, &basis)?;
        Ok(Plaintext { params_id: *self.ctx.params.id(), poly, scale, log_slots })
    }

    /// round(scale * m) over any basis made of primes of these parameters (Q_l, or Q_l P for
    /// plaintexts used in the extended basis), in NTT form.
    pub(crate) fn encode_poly(&self, values: &[Complex64], slots: usize, scale: f64, basis: &Arc<RnsBasis>) -> Result<Poly<Ntt>, CkksError> {
        check_scale(scale)?;
        if let Some((index, v)) = values.iter().enumerate().find(|(_, v)| !v.re.is_finite() || !v.im.is_finite()) {
            return Err(CkksError::NonFiniteValue { index, value: if v.re.is_finite() { v.im } else { v.re } });
        }
        let mut buf = vec![Complex64::new(0.0, 0.0); slots];
        buf[..values.len()].copy_from_slice(values);
        self.ctx.fft.inverse(&mut buf);
        let max = buf.iter().map(|c| c.re.abs().max(c.im.abs())).fold(0.0, f64::max);
        let log_q = basis.log2_product();
        if max > 0.0 && (max * scale).log2() >= log_q - 1.0 {
            let level = basis.len() - 1;
            return Err(CkksError::ScaleOverflow { log_scale: scale.log2(), log_value: max.log2(), level, log_q });
        }
        let n = self.ctx.n();
        let gap = n / 2 / slots;
        let coeffs: Vec<f64> = buf.iter().map(|c| c.re * scale).chain(buf.iter().map(|c| c.im * scale)).collect();
        let positions = |k: usize| if k < slots { k * gap } else { n / 2 + (k - slots) * gap };
        let rounded = if max * scale < 2f64.powi(62) {
            Rounded::Narrow(coeffs.iter().map(|&x| x.round() as i64).collect())
        } else if max * scale < 2f64.powi(126) {
            Rounded::Wide(coeffs.iter().map(|&x| x.round() as i128).collect())
        } else {
            Rounded::Big(coeffs.iter().map(|&x| BigInt::from_f64(x.round()).unwrap_or_default()).collect())
        };
        let mut data = vec![0u64; basis.len() * n];
        data.par_chunks_exact_mut(n).zip(basis.moduli().par_iter()).zip(basis.plans().par_iter()).for_each(|((limb, q), plan)| {
            match &rounded {
                Rounded::Narrow(v) => {
                    for (k, &x) in v.iter().enumerate() {
                        let r = q.reduce(x.unsigned_abs());
                        limb[positions(k)] = if x < 0 { q.neg(r) } else { r };
                    }
                }
                Rounded::Wide(v) => {
                    for (k, &x) in v.iter().enumerate() {
                        let r = q.reduce_u128(x.unsigned_abs());
                        limb[positions(k)] = if x < 0 { q.neg(r) } else { r };
                    }
                }
                Rounded::Big(v) => {
                    let m = BigInt::from(q.value());
                    for (k, x) in v.iter().enumerate() {
                        let r = ((x % &m) + &m) % &m;
                        limb[positions(k)] = r.to_u64().unwrap_or(0);
                    }
                }
            }
            plan.forward(limb);
        });
        Ok(Poly::from_kernel_output(basis, data))
    }

    /// Decodes all of the plaintext's slots.
    pub fn decode(&self, pt: &Plaintext) -> Result<Vec<Complex64>, CkksError> {
        if pt.params_id != *self.ctx.params.id() {
            return Err(lycaon_rlwe::RlweError::ParamsMismatch { what: "plaintext" }.into());
        }
        let coeff = self.ctx.params.backend().intt(pt.poly.clone())?;
        let level = pt.level();
        let slots = pt.slots();
        let n = self.ctx.n();
        let gap = n / 2 / slots;
        let weights = self.ctx.garner_weights(level, pt.scale);
        let limbs = level + 1;
        let positions: Vec<usize> = (0..slots).map(|k| k * gap).chain((0..slots).map(|k| n / 2 + k * gap)).collect();
        let values: Vec<f64> = positions
            .par_chunks(256)
            .flat_map_iter(|chunk| {
                let mut residues = vec![0u64; limbs];
                let mut digits = Vec::with_capacity(limbs);
                chunk
                    .iter()
                    .map(|&pos| {
                        residues.iter_mut().enumerate().for_each(|(i, r)| *r = coeff.limb(i)[pos]);
                        self.ctx.garner_value(&residues, &weights, &mut digits)
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        let mut out: Vec<Complex64> = (0..slots).map(|k| Complex64::new(values[k], values[slots + k])).collect();
        self.ctx.fft.forward(&mut out);
        Ok(out)
    }

    /// Decodes the real parts of all slots.
    pub fn decode_real(&self, pt: &Plaintext) -> Result<Vec<f64>, CkksError> {
        Ok(self.decode(pt)?.into_iter().map(|c| c.re).collect())
    }

    /// Encodes a constant into every slot at `level` and `scale` (as a constant polynomial, or
    /// a + b X^(n/2) for a complex constant).
    pub fn encode_constant(&self, value: Complex64, slots: usize, level: usize, scale: f64) -> Result<Plaintext, CkksError> {
        let log_slots = check_slots(&self.ctx, slots)?;
        let basis = self.ctx.params.q_at(level)?.clone();
        let mult = crate::evaluator::constant_residues(&self.ctx, value, scale, level)?;
        let n = self.ctx.n();
        let mut data = vec![0u64; basis.len() * n];
        for (i, (limb, q)) in data.chunks_exact_mut(n).zip(basis.moduli()).enumerate() {
            let (a, b) = mult[i];
            let w = &self.ctx.imag_unit_ntt[i * n..(i + 1) * n];
            limb.iter_mut().zip(w).for_each(|(x, &wk)| *x = q.add(a, q.mul(b, wk)));
        }
        Ok(Plaintext { params_id: *self.ctx.params.id(), poly: Poly::from_kernel_output(&basis, data), scale, log_slots })
    }
}
