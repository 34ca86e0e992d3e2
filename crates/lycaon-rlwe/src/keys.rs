//! Keys: the ternary secret s, the public key (-a s + e, a), and key-switching keys with their
//! relinearisation and Galois specialisations. Server-side types never hold s.

use std::collections::BTreeMap;
use std::sync::Arc;

use lycaon_math::{rotation_galois_element, row_swap_galois_element, Automorphism, Coeff, Ntt, Poly, RnsBasis, Sampler, Seed};
use zeroize::Zeroize;

use crate::{Parameters, RlweError};
use crate::wire::ParamsId;

/// The secret key s with ternary coefficients, kept in NTT form over QP. Zeroised on drop.
pub struct SecretKey {
    pub(crate) params: Arc<Parameters>,
    pub(crate) coeffs: Vec<i64>,
    /// s in NTT form over the top-level QP basis.
    pub(crate) ntt: Poly<Ntt>,
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(<redacted>)")
    }
}

impl Drop for SecretKey {
    fn drop(&mut self) {
        self.coeffs.zeroize();
        self.ntt.data_mut().zeroize();
    }
}

impl SecretKey {
    /// Samples a fresh uniform ternary secret from the OS-seeded CSPRNG.
    pub fn generate(params: &Arc<Parameters>, sampler: &mut Sampler) -> Result<Self, RlweError> {
        let coeffs = sampler.ternary(params.n());
        Self::from_coeffs(params, coeffs)
    }

    /// Samples a ternary secret with exactly `hamming_weight` non-zero coefficients (uniform
    /// positions, uniform signs). Sparse secrets weaken RLWE: the HE standard's table does not
    /// cover them, so use one only where the modulus is far below that table's bound (the
    /// ephemeral secret of sparse-secret encapsulation in CKKS bootstrapping) or in tests.
    /// Errors: `InvalidParameters` when the weight exceeds n.
    pub fn generate_sparse(params: &Arc<Parameters>, hamming_weight: usize, sampler: &mut Sampler) -> Result<Self, RlweError> {
        let n = params.n();
        if hamming_weight > n {
            return Err(RlweError::InvalidParameters { reason: format!("Hamming weight {hamming_weight} exceeds n = {n}") });
        }
        // Partial Fisher-Yates over the positions, unbiased by rejection.
        let mut positions: Vec<usize> = (0..n).collect();
        let mut coeffs = vec![0i64; n];
        for i in 0..hamming_weight {
            let range = (n - i) as u64;
            let limit = u64::MAX - u64::MAX % range;
            let j = loop {
                let x = sampler.next_u64();
                if x < limit {
                    break i + (x % range) as usize;
                }
            };
            positions.swap(i, j);
            coeffs[positions[i]] = if sampler.next_u64() & 1 == 1 { 1 } else { -1 };
        }
        Self::from_coeffs(params, coeffs)
    }

    /// Number of non-zero coefficients of s.
    pub fn hamming_weight(&self) -> usize {
        self.coeffs.iter().filter(|&&c| c != 0).count()
    }

    pub(crate) fn from_coeffs(params: &Arc<Parameters>, coeffs: Vec<i64>) -> Result<Self, RlweError> {
        if coeffs.len() != params.n() || coeffs.iter().any(|c| !(-1..=1).contains(c)) {
            return Err(RlweError::Malformed { what: "secret key coefficients must be n values in {-1, 0, 1}".into() });
        }
        let ntt = params.backend().ntt(Poly::from_signed(params.qp(), &coeffs)?)?;
        Ok(Self { params: params.clone(), coeffs, ntt })
    }

    pub fn params(&self) -> &Arc<Parameters> {
        &self.params
    }

    /// s over the basis of the first `count` limbs of QP (count <= L), or over Q_l followed by P.
    pub(crate) fn ntt_on(&self, basis: &Arc<lycaon_math::RnsBasis>) -> Result<Poly<Ntt>, RlweError> {
        // Pick limbs by prime so any sub-basis of QP works.
        let n = self.params.n();
        let top = self.params.qp().moduli();
        let mut data = Vec::with_capacity(basis.len() * n);
        for q in basis.moduli() {
            let i = top.iter().position(|m| m == q).ok_or(RlweError::Malformed { what: "basis is not part of these parameters".into() })?;
            data.extend_from_slice(self.ntt.limb(i));
        }
        Ok(Poly::from_kernel_output(basis, data))
    }

    pub(crate) fn coeffs(&self) -> &[i64] {
        &self.coeffs
    }
}

/// Public key (b, a) = (-a s + e, a) over the top-level Q; a is expanded from a seed.
#[derive(Clone, Debug)]
pub struct PublicKey {
    pub(crate) params_id: ParamsId,
    pub(crate) b: Poly<Ntt>,
    pub(crate) a: Poly<Ntt>,
    pub(crate) seed: Seed,
}

impl PublicKey {
    pub fn generate(sk: &SecretKey, sampler: &mut Sampler) -> Result<Self, RlweError> {
        let params = &sk.params;
        let q = params.q().clone();
        let seed = sampler.seed();
        let a = lycaon_math::expand_seed(&seed, &q);
        let b = minus_as_plus_e(params, &a, &sk.ntt_on(&q)?, sampler)?;
        Ok(Self { params_id: *params.id(), b, a, seed })
    }

    pub fn params_id(&self) -> &ParamsId {
        &self.params_id
    }
}

/// -a s + e with fresh Gaussian e, in NTT form over a's basis.
pub(crate) fn minus_as_plus_e(params: &Parameters, a: &Poly<Ntt>, s: &Poly<Ntt>, sampler: &mut Sampler) -> Result<Poly<Ntt>, RlweError> {
    let e = params.backend().ntt(Poly::<Coeff>::from_signed(a.basis(), &sampler.gaussian(params.n()))?)?;
    let mut b = a.clone();
    params.backend().mul_assign(&mut b, s)?;
    b.neg_assign();
    b.add_assign(&e)?;
    Ok(b)
}

/// A key that switches a ciphertext component from secret s' to s (hybrid key switching):
/// digit j holds (b_j, a_j) = (-a_j s + e_j + P [Q/Q_j]^{-1}_{Q_j} (Q/Q_j) s', a_j) over Q_k P,
/// where k is the key's level.
///
/// A key generated up to level k (Joo-Oh-Paek, "Rotation keyset generation strategy", 004) holds
/// only the limbs of Q_k P and only the digits present at level k, so it is smaller by
/// (k + 1 + alpha) / (L + alpha) in limbs times digits(k) / digits(L - 1) in digits. The gadget
/// P [Q/Q_j]^{-1} (Q/Q_j) is P on the primes of digit j and 0 on the others at every level, so the
/// same key serves every ciphertext at a level l <= k (limb i of Q_l P is limb i of the key for
/// i <= l, the special primes sit after limb k); above k it is refused
/// ([`RlweError::KeyLevelTooLow`]). A key at the top level is the full key of earlier versions.
#[derive(Clone, Debug)]
pub struct KeySwitchKey {
    pub(crate) params_id: ParamsId,
    /// The highest ciphertext level this key serves.
    pub(crate) level: usize,
    /// Whether `level` is the top level of the parameters (a full key).
    pub(crate) full: bool,
    /// Per digit present at `level`: [b_j, a_j] in NTT form over Q_level P.
    pub(crate) digits: Vec<[Poly<Ntt>; 2]>,
    /// The seed the a_j were expanded from; `None` for a key read from an unseeded encoding.
    pub(crate) seed: Option<Seed>,
}

/// The limbs of `top` (a polynomial over the top-level QP) that lie in `basis` (a sub-basis).
pub(crate) fn restrict_to(params: &Parameters, top: &Poly<Ntt>, basis: &Arc<RnsBasis>) -> Result<Poly<Ntt>, RlweError> {
    let n = params.n();
    let moduli = params.qp().moduli();
    let mut data = Vec::with_capacity(basis.len() * n);
    for q in basis.moduli() {
        let i = moduli.iter().position(|m| m == q).ok_or(RlweError::Malformed { what: "basis is not part of these parameters".into() })?;
        data.extend_from_slice(top.limb(i));
    }
    Ok(Poly::from_kernel_output(basis, data))
}

impl KeySwitchKey {
    /// A key up to `level` from `from` (NTT form over a basis holding Q_level) to `target` (NTT
    /// form over the top-level QP), both derived from `sk`. The uniform parts a_j are expanded from
    /// one seed over Q_level P, digit after digit.
    pub(crate) fn generate_to(sk: &SecretKey, target: &Poly<Ntt>, from: &Poly<Ntt>, level: usize, sampler: &mut Sampler) -> Result<Self, RlweError> {
        let params = &sk.params;
        let ctx = params.level(level)?;
        let Some(p) = params.p() else { return Err(RlweError::NoSpecialPrimes) };
        let basis = ctx.qp.clone();
        let s = if level == params.max_level() { target.clone() } else { restrict_to(params, target, &basis)? };
        let seed = sampler.seed();
        let mut expander = Sampler::from_seed(seed);
        let n = params.n();
        let mut digits = Vec::with_capacity(ctx.digits.len());
        for range in &ctx.digits {
            let a = expander.uniform_poly(&basis);
            let mut b = minus_as_plus_e(params, &a, &s, sampler)?;
            for i in range.clone() {
                let qi = basis.moduli()[i];
                let p_mod_qi = p.moduli().iter().fold(1u64, |acc, pj| qi.mul(acc, qi.reduce(pj.value())));
                let c = lycaon_math::ShoupConstant::new(p_mod_qi, &qi);
                let src = from.data().get(i * n..(i + 1) * n).ok_or(RlweError::Malformed { what: "source secret has too few limbs".into() })?;
                for (x, &y) in b.limb_mut(i).iter_mut().zip(src) {
                    *x = qi.add(*x, qi.mul_shoup(y, c.value, c.shoup));
                }
            }
            digits.push([b, a]);
        }
        Ok(Self { params_id: *params.id(), level, full: level == params.max_level(), digits, seed: Some(seed) })
    }

    /// A key up to `level` that switches a ciphertext component from secret `from` to secret `to`
    /// (both under the same parameters): digit j encrypts P [Q/Q_j]^{-1} (Q/Q_j) `from` under
    /// `to`, so its security is that of RLWE under `to` with modulus Q_level P. Used for
    /// sparse-secret encapsulation in CKKS bootstrapping (a dense-to-sparse key at level 0 and a
    /// sparse-to-dense key at the top). Errors: [`RlweError::ParamsMismatch`],
    /// [`RlweError::LevelOutOfRange`], [`RlweError::NoSpecialPrimes`].
    pub fn generate_switch(from: &SecretKey, to: &SecretKey, level: usize, sampler: &mut Sampler) -> Result<Self, RlweError> {
        if from.params.id() != to.params.id() {
            return Err(RlweError::ParamsMismatch { what: "source secret of the key switch" });
        }
        let q = to.params.q_at(level)?.clone();
        let source = from.ntt_on(&q)?;
        Self::generate_to(to, &to.ntt, &source, level, sampler)
    }

    pub fn params_id(&self) -> &ParamsId {
        &self.params_id
    }

    pub fn num_digits(&self) -> usize {
        self.digits.len()
    }

    /// The highest ciphertext level this key serves (the top level for a full key).
    pub fn level(&self) -> usize {
        self.level
    }

    /// RNS limbs of each key polynomial: the primes of Q_level followed by the special primes.
    pub fn num_limbs(&self) -> usize {
        self.digits.first().map_or(0, |d| d[0].num_limbs())
    }

    /// Bytes the key occupies in memory: 2 polynomials per digit, 8 bytes per residue.
    pub fn memory_bytes(&self) -> usize {
        self.digits.iter().map(|[b, a]| 8 * (b.data().len() + a.data().len())).sum()
    }

    /// The exact length of this key serialised on its own ([`KeySwitchKey::to_bytes`] when
    /// `seeded`, [`KeySwitchKey::to_bytes_unseeded`] otherwise).
    pub fn serialized_len(&self, seeded: bool) -> usize {
        crate::wire::HEADER_LEN + self.payload_len(seeded, self.is_v1(seeded)) + crate::wire::CHECKSUM_LEN
    }

    /// Exact size of every way this key travels or is held.
    pub fn byte_sizes(&self, galois_element: Option<u64>) -> KeyBytes {
        KeyBytes {
            galois_element,
            level: self.level,
            digits: self.digits.len(),
            limbs: self.num_limbs(),
            seeded: self.serialized_len(true),
            unseeded: self.serialized_len(false),
            memory: self.memory_bytes(),
        }
    }
}

/// The sizes of one key in bytes: as serialised with its uniform half as a 32-byte seed (what
/// [`KeySwitchKey::to_bytes`] writes), as serialised in full, and as held in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyBytes {
    /// The Galois element for a rotation or conjugation key; `None` for relinearisation and other
    /// key-switching keys.
    pub galois_element: Option<u64>,
    /// The highest ciphertext level the key serves.
    pub level: usize,
    pub digits: usize,
    /// RNS limbs per key polynomial (Q_level P).
    pub limbs: usize,
    /// Serialised length of the key on its own, seeded.
    pub seeded: usize,
    /// Serialised length of the key on its own, with the uniform polynomials written out.
    pub unseeded: usize,
    /// Bytes in memory (both polynomials of every digit, 8 bytes per residue).
    pub memory: usize,
}

/// Relinearisation key: switches s^2 to s.
#[derive(Clone, Debug)]
pub struct RelinKey(pub(crate) KeySwitchKey);

impl RelinKey {
    /// A full-level relinearisation key (serves every level).
    pub fn generate(sk: &SecretKey, sampler: &mut Sampler) -> Result<Self, RlweError> {
        Self::generate_at(sk, sk.params.max_level(), sampler)
    }

    /// A relinearisation key for ciphertexts at levels <= `level` only: fewer limbs and digits.
    /// Errors: [`RlweError::LevelOutOfRange`], [`RlweError::NoSpecialPrimes`].
    pub fn generate_at(sk: &SecretKey, level: usize, sampler: &mut Sampler) -> Result<Self, RlweError> {
        let q = sk.params.q_at(level)?.clone();
        let mut s2 = sk.ntt_on(&q)?;
        let s = s2.clone();
        sk.params.backend().mul_assign(&mut s2, &s)?;
        Ok(Self(KeySwitchKey::generate_to(sk, &sk.ntt, &s2, level, sampler)?))
    }

    pub fn key(&self) -> &KeySwitchKey {
        &self.0
    }

    /// The highest ciphertext level this key serves.
    pub fn level(&self) -> usize {
        self.0.level
    }

    pub fn byte_sizes(&self) -> KeyBytes {
        self.0.byte_sizes(None)
    }
}

/// Galois keys: for each Galois element g, a key from s to s(X^(g^-1)). Key switching c_1 with it
/// and then applying X -> X^g gives a key switch of c_1(X^g) from s(X^g) to s, so the digits of
/// c_1 never need permuting and hoisted rotations share one decomposition untouched.
#[derive(Clone, Debug)]
pub struct GaloisKeys {
    pub(crate) params_id: ParamsId,
    pub(crate) keys: BTreeMap<u64, KeySwitchKey>,
}

impl GaloisKeys {
    /// Full-level keys for the given Galois elements (each odd and below 2n).
    pub fn generate(sk: &SecretKey, galois_elements: &[u64], sampler: &mut Sampler) -> Result<Self, RlweError> {
        let top = sk.params.max_level();
        let pairs: Vec<(u64, usize)> = galois_elements.iter().map(|&g| (g, top)).collect();
        Self::generate_at(sk, &pairs, sampler)
    }

    /// Keys for (Galois element, level) pairs: each key serves ciphertexts at levels <= its level
    /// and holds only the limbs of Q_level P. An element listed twice gets one key at the higher
    /// of its levels. Errors: [`RlweError::LevelOutOfRange`], an invalid element, or
    /// [`RlweError::NoSpecialPrimes`].
    pub fn generate_at(sk: &SecretKey, elements_and_levels: &[(u64, usize)], sampler: &mut Sampler) -> Result<Self, RlweError> {
        let mut out = Self { params_id: *sk.params.id(), keys: BTreeMap::new() };
        for (g, level) in Self::generation_order(sk, elements_and_levels)? {
            out.keys.insert(g, Self::generate_one(sk, g, level, sampler)?);
        }
        Ok(out)
    }

    /// Each element once, at the highest of its levels, in the order the elements were first
    /// listed (so seeds follow the caller's order), after checking every pair.
    pub(crate) fn generation_order(sk: &SecretKey, elements_and_levels: &[(u64, usize)]) -> Result<Vec<(u64, usize)>, RlweError> {
        let mut wanted: BTreeMap<u64, usize> = BTreeMap::new();
        for &(g, level) in elements_and_levels {
            sk.params.level(level)?;
            Automorphism::new(g, sk.params.n())?;
            let e = wanted.entry(g).or_insert(level);
            *e = (*e).max(level);
        }
        let mut order = Vec::with_capacity(wanted.len());
        for &(g, _) in elements_and_levels {
            if let Some(level) = wanted.remove(&g) {
                order.push((g, level));
            }
        }
        Ok(order)
    }

    pub(crate) fn generate_one(sk: &SecretKey, g: u64, level: usize, sampler: &mut Sampler) -> Result<KeySwitchKey, RlweError> {
        let params = &sk.params;
        let q = params.q_at(level)?.clone();
        let s = sk.ntt_on(&q)?;
        let two_n = 2 * params.n() as u64;
        let g_inv = lycaon_math::Modulus::new(two_n)?.inv(g)?;
        let inverse = Automorphism::new(g_inv, params.n())?;
        let target = params.backend().automorphism_ntt(&sk.ntt, &inverse)?;
        KeySwitchKey::generate_to(sk, &target, &s, level, sampler)
    }

    /// Full-level keys for batched row rotations by the given steps, plus the row swap when asked.
    pub fn for_rotations(sk: &SecretKey, steps: &[i64], row_swap: bool, sampler: &mut Sampler) -> Result<Self, RlweError> {
        let n = sk.params.n();
        let mut elements: Vec<u64> = steps.iter().map(|&s| rotation_galois_element(s, n)).filter(|&g| g != 1).collect();
        if row_swap {
            elements.push(row_swap_galois_element(n));
        }
        Self::generate(sk, &elements, sampler)
    }

    /// Keys for rotations by (step, level) pairs (g = 3^step mod 2n); step 0 needs no key.
    pub fn for_rotations_at(sk: &SecretKey, steps_and_levels: &[(i64, usize)], sampler: &mut Sampler) -> Result<Self, RlweError> {
        let n = sk.params.n();
        let pairs: Vec<(u64, usize)> =
            steps_and_levels.iter().map(|&(s, l)| (rotation_galois_element(s, n), l)).filter(|&(g, _)| g != 1).collect();
        Self::generate_at(sk, &pairs, sampler)
    }

    /// An empty set of keys (to be filled with [`GaloisKeys::insert`]).
    pub fn empty(params: &Parameters) -> Self {
        Self { params_id: *params.id(), keys: BTreeMap::new() }
    }

    /// Adds a key; a key already present for `galois_element` is kept if it reaches a higher
    /// level, replaced otherwise. Errors if the key was made under other parameters.
    pub fn insert(&mut self, galois_element: u64, key: KeySwitchKey) -> Result<(), RlweError> {
        if key.params_id != self.params_id {
            return Err(RlweError::ParamsMismatch { what: "Galois key" });
        }
        match self.keys.get(&galois_element) {
            Some(old) if old.level >= key.level => {}
            _ => {
                self.keys.insert(galois_element, key);
            }
        }
        Ok(())
    }

    /// Moves every key of `other` in (see [`GaloisKeys::insert`]).
    pub fn merge(&mut self, other: GaloisKeys) -> Result<(), RlweError> {
        for (g, key) in other.keys {
            self.insert(g, key)?;
        }
        Ok(())
    }

    /// Takes the key of `galois_element` out, if there is one.
    pub fn remove(&mut self, galois_element: u64) -> Option<KeySwitchKey> {
        self.keys.remove(&galois_element)
    }

    pub fn params_id(&self) -> &ParamsId {
        &self.params_id
    }

    pub fn get(&self, galois_element: u64) -> Option<&KeySwitchKey> {
        self.keys.get(&galois_element)
    }

    /// The level up to which the key of `galois_element` serves ciphertexts, if there is one.
    pub fn level_of(&self, galois_element: u64) -> Option<usize> {
        self.keys.get(&galois_element).map(|k| k.level)
    }

    pub fn galois_elements(&self) -> impl Iterator<Item = u64> + '_ {
        self.keys.keys().copied()
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The sizes of every key, in Galois-element order.
    pub fn byte_sizes(&self) -> Vec<KeyBytes> {
        self.keys.iter().map(|(&g, k)| k.byte_sizes(Some(g))).collect()
    }

    /// Bytes of all keys in memory.
    pub fn memory_bytes(&self) -> usize {
        self.keys.values().map(KeySwitchKey::memory_bytes).sum()
    }
}
