//! Double-hoisted baby-step giant-step linear transforms (Bossuat-Mouchet-Troncoso-Pastoriza-
//! Hubaux 2021, Algorithm 6; Lattigo's MultiplyByDiagMatrixBSGS): M v = sum_j rot_{j n1}(sum_i
//! rot_{-j n1}(d_{j n1 + i}) (.) rot_i(v)), where
//! - the baby-step rotations share one ModUp of c_1 (hoisting) and stay in the extended basis
//!   Q_l P without their ModDown, as P-multiples (P c_0 + k_0, k_1);
//! - the diagonals are encoded over Q_l P, so each inner sum is taken there;
//! - each giant step brings only the c_1 half of its inner sum down to Q_l, key-switches it
//!   lazily (again without ModDown) and adds its P-multiple c_0 half;
//! - one ModDown of the total and one rescale end the transform.
//!
//! Against the singly hoisted transform of [`crate::LinearTransform`] this saves the two ModDowns
//! of every baby step and one of every giant step, and adds 1/P-sized rounding once instead of
//! per rotation.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use lycaon_math::{Ntt, Poly, RnsBasis, ShoupConstant};
use lycaon_rlwe::keyswitch;
use num_complex::Complex64;
use rayon::prelude::*;

use crate::{rotation_galois_element, Ciphertext, CkksContext, CkksError, Encoder, Evaluator, LinearTransform};

/// Diagonal index -> its plaintext over Q_l P (pre-rotated by minus its giant step).
pub(crate) type ExtendedDiagonals = HashMap<usize, Poly<Ntt>>;

/// Giant step (a multiple of n1) -> [(baby step, diagonal index)].
fn plan(lt: &LinearTransform) -> BTreeMap<usize, Vec<(usize, usize)>> {
    let n1 = lt.baby_steps();
    let mut plan: BTreeMap<usize, Vec<(usize, usize)>> = BTreeMap::new();
    for &k in lt.diagonals().keys() {
        plan.entry(k / n1 * n1).or_default().push((k % n1, k));
    }
    plan
}

fn rotate_vec(v: &[Complex64], step: i64) -> Vec<Complex64> {
    let s = v.len() as i64;
    (0..s).map(|t| v[(t + step).rem_euclid(s) as usize]).collect()
}

/// Encodes every diagonal of `lt` over Q_level P at plaintext scale `sigma`.
pub(crate) fn encode_extended(ctx: &Arc<CkksContext>, lt: &LinearTransform, level: usize, sigma: f64) -> Result<ExtendedDiagonals, CkksError> {
    let basis = keyswitch::extended_basis(ctx.params(), level)?;
    let encoder = Encoder::new(ctx);
    let items: Vec<(usize, usize)> = plan(lt).iter().flat_map(|(&g, t)| t.iter().map(move |&(_, k)| (g, k))).collect();
    items
        .par_iter()
        .map(|&(g, k)| {
            let d = rotate_vec(&lt.diagonals()[&k], -(g as i64));
            Ok((k, encoder.encode_poly(&d, lt.slots(), sigma, &basis)?))
        })
        .collect()
}

/// P c over Q_l P (zero residues mod the special primes) from c over Q_l.
fn lift(c: &Poly<Ntt>, basis: &Arc<RnsBasis>, p_mod_q: &[u64]) -> Poly<Ntt> {
    let n = c.n();
    let own = c.num_limbs();
    let moduli = c.basis().moduli();
    let mut data = vec![0u64; basis.len() * n];
    data[..own * n].par_chunks_exact_mut(n).enumerate().for_each(|(i, out)| {
        let q = moduli[i];
        let w = ShoupConstant::new(p_mod_q[i], &q);
        for (o, &x) in out.iter_mut().zip(c.limb(i)) {
            *o = q.mul_shoup(x, w.value, w.shoup);
        }
    });
    Poly::from_kernel_output(basis, data)
}

/// M v with the diagonals already encoded over Q_l P at `sigma` = target q_l / scale (see
/// [`Evaluator::linear_transform_scale`]); the result is at `target`, one level down. Errors:
/// `WrongSize`, `NotEnoughLevels`, `MissingGaloisKeys`, `MissingRotationKey`, key-level errors.
pub(crate) fn apply(
    eval: &Evaluator,
    ct: &Ciphertext,
    lt: &LinearTransform,
    diags: &ExtendedDiagonals,
    sigma: f64,
    target: f64,
) -> Result<Ciphertext, CkksError> {
    if ct.len() != 2 {
        return Err(CkksError::WrongSize { expected: 2, found: ct.len() });
    }
    if lt.slots() != ct.slots() {
        return Err(CkksError::InvalidArgument { what: format!("the transform has {} slots, the ciphertext {}", lt.slots(), ct.slots()) });
    }
    let level = ct.level();
    if level == 0 {
        return Err(CkksError::NotEnoughLevels { op: "linear_transform", needed: 1, level: 0 });
    }
    let ctx = eval.context();
    let params = ctx.params();
    let backend = params.backend();
    let n = ctx.n();
    let basis = keyswitch::extended_basis(params, level)?;
    let p_mod_q = keyswitch::p_mod_q(params, level)?;
    let plan = plan(lt);
    let mut babies: Vec<usize> = plan.values().flat_map(|t| t.iter().map(|x| x.0)).collect();
    babies.sort_unstable();
    babies.dedup();
    let gk = eval.galois_keys(|| "a linear transform".to_string())?;
    let key = |step: usize| {
        let g = rotation_galois_element(step as i64, n);
        gk.get(g).map(|k| (g, k)).ok_or_else(|| CkksError::MissingRotationKey { what: format!("rotation by {step} (linear transform)"), galois_element: g })
    };
    let (c0, c1) = (&ct.inner().parts()[0], &ct.inner().parts()[1]);
    let p_c0 = lift(c0, &basis, &p_mod_q);
    let dec = keyswitch::decompose(params, &backend.intt(c1.clone())?, c1)?;
    // Baby steps as P-multiples over Q_l P.
    let rotated: Vec<[Poly<Ntt>; 2]> = babies
        .par_iter()
        .map(|&b| -> Result<[Poly<Ntt>; 2], CkksError> {
            if b == 0 {
                return Ok([p_c0.clone(), lift(c1, &basis, &p_mod_q)]);
            }
            let (g, k) = key(b)?;
            let [mut k0, k1] = keyswitch::key_switch_decomposed_lazy(params, &dec, k)?;
            k0.add_assign(&p_c0)?;
            let auto = ctx.automorphism(g)?;
            Ok([backend.automorphism_ntt(&k0, &auto)?, backend.automorphism_ntt(&k1, &auto)?])
        })
        .collect::<Result<_, _>>()?;
    let index: HashMap<usize, usize> = babies.iter().enumerate().map(|(t, &b)| (b, t)).collect();
    let giants: Vec<(&usize, &Vec<(usize, usize)>)> = plan.iter().collect();
    let partials: Vec<[Poly<Ntt>; 2]> = giants
        .par_iter()
        .map(|&(&g, terms)| -> Result<[Poly<Ntt>; 2], CkksError> {
            let pts: Vec<&Poly<Ntt>> =
                terms.iter().map(|&(_, k)| diags.get(&k).ok_or(CkksError::Internal("extended diagonal missing"))).collect::<Result<_, _>>()?;
            let r0: Vec<&Poly<Ntt>> = terms.iter().map(|&(b, _)| &rotated[index[&b]][0]).collect();
            let r1: Vec<&Poly<Ntt>> = terms.iter().map(|&(b, _)| &rotated[index[&b]][1]).collect();
            let [a0, a1] = crate::linear::dot_lazy(&r0, &r1, &pts)?;
            if g == 0 {
                return Ok([a0, a1]);
            }
            // Rotate (a0, a1) / P by g: ModDown only a1, switch it lazily, keep a0 as it is.
            let b1 = keyswitch::mod_down(params, a1, level)?;
            let dec = keyswitch::decompose(params, &backend.intt(b1.clone())?, &b1)?;
            let (ge, k) = key(g)?;
            let [mut k0, k1] = keyswitch::key_switch_decomposed_lazy(params, &dec, k)?;
            k0.add_assign(&a0)?;
            let auto = ctx.automorphism(ge)?;
            Ok([backend.automorphism_ntt(&k0, &auto)?, backend.automorphism_ntt(&k1, &auto)?])
        })
        .collect::<Result<_, _>>()?;
    let mut iter = partials.into_iter();
    let [mut acc0, mut acc1] = iter.next().ok_or(CkksError::Internal("no giant step"))?;
    for [p0, p1] in iter {
        acc0.add_assign(&p0)?;
        acc1.add_assign(&p1)?;
    }
    let parts = vec![keyswitch::mod_down(params, acc0, level)?, keyswitch::mod_down(params, acc1, level)?];
    let inner = lycaon_rlwe::Ciphertext::from_parts(params, parts)?;
    let out = Ciphertext::from_inner(ctx, inner, ct.scale() * sigma, ct.slots())?;
    let mut out = eval.rescale(&out)?;
    out.set_scale_metadata(target)?;
    Ok(out)
}
