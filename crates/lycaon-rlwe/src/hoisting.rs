//! Lazy key switching for double hoisting (Bossuat, Mouchet, Troncoso-Pastoriza, Hubaux 2021):
//! the key-switching inner product left in the extended basis Q_l P (no ModDown), and the lift
//! x -> P x of a Q_l polynomial into Q_l P. A sum of many key-switched (and permuted, and
//! plaintext-multiplied) terms kept in Q_l P then pays a single ModDown, and its rounding error
//! is that of one division by P instead of one per term.

use std::sync::Arc;

use lycaon_math::{Ntt, Poly, RnsBasis, ShoupConstant};

use crate::keyswitch::{check_key_level, Decomposed};
use crate::{KeySwitchKey, Parameters, RlweError};

impl Decomposed {
    /// The level l of the decomposed polynomial (its digits live over Q_l P).
    pub fn level(&self) -> usize {
        self.level
    }
}

/// The inner product of decomposed digits with a key, over Q_l P: (u_0, u_1) with
/// ModDown(u_0) + ModDown(u_1) s = c s' + (small noise), i.e. u_0 + u_1 s = P c s' + (noise).
/// Errors as [`crate::keyswitch::key_switch_decomposed`].
pub fn key_switch_decomposed_lazy(params: &Parameters, dec: &Decomposed, key: &KeySwitchKey) -> Result<[Poly<Ntt>; 2], RlweError> {
    let _t = lycaon_math::profile::time(lycaon_math::profile::Kernel::KeySwitch);
    if &key.params_id != params.id() {
        return Err(RlweError::ParamsMismatch { what: "key-switching key" });
    }
    check_key_level(key, dec.level, None)?;
    let ctx = params.level(dec.level)?;
    let keys: Vec<&[Poly<Ntt>]> = key.digits.iter().take(dec.digits.len()).map(|d| d.as_slice()).collect();
    if keys.len() != dec.digits.len() {
        return Err(RlweError::Malformed { what: "key has fewer digits than the parameters require".into() });
    }
    let alpha = params.special_prime_count();
    let own: Vec<usize>;
    let limbs: &[usize] = if key.level == params.max_level() {
        &ctx.key_limbs
    } else {
        own = (0..=dec.level).chain(key.level + 1..key.level + 1 + alpha).collect();
        &own
    };
    let mut out = params.backend().inner_product(&dec.digits, &keys, limbs, 2)?.into_iter();
    match (out.next(), out.next()) {
        (Some(u0), Some(u1)) => Ok([u0, u1]),
        _ => Err(RlweError::Malformed { what: "inner product returned too few outputs".into() }),
    }
}

/// P x over Q_l P for x over Q_l (NTT form): limb i of Q_l times P mod q_i, the P limbs zero,
/// so that ModDown(P x) = x exactly.
pub fn lift_times_p(params: &Parameters, x: &Poly<Ntt>) -> Result<Poly<Ntt>, RlweError> {
    let level = x.num_limbs().checked_sub(1).ok_or(RlweError::Malformed { what: "empty polynomial".into() })?;
    let ctx = params.level(level)?;
    let p = params.p().ok_or(RlweError::NoSpecialPrimes)?;
    if !x.basis().same_primes(&ctx.q) {
        return Err(RlweError::Malformed { what: "the polynomial is not over Q_l of these parameters".into() });
    }
    let n = params.n();
    let mut data = vec![0u64; ctx.qp.len() * n];
    for (i, q) in ctx.q.moduli().iter().enumerate() {
        let p_mod = p.moduli().iter().fold(1u64, |acc, pj| q.mul(acc, q.reduce(pj.value())));
        let c = ShoupConstant::new(p_mod, q);
        for (o, &v) in data[i * n..(i + 1) * n].iter_mut().zip(x.limb(i)) {
            *o = q.mul_shoup(v, c.value, c.shoup);
        }
    }
    Ok(Poly::from_kernel_output(&ctx.qp, data))
}

/// The extended basis Q_l P at a level.
pub fn qp_at(params: &Parameters, level: usize) -> Result<&Arc<RnsBasis>, RlweError> {
    Ok(&params.level(level)?.qp)
}
