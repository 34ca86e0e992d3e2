//! BFV plaintexts: polynomials with coefficients modulo t, filled either coefficient-wise or as a
//! 2 x n/2 matrix of slots (SIMD batching through the NTT modulo t, with SEAL's slot order, so a
//! row rotation by k is the Galois element 3^k and the row swap is 2n - 1).

use std::sync::Arc;

use lycaon_math::{bit_reverse, Modulus};
use lycaon_rlwe::wire::{open_expected, seal_envelope, ObjectKind, ParamsId, WireError, WireReader, WireWriter};
use lycaon_rlwe::Parameters;

use crate::BfvError;

/// A plaintext: n coefficients in [0, t).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plaintext {
    pub(crate) params_id: ParamsId,
    pub(crate) coeffs: Vec<u64>,
}

impl Plaintext {
    pub fn coeffs(&self) -> &[u64] {
        &self.coeffs
    }

    pub fn params_id(&self) -> &ParamsId {
        &self.params_id
    }

    /// Builds a plaintext from coefficients already reduced modulo t.
    pub fn from_coeffs(params: &Parameters, coeffs: Vec<u64>) -> Result<Self, BfvError> {
        let t = plaintext_modulus(params)?;
        if coeffs.len() != params.n() {
            return Err(BfvError::WrongLength { expected: params.n(), found: coeffs.len() });
        }
        if let Some(&bad) = coeffs.iter().find(|&&c| c >= t.value()) {
            return Err(BfvError::NotReduced { value: bad, t: t.value() });
        }
        Ok(Self { params_id: *params.id(), coeffs })
    }
}

impl Plaintext {
    pub fn to_bytes(&self) -> Vec<u8> {
        let bits = 64 - self.coeffs.iter().max().copied().unwrap_or(0).leading_zeros().min(63);
        let mut w = WireWriter::new();
        w.put_u8(bits as u8);
        w.put_packed(&self.coeffs, bits);
        seal_envelope(ObjectKind::Plaintext, &self.params_id, &w.into_bytes())
    }

    pub fn from_bytes(params: &Parameters, bytes: &[u8]) -> Result<Self, BfvError> {
        let t = plaintext_modulus(params)?;
        let mut r = WireReader::new(open_expected(bytes, ObjectKind::Plaintext, Some(params.id())).map_err(lycaon_rlwe::RlweError::from)?);
        let read = |r: &mut WireReader| -> Result<Vec<u64>, WireError> {
            let bits = r.get_u8()? as u32;
            let coeffs = r.get_packed(params.n(), bits, t.value())?;
            Ok(coeffs)
        };
        let coeffs = read(&mut r).and_then(|c| r.finish().map(|_| c)).map_err(lycaon_rlwe::RlweError::from)?;
        Ok(Self { params_id: *params.id(), coeffs })
    }
}

pub(crate) fn plaintext_modulus(params: &Parameters) -> Result<Modulus, BfvError> {
    params.plaintext_modulus().copied().ok_or(BfvError::NotBfv)
}

fn reduce_signed(values: &[i64], t: &Modulus) -> Vec<u64> {
    values.iter().map(|&v| t.reduce_i64(v)).collect()
}

/// Coefficient encoding: value i goes to the coefficient of X^i (shorter inputs are zero-padded).
#[derive(Clone, Debug)]
pub struct CoeffEncoder {
    params: Arc<Parameters>,
    t: Modulus,
}

impl CoeffEncoder {
    pub fn new(params: &Arc<Parameters>) -> Result<Self, BfvError> {
        Ok(Self { params: params.clone(), t: plaintext_modulus(params)? })
    }

    /// Values in [0, t); errors on a longer input or a value >= t.
    pub fn encode(&self, values: &[u64]) -> Result<Plaintext, BfvError> {
        let n = self.params.n();
        if values.len() > n {
            return Err(BfvError::WrongLength { expected: n, found: values.len() });
        }
        let mut coeffs = values.to_vec();
        coeffs.resize(n, 0);
        Plaintext::from_coeffs(&self.params, coeffs)
    }

    /// Signed values, reduced modulo t.
    pub fn encode_signed(&self, values: &[i64]) -> Result<Plaintext, BfvError> {
        self.encode(&reduce_signed(values, &self.t))
    }

    pub fn decode(&self, pt: &Plaintext) -> Result<Vec<u64>, BfvError> {
        check_params(&self.params, pt)?;
        Ok(pt.coeffs.clone())
    }

    /// Coefficients as centred values in (-t/2, t/2].
    pub fn decode_signed(&self, pt: &Plaintext) -> Result<Vec<i64>, BfvError> {
        check_params(&self.params, pt)?;
        Ok(pt.coeffs.iter().map(|&c| self.t.center(c)).collect())
    }
}

fn check_params(params: &Parameters, pt: &Plaintext) -> Result<(), BfvError> {
    if pt.params_id != *params.id() {
        return Err(BfvError::Rlwe(lycaon_rlwe::RlweError::ParamsMismatch { what: "plaintext" }));
    }
    Ok(())
}

/// Batch (SIMD) encoding of n values as two rows of n/2 slots.
#[derive(Clone, Debug)]
pub struct BatchEncoder {
    params: Arc<Parameters>,
    t: Modulus,
    /// slot_index[i] is the NTT-order position of slot i (row 0 then row 1).
    slot_index: Vec<usize>,
}

impl BatchEncoder {
    /// Errors unless t is a prime = 1 mod 2n.
    pub fn new(params: &Arc<Parameters>) -> Result<Self, BfvError> {
        let t = plaintext_modulus(params)?;
        if params.plaintext_ntt().is_none() {
            return Err(BfvError::NoBatching { t: t.value(), n: params.n() });
        }
        let n = params.n();
        let log_n = n.trailing_zeros();
        let two_n = 2 * n as u64;
        let mut slot_index = vec![0usize; n];
        let mut exponent = 1u64;
        for i in 0..n / 2 {
            // Slot (0, i) evaluates at psi^(3^i), slot (1, i) at psi^(-3^i).
            slot_index[i] = bit_reverse(((exponent - 1) / 2) as usize, log_n);
            slot_index[n / 2 + i] = bit_reverse(((two_n - exponent - 1) / 2) as usize, log_n);
            exponent = exponent * 3 % two_n;
        }
        Ok(Self { params: params.clone(), t, slot_index })
    }

    pub fn slot_count(&self) -> usize {
        self.params.n()
    }

    /// Values in [0, t), at most n (zero-padded).
    pub fn encode(&self, values: &[u64]) -> Result<Plaintext, BfvError> {
        let n = self.params.n();
        if values.len() > n {
            return Err(BfvError::WrongLength { expected: n, found: values.len() });
        }
        if let Some(&bad) = values.iter().find(|&&v| v >= self.t.value()) {
            return Err(BfvError::NotReduced { value: bad, t: self.t.value() });
        }
        let mut evals = vec![0u64; n];
        for (&v, &idx) in values.iter().zip(&self.slot_index) {
            evals[idx] = v;
        }
        let plan = self.params.plaintext_ntt().ok_or(BfvError::NoBatching { t: self.t.value(), n })?;
        plan.inverse(&mut evals);
        Ok(Plaintext { params_id: *self.params.id(), coeffs: evals })
    }

    /// Signed values, reduced modulo t.
    pub fn encode_signed(&self, values: &[i64]) -> Result<Plaintext, BfvError> {
        self.encode(&reduce_signed(values, &self.t))
    }

    pub fn decode(&self, pt: &Plaintext) -> Result<Vec<u64>, BfvError> {
        check_params(&self.params, pt)?;
        let n = self.params.n();
        let plan = self.params.plaintext_ntt().ok_or(BfvError::NoBatching { t: self.t.value(), n })?;
        let mut evals = pt.coeffs.clone();
        plan.forward(&mut evals);
        Ok(self.slot_index.iter().map(|&idx| evals[idx]).collect())
    }

    /// Slots as centred values in (-t/2, t/2].
    pub fn decode_signed(&self, pt: &Plaintext) -> Result<Vec<i64>, BfvError> {
        Ok(self.decode(pt)?.into_iter().map(|v| self.t.center(v)).collect())
    }
}
