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

impl KeySwitchKey {
    fn write(&self, w: &mut WireWriter) {
        w.put_u32(self.digits.len() as u32);
        w.put_bytes(&self.seed);
        for [b, _] in &self.digits {
            put_poly(w, b);
        }
    }

    fn read(params: &Parameters, r: &mut WireReader) -> Result<Self, RlweError> {
        let expected = params.level(params.max_level())?.digits.len();
        let count = r.get_u32()? as usize;
        if count != expected {
            return Err(malformed(format!("key has {count} digits, these parameters use {expected}")));
        }
        let seed: Seed = r.get_array()?;
        let qp = params.qp();
        let bs = (0..count).map(|_| get_poly::<Ntt>(r, qp)).collect::<Result<Vec<_>, _>>()?;
        let mut expander = Sampler::from_seed(seed);
        let digits = bs.into_iter().map(|b| [b, expander.uniform_poly(qp)]).collect();
        Ok(Self { params_id: *params.id(), digits, seed })
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = WireWriter::new();
        self.write(&mut w);
        seal_envelope(ObjectKind::KeySwitchKey, &self.params_id, &w.into_bytes())
    }

    pub fn from_bytes(params: &Arc<Parameters>, bytes: &[u8]) -> Result<Self, RlweError> {
        let mut r = WireReader::new(open_expected(bytes, ObjectKind::KeySwitchKey, Some(params.id()))?);
        let key = Self::read(params, &mut r)?;
        r.finish()?;
        Ok(key)
    }
}

impl RelinKey {
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = WireWriter::new();
        self.0.write(&mut w);
        seal_envelope(ObjectKind::RelinKey, &self.0.params_id, &w.into_bytes())
    }

    pub fn from_bytes(params: &Arc<Parameters>, bytes: &[u8]) -> Result<Self, RlweError> {
        let mut r = WireReader::new(open_expected(bytes, ObjectKind::RelinKey, Some(params.id()))?);
        let key = KeySwitchKey::read(params, &mut r)?;
        r.finish()?;
        Ok(Self(key))
    }
}

impl GaloisKeys {
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = WireWriter::new();
        w.put_u32(self.keys.len() as u32);
        for (&g, key) in &self.keys {
            w.put_u64(g);
            key.write(&mut w);
        }
        seal_envelope(ObjectKind::GaloisKeys, &self.params_id, &w.into_bytes())
    }

    pub fn from_bytes(params: &Arc<Parameters>, bytes: &[u8]) -> Result<Self, RlweError> {
        let mut r = WireReader::new(open_expected(bytes, ObjectKind::GaloisKeys, Some(params.id()))?);
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
            if keys.insert(g, KeySwitchKey::read(params, &mut r)?).is_some() {
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
