//! Where tensor elements live inside ciphertexts, and the bytes those ciphertexts take on the wire.

use lycaon_bfv::rlwe::Parameters;

use crate::NnError;

/// How values are put into a plaintext.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// SIMD slots (BatchEncoder order).
    Batch,
    /// Polynomial coefficients (CoeffEncoder).
    Coeff,
}

/// One placement of a tensor element: element `element` (flat CHW index) sits at position `pos`
/// (a slot or a coefficient) of ciphertext `ct`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    pub element: u32,
    pub ct: u32,
    pub pos: u32,
}

/// A layout of a tensor over ciphertexts. An input element may be placed more than once (halos of
/// overlapping tiles); an output element is placed exactly once.
#[derive(Clone, Debug)]
pub struct Layout {
    pub encoding: Encoding,
    pub num_ciphertexts: usize,
    /// Number of tensor elements.
    pub elements: usize,
    pub placements: Vec<Placement>,
    /// Every value of ciphertext k is multiplied by `ct_factor[k]` (mod t) before encoding
    /// (plaintext decomposition sends the input times powers of the base); empty means all 1.
    pub ct_factor: Vec<u64>,
    /// Outputs decrypt to `scale` times the true value (mod t).
    pub scale: u64,
    /// For coefficient-encoded outputs: how many coefficients of c_0 travel back per ciphertext
    /// (None: the whole ciphertext).
    pub kept_coefficients: Option<Vec<usize>>,
    /// Every placement stands for `replicas` copies of its element, at pos, pos + stride, ...,
    /// pos + (replicas - 1) stride of its ciphertext (inputs only; (1, 0) for none). A layout
    /// that repeats every element in many slots (BatchWise's kernel lanes) would otherwise hold
    /// hundreds of millions of placements for an ImageNet layer.
    pub replicas: (usize, usize),
}

impl Layout {
    pub(crate) fn new(encoding: Encoding, num_ciphertexts: usize, elements: usize, placements: Vec<Placement>) -> Self {
        Self { encoding, num_ciphertexts, elements, placements, ct_factor: Vec::new(), scale: 1, kept_coefficients: None, replicas: (1, 0) }
    }

    /// The plaintext vectors (one per ciphertext, `n` values each, reduced mod t) that hold
    /// `values` (one per element, any integers).
    pub fn pack(&self, values: &[i64], n: usize, t: u64) -> Result<Vec<Vec<u64>>, NnError> {
        if values.len() != self.elements {
            return Err(NnError::Count { what: "tensor elements", expected: self.elements, found: values.len() });
        }
        let mut out = vec![vec![0u64; n]; self.num_ciphertexts];
        for p in &self.placements {
            let v = values[p.element as usize].rem_euclid(t as i64) as u64;
            let f = self.ct_factor.get(p.ct as usize).copied().unwrap_or(1);
            let (copies, stride) = self.replicas;
            for r in 0..copies {
                out[p.ct as usize][p.pos as usize + r * stride] = ((v as u128 * f as u128) % t as u128) as u64;
            }
        }
        Ok(out)
    }

    /// Reads the elements back from decoded vectors, dividing by `scale` modulo t.
    pub fn unpack(&self, decoded: &[Vec<u64>], t: u64) -> Result<Vec<u64>, NnError> {
        if decoded.len() != self.num_ciphertexts {
            return Err(NnError::Count { what: "decoded ciphertexts", expected: self.num_ciphertexts, found: decoded.len() });
        }
        let inv = inverse_mod(self.scale % t, t).ok_or_else(|| NnError::Shape(format!("output scale {} is not invertible mod {t}", self.scale)))?;
        let mut out = vec![0u64; self.elements];
        for p in &self.placements {
            let v = decoded[p.ct as usize][p.pos as usize];
            out[p.element as usize] = ((v as u128 * inv as u128) % t as u128) as u64;
        }
        Ok(out)
    }

    /// Bytes of the outputs sent back at the lowest level with `drop` low bits gone from each
    /// coefficient (the hybrid runtime's response: a coefficient layout's kept coefficients of
    /// c_0, else all of c_0, then all of c_1, in coefficient form).
    pub fn dropped_down_bytes(&self, params: &Parameters, drop: crate::ResponseDrop) -> usize {
        let n = params.n();
        let per_ct = |kept: usize| dropped_ciphertext_bytes(params, kept, drop);
        RESPONSE_HEADER_BYTES
            + match &self.kept_coefficients {
                None => self.num_ciphertexts * per_ct(n),
                Some(kept) => kept.iter().map(|&k| per_ct(k)).sum(),
            }
    }

    /// Bytes of the outputs sent back at the lowest level.
    pub fn down_bytes(&self, params: &Parameters) -> usize {
        let full = ciphertext_bytes(params, 0);
        match &self.kept_coefficients {
            None => self.num_ciphertexts * full,
            Some(kept) => kept.iter().map(|&k| partial_ciphertext_bytes(params, k)).sum(),
        }
    }
}

/// Modular inverse by the extended Euclidean algorithm.
pub fn inverse_mod(a: u64, m: u64) -> Option<u64> {
    let (mut r0, mut r1) = (m as i128, a as i128);
    let (mut s0, mut s1) = (0i128, 1i128);
    while r1 != 0 {
        let q = r0 / r1;
        (r0, r1) = (r1, r0 - q * r1);
        (s0, s1) = (s1, s0 - q * s1);
    }
    (r0 == 1).then(|| s0.rem_euclid(m as i128) as u64)
}

const ENVELOPE_BYTES: usize = lycaon_bfv::rlwe::wire::HEADER_LEN + 16;

fn poly_bytes(params: &Parameters, level: usize) -> usize {
    let n = params.n();
    params.q_at(level).map(|q| q.moduli().iter().map(|m| (n * m.bits() as usize).div_ceil(8)).sum()).unwrap_or(0)
}

/// A seeded (symmetric, fresh) ciphertext on the wire: c_0 and a 32-byte seed for c_1.
pub fn seeded_ciphertext_bytes(params: &Parameters, level: usize) -> usize {
    ENVELOPE_BYTES + 4 + 32 + poly_bytes(params, level)
}

/// A two-part ciphertext on the wire.
pub fn ciphertext_bytes(params: &Parameters, level: usize) -> usize {
    ENVELOPE_BYTES + 8 + 2 * poly_bytes(params, level)
}

/// A ciphertext at level 0 of which only `kept` coefficients of c_0 travel (with their indices
/// implied by the public layout), and all of c_1.
pub fn partial_ciphertext_bytes(params: &Parameters, kept: usize) -> usize {
    let bits0 = params.q_at(0).map(|q| q.moduli()[0].bits() as usize).unwrap_or(64);
    ENVELOPE_BYTES + 8 + poly_bytes(params, 0) + (kept * bits0).div_ceil(8)
}

/// A response's header: the two drop widths.
pub const RESPONSE_HEADER_BYTES: usize = 8;

/// One response ciphertext with `drop` low bits gone: a length word, `kept` coefficients of c_0
/// at (bits of q_0) - drop.c0 bits, n of c_1 at (bits of q_0) - drop.c1 bits.
pub fn dropped_ciphertext_bytes(params: &Parameters, kept: usize, drop: crate::ResponseDrop) -> usize {
    let bits0 = params.q_at(0).map(|q| q.moduli()[0].bits() as usize).unwrap_or(64);
    4 + (kept * (bits0 - drop.c0 as usize)).div_ceil(8) + (params.n() * (bits0 - drop.c1 as usize)).div_ceil(8)
}

/// A plaintext prepared for products (lifted to Q and in NTT form) at the top level.
pub fn prepared_plaintext_bytes(params: &Parameters) -> usize {
    ENVELOPE_BYTES + 4 + poly_bytes(params, params.max_level())
}

/// One Galois key, seeded: per digit one polynomial over QP and a seed.
pub fn galois_key_bytes(params: &Parameters) -> usize {
    let n = params.n();
    let qp: usize = params.qp().moduli().iter().map(|m| (n * m.bits() as usize).div_ceil(8)).sum();
    let digits = params.key_switch_digit_sizes(params.max_level()).map(|d| d.len()).unwrap_or(1);
    ENVELOPE_BYTES + 16 + digits * (qp + 32)
}
