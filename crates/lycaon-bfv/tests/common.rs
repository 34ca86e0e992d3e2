#![allow(dead_code)]
//! Shared set-up for the BFV integration tests.

use std::sync::Arc;

use lycaon_bfv::noise::NoiseModel;
use lycaon_bfv::{BatchEncoder, BfvContext, CoeffEncoder, Decryptor, Evaluator, PublicKeyEncryptor, SecretKeyEncryptor};
use lycaon_bfv::rlwe::{GaloisKeys, Parameters, ParametersLiteral, PublicKey, RelinKey, SecretKey, Security};
use lycaon_math::Sampler;

pub struct Setup {
    pub params: Arc<Parameters>,
    pub ctx: Arc<BfvContext>,
    pub dec: Decryptor,
    /// Public-key encryption.
    pub enc: PublicKeyEncryptor,
    /// Secret-key encryption, seeded.
    pub sym: SecretKeyEncryptor,
    pub eval: Evaluator,
    pub pk: Arc<PublicKey>,
    pub rk: Option<RelinKey>,
    pub gk: Option<GaloisKeys>,
    pub model: NoiseModel,
    pub t: u64,
    pub sampler: Sampler,
    /// Single rotations and hoisted rotations the keys cover.
    pub rotations: Vec<i64>,
    pub hoisted: Vec<i64>,
}

pub const ROTATIONS: [i64; 6] = [1, 2, 3, -1, 7, 100];

pub fn setup_literal(lit: ParametersLiteral) -> Setup {
    let params = Parameters::new(lit).expect("parameters");
    let ctx = BfvContext::new(&params).unwrap();
    let mut sampler = Sampler::from_os().unwrap();
    let sk = SecretKey::generate(&params, &mut sampler).unwrap();
    let pk = PublicKey::generate(&sk, &mut sampler).unwrap();
    // At n = 32768 one Galois key is about 120 MB: test fewer steps there.
    let (rotations, hoisted): (Vec<i64>, Vec<i64>) =
        if params.n() >= 32768 { (vec![1, -1], vec![1, 2, 3]) } else { (ROTATIONS.to_vec(), (1..=9).collect()) };
    let (rk, gk) = if params.p().is_some() {
        let steps: Vec<i64> = rotations.iter().chain(&hoisted).copied().collect();
        (Some(RelinKey::generate(&sk, &mut sampler).unwrap()), Some(GaloisKeys::for_rotations(&sk, &steps, true, &mut sampler).unwrap()))
    } else {
        (None, None)
    };
    let t = params.plaintext_modulus().unwrap().value();
    let model = NoiseModel::from_params(&params).unwrap();
    let (sk, pk) = (Arc::new(sk), Arc::new(pk));
    Setup {
        enc: PublicKeyEncryptor::new(&ctx, pk.clone()).unwrap(),
        sym: SecretKeyEncryptor::new(&ctx, sk.clone()).unwrap(),
        dec: Decryptor::new(&ctx, sk).unwrap(),
        eval: Evaluator::new(&ctx),
        params,
        ctx,
        pk,
        rk,
        gk,
        model,
        t,
        sampler,
        rotations,
        hoisted,
    }
}

pub fn setup(n: usize, q_bits: &[u32], p_bits: &[u32], t_bits: u32, digits: usize, secure: bool) -> Setup {
    let mut lit = ParametersLiteral::bfv_from_bits(n, q_bits, p_bits, t_bits).unwrap();
    lit.key_switch_digits = digits;
    if !secure {
        lit.security = Security::InsecureTestOnly;
    }
    setup_literal(lit)
}

impl Setup {
    pub fn random(&mut self) -> Vec<u64> {
        (0..self.params.n()).map(|_| self.sampler.next_u64() % self.t).collect()
    }

    pub fn batch(&self) -> BatchEncoder {
        BatchEncoder::new(&self.params).unwrap()
    }

    pub fn coeff(&self) -> CoeffEncoder {
        CoeffEncoder::new(&self.params).unwrap()
    }
}

/// Plain negacyclic product modulo t.
pub fn negacyclic_mul(a: &[u64], b: &[u64], t: u64) -> Vec<u64> {
    let n = a.len();
    let mut out = vec![0u128; n];
    let t128 = t as u128;
    for i in 0..n {
        if a[i] == 0 {
            continue;
        }
        for j in 0..n {
            let p = a[i] as u128 * b[j] as u128 % t128;
            let k = i + j;
            if k < n { out[k] = (out[k] + p) % t128 } else { out[k - n] = (out[k - n] + t128 - p) % t128 }
        }
    }
    out.into_iter().map(|x| x as u64).collect()
}

/// Rotates each of the two rows of n/2 slots left by `step`.
pub fn rotate_rows_plain(v: &[u64], step: i64) -> Vec<u64> {
    let half = v.len() / 2;
    let s = step.rem_euclid(half as i64) as usize;
    let mut out = Vec::with_capacity(v.len());
    for row in 0..2 {
        let r = &v[row * half..(row + 1) * half];
        out.extend((0..half).map(|i| r[(i + s) % half]));
    }
    out
}
