//! Wire encodings of CKKS objects inside Lycaon's versioned envelope: the scale (f64) and the
//! log2 of the slot count, then the RLWE object's own envelope (ciphertexts, seeded ones for the
//! upstream direction) or the bit-packed residues (plaintexts); bootstrapping keys as the RLWE
//! envelopes of each key.

use std::sync::Arc;

use lycaon_rlwe::wire::{open_expected, reserve_header, seal_envelope, seal_reserved, ObjectKind, WireReader, WireWriter, MAX_PAYLOAD};
use lycaon_rlwe::{GaloisKeys, KeySwitchKey, Parameters, RelinKey, RlweError};

use crate::bootstrap::{BootstrapKeys, EncapsulationKeys};
use crate::encoding::{check_scale, check_slots};
use crate::{Ciphertext, CkksContext, CkksError, EvaluationKeys, Plaintext, SeededCiphertext};

fn malformed(what: impl Into<String>) -> CkksError {
    CkksError::Rlwe(RlweError::Wire(lycaon_rlwe::wire::WireError::Malformed { what: what.into() }))
}

fn read_meta(ctx: &CkksContext, r: &mut WireReader) -> Result<(f64, u32), CkksError> {
    let scale = r.get_f64()?;
    check_scale(scale).map_err(|_| malformed(format!("scale {scale} is not a finite number >= 1")))?;
    let log_slots = r.get_u8()? as u32;
    if log_slots >= usize::BITS || check_slots(ctx, 1usize << log_slots).is_err() {
        return Err(malformed(format!("2^{log_slots} slots exceed n/2 = {}", ctx.max_slots())));
    }
    Ok((scale, log_slots))
}

impl Ciphertext {
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = WireWriter::new();
        w.put_f64(self.scale);
        w.put_u8(self.log_slots as u8);
        w.put_len_prefixed(&self.inner.to_bytes());
        seal_envelope(ObjectKind::CkksCiphertext, self.inner.params_id(), &w.into_bytes())
    }

    /// Parses and validates a ciphertext made under these parameters.
    pub fn from_bytes(ctx: &CkksContext, bytes: &[u8]) -> Result<Self, CkksError> {
        let mut r = WireReader::new(open_expected(bytes, ObjectKind::CkksCiphertext, Some(ctx.params.id()))?);
        let (scale, log_slots) = read_meta(ctx, &mut r)?;
        let inner = lycaon_rlwe::Ciphertext::from_bytes(&ctx.params, r.get_len_prefixed(MAX_PAYLOAD)?)?;
        r.finish()?;
        Ok(Self { inner, scale, log_slots })
    }
}

impl SeededCiphertext {
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = WireWriter::new();
        w.put_f64(self.scale);
        w.put_u8(self.log_slots as u8);
        w.put_len_prefixed(&self.inner.to_bytes());
        seal_envelope(ObjectKind::CkksSeededCiphertext, self.inner.params_id(), &w.into_bytes())
    }

    pub fn from_bytes(ctx: &CkksContext, bytes: &[u8]) -> Result<Self, CkksError> {
        let mut r = WireReader::new(open_expected(bytes, ObjectKind::CkksSeededCiphertext, Some(ctx.params.id()))?);
        let (scale, log_slots) = read_meta(ctx, &mut r)?;
        let inner = lycaon_rlwe::SeededCiphertext::from_bytes(&ctx.params, r.get_len_prefixed(MAX_PAYLOAD)?)?;
        r.finish()?;
        Ok(Self { inner, scale, log_slots })
    }
}

impl Plaintext {
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = WireWriter::new();
        w.put_f64(self.scale);
        w.put_u8(self.log_slots as u8);
        w.put_u32(self.level() as u32);
        lycaon_rlwe::put_poly(&mut w, &self.poly);
        seal_envelope(ObjectKind::CkksPlaintext, &self.params_id, &w.into_bytes())
    }

    pub fn from_bytes(ctx: &CkksContext, bytes: &[u8]) -> Result<Self, CkksError> {
        let mut r = WireReader::new(open_expected(bytes, ObjectKind::CkksPlaintext, Some(ctx.params.id()))?);
        let (scale, log_slots) = read_meta(ctx, &mut r)?;
        let level = r.get_u32()? as usize;
        if level > ctx.max_level() {
            return Err(malformed(format!("level {level} exceeds the top level {}", ctx.max_level())));
        }
        let poly = lycaon_rlwe::get_poly(&mut r, ctx.params.q_at(level)?)?;
        r.finish()?;
        Ok(Self { params_id: *ctx.params.id(), poly, scale, log_slots })
    }
}

/// Flags of a serialised [`BootstrapKeys`]: which keys follow, in this order (Galois first:
/// the order [`Bootstrapper::generate_keys`] makes them in).
const HAS_GALOIS: u8 = 1;
const HAS_RELIN: u8 = 2;
const HAS_ENCAPSULATION: u8 = 4;

/// Appends one length-prefixed part that `write` appends to the buffer (in place, no copy).
pub(crate) fn put_part<E>(buf: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>) -> Result<(), E>) -> Result<(), E> {
    let at = buf.len();
    buf.extend_from_slice(&[0; 8]);
    write(buf)?;
    let len = (buf.len() - at - 8) as u64;
    buf[at..at + 8].copy_from_slice(&len.to_le_bytes());
    Ok(())
}

/// Appends `bytes` as one length-prefixed part.
pub(crate) fn put_part_bytes(buf: &mut Vec<u8>, bytes: &[u8]) {
    buf.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    buf.extend_from_slice(bytes);
}

/// The flags byte of a [`BootstrapKeys`] envelope.
pub(crate) fn bootstrap_key_flags(galois: bool, relin: bool, encapsulation: bool) -> u8 {
    (galois as u8 * HAS_GALOIS) | (relin as u8 * HAS_RELIN) | (encapsulation as u8 * HAS_ENCAPSULATION)
}

impl BootstrapKeys {
    /// One envelope of kind [`ObjectKind::CkksBootstrapKeys`]: a flags byte, then each key
    /// present (Galois, relinearisation, the two encapsulation keys) in its own seeded envelope,
    /// length-prefixed. Written key by key into one buffer (gigabytes at logN = 16: no copy of
    /// the whole). Errors when a key belongs to other parameters than `params`.
    pub fn to_bytes(&self, params: &Parameters) -> Result<Vec<u8>, CkksError> {
        let id = params.id();
        let relin = self.evaluation.relin.as_deref();
        let galois = self.evaluation.galois.as_deref();
        let enc = self.encapsulation.as_ref();
        let ids = relin.map(|k| k.key().params_id()).into_iter().chain(galois.map(|g| g.params_id()));
        let ids = ids.chain(enc.into_iter().flat_map(|e| [e.dense_to_sparse.params_id(), e.sparse_to_dense.params_id()]));
        if ids.into_iter().any(|k| k != id) {
            return Err(CkksError::InvalidArgument { what: "these bootstrapping keys were made under other parameters".into() });
        }
        let mut buf = reserve_header(1 + 4 * 8 + self.serialized_len(true));
        buf.push(bootstrap_key_flags(galois.is_some(), relin.is_some(), enc.is_some()));
        if let Some(g) = galois {
            put_part_bytes(&mut buf, &g.to_bytes());
        }
        if let Some(k) = relin {
            put_part_bytes(&mut buf, &k.to_bytes());
        }
        if let Some(e) = enc {
            put_part_bytes(&mut buf, &e.dense_to_sparse.to_bytes());
            put_part_bytes(&mut buf, &e.sparse_to_dense.to_bytes());
        }
        Ok(seal_reserved(ObjectKind::CkksBootstrapKeys, id, buf))
    }

    /// Parses and validates keys made by [`BootstrapKeys::to_bytes`] (or
    /// [`crate::bootstrap::Bootstrapper::generate_keys_bytes`]) under these parameters.
    pub fn from_bytes(params: &Arc<Parameters>, bytes: &[u8]) -> Result<Self, CkksError> {
        let mut r = WireReader::new(open_expected(bytes, ObjectKind::CkksBootstrapKeys, Some(params.id()))?);
        let flags = r.get_u8()?;
        if flags & !(HAS_RELIN | HAS_GALOIS | HAS_ENCAPSULATION) != 0 {
            return Err(malformed(format!("bootstrapping-key flags {flags:#04x} name keys that do not exist")));
        }
        let galois = if flags & HAS_GALOIS != 0 { Some(Arc::new(GaloisKeys::from_bytes(params, r.get_len_prefixed(MAX_PAYLOAD)?)?)) } else { None };
        let relin = if flags & HAS_RELIN != 0 { Some(Arc::new(RelinKey::from_bytes(params, r.get_len_prefixed(MAX_PAYLOAD)?)?)) } else { None };
        let encapsulation = if flags & HAS_ENCAPSULATION != 0 {
            let dense_to_sparse = Arc::new(KeySwitchKey::from_bytes(params, r.get_len_prefixed(MAX_PAYLOAD)?)?);
            let sparse_to_dense = Arc::new(KeySwitchKey::from_bytes(params, r.get_len_prefixed(MAX_PAYLOAD)?)?);
            Some(EncapsulationKeys { dense_to_sparse, sparse_to_dense })
        } else {
            None
        };
        r.finish()?;
        Ok(Self { evaluation: EvaluationKeys { relin, galois }, encapsulation })
    }
}
