//! The BFV scheme on Lycaon's RLWE layer: exact arithmetic on integers modulo t, with batch (SIMD)
//! and coefficient encodings, hoisted rotations, HPS multiplication, modulus switching and a noise
//! budget with its analytical model ([`noise`]).
//!
//! ```
//! use std::sync::Arc;
//! use lycaon_bfv::rlwe::{GaloisKeys, Parameters, ParametersLiteral, PublicKey, RelinKey, SecretKey, Security};
//! use lycaon_bfv::{BatchEncoder, BfvContext, Decryptor, Evaluator, PublicKeyEncryptor};
//! use lycaon_math::Sampler;
//!
//! // Toy parameters, NOT secure: n = 64 keeps the example instant. Real code keeps the default
//! // `Security::Bits128` and n >= 1024 (ParametersLiteral::bfv_default(8192) is a good start).
//! let mut lit = ParametersLiteral::bfv_from_bits(64, &[50, 50], &[51], 17)?;
//! lit.security = Security::InsecureTestOnly;
//! let params = Parameters::new(lit)?;
//! let ctx = BfvContext::new(&params)?;
//! let mut rng = Sampler::from_os()?;
//! let sk = Arc::new(SecretKey::generate(&params, &mut rng)?);
//! let pk = Arc::new(PublicKey::generate(&sk, &mut rng)?);
//! let rk = RelinKey::generate(&sk, &mut rng)?;
//! let gk = GaloisKeys::for_rotations(&sk, &[1], false, &mut rng)?;
//!
//! let encoder = BatchEncoder::new(&params)?;
//! let x: Vec<u64> = (0..64).collect();
//! let ct = PublicKeyEncryptor::new(&ctx, pk)?.encrypt(&encoder.encode(&x)?)?;
//! let eval = Evaluator::new(&ctx); // server side: no secret key
//! let squared = eval.multiply_relin(&ct, &ct, &rk)?;
//! let rotated = eval.rotate_rows(&squared, 1, &gk)?;
//!
//! let slots = encoder.decode(&Decryptor::new(&ctx, sk)?.decrypt(&rotated)?)?;
//! assert_eq!(slots[0], 1); // slot 1 squared, moved to slot 0
//! assert_eq!(slots[31], 0); // row 0 wraps around: slot 0 squared
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod context;
mod encoding;
pub mod noise;
mod scheme;

pub use context::BfvContext;
pub use encoding::{BatchEncoder, CoeffEncoder, Plaintext};
pub use scheme::{Decryptor, Encryptor, Evaluator, PreparedPlaintext, PublicKeyEncryptor, SecretKeyEncryptor};

pub use lycaon_rlwe as rlwe;
use lycaon_rlwe::RlweError;

/// Errors of the BFV layer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BfvError {
    #[error(transparent)]
    Rlwe(#[from] RlweError),
    #[error("these parameters have no plaintext modulus t, so they are not BFV parameters")]
    NotBfv,
    #[error("batching needs a prime t = 1 mod 2n; t = {t} does not satisfy this for n = {n} (use the coefficient encoder or another t)")]
    NoBatching { t: u64, n: usize },
    #[error("expected at most {expected} values, got {found}")]
    WrongLength { expected: usize, found: usize },
    #[error("value {value} is not reduced modulo t = {t}")]
    NotReduced { value: u64, t: u64 },
    #[error("the ciphertext is already at the lowest level; it cannot be modulus-switched further")]
    LowestLevel,
    #[error("internal invariant broken: {0}")]
    Internal(&'static str),
}

impl From<lycaon_math::MathError> for BfvError {
    fn from(e: lycaon_math::MathError) -> Self {
        Self::Rlwe(RlweError::Math(e))
    }
}
