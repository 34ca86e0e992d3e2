//! Noise of a linear layer's outputs, predicted from the algorithm's sequence of operations without keys or weights (implementation_notes/bfv-noise.md, one section per algorithm).
//!
//! Each [`crate::LinearPlan::noise`] follows its `evaluate` step by step with the operations of
//! [`lycaon_bfv::noise::NoiseModel`], which carry the practical variance and the worst-case bound
//! together, and returns the noise of the outputs before the final modulus switch
//! ([`LayerNoise`]); the budgets are then taken at the output level.

use lycaon_bfv::noise::{NoiseEstimate, NoiseModel, NoiseProfile, ScalarStats};
use lycaon_bfv::rlwe::Parameters;

use crate::NnError;

/// What the planner knows about the values: |weight| <= `weight` and |input| <= `input` (for
/// b-bit quantisation, 2^(b-1)). The practical model takes the weights uniform in the range (real
/// weights, concentrated near 0, have a smaller second moment: the prediction is then
/// conservative). The input bound does not enter Lycaon's noise: messages are encoded as
/// round(Q m / t) exactly, so no product carries a message-dependent noise term (see the notes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueBounds {
    pub weight: u64,
    pub input: u64,
}

impl ValueBounds {
    /// Signed `bits`-bit weights and inputs.
    pub fn bits(weight_bits: u32, input_bits: u32) -> Self {
        Self { weight: 1 << (weight_bits - 1), input: 1 << (input_bits - 1) }
    }
}

/// The noise of a layer's outputs at the level the evaluation works at, before `evaluate`
/// switches them down to level 0 for sending.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerNoise {
    pub profile: NoiseProfile,
    pub level: usize,
}

impl LayerNoise {
    /// The outputs after switching down to `level` (prime by prime, as the evaluator does).
    pub fn switched_to(&self, model: &NoiseModel, level: usize) -> Result<NoiseProfile, NnError> {
        if level > self.level {
            return Err(NnError::Unsupported {
                algorithm: "noise model",
                reason: format!("cannot switch outputs at level {} up to level {level}", self.level),
            });
        }
        Ok(self.profile.map(|e| model.mod_switch_to(e, self.level, level)))
    }

    /// The outputs as `evaluate` returns them (level 0).
    pub fn output(&self, model: &NoiseModel) -> NoiseProfile {
        self.profile.map(|e| model.mod_switch_to(e, self.level, 0))
    }

    /// Practical remaining budget of the outputs (level 0) at a decryption-failure probability.
    pub fn practical_budget(&self, model: &NoiseModel, failure_probability: f64) -> f64 {
        self.output(model).practical_budget(model, failure_probability)
    }

    /// Worst-case remaining budget of the outputs (level 0): never above what is measured.
    pub fn worst_case_budget(&self, model: &NoiseModel) -> f64 {
        self.output(model).worst_case_budget(model)
    }
}

/// Noise flooding of a layer's outputs (circuit privacy): before the final modulus switch the
/// server adds to c_0 of every output ciphertext a noise drawn uniformly from [-bound, bound], after
/// re-randomising with a public-key encryption of zero. With the layer's noise below T on every
/// coefficient except with probability p (the practical model's Gaussian tail), the response is
/// within statistical distance sent * T / bound + p <= 2^-statistical_bits + p of one that does
/// not depend on the weights (per coefficient, shifting a uniform on 2 bound + 1 points by |e| <= T
/// moves at most T / bound of its mass; a union over the `sent` coefficients that travel). The
/// modulus switch after it is post-processing and keeps the distance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Flooding {
    /// log2 of the flooding bound (the bound itself can exceed 64 bits for large moduli).
    pub log2_bound: f64,
    /// Budgets of the flooded outputs after the switch to level 0: practical (at the failure
    /// probability) and worst case.
    pub practical_budget: f64,
    pub worst_case_budget: f64,
    /// The low bits the response can drop within the practical budget.
    pub drop: ResponseDrop,
}

/// Low-order bits dropped from every coefficient of a response at level 0 before it travels
/// (Cheetah's response compression, Huang et al. 2022): c_0's coefficients are rounded to
/// multiples of 2^c0, c_1's to 2^c1, and only the high bits travel. Decryption needs only the top
/// bits of c_0 + c_1 s, so the rounding is noise r_0 + r_1 s ([`NoiseModel::rounding`]); it is a
/// function of the flooded response, so privacy is unchanged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResponseDrop {
    pub c0: u32,
    pub c1: u32,
}

/// Practical budget (bits) a response keeps after its drop, where it had that much before.
pub const DROP_KEEPS_BITS: f64 = 1.0;

impl ResponseDrop {
    pub const NONE: Self = Self { c0: 0, c1: 0 };

    /// The drop that sends the fewest bits for `kept` coefficients of c_0 and all n of c_1 per
    /// ciphertext (q_0 as the model has it), while `profile` (the outputs at level 0) keeps
    /// [`DROP_KEEPS_BITS`] of practical budget at `failure_probability` (none where it has less).
    /// Returns the drop and the budget left.
    pub fn choose(model: &NoiseModel, profile: &NoiseProfile, failure_probability: f64, kept: f64) -> (Self, f64) {
        let q0_bits = model.log2_primes[0].ceil() as u32;
        let log2_q = profile.classes.first().map_or(0.0, |c| c.1.log2_q);
        let budget = |d: Self| {
            let r = model.rounding(d.c0, d.c1, log2_q);
            profile.map(|e| model.add(e, r)).practical_budget(model, failure_probability)
        };
        let before = budget(Self::NONE);
        if before < DROP_KEEPS_BITS {
            return (Self::NONE, before);
        }
        let bits_sent = |d: Self| kept * f64::from(q0_bits - d.c0) + model.n * f64::from(q0_bits - d.c1);
        let (mut best, mut best_budget) = (Self::NONE, before);
        for c1 in 0..q0_bits {
            if budget(Self { c0: 0, c1 }) < DROP_KEEPS_BITS {
                break;
            }
            // The budget falls as c0 grows: the largest c0 that keeps it, by bisection.
            let (mut lo, mut hi) = (0, q0_bits);
            while hi - lo > 1 {
                let mid = (lo + hi) / 2;
                if budget(Self { c0: mid, c1 }) >= DROP_KEEPS_BITS {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            let d = Self { c0: lo, c1 };
            if bits_sent(d) < bits_sent(best) {
                (best, best_budget) = (d, budget(d));
            }
        }
        (best, best_budget)
    }
}

impl LayerNoise {
    /// The flooding that reaches `statistical_bits` of statistical distance for `sent`
    /// coefficients per ciphertext, and the budgets left after it (negative: it does not fit).
    pub fn flooding(&self, model: &NoiseModel, statistical_bits: f64, failure_probability: f64, sent: f64) -> Flooding {
        let log2_q = self.profile.classes.first().map_or(0.0, |c| c.1.log2_q);
        // T from the practical budget at this level: budget = log2 Q - 1 - log2 t - log2 T.
        let log2_t_bound = log2_q - 1.0 - model.t.log2() - self.profile.practical_budget(model, failure_probability);
        let log2_bound = statistical_bits + sent.max(1.0).log2() + log2_t_bound;
        let bound = log2_bound.exp2();
        // The re-randomisation (a public-key encryption of zero) adds its noise first.
        let fresh = model.fresh_public(self.level);
        let flooded = self.profile.map(|e| NoiseEstimate { variance: e.variance + fresh.variance + bound * bound / 3.0, bound: e.bound + fresh.bound + bound, log2_q: e.log2_q });
        let switched = flooded.map(|e| model.mod_switch_to(e, self.level, 0));
        Flooding {
            log2_bound,
            practical_budget: switched.practical_budget(model, failure_probability),
            worst_case_budget: switched.worst_case_budget(model),
            drop: ResponseDrop::choose(model, &switched, failure_probability, sent).0,
        }
    }

    /// The response drop for outputs without flooding (tests of the bare protocol), as
    /// [`ResponseDrop::choose`] on the outputs at level 0.
    pub fn unflooded_drop(&self, model: &NoiseModel, failure_probability: f64, kept: f64) -> Result<ResponseDrop, NnError> {
        let switched = self.switched_to(model, 0)?;
        Ok(ResponseDrop::choose(model, &switched, failure_probability, kept).0)
    }
}

/// Checks that the model was made for these parameters.
pub(crate) fn check_model(model: &NoiseModel, params: &Parameters) -> Result<(), NnError> {
    let same =
        NoiseModel::from_params(params).is_some_and(|m| m.n == model.n && m.t == model.t && m.log2_primes == model.log2_primes && m.log2_p == model.log2_p);
    if !same {
        return Err(NnError::Unsupported { algorithm: "noise model", reason: "the noise model was made for other parameters than the plan's".into() });
    }
    Ok(())
}

/// The statistics of one weight.
pub(crate) fn weight_stats(model: &NoiseModel, bounds: ValueBounds) -> ScalarStats {
    ScalarStats::uniform(bounds.weight, model.t)
}

/// The number of non-zero coefficients of a batch-encoded plaintext whose slots follow `ids`
/// (equal ids: equal values, 0: zero, otherwise independent). A slot pattern invariant under the
/// row rotation by R (R | n/2) is fixed by the Galois group <3^R> = {x = 1 mod 4R}, whose fixed
/// polynomials are spanned by X^(j n / 2R): 2R coefficients, generically all non-zero (uniform
/// modulo t). With no such R the plaintext has all n coefficients.
pub(crate) fn slot_support(n: usize, ids: &[u64]) -> usize {
    if ids.iter().all(|&i| i == 0) {
        return 0;
    }
    let half = n / 2;
    let mut r = 1;
    while r < half {
        if (0..n).all(|u| ids[u] == ids[(u / half) * half + (u % half + r) % half]) {
            return 2 * r;
        }
        r *= 2;
    }
    n
}

/// Coefficient classes of sum_{h in H} sigma_h(u) for u with independent coefficients of
/// variance 1: (number of coefficients, variance factor). Coefficient i of sigma_h(u) is
/// +-u_j with j = i h^-1 mod n, the sign set by i h^-1 mod 2n. For i of 2-adic valuation v only
/// h mod 2^m (m = log2(2n) - v) matters: h = h' mod 2^(m-1) reads the same u_j, with the same sign
/// when also h = h' mod 2^m and the opposite one otherwise. So the factor is the sum over
/// x < 2^(m-1) of (mult(x) - mult(x + 2^(m-1)))^2; coefficient 0 gets |H|^2.
pub(crate) fn automorphism_sum_classes(n: usize, elements: &[u64]) -> Vec<(f64, f64)> {
    let log_2n = (2 * n).trailing_zeros();
    let mut classes = vec![(1.0, (elements.len() as f64).powi(2))];
    for v in 0..n.trailing_zeros() {
        let modulus = 1u64 << (log_2n - v);
        let half = modulus / 2;
        let mut net = std::collections::BTreeMap::<u64, i64>::new();
        for &h in elements {
            let r = h % modulus;
            *net.entry(r % half).or_default() += if r < half { 1 } else { -1 };
        }
        let factor: f64 = net.values().map(|&c| (c as f64).powi(2)).sum();
        classes.push(((n >> (v + 1)) as f64, factor));
    }
    classes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_drop_keeps_its_bit_and_takes_the_rest() {
        let model = NoiseModel { n: 8192.0, t: (1u64 << 37) as f64, log2_primes: vec![60.0], log2_p: 0.0, special_primes: 0, digit_size: 1 };
        let p = 2f64.powi(-40);
        let budget_of = |profile: &NoiseProfile, d: ResponseDrop| {
            let r = model.rounding(d.c0, d.c1, 60.0);
            profile.map(|e| model.add(e, r)).practical_budget(&model, p)
        };
        for sigma in [1e2, 1e3, 1e4, 3e4] {
            let profile = NoiseProfile::uniform(8192.0, NoiseEstimate { variance: sigma * sigma, bound: 0.0, log2_q: 60.0 });
            let (d, left) = ResponseDrop::choose(&model, &profile, p, 8192.0);
            assert!((budget_of(&profile, d) - left).abs() < 1e-9);
            assert!(left >= DROP_KEEPS_BITS, "sigma {sigma}: {d:?} leaves {left}");
            // Maximal: one more bit on either part breaks the budget.
            assert!(budget_of(&profile, ResponseDrop { c0: d.c0 + 1, ..d }) < DROP_KEEPS_BITS, "sigma {sigma}: {d:?}");
            assert!(budget_of(&profile, ResponseDrop { c1: d.c1 + 1, ..d }) < DROP_KEEPS_BITS, "sigma {sigma}: {d:?}");
            assert!(d.c0 > d.c1 && d.c1 > 0, "sigma {sigma}: {d:?}");
        }
        // No room: nothing dropped.
        let full = NoiseProfile::uniform(8192.0, NoiseEstimate { variance: 2f64.powi(40), bound: 0.0, log2_q: 60.0 });
        assert_eq!(ResponseDrop::choose(&model, &full, p, 8192.0).0, ResponseDrop::NONE);
    }

    #[test]
    fn support_of_periodic_patterns() {
        let n = 64;
        // Period 4 in both rows: 8 coefficients.
        let ids: Vec<u64> = (0..n as u64).map(|u| u % 4 + 1).collect();
        assert_eq!(slot_support(n, &ids), 8);
        let mut ids2 = ids.clone();
        ids2[5] = 99;
        assert_eq!(slot_support(n, &ids2), n);
        assert_eq!(slot_support(n, &vec![0; n]), 0);
    }

    #[test]
    fn automorphism_sums_are_coherent_at_coefficient_zero() {
        let n = 16;
        let classes = automorphism_sum_classes(n, &[1]);
        assert!(classes.iter().all(|&(_, f)| f == 1.0));
        assert_eq!(classes.iter().map(|c| c.0).sum::<f64>(), n as f64);
        // u + sigma_{-1}(u): coefficient 0 doubles (factor 4); X^(n/2) -> X^(-n/2) = -X^(n/2)
        // cancels; the rest read two different coefficients (factor 2).
        let classes = automorphism_sum_classes(n, &[1, 2 * n as u64 - 1]);
        assert_eq!(classes[0], (1.0, 4.0));
        assert_eq!(*classes.last().unwrap(), (1.0, 0.0));
        assert_eq!(classes[1], (8.0, 2.0));
        // Brute force on u(X) + u(X^3) + u(X^9) + u(X^27) against the classes.
        let elements = [1u64, 3, 9, 27];
        let classes = automorphism_sum_classes(n, &elements);
        for i in 1..n {
            let mut coef = vec![0i64; n];
            for &h in &elements {
                for j in 0..n {
                    let e = (j as u64 * h) % (2 * n as u64);
                    if e as usize % n == i {
                        coef[j] += if (e as usize) < n { 1 } else { -1 };
                    }
                }
            }
            let factor: i64 = coef.iter().map(|c| c * c).sum();
            let v = i.trailing_zeros() as usize;
            assert_eq!(classes[v + 1].1, factor as f64, "coefficient {i}");
        }
    }
}
