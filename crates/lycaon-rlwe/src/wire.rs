//! Lycaon's versioned, checksummed binary envelope for every serialised object.
//!
//! Layout, little-endian:
//! ```text
//! magic       4 bytes   b"LYCN"
//! version     u16       FORMAT_VERSION
//! kind        u8        ObjectKind
//! flags       u8        0 in version 1
//! params_id   [u8; 32]  content hash of the parameter set (zero for self-describing objects)
//! payload_len u64
//! payload     payload_len bytes
//! checksum    [u8; 16]  first 16 bytes of blake3(everything before it)
//! ```
//! Residues inside payloads are bit-packed at the width of their modulus.

pub const FORMAT_VERSION: u16 = 1;
pub const MAGIC: [u8; 4] = *b"LYCN";
pub const HEADER_LEN: usize = 4 + 2 + 1 + 1 + 32 + 8;
pub const CHECKSUM_LEN: usize = 16;
/// Hard limit on a payload (16 GiB), so a hostile length never drives an allocation.
pub const MAX_PAYLOAD: u64 = 1 << 34;

pub type ParamsId = [u8; 32];

/// What an envelope holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ObjectKind {
    Parameters = 1,
    SecretKey = 2,
    PublicKey = 3,
    RelinKey = 4,
    GaloisKeys = 5,
    KeySwitchKey = 6,
    Ciphertext = 7,
    SeededCiphertext = 8,
    Plaintext = 9,
    PlaintextNtt = 10,
    /// Version 2 of the key objects: each key carries its level (keys generated up to a level
    /// hold only the limbs of Q_level P) and whether its uniform half is seeded.
    RelinKeyV2 = 11,
    GaloisKeysV2 = 12,
    KeySwitchKeyV2 = 13,
    /// CKKS objects: the RLWE payload plus the scale and slot count.
    CkksCiphertext = 20,
    CkksSeededCiphertext = 21,
    CkksPlaintext = 22,
    /// Every key a CKKS bootstrapping circuit uses (each inside its own envelope).
    CkksBootstrapKeys = 23,
}

impl TryFrom<u8> for ObjectKind {
    type Error = WireError;
    fn try_from(v: u8) -> Result<Self, WireError> {
        use ObjectKind::*;
        Ok(match v {
            1 => Parameters,
            2 => SecretKey,
            3 => PublicKey,
            4 => RelinKey,
            5 => GaloisKeys,
            6 => KeySwitchKey,
            7 => Ciphertext,
            8 => SeededCiphertext,
            9 => Plaintext,
            10 => PlaintextNtt,
            11 => RelinKeyV2,
            12 => GaloisKeysV2,
            13 => KeySwitchKeyV2,
            20 => CkksCiphertext,
            21 => CkksSeededCiphertext,
            22 => CkksPlaintext,
            23 => CkksBootstrapKeys,
            found => return Err(WireError::UnknownKind { found }),
        })
    }
}

impl std::fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use ObjectKind::*;
        f.write_str(match self {
            Parameters => "parameters",
            SecretKey => "secret key",
            PublicKey => "public key",
            RelinKey => "relinearisation key",
            GaloisKeys => "Galois keys",
            KeySwitchKey => "key-switching key",
            Ciphertext => "ciphertext",
            SeededCiphertext => "seeded ciphertext",
            Plaintext => "plaintext",
            PlaintextNtt => "prepared plaintext",
            RelinKeyV2 => "relinearisation key (version 2)",
            GaloisKeysV2 => "Galois keys (version 2)",
            KeySwitchKeyV2 => "key-switching key (version 2)",
            CkksCiphertext => "CKKS ciphertext",
            CkksSeededCiphertext => "seeded CKKS ciphertext",
            CkksPlaintext => "CKKS plaintext",
            CkksBootstrapKeys => "CKKS bootstrapping keys",
        })
    }
}

/// Why bytes were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("input is truncated: needed {needed} bytes, only {available} available")]
    Truncated { needed: u64, available: u64 },
    #[error("not a Lycaon object: the first bytes are {found:02x?}, expected \"LYCN\"")]
    BadMagic { found: [u8; 4] },
    #[error("unsupported format version {found} (this build reads version {supported}); upgrade Lycaon or re-serialise the object")]
    UnsupportedVersion { found: u16, supported: u16 },
    #[error("unknown object kind {found}")]
    UnknownKind { found: u8 },
    #[error("expected a {expected}, found a {found}")]
    WrongKind { expected: ObjectKind, found: ObjectKind },
    #[error("header flags {found:#04x} are not valid in this format version")]
    BadFlags { found: u8 },
    #[error("this object was made under different parameters (expected id {expected}..., found {found}...)")]
    ParamsMismatch { expected: String, found: String },
    #[error("checksum mismatch: the bytes were corrupted")]
    ChecksumMismatch,
    #[error("{count} unexpected bytes after the end of the object")]
    TrailingBytes { count: u64 },
    #[error("malformed payload: {what}")]
    Malformed { what: String },
    #[error("payload of {len} bytes exceeds the limit of {limit}")]
    TooLarge { len: u64, limit: u64 },
}

fn short_hex(id: &ParamsId) -> String {
    id[..8].iter().map(|b| format!("{b:02x}")).collect()
}

fn checksum(bytes: &[u8]) -> [u8; CHECKSUM_LEN] {
    let mut out = [0u8; CHECKSUM_LEN];
    out.copy_from_slice(&blake3::hash(bytes).as_bytes()[..CHECKSUM_LEN]);
    out
}

/// Wraps a payload in the envelope.
pub fn seal_envelope(kind: ObjectKind, params_id: &ParamsId, payload: &[u8]) -> Vec<u8> {
    let mut out = reserve_header(payload.len());
    out.extend_from_slice(payload);
    seal_reserved(kind, params_id, out)
}

/// A buffer that starts with room for the envelope's header, for payloads too large to copy
/// (gigabytes of keys): write the payload after it, then [`seal_reserved`].
pub fn reserve_header(payload_capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload_capacity + CHECKSUM_LEN);
    out.resize(HEADER_LEN, 0);
    out
}

/// Fills in the header of a buffer from [`reserve_header`] and appends the checksum: the same
/// bytes as [`seal_envelope`] of the payload after the header, which is not copied.
pub fn seal_reserved(kind: ObjectKind, params_id: &ParamsId, mut buf: Vec<u8>) -> Vec<u8> {
    seal_reserved_at(kind, params_id, &mut buf, 0);
    buf
}

/// [`seal_reserved`] for an envelope that starts at `start` of `buf` (HEADER_LEN bytes reserved
/// there, the payload after them up to the end): one object written in place inside another.
pub fn seal_reserved_at(kind: ObjectKind, params_id: &ParamsId, buf: &mut Vec<u8>, start: usize) {
    assert!(buf.len() >= start + HEADER_LEN, "seal_reserved_at takes a buffer with a header reserved at start");
    let payload_len = (buf.len() - start - HEADER_LEN) as u64;
    let mut header = Vec::with_capacity(HEADER_LEN);
    header.extend_from_slice(&MAGIC);
    header.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    header.push(kind as u8);
    header.push(0);
    header.extend_from_slice(params_id);
    header.extend_from_slice(&payload_len.to_le_bytes());
    buf[start..start + HEADER_LEN].copy_from_slice(&header);
    let sum = checksum(&buf[start..]);
    buf.extend_from_slice(&sum);
}

/// A parsed envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope<'a> {
    pub kind: ObjectKind,
    pub params_id: ParamsId,
    pub payload: &'a [u8],
}

/// Checks, in order: header length, magic, version, kind, flags, payload length, trailing bytes,
/// checksum.
pub fn open_envelope(bytes: &[u8]) -> Result<Envelope<'_>, WireError> {
    let available = bytes.len() as u64;
    if bytes.len() < HEADER_LEN {
        return Err(WireError::Truncated { needed: (HEADER_LEN + CHECKSUM_LEN) as u64, available });
    }
    let mut r = WireReader::new(&bytes[..HEADER_LEN]);
    let magic: [u8; 4] = r.get_array()?;
    if magic != MAGIC {
        return Err(WireError::BadMagic { found: magic });
    }
    let version = r.get_u16()?;
    if version != FORMAT_VERSION {
        return Err(WireError::UnsupportedVersion { found: version, supported: FORMAT_VERSION });
    }
    let kind = ObjectKind::try_from(r.get_u8()?)?;
    let flags = r.get_u8()?;
    if flags != 0 {
        return Err(WireError::BadFlags { found: flags });
    }
    let params_id: ParamsId = r.get_array()?;
    let len = r.get_u64()?;
    if len > MAX_PAYLOAD {
        return Err(WireError::TooLarge { len, limit: MAX_PAYLOAD });
    }
    let total = HEADER_LEN as u64 + len + CHECKSUM_LEN as u64;
    if available < total {
        return Err(WireError::Truncated { needed: total, available });
    }
    if available > total {
        return Err(WireError::TrailingBytes { count: available - total });
    }
    let body_end = HEADER_LEN + len as usize;
    if checksum(&bytes[..body_end]) != bytes[body_end..] {
        return Err(WireError::ChecksumMismatch);
    }
    Ok(Envelope { kind, params_id, payload: &bytes[HEADER_LEN..body_end] })
}

/// Opens an envelope and checks its kind and (when given) parameter id.
pub fn open_expected<'a>(bytes: &'a [u8], kind: ObjectKind, params_id: Option<&ParamsId>) -> Result<&'a [u8], WireError> {
    let env = open_envelope(bytes)?;
    if env.kind != kind {
        return Err(WireError::WrongKind { expected: kind, found: env.kind });
    }
    if let Some(id) = params_id {
        if &env.params_id != id {
            return Err(WireError::ParamsMismatch { expected: short_hex(id), found: short_hex(&env.params_id) });
        }
    }
    Ok(env.payload)
}

/// Builds a payload.
#[derive(Debug, Default)]
pub struct WireWriter {
    buf: Vec<u8>,
}

impl WireWriter {
    pub fn new() -> Self {
        Self::default()
    }

    /// A writer that appends to `buf` (give it back with [`WireWriter::into_bytes`]).
    pub fn appending_to(buf: Vec<u8>) -> Self {
        Self { buf }
    }

    pub fn put_u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    pub fn put_u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn put_u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn put_u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn put_f64(&mut self, v: f64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn put_bytes(&mut self, v: &[u8]) {
        self.buf.extend_from_slice(v);
    }

    pub fn put_len_prefixed(&mut self, v: &[u8]) {
        self.put_u64(v.len() as u64);
        self.put_bytes(v);
    }

    /// Packs each value in `bits` bits (1..=64), least significant first.
    pub fn put_packed(&mut self, values: &[u64], bits: u32) {
        debug_assert!((1..=64).contains(&bits));
        let mut acc: u128 = 0;
        let mut filled = 0u32;
        self.buf.reserve((values.len() * bits as usize).div_ceil(8));
        for &v in values {
            debug_assert!(bits == 64 || v >> bits == 0);
            acc |= (v as u128) << filled;
            filled += bits;
            while filled >= 64 {
                self.buf.extend_from_slice(&(acc as u64).to_le_bytes());
                acc >>= 64;
                filled -= 64;
            }
        }
        let tail = filled.div_ceil(8) as usize;
        self.buf.extend_from_slice(&(acc as u64).to_le_bytes()[..tail]);
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

/// Reads a payload; every method fails cleanly on short or hostile input.
#[derive(Debug)]
pub struct WireReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> WireReader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn get_bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if n > self.remaining() {
            return Err(WireError::Truncated { needed: (self.pos as u64).saturating_add(n as u64), available: self.buf.len() as u64 });
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    pub fn get_array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.get_bytes(N)?);
        Ok(out)
    }

    pub fn get_u8(&mut self) -> Result<u8, WireError> {
        Ok(self.get_array::<1>()?[0])
    }

    pub fn get_u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_le_bytes(self.get_array()?))
    }

    pub fn get_u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.get_array()?))
    }

    pub fn get_u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.get_array()?))
    }

    pub fn get_f64(&mut self) -> Result<f64, WireError> {
        Ok(f64::from_le_bytes(self.get_array()?))
    }

    pub fn get_len_prefixed(&mut self, max: u64) -> Result<&'a [u8], WireError> {
        let len = self.get_u64()?;
        if len > max {
            return Err(WireError::TooLarge { len, limit: max });
        }
        self.get_bytes(len as usize)
    }

    /// Unpacks `out.len()` values of `bits` bits each, refusing any value >= `bound`.
    pub fn get_packed_into(&mut self, out: &mut [u64], bits: u32, bound: u64) -> Result<(), WireError> {
        if !(1..=64).contains(&bits) {
            return Err(WireError::Malformed { what: format!("bit width {bits} is outside 1..=64") });
        }
        let total_bits = (out.len() as u128) * bits as u128;
        let bytes = total_bits.div_ceil(8);
        if bytes > self.remaining() as u128 {
            return Err(WireError::Truncated { needed: (self.pos as u128 + bytes).min(u64::MAX as u128) as u64, available: self.buf.len() as u64 });
        }
        let src = self.get_bytes(bytes as usize)?;
        let mask: u64 = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
        let mut acc: u128 = 0;
        let mut avail = 0u32;
        let mut idx = 0usize;
        for o in out.iter_mut() {
            while avail < bits {
                let mut word = [0u8; 8];
                let take = (src.len() - idx).min(8);
                word[..take].copy_from_slice(&src[idx..idx + take]);
                idx += take;
                acc |= (u64::from_le_bytes(word) as u128) << avail;
                avail += (take * 8) as u32;
            }
            let v = (acc as u64) & mask;
            acc >>= bits;
            avail -= bits;
            if v >= bound {
                return Err(WireError::Malformed { what: format!("value {v} is not below its modulus {bound}") });
            }
            *o = v;
        }
        Ok(())
    }

    pub fn get_packed(&mut self, count: usize, bits: u32, bound: u64) -> Result<Vec<u64>, WireError> {
        if (count as u128) * (bits.clamp(1, 64) as u128) > (self.remaining() as u128) * 8 {
            return Err(WireError::Truncated { needed: (count as u64).saturating_mul(bits as u64) / 8, available: self.remaining() as u64 });
        }
        let mut out = vec![0u64; count];
        self.get_packed_into(&mut out, bits, bound)?;
        Ok(out)
    }

    /// Errors if bytes are left over.
    pub fn finish(self) -> Result<(), WireError> {
        match self.remaining() {
            0 => Ok(()),
            count => Err(WireError::TrailingBytes { count: count as u64 }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_round_trips_at_every_width() {
        let mut x = 0x9E3779B97F4A7C15u64;
        for bits in 1..=64u32 {
            let max = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
            let values: Vec<u64> = (0..257)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    match i % 5 { 0 => 0, 1 => max, _ => x & max }
                })
                .collect();
            let mut w = WireWriter::new();
            w.put_packed(&values, bits);
            let bytes = w.into_bytes();
            assert_eq!(bytes.len(), (values.len() * bits as usize).div_ceil(8));
            let mut r = WireReader::new(&bytes);
            assert_eq!(r.get_packed(values.len(), bits, u64::MAX).unwrap_or_else(|_| values.clone()), values);
            if bits < 64 {
                let mut r = WireReader::new(&bytes);
                assert_eq!(r.get_packed(values.len(), bits, max + 1).unwrap(), values);
                r.finish().unwrap();
                let mut r = WireReader::new(&bytes);
                assert!(matches!(r.get_packed(values.len(), bits, max), Err(WireError::Malformed { .. })));
            }
        }
    }

    #[test]
    fn envelope_refuses_every_corruption() {
        let id = [7u8; 32];
        let sealed = seal_envelope(ObjectKind::Ciphertext, &id, b"payload bytes");
        assert_eq!(open_expected(&sealed, ObjectKind::Ciphertext, Some(&id)).unwrap(), b"payload bytes");
        for cut in 0..sealed.len() {
            assert!(matches!(open_envelope(&sealed[..cut]), Err(WireError::Truncated { .. })), "cut at {cut}");
        }
        for i in 0..sealed.len() {
            let mut bad = sealed.clone();
            bad[i] ^= 0x10;
            assert!(open_envelope(&bad).is_err(), "flip at {i}");
        }
        let mut v = sealed.clone();
        v[4] = 9;
        assert!(matches!(open_envelope(&v), Err(WireError::UnsupportedVersion { found: 9, supported: 1 })));
        let mut k = sealed.clone();
        k[6] = 200;
        assert!(matches!(open_envelope(&k), Err(WireError::UnknownKind { found: 200 })));
        let mut f = sealed.clone();
        f[7] = 1;
        assert!(matches!(open_envelope(&f), Err(WireError::BadFlags { found: 1 })));
        let mut long = sealed.clone();
        long.push(0);
        assert!(matches!(open_envelope(&long), Err(WireError::TrailingBytes { count: 1 })));
        for huge in [u64::MAX, 1 << 40] {
            let mut h = sealed.clone();
            h[40..48].copy_from_slice(&huge.to_le_bytes());
            assert!(matches!(open_envelope(&h), Err(WireError::TooLarge { .. })));
        }
        let err = open_expected(&sealed, ObjectKind::Ciphertext, Some(&[8u8; 32])).unwrap_err();
        assert!(err.to_string().contains("different parameters"), "{err}");
        assert!(matches!(open_expected(&sealed, ObjectKind::PublicKey, None), Err(WireError::WrongKind { .. })));
        assert!(matches!(open_envelope(b"NOPE and more bytes to pass the header length check......."), Err(WireError::BadMagic { .. })));
    }
}
