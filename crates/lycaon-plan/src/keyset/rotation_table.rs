//! Automorphisms a key can switch ([`Rotation`]: a canonical step, conjugation or both) and 004's
//! rotation table ([`RotationTable`]: rotation x level x count, by layer and phase). Invariant:
//! every step in a table is canonical in (-slots/2, slots/2] and every level is at most the top.

use std::collections::{BTreeMap, BTreeSet};

use lycaon_math::{rotation_galois_element, row_swap_galois_element};
use serde::{Deserialize, Serialize};

use crate::PlanError;

/// An automorphism a key can switch: a rotation by a canonical step, conjugation (CKKS) / the row
/// swap (BFV), or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rotation {
    Step(i64),
    Conjugate,
    ConjugateStep(i64),
}

impl std::fmt::Display for Rotation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rotation::Step(s) => write!(f, "rotation by {s}"),
            Rotation::Conjugate => f.write_str("conjugation"),
            Rotation::ConjugateStep(s) => write!(f, "conjugation with rotation by {s}"),
        }
    }
}

/// The canonical representative of a step modulo `slots`, in (-slots/2, slots/2]. Errors for
/// step 0 (no key needed) and for |step| >= slots (out of range; reduce it first).
pub fn canonical_step(step: i64, slots: usize) -> Result<i64, PlanError> {
    let m = slots as i64;
    if step == 0 {
        return Err(PlanError::InvalidRotation { step, reason: "a rotation by 0 is the identity and needs no key".into() });
    }
    if step.unsigned_abs() >= slots as u64 {
        return Err(PlanError::InvalidRotation { step, reason: format!("|step| must be below the {slots} slots") });
    }
    let r = step.rem_euclid(m);
    Ok(if r > m / 2 { r - m } else { r })
}

impl Rotation {
    /// The rotation of `step` slots (canonical), checked as [`canonical_step`] does.
    pub fn step(step: i64, slots: usize) -> Result<Self, PlanError> {
        Ok(Rotation::Step(canonical_step(step, slots)?))
    }

    /// (step modulo slots, conjugated): composition adds these.
    pub(super) fn as_pair(self, slots: usize) -> (usize, bool) {
        let m = slots as i64;
        match self {
            Rotation::Step(s) => (s.rem_euclid(m) as usize, false),
            Rotation::Conjugate => (0, true),
            Rotation::ConjugateStep(s) => (s.rem_euclid(m) as usize, true),
        }
    }

    fn from_pair(r: usize, conj: bool, slots: usize) -> Option<Self> {
        let m = slots as i64;
        let s = if r as i64 > m / 2 { r as i64 - m } else { r as i64 };
        match (s, conj) {
            (0, false) => None,
            (0, true) => Some(Rotation::Conjugate),
            (s, false) => Some(Rotation::Step(s)),
            (s, true) => Some(Rotation::ConjugateStep(s)),
        }
    }

    /// The Galois element for ring degree n (rotation by k: 3^k mod 2n; conjugation: 2n - 1).
    pub fn galois_element(self, n: usize) -> u64 {
        let two_n = 2 * n as u64;
        match self {
            Rotation::Step(s) => rotation_galois_element(s, n),
            Rotation::Conjugate => row_swap_galois_element(n),
            Rotation::ConjugateStep(s) => ((rotation_galois_element(s, n) as u128 * row_swap_galois_element(n) as u128) % two_n as u128) as u64,
        }
    }

    /// The rotation of a Galois element of ring degree n (discrete logarithm base 3).
    pub fn from_galois_element(g: u64, n: usize) -> Result<Self, PlanError> {
        let two_n = 2 * n as u64;
        if g % 2 == 0 || g >= two_n || g == 1 {
            return Err(PlanError::Invalid(format!("Galois element {g} is not a non-trivial automorphism for n = {n}")));
        }
        let slots = n / 2;
        let mut power = 1u64;
        let minus = two_n - g;
        for k in 0..slots {
            if power == g {
                return Rotation::from_pair(k, false, slots).ok_or_else(|| PlanError::Invalid(format!("Galois element {g} is the identity")));
            }
            if power == minus {
                return Rotation::from_pair(k, true, slots).ok_or_else(|| PlanError::Invalid(format!("Galois element {g} is the identity")));
            }
            power = power * 3 % two_n;
        }
        Err(PlanError::Invalid(format!("Galois element {g} is not +-3^k mod {two_n}")))
    }
}

/// Whether a rotation belongs to the network or to bootstrapping (004 counts only the former).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Network,
    Bootstrapping,
}

/// One row of the rotation table: `count` rotations at `level` by one layer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RotationEntry {
    pub layer: String,
    pub phase: Phase,
    pub rotation: Rotation,
    pub level: usize,
    pub count: u64,
}

/// 004's rotation table: which rotations run at which level, how often, and where they come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RotationTable {
    /// Slots the steps are taken modulo (n / 2).
    pub slots: usize,
    /// Top level of the parameters (no entry may exceed it).
    pub max_level: usize,
    pub entries: Vec<RotationEntry>,
}

impl RotationTable {
    pub fn new(slots: usize, max_level: usize) -> Self {
        Self { slots, max_level, entries: Vec::new() }
    }

    /// Adds `count` rotations by `step` at `level`. Errors for step 0, |step| >= slots and a level
    /// above the top.
    pub fn push_step(&mut self, layer: &str, phase: Phase, step: i64, level: usize, count: u64) -> Result<(), PlanError> {
        let rotation = Rotation::step(step, self.slots)?;
        self.push(layer, phase, rotation, level, count)
    }

    /// Adds `count` applications of an automorphism at `level`.
    pub fn push(&mut self, layer: &str, phase: Phase, rotation: Rotation, level: usize, count: u64) -> Result<(), PlanError> {
        if let Rotation::Step(s) | Rotation::ConjugateStep(s) = rotation {
            if s == 0 || canonical_step(s, self.slots)? != s {
                return Err(PlanError::InvalidRotation { step: s, reason: format!("not canonical for {} slots", self.slots) });
            }
        }
        if level > self.max_level {
            return Err(PlanError::LevelAboveTop { level, top: self.max_level });
        }
        if count > 0 {
            self.entries.push(RotationEntry { layer: layer.to_string(), phase, rotation, level, count });
        }
        Ok(())
    }

    /// The table as 004 draws it: count per (rotation, level).
    pub fn by_rotation_and_level(&self) -> BTreeMap<(Rotation, usize), u64> {
        let mut out = BTreeMap::new();
        for e in &self.entries {
            *out.entry((e.rotation, e.level)).or_insert(0) += e.count;
        }
        out
    }

    /// Highest level each rotation runs at.
    pub fn highest_levels(&self) -> BTreeMap<Rotation, usize> {
        let mut out = BTreeMap::new();
        for e in &self.entries {
            let l = out.entry(e.rotation).or_insert(e.level);
            *l = (*l).max(e.level);
        }
        out
    }

    pub fn rotations(&self) -> BTreeSet<Rotation> {
        self.entries.iter().map(|e| e.rotation).collect()
    }

    pub fn total(&self) -> u64 {
        self.entries.iter().map(|e| e.count).sum()
    }

    /// Only the entries of one phase.
    pub fn phase(&self, phase: Phase) -> Self {
        Self { slots: self.slots, max_level: self.max_level, entries: self.entries.iter().filter(|e| e.phase == phase).cloned().collect() }
    }

    pub(super) fn uses_conjugation(&self) -> bool {
        self.entries.iter().any(|e| !matches!(e.rotation, Rotation::Step(_)))
    }
}
