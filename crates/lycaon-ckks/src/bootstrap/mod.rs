//! CKKS bootstrapping (Cheon-Han-Kim-Kim-Song 2018; Chen-Chillotti-Song 2019; Han-Ki 2020;
//! Bossuat-Mouchet-Troncoso-Pastoriza-Hubaux 2021): ModRaise lifts a level-0 ciphertext to the
//! top of the chain, where its phase is Delta m + q_0 I with a small integer polynomial I;
//! CoeffsToSlots moves the coefficients into slots (the inverse special FFT as a few sparse
//! diagonal factors), EvalMod removes q_0 I slot by slot (a scaled cosine with double-angle
//! steps), and SlotsToCoeffs moves the result back (the forward special FFT).
//!
//! Security and the secret. [`BootstrapParams::logn16_full_slots`] has log QP = 1664 <= 1772,
//! 128-bit secure by the HE standard for a uniform ternary secret (the only kind the standard's
//! table covers). EvalMod removes q_0 I for |I| <= K, and I grows with the Hamming weight h of
//! the secret the phase is under (std sqrt((h + 1) / 12), hard bound (h + 1) / 2):
//! - a dense ternary secret (h ~ 2n/3) needs K ~ 500 at n = 2^16 (see
//!   [`evalmod::k_for_hamming_weight`]): about 6 more double-angle levels or a much higher degree,
//!   which the 1772-bit budget with 10 residual levels cannot hold at 20-bit precision;
//! - a sparse secret of weight h = 32 gives K = 16 (the default shape). Using it as the main
//!   secret at log QP ~ 1664 is *not* covered by the standard and is weaker (hybrid and sparse
//!   attacks); Lattigo's answer is sparse-secret encapsulation (Bossuat-Troncoso-Pastoriza-
//!   Hubaux 2022): keep the dense secret s everywhere, key-switch the level-0 ciphertext to an
//!   ephemeral sparse s' under a tiny modulus q_0 p (an RLWE instance far below the table's
//!   bound), ModRaise under s', and switch back to s at the top level with a key that encrypts s'
//!   under s (as secure as s). NOT YET IMPLEMENTED here: the tests use a weight-32 secret for
//!   the whole key (insecure-test parameters for the small ones; for the logN = 16 test this
//!   means the parameter check holds but the secret is sparse). The pieces exist:
//!   `SecretKey::generate_sparse` and level-limited key-switching keys in `lycaon-rlwe`.

pub mod dft;
pub mod evalmod;
pub mod bootstrapper;

pub use bootstrapper::{spread_constant, BootstrapKeys, BootstrapParams, BootstrapRotations, Bootstrapper, EncapsulationKeys};
