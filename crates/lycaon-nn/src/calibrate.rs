//! Per-operation costs of one parameter set on this machine, measured by a short run: what the
//! planner multiplies the algorithms' operation counts by.
//!
//! The run makes throwaway keys and random ciphertexts for timing only (never a user's key) and
//! times each operation that [`crate::HeOps`] counts, at the top level where the layers run:
//! a hoisted decomposition, one rotation from it, a plaintext product, a lazy scalar
//! multiply-accumulate, an addition, a one-prime modulus switch; and the client's encryption
//! (seeded symmetric, top level) and decryption (level 0). Each figure is the median of several
//! runs of a batch. `parallel_speedup` is how much faster the thread pool runs a batch of
//! independent plaintext products than one thread does; [`OpCosts::layer_seconds`] scales it down
//! for a layer phase with fewer independent tasks than threads (a layer with one input ciphertext
//! rotates it on one thread).

use std::sync::Arc;
use std::time::Instant;

use lycaon_bfv::rlwe::{GaloisKeys, Parameters, SecretKey};
use lycaon_bfv::{BatchEncoder, BfvContext, CoeffEncoder, Decryptor, Evaluator, SecretKeyEncryptor};
use lycaon_math::Sampler;
use rayon::prelude::*;

use serde::{Deserialize, Serialize};

use crate::{HeOps, NnError, OpCounts};

/// The fan-out at which [`OpCosts::lazy_scalar_mac_fanout_s`] is measured.
pub const MAC_FANOUT: usize = 16;

/// Seconds per operation at the top level of one parameter set, single-threaded (serialisable:
/// the planner caches it per parameter shape).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpCosts {
    /// None for parameters without special primes (no rotation possible).
    pub hoisted_decomposition_s: Option<f64>,
    /// One automorphism with its key switch, from an existing decomposition.
    pub rotation_s: Option<f64>,
    pub plain_mult_s: f64,
    /// One lazy ciphertext-times-integer multiply-accumulate (counted as a scalar multiplication
    /// and an addition) into a single output.
    pub lazy_scalar_mac_s: f64,
    /// The same per output when each input feeds [`MAC_FANOUT`] accumulators at once (Walsh's
    /// blocks): more accumulators stream through the caches per input read.
    pub lazy_scalar_mac_fanout_s: f64,
    pub addition_s: f64,
    /// Dropping one prime from a two-part ciphertext (from the top level).
    pub mod_switch_s: f64,
    pub encrypt_s: f64,
    pub decrypt_s: f64,
    /// Thread-pool speedup on independent work (1.0 on one core).
    pub parallel_speedup: f64,
    pub threads: usize,
}

/// Seconds per call of `f`: the median of several samples, each a loop of calls long enough
/// (about 10 ms) that timer resolution and scheduler hiccups do not dominate. Short operations
/// measured once per sample were off by 30% between two calibrations of the same machine.
fn median_s(samples: usize, mut f: impl FnMut() -> Result<(), NnError>) -> Result<f64, NnError> {
    const SAMPLE_S: f64 = 0.01;
    let start = Instant::now();
    f()?; // warm-up: caches, lazily built tables
    let once = start.elapsed().as_secs_f64().max(1e-7);
    let calls = ((SAMPLE_S / once).ceil() as usize).clamp(1, 10_000);
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        let start = Instant::now();
        for _ in 0..calls {
            f()?;
        }
        times.push(start.elapsed().as_secs_f64() / calls as f64);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// How much faster the thread pool runs `4 x threads` independent calls of `task` than one
/// thread does: serial and parallel runs interleaved in pairs (so that drift of the machine hits
/// both alike), the median ratio of seven pairs, within [1, threads].
fn parallel_speedup(threads: usize, task: &(dyn Fn() -> Result<(), NnError> + Sync)) -> Result<f64, NnError> {
    let work = 4 * threads;
    let serial = || -> Result<f64, NnError> {
        let start = Instant::now();
        for _ in 0..work {
            task()?;
        }
        Ok(start.elapsed().as_secs_f64())
    };
    let parallel = || -> Result<f64, NnError> {
        let start = Instant::now();
        (0..work).into_par_iter().try_for_each(|_| task())?;
        Ok(start.elapsed().as_secs_f64())
    };
    serial()?;
    parallel()?;
    let mut ratios = (0..7).map(|_| Ok(serial()? / parallel()?)).collect::<Result<Vec<f64>, NnError>>()?;
    ratios.sort_by(f64::total_cmp);
    Ok(ratios[ratios.len() / 2].clamp(1.0, threads as f64))
}

impl OpCosts {
    /// Measures the costs for `params` (a BFV set with at least one special prime for the
    /// rotation figures; without one they are reported as infinite, since no rotation is possible).
    pub fn measure(params: &Arc<Parameters>) -> Result<Self, NnError> {
        let reps = 5;
        let n = params.n();
        let top = params.max_level();
        let mut sampler = Sampler::from_os()?;
        let sk = Arc::new(SecretKey::generate(params, &mut sampler)?);
        let ctx = BfvContext::new(params)?;
        let eval = Evaluator::new(&ctx);
        let mut encryptor = SecretKeyEncryptor::new(&ctx, sk.clone())?;
        let decryptor = Decryptor::new(&ctx, sk.clone())?;
        let t = ctx.plaintext_modulus();
        let values: Vec<u64> = (0..n as u64).map(|i| (i * 7919 + 13) % t).collect();
        let pt = match BatchEncoder::new(params) {
            Ok(b) => b.encode(&values)?,
            Err(_) => CoeffEncoder::new(params)?.encode(&values)?,
        };
        let ct = encryptor.encrypt(&pt)?.expand(params)?;
        let prepared = eval.prepare_plain(&pt, top)?;

        let encrypt_s = median_s(reps, || {
            encryptor.encrypt(&pt)?;
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

        // Lazy multiply-accumulate into one output and into MAC_FANOUT outputs per input.
        let ops_nokeys = HeOps::new(eval.clone(), GaloisKeys::generate(&sk, &[], &mut sampler)?);
        let lazy_mac = |outputs: usize| -> Result<f64, NnError> {
            let scalars: Vec<i64> = (0..outputs as i64).map(|k| 2 * k - 5).collect();
            // Layers add tens to thousands of terms before the one final reduction: take many
            // terms so that the reduction's share is small, as there.
            let terms = 32;
            let total = median_s(reps, || {
                let mut acc = ops_nokeys.scalar_accumulator(top, outputs, 127)?;
                for _ in 0..terms {
                    acc.add(&ct, &scalars);
                }
                acc.finish(params)?;
                Ok(())
            })?;
            Ok(total / (terms * outputs) as f64)
        };
        let lazy_scalar_mac_s = lazy_mac(1)?;
        let lazy_scalar_mac_fanout_s = lazy_mac(MAC_FANOUT)?;

        let rotation_elements: Vec<u64> = (1..=5).map(|k| lycaon_math::rotation_galois_element(k, n)).collect();
        let rotation_keys = if params.special_prime_count() > 0 { Some(GaloisKeys::generate(&sk, &rotation_elements, &mut sampler)?) } else { None };
        let (hoisted_decomposition_s, rotation_s) = if let Some(gk) = &rotation_keys {
            let elements = &rotation_elements;
            let c1 = &ct.parts()[1];
            let decomposition = median_s(reps, || {
                let coeff = params.backend().intt(c1.clone())?;
                lycaon_bfv::rlwe::keyswitch::decompose(params, &coeff, c1)?;
                Ok(())
            })?;
            let nine = median_s(reps, || {
                eval.apply_galois_hoisted(&ct, elements, gk)?;
                Ok(())
            })?;
            (Some(decomposition), Some(((nine - decomposition) / elements.len() as f64).max(0.0)))
        } else {
            (None, None)
        };

        let threads = rayon::current_num_threads().max(1);
        let parallel_speedup = if threads == 1 {
            1.0
        } else if let Some(gk) = &rotation_keys {
            // Key switching dominates the layers that rotate: time hoisted rotation batches.
            let elements = &rotation_elements;
            parallel_speedup(threads, &|| eval.apply_galois_hoisted(&ct, elements, gk).map(|_| ()).map_err(NnError::from))?
        } else {
            // Without rotations a task is an output's accumulation of plaintext products.
            parallel_speedup(threads, &|| {
                let mut acc = eval.mul_plain_prepared(&ct, &prepared)?;
                for _ in 1..8 {
                    acc = eval.add(&acc, &eval.mul_plain_prepared(&ct, &prepared)?)?;
                }
                Ok(())
            })?
        };
        Ok(Self { hoisted_decomposition_s, rotation_s, plain_mult_s, lazy_scalar_mac_s, lazy_scalar_mac_fanout_s, addition_s, mod_switch_s, encrypt_s, decrypt_s, parallel_speedup, threads })
    }

    /// Seconds of one lazy multiply-accumulate per output when each input feeds `fanout`
    /// accumulators (interpolated between the two measured fan-outs, constant beyond).
    pub fn lazy_mac_s(&self, fanout: usize) -> f64 {
        let f = (fanout.clamp(1, MAC_FANOUT) - 1) as f64 / (MAC_FANOUT - 1) as f64;
        self.lazy_scalar_mac_s + f * (self.lazy_scalar_mac_fanout_s - self.lazy_scalar_mac_s)
    }

    /// Speedup of a phase made of `tasks` equal independent tasks on the thread pool: the
    /// measured efficiency times the threads the tasks can occupy (k tasks on T threads take
    /// ceil(k / T) rounds).
    pub fn speedup_for(&self, tasks: usize) -> f64 {
        let threads = self.threads.max(1);
        let efficiency = self.parallel_speedup / threads as f64;
        let tasks = tasks.max(1);
        (efficiency * tasks as f64 / tasks.div_ceil(threads) as f64).max(1.0)
    }

    /// Predicted single-threaded server seconds of a layer's operation counts at the top level,
    /// split into the rotations (decompositions and key switches) and everything else.
    pub fn serial_seconds(&self, counts: &OpCounts, mac_fanout: usize) -> (f64, f64) {
        let plain_additions = counts.additions.saturating_sub(counts.scalar_mults);
        let rotation_part = if counts.rotations > 0 {
            counts.hoisted_decompositions as f64 * self.hoisted_decomposition_s.unwrap_or(f64::INFINITY)
                + counts.rotations as f64 * self.rotation_s.unwrap_or(f64::INFINITY)
        } else {
            0.0
        };
        let rest = counts.plain_mults as f64 * self.plain_mult_s
            + counts.scalar_mults as f64 * self.lazy_mac_s(mac_fanout)
            + plain_additions as f64 * self.addition_s
            + counts.mod_switches as f64 * self.mod_switch_s;
        (rotation_part, rest)
    }

    /// Predicted server seconds of a layer on the thread pool: its hoisted rotations run spread
    /// over the `input_tasks` input ciphertexts, the rest over the `output_tasks` outputs (how the
    /// layers parallelise their evaluation).
    /// Rotations that each need a decomposition of their own are taken on the outputs' side
    /// (Gazelle-PA's giant steps and the like).
    pub fn layer_seconds(&self, counts: &OpCounts, mac_fanout: usize, input_tasks: usize, output_tasks: usize) -> f64 {
        let (rotations, rest) = self.serial_seconds(counts, mac_fanout);
        let rotation_tasks = if counts.hoisted_decompositions >= counts.rotations { input_tasks.max(output_tasks) } else { input_tasks };
        rotations / self.speedup_for(rotation_tasks) + rest / self.speedup_for(output_tasks)
    }
}
