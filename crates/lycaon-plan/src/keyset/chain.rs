//! The key-relevant shape of a CKKS or BFV parameter set ([`ChainParams`]: ring degree, the bit
//! sizes of the ciphertext chain and of the special primes, key-switching digits) and the
//! FHE-mode presets with their bootstrapping ([`FheParams`]). Invariant: a validated chain meets
//! 128-bit security by lycaon-rlwe's table and groups its primes into digits as rlwe does.

use lycaon_math::ntt_moduli;
use lycaon_rlwe::{max_log_qp, ParametersLiteral, Security};
use serde::{Deserialize, Serialize};

use crate::hybrid::ParamChoice;
use crate::PlanError;

/// The key-relevant shape of an RNS parameter set: ring degree, the ciphertext chain (bit size of
/// q_0, q_1, ...; level l keeps q_0 .. q_l), the special primes P and the number of key-switching
/// digits. Primes are the largest NTT-friendly primes below each size, so each has exactly that
/// many bits.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ChainParams {
    pub log_n: u32,
    pub q_bits: Vec<u32>,
    pub p_bits: Vec<u32>,
    pub digits: usize,
}


impl ChainParams {
    /// Checks sizes, digits and 128-bit security by lycaon-rlwe's table ([`max_log_qp`]).
    pub fn validate(&self) -> Result<(), PlanError> {
        let bad = |reason: String| Err(PlanError::InvalidParams { reason });
        if !(10..=16).contains(&self.log_n) {
            return bad(format!("log_n = {} must be in 10..=16", self.log_n));
        }
        if self.q_bits.is_empty() || self.p_bits.is_empty() {
            return bad("rotation keys need at least one ciphertext prime and one special prime".into());
        }
        if let Some(b) = self.q_bits.iter().chain(&self.p_bits).find(|&&b| !(self.log_n + 2..=61).contains(&b)) {
            return bad(format!("prime size {b} bits is outside {}..=61 for n = 2^{}", self.log_n + 2, self.log_n));
        }
        if self.digits == 0 || self.digits > self.q_bits.len() {
            return bad(format!("digits = {} must be in 1..={} (the number of ciphertext primes)", self.digits, self.q_bits.len()));
        }
        let max = max_log_qp(self.n()).unwrap_or(0);
        if self.log_qp() > max {
            return bad(format!("log2 QP = {} exceeds {max}, the 128-bit bound of the HE standard for n = 2^{}", self.log_qp(), self.log_n));
        }
        Ok(())
    }

    pub fn n(&self) -> usize {
        1 << self.log_n
    }

    /// Slots of a rotation (CKKS slots or BFV row length): n / 2.
    pub fn slots(&self) -> usize {
        self.n() / 2
    }

    /// Top level L - 1 (level l has l + 1 ciphertext primes).
    pub fn max_level(&self) -> usize {
        self.q_bits.len() - 1
    }

    pub fn special_primes(&self) -> usize {
        self.p_bits.len()
    }

    /// Ciphertext primes per digit, as rlwe groups them: ceil(L / digits).
    pub fn digit_size(&self) -> usize {
        self.q_bits.len().div_ceil(self.digits)
    }

    /// Sizes (in primes) of the digits present at `level`; the last may be shorter.
    pub fn digit_sizes_at(&self, level: usize) -> Vec<usize> {
        let alpha = self.digit_size();
        let count = level + 1;
        (0..count.div_ceil(alpha)).map(|j| alpha.min(count - j * alpha)).collect()
    }

    pub fn digits_at(&self, level: usize) -> usize {
        (level + 1).div_ceil(self.digit_size())
    }

    /// Limbs of Q_l P.
    pub fn limbs_at(&self, level: usize) -> usize {
        level + 1 + self.special_primes()
    }

    pub fn log_q_at(&self, level: usize) -> u32 {
        self.q_bits.iter().take(level + 1).sum()
    }

    pub fn log_qp(&self) -> u32 {
        self.q_bits.iter().chain(&self.p_bits).sum()
    }

    pub(super) fn check_level(&self, level: usize) -> Result<(), PlanError> {
        if level > self.max_level() {
            return Err(PlanError::LevelAboveTop { level, top: self.max_level() });
        }
        Ok(())
    }


    /// An rlwe parameter literal (CKKS: no plaintext modulus) with these prime sizes.
    pub fn rlwe_literal(&self) -> Result<ParametersLiteral, PlanError> {
        self.validate()?;
        let sizes: Vec<u32> = self.q_bits.iter().chain(&self.p_bits).copied().collect();
        let primes: Vec<u64> =
            ntt_moduli(&sizes, self.n(), &[]).map_err(|e| PlanError::InvalidParams { reason: e.to_string() })?.iter().map(|m| m.value()).collect();
        let (q, p) = primes.split_at(self.q_bits.len());
        Ok(ParametersLiteral {
            n: self.n(),
            ciphertext_moduli: q.to_vec(),
            special_moduli: p.to_vec(),
            plaintext_modulus: None,
            key_switch_digits: self.digits,
            security: Security::Bits128,
        })
    }

    /// The key shape of a hybrid-mode (BFV) parameter choice.
    pub fn from_param_choice(choice: &ParamChoice) -> Result<Self, PlanError> {
        if !choice.n.is_power_of_two() {
            return Err(PlanError::InvalidParams { reason: format!("n = {} is not a power of two", choice.n) });
        }
        let chain = Self { log_n: choice.n.trailing_zeros(), q_bits: choice.q_bits.clone(), p_bits: choice.p_bits.clone(), digits: choice.digits };
        chain.validate()?;
        Ok(chain)
    }
}

/// Where bootstrapping puts its linear transforms in the chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BootstrapOrder {
    /// HEaAN: SlotsToCoeffs on the bottom levels (it starts at Q_min and ends at q_0), ModRaise
    /// to the top, CoeffsToSlots, EvalMod; the output is at the top computation level.
    SlotsToCoeffsFirst,
    /// Lattigo: ModRaise from level 0, CoeffsToSlots on the top levels, EvalMod, SlotsToCoeffs on
    /// the levels just above the computation levels.
    CoeffsToSlotsFirst,
}

/// Bootstrapping's use of the chain: the order and the levels each part consumes. The depth of a
/// DFT factorisation is also its number of factors (one level each).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootstrapSpec {
    pub order: BootstrapOrder,
    pub cts_depth: usize,
    pub stc_depth: usize,
    pub eval_mod_depth: usize,
}

/// A CKKS parameter set for FHE-mode planning: the chain and its bootstrapping.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FheParams {
    pub name: String,
    pub chain: ChainParams,
    pub bootstrap: BootstrapSpec,
}

impl FheParams {
    /// 004's Table 1 (HEaAN, N = 2^16): Q_0 = 2^58, Q_min = 2^184, Q_comp = 2^798,
    /// Q_max = 2^1552, PQ = 2^1612 with one special prime.
    ///
    /// Our reading (004 gives only these products): q_0 = 58 bits, three 42-bit primes up to
    /// Q_min (58 + 3 * 42 = 184; HEaAN's SlotsToCoeffs-first bootstrapping consumes them, so a
    /// ciphertext is bootstrapped at level 3), thirteen computation primes of 12 * 47 + 50 = 614
    /// bits up to Q_comp at level 16 (004: "the maximum computation level is 16"), thirteen
    /// 58-bit bootstrapping primes up to Q_max (3 for CoeffsToSlots, 10 for EvalMod), P = 60 bits.
    /// With a single 60-bit special prime each digit can hold one prime: 30 digits.
    pub fn joo2024_table1() -> Self {
        let mut q = vec![58, 42, 42, 42];
        q.extend([47; 12]);
        q.push(50);
        q.extend([58; 13]);
        Self {
            name: "004 Table 1 (HEaAN-like, N=2^16, log PQ=1612, 1 special prime)".into(),
            chain: ChainParams { log_n: 16, q_bits: q, p_bits: vec![60], digits: 30 },
            bootstrap: BootstrapSpec { order: BootstrapOrder::SlotsToCoeffsFirst, cts_depth: 3, stc_depth: 3, eval_mod_depth: 10 },
        }
    }

    /// A Lycaon/Lattigo-like set at logN = 16: q_0 = 60 bits, ten 40-bit computation primes,
    /// three 40-bit SlotsToCoeffs primes, eight 60-bit EvalMod primes, four 56-bit CoeffsToSlots
    /// primes, four 61-bit special primes (log QP = 1528 <= 1772), digits of four primes (7).
    pub fn lycaon_logn16() -> Self {
        let mut q = vec![60];
        q.extend([40; 10]);
        q.extend([40; 3]);
        q.extend([60; 8]);
        q.extend([56; 4]);
        Self {
            name: "Lycaon/Lattigo-like (N=2^16, log QP=1528, 4 special primes, 7 digits)".into(),
            chain: ChainParams { log_n: 16, q_bits: q, p_bits: vec![61; 4], digits: 7 },
            bootstrap: BootstrapSpec { order: BootstrapOrder::CoeffsToSlotsFirst, cts_depth: 4, stc_depth: 3, eval_mod_depth: 8 },
        }
    }

    pub fn by_name(name: &str) -> Result<Self, PlanError> {
        match name {
            "joo2024" | "004" | "table1" => Ok(Self::joo2024_table1()),
            "lycaon" | "lattigo" => Ok(Self::lycaon_logn16()),
            _ => Err(PlanError::Invalid(format!("unknown parameter preset {name:?}; known: joo2024 (004 Table 1), lycaon (or pass the object)"))),
        }
    }

    pub fn validate(&self) -> Result<(), PlanError> {
        self.chain.validate()?;
        let b = &self.bootstrap;
        if b.cts_depth == 0 || b.stc_depth == 0 {
            return Err(PlanError::InvalidParams { reason: "CoeffsToSlots and SlotsToCoeffs need at least one level each".into() });
        }
        let log_slots = self.chain.log_n - 1;
        if b.cts_depth > log_slots as usize || b.stc_depth > log_slots as usize {
            return Err(PlanError::InvalidParams { reason: format!("a DFT over 2^{log_slots} slots has at most {log_slots} factors") });
        }
        let boot = b.cts_depth + b.stc_depth + b.eval_mod_depth;
        if self.comp_level() <= self.min_level() || boot > self.chain.max_level() {
            return Err(PlanError::InvalidParams {
                reason: format!("bootstrapping takes {boot} of the {} levels and leaves none for computation", self.chain.max_level() + 1),
            });
        }
        Ok(())
    }

    /// Level of a bootstrapped (or fresh) ciphertext: the top computation level.
    pub fn comp_level(&self) -> usize {
        let b = &self.bootstrap;
        let top = self.chain.max_level();
        match b.order {
            BootstrapOrder::SlotsToCoeffsFirst => top.saturating_sub(b.cts_depth + b.eval_mod_depth),
            BootstrapOrder::CoeffsToSlotsFirst => top.saturating_sub(b.cts_depth + b.eval_mod_depth + b.stc_depth),
        }
    }

    /// Lowest level computation may reach: a ciphertext there must be bootstrapped.
    pub fn min_level(&self) -> usize {
        match self.bootstrap.order {
            BootstrapOrder::SlotsToCoeffsFirst => self.bootstrap.stc_depth,
            BootstrapOrder::CoeffsToSlotsFirst => 0,
        }
    }

    /// Levels of the CoeffsToSlots factors in the order they run (the top levels).
    pub fn cts_levels(&self) -> Vec<usize> {
        let top = self.chain.max_level();
        (0..self.bootstrap.cts_depth).map(|i| top - i).collect()
    }

    /// Levels of the SlotsToCoeffs factors in the order they run.
    pub fn stc_levels(&self) -> Vec<usize> {
        let d = self.bootstrap.stc_depth;
        match self.bootstrap.order {
            BootstrapOrder::SlotsToCoeffsFirst => (0..d).map(|i| d - i).collect(),
            BootstrapOrder::CoeffsToSlotsFirst => (0..d).map(|i| self.comp_level() + d - i).collect(),
        }
    }
}
