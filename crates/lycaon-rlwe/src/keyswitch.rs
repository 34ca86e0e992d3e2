//! Hybrid key switching (Han-Ki 2020; the GHS special-modulus method with digits): ModUp each
//! digit of c to Q_l P, take the inner product with the key, ModDown by P. Hoisting (Halevi-Shoup
//! 2018) decomposes c_1 once for many rotations; Galois keys switch s to s(X^(1/g)), so each
//! rotation works on the unpermuted digits and permutes only its two results.

use lycaon_math::{Automorphism, Coeff, Ntt, Poly};

use crate::{Ciphertext, GaloisKeys, KeySwitchKey, Parameters, RelinKey, RlweError};

/// The digits of one polynomial, each lifted to Q_l P and in NTT form.
#[derive(Clone, Debug)]
pub struct Decomposed {
    pub(crate) level: usize,
    pub(crate) digits: Vec<Poly<Ntt>>,
}

/// ModUp: decomposes c (given in both forms, over Q_l) into digits over Q_l P.
pub fn decompose(params: &Parameters, c_coeff: &Poly<Coeff>, c_ntt: &Poly<Ntt>) -> Result<Decomposed, RlweError> {
    let _t = lycaon_math::profile::time(lycaon_math::profile::Kernel::KeySwitch);
    let level = c_coeff.num_limbs() - 1;
    let ctx = params.level(level)?;
    if ctx.mod_down.is_none() {
        return Err(RlweError::NoSpecialPrimes);
    }
    if !c_coeff.basis().same_primes(&ctx.q) || !c_ntt.basis().same_primes(&ctx.q) {
        return Err(RlweError::Malformed { what: "both forms of the decomposed polynomial must be over Q_l of these parameters".into() });
    }
    let backend = params.backend();
    let n = params.n();
    let mut digits = Vec::with_capacity(ctx.digits.len());
    for ((range, own), conv) in ctx.digits.iter().zip(&ctx.digit_bases).zip(&ctx.mod_up) {
        let own_coeff = Poly::<Coeff>::from_kernel_output(own, c_coeff.data()[range.start * n..range.end * n].to_vec());
        let rest = backend.ntt(backend.convert_basis(conv, &own_coeff, false)?)?;
        // Reassemble in QP_l order: rest holds the limbs before and after the digit's own.
        let mut data = Vec::with_capacity(ctx.qp.len() * n);
        data.extend_from_slice(&rest.data()[..range.start * n]);
        data.extend_from_slice(&c_ntt.data()[range.start * n..range.end * n]);
        data.extend_from_slice(&rest.data()[range.start * n..]);
        digits.push(Poly::from_kernel_output(&ctx.qp, data));
    }
    Ok(Decomposed { level, digits })
}

/// ModDown: (x_Q - Conv_P->Q(x_P)) * P^{-1}, from Q_l P to Q_l, in NTT form.
pub fn mod_down(params: &Parameters, x: Poly<Ntt>, level: usize) -> Result<Poly<Ntt>, RlweError> {
    let _t = lycaon_math::profile::time(lycaon_math::profile::Kernel::KeySwitch);
    let ctx = params.level(level)?;
    let conv = ctx.mod_down.as_ref().ok_or(RlweError::NoSpecialPrimes)?;
    let backend = params.backend();
    let n = params.n();
    let count = level + 1;
    if !x.basis().same_primes(&ctx.qp) {
        return Err(RlweError::Malformed {
            what: format!("ModDown expects a polynomial over Q_{level} P ({} limbs), got {} limbs", ctx.qp.len(), x.num_limbs()),
        });
    }
    let mut data = x.into_data();
    let p_part = Poly::<Ntt>::from_kernel_output(conv.from_basis(), data.split_off(count * n));
    let correction = backend.ntt(backend.convert_basis(conv, &backend.intt(p_part)?, false)?)?;
    for (i, q) in ctx.q.moduli().iter().enumerate() {
        let c = ctx.p_inv[i];
        for (x, &y) in data[i * n..(i + 1) * n].iter_mut().zip(correction.limb(i)) {
            *x = q.mul_shoup(q.sub(*x, y), c.value, c.shoup);
        }
    }
    Ok(Poly::from_kernel_output(&ctx.q, data))
}

/// Which limb of a key up to level `key_level` (over Q_key_level P) holds limb i of Q_l P.
fn key_limbs(params: &Parameters, level: usize, key_level: usize) -> Vec<usize> {
    let alpha = params.special_prime_count();
    (0..=level).chain(key_level + 1..key_level + 1 + alpha).collect()
}

/// Errors unless a key up to `key_level` serves a ciphertext at `level`.
pub(crate) fn check_key_level(key: &KeySwitchKey, level: usize, galois_element: Option<u64>) -> Result<(), RlweError> {
    if level > key.level {
        return Err(RlweError::KeyLevelTooLow { galois_element, key_level: key.level, ciphertext_level: level });
    }
    Ok(())
}

/// Inner product of decomposed digits with a key, then ModDown: returns (k_0, k_1) over Q_l with
/// k_0 + k_1 s = c s' + (small noise). The key must reach the decomposition's level l (a key up to
/// level k >= l is read limb by limb: the first l + 1 limbs and its special primes).
///
/// Errors: [`RlweError::ParamsMismatch`], [`RlweError::KeyLevelTooLow`] when l exceeds the key's
/// level, [`RlweError::Malformed`] for a key with too few digits.
pub fn key_switch_decomposed(params: &Parameters, dec: &Decomposed, key: &KeySwitchKey) -> Result<[Poly<Ntt>; 2], RlweError> {
    let [k0, k1] = key_switch_decomposed_lazy(params, dec, key)?;
    Ok([mod_down(params, k0, dec.level)?, mod_down(params, k1, dec.level)?])
}

/// [`key_switch_decomposed`] without the ModDown (double hoisting, Bossuat-Mouchet-Troncoso-
/// Pastoriza-Hubaux 2021): (k_0, k_1) over Q_l P with k_0 + k_1 s = P c s' + (small noise),
/// so that sums of such results (and of P-multiples of ciphertexts) pay one ModDown at the end.
/// Errors as [`key_switch_decomposed`].
pub fn key_switch_decomposed_lazy(params: &Parameters, dec: &Decomposed, key: &KeySwitchKey) -> Result<[Poly<Ntt>; 2], RlweError> {
    let _t = lycaon_math::profile::time(lycaon_math::profile::Kernel::KeySwitch);
    if &key.params_id != params.id() {
        return Err(RlweError::ParamsMismatch { what: "key-switching key" });
    }
    check_key_level(key, dec.level, None)?;
    let ctx = params.level(dec.level)?;
    let keys: Vec<&[Poly<Ntt>]> = key.digits.iter().take(dec.digits.len()).map(|d| d.as_slice()).collect();
    if keys.len() != dec.digits.len() {
        return Err(RlweError::Malformed { what: "key has fewer digits than the parameters require".into() });
    }
    let own_limbs;
    let limbs: &[usize] = if key.level == params.max_level() {
        &ctx.key_limbs
    } else {
        own_limbs = key_limbs(params, dec.level, key.level);
        &own_limbs
    };
    let mut out = params.backend().inner_product(&dec.digits, &keys, limbs, 2)?.into_iter();
    let (k0, k1) = (out.next(), out.next());
    match (k0, k1) {
        (Some(k0), Some(k1)) => Ok([k0, k1]),
        _ => Err(RlweError::Malformed { what: "inner product returned too few outputs".into() }),
    }
}

/// The extended basis Q_l P of level l (the basis of [`key_switch_decomposed_lazy`]'s results
/// and of [`mod_down`]'s input). Errors: [`RlweError::LevelOutOfRange`].
pub fn extended_basis(params: &Parameters, level: usize) -> Result<std::sync::Arc<lycaon_math::RnsBasis>, RlweError> {
    Ok(params.level(level)?.qp.clone())
}

/// P mod q_i for each prime of Q_l (to lift a polynomial c over Q_l to P c over Q_l P, whose
/// residues mod the special primes are zero). Errors: [`RlweError::NoSpecialPrimes`],
/// [`RlweError::LevelOutOfRange`].
pub fn p_mod_q(params: &Parameters, level: usize) -> Result<Vec<u64>, RlweError> {
    let p = params.p().ok_or(RlweError::NoSpecialPrimes)?;
    Ok(params.q_at(level)?.moduli().iter().map(|qi| p.moduli().iter().fold(1u64, |acc, pj| qi.mul(acc, qi.reduce(pj.value())))).collect())
}

/// Switches one polynomial c (over Q_l, NTT form) from the key's source secret to s.
pub fn key_switch(params: &Parameters, c: &Poly<Ntt>, key: &KeySwitchKey) -> Result<[Poly<Ntt>; 2], RlweError> {
    let coeff = params.backend().intt(c.clone())?;
    let dec = decompose(params, &coeff, c)?;
    key_switch_decomposed(params, &dec, key)
}

/// Relinearises a three-part ciphertext to two parts.
pub fn relinearize(params: &Parameters, ct: &Ciphertext, rk: &RelinKey) -> Result<Ciphertext, RlweError> {
    ct.check_params(params)?;
    if ct.len() != 3 {
        return Err(RlweError::WrongSize { expected: 3, found: ct.len() });
    }
    let [k0, k1] = key_switch(params, &ct.parts[2], &rk.0)?;
    relinearize_with(ct, k0, k1)
}

/// Adds a key-switched third part back into (c_0, c_1).
pub(crate) fn relinearize_with(ct: &Ciphertext, k0: Poly<Ntt>, k1: Poly<Ntt>) -> Result<Ciphertext, RlweError> {
    let mut c0 = ct.parts[0].clone();
    let mut c1 = ct.parts[1].clone();
    c0.add_assign(&k0)?;
    c1.add_assign(&k1)?;
    Ok(Ciphertext { params_id: ct.params_id, parts: vec![c0, c1] })
}

/// Applies X -> X^g for each Galois element, decomposing c_1 once (hoisting).
///
/// Errors: [`RlweError::ParamsMismatch`], [`RlweError::WrongSize`] unless two parts,
/// [`RlweError::MissingGaloisKey`], [`RlweError::KeyLevelTooLow`] when a key stops below the
/// ciphertext's level. With the Galois
/// key of g switching s to s(X^(g^-1)), each step is an inner product on the shared digits, a
/// ModDown, and one permutation of the two result polynomials.
pub fn automorphisms_hoisted(params: &Parameters, ct: &Ciphertext, galois_elements: &[u64], keys: &GaloisKeys) -> Result<Vec<Ciphertext>, RlweError> {
    ct.check_params(params)?;
    if ct.len() != 2 {
        return Err(RlweError::WrongSize { expected: 2, found: ct.len() });
    }
    if &keys.params_id != params.id() {
        return Err(RlweError::ParamsMismatch { what: "Galois keys" });
    }
    let needed: Vec<(&KeySwitchKey, Automorphism)> = galois_elements
        .iter()
        .map(|&g| {
            let key = keys.get(g).ok_or(RlweError::MissingGaloisKey { galois_element: g })?;
            check_key_level(key, ct.level(), Some(g))?;
            Ok((key, Automorphism::new(g, params.n())?))
        })
        .collect::<Result<_, RlweError>>()?;
    let backend = params.backend();
    let c1_coeff = backend.intt(ct.parts[1].clone())?;
    let dec = decompose(params, &c1_coeff, &ct.parts[1])?;
    let mut out = Vec::with_capacity(needed.len());
    for (key, auto) in needed {
        let [mut k0, k1] = key_switch_decomposed(params, &dec, key)?;
        k0.add_assign(&ct.parts[0])?;
        out.push(Ciphertext { params_id: ct.params_id, parts: vec![backend.automorphism_ntt(&k0, &auto)?, backend.automorphism_ntt(&k1, &auto)?] });
    }
    Ok(out)
}

/// Applies one automorphism X -> X^g.
pub fn automorphism(params: &Parameters, ct: &Ciphertext, galois_element: u64, keys: &GaloisKeys) -> Result<Ciphertext, RlweError> {
    let mut v = automorphisms_hoisted(params, ct, &[galois_element], keys)?;
    v.pop().ok_or(RlweError::Malformed { what: "no result".into() })
}

/// Switches a two-part ciphertext (c_0, c_1) from the key's source secret to its target:
/// (c_0 + k_0, k_1) with k_0 + k_1 s_to = c_1 s_from + (small noise). The key must reach the
/// ciphertext's level. Errors: as [`key_switch_decomposed`], and [`RlweError::WrongSize`] unless
/// two parts.
pub fn switch_key(params: &Parameters, ct: &Ciphertext, key: &KeySwitchKey) -> Result<Ciphertext, RlweError> {
    ct.check_params(params)?;
    if ct.len() != 2 {
        return Err(RlweError::WrongSize { expected: 2, found: ct.len() });
    }
    let [mut k0, k1] = key_switch(params, &ct.parts[1], key)?;
    k0.add_assign(&ct.parts[0])?;
    Ok(Ciphertext { params_id: ct.params_id, parts: vec![k0, k1] })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{encrypt_zero_symmetric, phase, ParametersLiteral, SecretKey, Security};
    use lycaon_math::Sampler;

    /// Largest centred coefficient of a small polynomial (read from its first limb).
    fn max_abs(params: &Parameters, p: &Poly<Ntt>) -> i64 {
        let c = params.backend().intt(p.clone()).unwrap();
        let q0 = c.basis().moduli()[0];
        c.limb(0).iter().map(|&x| q0.center(x).abs()).max().unwrap_or(0)
    }

    #[test]
    fn switching_between_a_dense_and_a_sparse_secret_keeps_the_phase() {
        // Toy parameters (not secure): 4 ciphertext primes, 2 special primes.
        let mut lit = ParametersLiteral::ckks_from_bits(1 << 10, &[50, 40, 40, 40], &[55, 55]).unwrap();
        lit.security = Security::InsecureTestOnly;
        let params = Parameters::new(lit).unwrap();
        let mut s = Sampler::from_os().unwrap();
        let dense = SecretKey::generate(&params, &mut s).unwrap();
        let sparse = SecretKey::generate_sparse(&params, 32, &mut s).unwrap();
        assert_eq!(sparse.hamming_weight(), 32);
        let top = params.max_level();
        // Dense -> sparse at level 0 only (refused above), sparse -> dense at the top.
        let down = KeySwitchKey::generate_switch(&dense, &sparse, 0, &mut s).unwrap();
        let up = KeySwitchKey::generate_switch(&sparse, &dense, top, &mut s).unwrap();
        assert_eq!(down.level(), 0);
        for (key, from, to, level) in [(&down, &dense, &sparse, 0), (&up, &sparse, &dense, top), (&up, &sparse, &dense, 1)] {
            let ct = encrypt_zero_symmetric(from, level, &mut s).unwrap().expand(&params).unwrap();
            let before = max_abs(&params, &phase(from, &ct).unwrap());
            let switched = switch_key(&params, &ct, key).unwrap();
            let after = max_abs(&params, &phase(to, &switched).unwrap());
            // Fresh noise is a few sigma; key switching adds ModDown rounding (about h / 2).
            assert!(before < 64 && after < 1 << 12, "level {level}: phase {before} before, {after} after");
        }
        let high = encrypt_zero_symmetric(&dense, 1, &mut s).unwrap().expand(&params).unwrap();
        assert!(matches!(switch_key(&params, &high, &down), Err(RlweError::KeyLevelTooLow { .. })));
    }
}
