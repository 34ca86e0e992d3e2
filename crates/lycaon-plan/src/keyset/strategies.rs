//! Keyset strategies (power-of-two, all-required, level-aware after 004), the composition of a
//! rotation from the keys present at a level (NAF for power-of-two keys, breadth-first search
//! otherwise), and the predicted rotation work of a table under a keyset.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::{canonical_step, ChainParams, KeySwitchCostModel, Rotation, RotationTable};
use crate::PlanError;

/// How a keyset is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// +-2^i for every i below log2(slots), at the top level (SEAL, HEaAN, Lattigo defaults).
    PowerOfTwo,
    /// Every rotation the table uses, at the top level (FHE-MP-CNN).
    AllRequired,
    /// Every rotation the table uses, at the highest level it is used at (004).
    LevelAware,
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Strategy::PowerOfTwo => "power-of-two",
            Strategy::AllRequired => "all-required",
            Strategy::LevelAware => "level-aware",
        })
    }
}

/// One rotation key: an automorphism and the highest level it serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RotationKey {
    pub rotation: Rotation,
    pub level: usize,
}

/// A set of rotation keys for one parameter set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Keyset {
    pub strategy: Strategy,
    pub slots: usize,
    pub keys: Vec<RotationKey>,
}

/// The non-adjacent form of x: (position, +-1) digits, fewest non-zero digits of any signed-binary
/// representation.
pub fn naf(mut x: i64) -> Vec<(u32, i8)> {
    let mut out = Vec::new();
    let mut i = 0u32;
    while x != 0 {
        if x & 1 != 0 {
            let d: i64 = if x.rem_euclid(4) == 1 { 1 } else { -1 };
            out.push((i, d as i8));
            x -= d;
        }
        x /= 2;
        i += 1;
    }
    out
}

/// The power-of-two steps composing `step` modulo `slots` (a power of two) with the fewest terms:
/// the NAF of the residue r or of r - slots, whichever is shorter after dropping terms >= slots
/// (they are multiples of the slot count, the identity).
pub fn power_of_two_steps(step: i64, slots: usize) -> Vec<i64> {
    let m = slots as i64;
    let r = step.rem_euclid(m);
    let terms = |x: i64| -> Vec<i64> { naf(x).into_iter().filter(|(i, _)| (1i64 << i) < m).map(|(i, d)| d as i64 * (1i64 << i)).collect() };
    let (a, b) = (terms(r), terms(r - m));
    if b.len() < a.len() {
        b
    } else {
        a
    }
}

impl Keyset {
    /// +-2^i at the top level, plus conjugation when `conjugation`.
    pub fn power_of_two(slots: usize, max_level: usize, conjugation: bool) -> Self {
        let mut keys = BTreeSet::new();
        let mut i = 1usize;
        while i < slots {
            for s in [i as i64, -(i as i64)] {
                if let Ok(s) = canonical_step(s, slots) {
                    keys.insert(RotationKey { rotation: Rotation::Step(s), level: max_level });
                }
            }
            i *= 2;
        }
        if conjugation {
            keys.insert(RotationKey { rotation: Rotation::Conjugate, level: max_level });
        }
        Self { strategy: Strategy::PowerOfTwo, slots, keys: keys.into_iter().collect() }
    }

    /// Every rotation of the table at the top level.
    pub fn all_required(table: &RotationTable) -> Self {
        let keys = table.rotations().into_iter().map(|rotation| RotationKey { rotation, level: table.max_level }).collect();
        Self { strategy: Strategy::AllRequired, slots: table.slots, keys }
    }

    /// Every rotation of the table at the highest level it runs at.
    pub fn level_aware(table: &RotationTable) -> Self {
        let keys = table.highest_levels().into_iter().map(|(rotation, level)| RotationKey { rotation, level }).collect();
        Self { strategy: Strategy::LevelAware, slots: table.slots, keys }
    }

    pub fn build(strategy: Strategy, table: &RotationTable) -> Self {
        match strategy {
            Strategy::PowerOfTwo => Self::power_of_two(table.slots, table.max_level, table.uses_conjugation()),
            Strategy::AllRequired => Self::all_required(table),
            Strategy::LevelAware => Self::level_aware(table),
        }
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Bytes in memory (both halves of every digit expanded).
    pub fn memory_bytes(&self, chain: &ChainParams) -> Result<u64, PlanError> {
        self.keys.iter().map(|k| chain.key_memory_bytes(k.level)).sum()
    }

    /// Bytes of the keyset serialised as one seeded `GaloisKeys` object.
    pub fn wire_bytes(&self, chain: &ChainParams) -> Result<u64, PlanError> {
        chain.galois_keys_wire_bytes(&self.keys.iter().map(|k| k.level).collect::<Vec<_>>())
    }

    /// Keys per level.
    pub fn keys_per_level(&self) -> BTreeMap<usize, usize> {
        let mut out = BTreeMap::new();
        for k in &self.keys {
            *out.entry(k.level).or_insert(0) += 1;
        }
        out
    }

    /// The keys (hops) that realise `rotation` on a ciphertext at `level`, one key switch each.
    /// Errors when no composition of keys at `level` or above exists.
    pub fn compose(&self, rotation: Rotation, level: usize) -> Result<Vec<Rotation>, PlanError> {
        Composer::new(self).compose(rotation, level)
    }

    /// Predicted rotation work and latency of a table with this keyset.
    pub fn predict(&self, table: &RotationTable, chain: &ChainParams, cost: &KeySwitchCostModel) -> Result<LatencyPrediction, PlanError> {
        if table.slots != self.slots || chain.slots() != self.slots {
            return Err(PlanError::Invalid(format!("keyset for {} slots, table for {} slots, parameters with {}", self.slots, table.slots, chain.slots())));
        }
        let mut composer = Composer::new(self);
        let mut per_level: BTreeMap<usize, (u64, f64)> = BTreeMap::new();
        for ((rotation, level), count) in table.by_rotation_and_level() {
            chain.check_level(level)?;
            let hops = composer.compose(rotation, level)?.len() as u64;
            let e = per_level.entry(level).or_insert((0, 0.0));
            e.0 += hops * count;
            e.1 += (hops * count) as f64 * cost.key_switch_seconds(chain, level)?;
        }
        let key_switches = per_level.values().map(|v| v.0).sum();
        let seconds = per_level.values().map(|v| v.1).sum();
        Ok(LatencyPrediction {
            key_switches,
            seconds,
            per_level: per_level.into_iter().map(|(level, (key_switches, seconds))| LevelLatency { level, key_switches, seconds }).collect(),
        })
    }
}

/// Composes rotations from a keyset, caching one breadth-first search per level.
struct Composer<'a> {
    keyset: &'a Keyset,
    direct: HashMap<Rotation, usize>,
    searches: HashMap<usize, Vec<Option<(u32, usize)>>>,
}

impl<'a> Composer<'a> {
    fn new(keyset: &'a Keyset) -> Self {
        let mut direct = HashMap::new();
        for k in &keyset.keys {
            let l = direct.entry(k.rotation).or_insert(k.level);
            *l = (*l).max(k.level);
        }
        Self { keyset, direct, searches: HashMap::new() }
    }

    fn missing(&self, rotation: Rotation, level: usize, reason: String) -> PlanError {
        PlanError::MissingRotationKey { keyset: self.keyset.strategy.to_string(), rotation: rotation.to_string(), level, reason }
    }

    fn compose(&mut self, rotation: Rotation, level: usize) -> Result<Vec<Rotation>, PlanError> {
        let slots = self.keyset.slots;
        if let Rotation::Step(s) | Rotation::ConjugateStep(s) = rotation {
            canonical_step(s, slots)?;
        }
        if self.direct.get(&rotation).is_some_and(|&l| l >= level) {
            return Ok(vec![rotation]);
        }
        if self.keyset.strategy == Strategy::PowerOfTwo {
            return self.compose_power_of_two(rotation, level);
        }
        self.compose_search(rotation, level)
    }

    fn has(&self, rotation: Rotation, level: usize) -> bool {
        self.direct.get(&rotation).is_some_and(|&l| l >= level)
    }

    fn compose_power_of_two(&self, rotation: Rotation, level: usize) -> Result<Vec<Rotation>, PlanError> {
        let slots = self.keyset.slots;
        let (r, conj) = rotation.as_pair(slots);
        let mut hops = Vec::new();
        if conj {
            if !self.has(Rotation::Conjugate, level) {
                return Err(self.missing(rotation, level, "the keyset has no conjugation key at this level".into()));
            }
            hops.push(Rotation::Conjugate);
        }
        for s in power_of_two_steps(r as i64, slots) {
            let hop = Rotation::Step(canonical_step(s, slots)?);
            if !self.has(hop, level) {
                return Err(self.missing(rotation, level, format!("it needs the key of step {s}, which is absent at this level")));
            }
            hops.push(hop);
        }
        Ok(hops)
    }

    /// Fewest hops over the keys usable at `level`: breadth-first search on (step, conjugated).
    fn compose_search(&mut self, rotation: Rotation, level: usize) -> Result<Vec<Rotation>, PlanError> {
        let slots = self.keyset.slots;
        let usable: Vec<Rotation> = self.keyset.keys.iter().filter(|k| k.level >= level).map(|k| k.rotation).collect();
        if usable.is_empty() {
            let top = self.keyset.keys.iter().map(|k| k.level).max();
            return Err(self.missing(
                rotation,
                level,
                match top {
                    Some(t) => format!("every key of the keyset is below this level (the highest is at level {t})"),
                    None => "the keyset is empty".into(),
                },
            ));
        }
        let tree = self.searches.entry(level).or_insert_with(|| {
            let node = |r: usize, c: bool| r * 2 + usize::from(c);
            let mut parent: Vec<Option<(u32, usize)>> = vec![None; 2 * slots];
            parent[0] = Some((u32::MAX, 0));
            let mut queue = VecDeque::from([0usize]);
            while let Some(v) = queue.pop_front() {
                let (r, c) = (v / 2, v % 2 == 1);
                for (i, key) in usable.iter().enumerate() {
                    let (kr, kc) = key.as_pair(slots);
                    let u = node((r + kr) % slots, c ^ kc);
                    if parent[u].is_none() {
                        parent[u] = Some((i as u32, v));
                        queue.push_back(u);
                    }
                }
            }
            parent
        });
        let (r, c) = rotation.as_pair(slots);
        let mut v = r * 2 + usize::from(c);
        if tree[v].is_none() {
            return Err(self.missing(rotation, level, "no combination of the keys at or above this level gives it".into()));
        }
        let usable: Vec<Rotation> = self.keyset.keys.iter().filter(|k| k.level >= level).map(|k| k.rotation).collect();
        let mut hops = Vec::new();
        while v != 0 {
            let Some((i, prev)) = tree[v] else { break };
            hops.push(usable[i as usize]);
            v = prev;
        }
        hops.reverse();
        Ok(hops)
    }
}

/// Key switches and seconds at one level.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelLatency {
    pub level: usize,
    pub key_switches: u64,
    pub seconds: f64,
}

/// Predicted rotation work of a table under a keyset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencyPrediction {
    pub key_switches: u64,
    pub seconds: f64,
    pub per_level: Vec<LevelLatency>,
}
