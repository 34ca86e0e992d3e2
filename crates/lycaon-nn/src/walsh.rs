//! The Walsh-Hadamard convolution with output-channel packing (Roh and Choi, ICCAD 2024;
//! ../papers/001 Sec. 3).
//!
//! Tiles are zero-padded, so the weight a diagonal applies to block b is one scalar v[b]. With
//! the nb x nb Walsh-Hadamard matrix H (H H^T = nb I) and h_k the plaintext that is H[k][b] on
//! every slot of block b,
//!
//!   sum_d rot_d(x) * v_d  =  (1/nb) sum_k h_k * ( sum_d alpha_{k,d} rot_d(x) ),
//!   alpha_{k,d} = sum_b H[k][b] v_d[b],
//!
//! so the server stores only integers (the weights) and the nb fixed plaintexts h_k, multiplies
//! ciphertexts by small scalars, accumulated lazily in 128 bits with one reduction per output and
//! k, and does nb - 1 plaintext products per output ciphertext. h_k is scaled by the kappa that
//! minimises the largest of kappa and the coefficients of kappa h_k mod t (001 Sec. 3.2.1, the
//! [k, -k] plaintext),
//! which keeps the noise of those products small; outputs carry the factor nb * kappa.
//!
//! As in 001 Fig. 3, only the spatial taps rotate the input (hoisted); the partial sums of each
//! output ciphertext are aligned to their output channels by one rotation per channel diagonal
//! (row swap, block shift) after the products, so the weights of a diagonal are taken per
//! source block.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use rayon::prelude::*;

use lycaon_bfv::noise::{NoiseEstimate, NoiseModel, NoiseProfile, PlainNorms};
use lycaon_bfv::rlwe::{Ciphertext, Parameters};
use lycaon_bfv::{BatchEncoder, BfvContext, Evaluator, Plaintext, PreparedPlaintext};

use crate::counting::ntt_cost;
use crate::grid::{diagonal_terms, DensePlacement, Term, TileGrid};
use crate::noise::{check_model, weight_stats};
use crate::packed::{elements_of, rotate_hoisted};
use crate::{ConvShape, HeOps, LayerNoise, LinearPlan, NnError, OpCounts, PlanCore, PreparedLayer, ValueBounds};

const NAME: &str = "walsh-hadamard";

#[derive(Clone)]
pub struct WalshConv {
    core: PlanCore,
    grid: TileGrid,
    in_place: DensePlacement,
    out_place: DensePlacement,
    in_cts: usize,
    out_cts: usize,
    terms: Arc<Vec<Term>>,
    /// Per term: the spatial rotation of its input, and the alignment of its diagonal.
    taps: Arc<Vec<u64>>,
    aligns: Arc<Vec<u64>>,
    kappa: u64,
    /// Found once per plan (they depend on n and t only, and the planner prices many parameter
    /// sets with one plan): the terms grouped as [`WalshConv::grouped`], the rotations of each
    /// input, the source blocks each term applies a weight to, and the norms of kappa h_k.
    grouped: Arc<Vec<BTreeMap<u64, BTreeMap<usize, Vec<usize>>>>>,
    rotations: Arc<Vec<Vec<u64>>>,
    term_blocks: Arc<Vec<usize>>,
    h_norms: Arc<Vec<PlainNorms>>,
}

/// H[k][b] of the Sylvester Walsh-Hadamard matrix.
fn walsh_sign(k: usize, b: usize) -> i64 {
    if (k & b).count_ones().is_multiple_of(2) {
        1
    } else {
        -1
    }
}

/// A convolution algorithm (001): a fully connected layer would put one value in each half of a
/// ciphertext, two per ciphertext (VGG-16's 25088 x 4096 layer: over 16 GB just to plan it).
fn refuse_fully_connected(shape: &ConvShape) -> Result<(), NnError> {
    if shape.is_fully_connected() {
        return Err(NnError::Unsupported {
            algorithm: NAME,
            reason: "a convolution algorithm: a fully connected layer would hold two values per ciphertext (use cheetah-matvec or gazelle)".into(),
        });
    }
    Ok(())
}

fn center(v: u64, t: u64) -> i64 {
    if v > t / 2 {
        v as i64 - t as i64
    } else {
        v as i64
    }
}

impl WalshConv {
    /// `block`: slots per block (channels per ciphertext = n / block); default n/2, one tile per
    /// row. Only then is h_1 sparse (two coefficients, made +-1 by kappa) and the plaintext
    /// product nearly noiseless; with more blocks per row h_k is dense, as in 001 where cn > 2
    /// costs more than it saves.
    pub fn new(shape: &ConvShape, params: &Arc<Parameters>, block: Option<usize>) -> Result<Self, NnError> {
        refuse_fully_connected(shape)?;
        let t = params.plaintext_modulus().ok_or(lycaon_bfv::BfvError::NotBfv)?.value();
        let grid = TileGrid::new(shape, params.n(), true, block.or(Some(params.n() / 2)), NAME)?;
        let in_place = DensePlacement { channels: shape.c_in, blocks: grid.blocks };
        let out_place = DensePlacement { channels: shape.c_out, blocks: grid.blocks };
        let (in_cts, out_cts) = (in_place.num_cts(grid.strips), out_place.num_cts(grid.strips));
        let mut terms = diagonal_terms(&grid, &in_place, &out_place, in_cts, out_cts);
        // An output ciphertext whose strips keep no output (a strided layer's last strip) gets no
        // term, yet the layout sends it: give it one unrotated term so that it is still a
        // ciphertext (of values nobody reads) and the counts stay those of the terms.
        for output in 0..out_cts {
            if !terms.iter().any(|t| t.output == output) {
                terms.push(Term { input: 0, output, swap: false, shift: 0, dy: 0, dx: 0 });
            }
        }
        let taps = terms.iter().map(|t| grid.galois(false, 0, t.dy, t.dx)).collect();
        let aligns = terms.iter().map(|t| grid.block_galois(t.swap, t.shift)).collect();
        let input_layout = grid.input_layout(in_cts, |c, s| in_place.place(c, s));
        let mut output_layout = grid.output_layout(out_cts, |o, s| out_place.place(o, s));
        let kappa = best_kappa(&walsh_plaintexts(params, grid.blocks, grid.block, 1)?, t);
        output_layout.scale = (grid.blocks as u64 % t) * kappa % t;
        let h_norms = walsh_plaintexts(params, grid.blocks, grid.block, kappa)?
            .iter()
            .map(|p| PlainNorms::of_centred(p.coeffs().iter().map(|&c| center(c, t))))
            .collect();
        let term_blocks = terms
            .iter()
            .map(|term| {
                (0..grid.blocks)
                    .filter(|&b| {
                        let src = grid.source_block(b, term.swap, term.shift);
                        match (out_place.tile(term.output, b, grid.strips), in_place.tile(term.input, src, grid.strips)) {
                            (Some((o, s)), Some((c, s2))) => s == s2 && grid.shape.weight_group_match(o, c),
                            _ => false,
                        }
                    })
                    .count()
            })
            .collect();
        let mut plan = Self {
            grid,
            in_place,
            out_place,
            in_cts,
            out_cts,
            terms: Arc::new(terms),
            taps: Arc::new(taps),
            aligns: Arc::new(aligns),
            kappa,
            grouped: Arc::default(),
            rotations: Arc::default(),
            term_blocks: Arc::new(term_blocks),
            h_norms: Arc::new(h_norms),
            core: PlanCore::new(params, *shape, input_layout, output_layout),
        };
        plan.grouped = Arc::new(plan.find_grouped());
        plan.rotations = Arc::new(plan.find_rotations_per_input());
        Ok(plan)
    }

    /// The input and output ciphertexts of the plan [`WalshConv::new`] makes (default block),
    /// without making it: its terms grow as inputs times outputs, which for a fully connected
    /// layer (two channels per ciphertext) are tens of millions.
    pub fn ciphertexts(shape: &ConvShape, n: usize) -> Result<(usize, usize), NnError> {
        refuse_fully_connected(shape)?;
        let grid = TileGrid::new(shape, n, true, Some(n / 2), NAME)?;
        let in_place = DensePlacement { channels: shape.c_in, blocks: grid.blocks };
        let out_place = DensePlacement { channels: shape.c_out, blocks: grid.blocks };
        Ok((in_place.num_cts(grid.strips), out_place.num_cts(grid.strips)))
    }

    /// Channels packed per ciphertext (the paper's c_n).
    pub fn blocks(&self) -> usize {
        self.grid.blocks
    }

    pub fn kappa(&self) -> u64 {
        self.kappa
    }

    /// Terms grouped by output ciphertext, then by alignment (diagonal), then by input.
    fn grouped(&self) -> &[BTreeMap<u64, BTreeMap<usize, Vec<usize>>>] {
        &self.grouped
    }

    fn find_grouped(&self) -> Vec<BTreeMap<u64, BTreeMap<usize, Vec<usize>>>> {
        let mut v = vec![BTreeMap::new(); self.out_cts];
        for (k, term) in self.terms.iter().enumerate() {
            let by_input: &mut BTreeMap<usize, Vec<usize>> = v[term.output].entry(self.aligns[k]).or_default();
            by_input.entry(term.input).or_default().push(k);
        }
        v
    }

    /// The distinct rotations of each input ciphertext (sorted).
    fn rotations_per_input(&self) -> &[Vec<u64>] {
        &self.rotations
    }

    fn find_rotations_per_input(&self) -> Vec<Vec<u64>> {
        let mut per_input = vec![Vec::new(); self.in_cts];
        for (t, &g) in self.terms.iter().zip(self.taps.iter()) {
            per_input[t.input].push(g);
        }
        per_input.into_iter().map(|v| elements_of(v.into_iter())).collect()
    }
}

/// The plaintexts h_k (k = 1 .. nb - 1) times kappa, in coefficient form.
fn walsh_plaintexts(params: &Arc<Parameters>, blocks: usize, block: usize, kappa: u64) -> Result<Vec<Plaintext>, NnError> {
    let t = params.plaintext_modulus().ok_or(lycaon_bfv::BfvError::NotBfv)?.value();
    let encoder = BatchEncoder::new(params)?;
    let n = params.n();
    let half = n / 2;
    let per_row = blocks / 2;
    (1..blocks)
        .map(|k| {
            let slots: Vec<u64> = (0..n)
                .map(|u| {
                    let b = (u / half) * per_row + (u % half) / block;
                    (walsh_sign(k, b) * kappa as i64).rem_euclid(t as i64) as u64
                })
                .collect();
            encoder.encode(&slots).map_err(NnError::from)
        })
        .collect()
}

/// The kappa in 1..t whose multiples of 1 and of the plaintexts' coefficients have the smallest
/// largest centred value (searched when the plaintexts have few distinct coefficients, as h_1 has two).
fn best_kappa(pts: &[Plaintext], t: u64) -> u64 {
    // The constant 1 of h_0 is scaled by kappa too: minimise the largest of both.
    let mut values: Vec<u64> = pts.iter().flat_map(|p| p.coeffs().iter().copied()).filter(|&c| c != 0).chain([1]).collect();
    values.sort_unstable();
    values.dedup();
    if values.is_empty() || values.len() > 8 {
        return 1;
    }
    smallest_multiplier(&values, t)
}

/// The k in 1..min(t, 2^22) with the smallest (largest |centred k v mod t| over `values`, k);
/// `values` holds 1. Since the largest is at least |centred k|, once a k of largest w is known
/// only k <= w and k >= t - w can do better: the scan skips the rest (for a prime t of 30 bits
/// or more, nearly the whole range), which gives the same k as trying all.
fn smallest_multiplier(values: &[u64], t: u64) -> u64 {
    let worst = |k: u64| values.iter().map(|&v| center(((v as u128 * k as u128) % t as u128) as u64, t).unsigned_abs()).max().unwrap_or(0);
    let end = t.min(1 << 22);
    let mut best: Option<(u64, u64)> = None;
    let mut k = 1;
    while k < end {
        if let Some((w, _)) = best {
            if k > w && k < t - w {
                k = t - w;
                continue;
            }
        }
        let key = (worst(k), k);
        if best.is_none_or(|b| key < b) {
            best = Some(key);
        }
        k += 1;
    }
    best.map_or(1, |(_, k)| k)
}

impl LinearPlan for WalshConv {
    fn name(&self) -> String {
        format!("walsh-hadamard-c{}", self.grid.blocks)
    }
    fn core(&self) -> &PlanCore {
        &self.core
    }
    fn with_params(&self, params: &Arc<Parameters>) -> Result<Box<dyn LinearPlan>, NnError> {
        Ok(Box::new(Self { core: self.core.with_params(params)?, ..self.clone() }))
    }

    fn counts(&self) -> OpCounts {
        let p = &*self.core.params;
        let top = p.max_level();
        let per_input = self.rotations_per_input();
        let input_rotations: u64 = per_input.iter().map(|g| g.iter().filter(|&&e| e != 1).count() as u64).sum();
        let decompositions = per_input.iter().filter(|g| g.iter().any(|&e| e != 1)).count() as u64;
        let grouped = self.grouped();
        let diagonals: u64 = grouped.iter().map(|d| d.len() as u64).sum();
        let alignments: u64 = grouped.iter().map(|d| d.keys().filter(|&&g| g != 1).count() as u64).sum();
        let nb = self.grid.blocks as u64;
        let lazy_terms = self.terms.len() as u64 * nb;
        let plain_mults = diagonals * (nb - 1);
        let rotations = input_rotations + alignments;
        OpCounts {
            rotations,
            hoisted_decompositions: decompositions + alignments,
            key_switches: rotations,
            plain_mults,
            scalar_mults: lazy_terms + if self.kappa == 1 { 0 } else { diagonals },
            additions: lazy_terms + plain_mults + diagonals - self.out_cts as u64,
            mod_switches: (self.out_cts * top) as u64,
            ntts: (decompositions + alignments) * ntt_cost::decomposition(p, top)
                + rotations * ntt_cost::key_switch(p, top)
                + self.out_cts as u64 * (1..=top).map(ntt_cost::mod_switch).sum::<u64>(),
        }
    }

    fn galois_elements(&self) -> Vec<u64> {
        elements_of(self.taps.iter().chain(self.aligns.iter()).copied().filter(|&g| g != 1))
    }

    /// Each rotated input is multiplied into all nb Walsh coefficient accumulators at once.
    fn scalar_mac_fanout(&self) -> usize {
        self.grid.blocks
    }

    fn weight_bytes(&self) -> usize {
        self.grid.shape.weight_len() * 8 + (self.grid.blocks - 1) * crate::layout::prepared_plaintext_bytes(&self.core.params)
    }

    /// Per output ciphertext and diagonal: acc_k = sum over terms of alpha_k * rot_tap(x) (exact
    /// lazy sums; a key switch on every tap but the centre), alpha_k = sum_b H[k][b] v[b] a signed
    /// sum of the term's m weights (m = source blocks holding a tile, so E = m E[w^2]); then
    /// kappa acc_0 + sum_k (kappa h_k) acc_k with the exact norms of the public plaintexts
    /// kappa h_k, one key switch for a non-trivial alignment, and the sum over diagonals.
    fn noise(&self, model: &NoiseModel, input: NoiseEstimate, bounds: ValueBounds) -> Result<LayerNoise, NnError> {
        check_model(model, &self.core.params)?;
        let top = self.core.params.max_level();
        let t = model.t as u64;
        let ks = model.key_switch(top);
        let w = weight_stats(model, bounds);
        let nb = self.grid.blocks;
        let h_norms = &self.h_norms;
        let kappa = center(self.kappa, t) as f64;
        let mut profile = NoiseProfile::default();
        for diagonals in self.grouped() {
            let mut out = model.zero(top);
            for (&align, by_input) in diagonals {
                let mut acc = vec![model.zero(top); nb];
                for &k in by_input.values().flatten() {
                    let alpha = w.sum_of(self.term_blocks[k] as f64, model.t);
                    let x = if self.taps[k] == 1 { input } else { model.add(input, ks) };
                    for a in acc.iter_mut() {
                        *a = model.add(*a, model.mul_random_scalar(x, alpha));
                    }
                }
                let partial = acc[1..].iter().zip(h_norms.iter()).fold(model.mul_scalar(acc[0], kappa), |p, (&a, &h)| model.add(p, model.mul_plain(a, h)));
                out = model.add(out, if align == 1 { partial } else { model.add(partial, ks) });
            }
            profile.push(model.n, out);
        }
        Ok(LayerNoise { profile, level: top })
    }

    fn prepare(&self, weights: &[i64]) -> Result<Box<dyn PreparedLayer>, NnError> {
        Ok(Box::new(self.prepare_walsh(weights)?))
    }

    /// One unit per output ciphertext.
    fn output_units(&self) -> usize {
        self.grouped().len()
    }

    fn evaluate_units(&self, ops: &HeOps, inputs: &[Ciphertext], weights: &[i64], units: Range<usize>) -> Result<Vec<Ciphertext>, NnError> {
        crate::check_units(&units, self.output_units())?;
        self.prepare_walsh(weights)?.evaluate_outputs(ops, inputs, units)
    }
}

impl WalshConv {
    fn prepare_walsh(&self, weights: &[i64]) -> Result<PreparedWalsh, NnError> {
        let sh = &self.grid.shape;
        sh.check_weights(weights)?;
        let t = self.core.params.plaintext_modulus().ok_or(lycaon_bfv::BfvError::NotBfv)?.value();
        let top = self.core.params.max_level();
        let nb = self.grid.blocks;
        let g = &self.grid;
        // The weight a term applies at source block src(b) is w[o_b][c_src(b)]: products are
        // taken before alignment. alpha[term][k] = sum_b' H[k][b'] v[b'] over source blocks
        //
        let alphas = self
            .terms
            .iter()
            .map(|term| {
                let mut v = vec![0i64; nb];
                for b in 0..nb {
                    let src = g.source_block(b, term.swap, term.shift);
                    let out = self.out_place.tile(term.output, b, g.strips);
                    let inp = self.in_place.tile(term.input, src, g.strips);
                    if let (Some((o, s)), Some((c, s2))) = (out, inp) {
                        if s == s2 {
                            v[src] = sh.weight(weights, o, c, term.dy, term.dx).unwrap_or(0);
                        }
                    }
                }
                (0..nb)
                    .map(|k| {
                        let a: i128 = v.iter().enumerate().map(|(b, &x)| walsh_sign(k, b) as i128 * x as i128).sum();
                        center(a.rem_euclid(t as i128) as u64, t)
                    })
                    .collect::<Vec<i64>>()
            })
            .collect::<Vec<_>>();
        let bound = alphas.iter().flatten().map(|a| a.unsigned_abs()).max().unwrap_or(0);
        let ctx = BfvContext::new(&self.core.params)?;
        let eval = Evaluator::new(&ctx);
        let walsh = walsh_plaintexts(&self.core.params, nb, self.grid.block, self.kappa)?
            .iter()
            .map(|pt| eval.prepare_plain(pt, top))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PreparedWalsh {
            alphas,
            bound,
            kappa: self.kappa,
            walsh,
            grouped: self.grouped().to_vec(),
            rotations: self.rotations_per_input().to_vec(),
            taps: self.taps.to_vec(),
            in_cts: self.in_cts,
            weight_count: weights.len(),
        })
    }
}

struct PreparedWalsh {
    /// Per term, alpha_k for k = 0 .. nb - 1 (centred mod t), and the largest |alpha|.
    alphas: Vec<Vec<i64>>,
    bound: u64,
    kappa: u64,
    /// kappa h_k for k = 1 .. nb - 1.
    walsh: Vec<PreparedPlaintext>,
    grouped: Vec<BTreeMap<u64, BTreeMap<usize, Vec<usize>>>>,
    rotations: Vec<Vec<u64>>,
    taps: Vec<u64>,
    in_cts: usize,
    weight_count: usize,
}

impl PreparedLayer for PreparedWalsh {
    /// The weights as integers (8 bytes each, as the server keeps them) and the nb - 1 Walsh
    /// plaintexts, shared by every layer with these parameters and block size.
    fn weight_bytes(&self) -> usize {
        self.weight_count * 8 + self.walsh.first().map_or(0, |p| p.to_bytes().len()) * self.walsh.len()
    }

    fn evaluate(&self, ops: &HeOps, inputs: &[Ciphertext]) -> Result<Vec<Ciphertext>, NnError> {
        self.evaluate_outputs(ops, inputs, 0..self.grouped.len())
    }
}

impl PreparedWalsh {
    /// Output ciphertexts `outputs` (in order); only the rotations of the inputs they use.
    fn evaluate_outputs(&self, ops: &HeOps, inputs: &[Ciphertext], outputs: Range<usize>) -> Result<Vec<Ciphertext>, NnError> {
        if inputs.len() != self.in_cts {
            return Err(NnError::Count { what: "input ciphertexts", expected: self.in_cts, found: inputs.len() });
        }
        let params = ops.params().clone();
        let top = params.max_level();
        let grouped = &self.grouped[outputs.clone()];
        let rotations: Vec<Vec<u64>> = if outputs.len() == self.grouped.len() {
            self.rotations.clone()
        } else {
            let mut used = vec![Vec::new(); self.in_cts];
            for terms_by_input in grouped.iter().flat_map(BTreeMap::values) {
                for (&i, terms) in terms_by_input {
                    used[i].extend(terms.iter().map(|&term| self.taps[term]));
                }
            }
            used.into_iter().map(|v| elements_of(v.into_iter())).collect()
        };
        let rotated: Vec<BTreeMap<u64, Ciphertext>> = inputs
            .par_iter()
            .zip(&rotations)
            .map(|(ct, elements)| if elements.is_empty() { Ok(BTreeMap::new()) } else { rotate_hoisted(ops, ct, elements) })
            .collect::<Result<_, _>>()?;
        let nb = self.walsh.len() + 1;
        grouped
            .par_iter()
            .map(|diagonals| {
                let mut out: Option<Ciphertext> = None;
                for (&align, terms_by_input) in diagonals {
                    let mut acc = ops.scalar_accumulator(top, nb, self.bound)?;
                    for (&i, terms) in terms_by_input {
                        for &term in terms {
                            acc.add(&rotated[i][&self.taps[term]], &self.alphas[term]);
                        }
                    }
                    let mut sums = acc.finish(&params)?.into_iter();
                    let first = sums.next().ok_or(NnError::Shape("no accumulator".into()))?;
                    // h_0 is the constant kappa.
                    let mut partial = Some(if self.kappa == 1 { first } else { ops.mul_scalar(&first, self.kappa as i64)? });
                    for (sum, h) in sums.zip(&self.walsh) {
                        ops.mul_plain_add(&mut partial, &sum, h)?;
                    }
                    let partial = partial.ok_or(NnError::Shape("empty partial sum".into()))?;
                    let aligned = ops.galois_hoisted(&partial, &[align])?.pop().ok_or(NnError::Shape("no rotation result".into()))?;
                    ops.add_into(&mut out, aligned)?;
                }
                ops.to_lowest(&out.ok_or(NnError::Shape("no output".into()))?)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pruned_kappa_search_equals_trying_every_multiplier() {
        let brute = |values: &[u64], t: u64| {
            let worst = |k: u64| values.iter().map(|&v| center(((v as u128 * k as u128) % t as u128) as u64, t).unsigned_abs()).max().unwrap_or(0);
            (1..t.min(1 << 22)).min_by_key(|&k| (worst(k), k)).unwrap_or(1)
        };
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        for t in [3u64, 17, 257, 7681, 12289, 65537, 786433] {
            for _ in 0..20 {
                let mut values: Vec<u64> = (0..1 + next(4)).map(|_| 1 + next(t - 1)).chain([1]).collect();
                values.sort_unstable();
                values.dedup();
                assert_eq!(smallest_multiplier(&values, t), brute(&values, t), "t = {t}, values {values:?}");
            }
        }
    }
}
