//! CKKS ciphertexts (an RLWE ciphertext with its scale and slot count), encryption with the
//! public key ([`PublicKeyEncryptor`], server or anyone) or the secret key ([`SecretKeyEncryptor`],
//! client; seeded: half the bytes upstream), and decryption. Each encryptor owns its one key, so
//! a type's role says which key it can hold.

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

/// Public-key encryption: what a server holds to re-randomise its answers, and what anyone may
/// use to encrypt for the key's owner. It owns the public key and a CSPRNG seeded by the OS, and
/// nothing of it takes a [`SecretKey`], so a server-side value of this type cannot hold one.
///
/// ```
/// use std::sync::Arc;
/// use lycaon_ckks::{CkksContext, Encoder, PublicKeyEncryptor};
/// use lycaon_ckks::rlwe::{Parameters, PublicKey, SecretKey, Security};
/// use lycaon_math::Sampler;
///
/// // Toy parameters, NOT secure (n = 64).
/// let mut lit = lycaon_ckks::scale_stable_literal(64, 50, 30, 2, &[50])?;
/// lit.security = Security::InsecureTestOnly;
/// let params = Parameters::new(lit)?;
/// let ctx = CkksContext::new(&params, 2f64.powi(30))?;
/// let mut rng = Sampler::from_os()?;
/// let secret_key = SecretKey::generate(&params, &mut rng)?; // stays with the client
/// let public_key = Arc::new(PublicKey::generate(&secret_key, &mut rng)?);
/// let mut encryptor = PublicKeyEncryptor::new(&ctx, public_key)?;
/// let pt = Encoder::new(&ctx).encode_real(&[0.5; 8], ctx.max_level(), ctx.scale_at(ctx.max_level())?)?;
/// let ct = encryptor.encrypt(&pt)?;
/// let fresh = encryptor.rerandomise(&ct)?; // what a server does before it answers
/// assert_eq!(fresh.level(), ctx.max_level());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// The same with the secret key does not compile: there is no way to build one from it.
///
/// ```compile_fail,E0308
/// use std::sync::Arc;
/// use lycaon_ckks::{CkksContext, PublicKeyEncryptor};
/// use lycaon_ckks::rlwe::{Parameters, SecretKey, Security};
/// use lycaon_math::Sampler;
///
/// let mut lit = lycaon_ckks::scale_stable_literal(64, 50, 30, 2, &[50])?;
/// lit.security = Security::InsecureTestOnly;
/// let params = Parameters::new(lit)?;
/// let ctx = CkksContext::new(&params, 2f64.powi(30))?;
/// let secret_key = Arc::new(SecretKey::generate(&params, &mut Sampler::from_os()?)?);
/// let encryptor = PublicKeyEncryptor::new(&ctx, secret_key)?; // expected `Arc<PublicKey>`
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct PublicKeyEncryptor {
    ctx: Arc<CkksContext>,
    public_key: Arc<PublicKey>,
    sampler: Sampler,
}

impl PublicKeyEncryptor {
    /// Errors: [`RlweError::ParamsMismatch`] when the key belongs to other parameters; a math
    /// error when the OS gives no randomness.
    pub fn new(ctx: &Arc<CkksContext>, public_key: Arc<PublicKey>) -> Result<Self, CkksError> {
        if public_key.params_id() != ctx.params.id() {
            return Err(RlweError::ParamsMismatch { what: "public key" }.into());
        }
        Ok(Self { ctx: ctx.clone(), public_key, sampler: Sampler::from_os()? })
    }

    pub fn public_key(&self) -> &Arc<PublicKey> {
        &self.public_key
    }

    /// Encrypts at the plaintext's level and scale. Errors if the plaintext belongs to other
    /// parameters.
    pub fn encrypt(&mut self, pt: &Plaintext) -> Result<Ciphertext, CkksError> {
        check_plain(&self.ctx, pt)?;
        let mut ct = lycaon_rlwe::encrypt_zero_public(&self.ctx.params, &self.public_key, pt.level(), &mut self.sampler)?;
        ct.parts_mut()[0].add_assign(&pt.poly)?;
        Ok(Ciphertext { inner: ct, scale: pt.scale, log_slots: pt.log_slots })
    }

    /// `ct` plus a fresh public-key encryption of zero at its level: the same message and scale,
    /// fresh randomness (the noise grows by that of one encryption; it is not flooded). Errors if
    /// the ciphertext belongs to other parameters.
    pub fn rerandomise(&mut self, ct: &Ciphertext) -> Result<Ciphertext, CkksError> {
        if ct.inner.params_id() != self.ctx.params.id() {
            return Err(RlweError::ParamsMismatch { what: "ciphertext" }.into());
        }
        let zero = lycaon_rlwe::encrypt_zero_public(&self.ctx.params, &self.public_key, ct.level(), &mut self.sampler)?;
        let mut out = ct.clone();
        for (part, z) in out.inner.parts_mut().iter_mut().zip(zero.parts()) {
            part.add_assign(z)?;
        }
        Ok(out)
    }
}

/// Secret-key (symmetric) encryption, seeded: half the bytes of a public-key ciphertext upstream.
/// Holds the secret key, so it belongs to the client.
pub struct SecretKeyEncryptor {
    ctx: Arc<CkksContext>,
    secret_key: Arc<SecretKey>,
    sampler: Sampler,
}

impl SecretKeyEncryptor {
    /// Errors: [`RlweError::ParamsMismatch`] when the key belongs to other parameters; a math
    /// error when the OS gives no randomness.
    pub fn new(ctx: &Arc<CkksContext>, secret_key: Arc<SecretKey>) -> Result<Self, CkksError> {
        if secret_key.params().id() != ctx.params.id() {
            return Err(RlweError::ParamsMismatch { what: "secret key" }.into());
        }
        Ok(Self { ctx: ctx.clone(), secret_key, sampler: Sampler::from_os()? })
    }

    /// Encrypts at the plaintext's level and scale, returned seeded. Errors if the plaintext
    /// belongs to other parameters.
    pub fn encrypt(&mut self, pt: &Plaintext) -> Result<SeededCiphertext, CkksError> {
        check_plain(&self.ctx, pt)?;
        let mut ct = lycaon_rlwe::encrypt_zero_symmetric(&self.secret_key, pt.level(), &mut self.sampler)?;
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
