//! Plaintext matrix times encrypted vector by the diagonal method (Halevi-Shoup 2014) with
//! baby-step giant-step (n1 baby steps, hoisted: one decomposition of c_1 for all of them):
//!
//!   M v = sum_k d_k (.) rot_k(v) = sum_j rot_{j n1}( sum_i rot_{-j n1}(d_{j n1 + i}) (.) rot_i(v) ),
//!
//! with d_k[t] = M[t][(t + k) mod s]. Diagonals are given sparsely (index -> vector) and encoded
//! lazily at the level and scale of the call (or once, ahead, with [`LinearTransform::prepare`]).
//! Inner sums are accumulated lazily in u128 and reduced once per limb; giant steps run in
//! parallel; the result is rescaled once.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use lycaon_math::{MathError, Ntt, Poly};
use num_complex::Complex64;
use rayon::prelude::*;

use crate::{Ciphertext, CkksContext, CkksError, Encoder, Evaluator};

/// Encoded diagonals for one (level, scale): per giant step, per baby step.
type Prepared = Arc<HashMap<usize, Poly<Ntt>>>;

/// A plaintext s x s matrix given by its non-zero diagonals, with its BSGS split.
#[derive(Debug)]
pub struct LinearTransform {
    slots: usize,
    diagonals: BTreeMap<usize, Vec<Complex64>>,
    baby: usize,
    double_hoisting: bool,
    prepared: Mutex<HashMap<(usize, u64, bool), Prepared>>,
}

impl Clone for LinearTransform {
    fn clone(&self) -> Self {
        Self { slots: self.slots, diagonals: self.diagonals.clone(), baby: self.baby, double_hoisting: self.double_hoisting, prepared: Mutex::new(HashMap::new()) }
    }
}

/// The baby-step count n1 (a power of two) minimising the number of rotations (baby steps plus
/// giant steps, ties to more baby steps since those are hoisted) for the given diagonal indices.
pub fn bsgs_split(indices: &[usize], slots: usize) -> usize {
    let mut best = (usize::MAX, 1);
    let mut n1 = 1;
    while n1 <= slots {
        let mut babies: Vec<usize> = indices.iter().map(|k| k % n1).filter(|&i| i != 0).collect();
        babies.sort_unstable();
        babies.dedup();
        let mut giants: Vec<usize> = indices.iter().map(|k| k / n1).filter(|&j| j != 0).collect();
        giants.sort_unstable();
        giants.dedup();
        let cost = babies.len() + giants.len();
        if cost <= best.0 {
            best = (cost, n1);
        }
        n1 *= 2;
    }
    best.1
}

pub(crate) fn rotate_vec(v: &[Complex64], step: i64) -> Vec<Complex64> {
    let s = v.len() as i64;
    (0..s).map(|t| v[(t + step).rem_euclid(s) as usize]).collect()
}

impl LinearTransform {
    /// A transform on `slots` slots from (diagonal index, diagonal) pairs; indices are taken
    /// modulo `slots` (negative ones too) and repeated ones summed. Errors: `InvalidSlots`, a
    /// diagonal whose length is not `slots`, or no diagonal at all.
    pub fn new(ctx: &CkksContext, slots: usize, diagonals: impl IntoIterator<Item = (i64, Vec<Complex64>)>) -> Result<Self, CkksError> {
        crate::encoding::check_slots(ctx, slots)?;
        let mut map: BTreeMap<usize, Vec<Complex64>> = BTreeMap::new();
        for (k, d) in diagonals {
            if d.len() != slots {
                return Err(CkksError::InvalidArgument { what: format!("diagonal {k} has {} values, the transform has {slots} slots", d.len()) });
            }
            let idx = k.rem_euclid(slots as i64) as usize;
            match map.get_mut(&idx) {
                Some(acc) => acc.iter_mut().zip(&d).for_each(|(a, b)| *a += b),
                None => {
                    map.insert(idx, d);
                }
            }
        }
        if map.is_empty() {
            return Err(CkksError::InvalidArgument { what: "a linear transform needs at least one diagonal".into() });
        }
        let indices: Vec<usize> = map.keys().copied().collect();
        let baby = bsgs_split(&indices, slots);
        Ok(Self { slots, diagonals: map, baby, double_hoisting: true, prepared: Mutex::new(HashMap::new()) })
    }

    /// A transform from a dense s x s matrix (rows), keeping only non-zero diagonals.
    pub fn from_dense(ctx: &CkksContext, rows: &[Vec<Complex64>]) -> Result<Self, CkksError> {
        let s = rows.len();
        if rows.iter().any(|r| r.len() != s) {
            return Err(CkksError::InvalidArgument { what: "the matrix must be square".into() });
        }
        let diags = (0..s).filter_map(|k| {
            let d: Vec<Complex64> = (0..s).map(|t| rows[t][(t + k) % s]).collect();
            d.iter().any(|c| c.norm_sqr() > 0.0).then_some((k as i64, d))
        });
        Self::new(ctx, s, diags.collect::<Vec<_>>())
    }

    /// Overrides the baby-step count (a power of two up to the slot count).
    pub fn with_baby_steps(mut self, n1: usize) -> Result<Self, CkksError> {
        if n1 == 0 || !n1.is_power_of_two() || n1 > self.slots {
            return Err(CkksError::InvalidArgument { what: format!("baby-step count {n1} must be a power of two up to {}", self.slots) });
        }
        self.baby = n1;
        self.prepared = Mutex::new(HashMap::new());
        Ok(self)
    }

    /// Chooses double hoisting (the default: baby-step rotations and giant-step sums kept in
    /// the extended basis Q_l P, one ModDown per giant step plus two at the end, diagonals
    /// encoded over Q_l P) or single hoisting (every rotation moded down; diagonals over Q_l).
    pub fn with_double_hoisting(mut self, on: bool) -> Self {
        self.double_hoisting = on;
        self
    }

    pub fn double_hoisting(&self) -> bool {
        self.double_hoisting
    }

    pub fn slots(&self) -> usize {
        self.slots
    }

    pub fn baby_steps(&self) -> usize {
        self.baby
    }

    pub fn diagonals(&self) -> &BTreeMap<usize, Vec<Complex64>> {
        &self.diagonals
    }

    /// Giant step (multiple of n1) -> [(baby step, diagonal index)].
    pub(crate) fn plan(&self) -> BTreeMap<usize, Vec<(usize, usize)>> {
        let mut plan: BTreeMap<usize, Vec<(usize, usize)>> = BTreeMap::new();
        for &k in self.diagonals.keys() {
            plan.entry(k / self.baby * self.baby).or_default().push((k % self.baby, k));
        }
        plan
    }

    /// The distinct baby steps of [`Self::plan`], sorted (0 included when used).
    pub(crate) fn plan_babies(plan: &BTreeMap<usize, Vec<(usize, usize)>>) -> Vec<usize> {
        let mut babies: Vec<usize> = plan.values().flat_map(|t| t.iter().map(|x| x.0)).collect();
        babies.sort_unstable();
        babies.dedup();
        babies
    }

    /// Errors unless `ct` can go through this transform: 2 parts (`WrongSize`), a level to spend
    /// (`NotEnoughLevels`), this transform's slot count (`InvalidArgument`). Returns its level.
    pub(crate) fn check_input<C: crate::ops::CiphertextMeta>(&self, ct: &C) -> Result<usize, CkksError> {
        if ct.parts() != 2 {
            return Err(CkksError::WrongSize { expected: 2, found: ct.parts() });
        }
        let level = ct.level();
        if level == 0 {
            return Err(CkksError::NotEnoughLevels { op: "linear_transform", needed: 1, level: 0 });
        }
        if self.slots() != ct.slots() {
            return Err(CkksError::InvalidArgument { what: format!("the transform has {} slots, the ciphertext {}", self.slots(), ct.slots()) });
        }
        Ok(level)
    }

    /// The rotation steps the evaluation needs keys for (baby and giant steps, no zero).
    pub fn rotations(&self) -> Vec<i64> {
        let mut r: Vec<i64> = self.plan().iter().flat_map(|(&g, terms)| std::iter::once(g).chain(terms.iter().map(|t| t.0))).filter(|&x| x != 0).map(|x| x as i64).collect();
        r.sort_unstable();
        r.dedup();
        r
    }

    /// M v in the clear (the reference for tests): sum_k d_k (.) rot_k(v).
    pub fn apply_plain(&self, v: &[Complex64]) -> Vec<Complex64> {
        let mut out = vec![Complex64::new(0.0, 0.0); self.slots];
        for (&k, d) in &self.diagonals {
            for t in 0..self.slots {
                out[t] += d[t] * v[(t + k) % self.slots];
            }
        }
        out
    }

    pub(crate) fn encode_diagonal(&self, encoder: &Encoder, giant: usize, k: usize, level: usize, scale: f64) -> Result<Poly<Ntt>, CkksError> {
        let params = &encoder.context().params;
        let basis = if self.double_hoisting { lycaon_rlwe::hoisting::qp_at(params, level)?.clone() } else { params.q_at(level)?.clone() };
        encoder.encode_poly(&rotate_vec(&self.diagonals[&k], -(giant as i64)), self.slots, scale, &basis)
    }

    /// Encodes every diagonal at `level` and plaintext scale `scale` ahead of time and keeps
    /// them (memory: one plaintext of level + 1 limbs per diagonal).
    pub fn prepare(&self, ctx: &Arc<CkksContext>, level: usize, scale: f64) -> Result<(), CkksError> {
        let encoder = Encoder::new(ctx);
        let plan = self.plan();
        let items: Vec<(usize, usize)> = plan.iter().flat_map(|(&g, t)| t.iter().map(move |&(_, k)| (g, k))).collect();
        let encoded = items.par_iter().map(|&(g, k)| Ok((k, self.encode_diagonal(&encoder, g, k, level, scale)?))).collect::<Result<HashMap<_, _>, CkksError>>()?;
        if let Ok(mut m) = self.prepared.lock() {
            m.insert((level, scale.to_bits(), self.double_hoisting), Arc::new(encoded));
        }
        Ok(())
    }

    /// The diagonals prepared at `level` for a plaintext scale within 2^-30 (relative) of
    /// `scale`, with the scale they were encoded at. Ciphertexts that went through products
    /// carry scales a few ulps off the canonical one the server prepared for; re-encoding
    /// every diagonal for that would cost more than the whole transform, and the result's
    /// scale is set from the scale used, so nothing is approximated.
    fn prepared_for(&self, level: usize, scale: f64) -> Option<(f64, Prepared)> {
        let m = self.prepared.lock().ok()?;
        if let Some(p) = m.get(&(level, scale.to_bits(), self.double_hoisting)) {
            return Some((scale, p.clone()));
        }
        m.iter()
            .filter(|((l, bits, dh), _)| *l == level && *dh == self.double_hoisting && (f64::from_bits(*bits) / scale - 1.0).abs() < 2f64.powi(-30))
            .map(|((_, bits, _), p)| (f64::from_bits(*bits), p.clone()))
            .next()
    }
}

/// (sum_t pts[t] (.) c0[t], sum_t pts[t] (.) c1[t]) point-wise over one basis, in one blocked
/// pass that reads each plaintext once (see [`lycaon_backend::parallel::dot_blocked`]).
pub(crate) fn dot_lazy(c0: &[&Poly<Ntt>], c1: &[&Poly<Ntt>], pts: &[&Poly<Ntt>]) -> Result<[Poly<Ntt>; 2], MathError> {
    let basis = c0[0].basis().clone();
    let n = basis.n();
    let mut d0 = vec![0u64; basis.len() * n];
    let mut d1 = vec![0u64; basis.len() * n];
    d0.par_chunks_exact_mut(n).zip(d1.par_chunks_exact_mut(n)).enumerate().try_for_each(|(i, (o0, o1))| {
        let q = basis.moduli()[i];
        let x: Vec<&[u64]> = pts.iter().map(|p| p.limb(i)).collect();
        let y0: Vec<&[u64]> = c0.iter().map(|p| p.limb(i)).collect();
        let y1: Vec<&[u64]> = c1.iter().map(|p| p.limb(i)).collect();
        lycaon_backend::parallel::dot_blocked(&q, &x, &[&y0, &y1], &mut [o0, o1])
    })?;
    Ok([Poly::from_kernel_output(&basis, d0), Poly::from_kernel_output(&basis, d1)])
}

impl Evaluator {
    /// M v for an encrypted v, landing on the canonical scale of the level below (one level).
    /// Needs Galois keys for [`LinearTransform::rotations`]. Errors: `WrongSize` (3 parts),
    /// `NotEnoughLevels` at level 0, `InvalidArgument` when the slot counts differ,
    /// `MissingRotationKey` naming the first missing step.
    pub fn linear_transform(&self, ct: &Ciphertext, lt: &LinearTransform) -> Result<Ciphertext, CkksError> {
        self.check(ct)?;
        if ct.level() == 0 {
            return Err(CkksError::NotEnoughLevels { op: "linear_transform", needed: 1, level: 0 });
        }
        let target = self.context().scale_at(ct.level() - 1)?;
        self.linear_transform_to_scale(ct, lt, target)
    }

    /// [`Self::linear_transform`] with the result at `target` scale: the diagonals are encoded at
    /// target q_l / s (and, if prepared at that level and scale, taken from the cache).
    pub fn linear_transform_to_scale(&self, ct: &Ciphertext, lt: &LinearTransform, target: f64) -> Result<Ciphertext, CkksError> {
        self.check(ct)?;
        let level = lt.check_input(ct)?;
        let sigma = self.linear_transform_scale(ct, target)?;
        let plan = lt.plan();
        let babies = LinearTransform::plan_babies(&plan);
        let n = self.context().n();
        // Fail early, naming the step, before any work.
        let steps: Vec<i64> = lt.rotations();
        if !steps.is_empty() {
            let gk = self.galois_keys(|| format!("rotation by {}", steps[0]))?;
            for &s in &steps {
                let g = crate::rotation_galois_element(s, n);
                if gk.get(g).is_none() {
                    return Err(CkksError::MissingRotationKey { what: format!("rotation by {s} (linear transform)"), galois_element: g });
                }
            }
        }
        if lt.double_hoisting && self.params().p().is_some() {
            return self.linear_transform_double_hoisted(ct, lt, target, sigma, &plan, &babies);
        }
        let rotated = self.rotate_hoisted(ct, &babies.iter().map(|&b| b as i64).collect::<Vec<_>>())?;
        let index: HashMap<usize, usize> = babies.iter().enumerate().map(|(t, &b)| (b, t)).collect();
        let (sigma_used, prepared) = match lt.prepared_for(level, sigma) {
            Some((s, p)) => (s, Some(p)),
            None => (sigma, None),
        };
        let (sigma, target) = (sigma_used, target * sigma_used / sigma);
        let encoder = Encoder::new(self.context());
        let giants: Vec<(&usize, &Vec<(usize, usize)>)> = plan.iter().collect();
        let partials = giants
            .par_iter()
            .map(|&(&g, terms)| -> Result<Ciphertext, CkksError> {
                let encoded: Vec<Poly<Ntt>> = match &prepared {
                    Some(_) => Vec::new(),
                    None => terms.iter().map(|&(_, k)| lt.encode_diagonal(&encoder, g, k, level, sigma)).collect::<Result<_, _>>()?,
                };
                let pt_refs: Vec<&Poly<Ntt>> = match &prepared {
                    Some(p) => terms.iter().map(|&(_, k)| p.get(&k).ok_or(CkksError::Internal("prepared diagonal"))).collect::<Result<_, _>>()?,
                    None => encoded.iter().collect(),
                };
                let c0: Vec<&Poly<Ntt>> = terms.iter().map(|&(b, _)| &rotated[index[&b]].inner.parts()[0]).collect();
                let c1: Vec<&Poly<Ntt>> = terms.iter().map(|&(b, _)| &rotated[index[&b]].inner.parts()[1]).collect();
                let [p0, p1] = dot_lazy(&c0, &c1, &pt_refs)?;
                let inner = self.wrap(vec![p0, p1], ct.scale * sigma, ct.log_slots)?;
                if g == 0 { Ok(inner) } else { self.rotate(&inner, g as i64) }
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut iter = partials.into_iter();
        let mut acc = iter.next().ok_or(CkksError::Internal("no giant step"))?;
        for p in iter {
            for (a, b) in acc.inner.parts_mut().iter_mut().zip(p.inner.parts()) {
                a.add_assign(b)?;
            }
        }
        let mut out = self.rescale(&acc)?;
        out.scale = target;
        Ok(out)
    }

    /// Double hoisting: baby-step rotations as lazy key switches kept over Q_l P (c_0 lifted to
    /// P c_0), inner sums over Q_l P, one ModDown of each inner sum's c_1 to decompose it for the
    /// giant step, giant-step results accumulated over Q_l P, and two ModDowns at the end.
    fn linear_transform_double_hoisted(
        &self,
        ct: &Ciphertext,
        lt: &LinearTransform,
        target: f64,
        sigma: f64,
        plan: &BTreeMap<usize, Vec<(usize, usize)>>,
        babies: &[usize],
    ) -> Result<Ciphertext, CkksError> {
        use lycaon_rlwe::{hoisting, keyswitch};
        let params = self.params().clone();
        let backend = params.backend().clone();
        let level = ct.level();
        let n = self.context().n();
        let (c0, c1) = (&ct.inner.parts()[0], &ct.inner.parts()[1]);
        let p_c0 = hoisting::lift_times_p(&params, c0)?;
        let non_zero: Vec<usize> = babies.iter().copied().filter(|&b| b != 0).collect();
        let dec = if non_zero.is_empty() { None } else { Some(keyswitch::decompose(&params, &backend.intt(c1.clone())?, c1)?) };
        let gk = if non_zero.is_empty() && plan.keys().all(|&g| g == 0) { None } else { Some(self.galois_keys(|| "linear transform".into())?) };
        let key_for = |step: usize| -> Result<(&lycaon_rlwe::KeySwitchKey, Arc<lycaon_math::Automorphism>), CkksError> {
            let g = crate::rotation_galois_element(step as i64, n);
            let key = gk.and_then(|k| k.get(g)).ok_or_else(|| CkksError::MissingRotationKey { what: format!("rotation by {step} (linear transform)"), galois_element: g })?;
            Ok((key, self.context().automorphism(g)?))
        };
        // Baby steps over Q_l P: (sigma_i(P c_0 + u_0), sigma_i(u_1)); step 0 is (P c_0, P c_1).
        let extended: Vec<[Poly<Ntt>; 2]> = babies
            .par_iter()
            .map(|&b| -> Result<[Poly<Ntt>; 2], CkksError> {
                if b == 0 {
                    return Ok([p_c0.clone(), hoisting::lift_times_p(&params, c1)?]);
                }
                let dec = dec.as_ref().ok_or(CkksError::Internal("decomposition"))?;
                let (key, auto) = key_for(b)?;
                let [mut u0, u1] = hoisting::key_switch_decomposed_lazy(&params, dec, key)?;
                u0.add_assign(&p_c0)?;
                Ok([backend.automorphism_ntt(&u0, &auto)?, backend.automorphism_ntt(&u1, &auto)?])
            })
            .collect::<Result<_, _>>()?;
        let index: HashMap<usize, usize> = babies.iter().enumerate().map(|(t, &b)| (b, t)).collect();
        let (sigma_used, prepared) = match lt.prepared_for(level, sigma) {
            Some((s, p)) => (s, Some(p)),
            None => (sigma, None),
        };
        let (sigma, target) = (sigma_used, target * sigma_used / sigma);
        let encoder = Encoder::new(self.context());
        let giants: Vec<(&usize, &Vec<(usize, usize)>)> = plan.iter().collect();
        let partials = giants
            .par_iter()
            .map(|&(&g, terms)| -> Result<[Poly<Ntt>; 2], CkksError> {
                let encoded: Vec<Poly<Ntt>> = match &prepared {
                    Some(_) => Vec::new(),
                    None => terms.iter().map(|&(_, k)| lt.encode_diagonal(&encoder, g, k, level, sigma)).collect::<Result<_, _>>()?,
                };
                let pt_refs: Vec<&Poly<Ntt>> = match &prepared {
                    Some(p) => terms.iter().map(|&(_, k)| p.get(&k).ok_or(CkksError::Internal("prepared diagonal"))).collect::<Result<_, _>>()?,
                    None => encoded.iter().collect(),
                };
                let e0: Vec<&Poly<Ntt>> = terms.iter().map(|&(b, _)| &extended[index[&b]][0]).collect();
                let e1: Vec<&Poly<Ntt>> = terms.iter().map(|&(b, _)| &extended[index[&b]][1]).collect();
                let [i0, i1] = dot_lazy(&e0, &e1, &pt_refs)?;
                if g == 0 {
                    return Ok([i0, i1]);
                }
                // Giant step: ModDown c_1 of the inner sum, decompose it, switch lazily; c_0 stays P-lifted.
                let a1 = keyswitch::mod_down(&params, i1, level)?;
                let dec = keyswitch::decompose(&params, &backend.intt(a1.clone())?, &a1)?;
                let (key, auto) = key_for(g)?;
                let [mut w0, w1] = hoisting::key_switch_decomposed_lazy(&params, &dec, key)?;
                w0.add_assign(&i0)?;
                Ok([backend.automorphism_ntt(&w0, &auto)?, backend.automorphism_ntt(&w1, &auto)?])
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut iter = partials.into_iter();
        let [mut acc0, mut acc1] = iter.next().ok_or(CkksError::Internal("no giant step"))?;
        for [p0, p1] in iter {
            acc0.add_assign(&p0)?;
            acc1.add_assign(&p1)?;
        }
        let parts = vec![keyswitch::mod_down(&params, acc0, level)?, keyswitch::mod_down(&params, acc1, level)?];
        let inner = self.wrap(parts, ct.scale * sigma, ct.log_slots)?;
        let mut out = self.rescale(&inner)?;
        out.scale = target;
        Ok(out)
    }

    /// The plaintext scale of the diagonals for a result at `target`: target q_l / s.
    pub fn linear_transform_scale(&self, ct: &Ciphertext, target: f64) -> Result<f64, CkksError> {
        crate::encoding::check_scale(target)?;
        Ok(target * self.context().prime_at(ct.level())? as f64 / ct.scale)
    }
}
