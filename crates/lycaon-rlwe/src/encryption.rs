//! Encryptions of zero, c_0 + c_1 s = e (small): the schemes add their encoded message to c_0.

use lycaon_math::{expand_seed, Coeff, Ntt, Poly, Sampler};

use crate::{Ciphertext, Parameters, PublicKey, RlweError, SecretKey, SeededCiphertext};

/// Symmetric encryption of zero at `level`, seeded: c_0 = -a s + e with a = expand(seed).
pub fn encrypt_zero_symmetric(sk: &SecretKey, level: usize, sampler: &mut Sampler) -> Result<SeededCiphertext, RlweError> {
    let params = sk.params();
    let q = params.q_at(level)?.clone();
    let seed = sampler.seed();
    let a = expand_seed(&seed, &q);
    let c0 = crate::keys::minus_as_plus_e(params, &a, &sk.ntt_on(&q)?, sampler)?;
    Ok(SeededCiphertext { params_id: *params.id(), c0, seed })
}

/// Public-key encryption of zero at `level`: (b u + e_0, a u + e_1) with ternary u.
pub fn encrypt_zero_public(params: &Parameters, pk: &PublicKey, level: usize, sampler: &mut Sampler) -> Result<Ciphertext, RlweError> {
    if &pk.params_id != params.id() {
        return Err(RlweError::ParamsMismatch { what: "public key" });
    }
    let q = params.q_at(level)?.clone();
    let backend = params.backend();
    let u = backend.ntt(Poly::<Coeff>::from_signed(&q, &sampler.ternary(params.n()))?)?;
    let mut parts = Vec::with_capacity(2);
    for key_part in [&pk.b, &pk.a] {
        let mut k = key_part.clone();
        k.truncate_to(&q)?;
        backend.mul_assign(&mut k, &u)?;
        let e = backend.ntt(Poly::<Coeff>::from_signed(&q, &sampler.gaussian(params.n()))?)?;
        k.add_assign(&e)?;
        parts.push(k);
    }
    Ok(Ciphertext { params_id: *params.id(), parts })
}

/// c_0 + c_1 s + c_2 s^2 + ... in NTT form over the ciphertext's basis.
pub fn phase(sk: &SecretKey, ct: &Ciphertext) -> Result<Poly<Ntt>, RlweError> {
    let params = sk.params();
    ct.check_params(params)?;
    let backend = params.backend();
    let q = params.q_at(ct.level())?.clone();
    let s = sk.ntt_on(&q)?;
    // Horner: ((c_k s + c_{k-1}) s + ...) + c_0.
    let mut acc = ct.parts.last().cloned().ok_or(RlweError::Malformed { what: "empty ciphertext".into() })?;
    for part in ct.parts.iter().rev().skip(1) {
        backend.mul_assign(&mut acc, &s)?;
        acc.add_assign(part)?;
    }
    Ok(acc)
}
