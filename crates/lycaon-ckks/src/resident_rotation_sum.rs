//! Double-hoisted sums of rotated plaintext products ([`crate::rotation_sum`]) on resident
//! operands: the hoisted baby steps, the inner sums and the giant steps stay in the backend's
//! memory, and each plaintext is encoded there from its slot values. The same algorithm as the
//! host's, so the results are identical bit for bit.

use lycaon_backend::ResidentBackend;
use lycaon_rlwe::resident::{self as ks, ResidentPoly};

use crate::resident::ResidentCiphertext;
use crate::rotation_sum::rotate_values;
use crate::{rotation_galois_element, CkksError, ExtendedSum, GiantStep, GiantSums, HoistedRotations, ResidentEvaluator};

/// Resident hoisted rotations, giant sums and extended sums.
pub type ResidentHoisted<B> = HoistedRotations<ResidentPoly<B>>;
pub type ResidentGiantSums<B> = GiantSums<ResidentPoly<B>>;
pub type ResidentExtendedSum<B> = ExtendedSum<ResidentPoly<B>>;

impl<B: ResidentBackend> ResidentEvaluator<B> {
    /// The baby steps of double hoisting over Q_l P: (sigma_b(P c_0 + u_0), sigma_b(u_1)) for
    /// each step b (step 0: (P c_0, P c_1)), sharing one decomposition of c_1. `what` names the
    /// caller in a missing key's error.
    pub(crate) fn hoisted_babies(&self, ct: &ResidentCiphertext<B>, babies: &[usize], what: &str) -> Result<Vec<[ResidentPoly<B>; 2]>, CkksError> {
        let level = ct.level();
        let params = self.params();
        let n = self.context().n();
        let qp = lycaon_rlwe::hoisting::qp_at(params, level)?.clone();
        let p_mod_q = lycaon_rlwe::keyswitch::p_mod_q(params, level)?;
        let (c0, c1) = (ct.part(0), ct.part(1));
        let keys = babies.iter().map(|&b| if b == 0 { Ok(None) } else { self.rotation_key(b as i64, what).map(Some) }).collect::<Result<Vec<_>, _>>()?;
        let p_c0 = self.lift_times_p(c0, &qp, &p_mod_q)?;
        let dec = if keys.iter().any(Option::is_some) { Some(ks::decompose(params, self.b(), c1)?) } else { None };
        let mut out = Vec::with_capacity(babies.len());
        for (&b, key) in babies.iter().zip(keys) {
            let Some((g, key)) = key else {
                out.push([p_c0.duplicate(self.b())?, self.lift_times_p(c1, &qp, &p_mod_q)?]);
                continue;
            };
            let dec = dec.as_ref().ok_or(CkksError::Internal("decomposition"))?;
            debug_assert_eq!(g, rotation_galois_element(b as i64, n));
            let [mut u0, u1] = ks::key_switch_decomposed_lazy(params, self.b(), dec, key)?;
            self.b().add_assign(&mut u0.mem, &p_c0.mem, &qp)?;
            out.push([self.automorphism(&u0, g)?, self.automorphism(&u1, g)?]);
        }
        Ok(out)
    }

    /// A giant step of double hoisting: rot_g of an inner sum (i0, i1) over Q_l P, moving only
    /// i1 down to switch it (i0 stays P-lifted).
    pub(crate) fn giant_rotation(&self, i0: &ResidentPoly<B>, i1: &ResidentPoly<B>, giant: i64, what: &str) -> Result<[ResidentPoly<B>; 2], CkksError> {
        let params = self.params();
        let (g, key) = self.rotation_key(giant, what)?;
        let a1 = ks::mod_down(params, self.b(), i1)?;
        let dec = ks::decompose(params, self.b(), &a1)?;
        let [mut w0, w1] = ks::key_switch_decomposed_lazy(params, self.b(), &dec, key)?;
        self.b().add_assign(&mut w0.mem, &i0.mem, &i0.basis)?;
        Ok([self.automorphism(&w0, g)?, self.automorphism(&w1, g)?])
    }

    /// See [`crate::Evaluator::hoist_rotations`].
    pub fn hoist_rotations(&self, ct: &ResidentCiphertext<B>, steps: &[i64]) -> Result<ResidentHoisted<B>, CkksError> {
        let babies = crate::rotation_sum::hoisting_steps(ct, steps)?;
        let extended = self.hoisted_babies(ct, &babies, "hoisted rotations")?;
        let index = babies.iter().enumerate().map(|(t, &b)| (b, t)).collect();
        Ok(HoistedRotations { level: ct.level(), scale: ct.scale(), log_slots: ct.log_slots(), index, extended })
    }

    /// See [`crate::Evaluator::rotated_products`].
    pub fn rotated_products(&self, hoisted: &ResidentHoisted<B>, giants: &[GiantStep<'_>], plain_scale: f64) -> Result<ResidentExtendedSum<B>, CkksError> {
        let mut sums = GiantSums::new(hoisted, plain_scale);
        self.add_rotated_products(&mut sums, hoisted, giants)?;
        self.close_giant_sums(sums)
    }

    /// See [`crate::Evaluator::add_rotated_products`]: each plaintext is encoded on the backend.
    pub fn add_rotated_products(&self, sums: &mut ResidentGiantSums<B>, hoisted: &ResidentHoisted<B>, giants: &[GiantStep<'_>]) -> Result<(), CkksError> {
        sums.check_products(hoisted, giants)?;
        for g in giants {
            if g.giant.rem_euclid(hoisted.slots() as i64) != 0 {
                self.rotation_key(g.giant, "giant step")?;
            }
        }
        let slots = hoisted.slots();
        let qp = lycaon_rlwe::keyswitch::extended_basis(self.params(), hoisted.level)?;
        for g in giants.iter().filter(|g| !g.terms.is_empty()) {
            let mut inner: Option<[ResidentPoly<B>; 2]> = None;
            for &(b, v) in &g.terms {
                let pt = self.encode_poly(&rotate_values(v, -g.giant), slots, sums.plain_scale, &qp)?;
                let rotated = &hoisted.extended[hoisted.index[&(b.rem_euclid(slots as i64) as usize)]];
                match &mut inner {
                    None => {
                        let mut prods = [rotated[0].duplicate(self.b())?, rotated[1].duplicate(self.b())?];
                        for p in &mut prods {
                            self.b().mul_assign(&mut p.mem, &pt.mem, &qp)?;
                        }
                        inner = Some(prods);
                    }
                    Some(acc) => {
                        for (a, r) in acc.iter_mut().zip(rotated) {
                            self.b().mul_add_assign(&mut a.mem, &r.mem, &pt.mem, &qp)?;
                        }
                    }
                }
            }
            let inner = inner.ok_or(CkksError::Internal("empty giant step"))?;
            let giant = g.giant.rem_euclid(slots as i64);
            match sums.inner.get_mut(&giant) {
                Some([a0, a1]) => {
                    self.b().add_assign(&mut a0.mem, &inner[0].mem, &qp)?;
                    self.b().add_assign(&mut a1.mem, &inner[1].mem, &qp)?;
                }
                None => {
                    sums.inner.insert(giant, inner);
                }
            }
        }
        Ok(())
    }

    /// `a` += `b` for giant sums of the same level, scale and slots.
    pub fn merge_giant_sums(&self, a: &mut ResidentGiantSums<B>, b: ResidentGiantSums<B>) -> Result<(), CkksError> {
        a.check_mergeable(&b)?;
        for (giant, part) in b.inner {
            match a.inner.get_mut(&giant) {
                Some([a0, a1]) => {
                    self.b().add_assign(&mut a0.mem, &part[0].mem, &part[0].basis)?;
                    self.b().add_assign(&mut a1.mem, &part[1].mem, &part[1].basis)?;
                }
                None => {
                    a.inner.insert(giant, part);
                }
            }
        }
        Ok(())
    }

    /// See [`crate::Evaluator::close_giant_sums`].
    pub fn close_giant_sums(&self, sums: ResidentGiantSums<B>) -> Result<ResidentExtendedSum<B>, CkksError> {
        let (level, scale, log_slots) = (sums.level, sums.scale, sums.log_slots);
        let mut acc: Option<[ResidentPoly<B>; 2]> = None;
        for (giant, [i0, i1]) in sums.inner {
            let part = if giant == 0 { [i0, i1] } else { self.giant_rotation(&i0, &i1, giant, "giant step")? };
            acc = Some(self.accumulate(acc, part)?);
        }
        let parts = acc.ok_or_else(|| CkksError::InvalidArgument { what: "a sum of rotated products needs at least one term".into() })?;
        Ok(ExtendedSum { level, scale, log_slots, parts })
    }

    /// `a` += `b` for extended sums of the same level, slots and scale.
    pub fn add_extended(&self, a: &mut ResidentExtendedSum<B>, b: &ResidentExtendedSum<B>) -> Result<(), CkksError> {
        a.check_addable(b)?;
        for (x, y) in a.parts.iter_mut().zip(&b.parts) {
            self.b().add_assign(&mut x.mem, &y.mem, &y.basis)?;
        }
        Ok(())
    }

    /// See [`crate::Evaluator::finish_extended`].
    pub fn finish_extended(&self, sum: ResidentExtendedSum<B>) -> Result<ResidentCiphertext<B>, CkksError> {
        let params = self.params();
        let [a0, a1] = &sum.parts;
        let parts = vec![ks::mod_down(params, self.b(), a0)?, ks::mod_down(params, self.b(), a1)?];
        self.rescale(&self.wrap_parts(parts, sum.scale, sum.log_slots))
    }
}
