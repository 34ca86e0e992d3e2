//! Wire encodings of CKKS objects inside Lycaon's versioned envelope: the scale (f64) and the
//! log2 of the slot count, then the RLWE object's own envelope (ciphertexts, seeded ones for the
//! upstream direction) or the bit-packed residues (plaintexts).

use lycaon_rlwe::wire::{open_expected, seal_envelope, ObjectKind, WireReader, WireWriter, MAX_PAYLOAD};
use lycaon_rlwe::RlweError;

use crate::encoding::{check_scale, check_slots};
use crate::{Ciphertext, CkksContext, CkksError, Plaintext, SeededCiphertext};

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
