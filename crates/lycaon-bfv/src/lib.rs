//! The BFV scheme on Lycaon's RLWE layer: exact arithmetic on integers modulo t, with batch (SIMD)
//! and coefficient encodings, hoisted rotations, HPS multiplication, modulus switching and a noise
//! budget with its analytical model ([`noise`]).

mod context;
mod encoding;
pub mod noise;
mod scheme;

pub use context::BfvContext;
pub use encoding::{BatchEncoder, CoeffEncoder, Plaintext};
pub use scheme::{Decryptor, Encryptor, Evaluator, PreparedPlaintext};

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
