//! Lycaon's arithmetic core: word-size moduli, NTT-friendly primes, negacyclic NTT, RNS bases with
//! CRT and base conversion, RNS polynomials typed by representation, Galois automorphisms, lazy u128
//! accumulation and CSPRNG sampling. No cryptography lives here.

mod galois;
mod harvey;
mod lazy;
mod modulus;
mod ntt;
mod poly;
mod primes;
pub mod profile;
mod rns;
mod sampling;
mod special_fft;

pub use galois::{rotation_galois_element, row_swap_galois_element, Automorphism};
pub use harvey::HarveyNtt;
pub use lazy::{lazy_capacity, mul_accumulate_lazy, reduce_lazy};
pub use modulus::{Modulus, ShoupConstant, MAX_MODULUS_BITS};
pub use ntt::{bit_reverse, NttPlan};
pub use poly::{Coeff, Ntt, Poly, Representation};
pub use primes::{is_prime, ntt_moduli, ntt_primes};
pub use rns::{BaseConverter, RnsBasis};
pub use special_fft::SpecialFft;
pub use sampling::{expand_seed, Sampler, Seed, ERROR_BOUND, ERROR_STD_DEV};

pub use num_bigint;

/// Errors of the math layer; each names the offending value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MathError {
    #[error("invalid modulus {value}: {reason}")]
    InvalidModulus { value: u64, reason: &'static str },
    #[error("{value} has no inverse modulo {modulus}")]
    NotInvertible { value: u64, modulus: u64 },
    #[error("ring degree {n} is not supported: it must be a power of two between 16 and 65536")]
    InvalidDegree { n: usize },
    #[error("modulus {modulus} is not an NTT-friendly prime for n = {n} (needs a prime q = 1 mod 2n)")]
    NotNttFriendly { modulus: u64, n: usize },
    #[error("no {count} NTT-friendly primes of {bits} bits exist for n = {n}")]
    NoPrimes { bits: u32, n: usize, count: usize },
    #[error("an RNS basis needs at least one prime")]
    EmptyBasis,
    #[error("prime {modulus} appears twice in an RNS basis")]
    RepeatedModulus { modulus: u64 },
    #[error("expected {expected} limbs (or coefficients), found {found}")]
    LimbCount { expected: usize, found: usize },
    #[error("operands live in different RNS bases ({lhs} and {rhs} limbs)")]
    BasisMismatch { lhs: usize, rhs: usize },
    #[error("residue {value} is not below its modulus {modulus}")]
    ResidueOutOfRange { value: u64, modulus: u64 },
    #[error("Galois element {galois_element} is invalid for n = {n} (it must be odd and below 2n)")]
    InvalidGaloisElement { galois_element: u64, n: usize },
    #[error("the operating system's random number generator failed: {0}")]
    Entropy(String),
    /// A backend's device (a GPU, or its driver) failed while running a kernel: never a fault of
    /// the operands. `device` is the backend's name ("cuda:0"), `operation` what it was doing.
    #[error("{operation} failed on device {device}: {message}")]
    Device { device: String, operation: String, message: String },
}
