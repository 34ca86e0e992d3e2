//! Wire encodings of every RLWE object inside the envelope of [`crate::wire`]. Uniform parts of
//! keys and fresh symmetric ciphertexts travel as 32-byte seeds; residues are bit-packed.

use std::collections::BTreeMap;
use std::sync::Arc;

use lycaon_math::{expand_seed, Ntt, Poly, RnsBasis, Sampler, Seed};

use crate::wire::{open_expected, seal_envelope, ObjectKind, WireError, WireReader, WireWriter};
use crate::{Ciphertext, GaloisKeys, KeySwitchKey, Parameters, ParametersLiteral, PublicKey, RelinKey, RlweError, SecretKey, Security, SeededCiphertext};

/// Most parts a serialised ciphertext may claim (a product of degree 15).
const MAX_PARTS: u8 = 16;

fn malformed(what: impl Into<String>) -> RlweError {
    RlweError::Wire(WireError::Malformed { what: what.into() })
}

pub fn put_poly<R: lycaon_math::Representation>(w: &mut WireWriter, p: &Poly<R>) {
    let n = p.n();
    for (i, q) in p.basis().moduli().iter().enumerate() {
        w.put_packed(&p.data()[i * n..(i + 1) * n], q.bits());
    }
}

pub fn get_poly<R: lycaon_math::Representation>(r: &mut WireReader, basis: &Arc<RnsBasis>) -> Result<Poly<R>, RlweError> {
    let n = basis.n();
    let mut data = vec![0u64; basis.len() * n];
    for (limb, q) in data.chunks_exact_mut(n).zip(basis.moduli()) {
        r.get_packed_into(limb, q.bits(), q.value())?;
    }
    Ok(Poly::from_kernel_output(basis, data))
}

fn get_level(r: &mut WireReader, params: &Parameters) -> Result<usize, RlweError> {
    let level = r.get_u32()? as usize;
    if level > params.max_level() {
        return Err(malformed(format!("level {level} exceeds the top level {} of these parameters", params.max_level())));
    }
    Ok(level)
}

impl Parameters {
    pub fn to_bytes(&self) -> Vec<u8> {
        let lit = self.literal();
        let mut w = WireWriter::new();
        w.put_u32(lit.n as u32);
        for list in [&lit.ciphertext_moduli, &lit.special_moduli] {
            w.put_u32(list.len() as u32);
            list.iter().for_each(|&q| w.put_u64(q));
        }
        w.put_u64(lit.plaintext_modulus.unwrap_or(0));
        w.put_u32(lit.key_switch_digits as u32);
        w.put_u8(matches!(lit.security, Security::Bits128) as u8);
        seal_envelope(ObjectKind::Parameters, self.id(), &w.into_bytes())
    }

    /// Parses and re-validates a parameter set (security included).
    pub fn from_bytes(bytes: &[u8]) -> Result<Arc<Self>, RlweError> {
        let env = crate::wire::open_envelope(bytes)?;
        if env.kind != ObjectKind::Parameters {
            return Err(WireError::WrongKind { expected: ObjectKind::Parameters, found: env.kind }.into());
        }
        let mut r = WireReader::new(env.payload);
        let n = r.get_u32()? as usize;
        let mut lists = [Vec::new(), Vec::new()];
        for list in lists.iter_mut() {
            let count = r.get_u32()? as usize;
            if count > 64 {
                return Err(malformed(format!("{count} primes is more than any supported parameter set")));
            }
            for _ in 0..count {
                list.push(r.get_u64()?);
            }
        }
        let t = r.get_u64()?;
        let digits = r.get_u32()? as usize;
        let security = match r.get_u8()? {
            1 => Security::Bits128,
            0 => Security::InsecureTestOnly,
            other => return Err(malformed(format!("unknown security level {other}"))),
        };
        r.finish()?;
        let [ciphertext_moduli, special_moduli] = lists;
        let lit = ParametersLiteral { n, ciphertext_moduli, special_moduli, plaintext_modulus: (t != 0).then_some(t), key_switch_digits: digits, security };
        let params = Parameters::new(lit)?;
        if params.id() != &env.params_id {
            return Err(malformed("parameter id does not match the parameters"));
        }
        Ok(params)
    }
}

impl SecretKey {
    /// Serialises the secret key. It must only ever be stored by its owner, never sent.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = WireWriter::new();
        let shifted: Vec<u64> = self.coeffs().iter().map(|&c| (c + 1) as u64).collect();
        w.put_packed(&shifted, 2);
        seal_envelope(ObjectKind::SecretKey, self.params.id(), &w.into_bytes())
    }

    pub fn from_bytes(params: &Arc<Parameters>, bytes: &[u8]) -> Result<Self, RlweError> {
        let mut r = WireReader::new(open_expected(bytes, ObjectKind::SecretKey, Some(params.id()))?);
        let coeffs = r.get_packed(params.n(), 2, 3)?.into_iter().map(|c| c as i64 - 1).collect();
        r.finish()?;
        SecretKey::from_coeffs(params, coeffs)
    }
}

impl PublicKey {
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = WireWriter::new();
        w.put_bytes(&self.seed);
        put_poly(&mut w, &self.b);
        seal_envelope(ObjectKind::PublicKey, &self.params_id, &w.into_bytes())
    }

    pub fn from_bytes(params: &Arc<Parameters>, bytes: &[u8]) -> Result<Self, RlweError> {
        let mut r = WireReader::new(open_expected(bytes, ObjectKind::PublicKey, Some(params.id()))?);
        let seed: Seed = r.get_array()?;
        let b = get_poly(&mut r, params.q())?;
        r.finish()?;
        Ok(Self { params_id: *params.id(), b, a: expand_seed(&seed, params.q()), seed })
    }
}

/// Opens an envelope holding either version of a key object and checks its parameter id;
/// returns the payload and whether it is version 2.
fn open_key<'a>(bytes: &'a [u8], v1: ObjectKind, v2: ObjectKind, params: &Parameters) -> Result<(&'a [u8], bool), RlweError> {
    let env = crate::wire::open_envelope(bytes)?;
    let is_v2 = if env.kind == v1 {
        false
    } else if env.kind == v2 {
        true
    } else {
        return Err(WireError::WrongKind { expected: v1, found: env.kind }.into());
    };
    // Same check (and message) as open_expected.
    open_expected(bytes, env.kind, Some(params.id()))?;
    Ok((env.payload, is_v2))
}

/// Bytes of one polynomial over `basis` as [`put_poly`] writes it.
fn packed_poly_len(basis: &RnsBasis) -> usize {
    basis.moduli().iter().map(|q| (basis.n() * q.bits() as usize).div_ceil(8)).sum()
}

impl KeySwitchKey {
    /// Whether this key is written in the version-1 layout (full level, seeded).
    pub(crate) fn is_v1(&self, seeded: bool) -> bool {
        seeded && self.seed.is_some() && self.full
    }

    /// Payload length in the chosen layout.
    pub(crate) fn payload_len(&self, seeded: bool, v1: bool) -> usize {
        let Some(first) = self.digits.first() else { return 0 };
        let poly = packed_poly_len(first[0].basis());
        let seeded = seeded && self.seed.is_some();
        let d = self.digits.len();
        if v1 {
            4 + 32 + d * poly
        } else if seeded {
            4 + 1 + 4 + 32 + d * poly
        } else {
            4 + 1 + 4 + 2 * d * poly
        }
    }

    /// Version 1: digit count, seed, b_j. Only for seeded full-level keys.
    fn write_v1(&self, w: &mut WireWriter, seed: &Seed) {
        w.put_u32(self.digits.len() as u32);
        w.put_bytes(seed);
        for [b, _] in &self.digits {
            put_poly(w, b);
        }
    }

    /// Version 2: level, seeded flag, digit count, then the seed and b_j, or b_j and a_j.
    fn write_v2(&self, w: &mut WireWriter, seeded: bool) {
        w.put_u32(self.level as u32);
        let seed = self.seed.filter(|_| seeded);
        w.put_u8(seed.is_some() as u8);
        w.put_u32(self.digits.len() as u32);
        match seed {
            Some(seed) => {
                w.put_bytes(&seed);
                for [b, _] in &self.digits {
                    put_poly(w, b);
                }
            }
            None => {
                for [b, a] in &self.digits {
                    put_poly(w, b);
                    put_poly(w, a);
                }
            }
        }
    }

    /// Writes the payload; returns whether it used version 2.
    fn write(&self, w: &mut WireWriter, seeded: bool) -> bool {
        match self.seed {
            Some(seed) if self.is_v1(seeded) => {
                self.write_v1(w, &seed);
                false
            }
            _ => {
                self.write_v2(w, seeded);
                true
            }
        }
    }

    fn read(params: &Parameters, r: &mut WireReader, v2: bool) -> Result<Self, RlweError> {
        let (level, seeded) = if v2 {
            let level = get_level(r, params)?;
            let seeded = match r.get_u8()? {
                0 => false,
                1 => true,
                other => return Err(malformed(format!("seeded flag {other} is neither 0 nor 1"))),
            };
            (level, seeded)
        } else {
            (params.max_level(), true)
        };
        let ctx = params.level(level)?;
        if params.p().is_none() {
            return Err(RlweError::NoSpecialPrimes);
        }
        let expected = ctx.digits.len();
        let count = r.get_u32()? as usize;
        if count != expected {
            return Err(malformed(format!("key up to level {level} has {count} digits, these parameters use {expected}")));
        }
        let basis = ctx.qp.clone();
        let (digits, seed) = if seeded {
            let seed: Seed = r.get_array()?;
            let bs = (0..count).map(|_| get_poly::<Ntt>(r, &basis)).collect::<Result<Vec<_>, _>>()?;
            let mut expander = Sampler::from_seed(seed);
            (bs.into_iter().map(|b| [b, expander.uniform_poly(&basis)]).collect(), Some(seed))
        } else {
            let digits = (0..count)
                .map(|_| Ok([get_poly::<Ntt>(r, &basis)?, get_poly::<Ntt>(r, &basis)?]))
                .collect::<Result<Vec<_>, RlweError>>()?;
            (digits, None)
        };
        Ok(Self { params_id: *params.id(), level, full: level == params.max_level(), digits, seed })
    }

    /// Seeded encoding: the uniform halves travel as one 32-byte seed. A full-level key is written
    /// in the version-1 layout (kind [`ObjectKind::KeySwitchKey`]), a level-limited one (or one
    /// read without a seed) in version 2 ([`ObjectKind::KeySwitchKeyV2`]).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.to_bytes_with(true)
    }

    /// Version-2 encoding with every uniform polynomial written out (twice the bytes).
    pub fn to_bytes_unseeded(&self) -> Vec<u8> {
        self.to_bytes_with(false)
    }

    fn to_bytes_with(&self, seeded: bool) -> Vec<u8> {
        let mut w = WireWriter::new();
        let kind = if self.write(&mut w, seeded) { ObjectKind::KeySwitchKeyV2 } else { ObjectKind::KeySwitchKey };
        seal_envelope(kind, &self.params_id, &w.into_bytes())
    }

    /// Reads either version.
    pub fn from_bytes(params: &Arc<Parameters>, bytes: &[u8]) -> Result<Self, RlweError> {
        let (payload, v2) = open_key(bytes, ObjectKind::KeySwitchKey, ObjectKind::KeySwitchKeyV2, params)?;
        let mut r = WireReader::new(payload);
        let key = Self::read(params, &mut r, v2)?;
        r.finish()?;
        Ok(key)
    }
}

impl RelinKey {
    /// Seeded encoding (version 1 for a full-level key, version 2 otherwise).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.to_bytes_with(true)
    }

    /// Version-2 encoding with the uniform polynomials written out.
    pub fn to_bytes_unseeded(&self) -> Vec<u8> {
        self.to_bytes_with(false)
    }

    fn to_bytes_with(&self, seeded: bool) -> Vec<u8> {
        let mut w = WireWriter::new();
        let kind = if self.0.write(&mut w, seeded) { ObjectKind::RelinKeyV2 } else { ObjectKind::RelinKey };
        seal_envelope(kind, &self.0.params_id, &w.into_bytes())
    }

    /// The exact length of [`RelinKey::to_bytes`] (seeded) or [`RelinKey::to_bytes_unseeded`].
    pub fn serialized_len(&self, seeded: bool) -> usize {
        self.0.serialized_len(seeded)
    }

    pub fn from_bytes(params: &Arc<Parameters>, bytes: &[u8]) -> Result<Self, RlweError> {
        let (payload, v2) = open_key(bytes, ObjectKind::RelinKey, ObjectKind::RelinKeyV2, params)?;
        let mut r = WireReader::new(payload);
        let key = KeySwitchKey::read(params, &mut r, v2)?;
        r.finish()?;
        Ok(Self(key))
    }
}

impl GaloisKeys {
    /// Whether the whole set is written in the version-1 layout.
    fn set_is_v1(&self, seeded: bool) -> bool {
        self.keys.values().all(|k| k.is_v1(seeded))
    }

    /// Seeded encoding: version 1 when every key is full-level, version 2 (each key with its
    /// level) otherwise.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.to_bytes_with(true)
    }

    /// Version-2 encoding with the uniform polynomials written out.
    pub fn to_bytes_unseeded(&self) -> Vec<u8> {
        self.to_bytes_with(false)
    }

    fn to_bytes_with(&self, seeded: bool) -> Vec<u8> {
        let v1 = self.set_is_v1(seeded);
        let mut w = WireWriter::new();
        w.put_u32(self.keys.len() as u32);
        for (&g, key) in &self.keys {
            w.put_u64(g);
            match key.seed {
                Some(seed) if v1 => key.write_v1(&mut w, &seed),
                _ => key.write_v2(&mut w, seeded),
            }
        }
        let kind = if v1 { ObjectKind::GaloisKeys } else { ObjectKind::GaloisKeysV2 };
        seal_envelope(kind, &self.params_id, &w.into_bytes())
    }

    /// The keys of [`GaloisKeys::generate_at`] (the same keys for the same sampler), appended to
    /// `out` as one seeded envelope while they are made: each key is written and dropped before
    /// the next, so the memory is that of the bytes and one key (gigabytes of keys at logN 16).
    /// Keys are written in the order made; [`GaloisKeys::from_bytes`] reads any order.
    pub fn generate_serialized_into(sk: &SecretKey, elements_and_levels: &[(u64, usize)], sampler: &mut Sampler, out: &mut Vec<u8>) -> Result<(), RlweError> {
        let order = Self::generation_order(sk, elements_and_levels)?;
        let v1 = order.iter().all(|&(_, level)| level == sk.params.max_level());
        let start = out.len();
        out.resize(start + crate::wire::HEADER_LEN, 0);
        let mut w = WireWriter::appending_to(std::mem::take(out));
        w.put_u32(order.len() as u32);
        for (g, level) in order {
            let key = Self::generate_one(sk, g, level, sampler)?;
            w.put_u64(g);
            match key.seed {
                Some(seed) if v1 => key.write_v1(&mut w, &seed),
                _ => key.write_v2(&mut w, true),
            }
        }
        *out = w.into_bytes();
        let kind = if v1 { ObjectKind::GaloisKeys } else { ObjectKind::GaloisKeysV2 };
        crate::wire::seal_reserved_at(kind, sk.params.id(), out, start);
        Ok(())
    }

    /// The exact length of [`GaloisKeys::to_bytes`] (seeded) or [`GaloisKeys::to_bytes_unseeded`].
    pub fn serialized_len(&self, seeded: bool) -> usize {
        let v1 = self.set_is_v1(seeded);
        let body: usize = self.keys.values().map(|k| 8 + k.payload_len(seeded, v1)).sum();
        crate::wire::HEADER_LEN + 4 + body + crate::wire::CHECKSUM_LEN
    }

    pub fn from_bytes(params: &Arc<Parameters>, bytes: &[u8]) -> Result<Self, RlweError> {
        let (payload, v2) = open_key(bytes, ObjectKind::GaloisKeys, ObjectKind::GaloisKeysV2, params)?;
        let mut r = WireReader::new(payload);
        let count = r.get_u32()? as usize;
        if count > params.n() {
            return Err(malformed(format!("{count} Galois keys is more than the {} distinct automorphisms", params.n())));
        }
        let mut keys = BTreeMap::new();
        for _ in 0..count {
            let g = r.get_u64()?;
            if g % 2 == 0 || g >= 2 * params.n() as u64 || g == 1 {
                return Err(malformed(format!("Galois element {g} is invalid for n = {}", params.n())));
            }
            if keys.insert(g, KeySwitchKey::read(params, &mut r, v2)?).is_some() {
                return Err(malformed(format!("Galois element {g} appears twice")));
            }
        }
        r.finish()?;
        Ok(Self { params_id: *params.id(), keys })
    }
}

impl Ciphertext {
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = WireWriter::new();
        w.put_u8(self.parts.len() as u8);
        w.put_u32(self.level() as u32);
        self.parts.iter().for_each(|p| put_poly(&mut w, p));
        seal_envelope(ObjectKind::Ciphertext, &self.params_id, &w.into_bytes())
    }

    pub fn from_bytes(params: &Arc<Parameters>, bytes: &[u8]) -> Result<Self, RlweError> {
        let mut r = WireReader::new(open_expected(bytes, ObjectKind::Ciphertext, Some(params.id()))?);
        let count = r.get_u8()?;
        if !(2..=MAX_PARTS).contains(&count) {
            return Err(malformed(format!("a ciphertext has 2..={MAX_PARTS} parts, this one claims {count}")));
        }
        let level = get_level(&mut r, params)?;
        let q = params.q_at(level)?;
        let parts = (0..count).map(|_| get_poly(&mut r, q)).collect::<Result<Vec<_>, _>>()?;
        r.finish()?;
        Ok(Self { params_id: *params.id(), parts })
    }
}

impl SeededCiphertext {
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = WireWriter::new();
        w.put_u32(self.level() as u32);
        w.put_bytes(&self.seed);
        put_poly(&mut w, &self.c0);
        seal_envelope(ObjectKind::SeededCiphertext, &self.params_id, &w.into_bytes())
    }

    pub fn from_bytes(params: &Arc<Parameters>, bytes: &[u8]) -> Result<Self, RlweError> {
        let mut r = WireReader::new(open_expected(bytes, ObjectKind::SeededCiphertext, Some(params.id()))?);
        let level = get_level(&mut r, params)?;
        let seed: Seed = r.get_array()?;
        let c0 = get_poly(&mut r, params.q_at(level)?)?;
        r.finish()?;
        Ok(Self { params_id: *params.id(), c0, seed })
    }
}
