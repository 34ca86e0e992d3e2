//! Double-hoisted sums of rotated plaintext products with arbitrary baby and giant steps:
//!
//!   sum over giant steps g of rot_g( sum over baby steps b of v_{g,b} (.) rot_b(ct) )
//!   = sum v'_{g,b} (.) rot_{g+b}(ct),   v'_{g,b} = rot_g(v_{g,b}),
//!
//! for layers whose rotation steps are not a linear transform's run of baby steps 0..n1 (the
//! multiplexed convolutions' taps and channel blocks, their output placement). The scheme is
//! [`crate::bootstrap`]'s double hoisting (Bossuat et al. 2021): the baby steps share one
//! decomposition and stay over Q_l P as P-multiples without ModDown ([`HoistedRotations`], made
//! once and reused by every sum over the same ciphertext); products with plaintexts encoded
//! over Q_l P are summed there; a giant step brings only the c_1 half of its inner sum down to
//! switch it; the sum ([`ExtendedSum`]) can take terms from several ciphertexts of the same level
//! and scale and pays two ModDowns and one rescale at the end ([`Evaluator::finish_extended`]).
//!
//! Against one full rotation per term this saves, per baby step, the decomposition and both
//! ModDowns (about 70% of a rotation at logN = 16), and rounds by 1/P once instead of per term.

use std::collections::HashMap;
use std::sync::Arc;

use lycaon_math::{Automorphism, Ntt, Poly};
use lycaon_rlwe::{hoisting, keyswitch, KeySwitchKey};
use num_complex::Complex64;
use rayon::prelude::*;

use crate::linear::dot_lazy;
use crate::{rotation_galois_element, Ciphertext, CkksError, Encoder, Evaluator};

/// Plaintexts encoded (over Q_l P) and multiplied per pass of the inner sums: bounds the memory
/// of encoded terms at 4 x 2 (l + 1 + alpha) limbs.
const TERMS_PER_PASS: usize = 4;

/// Rotations of one ciphertext by several baby steps, kept over Q_l P as P-multiples
/// (sigma_b(P c_0 + u_0), sigma_b(u_1)); step 0 is (P c_0, P c_1). `X` is the polynomial type:
/// host polynomials, or resident ones for a [`crate::ResidentEvaluator`].
#[derive(Clone, Debug)]
pub struct HoistedRotations<X = Poly<Ntt>> {
    pub(crate) level: usize,
    pub(crate) scale: f64,
    pub(crate) log_slots: u32,
    /// Baby step (mod slots) -> its index in `extended`.
    pub(crate) index: HashMap<usize, usize>,
    pub(crate) extended: Vec<[X; 2]>,
}

impl<X> HoistedRotations<X> {
    pub fn level(&self) -> usize {
        self.level
    }

    pub fn scale(&self) -> f64 {
        self.scale
    }

    pub fn slots(&self) -> usize {
        1 << self.log_slots
    }

    /// The baby steps held (mod slots), sorted.
    pub fn steps(&self) -> Vec<usize> {
        let mut s: Vec<usize> = self.index.keys().copied().collect();
        s.sort_unstable();
        s
    }
}

/// A sum of products over Q_l P (a P-multiple), before its ModDown and rescale.
#[derive(Clone, Debug)]
pub struct ExtendedSum<X = Poly<Ntt>> {
    pub(crate) level: usize,
    /// The scale of the products: the ciphertext's times the plaintexts'.
    pub(crate) scale: f64,
    pub(crate) log_slots: u32,
    pub(crate) parts: [X; 2],
}

impl<X> ExtendedSum<X> {
    pub fn level(&self) -> usize {
        self.level
    }

    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// An error unless `other` can be added (same level, slots and scale).
    pub(crate) fn check_addable(&self, other: &ExtendedSum<X>) -> Result<(), CkksError> {
        if other.level != self.level || other.log_slots != self.log_slots || !crate::evaluator::scales_close(self.scale, other.scale) {
            return Err(CkksError::InvalidArgument {
                what: format!(
                    "adding extended sums at level {} / {} slots / scale 2^{:.3} and level {} / {} slots / scale 2^{:.3}",
                    self.level,
                    1u64 << self.log_slots,
                    self.scale.log2(),
                    other.level,
                    1u64 << other.log_slots,
                    other.scale.log2()
                ),
            });
        }
        Ok(())
    }
}

impl ExtendedSum {
    /// self += other (same level, slots and scale).
    pub fn add_assign(&mut self, other: &ExtendedSum) -> Result<(), CkksError> {
        self.check_addable(other)?;
        self.parts[0].add_assign(&other.parts[0])?;
        self.parts[1].add_assign(&other.parts[1])?;
        Ok(())
    }
}

/// Inner sums of rotated products per giant step (mod slots) over Q_l P, before their giant
/// rotations ([`Evaluator::add_rotated_products`], [`Evaluator::close_giant_sums`]).
#[derive(Clone, Debug)]
pub struct GiantSums<X = Poly<Ntt>> {
    pub(crate) level: usize,
    /// The products' scale (the ciphertexts' times `plain_scale`).
    pub(crate) scale: f64,
    pub(crate) plain_scale: f64,
    pub(crate) log_slots: u32,
    pub(crate) inner: std::collections::BTreeMap<i64, [X; 2]>,
}

impl<X> GiantSums<X> {
    /// Empty sums for products of ciphertexts like `like`'s (level, scale, slots) with
    /// plaintexts at `plain_scale`.
    pub fn new(like: &HoistedRotations<X>, plain_scale: f64) -> Self {
        Self { level: like.level, scale: like.scale * plain_scale, plain_scale, log_slots: like.log_slots, inner: Default::default() }
    }

    /// The giant steps that hold terms (mod slots).
    pub fn giants(&self) -> Vec<i64> {
        self.inner.keys().copied().collect()
    }

    /// An error unless `other` can be merged (same level, scale and slots).
    pub(crate) fn check_mergeable(&self, other: &GiantSums<X>) -> Result<(), CkksError> {
        if other.level != self.level || other.log_slots != self.log_slots || !crate::evaluator::scales_close(self.scale, other.scale) {
            return Err(CkksError::InvalidArgument { what: format!("adding giant sums at level {} and {}", self.level, other.level) });
        }
        Ok(())
    }

    /// The checks of adding rotated products of `hoisted` with `giants` to these sums: level,
    /// slots and scale agree, every baby step was hoisted, every value vector fills the slots.
    pub(crate) fn check_products(&self, hoisted: &HoistedRotations<X>, giants: &[GiantStep<'_>]) -> Result<(), CkksError> {
        let slots = hoisted.slots();
        let level = hoisted.level;
        if level != self.level || hoisted.log_slots != self.log_slots || !crate::evaluator::scales_close(hoisted.scale * self.plain_scale, self.scale) {
            return Err(CkksError::InvalidArgument {
                what: format!("rotated products at level {level}, scale 2^{:.3} added to sums at level {}, scale 2^{:.3}", hoisted.scale.log2(), self.level, (self.scale / self.plain_scale).log2()),
            });
        }
        for g in giants {
            for &(b, v) in &g.terms {
                if !hoisted.index.contains_key(&(b.rem_euclid(slots as i64) as usize)) {
                    return Err(CkksError::InvalidArgument { what: format!("baby step {b} was not hoisted (hoisted: {:?})", hoisted.steps()) });
                }
                if v.len() != slots {
                    return Err(CkksError::InvalidArgument { what: format!("{} values for a ciphertext of {slots} slots", v.len()) });
                }
            }
        }
        Ok(())
    }
}

impl GiantSums {
    fn add(&mut self, giant: i64, part: [Poly<Ntt>; 2]) -> Result<(), CkksError> {
        match self.inner.get_mut(&giant) {
            Some([a0, a1]) => {
                a0.add_assign(&part[0])?;
                a1.add_assign(&part[1])?;
            }
            None => {
                self.inner.insert(giant, part);
            }
        }
        Ok(())
    }

    /// self += other (sums of the same level, scale and slots).
    pub fn add_assign(&mut self, other: GiantSums) -> Result<(), CkksError> {
        self.check_mergeable(&other)?;
        for (giant, part) in other.inner {
            self.add(giant, part)?;
        }
        Ok(())
    }
}

/// One giant step of a sum: rot_giant(sum over (baby, values) of values' (.) rot_baby(ct)), the
/// values given where they multiply rot_{giant+baby}(ct) in the result.
#[derive(Clone, Debug)]
pub struct GiantStep<'a> {
    pub giant: i64,
    pub terms: Vec<(i64, &'a [f64])>,
}

/// Errors unless `ct` can be hoisted (2 parts, a level above 0); the distinct steps mod its slots,
/// sorted.
pub(crate) fn hoisting_steps<C: crate::ops::CiphertextMeta>(ct: &C, steps: &[i64]) -> Result<Vec<usize>, CkksError> {
    if ct.parts() != 2 {
        return Err(CkksError::WrongSize { expected: 2, found: ct.parts() });
    }
    if ct.level() == 0 {
        return Err(CkksError::NotEnoughLevels { op: "hoist_rotations", needed: 1, level: 0 });
    }
    let slots = ct.slots() as i64;
    let mut babies: Vec<usize> = steps.iter().map(|s| s.rem_euclid(slots) as usize).collect();
    babies.sort_unstable();
    babies.dedup();
    Ok(babies)
}

pub(crate) fn rotate_values(v: &[f64], step: i64) -> Vec<Complex64> {
    let s = v.len() as i64;
    (0..s).map(|t| Complex64::new(v[(t + step).rem_euclid(s) as usize], 0.0)).collect()
}

impl Evaluator {
    fn rotation_key(&self, step: i64, what: &str) -> Result<(&KeySwitchKey, Arc<Automorphism>), CkksError> {
        let g = rotation_galois_element(step, self.context().n());
        let gk = self.galois_keys(|| format!("rotation by {step} ({what})"))?;
        let key = gk.get(g).ok_or_else(|| CkksError::MissingRotationKey { what: format!("rotation by {step} ({what})"), galois_element: g })?;
        Ok((key, self.context().automorphism(g)?))
    }

    /// The rotations of `ct` by `steps` over Q_l P, sharing one decomposition (double hoisting;
    /// module docs). Errors: `WrongSize`, `NotEnoughLevels` at level 0, `NoSpecialPrimes`,
    /// `MissingRotationKey` naming the first missing step.
    pub fn hoist_rotations(&self, ct: &Ciphertext, steps: &[i64]) -> Result<HoistedRotations, CkksError> {
        self.check(ct)?;
        let babies = hoisting_steps(ct, steps)?;
        let keys: Vec<Option<(&KeySwitchKey, Arc<Automorphism>)>> =
            babies.iter().map(|&b| if b == 0 { Ok(None) } else { self.rotation_key(b as i64, "hoisted rotations").map(Some) }).collect::<Result<_, _>>()?;
        let params = self.params().clone();
        let backend = params.backend().clone();
        let (c0, c1) = (&ct.inner.parts()[0], &ct.inner.parts()[1]);
        let p_c0 = hoisting::lift_times_p(&params, c0)?;
        let dec = if keys.iter().any(Option::is_some) { Some(keyswitch::decompose(&params, &backend.intt(c1.clone())?, c1)?) } else { None };
        let extended: Vec<[Poly<Ntt>; 2]> = keys
            .par_iter()
            .map(|key| -> Result<[Poly<Ntt>; 2], CkksError> {
                let Some((key, auto)) = key else {
                    return Ok([p_c0.clone(), hoisting::lift_times_p(&params, c1)?]);
                };
                let dec = dec.as_ref().ok_or(CkksError::Internal("decomposition"))?;
                let [mut u0, u1] = hoisting::key_switch_decomposed_lazy(&params, dec, key)?;
                u0.add_assign(&p_c0)?;
                Ok([backend.automorphism_ntt(&u0, auto)?, backend.automorphism_ntt(&u1, auto)?])
            })
            .collect::<Result<_, _>>()?;
        let index = babies.iter().enumerate().map(|(t, &b)| (b, t)).collect();
        Ok(HoistedRotations { level: ct.level(), scale: ct.scale, log_slots: ct.log_slots, index, extended })
    }

    /// sum over `giants` of rot_giant(sum of values' (.) rot_baby(ct)) over Q_l P, every
    /// plaintext encoded at `plain_scale` (module docs; [`Self::plaintext_scale_for`] makes
    /// [`Self::finish_extended`] land on the canonical scale of the level below). Each baby step
    /// must be in `hoisted`. Errors: `InvalidArgument` (a baby step not hoisted, values of the
    /// wrong length, no term), `MissingRotationKey` for a giant step, encoding errors.
    pub fn rotated_products(&self, hoisted: &HoistedRotations, giants: &[GiantStep<'_>], plain_scale: f64) -> Result<ExtendedSum, CkksError> {
        let mut sums = GiantSums::new(hoisted, plain_scale);
        self.add_rotated_products(&mut sums, hoisted, giants)?;
        self.close_giant_sums(sums)
    }

    /// Adds each giant step's inner sum (values' (.) rot_baby(ct) over its terms, values given
    /// in final position) to `sums`, whose giant rotations come later
    /// ([`Self::close_giant_sums`]): a baby-step giant-step sum whose babies are rotations of
    /// several ciphertexts (of `sums`' level and scale) shares each giant's rotation among them.
    pub fn add_rotated_products(&self, sums: &mut GiantSums, hoisted: &HoistedRotations, giants: &[GiantStep<'_>]) -> Result<(), CkksError> {
        let slots = hoisted.slots();
        let level = hoisted.level;
        sums.check_products(hoisted, giants)?;
        for g in giants {
            if g.giant.rem_euclid(slots as i64) != 0 {
                self.rotation_key(g.giant, "giant step")?;
            }
        }
        let params = self.params().clone();
        let basis = keyswitch::extended_basis(&params, level)?;
        let encoder = Encoder::new(self.context());
        let plain_scale = sums.plain_scale;
        let partials: Vec<(i64, [Poly<Ntt>; 2])> = giants
            .par_iter()
            .filter(|g| !g.terms.is_empty())
            .map(|g| -> Result<(i64, [Poly<Ntt>; 2]), CkksError> {
                let mut inner: Option<[Poly<Ntt>; 2]> = None;
                for pass in g.terms.chunks(TERMS_PER_PASS) {
                    let pts: Vec<Poly<Ntt>> = pass
                        .par_iter()
                        .map(|&(_, v)| encoder.encode_poly(&rotate_values(v, -g.giant), slots, plain_scale, &basis))
                        .collect::<Result<_, _>>()?;
                    let rotated: Vec<&[Poly<Ntt>; 2]> = pass.iter().map(|&(b, _)| &hoisted.extended[hoisted.index[&(b.rem_euclid(slots as i64) as usize)]]).collect();
                    let e0: Vec<&Poly<Ntt>> = rotated.iter().map(|r| &r[0]).collect();
                    let e1: Vec<&Poly<Ntt>> = rotated.iter().map(|r| &r[1]).collect();
                    let pt_refs: Vec<&Poly<Ntt>> = pts.iter().collect();
                    let [d0, d1] = dot_lazy(&e0, &e1, &pt_refs)?;
                    inner = Some(match inner {
                        None => [d0, d1],
                        Some([mut a0, mut a1]) => {
                            a0.add_assign(&d0)?;
                            a1.add_assign(&d1)?;
                            [a0, a1]
                        }
                    });
                }
                Ok((g.giant.rem_euclid(slots as i64), inner.ok_or(CkksError::Internal("empty giant step"))?))
            })
            .collect::<Result<_, _>>()?;
        for (giant, part) in partials {
            sums.add(giant, part)?;
        }
        Ok(())
    }

    /// Rotates each giant step's inner sum by its giant and adds them all (module docs: a giant
    /// step moddowns only c_1 to switch it). Errors on sums that hold no term.
    pub fn close_giant_sums(&self, sums: GiantSums) -> Result<ExtendedSum, CkksError> {
        let params = self.params().clone();
        let backend = params.backend().clone();
        let level = sums.level;
        let rotated: Vec<[Poly<Ntt>; 2]> = sums
            .inner
            .into_par_iter()
            .map(|(giant, [i0, i1])| -> Result<[Poly<Ntt>; 2], CkksError> {
                if giant == 0 {
                    return Ok([i0, i1]);
                }
                // Giant step: ModDown c_1 of the inner sum, decompose it, switch lazily; c_0 stays P-lifted.
                let a1 = keyswitch::mod_down(&params, i1, level)?;
                let dec = keyswitch::decompose(&params, &backend.intt(a1.clone())?, &a1)?;
                let (key, auto) = self.rotation_key(giant, "giant step")?;
                let [mut w0, w1] = hoisting::key_switch_decomposed_lazy(&params, &dec, key)?;
                w0.add_assign(&i0)?;
                Ok([backend.automorphism_ntt(&w0, &auto)?, backend.automorphism_ntt(&w1, &auto)?])
            })
            .collect::<Result<_, _>>()?;
        let mut iter = rotated.into_iter();
        let [mut acc0, mut acc1] = iter.next().ok_or_else(|| CkksError::InvalidArgument { what: "a sum of rotated products needs at least one term".into() })?;
        for [p0, p1] in iter {
            acc0.add_assign(&p0)?;
            acc1.add_assign(&p1)?;
        }
        Ok(ExtendedSum { level, scale: sums.scale, log_slots: sums.log_slots, parts: [acc0, acc1] })
    }

    /// Brings an [`ExtendedSum`] down to Q_l (two ModDowns) and rescales it: one level lower.
    pub fn finish_extended(&self, sum: ExtendedSum) -> Result<Ciphertext, CkksError> {
        let params = self.params();
        let [a0, a1] = sum.parts;
        let parts = vec![keyswitch::mod_down(params, a0, sum.level)?, keyswitch::mod_down(params, a1, sum.level)?];
        let ct = self.wrap(parts, sum.scale, sum.log_slots)?;
        self.rescale(&ct)
    }
}
