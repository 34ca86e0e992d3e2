//! Per-operation costs of one parameter set on this machine, measured by a short run: what the
//! planner multiplies the algorithms' operation counts by.
//!
//! The run makes throwaway keys and random ciphertexts for timing only (never a user's key) and
//! times each operation that [`crate::HeOps`] counts, at the top level where the layers run:
//! a hoisted decomposition, one rotation from it, a plaintext product, a lazy scalar
//! multiply-accumulate, an addition, a one-prime modulus switch; and the client's encryption
//! (seeded symmetric, top level) and decryption (level 0). Each figure is the median of several
//! runs of a batch. `parallel_speedup` is how much faster the thread pool runs a batch of
//! independent plaintext products than one thread does: the layers spread their work the same way.

use std::sync::Arc;
use std::time::Instant;

use lycaon_bfv::rlwe::{GaloisKeys, Parameters, SecretKey};
use lycaon_bfv::{BatchEncoder, BfvContext, CoeffEncoder, Decryptor, Encryptor, Evaluator};
use lycaon_math::Sampler;
use rayon::prelude::*;

use crate::{HeOps, NnError};

/// Seconds per operation at the top level of one parameter set, single-threaded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OpCosts {
    pub hoisted_decomposition_s: f64,
    /// One automorphism with its key switch, from an existing decomposition.
    pub rotation_s: f64,
    pub plain_mult_s: f64,
    /// One lazy ciphertext-times-integer multiply-accumulate (counted as a scalar multiplication
    /// and an addition).
    pub lazy_scalar_mac_s: f64,
    pub addition_s: f64,
    /// Dropping one prime from a two-part ciphertext (from the top level).
    pub mod_switch_s: f64,
    pub encrypt_s: f64,
    pub decrypt_s: f64,
    /// Thread-pool speedup on independent work (1.0 on one core).
    pub parallel_speedup: f64,
    pub threads: usize,
}

fn median_s(reps: usize, mut f: impl FnMut() -> Result<(), NnError>) -> Result<f64, NnError> {
    f()?; // warm-up: caches, lazily built tables
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let start = Instant::now();
        f()?;
        times.push(start.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

impl OpCosts {
    /// Measures the costs for `params` (a BFV set with at least one special prime for the
    /// rotation figures; without one they are reported as infinite, since no rotation is possible).
    pub fn measure(params: &Arc<Parameters>) -> Result<Self, NnError> {
        let reps = 3;
        let n = params.n();
        let top = params.max_level();
        let mut sampler = Sampler::from_os()?;
        let sk = Arc::new(SecretKey::generate(params, &mut sampler)?);
        let ctx = BfvContext::new(params)?;
        let eval = Evaluator::new(&ctx);
        let mut encryptor = Encryptor::new(&ctx)?;
        let decryptor = Decryptor::new(&ctx, sk.clone())?;
        let t = ctx.plaintext_modulus();
        let values: Vec<u64> = (0..n as u64).map(|i| (i * 7919 + 13) % t).collect();
        let pt = match BatchEncoder::new(params) {
            Ok(b) => b.encode(&values)?,
            Err(_) => CoeffEncoder::new(params)?.encode(&values)?,
        };
        let ct = encryptor.encrypt_symmetric(&sk, &pt)?.expand(params)?;
        let prepared = eval.prepare_plain(&pt, top)?;

        let encrypt_s = median_s(reps, || {
            encryptor.encrypt_symmetric(&sk, &pt)?;
            Ok(())
        })?;
        let low = eval.mod_switch_to(&ct, 0)?;
        let decrypt_s = median_s(reps, || {
            decryptor.decrypt(&low)?;
            Ok(())
        })?;
        let batch = 8;
        // Layers stream many distinct weight plaintexts through the cache: time the products over
        // a pool larger than the caches (about 8 MB), not one hot plaintext.
        let pool_len = ((8 << 20) / (8 * n * (top + 1))).clamp(4, 128);
        let pool: Vec<_> = (0..pool_len)
            .map(|k| {
                let shifted: Vec<u64> = values.iter().map(|v| (v + k as u64) % t).collect();
                let pt = match BatchEncoder::new(params) {
                    Ok(b) => b.encode(&shifted)?,
                    Err(_) => CoeffEncoder::new(params)?.encode(&shifted)?,
                };
                Ok(eval.prepare_plain(&pt, top)?)
            })
            .collect::<Result<Vec<_>, NnError>>()?;
        let plain_mult_s = median_s(reps, || {
            for pt in &pool {
                eval.mul_plain_prepared(&ct, pt)?;
            }
            Ok(())
        })? / pool_len as f64;
        let addition_s = median_s(reps, || {
            for _ in 0..batch {
                eval.add(&ct, &ct)?;
            }
            Ok(())
        })? / batch as f64;
        let mod_switch_s = if top > 0 {
            median_s(reps, || {
                eval.mod_switch_to_next(&ct)?;
                Ok(())
            })?
        } else {
            0.0
        };

        // Lazy multiply-accumulate: 4 outputs per input ciphertext, as the scalar layers do.
        let outputs = 4;
        let ops_nokeys = HeOps::new(eval.clone(), GaloisKeys::generate(&sk, &[], &mut sampler)?);
        let lazy_total = median_s(reps, || {
            let mut acc = ops_nokeys.scalar_accumulator(top, outputs, 127)?;
            for k in 0..batch {
                acc.add(&ct, &[k as i64 - 3, 5, -7, 11][..outputs]);
            }
            acc.finish(params)?;
            Ok(())
        })?;
        let lazy_scalar_mac_s = lazy_total / (batch * outputs) as f64;

        let (hoisted_decomposition_s, rotation_s) = if params.special_prime_count() > 0 {
            let elements: Vec<u64> = (1..=5).map(|k| lycaon_math::rotation_galois_element(k, n)).collect();
            let gk = GaloisKeys::generate(&sk, &elements, &mut sampler)?;
            let c1 = &ct.parts()[1];
            let decomposition = median_s(reps, || {
                let coeff = params.backend().intt(c1.clone());
                lycaon_bfv::rlwe::keyswitch::decompose(params, &coeff, c1)?;
                Ok(())
            })?;
            let nine = median_s(reps, || {
                eval.apply_galois_hoisted(&ct, &elements, &gk)?;
                Ok(())
            })?;
            (decomposition, ((nine - decomposition) / elements.len() as f64).max(0.0))
        } else {
            (f64::INFINITY, f64::INFINITY)
        };

        let threads = rayon::current_num_threads().max(1);
        let work = 4 * threads;
        let serial = median_s(reps, || {
            for _ in 0..work {
                eval.mul_plain_prepared(&ct, &prepared)?;
            }
            Ok(())
        })?;
        let parallel = median_s(reps, || {
            (0..work).into_par_iter().try_for_each(|_| eval.mul_plain_prepared(&ct, &prepared).map(|_| ()))?;
            Ok(())
        })?;
        let parallel_speedup = (serial / parallel).clamp(1.0, threads as f64);
        Ok(Self { hoisted_decomposition_s, rotation_s, plain_mult_s, lazy_scalar_mac_s, addition_s, mod_switch_s, encrypt_s, decrypt_s, parallel_speedup, threads })
    }

    /// Predicted single-threaded server seconds for operation counts at the top level.
    pub fn serial_seconds(&self, counts: &crate::OpCounts) -> f64 {
        let plain_additions = counts.additions.saturating_sub(counts.scalar_mults);
        let rotation_part = if counts.rotations > 0 {
            counts.hoisted_decompositions as f64 * self.hoisted_decomposition_s + counts.rotations as f64 * self.rotation_s
        } else {
            0.0
        };
        rotation_part
            + counts.plain_mults as f64 * self.plain_mult_s
            + counts.scalar_mults as f64 * self.lazy_scalar_mac_s
            + plain_additions as f64 * self.addition_s
            + counts.mod_switches as f64 * self.mod_switch_s
    }
}
