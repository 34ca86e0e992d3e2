//! The Ring-LWE layer shared by BFV and CKKS: validated parameters, keys, encryption of zero,
//! hybrid key switching with hoisting, and the versioned wire format.

mod ciphertext;
mod encryption;
pub mod hoisting;
mod keys;
mod keyset;
pub mod keyswitch;
mod params;
pub mod resident;
mod serialize;
pub mod wire;

pub use ciphertext::{Ciphertext, SeededCiphertext};
pub use encryption::{encrypt_zero_public, encrypt_zero_symmetric, phase};
pub use keys::{GaloisKeys, KeyBytes, KeySwitchKey, PublicKey, RelinKey, SecretKey};
pub use keyset::RotationKeyset;
pub use params::{check_ring_degree, hex_prefix, max_log_qp, Parameters, ParametersLiteral, Security, MAX_LOG_QP_128};
pub use serialize::{get_poly, put_poly};

pub use lycaon_math::MathError;

fn key_name(galois_element: Option<u64>) -> String {
    match galois_element {
        Some(g) => format!("Galois key for element {g}"),
        None => "key-switching (relinearisation) key".into(),
    }
}
use wire::WireError;

/// Errors of the RLWE layer, each naming what is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RlweError {
    #[error(transparent)]
    Math(#[from] MathError),
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("invalid parameters: {reason}")]
    InvalidParameters { reason: String },
    #[error("parameters are below 128-bit security: n = {n} allows log2(QP) <= {max_log_qp} by the HE standard, these have {log_qp:.1} bits (use a larger n or fewer/smaller primes)")]
    Insecure { n: usize, log_qp: f64, max_log_qp: u32 },
    #[error("level {level} does not exist (the top level is {max})")]
    LevelOutOfRange { level: usize, max: usize },
    #[error("the {what} was made under different parameters")]
    ParamsMismatch { what: &'static str },
    #[error("operands are at different levels ({lhs} and {rhs}); modulus-switch the higher one down first")]
    LevelMismatch { lhs: usize, rhs: usize },
    #[error("expected a ciphertext of {expected} parts, found {found}")]
    WrongSize { expected: usize, found: usize },
    #[error("no Galois key for element {galois_element}; generate keys for this rotation")]
    MissingGaloisKey { galois_element: u64 },
    #[error("the {} was generated up to level {key_level}, but the ciphertext is at level {ciphertext_level}; generate the key up to level {ciphertext_level} or lower the ciphertext's level first", key_name(*.galois_element))]
    KeyLevelTooLow { galois_element: Option<u64>, key_level: usize, ciphertext_level: usize },
    #[error("rotation by {step} at level {level} is impossible: no composition of the available rotation keys that reach level {level} gives this step; generate a key for it (or for its parts) up to level {level}")]
    RotationImpossible { step: i64, level: usize },
    #[error("these parameters have no special primes, so they support no key switching (relinearisation or rotation)")]
    NoSpecialPrimes,
    #[error("malformed input: {what}")]
    Malformed { what: String },
}
