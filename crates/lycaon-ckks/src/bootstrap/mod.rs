//! CKKS bootstrapping (Cheon-Han-Kim-Kim-Song 2018; Chen-Chillotti-Song 2019; Han-Ki 2020;
//! Bossuat-Mouchet-Troncoso-Pastoriza-Hubaux 2021): ModRaise lifts a level-0 ciphertext to the
//! top of the chain, where its phase is Delta m + q_0 I with a small integer polynomial I;
//! CoeffsToSlots moves the coefficients into slots (the inverse special FFT as a few sparse
//! diagonal factors), EvalMod removes q_0 I slot by slot (a scaled cosine with double-angle
//! steps), and SlotsToCoeffs moves the result back (the forward special FFT).
//!
//! Security and the secret: sparse-secret encapsulation (Bossuat-Troncoso-Pastoriza-Hubaux,
//! "Bootstrapping for approximate homomorphic encryption with negligible failure-probability by
//! using sparse-secret encapsulation", ACNS 2022; Lattigo's EvkDenseToSparse/EvkSparseToDense).
//! - The scheme's secret s is a dense uniform ternary polynomial (`SecretKey::generate`), and
//!   every public key, relinearisation and rotation key is RLWE under s. With
//!   [`BootstrapParams::logn16_full_slots`] (log QP = 1725 <= 1772 at n = 2^16) that is 128-bit
//!   secure by the HomomorphicEncryption.org standard (Albrecht et al. 2018), whose tables cover
//!   uniform, error-distributed and uniform ternary secrets only.
//! - EvalMod removes q_0 I for |I| <= K, and I grows with the Hamming weight h of the secret the
//!   level-0 phase is under: |I| <= (h + 1) / 2 always (a sum of h + 1 centred residues), with
//!   standard deviation sqrt((h + 1) / 12). Under the dense s (h ~ 2n/3) K would be in the
//!   hundreds ([`evalmod::k_for_hamming_weight`]), which 10 residual levels, 20 bits and the
//!   1772-bit budget cannot hold. So ModRaise is encapsulated: the level-0 ciphertext is
//!   key-switched from s to an ephemeral sparse secret s' of weight h = 32 (one digit, Q_0 P),
//!   raised under s', and switched back to s at the top level right away. Under s' the bound
//!   |I| <= 16 holds with certainty, so K = 16 (interval [-17, 17]) has no failure probability.
//! - s' appears only in the dense-to-sparse key, an RLWE instance under s' with the small
//!   modulus q_0 P (2^426 here, against the 2^1772 the standard allows a dense ternary secret at
//!   n = 2^16); the sparse-to-dense key encrypts s' under s and is as secure as every other key.
//!   The standard's caveat is exactly that sparse secrets are outside its tables (hybrid and
//!   sparse-secret attacks gain on them), so the claim for this key rests on the encapsulation
//!   paper's lattice-estimator analysis, which puts h = 32 at n = 2^16 and a modulus of a few
//!   hundred bits above 128 bits; the estimator was not rerun here. s' is sampled inside
//!   [`Bootstrapper::generate_keys`] and zeroised when it returns.
//!
//! Measured (logN = 16, 2^15 slots, dense secret, two shared cores): see the `bootstrap`
//! integration test `logn16_full_slot_bootstrap` and the commit that records its figures.

pub mod dft;
pub mod evalmod;
pub(crate) mod hoisted;
pub mod bootstrapper;

pub use bootstrapper::{spread_constant, BootstrapKeys, DiagonalCache, BootstrapParams, BootstrapRotations, Bootstrapper, EncapsulationKeys};
