//! Baby-step giant-step linear transforms on resident operands, with their diagonals uploaded once
//! ([`ResidentDiagonals`]): the same algorithms as [`Evaluator::linear_transform_to_scale`]
//! (double hoisting when the transform asks for it and the parameters have special primes; the
//! singly hoisted one otherwise), so the results are identical bit for bit.

use std::collections::HashMap;
use std::sync::Arc;

use lycaon_backend::{LimbConstant, ResidentBackend};
use lycaon_rlwe::resident::{self as ks, ResidentPoly};

use crate::resident::ResidentCiphertext;
use crate::{rotation_galois_element, CkksError, LinearTransform, ResidentEvaluator};

/// A transform's diagonals encoded for one level and plaintext scale, in the backend's memory
/// (over Q_l P for a double-hoisted transform, Q_l otherwise).
pub struct ResidentDiagonals<B: ResidentBackend> {
    level: usize,
    sigma: f64,
    double_hoisting: bool,
    diagonals: HashMap<usize, ResidentPoly<B>>,
}

impl<B: ResidentBackend> ResidentDiagonals<B> {
    pub fn level(&self) -> usize {
        self.level
    }

    /// The plaintext scale the diagonals were encoded at.
    pub fn scale(&self) -> f64 {
        self.sigma
    }

    /// Bytes of diagonals in the backend's memory.
    pub fn bytes(&self) -> usize {
        self.diagonals.values().map(|p| 8 * p.basis.len() * p.basis.n()).sum()
    }
}

impl<B: ResidentBackend> ResidentEvaluator<B> {
    /// Encodes `lt`'s diagonals for inputs at `level` whose products land on plaintext scale
    /// `sigma` ([`crate::Evaluator::linear_transform_scale`]) and uploads them: done once per
    /// (transform, level, scale), like [`LinearTransform::prepare`] on the host.
    pub fn prepare_transform(&self, lt: &LinearTransform, level: usize, sigma: f64) -> Result<ResidentDiagonals<B>, CkksError> {
        let double_hoisting = self.double_hoisted(lt);
        // Encoded on the backend, over Q_l P or Q_l as the host path does; each diagonal
        // pre-rotated by minus its giant step.
        let params = self.params();
        let basis = if double_hoisting { lycaon_rlwe::hoisting::qp_at(params, level)?.clone() } else { params.q_at(level)?.clone() };
        let mut diagonals = HashMap::new();
        for (g, terms) in lt.plan() {
            for (_, k) in terms {
                let values = crate::linear::rotate_vec(&lt.diagonals()[&k], -(g as i64));
                diagonals.insert(k, self.encode_poly(&values, lt.slots(), sigma, &basis)?);
            }
        }
        Ok(ResidentDiagonals { level, sigma, double_hoisting, diagonals })
    }

    fn double_hoisted(&self, lt: &LinearTransform) -> bool {
        lt.double_hoisting() && self.params().p().is_some()
    }

    /// [`crate::Evaluator::linear_transform_to_scale`] with diagonals prepared by
    /// [`Self::prepare_transform`] for the ciphertext's level and for this target (their scale
    /// must be the one the host would use: target q_l / s). Errors as the host's, and
    /// `InvalidArgument` for diagonals prepared for another level, scale or hoisting.
    pub fn linear_transform_prepared(&self, ct: &ResidentCiphertext<B>, lt: &LinearTransform, diags: &ResidentDiagonals<B>, target: f64) -> Result<ResidentCiphertext<B>, CkksError> {
        self.transform(ct, lt, diags, target, false)
    }

    /// The transform with the result at exactly `target` (bootstrapping's, as
    /// `hoisted::apply` sets it).
    pub(crate) fn transform_exact(&self, ct: &ResidentCiphertext<B>, lt: &LinearTransform, diags: &ResidentDiagonals<B>, target: f64) -> Result<ResidentCiphertext<B>, CkksError> {
        self.transform(ct, lt, diags, target, true)
    }

    fn transform(&self, ct: &ResidentCiphertext<B>, lt: &LinearTransform, diags: &ResidentDiagonals<B>, target: f64, exact_target: bool) -> Result<ResidentCiphertext<B>, CkksError> {
        let level = lt.check_input(ct)?;
        crate::encoding::check_scale(target)?;
        let sigma = target * self.context().prime_at(level)? as f64 / ct.scale();
        // The host evaluator rescales its target by (scale used) / (scale asked), here 1 but not
        // always exactly in floating point; the same expression keeps the result's scale
        // bit-identical. Bootstrapping sets the target as it is.
        let target = if exact_target { target } else { target * sigma / sigma };
        if diags.level != level || diags.sigma.to_bits() != sigma.to_bits() || diags.double_hoisting != self.double_hoisted(lt) {
            return Err(CkksError::InvalidArgument {
                what: format!(
                    "diagonals prepared for level {} at scale 2^{:.3}, the input needs level {level} at 2^{:.3}",
                    diags.level,
                    diags.sigma.log2(),
                    sigma.log2()
                ),
            });
        }
        let n = self.context().n();
        let steps = lt.rotations();
        for &s in &steps {
            let g = rotation_galois_element(s, n);
            if !self.has_galois_key(g) {
                return Err(CkksError::MissingRotationKey { what: format!("rotation by {s} (linear transform)"), galois_element: g });
            }
        }
        let plan = lt.plan();
        let babies = LinearTransform::plan_babies(&plan);
        let index: HashMap<usize, usize> = babies.iter().enumerate().map(|(t, &b)| (b, t)).collect();
        let diag = |k: usize| diags.diagonals.get(&k).ok_or(CkksError::Internal("prepared diagonal"));
        let mut acc: Option<[ResidentPoly<B>; 2]> = None;
        if diags.double_hoisting {
            let params = self.params();
            // Baby steps over Q_l P: (sigma_i(P c_0 + u_0), sigma_i(u_1)); step 0 is (P c_0, P c_1).
            let extended = self.hoisted_babies(ct, &babies, "linear transform")?;
            for (&g, terms) in &plan {
                let [i0, i1] = self.dot(terms.iter().map(|&(b, k)| Ok((&extended[index[&b]], diag(k)?))))?;
                // Giant step: ModDown c_1 of the inner sum, decompose it, switch lazily; c_0 stays P-lifted.
                let partial = if g == 0 { [i0, i1] } else { self.giant_rotation(&i0, &i1, g as i64, "linear transform")? };
                acc = Some(self.accumulate(acc, partial)?);
            }
            let [a0, a1] = acc.ok_or(CkksError::Internal("no giant step"))?;
            let parts = vec![ks::mod_down(params, self.b(), &a0)?, ks::mod_down(params, self.b(), &a1)?];
            let out = self.wrap_parts(parts, ct.scale() * sigma, ct.log_slots());
            let mut out = self.rescale(&out)?;
            out.set_scale(target);
            return Ok(out);
        }
        let rotated = self.rotate_hoisted(ct, &babies.iter().map(|&b| b as i64).collect::<Vec<_>>())?;
        let pairs: Vec<[&ResidentPoly<B>; 2]> = rotated.iter().map(|r| [r.part(0), r.part(1)]).collect();
        let mut partials = Vec::with_capacity(plan.len());
        for (&g, terms) in &plan {
            let [p0, p1] = self.dot_refs(terms.iter().map(|&(b, k)| Ok((pairs[index[&b]], diag(k)?))))?;
            let inner = self.wrap_parts(vec![p0, p1], ct.scale() * sigma, ct.log_slots());
            partials.push(if g == 0 { inner } else { self.rotate(&inner, g as i64)? });
        }
        for p in partials {
            let [p0, p1] = p.into_parts::<2>();
            acc = Some(self.accumulate(acc, [p0, p1])?);
        }
        let [a0, a1] = acc.ok_or(CkksError::Internal("no giant step"))?;
        let mut out = self.rescale(&self.wrap_parts(vec![a0, a1], ct.scale() * sigma, ct.log_slots()))?;
        out.set_scale(target);
        Ok(out)
    }

    /// P x over Q_l P from x over Q_l: limb i times P mod q_i, the special primes' limbs zero.
    pub(crate) fn lift_times_p(&self, x: &ResidentPoly<B>, qp: &Arc<lycaon_math::RnsBasis>, p_mod_q: &[u64]) -> Result<ResidentPoly<B>, CkksError> {
        let n = qp.n();
        let own = x.num_limbs() * n;
        let mut scaled = x.duplicate(self.b())?;
        let constants: Vec<LimbConstant> = p_mod_q.iter().map(|&c| (c, 0)).collect();
        self.b().mul_constants_assign(&mut scaled.mem, &constants, None, &x.basis)?;
        let mut out = self.b().alloc(qp.len() * n)?;
        self.b().copy_words(&mut out, 0, &scaled.mem, 0, own)?;
        self.b().zero_words(&mut out, own, qp.len() * n - own)?;
        Ok(ResidentPoly { mem: out, basis: qp.clone() })
    }

    pub(crate) fn automorphism(&self, x: &ResidentPoly<B>, g: u64) -> Result<ResidentPoly<B>, CkksError> {
        Ok(ResidentPoly { mem: self.b().automorphism(&x.mem, g, &x.basis)?, basis: x.basis.clone() })
    }

    /// (sum_t c0_t (.) d_t, sum_t c1_t (.) d_t) over the terms' basis (every sum fully reduced,
    /// so equal to the host's lazily accumulated one).
    fn dot<'a>(&self, terms: impl Iterator<Item = Result<(&'a [ResidentPoly<B>; 2], &'a ResidentPoly<B>), CkksError>>) -> Result<[ResidentPoly<B>; 2], CkksError>
    where
        B: 'a,
    {
        self.dot_refs(terms.map(|t| t.map(|(pair, d)| ([&pair[0], &pair[1]], d))))
    }

    fn dot_refs<'a>(&self, terms: impl Iterator<Item = Result<([&'a ResidentPoly<B>; 2], &'a ResidentPoly<B>), CkksError>>) -> Result<[ResidentPoly<B>; 2], CkksError>
    where
        B: 'a,
    {
        let mut acc: Option<[ResidentPoly<B>; 2]> = None;
        for term in terms {
            let (pair, d) = term?;
            match &mut acc {
                None => {
                    let mut prods = [pair[0].duplicate(self.b())?, pair[1].duplicate(self.b())?];
                    for p in &mut prods {
                        self.b().mul_assign(&mut p.mem, &d.mem, &d.basis)?;
                    }
                    acc = Some(prods);
                }
                Some(sums) => {
                    for (s, p) in sums.iter_mut().zip(pair) {
                        self.b().mul_add_assign(&mut s.mem, &p.mem, &d.mem, &d.basis)?;
                    }
                }
            }
        }
        acc.ok_or(CkksError::Internal("a giant step without terms"))
    }

    pub(crate) fn accumulate(&self, acc: Option<[ResidentPoly<B>; 2]>, next: [ResidentPoly<B>; 2]) -> Result<[ResidentPoly<B>; 2], CkksError> {
        match acc {
            None => Ok(next),
            Some([mut a0, mut a1]) => {
                self.b().add_assign(&mut a0.mem, &next[0].mem, &a0.basis)?;
                self.b().add_assign(&mut a1.mem, &next[1].mem, &a1.basis)?;
                Ok([a0, a1])
            }
        }
    }
}
