//! BFV encryption, decryption and evaluation (Brakerski 2012, Fan-Vercauteren 2012) with RNS
//! multiplication by Halevi-Polyakov-Shoup (2019). Ciphertexts stay in NTT form over Q_l; a
//! message m is carried as round(Q_l m / t) with m centred in (-t/2, t/2].

use std::sync::Arc;

use lycaon_math::num_bigint::BigInt;
use lycaon_math::{mul_accumulate_lazy, rotation_galois_element, row_swap_galois_element, Coeff, Ntt, Poly, Sampler};
use lycaon_rlwe::{keyswitch, Ciphertext, GaloisKeys, Parameters, PublicKey, RelinKey, RlweError, SecretKey, SeededCiphertext};
use num_traits::{Signed, ToPrimitive, Zero};

use lycaon_rlwe::wire::{open_expected, seal_envelope, ObjectKind, WireReader, WireWriter};

use crate::context::BfvContext;
use crate::{BfvError, Plaintext};

fn check_plain(ctx: &BfvContext, pt: &Plaintext) -> Result<(), BfvError> {
    if pt.params_id() != ctx.params.id() {
        return Err(RlweError::ParamsMismatch { what: "plaintext" }.into());
    }
    Ok(())
}

/// round(Q_l m / t) in NTT form over Q_l, for m centred.
fn scaled_message(ctx: &BfvContext, pt: &Plaintext, level: usize) -> Result<Poly<Ntt>, BfvError> {
    check_plain(ctx, pt)?;
    let lc = ctx.level(level)?;
    let t = &ctx.t;
    let n = ctx.params.n();
    let (t_val, r_t) = (t.value() as i128, lc.q_mod_t as i128);
    // round(Q m / t) = m floor(Q / t) + round(m (Q mod t) / t).
    let centred: Vec<i64> = pt.coeffs.iter().map(|&m| t.center(m)).collect();
    let fix: Vec<i64> = centred.iter().map(|&m| (2 * m as i128 * r_t + t_val).div_euclid(2 * t_val) as i64).collect();
    let mut data = vec![0u64; lc.q.len() * n];
    for ((limb, qi), d) in data.chunks_exact_mut(n).zip(lc.q.moduli()).zip(&lc.delta) {
        for ((x, &m), &f) in limb.iter_mut().zip(&centred).zip(&fix) {
            *x = qi.add(qi.mul_shoup(qi.reduce_i64(m), d.value, d.shoup), qi.reduce_i64(f));
        }
    }
    Ok(ctx.params.backend().ntt(Poly::from_kernel_output(&lc.q, data))?)
}

/// Public-key encryption: what a server holds to re-randomise its answers, and what anyone may
/// use to encrypt for the key's owner. It owns the public key and a CSPRNG seeded by the OS, and
/// nothing of it takes a [`SecretKey`], so a server-side value of this type cannot hold one:
///
/// ```compile_fail,E0308
/// use std::sync::Arc;
/// use lycaon_bfv::rlwe::{Parameters, ParametersLiteral, SecretKey, Security};
/// use lycaon_bfv::{BfvContext, PublicKeyEncryptor};
/// use lycaon_math::Sampler;
///
/// let mut lit = ParametersLiteral::bfv_from_bits(64, &[50, 50], &[51], 17)?;
/// lit.security = Security::InsecureTestOnly;
/// let params = Parameters::new(lit)?;
/// let ctx = BfvContext::new(&params)?;
/// let secret_key = Arc::new(SecretKey::generate(&params, &mut Sampler::from_os()?)?);
/// let encryptor = PublicKeyEncryptor::new(&ctx, secret_key)?; // expected `Arc<PublicKey>`
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct PublicKeyEncryptor {
    ctx: Arc<BfvContext>,
    public_key: Arc<PublicKey>,
    sampler: Sampler,
}

impl PublicKeyEncryptor {
    /// Errors: [`RlweError::ParamsMismatch`] when the key belongs to other parameters; a math
    /// error when the OS gives no randomness.
    pub fn new(ctx: &Arc<BfvContext>, public_key: Arc<PublicKey>) -> Result<Self, BfvError> {
        if public_key.params_id() != ctx.params.id() {
            return Err(RlweError::ParamsMismatch { what: "public key" }.into());
        }
        Ok(Self { ctx: ctx.clone(), public_key, sampler: Sampler::from_os()? })
    }

    pub fn public_key(&self) -> &Arc<PublicKey> {
        &self.public_key
    }

    /// Encrypts at the top level. Errors if the plaintext belongs to other parameters.
    pub fn encrypt(&mut self, pt: &Plaintext) -> Result<Ciphertext, BfvError> {
        let level = self.ctx.params.max_level();
        let mut ct = lycaon_rlwe::encrypt_zero_public(&self.ctx.params, &self.public_key, level, &mut self.sampler)?;
        ct.parts_mut()[0].add_assign(&scaled_message(&self.ctx, pt, level)?)?;
        Ok(ct)
    }

    /// `ct` plus a fresh public-key encryption of zero at its level: the same message, fresh
    /// randomness (the noise grows by that of one encryption; flooding is the caller's). Errors
    /// if the ciphertext belongs to other parameters.
    pub fn rerandomise(&mut self, ct: &Ciphertext) -> Result<Ciphertext, BfvError> {
        if ct.params_id() != self.ctx.params.id() {
            return Err(RlweError::ParamsMismatch { what: "ciphertext" }.into());
        }
        let zero = lycaon_rlwe::encrypt_zero_public(&self.ctx.params, &self.public_key, ct.level(), &mut self.sampler)?;
        let mut out = ct.clone();
        for (part, z) in out.parts_mut().iter_mut().zip(zero.parts()) {
            part.add_assign(z)?;
        }
        Ok(out)
    }
}

/// Secret-key (symmetric) encryption at the top level, seeded: half the bytes of a public-key
/// ciphertext upstream. Holds the secret key, so it belongs to the client.
pub struct SecretKeyEncryptor {
    ctx: Arc<BfvContext>,
    secret_key: Arc<SecretKey>,
    sampler: Sampler,
}

impl SecretKeyEncryptor {
    /// Errors: [`RlweError::ParamsMismatch`] when the key belongs to other parameters; a math
    /// error when the OS gives no randomness.
    pub fn new(ctx: &Arc<BfvContext>, secret_key: Arc<SecretKey>) -> Result<Self, BfvError> {
        if secret_key.params().id() != ctx.params.id() {
            return Err(RlweError::ParamsMismatch { what: "secret key" }.into());
        }
        Ok(Self { ctx: ctx.clone(), secret_key, sampler: Sampler::from_os()? })
    }

    /// Encrypts at the top level, returned seeded. Errors if the plaintext belongs to other
    /// parameters.
    pub fn encrypt(&mut self, pt: &Plaintext) -> Result<SeededCiphertext, BfvError> {
        let level = self.ctx.params.max_level();
        let mut ct = lycaon_rlwe::encrypt_zero_symmetric(&self.secret_key, level, &mut self.sampler)?;
        ct.c0_mut().add_assign(&scaled_message(&self.ctx, pt, level)?)?;
        Ok(ct)
    }
}

/// Encryption with either key, passed per call; it holds no key itself. Kept for
/// `lycaon-runtime`'s client key set, which still uses it; new code uses [`PublicKeyEncryptor`]
/// (server, anyone) or [`SecretKeyEncryptor`] (client), whose types say which key they hold.
pub struct Encryptor {
    ctx: Arc<BfvContext>,
    sampler: Sampler,
}

impl Encryptor {
    pub fn new(ctx: &Arc<BfvContext>) -> Result<Self, BfvError> {
        Ok(Self { ctx: ctx.clone(), sampler: Sampler::from_os()? })
    }

    /// Public-key encryption at the top level.
    pub fn encrypt(&mut self, pk: &PublicKey, pt: &Plaintext) -> Result<Ciphertext, BfvError> {
        let level = self.ctx.params.max_level();
        let mut ct = lycaon_rlwe::encrypt_zero_public(&self.ctx.params, pk, level, &mut self.sampler)?;
        ct.parts_mut()[0].add_assign(&scaled_message(&self.ctx, pt, level)?)?;
        Ok(ct)
    }

    /// Symmetric encryption at the top level, returned seeded.
    pub fn encrypt_symmetric(&mut self, sk: &SecretKey, pt: &Plaintext) -> Result<SeededCiphertext, BfvError> {
        let level = self.ctx.params.max_level();
        let mut ct = lycaon_rlwe::encrypt_zero_symmetric(sk, level, &mut self.sampler)?;
        ct.c0_mut().add_assign(&scaled_message(&self.ctx, pt, level)?)?;
        Ok(ct)
    }
}

/// Decrypts and measures noise; holds the secret key, so it belongs to the client.
pub struct Decryptor {
    ctx: Arc<BfvContext>,
    sk: Arc<SecretKey>,
}

impl Decryptor {
    pub fn new(ctx: &Arc<BfvContext>, sk: Arc<SecretKey>) -> Result<Self, BfvError> {
        if sk.params().id() != ctx.params.id() {
            return Err(RlweError::ParamsMismatch { what: "secret key" }.into());
        }
        Ok(Self { ctx: ctx.clone(), sk })
    }

    pub fn secret_key(&self) -> &Arc<SecretKey> {
        &self.sk
    }

    fn phase_coeff(&self, ct: &Ciphertext) -> Result<Poly<Coeff>, BfvError> {
        Ok(self.ctx.params.backend().intt(lycaon_rlwe::phase(&self.sk, ct)?)?)
    }

    /// m = round(t (c_0 + c_1 s) / Q_l) mod t, computed as round(sum_i y_i t / q_i) with
    /// y_i = [x_i (Q_l/q_i)^{-1}]_{q_i}; the float error (< 2^-28) only matters for a ciphertext
    /// whose noise budget is already exhausted.
    pub fn decrypt(&self, ct: &Ciphertext) -> Result<Plaintext, BfvError> {
        let x = self.phase_coeff(ct)?;
        let lc = self.ctx.level(ct.level())?;
        let n = self.ctx.params.n();
        let mut sum = vec![0f64; n];
        for (i, qi) in lc.q.moduli().iter().enumerate() {
            let c = lc.q.punctured_inverse(i);
            let w = lc.t_over_q[i];
            for (s, &xi) in sum.iter_mut().zip(x.limb(i)) {
                *s += qi.mul_shoup(xi, c.value, c.shoup) as f64 * w;
            }
        }
        let coeffs = sum.iter().map(|&s| self.ctx.t.reduce(s.round() as u64)).collect();
        Ok(Plaintext { params_id: *self.ctx.params.id(), coeffs })
    }

    /// Invariant noise budget in bits: log2(Q_l) - 1 - log2 ||[t (c_0 + c_1 s)]_{Q_l}||_inf.
    /// Decryption is correct while it is positive.
    pub fn noise_budget(&self, ct: &Ciphertext) -> Result<f64, BfvError> {
        let n = self.ctx.params.n();
        self.budget_over(ct, 0..n)
    }

    /// The noise budget over some coefficients only (those a coefficient-encoded result is read
    /// from); errors on a position >= n.
    pub fn noise_budget_at(&self, ct: &Ciphertext, positions: &[usize]) -> Result<f64, BfvError> {
        let n = self.ctx.params.n();
        if let Some(&bad) = positions.iter().find(|&&p| p >= n) {
            return Err(BfvError::WrongLength { expected: n, found: bad + 1 });
        }
        self.budget_over(ct, positions.iter().copied())
    }

    fn budget_over(&self, ct: &Ciphertext, positions: impl Iterator<Item = usize>) -> Result<f64, BfvError> {
        let x = self.phase_coeff(ct)?;
        let q = x.basis().clone();
        let t = self.ctx.t.value();
        // Fast path: Q t < 2^127, so Garner's mixed radix and the product fit in u128.
        let log_max = if q.log2_product() + (t as f64).log2() < 126.0 {
            let big_q: u128 = q.moduli().iter().map(|m| m.value() as u128).product();
            let mut max = 0u128;
            let mut residues = vec![0u64; q.len()];
            for k in positions {
                residues.iter_mut().enumerate().for_each(|(i, r)| *r = x.limb(i)[k]);
                let v = garner_u128(q.moduli(), &residues) * t as u128 % big_q;
                max = max.max(v.min(big_q - v));
            }
            if max == 0 { 0.0 } else { (max as f64).log2() }
        } else {
            let big_q = BigInt::from(q.product().clone());
            let t = BigInt::from(t);
            let mut max = BigInt::zero();
            let mut residues = vec![0u64; q.len()];
            for k in positions {
                residues.iter_mut().enumerate().for_each(|(i, r)| *r = x.limb(i)[k]);
                let v = BigInt::from(q.compose(&residues)) * &t % &big_q;
                let centred = if &v + &v > big_q { &big_q - v } else { v.abs() };
                if centred > max {
                    max = centred;
                }
            }
            if max.is_zero() { 0.0 } else { log2_big(&max) }
        };
        Ok((q.log2_product() - 1.0 - log_max).max(0.0))
    }
}

/// The integer in [0, prod q_i) with these residues (the product must fit in u128).
fn garner_u128(moduli: &[lycaon_math::Modulus], residues: &[u64]) -> u128 {
    let mut value: u128 = 0;
    let mut radix: u128 = 1;
    for (qi, &r) in moduli.iter().zip(residues) {
        // digit = (r - value) / radix mod q_i.
        let q = qi.value();
        let cur = (value % q as u128) as u64;
        let rad = (radix % q as u128) as u64;
        let inv = qi.inv(rad).unwrap_or(0);
        let digit = qi.mul(qi.sub(r, cur), inv);
        value += digit as u128 * radix;
        radix *= q as u128;
    }
    value
}

fn log2_big(x: &BigInt) -> f64 {
    let bits = x.bits();
    let shift = bits.saturating_sub(60);
    (x >> shift).to_f64().unwrap_or(1.0).log2() + shift as f64
}

/// A plaintext lifted to Q_l and transformed, for repeated multiplication by ciphertexts.
#[derive(Clone, Debug)]
pub struct PreparedPlaintext {
    pub(crate) poly: Poly<Ntt>,
    pub(crate) params_id: lycaon_rlwe::wire::ParamsId,
}

impl PreparedPlaintext {
    pub fn level(&self) -> usize {
        self.poly.num_limbs() - 1
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = WireWriter::new();
        w.put_u32(self.level() as u32);
        lycaon_rlwe::put_poly(&mut w, &self.poly);
        seal_envelope(ObjectKind::PlaintextNtt, &self.params_id, &w.into_bytes())
    }

    pub fn from_bytes(params: &Parameters, bytes: &[u8]) -> Result<Self, BfvError> {
        let payload = open_expected(bytes, ObjectKind::PlaintextNtt, Some(params.id())).map_err(RlweError::from)?;
        let mut r = WireReader::new(payload);
        let level = r.get_u32().map_err(RlweError::from)? as usize;
        let poly = lycaon_rlwe::get_poly(&mut r, params.q_at(level)?)?;
        r.finish().map_err(RlweError::from)?;
        Ok(Self { poly, params_id: *params.id() })
    }
}

/// Homomorphic operations. Holds no secret; keys are passed per call.
#[derive(Clone, Debug)]
pub struct Evaluator {
    ctx: Arc<BfvContext>,
}

fn same_level(a: &Ciphertext, b: &Ciphertext) -> Result<(), BfvError> {
    if a.level() != b.level() {
        return Err(RlweError::LevelMismatch { lhs: a.level(), rhs: b.level() }.into());
    }
    Ok(())
}

impl Evaluator {
    pub fn new(ctx: &Arc<BfvContext>) -> Self {
        Self { ctx: ctx.clone() }
    }

    pub fn context(&self) -> &Arc<BfvContext> {
        &self.ctx
    }

    fn params(&self) -> &Parameters {
        &self.ctx.params
    }

    fn check(&self, ct: &Ciphertext) -> Result<(), BfvError> {
        if ct.params_id() != self.params().id() {
            return Err(RlweError::ParamsMismatch { what: "ciphertext" }.into());
        }
        Ok(())
    }

    fn zip_parts(&self, a: &Ciphertext, b: &Ciphertext, sub: bool) -> Result<Ciphertext, BfvError> {
        self.check(a)?;
        self.check(b)?;
        same_level(a, b)?;
        let (long, short) = if a.len() >= b.len() { (a, b) } else { (b, a) };
        let mut parts = long.parts().to_vec();
        if sub && a.len() < b.len() {
            // a - b with b longer: negate b's parts, then add a.
            parts.iter_mut().for_each(|p| p.neg_assign());
            for (p, q) in parts.iter_mut().zip(a.parts()) {
                p.add_assign(q)?;
            }
        } else {
            for (p, q) in parts.iter_mut().zip(short.parts()) {
                if sub { p.sub_assign(q)? } else { p.add_assign(q)? }
            }
        }
        Ok(Ciphertext::from_parts(self.params(), parts)?)
    }

    pub fn add(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext, BfvError> {
        self.zip_parts(a, b, false)
    }

    pub fn sub(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext, BfvError> {
        self.zip_parts(a, b, true)
    }

    pub fn negate(&self, a: &Ciphertext) -> Result<Ciphertext, BfvError> {
        self.check(a)?;
        let mut out = a.clone();
        out.parts_mut().iter_mut().for_each(|p| p.neg_assign());
        Ok(out)
    }

    pub fn add_plain(&self, a: &Ciphertext, pt: &Plaintext) -> Result<Ciphertext, BfvError> {
        self.check(a)?;
        let mut out = a.clone();
        out.parts_mut()[0].add_assign(&scaled_message(&self.ctx, pt, a.level())?)?;
        Ok(out)
    }

    /// a + pt for a seeded ciphertext: only c_0 changes, so the sum stays seeded (half the
    /// bytes of a full ciphertext when it travels on).
    pub fn add_plain_seeded(&self, a: &SeededCiphertext, pt: &Plaintext) -> Result<SeededCiphertext, BfvError> {
        if a.params_id() != self.params().id() {
            return Err(RlweError::ParamsMismatch { what: "seeded ciphertext" }.into());
        }
        let mut out = a.clone();
        let level = out.level();
        out.c0_mut().add_assign(&scaled_message(&self.ctx, pt, level)?)?;
        Ok(out)
    }

    pub fn sub_plain(&self, a: &Ciphertext, pt: &Plaintext) -> Result<Ciphertext, BfvError> {
        self.check(a)?;
        let mut out = a.clone();
        out.parts_mut()[0].sub_assign(&scaled_message(&self.ctx, pt, a.level())?)?;
        Ok(out)
    }

    /// Lifts a plaintext (centred) to Q_l and transforms it once, for many multiplications.
    pub fn prepare_plain(&self, pt: &Plaintext, level: usize) -> Result<PreparedPlaintext, BfvError> {
        check_plain(&self.ctx, pt)?;
        let q = self.params().q_at(level)?;
        let centred: Vec<i64> = pt.coeffs.iter().map(|&m| self.ctx.t.center(m)).collect();
        let poly = self.params().backend().ntt(Poly::from_signed(q, &centred)?)?;
        Ok(PreparedPlaintext { poly, params_id: *self.params().id() })
    }

    pub fn mul_plain_prepared(&self, a: &Ciphertext, pt: &PreparedPlaintext) -> Result<Ciphertext, BfvError> {
        self.check(a)?;
        if pt.params_id != *self.params().id() {
            return Err(RlweError::ParamsMismatch { what: "prepared plaintext" }.into());
        }
        if pt.level() != a.level() {
            return Err(RlweError::LevelMismatch { lhs: a.level(), rhs: pt.level() }.into());
        }
        let mut out = a.clone();
        for p in out.parts_mut() {
            self.params().backend().mul_assign(p, &pt.poly)?;
        }
        Ok(out)
    }

    /// Ciphertext times plaintext polynomial (slot-wise product for batch-encoded plaintexts).
    pub fn mul_plain(&self, a: &Ciphertext, pt: &Plaintext) -> Result<Ciphertext, BfvError> {
        self.check(a)?;
        self.mul_plain_prepared(a, &self.prepare_plain(pt, a.level())?)
    }

    /// Multiplies by an integer scalar (taken modulo t, centred).
    pub fn mul_scalar(&self, a: &Ciphertext, scalar: i64) -> Result<Ciphertext, BfvError> {
        self.check(a)?;
        let c = self.ctx.t.center(self.ctx.t.reduce_i64(scalar));
        let q = self.params().q_at(a.level())?;
        let scalars: Vec<u64> = q.moduli().iter().map(|qi| qi.reduce_i64(c)).collect();
        let parts = a.parts().iter().map(|p| p.mul_limb_scalars(&scalars)).collect();
        Ok(Ciphertext::from_parts(self.params(), parts)?)
    }

    /// Tensor product of two 2-part ciphertexts, scaled by t/Q (HPS): a 3-part ciphertext.
    pub fn multiply(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext, BfvError> {
        let [d0, d1, d2] = self.tensor(a, b)?;
        let backend = self.params().backend();
        Ok(Ciphertext::from_parts(self.params(), vec![backend.ntt(d0)?, backend.ntt(d1)?, backend.ntt(d2)?])?)
    }

    /// Multiplication followed by relinearisation, sharing the coefficient form of the third part.
    pub fn multiply_relin(&self, a: &Ciphertext, b: &Ciphertext, rk: &RelinKey) -> Result<Ciphertext, BfvError> {
        let [d0, d1, d2] = self.tensor(a, b)?;
        let backend = self.params().backend();
        let d2_ntt = backend.ntt(d2.clone())?;
        let dec = keyswitch::decompose(self.params(), &d2, &d2_ntt)?;
        let [k0, k1] = keyswitch::key_switch_decomposed(self.params(), &dec, rk.key())?;
        let mut c0 = backend.ntt(d0)?;
        let mut c1 = backend.ntt(d1)?;
        c0.add_assign(&k0)?;
        c1.add_assign(&k1)?;
        Ok(Ciphertext::from_parts(self.params(), vec![c0, c1])?)
    }

    pub fn relinearize(&self, a: &Ciphertext, rk: &RelinKey) -> Result<Ciphertext, BfvError> {
        self.check(a)?;
        Ok(keyswitch::relinearize(self.params(), a, rk)?)
    }

    /// The three tensor parts round(t/Q d_j) in coefficient form over Q_l.
    fn tensor(&self, a: &Ciphertext, b: &Ciphertext) -> Result<[Poly<Coeff>; 3], BfvError> {
        self.check(a)?;
        self.check(b)?;
        same_level(a, b)?;
        if a.len() != 2 || b.len() != 2 {
            return Err(RlweError::WrongSize { expected: 2, found: a.len().max(b.len()) }.into());
        }
        let level = a.level();
        let mc = self.ctx.mul_constants(level)?;
        let backend = self.params().backend();
        let extend = |p: &Poly<Ntt>| -> Result<Poly<Ntt>, BfvError> {
            Ok(backend.ntt(backend.convert_basis(&mc.q_to_aux, &backend.intt(p.clone())?, true)?)?)
        };
        let (a0, a1) = (&a.parts()[0], &a.parts()[1]);
        let (b0, b1) = (&b.parts()[0], &b.parts()[1]);
        let (a0p, a1p, b0p, b1p) = (extend(a0)?, extend(a1)?, extend(b0)?, extend(b1)?);
        let tensor_q = tensor_ntt(a0, a1, b0, b1);
        let tensor_p = tensor_ntt(&a0p, &a1p, &b0p, &b1p);
        let mut out = Vec::with_capacity(3);
        for (dq, dp) in tensor_q.into_iter().zip(tensor_p) {
            let scaled = scale_to_aux(mc, &backend.intt(dq)?, &backend.intt(dp)?);
            out.push(backend.convert_basis(&mc.aux_to_q, &scaled, true)?);
        }
        let [d0, d1, d2]: [Poly<Coeff>; 3] = out.try_into().map_err(|_| BfvError::Internal("tensor arity"))?;
        Ok([d0, d1, d2])
    }

    /// Rotates both rows of slots left by `step` (right for negative steps).
    pub fn rotate_rows(&self, a: &Ciphertext, step: i64, gk: &GaloisKeys) -> Result<Ciphertext, BfvError> {
        self.check(a)?;
        let g = rotation_galois_element(step, self.params().n());
        if g == 1 {
            return Ok(a.clone());
        }
        Ok(keyswitch::automorphism(self.params(), a, g, gk)?)
    }

    /// Several row rotations of one ciphertext sharing a single decomposition (hoisting).
    pub fn rotate_rows_hoisted(&self, a: &Ciphertext, steps: &[i64], gk: &GaloisKeys) -> Result<Vec<Ciphertext>, BfvError> {
        let n = self.params().n();
        let elements: Vec<u64> = steps.iter().map(|&s| rotation_galois_element(s, n)).collect();
        self.apply_galois_hoisted(a, &elements, gk)
    }

    /// Applies the automorphisms X -> X^g for several Galois elements (rotations, the row swap or
    /// their compositions) sharing one decomposition; g = 1 returns a copy.
    pub fn apply_galois_hoisted(&self, a: &Ciphertext, elements: &[u64], gk: &GaloisKeys) -> Result<Vec<Ciphertext>, BfvError> {
        self.check(a)?;
        let non_trivial: Vec<u64> = elements.iter().copied().filter(|&g| g != 1).collect();
        // Only the identity: no decomposition at all.
        let rotated = if non_trivial.is_empty() { Vec::new() } else { keyswitch::automorphisms_hoisted(self.params(), a, &non_trivial, gk)? };
        let mut rotated = rotated.into_iter();
        elements
            .iter()
            .map(|&g| if g == 1 { Ok(a.clone()) } else { rotated.next().ok_or(BfvError::Internal("hoisted count")) })
            .collect()
    }

    /// Swaps the two rows of slots.
    pub fn swap_rows(&self, a: &Ciphertext, gk: &GaloisKeys) -> Result<Ciphertext, BfvError> {
        self.check(a)?;
        Ok(keyswitch::automorphism(self.params(), a, row_swap_galois_element(self.params().n()), gk)?)
    }

    /// Drops the last prime: c -> round(c q_l^{-1}) over Q_{l-1}; the message is unchanged.
    pub fn mod_switch_to_next(&self, a: &Ciphertext) -> Result<Ciphertext, BfvError> {
        self.check(a)?;
        let level = a.level();
        if level == 0 {
            return Err(BfvError::LowestLevel);
        }
        let lc = self.ctx.level(level)?;
        let q_next = self.params().q_at(level - 1)?.clone();
        let backend = self.params().backend();
        let n = self.params().n();
        let last = lc.q.moduli()[level];
        let last_plan = lc.q.plans()[level].clone();
        let mut parts = Vec::with_capacity(a.len());
        for p in a.parts() {
            let mut r = p.limb(level).to_vec();
            last_plan.inverse(&mut r);
            let centred: Vec<i64> = r.iter().map(|&x| last.center(x)).collect();
            let r_ntt = backend.ntt(Poly::from_signed(&q_next, &centred)?)?;
            let mut data = p.data()[..level * n].to_vec();
            for (i, qi) in q_next.moduli().iter().enumerate() {
                let c = lc.last_inv[i];
                for (x, &y) in data[i * n..(i + 1) * n].iter_mut().zip(r_ntt.limb(i)) {
                    *x = qi.mul_shoup(qi.sub(*x, y), c.value, c.shoup);
                }
            }
            parts.push(Poly::from_kernel_output(&q_next, data));
        }
        Ok(Ciphertext::from_parts(self.params(), parts)?)
    }

    /// Switches down to `level` (no-op at the same level).
    pub fn mod_switch_to(&self, a: &Ciphertext, level: usize) -> Result<Ciphertext, BfvError> {
        if level > a.level() {
            return Err(RlweError::LevelMismatch { lhs: a.level(), rhs: level }.into());
        }
        let mut out = a.clone();
        while out.level() > level {
            out = self.mod_switch_to_next(&out)?;
        }
        Ok(out)
    }
}

/// (a0 b0, a0 b1 + a1 b0, a1 b1) point-wise, the middle term reduced once from u128.
fn tensor_ntt(a0: &Poly<Ntt>, a1: &Poly<Ntt>, b0: &Poly<Ntt>, b1: &Poly<Ntt>) -> [Poly<Ntt>; 3] {
    let basis = a0.basis().clone();
    let n = basis.n();
    let mut d = [vec![0u64; basis.len() * n], vec![0u64; basis.len() * n], vec![0u64; basis.len() * n]];
    let mut acc = vec![0u128; n];
    for (i, q) in basis.moduli().iter().enumerate() {
        let r = i * n..(i + 1) * n;
        for ((o, &x), &y) in d[0][r.clone()].iter_mut().zip(a0.limb(i)).zip(b0.limb(i)) {
            *o = q.mul(x, y);
        }
        for ((o, &x), &y) in d[2][r.clone()].iter_mut().zip(a1.limb(i)).zip(b1.limb(i)) {
            *o = q.mul(x, y);
        }
        acc.iter_mut().for_each(|s| *s = 0);
        mul_accumulate_lazy(&mut acc, a0.limb(i), b1.limb(i));
        mul_accumulate_lazy(&mut acc, a1.limb(i), b0.limb(i));
        lycaon_math::reduce_lazy(&acc, &mut d[1][r], q);
    }
    d.map(|data| Poly::from_kernel_output(&basis, data))
}

/// HPS scale-and-round: from x over Q_l Pm (coefficient form) to round(t x / Q_l) over Pm.
fn scale_to_aux(mc: &crate::context::MulConstants, xq: &Poly<Coeff>, xp: &Poly<Coeff>) -> Poly<Coeff> {
    let q = xq.basis();
    let n = q.n();
    let mut y = vec![0u64; q.len() * n];
    let mut frac = vec![0f64; n];
    for (i, qi) in q.moduli().iter().enumerate() {
        let c = mc.joint_inv[i];
        let theta = mc.theta[i];
        for ((yk, &xk), f) in y[i * n..(i + 1) * n].iter_mut().zip(xq.limb(i)).zip(frac.iter_mut()) {
            *yk = qi.mul_shoup(xk, c.value, c.shoup);
            *f += *yk as f64 * theta;
        }
    }
    let rounded: Vec<u64> = frac.iter().map(|&f| f.round() as u64).collect();
    let aux = &mc.aux;
    let mut out = vec![0u64; aux.len() * n];
    let mut acc = vec![0u128; n];
    for (k, pk) in aux.moduli().iter().enumerate() {
        let c = mc.t_q_inv[k];
        for ((a, &x), &r) in acc.iter_mut().zip(xp.limb(k)).zip(&rounded) {
            *a = pk.mul_shoup(x, c.value, c.shoup) as u128 + r as u128;
        }
        for (i, &w) in mc.omega[k].iter().enumerate() {
            for (a, &yk) in acc.iter_mut().zip(&y[i * n..(i + 1) * n]) {
                *a += yk as u128 * w as u128;
            }
        }
        lycaon_math::reduce_lazy(&acc, &mut out[k * n..(k + 1) * n], pk);
    }
    Poly::from_kernel_output(aux, out)
}
