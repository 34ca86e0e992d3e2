//! The latency of one hybrid key switch (one rotation) at a level: its limb operations
//! ([`KeySwitchCounts`], counted as rlwe performs them) priced by per-limb times
//! ([`KeySwitchCostModel`]). The model is a formula: fitting it to measured rotations
//! ([`KeySwitchCostModel::fit`]) takes the measurements as numbers, and measuring (which needs
//! real keys) lives outside this crate (`examples/keyset.rs --calibrate`).

use serde::{Deserialize, Serialize};

use super::ChainParams;
use crate::PlanError;

/// Limb operations of one hybrid key switch (one rotation) at a level, as rlwe performs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeySwitchCounts {
    /// Forward or inverse NTTs of one limb (n coefficients).
    pub ntts: u64,
    /// Element-wise limb operations outside the inner product (base-conversion sums, ModDown's
    /// subtraction and P^-1, the automorphism's permutation, adding c_0).
    pub elementwise: u64,
    /// Limb products of the inner product with the key: 2 d (l+1+K). Each reads one key limb
    /// that is not in cache (a key is hundreds of MB), so they are priced separately.
    pub key_products: u64,
}

impl KeySwitchCounts {
    /// At level l with K special primes and digits of alpha_j primes (d of them):
    /// NTTs = (l+1) [INTT of c_1] + sum_j (l+1+K-alpha_j) [ModUp NTTs] + 2 (K + l+1) [ModDown];
    /// element-wise = sum_j alpha_j (l+2+K-alpha_j) [ModUp conversion] + 2 (K (l+2) + l+1)
    /// [ModDown conversion and P^-1] + 2 (l+1) [automorphism] + (l+1) [adding c_0];
    /// key products = 2 d (l+1+K).
    pub fn at(chain: &ChainParams, level: usize) -> Result<Self, PlanError> {
        chain.check_level(level)?;
        let l1 = (level + 1) as u64;
        let k = chain.special_primes() as u64;
        let digits = chain.digit_sizes_at(level);
        let d = digits.len() as u64;
        let modup_ntts: u64 = digits.iter().map(|&a| l1 + k - a as u64).sum();
        let modup_ew: u64 = digits.iter().map(|&a| a as u64 * (l1 + 1 + k - a as u64)).sum();
        Ok(Self { ntts: l1 + modup_ntts + 2 * (k + l1), elementwise: modup_ew + 2 * (k * (l1 + 1) + l1) + 2 * l1 + l1, key_products: 2 * d * (l1 + k) })
    }
}

/// Seconds of one key switch at level l:
/// scale * (ntts(l) t_ntt + elementwise(l) t_ew) + key_products(l) t_key.
/// t_ntt and t_ew are micro-benchmarks of the backend on cache-resident limbs; `scale` and t_key
/// are fitted to real rotations (the inner product streams the key from memory, which a
/// micro-benchmark on a few limbs does not see).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KeySwitchCostModel {
    /// Ring degree the per-limb times are for (other degrees scale by n log n and n).
    pub log_n: u32,
    pub ntt_limb_s: f64,
    pub elementwise_limb_s: f64,
    pub scale: f64,
    pub key_product_limb_s: f64,
    pub threads: usize,
    pub source: String,
}

/// One calibration point: a real rlwe rotation at a level (measured outside this crate) against
/// the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CalibrationPoint {
    pub params: String,
    pub level: usize,
    pub counts: KeySwitchCounts,
    pub measured_s: f64,
    pub model_s: f64,
}

/// A measured cost model and the rotations it was fitted to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub model: KeySwitchCostModel,
    pub points: Vec<CalibrationPoint>,
}

impl KeySwitchCostModel {
    /// The model measured on the development machine (2 cores shared with other jobs; rlwe's CPU
    /// backend runs one thread) by `examples/keyset.rs --calibrate`: rotations on
    /// [`super::FheParams::lycaon_logn16`] at levels 4, 12, 25 and
    /// [`super::FheParams::joo2024_table1`] at levels 3, 16, 29, fitted by
    /// [`KeySwitchCostModel::fit`]; see `source` for the fit.
    pub fn recorded() -> Self {
        Self {
            log_n: 16,
            ntt_limb_s: 7.711e-4,
            elementwise_limb_s: 2.363e-4,
            scale: 0.7907,
            key_product_limb_s: 1.672e-4,
            threads: 1,
            source: "recorded on the 2-core development machine under load (load average ~3.5, so +-30% run to run), logN = 16, rlwe CPU backend (1 thread); measured rotations and the fit: lycaon preset (30 limbs, 7 digits) l=4 0.048 s -1%, l=12 0.168 s -9%, l=25 0.477 s -10%; joo2024 preset (31 limbs, 30 digits) l=3 0.028 s +22%, l=16 0.412 s -5%, l=29 1.185 s -5%".into(),
        }
    }

    /// The same machine's model at another ring degree (NTT per limb ~ n log n, the rest ~ n).
    pub fn at_log_n(&self, log_n: u32) -> Self {
        let ratio = 2f64.powi(log_n as i32 - self.log_n as i32);
        Self {
            log_n,
            ntt_limb_s: self.ntt_limb_s * ratio * log_n as f64 / self.log_n as f64,
            elementwise_limb_s: self.elementwise_limb_s * ratio,
            scale: self.scale,
            key_product_limb_s: self.key_product_limb_s * ratio,
            threads: self.threads,
            source: if log_n == self.log_n { self.source.clone() } else { format!("{} (scaled from logN = {} to {log_n})", self.source, self.log_n) },
        }
    }

    fn seconds_of(&self, c: &KeySwitchCounts) -> f64 {
        self.scale * (c.ntts as f64 * self.ntt_limb_s + c.elementwise as f64 * self.elementwise_limb_s) + c.key_products as f64 * self.key_product_limb_s
    }

    /// Predicted seconds of one rotation (one key switch and automorphism) at `level`.
    pub fn key_switch_seconds(&self, chain: &ChainParams, level: usize) -> Result<f64, PlanError> {
        let c = KeySwitchCounts::at(chain, level)?;
        Ok(if chain.log_n == self.log_n { self.seconds_of(&c) } else { self.at_log_n(chain.log_n).seconds_of(&c) })
    }

    /// Fits `scale` and t_key to measured rotations, given the per-limb NTT and element-wise
    /// times of the backend at `log_n` (micro-benchmarks): least squares on the relative error
    /// of measured = scale * (ntts t_ntt + elementwise t_ew) + key_products t_key, with t_key = 0
    /// when the fit asks for a negative value. Each point's `model_s` is filled in; its
    /// `measured_s` and `counts` are taken as given (`examples/keyset.rs --calibrate` measures
    /// them on real rlwe rotations).
    ///
    /// Errors: [`PlanError::Invalid`] for no points, or a time that is not finite and positive.
    pub fn fit(log_n: u32, ntt_limb_s: f64, elementwise_limb_s: f64, mut points: Vec<CalibrationPoint>) -> Result<Calibration, PlanError> {
        if points.is_empty() {
            return Err(PlanError::Invalid("calibration needs at least one measured rotation".into()));
        }
        let positive = |x: f64| x.is_finite() && x > 0.0;
        if !positive(ntt_limb_s) || !positive(elementwise_limb_s) || points.iter().any(|p| !positive(p.measured_s)) {
            return Err(PlanError::Invalid("calibration times must be finite and positive".into()));
        }
        let mut model = Self { log_n, ntt_limb_s, elementwise_limb_s, scale: 1.0, key_product_limb_s: 0.0, threads: 1, source: String::new() };
        // Relative least squares on measured = scale * x + t_key * y.
        let rows: Vec<(f64, f64)> = points
            .iter()
            .map(|p| {
                (
                    (p.counts.ntts as f64 * model.ntt_limb_s + p.counts.elementwise as f64 * model.elementwise_limb_s) / p.measured_s,
                    p.counts.key_products as f64 / p.measured_s,
                )
            })
            .collect();
        let (sxx, sxy, syy) = rows.iter().fold((0.0, 0.0, 0.0), |(a, b, c), (x, y)| (a + x * x, b + x * y, c + y * y));
        let (sx1, sy1) = rows.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
        let det = sxx * syy - sxy * sxy;
        let (mut scale, mut t_key) =
            if det.abs() > 1e-12 * sxx * syy { ((sx1 * syy - sy1 * sxy) / det, (sy1 * sxx - sx1 * sxy) / det) } else { (f64::NAN, f64::NAN) };
        if !(scale > 0.0 && t_key >= 0.0) {
            t_key = 0.0;
            scale = if sxx > 0.0 { sx1 / sxx } else { 1.0 };
        }
        model.scale = scale;
        model.key_product_limb_s = t_key;
        for p in &mut points {
            p.model_s = model.seconds_of(&p.counts);
        }
        let fit: Vec<String> = points
            .iter()
            .map(|p| format!("{} l={}: {:.3} s measured, {:+.0}%", p.params, p.level, p.measured_s, 100.0 * (p.model_s / p.measured_s - 1.0)))
            .collect();
        model.source = format!("measured: logN = {log_n}, rlwe CPU backend (1 thread); {}", fit.join("; "));
        Ok(Calibration { model, points })
    }
}
