//! Operation counting. Algorithms reach homomorphic operations only through [`HeOps`], which
//! counts each call; a [`CountingBackend`] under the parameters counts NTTs independently of any
//! algorithm. Tests compare both with the counts each plan states before running.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use lycaon_backend::{Backend, CpuBackend};
use lycaon_bfv::rlwe::{Ciphertext, GaloisKeys, Parameters};
use lycaon_bfv::{Evaluator, PreparedPlaintext};
use lycaon_math::{Automorphism, BaseConverter, Coeff, MathError, Ntt, Poly};

use crate::NnError;

/// Operation counts of one layer evaluation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpCounts {
    /// Automorphisms with a key switch (rotations, row swaps and their compositions).
    pub rotations: u64,
    /// Decompositions of a ciphertext shared by its hoisted rotations.
    pub hoisted_decompositions: u64,
    /// Key switches (one per rotation here: no relinearisation in linear layers).
    pub key_switches: u64,
    /// Ciphertext-plaintext products.
    pub plain_mults: u64,
    /// Ciphertext-scalar products (lazy ones included).
    pub scalar_mults: u64,
    /// Ciphertext additions (lazy accumulations included).
    pub additions: u64,
    /// Modulus switches (one prime dropped from one ciphertext).
    pub mod_switches: u64,
    /// Single-limb forward or inverse NTTs run by the backend.
    pub ntts: u64,
}

impl std::ops::Add for OpCounts {
    type Output = OpCounts;
    fn add(self, o: OpCounts) -> OpCounts {
        OpCounts {
            rotations: self.rotations + o.rotations,
            hoisted_decompositions: self.hoisted_decompositions + o.hoisted_decompositions,
            key_switches: self.key_switches + o.key_switches,
            plain_mults: self.plain_mults + o.plain_mults,
            scalar_mults: self.scalar_mults + o.scalar_mults,
            additions: self.additions + o.additions,
            mod_switches: self.mod_switches + o.mod_switches,
            ntts: self.ntts + o.ntts,
        }
    }
}

/// NTTs of the backend per operation, derived from the key-switching code (hybrid key switching,
/// digits of the parameter set) so that plans can state NTT counts without running.
pub mod ntt_cost {
    use lycaon_bfv::rlwe::Parameters;

    /// Decomposing c_1 of a ciphertext at `level` (shared by all its hoisted rotations).
    pub fn decomposition(params: &Parameters, level: usize) -> u64 {
        let limbs = level + 1;
        let k = params.special_prime_count();
        let digits = params.key_switch_digit_sizes(level).unwrap_or_default();
        // INTT of c_1, then each digit's ModUp to the other limbs of Q_l P.
        (limbs + digits.iter().map(|d| limbs + k - d).sum::<usize>()) as u64
    }

    /// One key switch from decomposed digits: two ModDowns (INTT over P, NTT over Q_l).
    pub fn key_switch(params: &Parameters, level: usize) -> u64 {
        2 * (params.special_prime_count() + level + 1) as u64
    }

    /// Dropping one prime from a two-part ciphertext at `level`.
    pub fn mod_switch(level: usize) -> u64 {
        2 * level as u64
    }
}

/// Shared NTT counter.
#[derive(Clone, Debug, Default)]
pub struct NttCounter(Arc<AtomicU64>);

impl NttCounter {
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
    pub fn reset(&self) {
        self.0.store(0, Ordering::Relaxed)
    }
    fn add(&self, limbs: usize) {
        self.0.fetch_add(limbs as u64, Ordering::Relaxed);
    }
}

/// The CPU backend with a count of single-limb NTTs: build instrumented parameters with
/// `Parameters::with_backend(literal, Arc::new(CountingBackend::new(counter)))`.
#[derive(Debug)]
pub struct CountingBackend {
    inner: CpuBackend,
    counter: NttCounter,
}

impl CountingBackend {
    pub fn new(counter: NttCounter) -> Self {
        Self { inner: CpuBackend, counter }
    }
}

impl Backend for CountingBackend {
    fn name(&self) -> &str {
        "cpu (counting NTTs)"
    }
    fn ntt(&self, poly: Poly<Coeff>) -> Result<Poly<Ntt>, MathError> {
        self.counter.add(poly.num_limbs());
        self.inner.ntt(poly)
    }
    fn intt(&self, poly: Poly<Ntt>) -> Result<Poly<Coeff>, MathError> {
        self.counter.add(poly.num_limbs());
        self.inner.intt(poly)
    }
    fn mul_assign(&self, a: &mut Poly<Ntt>, b: &Poly<Ntt>) -> Result<(), MathError> {
        self.inner.mul_assign(a, b)
    }
    fn automorphism_ntt(&self, poly: &Poly<Ntt>, auto: &Automorphism) -> Result<Poly<Ntt>, MathError> {
        self.inner.automorphism_ntt(poly, auto)
    }
    fn convert_basis(&self, conv: &BaseConverter, poly: &Poly<Coeff>, centered: bool) -> Result<Poly<Coeff>, MathError> {
        self.inner.convert_basis(conv, poly, centered)
    }
    fn inner_product(&self, digits: &[Poly<Ntt>], keys: &[&[Poly<Ntt>]], key_limbs: &[usize], outputs: usize) -> Result<Vec<Poly<Ntt>>, MathError> {
        self.inner.inner_product(digits, keys, key_limbs, outputs)
    }
}

#[derive(Debug, Default)]
struct Counters {
    rotations: AtomicU64,
    decompositions: AtomicU64,
    plain_mults: AtomicU64,
    scalar_mults: AtomicU64,
    additions: AtomicU64,
    mod_switches: AtomicU64,
}

/// The homomorphic operations a linear layer may use, counted. Holds no secret.
#[derive(Clone, Debug)]
pub struct HeOps {
    eval: Evaluator,
    /// Shared, not copied: clones of the ops (one per worker) and a server's session read the
    /// same keys.
    keys: Arc<GaloisKeys>,
    counters: Arc<Counters>,
    output_level: usize,
}

fn bump(c: &AtomicU64, by: u64) {
    c.fetch_add(by, Ordering::Relaxed);
}

impl HeOps {
    pub fn new(eval: Evaluator, keys: impl Into<Arc<GaloisKeys>>) -> Self {
        Self { eval, keys: keys.into(), counters: Arc::default(), output_level: 0 }
    }

    /// Outputs are switched down to `level` instead of 0 (to measure a layer's own noise before
    /// the final modulus switch; layers send at level 0).
    pub fn with_output_level(mut self, level: usize) -> Self {
        self.output_level = level;
        self
    }

    pub fn params(&self) -> &Arc<Parameters> {
        self.eval.context().params()
    }

    pub fn evaluator(&self) -> &Evaluator {
        &self.eval
    }

    /// The operation counts so far (NTTs are counted by the backend, not here: 0).
    pub fn counts(&self) -> OpCounts {
        let c = &self.counters;
        let rotations = c.rotations.load(Ordering::Relaxed);
        OpCounts {
            rotations,
            hoisted_decompositions: c.decompositions.load(Ordering::Relaxed),
            key_switches: rotations,
            plain_mults: c.plain_mults.load(Ordering::Relaxed),
            scalar_mults: c.scalar_mults.load(Ordering::Relaxed),
            additions: c.additions.load(Ordering::Relaxed),
            mod_switches: c.mod_switches.load(Ordering::Relaxed),
            ntts: 0,
        }
    }

    /// The automorphisms X -> X^g of one ciphertext for each element, sharing one decomposition.
    pub fn galois_hoisted(&self, ct: &Ciphertext, elements: &[u64]) -> Result<Vec<Ciphertext>, NnError> {
        let nontrivial = elements.iter().filter(|&&g| g != 1).count() as u64;
        if nontrivial > 0 {
            bump(&self.counters.decompositions, 1);
            bump(&self.counters.rotations, nontrivial);
        }
        Ok(self.eval.apply_galois_hoisted(ct, elements, &self.keys)?)
    }

    /// acc += ct * pt (point-wise in NTT form).
    pub fn mul_plain_add(&self, acc: &mut Option<Ciphertext>, ct: &Ciphertext, pt: &PreparedPlaintext) -> Result<(), NnError> {
        bump(&self.counters.plain_mults, 1);
        let prod = self.eval.mul_plain_prepared(ct, pt)?;
        self.add_into(acc, prod)
    }

    /// acc += ct.
    pub fn add_into(&self, acc: &mut Option<Ciphertext>, ct: Ciphertext) -> Result<(), NnError> {
        match acc {
            None => *acc = Some(ct),
            Some(a) => {
                bump(&self.counters.additions, 1);
                *a = self.eval.add(a, &ct)?;
            }
        }
        Ok(())
    }

    pub fn mul_scalar(&self, ct: &Ciphertext, scalar: i64) -> Result<Ciphertext, NnError> {
        bump(&self.counters.scalar_mults, 1);
        Ok(self.eval.mul_scalar(ct, scalar)?)
    }

    /// Switches to level 0 for sending (or to the level set by [`HeOps::with_output_level`]).
    pub fn to_lowest(&self, ct: &Ciphertext) -> Result<Ciphertext, NnError> {
        let level = self.output_level.min(ct.level());
        bump(&self.counters.mod_switches, (ct.level() - level) as u64);
        Ok(self.eval.mod_switch_to(ct, level)?)
    }

    /// Accumulators of `outputs` sums of ciphertexts (at `level`) times signed integers whose
    /// absolute values are at most `bound`.
    pub fn scalar_accumulator(&self, level: usize, outputs: usize, bound: u64) -> Result<ScalarAccumulator, NnError> {
        ScalarAccumulator::new(self.params().q_at(level)?.clone(), outputs, bound, self.counters.clone())
    }
}

/// Sums of ciphertexts times signed integers, several at once so each input is read once, reduced
/// once at the end (lazy reduction, Roh and Choi 2024, Sec. 3.2.2). When |x alpha| < 2^63 / (terms
/// between folds), 64-bit wrapping arithmetic is exact (the sum is read back as a signed integer),
/// which vectorises; otherwise 128-bit accumulators take residues.
pub struct ScalarAccumulator {
    q: Arc<lycaon_math::RnsBasis>,
    /// [output][part] -> limb-major coefficients.
    small: Vec<[Vec<u64>; 2]>,
    wide: Vec<[Vec<u128>; 2]>,
    terms: u64,
    fold_every: u64,
    counters: Arc<Counters>,
}

impl ScalarAccumulator {
    fn new(q: Arc<lycaon_math::RnsBasis>, outputs: usize, bound: u64, counters: Arc<Counters>) -> Result<Self, NnError> {
        let len = q.len() * q.n();
        let q_max = q.moduli().iter().map(|m| m.value()).max().unwrap_or(1) as u128;
        let per_term = q_max * bound.max(1) as u128;
        let small_capacity = ((1u128 << 62) / per_term) as u64;
        let (small, wide, fold_every) = if small_capacity >= 16 {
            (vec![[vec![0u64; len], vec![0u64; len]]; outputs], Vec::new(), small_capacity - 1)
        } else {
            let cap = q.moduli().iter().map(lycaon_math::lazy_capacity).min().unwrap_or(2).saturating_sub(1).max(1);
            (Vec::new(), vec![[vec![0u128; len], vec![0u128; len]]; outputs], cap)
        };
        Ok(Self { q, small, wide, terms: 0, fold_every, counters })
    }

    /// acc[k] += alphas[k] * ct for every output k.
    pub fn add(&mut self, ct: &Ciphertext, alphas: &[i64]) {
        self.add_terms(&[(ct, alphas)]);
    }

    /// `add` for each (ct, alphas) in order, computed a tile of coefficients at a time: the tile
    /// of every accumulator and of each term stays in cache while all of them use it, so each
    /// input is read from memory once for all the outputs instead of once per output (the loop
    /// is bound by memory otherwise: 2 x limbs x n words per input and output).
    pub fn add_terms(&mut self, terms: &[(&Ciphertext, &[i64])]) {
        let outputs = self.small.len().max(self.wide.len());
        debug_assert!(terms.iter().all(|(_, alphas)| alphas.len() == outputs));
        let mut rest = terms;
        while !rest.is_empty() {
            // At most up to the next fold, which must come after the same number of terms.
            let room = (self.fold_every - self.terms % self.fold_every) as usize;
            let (group, tail) = rest.split_at(room.min(rest.len()));
            bump(&self.counters.scalar_mults, (outputs * group.len()) as u64);
            bump(&self.counters.additions, (outputs * group.len()) as u64);
            if self.small.is_empty() {
                self.add_wide(group);
            } else {
                self.add_small(group);
            }
            self.terms += group.len() as u64;
            if self.terms.is_multiple_of(self.fold_every) {
                self.fold();
            }
            rest = tail;
        }
    }

    /// Wrapping 64-bit multiply-adds, tile by tile (exact below the fold bound).
    fn add_small(&mut self, terms: &[(&Ciphertext, &[i64])]) {
        /// Coefficients per tile: 16 outputs' accumulator tiles (2 parts) take 128 KiB.
        const TILE: usize = 512;
        let len = self.q.len() * self.q.n();
        for start in (0..len).step_by(TILE) {
            let end = (start + TILE).min(len);
            for (ct, alphas) in terms {
                for (acc, &alpha) in self.small.iter_mut().zip(alphas.iter()) {
                    let a = alpha as u64;
                    for (dst, part) in acc.iter_mut().zip(ct.parts()) {
                        for (d, &x) in dst[start..end].iter_mut().zip(&part.data()[start..end]) {
                            *d = d.wrapping_add(x.wrapping_mul(a));
                        }
                    }
                }
            }
        }
    }

    /// 128-bit accumulators of residues (large moduli or weights).
    fn add_wide(&mut self, terms: &[(&Ciphertext, &[i64])]) {
        let n = self.q.n();
        for (ct, alphas) in terms {
            for (acc, &alpha) in self.wide.iter_mut().zip(alphas.iter()) {
                for (dst, part) in acc.iter_mut().zip(ct.parts()) {
                    for (i, q) in self.q.moduli().iter().enumerate() {
                        let s = q.reduce_i64(alpha) as u128;
                        for (d, &x) in dst[i * n..(i + 1) * n].iter_mut().zip(part.limb(i)) {
                            *d += x as u128 * s;
                        }
                    }
                }
            }
        }
    }

    fn fold(&mut self) {
        let n = self.q.n();
        for (i, q) in self.q.moduli().iter().enumerate() {
            for acc in self.small.iter_mut().flat_map(|a| a.iter_mut()) {
                for d in &mut acc[i * n..(i + 1) * n] {
                    *d = q.reduce_i64(*d as i64);
                }
            }
            for acc in self.wide.iter_mut().flat_map(|a| a.iter_mut()) {
                for d in &mut acc[i * n..(i + 1) * n] {
                    *d = q.reduce_u128(*d) as u128;
                }
            }
        }
    }

    /// The reduced sums as ciphertexts (NTT form, like the terms).
    pub fn finish(mut self, params: &Parameters) -> Result<Vec<Ciphertext>, NnError> {
        self.fold();
        let to_ct = |parts: [Vec<u64>; 2]| Ciphertext::from_parts(params, parts.into_iter().map(|d| Poly::<Ntt>::from_kernel_output(&self.q, d)).collect());
        let small = std::mem::take(&mut self.small).into_iter().map(to_ct);
        let wide = std::mem::take(&mut self.wide).into_iter().map(|a| a.map(|v| v.into_iter().map(|x| x as u64).collect::<Vec<u64>>())).map(to_ct);
        Ok(small.chain(wide).collect::<Result<Vec<_>, _>>()?)
    }
}
