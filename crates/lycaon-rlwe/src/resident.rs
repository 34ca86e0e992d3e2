//! Hybrid key switching on resident memory ([`ResidentBackend`]): the same ModUp, inner product
//! and ModDown as [`crate::keyswitch`], on polynomials and keys that stay in a device's memory.
//! Results equal the host path's bit for bit (tests in lycaon-ckks and lycaon-cuda).

use std::sync::Arc;

use lycaon_backend::{KeyLayout, ResidentBackend};
use lycaon_math::{MathError, Ntt, Poly, RnsBasis};

use crate::{KeySwitchKey, Parameters, RlweError};

/// An NTT-form polynomial over `basis`, in a resident backend's memory.
pub struct ResidentPoly<B: ResidentBackend> {
    pub mem: B::Mem,
    pub basis: Arc<RnsBasis>,
}

impl<B: ResidentBackend> ResidentPoly<B> {
    pub fn upload(backend: &B, poly: &Poly<Ntt>) -> Result<Self, MathError> {
        Ok(Self { mem: backend.upload(poly.data())?, basis: poly.basis().clone() })
    }

    /// Back to the host, checked to hold reduced residues (a device kernel bug otherwise).
    pub fn download(&self, backend: &B) -> Result<Poly<Ntt>, MathError> {
        Poly::from_data(&self.basis, backend.download(&self.mem)?)
    }

    pub fn duplicate(&self, backend: &B) -> Result<Self, MathError> {
        let mut mem = backend.alloc(backend.len(&self.mem))?;
        backend.copy_words(&mut mem, 0, &self.mem, 0, backend.len(&self.mem))?;
        Ok(Self { mem, basis: self.basis.clone() })
    }

    /// The first `limbs` limbs (dropping the last primes).
    pub fn prefix(&self, backend: &B, basis: &Arc<RnsBasis>) -> Result<Self, MathError> {
        let words = basis.len() * basis.n();
        if basis.len() > self.basis.len() || !self.basis.moduli()[..basis.len()].iter().zip(basis.moduli()).all(|(a, b)| a == b) {
            return Err(MathError::BasisMismatch { lhs: self.basis.len(), rhs: basis.len() });
        }
        let mut mem = backend.alloc(words)?;
        backend.copy_words(&mut mem, 0, &self.mem, 0, words)?;
        Ok(Self { mem, basis: basis.clone() })
    }

    pub fn num_limbs(&self) -> usize {
        self.basis.len()
    }
}

/// A key-switching key in resident memory: [b_j, a_j] of every digit over Q_level P, laid out as
/// [`KeyLayout`] says.
pub struct ResidentKey<B: ResidentBackend> {
    mem: B::Mem,
    layout: KeyLayout,
    level: usize,
    full: bool,
    params_id: crate::wire::ParamsId,
}

impl<B: ResidentBackend> ResidentKey<B> {
    /// Uploads a key once (a session's boundary).
    pub fn upload(backend: &B, key: &KeySwitchKey) -> Result<Self, RlweError> {
        let limbs = key.digits.first().map(|d| d[0].num_limbs()).ok_or(RlweError::Malformed { what: "key without digits".into() })?;
        let mut words = Vec::with_capacity(2 * key.digits.len() * limbs * key.digits[0][0].n());
        for o in 0..2 {
            for d in &key.digits {
                words.extend_from_slice(d[o].data());
            }
        }
        Ok(Self {
            mem: backend.upload(&words)?,
            layout: KeyLayout { digits: key.digits.len(), limbs },
            level: key.level,
            full: key.full,
            params_id: key.params_id,
        })
    }

    /// The highest ciphertext level this key serves.
    pub fn level(&self) -> usize {
        self.level
    }

    pub fn bytes(&self, n: usize) -> usize {
        2 * self.layout.digits * self.layout.limbs * n * 8
    }
}

/// The digits of one polynomial after ModUp, resident.
pub struct ResidentDecomposed<B: ResidentBackend> {
    level: usize,
    /// The digits one after the other, each over Q_l P.
    digits: B::Mem,
    count: usize,
}

/// ModUp of c (NTT form over Q_l): [`crate::keyswitch::decompose`] on resident memory.
pub fn decompose<B: ResidentBackend>(params: &Parameters, backend: &B, c: &ResidentPoly<B>) -> Result<ResidentDecomposed<B>, RlweError> {
    let level = c.num_limbs().checked_sub(1).ok_or(RlweError::Malformed { what: "empty polynomial".into() })?;
    let ctx = params.level(level)?;
    if ctx.mod_down.is_none() {
        return Err(RlweError::NoSpecialPrimes);
    }
    if !c.basis.same_primes(&ctx.q) {
        return Err(RlweError::Malformed { what: "the decomposed polynomial must be over Q_l of these parameters".into() });
    }
    let digits = backend.mod_up(&c.mem, &ctx.q, &ctx.digits, &ctx.mod_up, &ctx.qp)?;
    Ok(ResidentDecomposed { level, digits, count: ctx.digits.len() })
}

/// The inner product with a resident key, then ModDown: [`crate::keyswitch::key_switch_decomposed`]
/// on resident memory. Errors as that function.
pub fn key_switch_decomposed<B: ResidentBackend>(
    params: &Parameters,
    backend: &B,
    dec: &ResidentDecomposed<B>,
    key: &ResidentKey<B>,
) -> Result<[ResidentPoly<B>; 2], RlweError> {
    let (ctx, limbs) = key_context(params, dec, key)?;
    let conv = ctx.mod_down.as_ref().ok_or(RlweError::NoSpecialPrimes)?;
    let [k0, k1] = backend.key_switch(&dec.digits, dec.count, &key.mem, key.layout, &limbs, &ctx.qp, conv)?;
    Ok([ResidentPoly { mem: k0, basis: ctx.q.clone() }, ResidentPoly { mem: k1, basis: ctx.q.clone() }])
}

/// The level context of a key switch and the key limb of every limb of Q_l P, after the checks
/// every key switch makes: the key's parameters and level, and its digit count.
fn key_context<'a, B: ResidentBackend>(params: &'a Parameters, dec: &ResidentDecomposed<B>, key: &ResidentKey<B>) -> Result<(&'a crate::params::LevelContext, Vec<usize>), RlweError> {
    if &key.params_id != params.id() {
        return Err(RlweError::ParamsMismatch { what: "key-switching key" });
    }
    if dec.level > key.level {
        return Err(RlweError::KeyLevelTooLow { galois_element: None, key_level: key.level, ciphertext_level: dec.level });
    }
    let ctx = params.level(dec.level)?;
    if dec.count > key.layout.digits {
        return Err(RlweError::Malformed { what: "key has fewer digits than the parameters require".into() });
    }
    let limbs = if key.full {
        ctx.key_limbs.clone()
    } else {
        let alpha = params.special_prime_count();
        (0..=dec.level).chain(key.level + 1..key.level + 1 + alpha).collect()
    };
    Ok((ctx, limbs))
}

/// The inner product without the ModDown: two polynomials over Q_l P
/// ([`crate::keyswitch::key_switch_decomposed_lazy`] on resident memory).
pub fn key_switch_decomposed_lazy<B: ResidentBackend>(
    params: &Parameters,
    backend: &B,
    dec: &ResidentDecomposed<B>,
    key: &ResidentKey<B>,
) -> Result<[ResidentPoly<B>; 2], RlweError> {
    let (ctx, limbs) = key_context(params, dec, key)?;
    let [u0, u1] = backend.key_inner_product(&dec.digits, dec.count, &key.mem, key.layout, &limbs, &ctx.qp)?;
    Ok([ResidentPoly { mem: u0, basis: ctx.qp.clone() }, ResidentPoly { mem: u1, basis: ctx.qp.clone() }])
}

/// ModDown from Q_l P to Q_l ([`crate::keyswitch::mod_down`] on resident memory).
pub fn mod_down<B: ResidentBackend>(params: &Parameters, backend: &B, x: &ResidentPoly<B>) -> Result<ResidentPoly<B>, RlweError> {
    let level = x
        .num_limbs()
        .checked_sub(1 + params.special_prime_count())
        .ok_or(RlweError::Malformed { what: "ModDown of a polynomial without the special primes".into() })?;
    let ctx = params.level(level)?;
    let conv = ctx.mod_down.as_ref().ok_or(RlweError::NoSpecialPrimes)?;
    if !x.basis.same_primes(&ctx.qp) {
        return Err(RlweError::Malformed { what: format!("ModDown expects a polynomial over Q_{level} P ({} limbs)", ctx.qp.len()) });
    }
    Ok(ResidentPoly { mem: backend.mod_down(&x.mem, conv)?, basis: ctx.q.clone() })
}

/// Errors unless a resident key reaches `level` (the host path's check, for Galois keys).
pub fn check_resident_key_level<B: ResidentBackend>(key: &ResidentKey<B>, level: usize, galois_element: Option<u64>) -> Result<(), RlweError> {
    if level > key.level {
        return Err(RlweError::KeyLevelTooLow { galois_element, key_level: key.level, ciphertext_level: level });
    }
    Ok(())
}
