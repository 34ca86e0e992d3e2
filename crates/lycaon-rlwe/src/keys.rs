//! Keys: the ternary secret s, the public key (-a s + e, a), and key-switching keys with their
//! relinearisation and Galois specialisations. Server-side types never hold s.

use std::collections::BTreeMap;
use std::sync::Arc;

use lycaon_math::{rotation_galois_element, row_swap_galois_element, Automorphism, Coeff, Ntt, Poly, Sampler, Seed};
use zeroize::Zeroize;

use crate::{Parameters, RlweError};
use crate::wire::ParamsId;

/// The secret key s with ternary coefficients, kept in NTT form over QP. Zeroised on drop.
pub struct SecretKey {
    pub(crate) params: Arc<Parameters>,
    pub(crate) coeffs: Vec<i64>,
    /// s in NTT form over the top-level QP basis.
    pub(crate) ntt: Poly<Ntt>,
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(<redacted>)")
    }
}

impl Drop for SecretKey {
    fn drop(&mut self) {
        self.coeffs.zeroize();
        self.ntt.data_mut().zeroize();
    }
}

impl SecretKey {
    /// Samples a fresh uniform ternary secret from the OS-seeded CSPRNG.
    pub fn generate(params: &Arc<Parameters>, sampler: &mut Sampler) -> Result<Self, RlweError> {
        let coeffs = sampler.ternary(params.n());
        Self::from_coeffs(params, coeffs)
    }

    pub(crate) fn from_coeffs(params: &Arc<Parameters>, coeffs: Vec<i64>) -> Result<Self, RlweError> {
        if coeffs.len() != params.n() || coeffs.iter().any(|c| !(-1..=1).contains(c)) {
            return Err(RlweError::Malformed { what: "secret key coefficients must be n values in {-1, 0, 1}".into() });
        }
        let ntt = params.backend().ntt(Poly::from_signed(params.qp(), &coeffs)?);
        Ok(Self { params: params.clone(), coeffs, ntt })
    }

    pub fn params(&self) -> &Arc<Parameters> {
        &self.params
    }

    /// s over the basis of the first `count` limbs of QP (count <= L), or over Q_l followed by P.
    pub(crate) fn ntt_on(&self, basis: &Arc<lycaon_math::RnsBasis>) -> Result<Poly<Ntt>, RlweError> {
        // Pick limbs by prime so any sub-basis of QP works.
        let n = self.params.n();
        let top = self.params.qp().moduli();
        let mut data = Vec::with_capacity(basis.len() * n);
        for q in basis.moduli() {
            let i = top.iter().position(|m| m == q).ok_or(RlweError::Malformed { what: "basis is not part of these parameters".into() })?;
            data.extend_from_slice(self.ntt.limb(i));
        }
        Ok(Poly::from_kernel_output(basis, data))
    }

    pub(crate) fn coeffs(&self) -> &[i64] {
        &self.coeffs
    }
}

/// Public key (b, a) = (-a s + e, a) over the top-level Q; a is expanded from a seed.
#[derive(Clone, Debug)]
pub struct PublicKey {
    pub(crate) params_id: ParamsId,
    pub(crate) b: Poly<Ntt>,
    pub(crate) a: Poly<Ntt>,
    pub(crate) seed: Seed,
}

impl PublicKey {
    pub fn generate(sk: &SecretKey, sampler: &mut Sampler) -> Result<Self, RlweError> {
        let params = &sk.params;
        let q = params.q().clone();
        let seed = sampler.seed();
        let a = lycaon_math::expand_seed(&seed, &q);
        let b = minus_as_plus_e(params, &a, &sk.ntt_on(&q)?, sampler)?;
        Ok(Self { params_id: *params.id(), b, a, seed })
    }

    pub fn params_id(&self) -> &ParamsId {
        &self.params_id
    }
}

/// -a s + e with fresh Gaussian e, in NTT form over a's basis.
pub(crate) fn minus_as_plus_e(params: &Parameters, a: &Poly<Ntt>, s: &Poly<Ntt>, sampler: &mut Sampler) -> Result<Poly<Ntt>, RlweError> {
    let e = params.backend().ntt(Poly::<Coeff>::from_signed(a.basis(), &sampler.gaussian(params.n()))?);
    let mut b = a.clone();
    params.backend().mul_assign(&mut b, s)?;
    b.neg_assign();
    b.add_assign(&e)?;
    Ok(b)
}

/// A key that switches a ciphertext component from secret s' to s (hybrid key switching):
/// digit j holds (b_j, a_j) = (-a_j s + e_j + P [Q/Q_j]^{-1}_{Q_j} (Q/Q_j) s', a_j) over QP.
#[derive(Clone, Debug)]
pub struct KeySwitchKey {
    pub(crate) params_id: ParamsId,
    /// Per digit: [b_j, a_j] in NTT form over the top-level QP basis.
    pub(crate) digits: Vec<[Poly<Ntt>; 2]>,
    pub(crate) seed: Seed,
}

impl KeySwitchKey {
    /// A key from `from` (s' in NTT form over the top-level Q) to the secret `sk`.
    pub(crate) fn generate(sk: &SecretKey, from: &Poly<Ntt>, sampler: &mut Sampler) -> Result<Self, RlweError> {
        Self::generate_to(sk, &sk.ntt, from, sampler)
    }

    /// A key from `from` to `target` (NTT form over the top-level QP), both derived from `sk`.
    pub(crate) fn generate_to(sk: &SecretKey, target: &Poly<Ntt>, from: &Poly<Ntt>, sampler: &mut Sampler) -> Result<Self, RlweError> {
        let params = &sk.params;
        let top = params.level(params.max_level())?;
        if params.p().is_none() {
            return Err(RlweError::NoSpecialPrimes);
        }
        let qp = params.qp().clone();
        let s = target;
        let seed = sampler.seed();
        let mut expander = Sampler::from_seed(seed);
        let n = params.n();
        let mut digits = Vec::with_capacity(top.digits.len());
        for range in &top.digits {
            let a = expander.uniform_poly(&qp);
            let mut b = minus_as_plus_e(params, &a, s, sampler)?;
            for i in range.clone() {
                let qi = qp.moduli()[i];
                let p_mod_qi = params.p().map(|p| p.moduli().iter().fold(1u64, |acc, pj| qi.mul(acc, qi.reduce(pj.value())))).unwrap_or(1);
                let c = lycaon_math::ShoupConstant::new(p_mod_qi, &qi);
                let src = &from.data()[i * n..(i + 1) * n];
                for (x, &y) in b.limb_mut(i).iter_mut().zip(src) {
                    *x = qi.add(*x, qi.mul_shoup(y, c.value, c.shoup));
                }
            }
            digits.push([b, a]);
        }
        Ok(Self { params_id: *params.id(), digits, seed })
    }

    pub fn params_id(&self) -> &ParamsId {
        &self.params_id
    }

    pub fn num_digits(&self) -> usize {
        self.digits.len()
    }
}

/// Relinearisation key: switches s^2 to s.
#[derive(Clone, Debug)]
pub struct RelinKey(pub(crate) KeySwitchKey);

impl RelinKey {
    pub fn generate(sk: &SecretKey, sampler: &mut Sampler) -> Result<Self, RlweError> {
        let q = sk.params.q().clone();
        let mut s2 = sk.ntt_on(&q)?;
        let s = s2.clone();
        sk.params.backend().mul_assign(&mut s2, &s)?;
        Ok(Self(KeySwitchKey::generate(sk, &s2, sampler)?))
    }

    pub fn key(&self) -> &KeySwitchKey {
        &self.0
    }
}

/// Galois keys: for each Galois element g, a key from s to s(X^(g^-1)). Key switching c_1 with it
/// and then applying X -> X^g gives a key switch of c_1(X^g) from s(X^g) to s, so the digits of
/// c_1 never need permuting and hoisted rotations share one decomposition untouched.
#[derive(Clone, Debug)]
pub struct GaloisKeys {
    pub(crate) params_id: ParamsId,
    pub(crate) keys: BTreeMap<u64, KeySwitchKey>,
}

impl GaloisKeys {
    /// Keys for the given Galois elements (each odd and below 2n).
    pub fn generate(sk: &SecretKey, galois_elements: &[u64], sampler: &mut Sampler) -> Result<Self, RlweError> {
        let params = &sk.params;
        let q = params.q().clone();
        let s = sk.ntt_on(&q)?;
        let two_n = 2 * params.n() as u64;
        let mut keys = BTreeMap::new();
        for &g in galois_elements {
            if keys.contains_key(&g) {
                continue;
            }
            Automorphism::new(g, params.n())?;
            let g_inv = lycaon_math::Modulus::new(two_n)?.inv(g)?;
            let inverse = Automorphism::new(g_inv, params.n())?;
            let target = params.backend().automorphism_ntt(&sk.ntt, &inverse)?;
            keys.insert(g, KeySwitchKey::generate_to(sk, &target, &s, sampler)?);
        }
        Ok(Self { params_id: *params.id(), keys })
    }

    /// Keys for batched row rotations by the given steps, plus the row swap when asked.
    pub fn for_rotations(sk: &SecretKey, steps: &[i64], row_swap: bool, sampler: &mut Sampler) -> Result<Self, RlweError> {
        let n = sk.params.n();
        let mut elements: Vec<u64> = steps.iter().map(|&s| rotation_galois_element(s, n)).filter(|&g| g != 1).collect();
        if row_swap {
            elements.push(row_swap_galois_element(n));
        }
        Self::generate(sk, &elements, sampler)
    }

    pub fn params_id(&self) -> &ParamsId {
        &self.params_id
    }

    pub fn get(&self, galois_element: u64) -> Option<&KeySwitchKey> {
        self.keys.get(&galois_element)
    }

    pub fn galois_elements(&self) -> impl Iterator<Item = u64> + '_ {
        self.keys.keys().copied()
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}
