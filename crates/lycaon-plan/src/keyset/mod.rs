//! Rotation-keyset planning (004): the rotation table (rotation x level x count) of a plan and the keysets power-of-two, all-required and level-aware, with exact key bytes and predicted rotation latency.
//!
//! Joo, Oh, Paek, "Rotation Keyset Generation Strategy for Efficient Neural Networks using
//! Homomorphic Encryption" (004) observe that a CNN under CKKS rotates by many distinct steps, but
//! most of them only at low levels; a key for step s that only holds the limbs of Q_l P (and the
//! key-switching digits present at level l) serves every ciphertext at level <= l and is much
//! smaller than the full-level key. This module never holds a key: it computes which keys a plan
//! needs, how many bytes they take and how long the rotations take with them.
//!
//! What it models, and the assumptions (each is also stated where it is used):
//!
//! * Keys. A Galois key at level l has `d_l = ceil((l + 1) / alpha)` digits (alpha = primes per
//!   digit, `ceil(L / digits)` as `lycaon_rlwe::Parameters` groups them), each a pair (b, a) over
//!   the `l + 1 + K` limbs of Q_l P. Its bytes, in memory and serialised seeded or not, on its own
//!   or in a `GaloisKeys` object, follow from these numbers alone by rlwe's layout
//!   ([`key_bytes`](ChainParams::key_bytes) and the formulas of its module); a test that is allowed
//!   to make keys (`tests/key_bytes.rs`) checks them against rlwe's serialised keys byte for byte.
//! * Steps. Rotation by k slots is the Galois element 3^k mod 2n ([`lycaon_math::rotation_galois_element`]);
//!   conjugation (CKKS) or the row swap (BFV) is 2n - 1. Both groups are abelian, so a rotation
//!   is a pair (k mod n/2, conjugated?) and composing keys adds pairs. Steps are canonical in
//!   (-n/4, n/4] for n/2 slots.
//! * Composition. Power-of-two keys are +-2^i at the top level; a step is realised by the
//!   signed-binary form with the fewest terms modulo the slot count (the NAF of the step or of the
//!   step minus the slot count, terms >= the slot count dropped), one key switch per term. Any
//!   other keyset composes a missing step by breadth-first search over the keys present at or
//!   above the level; a rotation no key at that level can realise is an error.
//! * Latency. One key switch at level l costs `ntt(l) * t_ntt + ew(l) * t_ew`, from the limb NTTs
//!   and element-wise limb operations of rlwe's hybrid key switching (INTT of c_1; per digit a
//!   fast base conversion and the NTTs of the new limbs; the inner product with the key; two
//!   ModDowns; the automorphism of both outputs). `t_ntt` and `t_ew` come from a micro-benchmark
//!   of the backend, and one factor `scale` fits the sum to real rlwe rotations at a few levels
//!   ([`KeySwitchCostModel::fit`]; the measuring, which needs keys, is `examples/keyset.rs`).
//!   Rotations are priced one by one: hoisting (which shares
//!   the decomposition between rotations of one ciphertext) is not modelled, as in 004.
//! * The FHE ResNet-20 ([`resnet20`], [`fhe_rotation_table`]) uses multiplexed parallel
//!   convolution (Lee et al., ICML 2022) on one ciphertext of n/2 slots, the level plan of 002
//!   (convolutions take two levels, AESPA activations one, bootstrapping when the level runs
//!   out), and CoeffsToSlots / SlotsToCoeffs rotations of a factorised DFT; see those items.
//!
//! The modules, in the order a plan flows through them: `chain` (the parameter shape),
//! `rotation_table` (rotations x levels), `fhe_network` and `hybrid_tables` (the tables of FHE
//! and hybrid plans), `strategies` (keysets and composition), `key_bytes` and `latency_model`
//! (pricing), `reports` and `request` (the results and the JSON entry point).

mod chain;
mod fhe_network;
mod hybrid_tables;
mod key_bytes;
mod latency_model;
mod reports;
mod request;
mod rotation_table;
mod strategies;

pub use chain::{BootstrapOrder, BootstrapSpec, ChainParams, FheParams};
pub use fhe_network::{fhe_rotation_table, resnet20, sum_slots_steps, ActivationKind, FheLayer, FheNetwork, LevelPlan, MpLayout, PlannedOp};
pub use hybrid_tables::{hybrid_rotation_tables, ParamSetTable};
pub use key_bytes::KeyLayout;
pub use latency_model::{Calibration, CalibrationPoint, KeySwitchCostModel, KeySwitchCounts};
pub use reports::{
    hybrid_keyset_report, keyset_report, paper004, resnet20_keyset_report, ComparisonRow, FheKeysetReport, FheModelKeys, HybridKeysetReport, KeysetReport,
    ParamSetKeys, StrategyReport,
};
pub use request::keyset_json;
pub use rotation_table::{canonical_step, Phase, Rotation, RotationEntry, RotationTable};
pub use strategies::{naf, power_of_two_steps, Keyset, LatencyPrediction, LevelLatency, RotationKey, Strategy};
