//! Exact byte sizes of key-switching keys (relinearisation and Galois keys) from the shape of a
//! parameter set alone, held in memory and serialised by lycaon-rlwe (seeded or not); no key is
//! ever made. The layout is rlwe's (`crates/lycaon-rlwe/src/serialize.rs` inside the envelope of
//! `wire.rs`); `tests/key_bytes.rs` checks every formula here against real serialised keys.
//!
//! A key at level l serves ciphertexts at levels <= l. With K special primes and
//! alpha = ceil(L / digits) ciphertext primes per digit, it has d_l = ceil((l + 1) / alpha)
//! digits, each a pair (b_j, a_j) of polynomials over the l + 1 + K limbs of Q_l P. Let
//! B_l = sum over those limbs of ceil(n bits(q_i) / 8), one polynomial bit-packed at the width of
//! each prime. Then:
//!
//! * memory (both halves expanded, 8-byte residues): d_l * 2 * (l + 1 + K) * n * 8;
//! * payload, seeded, version 1 (a full-level key, l = L - 1): digit count (u32), the 32-byte
//!   seed of every a_j, the b_j: 4 + 32 + d_l B_l;
//! * payload, seeded, version 2 (a key below the top level): level (u32), seeded flag (u8),
//!   digit count (u32), seed, the b_j: 4 + 1 + 4 + 32 + d_l B_l;
//! * payload, unseeded (always version 2): level, flag, digit count, then b_j and a_j:
//!   4 + 1 + 4 + 2 d_l B_l;
//! * a key on its own (`RelinKey`, `KeySwitchKey`): the envelope's 48-byte header, the payload
//!   and the 16-byte checksum;
//! * a `GaloisKeys` object: header, key count (u32), per key its Galois element (u64) and its
//!   payload, checksum. The set uses version 1 only when it is seeded and every key is
//!   full-level; otherwise every key, full-level ones included, is written in version 2.

use lycaon_rlwe::wire::{CHECKSUM_LEN, HEADER_LEN};
use lycaon_rlwe::KeyBytes;

use super::ChainParams;
use crate::PlanError;

/// The seed every uniform half a_j of a key is expanded from.
const SEED_BYTES: u64 = 32;
/// Digit count (u32), in every key payload.
const DIGIT_COUNT_BYTES: u64 = 4;
/// Level (u32) and seeded flag (u8), in a version-2 key payload.
const LEVEL_AND_FLAG_BYTES: u64 = 4 + 1;
/// Galois element (u64) before each key of a `GaloisKeys` object.
const GALOIS_ELEMENT_BYTES: u64 = 8;
/// Key count (u32) at the start of a `GaloisKeys` object.
const KEY_COUNT_BYTES: u64 = 4;
/// The envelope around every serialised object: header and checksum.
const ENVELOPE_BYTES: u64 = (HEADER_LEN + CHECKSUM_LEN) as u64;

/// How lycaon-rlwe lays out the payload of one key-switching key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyLayout {
    /// Version 1: digit count, seed, the b halves. Full-level keys only, seeded.
    SeededFullLevel,
    /// Version 2, seeded: level, seeded flag, digit count, seed, the b halves.
    SeededWithLevel,
    /// Version 2, unseeded: level, seeded flag, digit count, then both halves of every digit.
    Unseeded,
}

fn to_usize(bytes: u64) -> Result<usize, PlanError> {
    usize::try_from(bytes).map_err(|_| PlanError::InvalidParams { reason: format!("{bytes} bytes do not fit in this platform's address space") })
}

impl ChainParams {
    /// B_l: bytes of one polynomial over Q_level P, bit-packed at the width of each prime.
    /// Errors: [`PlanError::LevelAboveTop`].
    pub fn packed_poly_bytes(&self, level: usize) -> Result<u64, PlanError> {
        self.check_level(level)?;
        let n = self.n() as u64;
        Ok(self.q_bits.iter().take(level + 1).chain(&self.p_bits).map(|&b| (n * u64::from(b)).div_ceil(8)).sum())
    }

    /// Bytes of one key at `level` in memory, both halves expanded: d_l * 2 * limbs * n * 8.
    /// Errors: [`PlanError::LevelAboveTop`].
    pub fn key_memory_bytes(&self, level: usize) -> Result<u64, PlanError> {
        self.check_level(level)?;
        Ok(self.digits_at(level) as u64 * 2 * self.limbs_at(level) as u64 * self.n() as u64 * 8)
    }

    /// Bytes of one key's payload at `level` in `layout` (without the envelope, and without the
    /// Galois element a `GaloisKeys` object writes before it). Errors:
    /// [`PlanError::LevelAboveTop`]; [`PlanError::InvalidParams`] for the version-1 layout below
    /// the top level, which rlwe never writes.
    pub fn key_payload_bytes(&self, level: usize, layout: KeyLayout) -> Result<u64, PlanError> {
        let polys = self.digits_at(level) as u64 * self.packed_poly_bytes(level)?;
        Ok(match layout {
            KeyLayout::SeededFullLevel if level != self.max_level() => {
                return Err(PlanError::InvalidParams { reason: format!("the version-1 key layout holds full-level keys only (level {}), not level {level}", self.max_level()) })
            }
            KeyLayout::SeededFullLevel => DIGIT_COUNT_BYTES + SEED_BYTES + polys,
            KeyLayout::SeededWithLevel => LEVEL_AND_FLAG_BYTES + DIGIT_COUNT_BYTES + SEED_BYTES + polys,
            KeyLayout::Unseeded => LEVEL_AND_FLAG_BYTES + DIGIT_COUNT_BYTES + 2 * polys,
        })
    }

    /// Every size of one key at `level` on its own: what rlwe's `RelinKey::byte_sizes` (with
    /// `galois_element` `None`) or `KeySwitchKey::byte_sizes(Some(g))` report for a key generated
    /// up to that level, and what its `to_bytes` (seeded: version 1 at the top level, version 2
    /// below) and `to_bytes_unseeded` write. Errors: [`PlanError::LevelAboveTop`].
    pub fn key_bytes(&self, level: usize, galois_element: Option<u64>) -> Result<KeyBytes, PlanError> {
        let seeded_layout = if level == self.max_level() { KeyLayout::SeededFullLevel } else { KeyLayout::SeededWithLevel };
        Ok(KeyBytes {
            galois_element,
            level,
            digits: self.digits_at(level),
            limbs: self.limbs_at(level),
            seeded: to_usize(ENVELOPE_BYTES + self.key_payload_bytes(level, seeded_layout)?)?,
            unseeded: to_usize(ENVELOPE_BYTES + self.key_payload_bytes(level, KeyLayout::Unseeded)?)?,
            memory: to_usize(self.key_memory_bytes(level)?)?,
        })
    }

    /// The sizes of a relinearisation key up to `level` ([`ChainParams::key_bytes`]).
    pub fn relin_key_bytes(&self, level: usize) -> Result<KeyBytes, PlanError> {
        self.key_bytes(level, None)
    }

    /// Bytes of one serialised `GaloisKeys` object holding one key at each of `levels` (one
    /// entry per key, in any order), seeded (`to_bytes`) or not (`to_bytes_unseeded`).
    /// Errors: [`PlanError::LevelAboveTop`].
    pub fn galois_keys_bytes(&self, levels: &[usize], seeded: bool) -> Result<u64, PlanError> {
        let all_full = levels.iter().all(|&l| l == self.max_level());
        let layout = match (seeded, all_full) {
            (true, true) => KeyLayout::SeededFullLevel,
            (true, false) => KeyLayout::SeededWithLevel,
            (false, _) => KeyLayout::Unseeded,
        };
        let keys = levels.iter().map(|&l| Ok(GALOIS_ELEMENT_BYTES + self.key_payload_bytes(l, layout)?)).sum::<Result<u64, PlanError>>()?;
        Ok(ENVELOPE_BYTES + KEY_COUNT_BYTES + keys)
    }

    /// Bytes of a seeded `GaloisKeys` object holding keys at the given levels (what a client
    /// uploads).
    pub fn galois_keys_wire_bytes(&self, levels: &[usize]) -> Result<u64, PlanError> {
        self.galois_keys_bytes(levels, true)
    }

    /// Bytes the keys at the given levels take in memory.
    pub fn galois_keys_memory_bytes(&self, levels: &[usize]) -> Result<u64, PlanError> {
        levels.iter().map(|&l| self.key_memory_bytes(l)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain() -> ChainParams {
        // Three ciphertext primes in digits of two, one special prime; n = 4096.
        ChainParams { log_n: 12, q_bits: vec![30, 25, 25], p_bits: vec![28], digits: 2 }
    }

    #[test]
    fn the_formula_by_hand() {
        let c = chain();
        let n = 4096u64;
        // Level 1: limbs q_0, q_1, p: (30 + 25 + 28) n / 8 bytes; one digit.
        assert_eq!(c.packed_poly_bytes(1).unwrap(), (30 + 25 + 28) * n / 8);
        assert_eq!(c.key_payload_bytes(1, KeyLayout::SeededWithLevel).unwrap(), 9 + 32 + 83 * n / 8);
        assert_eq!(c.key_payload_bytes(1, KeyLayout::Unseeded).unwrap(), 9 + 2 * 83 * n / 8);
        // Level 2 (top): two digits over all four limbs.
        let top = 2 * (30 + 25 + 25 + 28) * n / 8;
        assert_eq!(c.key_payload_bytes(2, KeyLayout::SeededFullLevel).unwrap(), 4 + 32 + top);
        let k = c.relin_key_bytes(2).unwrap();
        assert_eq!((k.digits, k.limbs, k.seeded as u64, k.memory as u64), (2, 4, 64 + 36 + top, 2 * 2 * 4 * n * 8));
        // A set of one top-level key is version 1; adding a level-1 key makes both version 2.
        assert_eq!(c.galois_keys_bytes(&[2], true).unwrap(), 64 + 4 + 8 + 4 + 32 + top);
        assert_eq!(c.galois_keys_bytes(&[2, 1], true).unwrap(), 64 + 4 + (8 + 9 + 32 + top) + (8 + 9 + 32 + 83 * n / 8));
    }

    #[test]
    fn refusals_name_the_problem() {
        let c = chain();
        assert_eq!(c.key_memory_bytes(3).unwrap_err(), PlanError::LevelAboveTop { level: 3, top: 2 });
        assert!(c.key_payload_bytes(1, KeyLayout::SeededFullLevel).unwrap_err().to_string().contains("full-level keys only"));
        assert!(matches!(c.galois_keys_bytes(&[0, 5], true), Err(PlanError::LevelAboveTop { level: 5, .. })));
    }
}
