//! The CKKS operations that polynomial evaluation and bootstrapping are written against, so that
//! the same algorithms run on host ciphertexts ([`Evaluator`]) and on resident ones
//! ([`ResidentEvaluator`], a device's memory) and give identical results: each implementation's
//! operations are bit for bit the host evaluator's.

use std::sync::Arc;

use lycaon_backend::ResidentBackend;
use lycaon_math::{Coeff, Poly};
use num_complex::Complex64;

use crate::bootstrap::hoisted::{self, ExtendedDiagonals};
use crate::bootstrap::EncapsulationKeys;
use crate::resident::ResidentCiphertext;
use crate::{Ciphertext, CkksContext, CkksError, Encoder, Evaluator, ExtendedSum, GiantStep, GiantSums, HoistedRotations, LinearTransform, ResidentDiagonals, ResidentEvaluator};

/// What the generic algorithms read and set on a ciphertext.
pub trait CiphertextMeta: Send + Sync {
    fn level(&self) -> usize;
    fn scale(&self) -> f64;
    fn log_slots(&self) -> u32;
    fn parts(&self) -> usize;
    /// The scale it is read at (metadata only, no check).
    fn assume_scale(&mut self, scale: f64);
    /// The slot count it is read at (metadata only, no check).
    fn assume_log_slots(&mut self, log_slots: u32);

    fn slots(&self) -> usize {
        1 << self.log_slots()
    }
}

/// CKKS operations with [`Evaluator`]'s contracts (levels, scales, errors).
pub trait CkksOps: Sync {
    type Ct: CiphertextMeta;

    fn context(&self) -> &Arc<CkksContext>;
    fn duplicate(&self, ct: &Self::Ct) -> Result<Self::Ct, CkksError>;
    fn add(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct, CkksError>;
    fn sub(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct, CkksError>;
    fn add_const(&self, ct: &Self::Ct, c: Complex64) -> Result<Self::Ct, CkksError>;
    fn mul_const(&self, ct: &Self::Ct, c: f64) -> Result<Self::Ct, CkksError>;
    fn mul_const_scaled(&self, ct: &Self::Ct, c: Complex64, const_scale: f64) -> Result<Self::Ct, CkksError>;
    fn mul_integer(&self, ct: &Self::Ct, k: i64) -> Result<Self::Ct, CkksError>;
    fn mul_relin(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct, CkksError>;
    fn rescale(&self, ct: &Self::Ct) -> Result<Self::Ct, CkksError>;
    fn drop_to_level(&self, ct: &Self::Ct, level: usize) -> Result<Self::Ct, CkksError>;
    fn rotate(&self, ct: &Self::Ct, step: i64) -> Result<Self::Ct, CkksError>;
    fn conjugate(&self, ct: &Self::Ct) -> Result<Self::Ct, CkksError>;
    /// sum_t c_t x_t at `level` for per-limb integer constants c_t (residues of Q_level), read at
    /// `scale`: the leaves of a Chebyshev evaluation.
    fn integer_combination(&self, terms: &[(Self::Ct, Vec<u64>)], level: usize, scale: f64) -> Result<Self::Ct, CkksError>;
}

impl CiphertextMeta for Ciphertext {
    fn level(&self) -> usize {
        Ciphertext::level(self)
    }
    fn scale(&self) -> f64 {
        self.scale
    }
    fn log_slots(&self) -> u32 {
        self.log_slots
    }
    fn parts(&self) -> usize {
        self.len()
    }
    fn assume_scale(&mut self, scale: f64) {
        self.scale = scale;
    }
    fn assume_log_slots(&mut self, log_slots: u32) {
        self.log_slots = log_slots;
    }
}

impl CkksOps for Evaluator {
    type Ct = Ciphertext;

    fn context(&self) -> &Arc<CkksContext> {
        Evaluator::context(self)
    }
    fn duplicate(&self, ct: &Ciphertext) -> Result<Ciphertext, CkksError> {
        Ok(ct.clone())
    }
    fn add(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext, CkksError> {
        Evaluator::add(self, a, b)
    }
    fn sub(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext, CkksError> {
        Evaluator::sub(self, a, b)
    }
    fn add_const(&self, ct: &Ciphertext, c: Complex64) -> Result<Ciphertext, CkksError> {
        Evaluator::add_const(self, ct, c)
    }
    fn mul_const(&self, ct: &Ciphertext, c: f64) -> Result<Ciphertext, CkksError> {
        Evaluator::mul_const(self, ct, c)
    }
    fn mul_const_scaled(&self, ct: &Ciphertext, c: Complex64, const_scale: f64) -> Result<Ciphertext, CkksError> {
        Evaluator::mul_const_scaled(self, ct, c, const_scale)
    }
    fn mul_integer(&self, ct: &Ciphertext, k: i64) -> Result<Ciphertext, CkksError> {
        Evaluator::mul_integer(self, ct, k)
    }
    fn mul_relin(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext, CkksError> {
        Evaluator::mul_relin(self, a, b)
    }
    fn rescale(&self, ct: &Ciphertext) -> Result<Ciphertext, CkksError> {
        Evaluator::rescale(self, ct)
    }
    fn drop_to_level(&self, ct: &Ciphertext, level: usize) -> Result<Ciphertext, CkksError> {
        Evaluator::drop_to_level(self, ct, level)
    }
    fn rotate(&self, ct: &Ciphertext, step: i64) -> Result<Ciphertext, CkksError> {
        Evaluator::rotate(self, ct, step)
    }
    fn conjugate(&self, ct: &Ciphertext) -> Result<Ciphertext, CkksError> {
        Evaluator::conjugate(self, ct)
    }
    fn integer_combination(&self, terms: &[(Ciphertext, Vec<u64>)], level: usize, scale: f64) -> Result<Ciphertext, CkksError> {
        self.integer_combination_host(terms, level, scale)
    }
}

impl<B: ResidentBackend> CiphertextMeta for ResidentCiphertext<B> {
    fn level(&self) -> usize {
        ResidentCiphertext::level(self)
    }
    fn scale(&self) -> f64 {
        ResidentCiphertext::scale(self)
    }
    fn log_slots(&self) -> u32 {
        ResidentCiphertext::log_slots(self)
    }
    fn parts(&self) -> usize {
        self.len()
    }
    fn assume_scale(&mut self, scale: f64) {
        self.set_scale(scale);
    }
    fn assume_log_slots(&mut self, log_slots: u32) {
        self.set_log_slots(log_slots);
    }
}

impl<B: ResidentBackend> CkksOps for ResidentEvaluator<B> {
    type Ct = ResidentCiphertext<B>;

    fn context(&self) -> &Arc<CkksContext> {
        ResidentEvaluator::context(self)
    }
    fn duplicate(&self, ct: &Self::Ct) -> Result<Self::Ct, CkksError> {
        self.copy_of(ct)
    }
    fn add(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct, CkksError> {
        ResidentEvaluator::add(self, a, b)
    }
    fn sub(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct, CkksError> {
        ResidentEvaluator::sub(self, a, b)
    }
    fn add_const(&self, ct: &Self::Ct, c: Complex64) -> Result<Self::Ct, CkksError> {
        ResidentEvaluator::add_const(self, ct, c)
    }
    fn mul_const(&self, ct: &Self::Ct, c: f64) -> Result<Self::Ct, CkksError> {
        ResidentEvaluator::mul_const(self, ct, c)
    }
    fn mul_const_scaled(&self, ct: &Self::Ct, c: Complex64, const_scale: f64) -> Result<Self::Ct, CkksError> {
        ResidentEvaluator::mul_const_scaled(self, ct, c, const_scale)
    }
    fn mul_integer(&self, ct: &Self::Ct, k: i64) -> Result<Self::Ct, CkksError> {
        ResidentEvaluator::mul_integer(self, ct, k)
    }
    fn mul_relin(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct, CkksError> {
        ResidentEvaluator::mul_relin(self, a, b)
    }
    fn rescale(&self, ct: &Self::Ct) -> Result<Self::Ct, CkksError> {
        ResidentEvaluator::rescale(self, ct)
    }
    fn drop_to_level(&self, ct: &Self::Ct, level: usize) -> Result<Self::Ct, CkksError> {
        ResidentEvaluator::drop_to_level(self, ct, level)
    }
    fn rotate(&self, ct: &Self::Ct, step: i64) -> Result<Self::Ct, CkksError> {
        ResidentEvaluator::rotate(self, ct, step)
    }
    fn conjugate(&self, ct: &Self::Ct) -> Result<Self::Ct, CkksError> {
        ResidentEvaluator::conjugate(self, ct)
    }
    fn integer_combination(&self, terms: &[(Self::Ct, Vec<u64>)], level: usize, scale: f64) -> Result<Self::Ct, CkksError> {
        self.integer_combination_resident(terms, level, scale)
    }
}

/// What bootstrapping needs beyond [`CkksOps`]: its double-hoisted transforms with diagonals
/// encoded once, the raise of a level-0 ciphertext to the top modulus, and the encapsulation
/// key switches.
pub trait BootstrapOps: CkksOps {
    /// A transform's diagonals over Q_l P as this evaluator keeps them.
    type Diagonals: Send + Sync;

    fn prepare_extended(&self, lt: &LinearTransform, level: usize, sigma: f64) -> Result<Self::Diagonals, CkksError>;
    /// M ct with diagonals encoded at `sigma` = target q_l / s, the result at exactly `target`.
    fn apply_extended(&self, ct: &Self::Ct, lt: &LinearTransform, diags: &Self::Diagonals, sigma: f64, target: f64) -> Result<Self::Ct, CkksError>;
    /// The level-0 ciphertext's residues, centred mod q_0, as integers mod Q_top (scale and
    /// slots unchanged).
    fn raise(&self, ct: &Self::Ct) -> Result<Self::Ct, CkksError>;
    /// Key switch with an encapsulation key: to the sparse secret (at level 0) when
    /// `to_sparse`, back to the dense one (at the top) otherwise.
    fn switch_encapsulation(&self, ct: &Self::Ct, keys: &EncapsulationKeys, to_sparse: bool) -> Result<Self::Ct, CkksError>;
}

impl BootstrapOps for Evaluator {
    type Diagonals = ExtendedDiagonals;

    fn prepare_extended(&self, lt: &LinearTransform, level: usize, sigma: f64) -> Result<ExtendedDiagonals, CkksError> {
        hoisted::encode_extended(Evaluator::context(self), lt, level, sigma)
    }

    fn apply_extended(&self, ct: &Ciphertext, lt: &LinearTransform, diags: &ExtendedDiagonals, sigma: f64, target: f64) -> Result<Ciphertext, CkksError> {
        hoisted::apply(self, ct, lt, diags, sigma, target)
    }

    fn raise(&self, ct: &Ciphertext) -> Result<Ciphertext, CkksError> {
        let params = self.params();
        let backend = params.backend();
        let top = params.q_at(params.max_level())?.clone();
        let q0 = params.q_at(0)?.moduli()[0];
        let mut parts = Vec::with_capacity(2);
        for part in ct.inner.parts() {
            let coeff: Poly<Coeff> = backend.intt(part.clone())?;
            let centred: Vec<i64> = coeff.limb(0).iter().map(|&x| q0.center(x)).collect();
            parts.push(backend.ntt(Poly::<Coeff>::from_signed(&top, &centred)?)?);
        }
        self.wrap(parts, ct.scale, ct.log_slots)
    }

    fn switch_encapsulation(&self, ct: &Ciphertext, keys: &EncapsulationKeys, to_sparse: bool) -> Result<Ciphertext, CkksError> {
        let key = if to_sparse { &keys.dense_to_sparse } else { &keys.sparse_to_dense };
        let inner = lycaon_rlwe::keyswitch::switch_key(self.params(), &ct.inner, key)?;
        Ok(Ciphertext { inner, scale: ct.scale, log_slots: ct.log_slots })
    }
}

impl<B: ResidentBackend> BootstrapOps for ResidentEvaluator<B> {
    type Diagonals = ResidentDiagonals<B>;

    fn prepare_extended(&self, lt: &LinearTransform, level: usize, sigma: f64) -> Result<ResidentDiagonals<B>, CkksError> {
        // Bootstrapping's transforms are double hoisted whatever their flag says.
        self.prepare_transform(&lt.clone().with_double_hoisting(true), level, sigma)
    }

    fn apply_extended(&self, ct: &Self::Ct, lt: &LinearTransform, diags: &ResidentDiagonals<B>, _sigma: f64, target: f64) -> Result<Self::Ct, CkksError> {
        self.transform_exact(ct, &lt.clone().with_double_hoisting(true), diags, target)
    }

    fn raise(&self, ct: &Self::Ct) -> Result<Self::Ct, CkksError> {
        self.raise_resident(ct)
    }

    fn switch_encapsulation(&self, ct: &Self::Ct, _keys: &EncapsulationKeys, to_sparse: bool) -> Result<Self::Ct, CkksError> {
        self.switch_encapsulation_resident(ct, to_sparse)
    }
}

/// What the FHE network layers need beyond [`BootstrapOps`]: hoisted rotations, the
/// double-hoisted rotation sums of the multiplexed convolutions, products and sums with plaintext
/// values (encoded where the ciphertexts live), and linear transforms.
pub trait LayerOps: BootstrapOps {
    /// The polynomial type of the rotation sums (host or resident).
    type Poly: Send + Sync;

    fn rotate_hoisted(&self, ct: &Self::Ct, steps: &[i64]) -> Result<Vec<Self::Ct>, CkksError>;
    fn hoist_rotations(&self, ct: &Self::Ct, steps: &[i64]) -> Result<HoistedRotations<Self::Poly>, CkksError>;
    fn add_rotated_products(&self, sums: &mut GiantSums<Self::Poly>, hoisted: &HoistedRotations<Self::Poly>, giants: &[GiantStep<'_>]) -> Result<(), CkksError>;
    /// `a` += `b` (giant sums of the same level, scale and slots).
    fn merge_giant_sums(&self, a: &mut GiantSums<Self::Poly>, b: GiantSums<Self::Poly>) -> Result<(), CkksError>;
    fn close_giant_sums(&self, sums: GiantSums<Self::Poly>) -> Result<ExtendedSum<Self::Poly>, CkksError>;
    fn finish_extended(&self, sum: ExtendedSum<Self::Poly>) -> Result<Self::Ct, CkksError>;
    /// ct (.) values, the values encoded in the ciphertext's slots at its level and `plain_scale`.
    fn mul_values(&self, ct: &Self::Ct, values: &[f64], plain_scale: f64) -> Result<Self::Ct, CkksError>;
    /// ct + values, encoded at the ciphertext's level and scale.
    fn add_values(&self, ct: &Self::Ct, values: &[f64]) -> Result<Self::Ct, CkksError>;
    /// See [`Evaluator::linear_transform`].
    fn linear_transform(&self, ct: &Self::Ct, lt: &LinearTransform) -> Result<Self::Ct, CkksError>;

    /// See [`Evaluator::plaintext_scale_at`].
    fn plaintext_scale_at(&self, level: usize, scale: f64) -> Result<f64, CkksError> {
        let ctx = self.context();
        if level == 0 {
            return ctx.scale_at(0);
        }
        Ok(ctx.scale_at(level - 1)? * ctx.prime_at(level)? as f64 / scale)
    }
}

fn complex(values: &[f64]) -> Vec<Complex64> {
    values.iter().map(|&x| Complex64::new(x, 0.0)).collect()
}

impl LayerOps for Evaluator {
    type Poly = Poly<lycaon_math::Ntt>;

    fn rotate_hoisted(&self, ct: &Ciphertext, steps: &[i64]) -> Result<Vec<Ciphertext>, CkksError> {
        Evaluator::rotate_hoisted(self, ct, steps)
    }
    fn hoist_rotations(&self, ct: &Ciphertext, steps: &[i64]) -> Result<HoistedRotations, CkksError> {
        Evaluator::hoist_rotations(self, ct, steps)
    }
    fn add_rotated_products(&self, sums: &mut GiantSums, hoisted: &HoistedRotations, giants: &[GiantStep<'_>]) -> Result<(), CkksError> {
        Evaluator::add_rotated_products(self, sums, hoisted, giants)
    }
    fn merge_giant_sums(&self, a: &mut GiantSums, b: GiantSums) -> Result<(), CkksError> {
        a.add_assign(b)
    }
    fn close_giant_sums(&self, sums: GiantSums) -> Result<ExtendedSum, CkksError> {
        Evaluator::close_giant_sums(self, sums)
    }
    fn finish_extended(&self, sum: ExtendedSum) -> Result<Ciphertext, CkksError> {
        Evaluator::finish_extended(self, sum)
    }
    fn mul_values(&self, ct: &Ciphertext, values: &[f64], plain_scale: f64) -> Result<Ciphertext, CkksError> {
        let pt = Encoder::new(Evaluator::context(self)).encode_with_slots(&complex(values), ct.slots(), ct.level(), plain_scale)?;
        self.mul_plain(ct, &pt)
    }
    fn add_values(&self, ct: &Ciphertext, values: &[f64]) -> Result<Ciphertext, CkksError> {
        let pt = Encoder::new(Evaluator::context(self)).encode_with_slots(&complex(values), ct.slots(), ct.level(), ct.scale())?;
        self.add_plain(ct, &pt)
    }
    fn linear_transform(&self, ct: &Ciphertext, lt: &LinearTransform) -> Result<Ciphertext, CkksError> {
        Evaluator::linear_transform(self, ct, lt)
    }
}

impl<B: ResidentBackend> LayerOps for ResidentEvaluator<B> {
    type Poly = lycaon_rlwe::resident::ResidentPoly<B>;

    fn rotate_hoisted(&self, ct: &Self::Ct, steps: &[i64]) -> Result<Vec<Self::Ct>, CkksError> {
        ResidentEvaluator::rotate_hoisted(self, ct, steps)
    }
    fn hoist_rotations(&self, ct: &Self::Ct, steps: &[i64]) -> Result<HoistedRotations<Self::Poly>, CkksError> {
        ResidentEvaluator::hoist_rotations(self, ct, steps)
    }
    fn add_rotated_products(&self, sums: &mut GiantSums<Self::Poly>, hoisted: &HoistedRotations<Self::Poly>, giants: &[GiantStep<'_>]) -> Result<(), CkksError> {
        ResidentEvaluator::add_rotated_products(self, sums, hoisted, giants)
    }
    fn merge_giant_sums(&self, a: &mut GiantSums<Self::Poly>, b: GiantSums<Self::Poly>) -> Result<(), CkksError> {
        ResidentEvaluator::merge_giant_sums(self, a, b)
    }
    fn close_giant_sums(&self, sums: GiantSums<Self::Poly>) -> Result<ExtendedSum<Self::Poly>, CkksError> {
        ResidentEvaluator::close_giant_sums(self, sums)
    }
    fn finish_extended(&self, sum: ExtendedSum<Self::Poly>) -> Result<Self::Ct, CkksError> {
        ResidentEvaluator::finish_extended(self, sum)
    }
    fn mul_values(&self, ct: &Self::Ct, values: &[f64], plain_scale: f64) -> Result<Self::Ct, CkksError> {
        let pt = self.encode(&complex(values), ct.slots(), ct.level(), plain_scale)?;
        self.mul_plain(ct, &pt)
    }
    fn add_values(&self, ct: &Self::Ct, values: &[f64]) -> Result<Self::Ct, CkksError> {
        let pt = self.encode(&complex(values), ct.slots(), ct.level(), ct.scale())?;
        self.add_plain(ct, &pt)
    }
    fn linear_transform(&self, ct: &Self::Ct, lt: &LinearTransform) -> Result<Self::Ct, CkksError> {
        if ct.level() == 0 {
            return Err(CkksError::NotEnoughLevels { op: "linear_transform", needed: 1, level: 0 });
        }
        let target = self.context().scale_at(ct.level() - 1)?;
        crate::encoding::check_scale(target)?;
        let sigma = target * self.context().prime_at(ct.level())? as f64 / ct.scale();
        let diags = self.prepare_transform(lt, ct.level(), sigma)?;
        self.linear_transform_prepared(ct, lt, &diags, target)
    }
}
