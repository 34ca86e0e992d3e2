//! Rotation keysets chosen by index and by level (Joo-Oh-Paek 2024, ../papers/004): a Galois key
//! per (step, level) holds only the limbs of Q_level P; a rotation whose step has no key is
//! composed from the keys that reach the ciphertext's level, with the fewest key switches.
//!
//! Rotations by `step` are the automorphisms X -> X^(h^step) for the keyset's generator h (3 by
//! default, as [`lycaon_math::rotation_galois_element`]); they form a cyclic group of order n/2,
//! so steps are taken modulo n/2 and composing steps adds them.

use std::collections::{BTreeMap, HashMap, VecDeque};

use lycaon_math::{Automorphism, Sampler};

use crate::keyswitch::automorphisms_hoisted;
use crate::{Ciphertext, GaloisKeys, KeyBytes, Parameters, RlweError, SecretKey};

/// Galois keys indexed by rotation step, each usable up to its own level.
#[derive(Clone, Debug)]
pub struct RotationKeyset {
    keys: GaloisKeys,
    n: usize,
    generator: u64,
    /// Rotation step (in 0..n/2) of each key that is a power of the generator, and its level.
    steps: BTreeMap<usize, usize>,
}

fn pow_mod(mut base: u64, mut exp: u64, modulus: u64) -> u64 {
    let mut acc = 1u64;
    base %= modulus;
    while exp > 0 {
        if exp & 1 == 1 {
            acc = ((acc as u128 * base as u128) % modulus as u128) as u64;
        }
        base = ((base as u128 * base as u128) % modulus as u128) as u64;
        exp >>= 1;
    }
    acc
}

impl RotationKeyset {
    /// A keyset over `keys` with rotations X -> X^(3^step).
    pub fn new(params: &Parameters, keys: GaloisKeys) -> Result<Self, RlweError> {
        Self::with_generator(params, keys, 3)
    }

    /// A keyset whose rotation by `step` is X -> X^(generator^step mod 2n). The generator must
    /// be odd with multiplicative order n/2 modulo 2n (3 and 5 both are). Keys for elements that
    /// are not powers of the generator (the conjugation 2n - 1, say) stay reachable through
    /// [`RotationKeyset::galois_keys`] but are never used to compose rotations.
    pub fn with_generator(params: &Parameters, keys: GaloisKeys, generator: u64) -> Result<Self, RlweError> {
        if keys.params_id() != params.id() {
            return Err(RlweError::ParamsMismatch { what: "Galois keys" });
        }
        let n = params.n();
        let two_n = 2 * n as u64;
        let half = n / 2;
        Automorphism::new(generator % two_n, n)?;
        if n < 8 || pow_mod(generator, half as u64, two_n) != 1 || pow_mod(generator, (half / 2) as u64, two_n) == 1 {
            return Err(RlweError::InvalidParameters { reason: format!("rotation generator {generator} does not have order n/2 = {half} modulo 2n") });
        }
        let mut log = HashMap::with_capacity(half);
        let mut x = 1u64;
        for k in 0..half {
            log.insert(x, k);
            x = x * generator % two_n;
        }
        let steps = keys.keys.iter().filter_map(|(g, key)| log.get(g).map(|&k| (k, key.level))).collect();
        Ok(Self { keys, n, generator: generator % two_n, steps })
    }

    /// Generates keys for (step, level) pairs with the default generator 3: each key serves
    /// ciphertexts at levels <= its level. A step listed twice gets the higher level.
    pub fn generate(sk: &SecretKey, steps_and_levels: &[(i64, usize)], sampler: &mut Sampler) -> Result<Self, RlweError> {
        let keys = GaloisKeys::for_rotations_at(sk, steps_and_levels, sampler)?;
        Self::new(sk.params(), keys)
    }

    /// The classic power-of-two keyset: steps +-2^i for every i below log2(n/2), all up to `level`.
    /// Any rotation then takes at most about log2(n/2) / 2 + 1 key switches.
    pub fn power_of_two(sk: &SecretKey, level: usize, sampler: &mut Sampler) -> Result<Self, RlweError> {
        let half = sk.params().n() as i64 / 2;
        let mut steps = Vec::new();
        let mut p = 1i64;
        while p < half {
            steps.push((p, level));
            steps.push((-p, level));
            p *= 2;
        }
        Self::generate(sk, &steps, sampler)
    }

    pub fn galois_keys(&self) -> &GaloisKeys {
        &self.keys
    }

    pub fn into_galois_keys(self) -> GaloisKeys {
        self.keys
    }

    /// The rotation generator h (rotation by `step` is X -> X^(h^step)).
    pub fn generator(&self) -> u64 {
        self.generator
    }

    /// Step in 0..n/2 equal to `step` modulo n/2.
    fn normalise(&self, step: i64) -> usize {
        step.rem_euclid((self.n / 2) as i64) as usize
    }

    /// The Galois element of a rotation by `step`.
    pub fn galois_element(&self, step: i64) -> u64 {
        pow_mod(self.generator, self.normalise(step) as u64, 2 * self.n as u64)
    }

    /// (step, level) of every rotation key, steps in 0..n/2.
    pub fn available(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.steps.iter().map(|(&s, &l)| (s, l))
    }

    /// Whether a key for exactly this step reaches `level`.
    pub fn has_direct(&self, step: i64, level: usize) -> bool {
        self.steps.get(&self.normalise(step)).is_some_and(|&l| l >= level)
    }

    /// The key steps (each in 0..n/2) whose rotations compose to `step` for a ciphertext at
    /// `level`: a shortest sequence of keys that reach `level` (breadth-first search over the
    /// cyclic group of rotations, so the count of key switches is minimal; ties go to the
    /// smallest steps first). Empty for a step = 0 mod n/2.
    ///
    /// Errors: [`RlweError::RotationImpossible`] when no combination of the keys reaching `level`
    /// gives the step.
    pub fn plan(&self, step: i64, level: usize) -> Result<Vec<usize>, RlweError> {
        let half = self.n / 2;
        let target = self.normalise(step);
        if target == 0 {
            return Ok(Vec::new());
        }
        let usable: Vec<usize> = self.steps.iter().filter(|(_, &l)| l >= level).map(|(&s, _)| s).collect();
        if usable.contains(&target) {
            return Ok(vec![target]);
        }
        // parent[x] = (previous node, key step) on a shortest path from 0.
        let mut parent: HashMap<usize, (usize, usize)> = HashMap::new();
        let mut queue = VecDeque::from([0usize]);
        parent.insert(0, (0, 0));
        while let Some(x) = queue.pop_front() {
            for &s in &usable {
                let y = (x + s) % half;
                if parent.contains_key(&y) {
                    continue;
                }
                parent.insert(y, (x, s));
                if y == target {
                    let mut path = Vec::new();
                    let mut node = y;
                    while node != 0 {
                        let (prev, s) = parent[&node];
                        path.push(s);
                        node = prev;
                    }
                    path.reverse();
                    return Ok(path);
                }
                queue.push_back(y);
            }
        }
        Err(RlweError::RotationImpossible { step, level })
    }

    /// Number of key switches a rotation by `step` at `level` takes (0 for step 0).
    pub fn cost(&self, step: i64, level: usize) -> Result<usize, RlweError> {
        Ok(self.plan(step, level)?.len())
    }

    /// Rotates by `step`, composing keys when the step has none of its own (see
    /// [`RotationKeyset::plan`]). Errors: those of [`RotationKeyset::plan`] and of
    /// [`automorphisms_hoisted`].
    pub fn rotate(&self, params: &Parameters, ct: &Ciphertext, step: i64) -> Result<Ciphertext, RlweError> {
        let mut out = self.rotate_hoisted(params, ct, &[step])?;
        out.pop().ok_or(RlweError::Malformed { what: "no result".into() })
    }

    /// Rotates one ciphertext by several steps. The first key of every step's plan shares one
    /// decomposition of c_1 (hoisting); composed steps then continue one key switch at a time.
    pub fn rotate_hoisted(&self, params: &Parameters, ct: &Ciphertext, steps: &[i64]) -> Result<Vec<Ciphertext>, RlweError> {
        let level = ct.level();
        let plans = steps.iter().map(|&s| self.plan(s, level)).collect::<Result<Vec<_>, _>>()?;
        let mut firsts: Vec<usize> = plans.iter().filter_map(|p| p.first().copied()).collect();
        firsts.sort_unstable();
        firsts.dedup();
        let elements: Vec<u64> = firsts.iter().map(|&s| self.galois_element(s as i64)).collect();
        let first_results = if elements.is_empty() { Vec::new() } else { automorphisms_hoisted(params, ct, &elements, &self.keys)? };
        let mut out = Vec::with_capacity(steps.len());
        for plan in &plans {
            let Some(first) = plan.first() else {
                out.push(ct.clone());
                continue;
            };
            let idx = firsts.binary_search(first).map_err(|_| RlweError::Malformed { what: "hoisted rotation lost".into() })?;
            let mut acc = first_results[idx].clone();
            for &s in &plan[1..] {
                let g = self.galois_element(s as i64);
                acc = automorphisms_hoisted(params, &acc, &[g], &self.keys)?.pop().ok_or(RlweError::Malformed { what: "no result".into() })?;
            }
            out.push(acc);
        }
        Ok(out)
    }

    /// The sizes of every key, in Galois-element order.
    pub fn byte_sizes(&self) -> Vec<KeyBytes> {
        self.keys.byte_sizes()
    }
}
