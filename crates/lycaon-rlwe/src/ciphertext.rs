//! RLWE ciphertexts (c_0, c_1, ...) decrypting as c_0 + c_1 s + c_2 s^2 + ..., always kept in NTT
//! form over Q_l; and seeded ciphertexts whose c_1 is re-expanded from a 32-byte seed.

use std::sync::Arc;

use lycaon_math::{expand_seed, Ntt, Poly, Seed};

use crate::wire::ParamsId;
use crate::{Parameters, RlweError};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ciphertext {
    pub(crate) params_id: ParamsId,
    pub(crate) parts: Vec<Poly<Ntt>>,
}

impl Ciphertext {
    /// Errors unless there are at least two parts over one basis.
    pub fn from_parts(params: &Parameters, parts: Vec<Poly<Ntt>>) -> Result<Self, RlweError> {
        let Some(first) = parts.first() else { return Err(RlweError::Malformed { what: "a ciphertext needs at least two parts".into() }) };
        if parts.len() < 2 {
            return Err(RlweError::Malformed { what: "a ciphertext needs at least two parts".into() });
        }
        let level = first.num_limbs() - 1;
        let q = params.q_at(level)?;
        if parts.iter().any(|p| !p.basis().same_primes(q)) {
            return Err(RlweError::Malformed { what: "ciphertext parts are not over the same level of these parameters".into() });
        }
        Ok(Self { params_id: *params.id(), parts })
    }

    pub fn params_id(&self) -> &ParamsId {
        &self.params_id
    }

    /// Level l: the ciphertext lives modulo q_0 ... q_l.
    pub fn level(&self) -> usize {
        self.parts[0].num_limbs() - 1
    }

    /// Number of parts (2 after relinearisation, 3 after a multiplication without it).
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn parts(&self) -> &[Poly<Ntt>] {
        &self.parts
    }

    pub fn parts_mut(&mut self) -> &mut [Poly<Ntt>] {
        &mut self.parts
    }

    pub fn into_parts(self) -> Vec<Poly<Ntt>> {
        self.parts
    }

    pub(crate) fn check_params(&self, params: &Parameters) -> Result<(), RlweError> {
        if &self.params_id != params.id() {
            return Err(RlweError::ParamsMismatch { what: "ciphertext" });
        }
        Ok(())
    }
}

/// A fresh symmetric encryption sent as (c_0, seed): half the bytes of a full ciphertext.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeededCiphertext {
    pub(crate) params_id: ParamsId,
    pub(crate) c0: Poly<Ntt>,
    pub(crate) seed: Seed,
}

impl SeededCiphertext {
    pub fn level(&self) -> usize {
        self.c0.num_limbs() - 1
    }

    pub fn params_id(&self) -> &ParamsId {
        &self.params_id
    }

    /// c_0, for adding an encoded message right after encryption.
    pub fn c0_mut(&mut self) -> &mut Poly<Ntt> {
        &mut self.c0
    }

    /// The full ciphertext (c_0, a) with a expanded from the seed at this level.
    pub fn expand(&self, params: &Arc<Parameters>) -> Result<Ciphertext, RlweError> {
        if &self.params_id != params.id() {
            return Err(RlweError::ParamsMismatch { what: "seeded ciphertext" });
        }
        let a = expand_seed(&self.seed, params.q_at(self.level())?);
        Ok(Ciphertext { params_id: self.params_id, parts: vec![self.c0.clone(), a] })
    }
}
