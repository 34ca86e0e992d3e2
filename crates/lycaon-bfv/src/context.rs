//! Precomputed BFV constants per level: the scaling factor of encryption, the decryption rounding
//! constants and the Halevi-Polyakov-Shoup (2019) extended basis for ciphertext multiplication.

use std::sync::{Arc, OnceLock};

use lycaon_math::num_bigint::BigUint;
use lycaon_math::{ntt_primes, BaseConverter, Modulus, RnsBasis, ShoupConstant};
use lycaon_rlwe::Parameters;
use num_traits::ToPrimitive;

use crate::encoding::plaintext_modulus;
use crate::BfvError;

/// Constants for encryption and decryption at one level.
#[derive(Debug)]
pub(crate) struct LevelConstants {
    pub q: Arc<RnsBasis>,
    /// floor(Q_l / t) mod q_i.
    pub delta: Vec<ShoupConstant>,
    /// Q_l mod t.
    pub q_mod_t: u64,
    /// t / q_i as f64 (decryption).
    pub t_over_q: Vec<f64>,
    /// q_l^{-1} mod q_i for i < l (modulus switching away from this level).
    pub last_inv: Vec<ShoupConstant>,
}

/// The extended basis Pm and constants of HPS multiplication at one level.
#[derive(Debug)]
pub(crate) struct MulConstants {
    pub aux: Arc<RnsBasis>,
    pub q_to_aux: BaseConverter,
    pub aux_to_q: BaseConverter,
    /// (Q_l Pm / q_i)^{-1} mod q_i.
    pub joint_inv: Vec<ShoupConstant>,
    /// floor(t Pm / q_i) mod p_k, indexed [k][i].
    pub omega: Vec<Vec<u64>>,
    /// frac(t Pm / q_i).
    pub theta: Vec<f64>,
    /// t Q_l^{-1} mod p_k.
    pub t_q_inv: Vec<ShoupConstant>,
}

/// All BFV precomputation for one parameter set.
#[derive(Debug)]
pub struct BfvContext {
    pub(crate) params: Arc<Parameters>,
    pub(crate) t: Modulus,
    pub(crate) levels: Vec<LevelConstants>,
    aux_basis: Arc<RnsBasis>,
    mul: Vec<OnceLock<Result<MulConstants, BfvError>>>,
}

/// Bits of each auxiliary prime: below 2^50 so the NTT keeps its IFMA path.
const AUX_PRIME_BITS: u32 = 50;

impl BfvContext {
    pub fn new(params: &Arc<Parameters>) -> Result<Arc<Self>, BfvError> {
        let t = plaintext_modulus(params)?;
        let mut levels = Vec::with_capacity(params.max_level() + 1);
        for level in 0..=params.max_level() {
            let q = params.q_at(level)?.clone();
            let big_q = q.product();
            let delta_big = big_q / t.value();
            let delta = q.moduli().iter().map(|qi| ShoupConstant::new((&delta_big % qi.value()).to_u64().unwrap_or(0), qi)).collect();
            let q_mod_t = (big_q % t.value()).to_u64().unwrap_or(0);
            let t_over_q = q.moduli().iter().map(|qi| t.value() as f64 / qi.value() as f64).collect();
            let last = q.moduli()[level];
            let last_inv = q.moduli()[..level]
                .iter()
                .map(|qi| qi.inv(qi.reduce(last.value())).map(|v| ShoupConstant::new(v, qi)))
                .collect::<Result<Vec<_>, _>>()?;
            levels.push(LevelConstants { q, delta, q_mod_t, t_over_q, last_inv });
        }
        // Pm must hold round(t d / Q) for the tensor d: |t d / Q| <= t n Q / 2.
        let needed_bits = params.q().log2_product() + (t.value() as f64).log2() + (params.n() as f64).log2() + 3.0;
        let count = (needed_bits / (AUX_PRIME_BITS as f64 - 1.0)).ceil() as usize;
        let mut taken: Vec<u64> = params.qp().moduli().iter().map(|m| m.value()).collect();
        taken.push(t.value());
        let aux_primes = ntt_primes(AUX_PRIME_BITS, params.n(), count, &taken)?;
        let aux_moduli = aux_primes.iter().map(|&p| Modulus::new(p)).collect::<Result<Vec<_>, _>>()?;
        let aux_basis = RnsBasis::new(params.n(), &aux_moduli)?;
        let mul = (0..=params.max_level()).map(|_| OnceLock::new()).collect();
        Ok(Arc::new(Self { params: params.clone(), t, levels, aux_basis, mul }))
    }

    pub fn params(&self) -> &Arc<Parameters> {
        &self.params
    }

    pub fn plaintext_modulus(&self) -> u64 {
        self.t.value()
    }

    pub(crate) fn level(&self, level: usize) -> Result<&LevelConstants, BfvError> {
        self.levels.get(level).ok_or(BfvError::Rlwe(lycaon_rlwe::RlweError::LevelOutOfRange { level, max: self.levels.len() - 1 }))
    }

    pub(crate) fn mul_constants(&self, level: usize) -> Result<&MulConstants, BfvError> {
        let cell = self.mul.get(level).ok_or(BfvError::Rlwe(lycaon_rlwe::RlweError::LevelOutOfRange { level, max: self.mul.len() - 1 }))?;
        cell.get_or_init(|| self.build_mul(level)).as_ref().map_err(Clone::clone)
    }

    fn build_mul(&self, level: usize) -> Result<MulConstants, BfvError> {
        let q = self.levels[level].q.clone();
        let aux = self.aux_basis.clone();
        let joint = q.concat(&aux)?;
        let q_to_aux = BaseConverter::new(q.clone(), aux.clone())?;
        let aux_to_q = BaseConverter::new(aux.clone(), q.clone())?;
        let joint_inv = (0..q.len()).map(|i| joint.punctured_inverse(i)).collect();
        let t_pm = aux.product() * self.t.value();
        let omega = aux
            .moduli()
            .iter()
            .map(|pk| q.moduli().iter().map(|qi| ((&t_pm / qi.value()) % pk.value()).to_u64().unwrap_or(0)).collect())
            .collect();
        let theta = q.moduli().iter().map(|qi| (&t_pm % qi.value()).to_u64().unwrap_or(0) as f64 / qi.value() as f64).collect();
        let big_q: &BigUint = q.product();
        let t_q_inv = aux
            .moduli()
            .iter()
            .map(|pk| {
                let q_mod = (big_q % pk.value()).to_u64().unwrap_or(0);
                pk.inv(q_mod).map(|inv| ShoupConstant::new(pk.mul(inv, pk.reduce(self.t.value())), pk))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(MulConstants { aux, q_to_aux, aux_to_q, joint_inv, omega, theta, t_q_inv })
    }
}
