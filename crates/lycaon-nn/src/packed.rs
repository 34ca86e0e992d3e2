//! Conventional packed convolution (Gazelle, Juvekar et al. 2018; ../papers/001 Fig. 2a): input
//! channels packed side by side without padding, weights in plaintexts with zeros where a tap
//! leaves the image, output channels packed by diagonals. Two schedules (Reagen et al. 2021,
//! Sec. V): input-aligned (rotate the input, hoisted, then multiply) and partial-aligned
//! (multiply the input in place, sum over input ciphertexts, rotate the partial sums). Optional
//! plaintext decomposition: the client sends its input times powers of 2^bits and the server
//! multiplies each copy by one digit of the weight plaintexts, which keeps the noise of a
//! plaintext product near n 2^bits instead of n t.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use rayon::prelude::*;

use lycaon_bfv::rlwe::{Ciphertext, Parameters};
use lycaon_bfv::{BatchEncoder, BfvContext, Evaluator, Plaintext, PreparedPlaintext};

use lycaon_bfv::noise::{NoiseEstimate, NoiseModel, NoiseProfile, PlainNorms, ScalarStats};

use crate::counting::ntt_cost;
use crate::grid::{diagonal_terms, DensePlacement, Term, TileGrid};
use crate::noise::check_model;
use crate::{ConvShape, HeOps, LayerNoise, LinearPlan, NnError, OpCounts, PlanCore, PreparedLayer, ValueBounds};

/// When to rotate: before the products (input-aligned) or after (partial-aligned).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    InputAligned,
    PartialAligned,
}

#[derive(Clone, Copy, Debug)]
pub struct PackedOptions {
    pub schedule: Schedule,
    /// Block size in slots (a power of two up to n/2); default: the smallest that holds a tile.
    pub block: Option<usize>,
    /// Plaintext decomposition base in bits; None: no decomposition.
    pub plain_decomposition_bits: Option<u32>,
}

impl Default for PackedOptions {
    fn default() -> Self {
        Self { schedule: Schedule::InputAligned, block: None, plain_decomposition_bits: None }
    }
}

#[derive(Clone)]
pub struct PackedConv {
    core: PlanCore,
    grid: TileGrid,
    in_place: DensePlacement,
    out_place: DensePlacement,
    in_cts: usize,
    out_cts: usize,
    digits: usize,
    opts: PackedOptions,
    terms: Arc<Vec<Term>>,
    /// The Galois element of each term, the distinct elements of each rotation group (see
    /// [`PackedConv::rotations_per_group`]) and the outputs' noise patterns: found once per
    /// plan, since a layer can have millions of terms and the planner prices many parameter
    /// sets with one plan.
    elements: Arc<Vec<u64>>,
    groups: Arc<Vec<Vec<u64>>>,
    noise_patterns: Arc<NoisePatterns>,
}

/// Per output ciphertext, the terms' inputs in order (true: rotated before the product, IA with
/// g != 1) and the number of rotated partial sums added (PA): all its noise depends on. Outputs
/// with equal patterns share one evaluation of the noise.
#[derive(Debug, Default)]
struct NoisePatterns {
    patterns: Vec<(Vec<bool>, usize)>,
    of_output: Vec<usize>,
}

const NAME: &str = "packed (Gazelle)";

impl PackedConv {
    pub fn new(shape: &ConvShape, params: &Arc<Parameters>, opts: PackedOptions) -> Result<Self, NnError> {
        let t = params.plaintext_modulus().ok_or(lycaon_bfv::BfvError::NotBfv)?.value();
        let grid = TileGrid::new(shape, params.n(), false, opts.block, NAME)?;
        let in_place = DensePlacement { channels: shape.c_in, blocks: grid.blocks };
        let out_place = DensePlacement { channels: shape.c_out, blocks: grid.blocks };
        let (in_cts, out_cts) = (in_place.num_cts(grid.strips), out_place.num_cts(grid.strips));
        let digits = match opts.plain_decomposition_bits {
            None => 1,
            Some(bits) if (1..=30).contains(&bits) => (64 - t.leading_zeros()).div_ceil(bits) as usize,
            Some(bits) => return Err(NnError::Unsupported { algorithm: NAME, reason: format!("plaintext decomposition base 2^{bits} is outside 2^1..2^30") }),
        };
        let mut input_layout = grid.input_layout(in_cts * digits, |c, s| in_place.place(c, s));
        // Copy k of every input ciphertext carries the input times 2^(bits k).
        if let Some(bits) = opts.plain_decomposition_bits {
            input_layout.placements = (0..digits)
                .flat_map(|k| input_layout.placements.iter().map(move |p| crate::layout::Placement { ct: p.ct + (k * in_cts) as u32, ..*p }))
                .collect();
            input_layout.ct_factor = (0..digits).flat_map(|k| std::iter::repeat_n(pow_mod(2, bits as u64 * k as u64, t), in_cts)).collect();
        }
        let output_layout = grid.output_layout(out_cts, |o, s| out_place.place(o, s));
        let mut conv = Self {
            grid,
            in_place,
            out_place,
            in_cts,
            out_cts,
            digits,
            opts,
            terms: Arc::default(),
            elements: Arc::default(),
            groups: Arc::default(),
            noise_patterns: Arc::default(),
            core: PlanCore::new(params, *shape, input_layout, output_layout),
        };
        conv.terms = Arc::new(diagonal_terms(&conv.grid, &conv.in_place, &conv.out_place, conv.in_cts, conv.out_cts));
        // A term's element depends only on its diagonal and tap: a small table.
        let (taps, per_row) = (shape.kh * shape.kw, conv.grid.blocks_per_row());
        let table: Vec<u64> =
            (0..2 * per_row * taps).map(|i| conv.grid.galois(i / (per_row * taps) == 1, (i / taps) % per_row, (i % taps) / shape.kw, i % shape.kw)).collect();
        conv.elements = Arc::new(conv.terms.iter().map(|t| table[(usize::from(t.swap) * per_row + t.shift) * taps + t.dy * shape.kw + t.dx]).collect());
        conv.groups = Arc::new(conv.find_rotations_per_group());
        conv.noise_patterns = Arc::new(conv.find_noise_patterns());
        Ok(conv)
    }

    /// Slot values of a term's weight plaintext, aligned with the output slots.
    fn term_slots(&self, term: &Term, weights: &[i64], t: u64) -> Vec<u64> {
        let g = &self.grid;
        let sh = &g.shape;
        let mut v = vec![0u64; g.n];
        for b in 0..g.blocks {
            let Some((o, s)) = self.out_place.tile(term.output, b, g.strips) else {
                continue;
            };
            let Some((c, s2)) = self.in_place.tile(term.input, g.source_block(b, term.swap, term.shift), g.strips) else {
                continue;
            };
            if s != s2 {
                continue;
            }
            let Some(w) = sh.weight(weights, o, c, term.dy, term.dx) else {
                continue;
            };
            let w = w.rem_euclid(t as i64) as u64;
            for y in g.kept_rows(s) {
                for x in g.kept_cols() {
                    if g.tap_valid(y, x, term.dy, term.dx) {
                        v[g.block_slot(b) + g.out_offset(s, y, x)] = w;
                    }
                }
            }
        }
        v
    }

    /// Distinct Galois elements (1 included when present) applied to each input ciphertext (IA)
    /// or to the partial sums of each output ciphertext (PA).
    fn rotations_per_group(&self) -> &[Vec<u64>] {
        &self.groups
    }

    fn find_rotations_per_group(&self) -> Vec<Vec<u64>> {
        let groups = match self.opts.schedule {
            Schedule::InputAligned => self.in_cts,
            Schedule::PartialAligned => self.out_cts,
        };
        let mut sets = vec![std::collections::BTreeSet::new(); groups];
        for (term, &g) in self.terms.iter().zip(self.elements.iter()) {
            let key = match self.opts.schedule {
                Schedule::InputAligned => term.input,
                Schedule::PartialAligned => term.output,
            };
            sets[key].insert(g);
        }
        sets.into_iter().map(|s| s.into_iter().collect()).collect()
    }

    fn find_noise_patterns(&self) -> NoisePatterns {
        let mut reads = vec![Vec::new(); self.out_cts];
        let mut rotated = vec![std::collections::BTreeSet::new(); self.out_cts];
        for (term, &g) in self.terms.iter().zip(self.elements.iter()) {
            reads[term.output].push(self.opts.schedule == Schedule::InputAligned && g != 1);
            if self.opts.schedule == Schedule::PartialAligned && g != 1 {
                rotated[term.output].insert(g);
            }
        }
        let mut ids = std::collections::HashMap::new();
        let mut out = NoisePatterns::default();
        for (r, g) in reads.into_iter().zip(rotated) {
            let key = (r, g.len());
            let next = ids.len();
            let id = *ids.entry(key.clone()).or_insert(next);
            if id == next {
                out.patterns.push(key);
            }
            out.of_output.push(id);
        }
        out
    }
}

/// Norms of each digit of a weight plaintext: its coefficients are uniform modulo t on all n
/// positions (each block holds other weights, so no rotation fixes the slots). Decomposed into
/// `digits` signed digits base B = 2^bits, the low digits are uniform in [-B/2, B/2)
/// (E = (B^2 + 2) / 12) and the top digit carries the rest of a uniform residue:
/// E[top^2] = (E[c^2] - sum_i B^(2i) E[low^2]) / B^(2(digits-1)), |top| <= B/2.
pub(crate) fn plain_digit_norms(n: f64, t: f64, bits: Option<u32>, digits: usize) -> Vec<PlainNorms> {
    let Some(bits) = bits else {
        return vec![PlainNorms::uniform_mod_t(n, t)];
    };
    let b = (bits as f64).exp2();
    let low = ScalarStats { mean_square: (b * b + 2.0) / 12.0, max_abs: b / 2.0 };
    let whole = ScalarStats::uniform_mod_t(t);
    let below: f64 = (0..digits - 1).map(|i| b.powi(2 * i as i32) * low.mean_square).sum();
    let scale = b.powi(2 * (digits as i32 - 1));
    let low_sum_max: f64 = (0..digits - 1).map(|i| b.powi(i as i32) * low.max_abs).sum();
    let top = ScalarStats {
        mean_square: ((whole.mean_square - below) / scale).max(0.0),
        max_abs: (b / 2.0).min(((whole.max_abs + low_sum_max) / b.powi(digits as i32 - 1)).floor()),
    };
    (0..digits).map(|i| PlainNorms::coefficients(n, if i + 1 == digits { top } else { low })).collect()
}

fn pow_mod(base: u64, exp: u64, m: u64) -> u64 {
    let (mut r, mut b, mut e) = (1u128, base as u128 % m as u128, exp);
    while e > 0 {
        if e & 1 == 1 {
            r = r * b % m as u128;
        }
        b = b * b % m as u128;
        e >>= 1;
    }
    r as u64
}

impl ConvShape {
    /// Whether output channel o and input channel c are in the same group.
    pub(crate) fn weight_group_match(&self, o: usize, c: usize) -> bool {
        o / (self.c_out / self.groups) == c / self.in_per_group()
    }
}

impl LinearPlan for PackedConv {
    fn name(&self) -> String {
        let sched = match self.opts.schedule {
            Schedule::InputAligned => "IA",
            Schedule::PartialAligned => "PA",
        };
        match self.opts.plain_decomposition_bits {
            Some(b) => format!("gazelle-{sched}-pd{b}"),
            None => format!("gazelle-{sched}"),
        }
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
        let groups = self.rotations_per_group();
        let copies = match self.opts.schedule {
            Schedule::InputAligned => self.digits as u64,
            Schedule::PartialAligned => 1,
        };
        let rotations: u64 = groups.iter().map(|g| g.iter().filter(|&&e| e != 1).count() as u64).sum::<u64>() * copies;
        let decompositions = match self.opts.schedule {
            Schedule::InputAligned => groups.iter().filter(|g| g.iter().any(|&e| e != 1)).count() as u64 * copies,
            Schedule::PartialAligned => rotations,
        };
        let plain_mults = (self.terms.len() * self.digits) as u64;
        // Every product and every rotated partial sum is added into an accumulator; the first
        // addend of each accumulator is a move.
        // Every product lands in an accumulator whose first addend is a move; under PA each
        // partial sum is one more accumulator and one more addend, which cancel.
        let additions = plain_mults - self.out_cts as u64;
        let mod_switches = (self.out_cts * top) as u64;
        let ntts = decompositions * ntt_cost::decomposition(p, top)
            + rotations * ntt_cost::key_switch(p, top)
            + (self.out_cts as u64) * (1..=top).map(ntt_cost::mod_switch).sum::<u64>();
        OpCounts { rotations, hoisted_decompositions: decompositions, key_switches: rotations, plain_mults, scalar_mults: 0, additions, mod_switches, ntts }
    }

    fn galois_elements(&self) -> Vec<u64> {
        let mut all: Vec<u64> = self.rotations_per_group().iter().flatten().copied().filter(|&g| g != 1).collect();
        all.sort_unstable();
        all.dedup();
        all
    }

    fn weight_bytes(&self) -> usize {
        self.terms.len() * self.digits * crate::layout::prepared_plaintext_bytes(&self.core.params)
    }

    /// IA: every term adds p_d * rot_g(x_d) over the digit copies (rot_g adds a key switch unless
    /// g = 1); PA: the products of the unrotated copies are summed per (output, g), then one key
    /// switch per non-trivial g. Outputs: n coefficients per output ciphertext.
    fn noise(&self, model: &NoiseModel, input: NoiseEstimate, _bounds: ValueBounds) -> Result<LayerNoise, NnError> {
        check_model(model, &self.core.params)?;
        let top = self.core.params.max_level();
        let ks = model.key_switch(top);
        let digits = plain_digit_norms(model.n, model.t, self.opts.plain_decomposition_bits, self.digits);
        let patterns: Vec<NoiseEstimate> = self
            .noise_patterns
            .patterns
            .iter()
            .map(|(reads, rotated_sums)| {
                let e = reads.iter().fold(model.zero(top), |e, &rotated| {
                    let x = if rotated { model.add(input, ks) } else { input };
                    digits.iter().fold(e, |e, &d| model.add(e, model.mul_plain(x, d)))
                });
                (0..*rotated_sums).fold(e, |e, _| model.add(e, ks))
            })
            .collect();
        let mut profile = NoiseProfile::default();
        for &p in &self.noise_patterns.of_output {
            profile.push(model.n, patterns[p]);
        }
        Ok(LayerNoise { profile, level: top })
    }

    fn prepare(&self, weights: &[i64]) -> Result<Box<dyn PreparedLayer>, NnError> {
        let encoder = TermEncoder::new(self, weights)?;
        let plaintexts = (0..self.terms.len()).into_par_iter().map(|k| encoder.plaintexts(k)).collect::<Result<Vec<_>, NnError>>()?;
        Ok(Box::new(PreparedPacked { plan: self.clone_plan(), plaintexts }))
    }

    /// Each term's plaintexts prepared when its products are taken and dropped after: every term
    /// is used once per evaluation, so this does the same work as `prepare` and holds at most a
    /// few plaintexts per thread instead of all of them (28 GiB for VGG-16's 28x28 layers).
    fn evaluate_streaming(&self, ops: &HeOps, inputs: &[Ciphertext], weights: &[i64]) -> Result<Vec<Ciphertext>, NnError> {
        self.evaluate_units(ops, inputs, weights, 0..self.out_cts)
    }

    /// One unit per output ciphertext.
    fn output_units(&self) -> usize {
        self.out_cts
    }

    fn evaluate_units(&self, ops: &HeOps, inputs: &[Ciphertext], weights: &[i64], units: Range<usize>) -> Result<Vec<Ciphertext>, NnError> {
        crate::check_units(&units, self.out_cts)?;
        let encoder = TermEncoder::new(self, weights)?;
        self.clone_plan().evaluate(ops, inputs, &|k| encoder.plaintexts(k).map(Cow::Owned), units)
    }
}

/// Turns one term's weights into its prepared plaintexts, one per plaintext digit.
struct TermEncoder<'a> {
    conv: &'a PackedConv,
    weights: &'a [i64],
    t: u64,
    eval: Evaluator,
    encoder: BatchEncoder,
}

impl<'a> TermEncoder<'a> {
    fn new(conv: &'a PackedConv, weights: &'a [i64]) -> Result<Self, NnError> {
        conv.grid.shape.check_weights(weights)?;
        let params = &conv.core.params;
        let t = params.plaintext_modulus().ok_or(lycaon_bfv::BfvError::NotBfv)?.value();
        Ok(Self { conv, weights, t, eval: Evaluator::new(&BfvContext::new(params)?), encoder: BatchEncoder::new(params)? })
    }

    fn plaintexts(&self, k: usize) -> Result<Vec<PreparedPlaintext>, NnError> {
        let conv = self.conv;
        let term = &conv.terms[k];
        let mut slots = conv.term_slots(term, self.weights, self.t);
        if conv.opts.schedule == Schedule::PartialAligned {
            // Multiply before rotating: put each weight at the slot its input occupies.
            let half = conv.grid.half();
            let rot = conv.grid.rotation(term.shift, term.dy, term.dx).rem_euclid(half as i64) as usize;
            let mut moved = vec![0u64; slots.len()];
            for (u, &w) in slots.iter().enumerate() {
                let (row, k) = (u / half, u % half);
                moved[(row ^ usize::from(term.swap)) * half + (k + rot) % half] = w;
            }
            slots = moved;
        }
        let pt = self.encoder.encode(&slots)?;
        let digit_pts = match conv.opts.plain_decomposition_bits {
            None => vec![pt],
            Some(bits) => decompose_plaintext(&conv.core.params, &pt, bits, conv.digits, self.t)?,
        };
        let top = conv.core.params.max_level();
        digit_pts.iter().map(|d| self.eval.prepare_plain(d, top).map_err(NnError::from)).collect()
    }
}

impl PackedConv {
    fn clone_plan(&self) -> PackedPlanCore {
        PackedPlanCore {
            terms: self.terms.clone(),
            elements: self.elements.clone(),
            in_cts: self.in_cts,
            out_cts: self.out_cts,
            digits: self.digits,
            schedule: self.opts.schedule,
            input_layout_cts: self.core.input_layout.num_ciphertexts,
        }
    }
}

/// The coefficient form of a plaintext split into signed digits base 2^bits (centred mod t).
fn decompose_plaintext(params: &Parameters, pt: &Plaintext, bits: u32, digits: usize, t: u64) -> Result<Vec<Plaintext>, NnError> {
    let base = 1i64 << bits;
    let mut out = vec![vec![0u64; pt.coeffs().len()]; digits];
    for (i, &c) in pt.coeffs().iter().enumerate() {
        let mut v = if c > t / 2 { c as i64 - t as i64 } else { c as i64 };
        for d in out.iter_mut() {
            let mut r = v.rem_euclid(base);
            if r >= base / 2 {
                r -= base;
            }
            d[i] = r.rem_euclid(t as i64) as u64;
            v = (v - r) / base;
        }
    }
    out.into_iter().map(|c| Plaintext::from_coeffs(params, c).map_err(NnError::from)).collect()
}

struct PackedPlanCore {
    terms: Arc<Vec<Term>>,
    elements: Arc<Vec<u64>>,
    in_cts: usize,
    out_cts: usize,
    digits: usize,
    schedule: Schedule,
    input_layout_cts: usize,
}

struct PreparedPacked {
    plan: PackedPlanCore,
    /// Per term, one prepared plaintext per digit.
    plaintexts: Vec<Vec<PreparedPlaintext>>,
}

impl PreparedLayer for PreparedPacked {
    fn weight_bytes(&self) -> usize {
        // All plaintexts are at the top level and serialise to the same size.
        let count: usize = self.plaintexts.iter().map(Vec::len).sum();
        self.plaintexts.iter().flatten().next().map_or(0, |p| p.to_bytes().len()) * count
    }

    fn evaluate(&self, ops: &HeOps, inputs: &[Ciphertext]) -> Result<Vec<Ciphertext>, NnError> {
        self.plan.evaluate(ops, inputs, &|k| Ok(Cow::Borrowed(&self.plaintexts[k][..])), 0..self.plan.out_cts)
    }
}

/// Term k's prepared plaintexts (one per digit): kept or made when asked.
type TermPlaintexts<'a> = dyn Fn(usize) -> Result<Cow<'a, [PreparedPlaintext]>, NnError> + Sync + 'a;

impl PackedPlanCore {
    /// Output ciphertexts `outputs` (in order).
    fn evaluate<'a>(&self, ops: &HeOps, inputs: &[Ciphertext], plaintexts: &TermPlaintexts<'a>, outputs: Range<usize>) -> Result<Vec<Ciphertext>, NnError> {
        if inputs.len() != self.input_layout_cts {
            return Err(NnError::Count { what: "input ciphertexts", expected: self.input_layout_cts, found: inputs.len() });
        }
        let outputs = match self.schedule {
            Schedule::InputAligned => self.input_aligned(ops, inputs, plaintexts, outputs)?,
            Schedule::PartialAligned => self.partial_aligned(ops, inputs, plaintexts, outputs)?,
        };
        outputs.par_iter().map(|ct| ops.to_lowest(ct)).collect()
    }

    fn input_aligned<'a>(&self, ops: &HeOps, inputs: &[Ciphertext], plaintexts: &TermPlaintexts<'a>, outputs: Range<usize>) -> Result<Vec<Ciphertext>, NnError> {
        let p = self;
        // Terms grouped by output, then by input ciphertext.
        let mut by_output: Vec<BTreeMap<usize, Vec<usize>>> = vec![BTreeMap::new(); outputs.len()];
        for (k, term) in p.terms.iter().enumerate().filter(|(_, t)| outputs.contains(&t.output)) {
            by_output[term.output - outputs.start].entry(term.input).or_default().push(k);
        }
        let mut accs: Vec<Option<Ciphertext>> = vec![None; outputs.len()];
        let chunk = rayon::current_num_threads().max(1) * 2;
        for first in (0..p.in_cts).step_by(chunk) {
            let range = first..(first + chunk).min(p.in_cts);
            // Rotations of this chunk's inputs (every digit copy), hoisted per ciphertext.
            let rotated: Vec<Vec<BTreeMap<u64, Ciphertext>>> = range
                .clone()
                .into_par_iter()
                .map(|i| {
                    let elements = elements_of(p.terms.iter().zip(p.elements.iter()).filter(|(t, _)| t.input == i && outputs.contains(&t.output)).map(|(_, &g)| g));
                    if elements.is_empty() {
                        return Ok(Vec::new());
                    }
                    (0..p.digits).map(|d| rotate_hoisted(ops, &inputs[d * p.in_cts + i], &elements)).collect::<Result<Vec<_>, NnError>>()
                })
                .collect::<Result<_, _>>()?;
            accs.par_iter_mut().zip(&by_output).try_for_each(|(acc, terms_by_input)| -> Result<(), NnError> {
                for i in range.clone() {
                    for &k in terms_by_input.get(&i).map(Vec::as_slice).unwrap_or(&[]) {
                        for (copy, pt) in rotated[i - first].iter().zip(plaintexts(k)?.iter()) {
                            ops.mul_plain_add(acc, &copy[&p.elements[k]], pt)?;
                        }
                    }
                }
                Ok(())
            })?;
        }
        accs.into_iter().map(|a| a.ok_or(NnError::Shape("an output ciphertext receives no term".into()))).collect()
    }

    fn partial_aligned<'a>(&self, ops: &HeOps, inputs: &[Ciphertext], plaintexts: &TermPlaintexts<'a>, outputs: Range<usize>) -> Result<Vec<Ciphertext>, NnError> {
        let p = self;
        // Terms grouped by output, then by Galois element.
        let mut by_output: Vec<BTreeMap<u64, Vec<usize>>> = vec![BTreeMap::new(); outputs.len()];
        for (k, term) in p.terms.iter().enumerate().filter(|(_, t)| outputs.contains(&t.output)) {
            by_output[term.output - outputs.start].entry(p.elements[k]).or_default().push(k);
        }
        by_output
            .par_iter()
            .map(|groups| {
                let mut out = None;
                for (&g, terms) in groups {
                    let mut partial = None;
                    for &k in terms {
                        for (d, pt) in plaintexts(k)?.iter().enumerate() {
                            ops.mul_plain_add(&mut partial, &inputs[d * p.in_cts + p.terms[k].input], pt)?;
                        }
                    }
                    let partial = partial.ok_or(NnError::Shape("empty partial sum".into()))?;
                    let aligned = ops.galois_hoisted(&partial, &[g])?.pop().ok_or(NnError::Shape("no rotation result".into()))?;
                    ops.add_into(&mut out, aligned)?;
                }
                out.ok_or(NnError::Shape("an output ciphertext receives no term".into()))
            })
            .collect()
    }
}

/// Sorted distinct Galois elements.
pub(crate) fn elements_of(it: impl Iterator<Item = u64>) -> Vec<u64> {
    let mut v: Vec<u64> = it.collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The rotations of one ciphertext by each element, hoisted, keyed by element.
pub(crate) fn rotate_hoisted(ops: &HeOps, ct: &Ciphertext, elements: &[u64]) -> Result<BTreeMap<u64, Ciphertext>, NnError> {
    Ok(elements.iter().copied().zip(ops.galois_hoisted(ct, elements)?).collect())
}
