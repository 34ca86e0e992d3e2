//! The CKKS scheme (Cheon-Kim-Kim-Song 2017, RNS variant of Cheon-Han-Kim-Kim-Song 2018) on
//! Lycaon's RLWE layer: approximate arithmetic on vectors of complex numbers packed through the
//! canonical embedding, with exact-enough scale tracking, rescaling, hoisted rotations, linear
//! transforms by baby-step giant-step, and Chebyshev polynomial evaluation of minimal depth.
//!
//! Invariants: ciphertexts and plaintexts are always in NTT form over Q_l; every ciphertext
//! carries its scale (f64) and slot count; a message m is carried as round(scale * m).
//!
//! Scale policy (see [`Evaluator`]): each level l has a canonical scale Delta_l, with Delta_top
//! the scale the context was made with and Delta_{l-1} = Delta_l^2 / q_l, so that fresh
//! encryptions, products of canonical ciphertexts after a rescale, and plaintext or constant
//! products (whose plaintext scale is chosen to land on the canonical scale) all agree exactly at
//! every level. [`scale_stable_literal`] picks primes so that Delta_l stays within about 2^-20 of
//! the requested scale at every level. Additions of ciphertexts at different levels bring the
//! higher one down, fixing its scale on the way at no extra level; at one level, scales must
//! agree to 2^-40 relative (or by an integer ratio), otherwise the error names both scales.
//!
//! ```
//! use std::sync::Arc;
//! use lycaon_ckks::{CkksContext, Decryptor, Encoder, PublicKeyEncryptor, Evaluator, EvaluationKeys, precision_stats};
//! use lycaon_ckks::rlwe::{Parameters, SecretKey, PublicKey, Security};
//! use lycaon_math::Sampler;
//! use num_complex::Complex64;
//!
//! // Toy parameters, NOT secure: n = 64 keeps the example instant. Real code keeps the default
//! // `Security::Bits128` and n >= 8192 (see `scale_stable_literal`).
//! let mut lit = lycaon_ckks::scale_stable_literal(64, 50, 30, 2, &[50])?;
//! lit.security = Security::InsecureTestOnly;
//! let params = Parameters::new(lit)?;
//! let ctx = CkksContext::new(&params, 2f64.powi(30))?;
//! let mut rng = Sampler::from_os()?;
//! let sk = SecretKey::generate(&params, &mut rng)?;
//! let pk = Arc::new(PublicKey::generate(&sk, &mut rng)?);
//! let keys = EvaluationKeys::generate(&sk, &[1], true, &mut rng)?;
//!
//! let encoder = Encoder::new(&ctx);
//! let x: Vec<f64> = (0..32).map(|i| i as f64 / 32.0).collect();
//! let ct = PublicKeyEncryptor::new(&ctx, pk)?.encrypt(&encoder.encode_real(&x, ctx.max_level(), ctx.scale_at(ctx.max_level())?)?)?;
//! let eval = Evaluator::new(&ctx, keys); // server side: no secret key
//! let sq = eval.rescale(&eval.mul_relin(&ct, &ct)?)?;
//! let rotated = eval.rotate(&sq, 1)?;
//!
//! let got = encoder.decode_real(&Decryptor::new(&ctx, &sk)?.decrypt(&rotated)?)?;
//! let want: Vec<f64> = (0..32).map(|i| x[(i + 1) % 32] * x[(i + 1) % 32]).collect();
//! assert!(precision_stats(&want, &got).min_bits > 10.0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod bootstrap;
mod context;
mod encoding;
mod evaluator;
mod keys;
mod linear;
pub mod ops;
mod polynomial;
mod precision;
mod resident;
mod resident_linear;
mod resident_rotation_sum;
pub mod resident_conformance;
mod rotation_sum;
mod scheme;
mod serialize;
mod sign;

pub use context::{scale_stable_literal, CkksContext};
pub use encoding::{Encoder, Plaintext};
pub use evaluator::{Evaluator, SCALE_TOLERANCE};
pub use keys::{conjugation_galois_element, rotation_galois_element, EvaluationKeys};
pub use linear::{bsgs_split, LinearTransform};
pub use polynomial::{chebyshev_basis, chebyshev_coefficients, evaluate_chebyshev, evaluate_chebyshev_to_scale, evaluate_chebyshev_with_basis, ChebyshevBasis, ChebyshevPoly};
pub use precision::{precision_stats, precision_stats_complex, PrecisionStats};
pub use resident::{ResidentCiphertext, ResidentEvaluator, ResidentPlaintext};
pub use resident_linear::ResidentDiagonals;
pub use resident_rotation_sum::{ResidentExtendedSum, ResidentGiantSums, ResidentHoisted};
pub use rotation_sum::{ExtendedSum, GiantStep, GiantSums, HoistedRotations};
pub use scheme::{Ciphertext, Decryptor, PublicKeyEncryptor, SecretKeyEncryptor, SeededCiphertext};
pub use sign::{odd_sign_minimax, CompositeSign, LEE_ALPHA13_DEGREES};

pub use lycaon_rlwe as rlwe;
pub use num_complex::Complex64;
use lycaon_rlwe::RlweError;

/// Errors of the CKKS layer, each naming what is wrong and, where there is one, the fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CkksError {
    #[error(transparent)]
    Rlwe(#[from] RlweError),
    #[error("these parameters have a plaintext modulus t, so they are BFV parameters, not CKKS")]
    NotCkks,
    #[error("slot count {slots} is invalid: it must be a power of two between 1 and n/2 = {max}")]
    InvalidSlots { slots: usize, max: usize },
    #[error("{found} values do not fit in {slots} slots")]
    TooManyValues { slots: usize, found: usize },
    #[error("value {index} is not finite ({value})")]
    NonFiniteValue { index: usize, value: f64 },
    #[error("scale {scale} is invalid: it must be finite and at least 1")]
    InvalidScale { scale: f64 },
    #[error("scale 2^{log_scale:.1} times the largest coefficient (2^{log_value:.1}) does not fit under Q_{level} = 2^{log_q:.1}; lower the scale or the values, or encode at a higher level")]
    ScaleOverflow { log_scale: f64, log_value: f64, level: usize, log_q: f64 },
    #[error("operand scales differ: 2^{:.6} and 2^{:.6} at the same level; bring one to the other's scale with Evaluator::set_scale (one level) or encode it at the right scale", lhs.log2(), rhs.log2())]
    ScaleMismatch { lhs: f64, rhs: f64 },
    #[error("{op} needs {needed} more level(s) but the ciphertext is at level {level}")]
    NotEnoughLevels { op: &'static str, needed: usize, level: usize },
    #[error("the plaintext is at level {plaintext}, below the ciphertext's level {ciphertext}; encode it at level {ciphertext} or higher")]
    PlaintextLevelTooLow { plaintext: usize, ciphertext: usize },
    #[error("no relinearisation key: build the Evaluator with EvaluationKeys that include one")]
    MissingRelinKey,
    #[error("no Galois keys at all: build the Evaluator with EvaluationKeys that include rotation keys (needed for {what})")]
    MissingGaloisKeys { what: String },
    #[error("no rotation key for {what} (Galois element {galois_element}); generate it with EvaluationKeys::generate")]
    MissingRotationKey { what: String, galois_element: u64 },
    #[error("expected a ciphertext of {expected} parts, found {found}; relinearise first")]
    WrongSize { expected: usize, found: usize },
    #[error("invalid argument: {what}")]
    InvalidArgument { what: String },
    #[error("internal invariant broken: {0}")]
    Internal(&'static str),
}

impl From<lycaon_math::MathError> for CkksError {
    fn from(e: lycaon_math::MathError) -> Self {
        Self::Rlwe(RlweError::Math(e))
    }
}

impl From<lycaon_rlwe::wire::WireError> for CkksError {
    fn from(e: lycaon_rlwe::wire::WireError) -> Self {
        Self::Rlwe(RlweError::Wire(e))
    }
}
