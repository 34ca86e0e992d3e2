#![allow(dead_code)]
//! Shared set-up for the CKKS integration tests.

use std::sync::Arc;

use lycaon_ckks::rlwe::{Parameters, ParametersLiteral, PublicKey, SecretKey};
use lycaon_backend::RayonBackend;
use lycaon_ckks::{Ciphertext, CkksContext, Complex64, Decryptor, Encoder, EvaluationKeys, Evaluator, PublicKeyEncryptor, SecretKeyEncryptor};
use lycaon_math::Sampler;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub struct Setup {
    pub params: Arc<Parameters>,
    pub ctx: Arc<CkksContext>,
    pub sk: Arc<SecretKey>,
    pub pk: Arc<PublicKey>,
    /// Public-key encryption (what `encrypt` uses).
    pub enc: PublicKeyEncryptor,
    /// Secret-key encryption, seeded.
    pub sym: SecretKeyEncryptor,
    pub encoder: Encoder,
    pub eval: Evaluator,
    pub sampler: Sampler,
}

pub fn setup_literal(lit: ParametersLiteral, log_scale: i32, steps: &[i64]) -> Setup {
    let params = Parameters::with_backend(lit, RayonBackend::shared()).expect("parameters");
    let ctx = CkksContext::new(&params, 2f64.powi(log_scale)).unwrap();
    let mut sampler = Sampler::from_os().unwrap();
    let sk = SecretKey::generate(&params, &mut sampler).unwrap();
    let pk = PublicKey::generate(&sk, &mut sampler).unwrap();
    let keys = EvaluationKeys::generate(&sk, steps, true, &mut sampler).unwrap();
    let (sk, pk) = (Arc::new(sk), Arc::new(pk));
    let (enc, sym) = (PublicKeyEncryptor::new(&ctx, pk.clone()).unwrap(), SecretKeyEncryptor::new(&ctx, sk.clone()).unwrap());
    Setup { enc, sym, encoder: Encoder::new(&ctx), eval: Evaluator::new(&ctx, keys), params, ctx, sk, pk, sampler }
}

/// logN = 14, q_0 of 55 bits, 8 levels of 40 bits, one 55-bit special prime: 430 bits <= 438.
pub fn setup14(steps: &[i64]) -> Setup {
    setup_literal(lycaon_ckks::scale_stable_literal(1 << 14, 55, 40, 8, &[55]).unwrap(), 40, steps)
}

impl Setup {
    /// Uniform in [-1, 1] (real and imaginary parts).
    pub fn random_complex(&mut self, count: usize) -> Vec<Complex64> {
        (0..count).map(|_| Complex64::new(self.unit(), self.unit())).collect()
    }

    pub fn random_real(&mut self, count: usize) -> Vec<f64> {
        (0..count).map(|_| self.unit()).collect()
    }

    fn unit(&mut self) -> f64 {
        (self.sampler.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }

    pub fn encrypt(&mut self, values: &[Complex64]) -> Ciphertext {
        self.encrypt_at(values, self.ctx.max_level())
    }

    /// Encrypts at `level` with that level's canonical scale.
    pub fn encrypt_at(&mut self, values: &[Complex64], level: usize) -> Ciphertext {
        let pt = self.encoder.encode(values, level, self.ctx.scale_at(level).unwrap()).unwrap();
        self.enc.encrypt(&pt).unwrap()
    }

    pub fn encrypt_real(&mut self, values: &[f64]) -> Ciphertext {
        let c: Vec<Complex64> = values.iter().map(|&x| Complex64::new(x, 0.0)).collect();
        self.encrypt(&c)
    }

    pub fn decrypt(&self, ct: &Ciphertext) -> Vec<Complex64> {
        self.encoder.decode(&Decryptor::new(&self.ctx, &self.sk).unwrap().decrypt(ct).unwrap()).unwrap()
    }

    pub fn decrypt_real(&self, ct: &Ciphertext) -> Vec<f64> {
        self.decrypt(ct).into_iter().map(|c| c.re).collect()
    }
}

pub fn rotate_plain<T: Copy>(v: &[T], step: i64) -> Vec<T> {
    let s = v.len() as i64;
    (0..s).map(|i| v[((i + step).rem_euclid(s)) as usize]).collect()
}
