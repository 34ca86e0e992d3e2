//! CKKS ciphertexts (an RLWE ciphertext with its scale and slot count), encryption with the
//! public key or the secret key (seeded: half the bytes upstream), and decryption.

use std::sync::Arc;

use lycaon_math::Sampler;
use lycaon_rlwe::{PublicKey, RlweError, SecretKey};

use crate::encoding::{check_scale, check_slots};
use crate::{CkksContext, CkksError, Plaintext};

/// An encrypted message: decrypts to round(scale * m) + small noise, in NTT form over Q_level.
#[derive(Clone, Debug, PartialEq)]
pub struct Ciphertext {
    pub(crate) inner: lycaon_rlwe::Ciphertext,
    pub(crate) scale: f64,
    pub(crate) log_slots: u32,
}

impl Ciphertext {
    /// Wraps an RLWE ciphertext. Errors if it was made under other parameters, the scale is not
    /// finite and >= 1, or the slot count is not a power of two up to n/2.
    pub fn from_inner(ctx: &CkksContext, inner: lycaon_rlwe::Ciphertext, scale: f64, slots: usize) -> Result<Self, CkksError> {
        if inner.params_id() != ctx.params.id() {
            return Err(RlweError::ParamsMismatch { what: "ciphertext" }.into());
        }
        check_scale(scale)?;
        let log_slots = check_slots(ctx, slots)?;
        Ok(Self { inner, scale, log_slots })
    }

    pub fn level(&self) -> usize {
        self.inner.level()
    }

    pub fn scale(&self) -> f64 {
        self.scale
    }

    pub fn slots(&self) -> usize {
        1 << self.log_slots
    }

    pub fn log_slots(&self) -> u32 {
        self.log_slots
    }

    /// Number of parts: 2, or 3 after a multiplication without relinearisation.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn inner(&self) -> &lycaon_rlwe::Ciphertext {
        &self.inner
    }

    pub fn into_inner(self) -> lycaon_rlwe::Ciphertext {
        self.inner
    }

    /// Reinterprets the ciphertext under another scale without touching its polynomials: the
    /// message is multiplied by old / new. This is an exact, free multiplication by a real
    /// constant (it changes how much headroom the message has, so keep the ratio moderate).
    pub fn set_scale_metadata(&mut self, scale: f64) -> Result<(), CkksError> {
        check_scale(scale)?;
        self.scale = scale;
        Ok(())
    }

    /// Declares a different slot count (after a transform that moved the message, say).
    pub fn set_slots(&mut self, ctx: &CkksContext, slots: usize) -> Result<(), CkksError> {
        self.log_slots = check_slots(ctx, slots)?;
        Ok(())
    }
}

/// A fresh symmetric encryption sent as (c_0, seed), with its scale and slot count.
#[derive(Clone, Debug, PartialEq)]
pub struct SeededCiphertext {
    pub(crate) inner: lycaon_rlwe::SeededCiphertext,
    pub(crate) scale: f64,
    pub(crate) log_slots: u32,
}

impl SeededCiphertext {
    pub fn level(&self) -> usize {
        self.inner.level()
    }

    pub fn scale(&self) -> f64 {
        self.scale
    }

    pub fn slots(&self) -> usize {
        1 << self.log_slots
    }

    /// The full ciphertext, with its uniform part re-expanded from the seed.
    pub fn expand(&self, ctx: &CkksContext) -> Result<Ciphertext, CkksError> {
        Ok(Ciphertext { inner: self.inner.expand(&ctx.params)?, scale: self.scale, log_slots: self.log_slots })
    }
}

fn check_plain(ctx: &CkksContext, pt: &Plaintext) -> Result<(), CkksError> {
    if pt.params_id != *ctx.params.id() {
        return Err(RlweError::ParamsMismatch { what: "plaintext" }.into());
    }
    Ok(())
}

/// Encrypts plaintexts at their own level and scale. Holds a CSPRNG seeded by the OS.
pub struct Encryptor {
    ctx: Arc<CkksContext>,
    sampler: Sampler,
}

impl Encryptor {
    pub fn new(ctx: &Arc<CkksContext>) -> Result<Self, CkksError> {
        Ok(Self { ctx: ctx.clone(), sampler: Sampler::from_os()? })
    }

    /// Public-key encryption (anyone with the public key). Errors if the key or the plaintext
    /// belongs to other parameters.
    pub fn encrypt(&mut self, pk: &PublicKey, pt: &Plaintext) -> Result<Ciphertext, CkksError> {
        check_plain(&self.ctx, pt)?;
        let mut ct = lycaon_rlwe::encrypt_zero_public(&self.ctx.params, pk, pt.level(), &mut self.sampler)?;
        ct.parts_mut()[0].add_assign(&pt.poly)?;
        Ok(Ciphertext { inner: ct, scale: pt.scale, log_slots: pt.log_slots })
    }

    /// Secret-key encryption, returned seeded (half the bytes of a full ciphertext).
    pub fn encrypt_symmetric(&mut self, sk: &SecretKey, pt: &Plaintext) -> Result<SeededCiphertext, CkksError> {
        check_plain(&self.ctx, pt)?;
        if sk.params().id() != self.ctx.params.id() {
            return Err(RlweError::ParamsMismatch { what: "secret key" }.into());
        }
        let mut ct = lycaon_rlwe::encrypt_zero_symmetric(sk, pt.level(), &mut self.sampler)?;
        ct.c0_mut().add_assign(&pt.poly)?;
        Ok(SeededCiphertext { inner: ct, scale: pt.scale, log_slots: pt.log_slots })
    }
}

/// Decrypts; holds the secret key, so it belongs to the client.
pub struct Decryptor<'a> {
    ctx: Arc<CkksContext>,
    sk: &'a SecretKey,
}

impl<'a> Decryptor<'a> {
    pub fn new(ctx: &Arc<CkksContext>, sk: &'a SecretKey) -> Result<Self, CkksError> {
        if sk.params().id() != ctx.params.id() {
            return Err(RlweError::ParamsMismatch { what: "secret key" }.into());
        }
        Ok(Self { ctx: ctx.clone(), sk })
    }

    /// c_0 + c_1 s (+ c_2 s^2) as a plaintext with the ciphertext's scale and slots.
    pub fn decrypt(&self, ct: &Ciphertext) -> Result<Plaintext, CkksError> {
        let poly = lycaon_rlwe::phase(self.sk, &ct.inner)?;
        Ok(Plaintext { params_id: *self.ctx.params.id(), poly, scale: ct.scale, log_slots: ct.log_slots })
    }
}
