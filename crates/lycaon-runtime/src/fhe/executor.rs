//! Runs an [`FheProgram`] on one encrypted input with one client's keys, on lycaon-nn's FHE
//! layers and the CKKS bootstrapper. An [`FheExecutable`] is the program prepared once per
//! server (layers built, linear transforms' diagonals and every bias and coefficient vector
//! encoded at the levels the plan gives them); sessions share it and bring only their keys.
//!
//! Plaintexts are kept per (level, scale) in a small cache: the plan's (level, canonical scale)
//! pairs are encoded when the program is loaded, and an op that meets its input at another
//! level or scale encodes once more and keeps that too (`FheRunStats::late_encodings` counts
//! them; a program whose plan is right never has any). MpConv, HyPHEN and the pooling layer
//! encode their weight vectors per evaluation inside lycaon-nn: kept encoded, ResNet-20's would
//! hold several GB per level.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use std::sync::atomic::AtomicU64;

use lycaon_backend::ResidentBackend;
use lycaon_ckks::bootstrap::{BootstrapParams, Bootstrapper, DiagonalCache, EncapsulationKeys};
use lycaon_ckks::ops::{BootstrapOps, CiphertextMeta, CkksOps, LayerOps};
use lycaon_ckks::{ChebyshevPoly, Ciphertext, CkksContext, Complex64, Encoder, Evaluator, LinearTransform, Plaintext, ResidentDiagonals, ResidentEvaluator};
use lycaon_nn::fhe::{AvgPoolFc, CaConv, FheOps, MultiplexedConv, MultiplexedLayout, RaConv};
use rayon::prelude::*;
use serde::Serialize;

use super::program::{composite_relu_schedule, FheOp, FheOpKind, FheProgram, Layout, SlotValues};
use crate::{Result, RuntimeError};

fn invalid(what: impl Into<String>) -> RuntimeError {
    RuntimeError::Program(what.into())
}

fn ckks(e: lycaon_ckks::CkksError) -> RuntimeError {
    RuntimeError::Fhe(e.to_string())
}

fn nn(e: lycaon_nn::fhe::FheError) -> RuntimeError {
    RuntimeError::Fhe(e.to_string())
}

/// A slot vector of the program (a bias, a coefficient vector) and its host encodings, one per
/// (level, scale) met.
#[derive(Debug)]
pub struct Plain {
    values: Vec<f64>,
    encoded: Mutex<Vec<(usize, u64, Arc<Plaintext>)>>,
}

impl Plain {
    fn new(values: Vec<f64>) -> Self {
        Self { values, encoded: Mutex::new(Vec::new()) }
    }

    fn from_slots(v: &SlotValues, slots: usize) -> Result<Self> {
        Ok(Self::new(v.dense(slots)?))
    }

    /// The encoding at (level, scale); `late` is bumped when it had to be made now.
    fn at(&self, encoder: &Encoder, level: usize, scale: f64, late: Option<&std::sync::atomic::AtomicU64>) -> Result<Arc<Plaintext>> {
        let key = (level, scale.to_bits());
        if let Some(p) = self.encoded.lock().map_err(|_| invalid("a plaintext cache lock is poisoned"))?.iter().find(|e| (e.0, e.1) == key) {
            return Ok(p.2.clone());
        }
        let pt = Arc::new(encoder.encode_real(&self.values, level, scale).map_err(ckks)?);
        if let Some(counter) = late {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let mut cache = self.encoded.lock().map_err(|_| invalid("a plaintext cache lock is poisoned"))?;
        if cache.len() < 4 {
            cache.push((key.0, key.1, pt.clone()));
        }
        Ok(pt)
    }
}

#[derive(Debug)]
enum Prepared {
    Linear {
        transform: LinearTransform,
        sum_steps: Vec<i64>,
        bias: Option<Plain>,
    },
    Replicate {
        steps: Vec<i64>,
    },
    Alias,
    Quadratic {
        a: Option<Plain>,
        b: Option<Plain>,
        c: Option<Plain>,
    },
    ScaleShift {
        b: Plain,
        c: Option<Plain>,
    },
    Add,
    /// One convolution per input part (None where the part's weights are all zero), summed.
    MpConv {
        convs: Vec<Option<MultiplexedConv>>,
        bias: Option<Plain>,
    },
    Hyphen {
        ca: CaConv,
        ra: RaConv,
        a: Option<Vec<f64>>,
        b: Vec<f64>,
        c: Vec<f64>,
        bias: Option<Plain>,
    },
    CompositeRelu {
        bound: f64,
        stages: Vec<ChebyshevPoly>,
        depths: Vec<usize>,
    },
    /// One layer per input part (None where its weights are all zero), summed.
    PoolFc {
        layers: Vec<Option<AvgPoolFc>>,
    },
}

/// What one inference did: bootstraps, seconds per kind of work, late encodings.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct FheRunStats {
    pub bootstraps: usize,
    pub bootstrap_s: f64,
    pub conv_s: f64,
    pub quadratic_s: f64,
    pub relu_s: f64,
    pub other_s: f64,
    pub late_encodings: u64,
    /// Per op in program order: its name and seconds, refreshes before it included.
    #[serde(default)]
    pub ops: Vec<(String, f64)>,
}

/// One client's keys on the server: evaluation keys (network and bootstrapping merged) and the
/// encapsulation keys of the bootstrapping circuit. Public material only. `E` is the host
/// [`Evaluator`], or a resident one that keeps the session's tensors and keys on a device.
#[derive(Debug)]
pub struct SessionKeys<E: SessionEval = Evaluator> {
    pub ops: FheOps<E>,
    pub encapsulation: Option<EncapsulationKeys>,
    /// The bootstrapping diagonals this evaluator keeps for itself (a resident one's, in device
    /// memory); the host evaluator uses the bootstrapper's, shared by every session.
    pub diagonals: DiagonalCache<E::Diagonals>,
}

impl<E: SessionEval> SessionKeys<E> {
    pub fn new(eval: E, encapsulation: Option<EncapsulationKeys>) -> Self {
        Self { ops: FheOps::new(eval), encapsulation, diagonals: DiagonalCache::default() }
    }
}

/// How an evaluator takes the program's plaintext vectors and bootstraps. The host evaluator
/// uses the executable's caches (plaintexts encoded per (level, scale), the bootstrapper's
/// shared diagonals); a resident one encodes each vector on its device from the values (only
/// the values travel) and keeps its bootstrapping diagonals in the session's cache.
pub trait SessionEval: LayerOps + Send {
    /// x (.) v with v encoded at x's slots and level, plaintext scale `scale`.
    fn mul_vector(&self, x: &Self::Ct, v: &Plain, scale: f64, encoder: &Encoder, late: &AtomicU64) -> Result<Self::Ct>;
    /// y + v with v encoded at y's level and scale.
    fn add_vector(&self, y: &Self::Ct, v: &Plain, encoder: &Encoder, late: &AtomicU64) -> Result<Self::Ct>;
    fn bootstrap(&self, boot: &Bootstrapper, x: &Self::Ct, keys: Option<&EncapsulationKeys>, cache: &DiagonalCache<Self::Diagonals>) -> Result<Self::Ct>;
}

impl SessionEval for Evaluator {
    fn mul_vector(&self, x: &Ciphertext, v: &Plain, scale: f64, encoder: &Encoder, late: &AtomicU64) -> Result<Ciphertext> {
        self.mul_plain(x, &*v.at(encoder, x.level(), scale, Some(late))?).map_err(ckks)
    }

    fn add_vector(&self, y: &Ciphertext, v: &Plain, encoder: &Encoder, late: &AtomicU64) -> Result<Ciphertext> {
        self.add_plain(y, &*v.at(encoder, y.level(), y.scale(), Some(late))?).map_err(ckks)
    }

    fn bootstrap(&self, boot: &Bootstrapper, x: &Ciphertext, keys: Option<&EncapsulationKeys>, _: &DiagonalCache<<Evaluator as BootstrapOps>::Diagonals>) -> Result<Ciphertext> {
        boot.bootstrap_with(self, x, keys).map_err(ckks)
    }
}

impl<B: ResidentBackend + 'static> SessionEval for ResidentEvaluator<B> {
    fn mul_vector(&self, x: &Self::Ct, v: &Plain, scale: f64, _: &Encoder, _: &AtomicU64) -> Result<Self::Ct> {
        self.mul_values(x, &v.values, scale).map_err(ckks)
    }

    fn add_vector(&self, y: &Self::Ct, v: &Plain, _: &Encoder, _: &AtomicU64) -> Result<Self::Ct> {
        self.add_values(y, &v.values).map_err(ckks)
    }

    fn bootstrap(&self, boot: &Bootstrapper, x: &Self::Ct, keys: Option<&EncapsulationKeys>, cache: &DiagonalCache<ResidentDiagonals<B>>) -> Result<Self::Ct> {
        boot.bootstrap_on(self, x, keys, cache).map_err(ckks)
    }
}

/// A program prepared for serving.
#[derive(Debug)]
pub struct FheExecutable {
    program: FheProgram,
    ctx: Arc<CkksContext>,
    encoder: Encoder,
    prepared: Vec<Prepared>,
    last_reads: HashMap<String, usize>,
    boot_params: Option<BootstrapParams>,
    bootstrapper: OnceLock<std::result::Result<Bootstrapper, String>>,
}

fn layout(l: &Layout, slots: usize) -> Result<MultiplexedLayout> {
    l.multiplexed(slots).map_err(nn)
}

fn chebyshev(coeffs: &[f64]) -> Result<ChebyshevPoly> {
    ChebyshevPoly::new(coeffs.to_vec(), -1.0, 1.0).map_err(ckks)
}

/// The sum of one layer's output per input part (None: an all-zero part, skipped).
fn sum_parts<E: CkksOps, L>(ev: &E, layers: &[Option<L>], inputs: &[&E::Ct], eval: impl Fn(&L, &E::Ct) -> Result<E::Ct>) -> Result<E::Ct> {
    let mut sum: Option<E::Ct> = None;
    for (layer, x) in layers.iter().zip(inputs) {
        if let Some(layer) = layer {
            let y = eval(layer, x)?;
            sum = Some(match sum {
                Some(s) => ev.add(&s, &y).map_err(ckks)?,
                None => y,
            });
        }
    }
    sum.ok_or_else(|| invalid("an op whose weights are all zero"))
}

/// The diagonals (d_k[t] = M[t][t + k]) of the matrix with these entries on `slots` slots; with
/// `period`, the matrix acts on each block of `period` slots alike.
fn diagonals(rows: &[u32], cols: &[u32], values: &[f64], period: Option<usize>, slots: usize) -> Result<Vec<(i64, Vec<Complex64>)>> {
    if rows.len() != cols.len() || rows.len() != values.len() {
        return Err(invalid(format!("a linear op has {} rows, {} columns and {} values", rows.len(), cols.len(), values.len())));
    }
    let width = period.unwrap_or(slots);
    if width == 0 || slots % width != 0 {
        return Err(invalid(format!("a linear op's period {width} does not divide {slots} slots")));
    }
    let mut dense: std::collections::BTreeMap<usize, Vec<f64>> = std::collections::BTreeMap::new();
    for ((&r, &c), &v) in rows.iter().zip(cols).zip(values) {
        let (r, c) = (r as usize, c as usize);
        if r >= slots || c >= slots || !v.is_finite() {
            return Err(invalid(format!("a linear op's entry ({r}, {c}) = {v} is outside {slots} slots or not finite")));
        }
        let k = (c + slots - r) % slots;
        dense.entry(k).or_insert_with(|| vec![0.0; width])[r % width] += v;
    }
    Ok(dense.into_iter().map(|(k, d)| (k as i64, (0..slots).map(|t| Complex64::new(d[t % width], 0.0)).collect())).collect())
}

impl FheExecutable {
    /// Builds the layers and encodes what the plan allows; `backend` runs the kernels. Errors
    /// name what is wrong, including a rotation an op needs that the program's keyset
    /// (`rotation_levels`) lacks or has at too low a level.
    pub fn new(program: FheProgram, backend: Arc<dyn lycaon_backend::Backend>) -> Result<Self> {
        let exe = Self::build(program, backend)?;
        let slots = exe.ctx.max_slots() as i64;
        for (step, level) in exe.rotations_needed() {
            let have = exe.program.rotation_levels.iter().find(|(&s, _)| s.rem_euclid(slots) == step).map(|(_, &l)| l);
            if have.is_none_or(|l| l < level) {
                return Err(invalid(format!("the program's keyset lacks rotation {step} at level {level} (it has {have:?})")));
            }
        }
        exe.prepare_planned()?;
        Ok(exe)
    }

    /// The rotations the program's ops need (step modulo the slots, non-zero) with the highest
    /// level each is used at: what `rotation_levels` must hold.
    pub fn rotation_plan(program: FheProgram, backend: Arc<dyn lycaon_backend::Backend>) -> Result<std::collections::BTreeMap<i64, usize>> {
        Ok(Self::build(program, backend)?.rotations_needed())
    }

    fn rotations_needed(&self) -> std::collections::BTreeMap<i64, usize> {
        let slots = self.ctx.max_slots() as i64;
        let mut need = std::collections::BTreeMap::new();
        let mut add = |steps: Vec<i64>, level: usize| {
            for s in steps {
                let s = s.rem_euclid(slots);
                if s != 0 {
                    let e = need.entry(s).or_insert(level);
                    *e = (*e).max(level);
                }
            }
        };
        for (op, p) in self.program.ops.iter().zip(&self.prepared) {
            let l = op.level;
            match p {
                Prepared::Linear { transform, sum_steps, .. } => {
                    add(transform.rotations(), l);
                    add(sum_steps.clone(), l.saturating_sub(1));
                }
                Prepared::Replicate { steps } => add(steps.clone(), l),
                Prepared::MpConv { convs, .. } => convs.iter().flatten().for_each(|c| add(c.rotation_steps(), l)),
                Prepared::Hyphen { ca, ra, .. } => {
                    add(ca.rotation_steps(), l);
                    add(ra.rotation_steps(), (l + 1).saturating_sub(op.depth));
                }
                Prepared::PoolFc { layers } => layers.iter().flatten().for_each(|layer| add(layer.rotation_steps(), l)),
                _ => {}
            }
        }
        need
    }

    fn build(program: FheProgram, backend: Arc<dyn lycaon_backend::Backend>) -> Result<Self> {
        program.validate()?;
        let ctx = program.parameters.context(backend)?;
        let boot_params = program.parameters.bootstrap()?;
        let slots = ctx.max_slots();
        let encoder = Encoder::new(&ctx);
        let plain = |v: &Option<SlotValues>| v.as_ref().map(|v| Plain::from_slots(v, slots)).transpose();
        let mut prepared = Vec::with_capacity(program.ops.len());
        for op in &program.ops {
            if op.level > ctx.max_level() {
                return Err(invalid(format!("op '{}' at level {} above the parameters' top {}", op.name, op.level, ctx.max_level())));
            }
            let p = match &op.kind {
                FheOpKind::Linear { rows, cols, values, period, sum_steps, bias } => {
                    let transform = LinearTransform::new(&ctx, slots, diagonals(rows, cols, values, *period, slots)?).map_err(ckks)?;
                    Prepared::Linear { transform, sum_steps: sum_steps.clone(), bias: plain(bias)? }
                }
                FheOpKind::Replicate { steps } => Prepared::Replicate { steps: steps.clone() },
                FheOpKind::Alias => Prepared::Alias,
                FheOpKind::Quadratic { a, b, c } => Prepared::Quadratic { a: plain(a)?, b: plain(b)?, c: plain(c)? },
                FheOpKind::ScaleShift { b, c } => Prepared::ScaleShift { b: Plain::from_slots(b, slots)?, c: plain(c)? },
                FheOpKind::Add => Prepared::Add,
                FheOpKind::MpConv { input, out_channels, kernel, stride, weights, bias, output_image, method, part_channels } => {
                    let output = output_image.map(|[rows, cols]| (rows, cols));
                    let taps = kernel * kernel;
                    if weights.len() != out_channels * input.channels * taps {
                        return Err(invalid(format!(
                            "op '{}': {} weights for {out_channels} x {} x {kernel} x {kernel}",
                            op.name,
                            weights.len(),
                            input.channels
                        )));
                    }
                    let convs = input
                        .parts(*part_channels)?
                        .into_iter()
                        .map(|(range, part)| {
                            let w = Layout::column_block(weights, *out_channels, input.channels * taps, range.start * taps..range.end * taps);
                            let used = w.iter().any(|&v| v != 0.0);
                            used.then(|| MultiplexedConv::with_method(*method, layout(&part, slots)?, *out_channels, *kernel, *stride, &w, output).map_err(nn))
                                .transpose()
                        })
                        .collect::<Result<Vec<_>>>()?;
                    Prepared::MpConv { convs, bias: plain(bias)? }
                }
                FheOpKind::Hyphen { input, mid_channels, kernel1, weights1, out_channels, kernel2, weights2, a, b, c, bias } => {
                    let ca = CaConv::new(layout(input, slots)?, *mid_channels, *kernel1, weights1).map_err(nn)?;
                    let ra = RaConv::new(*mid_channels, input.height, input.width, slots, *out_channels, *kernel2, weights2).map_err(nn)?;
                    let per_channel = [a.as_ref().map_or(*mid_channels, Vec::len), b.len(), c.len()];
                    if per_channel.iter().any(|&n| n != *mid_channels) {
                        return Err(invalid(format!("op '{}': the quadratic has {per_channel:?} coefficients, not {mid_channels} each", op.name)));
                    }
                    Prepared::Hyphen { ca, ra, a: a.clone(), b: b.clone(), c: c.clone(), bias: plain(bias)? }
                }
                FheOpKind::CompositeRelu { bound, stages, depths } => {
                    if !(bound.is_finite() && *bound > 0.0) || stages.len() != depths.len() || stages.is_empty() {
                        return Err(invalid(format!("op '{}': a composite ReLU needs a positive bound and one depth per stage", op.name)));
                    }
                    composite_relu_schedule(depths, op.level, program.input_level)?;
                    Prepared::CompositeRelu { bound: *bound, stages: stages.iter().map(|s| chebyshev(s)).collect::<Result<_>>()?, depths: depths.clone() }
                }
                FheOpKind::PoolFc { input, n_out, weights, bias, part_channels } => {
                    if weights.len() != n_out * input.channels {
                        return Err(invalid(format!("op '{}': {} weights for {n_out} x {} ", op.name, weights.len(), input.channels)));
                    }
                    let zero = vec![0.0; bias.len()];
                    let layers = input
                        .parts(*part_channels)?
                        .into_iter()
                        .enumerate()
                        .map(|(k, (range, part))| {
                            let w = Layout::column_block(weights, *n_out, input.channels, range);
                            let b = if k == 0 { bias } else { &zero };
                            (k == 0 || w.iter().any(|&v| v != 0.0)).then(|| AvgPoolFc::new(&ctx, layout(&part, slots)?, *n_out, &w, b).map_err(nn)).transpose()
                        })
                        .collect::<Result<Vec<_>>>()?;
                    Prepared::PoolFc { layers }
                }
            };
            prepared.push(p);
        }
        if !program.ops.iter().all(|op| op.refresh.is_empty()) && boot_params.is_none() {
            return Err(invalid("the program refreshes tensors but its parameters are not bootstrappable"));
        }
        let last_reads = program.last_reads();
        Ok(Self { program, ctx, encoder, prepared, last_reads, boot_params, bootstrapper: OnceLock::new() })
    }

    /// Encodes the diagonals and vectors at the levels and canonical scales of the plan.
    fn prepare_planned(&self) -> Result<()> {
        let ctx = &self.ctx;
        let canonical = |l: usize| ctx.scale_at(l).map_err(ckks);
        // The plaintext scale that makes a product at level l rescale onto the canonical scale below.
        let product = |l: usize| -> Result<f64> { Ok(canonical(l - 1)? * ctx.prime_at(l).map_err(ckks)? as f64 / canonical(l)?) };
        for (op, p) in self.program.ops.iter().zip(&self.prepared) {
            let l = op.level;
            if l == 0 {
                continue;
            }
            match p {
                Prepared::Linear { transform, bias, .. } => {
                    transform.prepare(ctx, l, product(l)?).map_err(ckks)?;
                    if let Some(b) = bias {
                        b.at(&self.encoder, l - 1, canonical(l - 1)?, None)?;
                    }
                }
                Prepared::Quadratic { a, b, c } => {
                    for v in [a, b].into_iter().flatten() {
                        v.at(&self.encoder, l, product(l)?, None)?;
                    }
                    let out = l.saturating_sub(if a.is_some() { 2 } else { 1 });
                    if let Some(c) = c {
                        c.at(&self.encoder, out, canonical(out)?, None)?;
                    }
                }
                Prepared::ScaleShift { b, c } => {
                    b.at(&self.encoder, l, product(l)?, None)?;
                    if let Some(c) = c {
                        c.at(&self.encoder, l - 1, canonical(l - 1)?, None)?;
                    }
                }
                Prepared::MpConv { bias: Some(b), .. } | Prepared::Hyphen { bias: Some(b), .. } => {
                    let out = l.saturating_sub(op.depth);
                    b.at(&self.encoder, out, canonical(out)?, None)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    pub fn program(&self) -> &FheProgram {
        &self.program
    }

    pub fn context(&self) -> &Arc<CkksContext> {
        &self.ctx
    }

    pub fn bootstrap_params(&self) -> Option<&BootstrapParams> {
        self.boot_params.as_ref()
    }

    /// The bootstrapping circuit, built on first use and shared by every session (it keeps its
    /// transforms' encoded diagonals, 3.1 GB at logN = 16, after the first bootstrap).
    pub fn bootstrapper(&self) -> Result<&Bootstrapper> {
        let bp = self.boot_params.as_ref().ok_or_else(|| invalid("the program's parameters are not bootstrappable"))?;
        self.bootstrapper
            .get_or_init(|| Bootstrapper::new(&self.ctx, bp.clone()).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| RuntimeError::Fhe(format!("building the bootstrapper: {e}")))
    }

    /// Runs the program on `inputs` (the client's packed, encrypted input at the input level:
    /// one ciphertext per part, [`FheProgram::input_names`]). `progress(done, total, op)` is
    /// called after every op.
    pub fn run<E: SessionEval>(&self, keys: &SessionKeys<E>, inputs: Vec<E::Ct>, progress: &mut dyn FnMut(usize, usize, &str)) -> Result<(E::Ct, FheRunStats)> {
        let p = &self.program;
        let names = p.input_names()?;
        self.check_inputs(&inputs)?;
        let late = std::sync::atomic::AtomicU64::new(0);
        let mut stats = FheRunStats::default();
        let mut values: HashMap<String, E::Ct> = names.into_iter().zip(inputs).collect();
        let total = p.ops.len();
        for i in 0..total {
            self.step(keys, i, &mut values, &late, &mut stats)?;
            progress(i + 1, total, &p.ops[i].name);
        }
        stats.late_encodings = late.into_inner();
        let out = values.remove(&p.output).ok_or_else(|| invalid(format!("the output '{}' was never written", p.output)))?;
        Ok((out, stats))
    }

    /// The query's input ciphertexts: as many as the program's input parts, each with every
    /// slot at the input level.
    pub(crate) fn check_inputs<C: CiphertextMeta>(&self, inputs: &[C]) -> Result<()> {
        let p = &self.program;
        let want = p.input_names()?.len();
        if inputs.len() != want {
            return Err(RuntimeError::Protocol(format!("the query holds {} input ciphertexts; the program takes {want}", inputs.len())));
        }
        for input in inputs {
            if input.slots() != self.ctx.max_slots() || input.level() != p.input_level {
                return Err(RuntimeError::Protocol(format!(
                    "an input ciphertext has {} slots at level {}; the program takes {} slots at level {}",
                    input.slots(),
                    input.level(),
                    self.ctx.max_slots(),
                    p.input_level
                )));
            }
        }
        Ok(())
    }

    /// Runs op `i` on `values`: its refreshes, the op, then frees the tensors it reads last.
    fn step<E: SessionEval>(&self, keys: &SessionKeys<E>, i: usize, values: &mut HashMap<String, E::Ct>, late: &AtomicU64, stats: &mut FheRunStats) -> Result<()> {
        self.step_with(keys, i, values, late, stats, &self.last_reads)
    }

    /// [`Self::step`], freeing each tensor after the op `last` names (the executor's own plan
    /// frees after the program's last reader; a worker's batch after its own).
    pub(crate) fn step_with<E: SessionEval>(
        &self,
        keys: &SessionKeys<E>,
        i: usize,
        values: &mut HashMap<String, E::Ct>,
        late: &AtomicU64,
        stats: &mut FheRunStats,
        last: &HashMap<String, usize>,
    ) -> Result<()> {
        let (op, prep) = (&self.program.ops[i], &self.prepared[i]);
        let started = Instant::now();
        for r in &op.refresh {
            let x = values.get(&r.tensor).ok_or_else(|| invalid(format!("refresh of '{}', which is not live", r.tensor)))?;
            let y = self.refresh(keys, x, r.bound, stats)?;
            values.insert(r.tensor.clone(), y);
        }
        let lowest = op.inputs.iter().map(|t| values.get(t).map(|c| c.level())).collect::<Option<Vec<_>>>();
        let lowest = lowest.ok_or_else(|| invalid(format!("op '{}' reads a tensor that is not live", op.name)))?;
        let lowest = lowest.into_iter().min().unwrap_or(0);
        if lowest < op.depth {
            return Err(invalid(format!("op '{}': its input is at level {lowest}, below its depth {} (the refresh plan does not fit)", op.name, op.depth)));
        }
        let t0 = Instant::now();
        let y = self.run_op(keys, op, prep, values, late, stats)?;
        let seconds = t0.elapsed().as_secs_f64();
        match prep {
            Prepared::MpConv { .. } | Prepared::Linear { .. } => stats.conv_s += seconds,
            Prepared::Quadratic { .. } => stats.quadratic_s += seconds,
            Prepared::Hyphen { .. } => stats.conv_s += seconds,
            Prepared::CompositeRelu { .. } => {} // counted inside, bootstraps apart
            _ => stats.other_s += seconds,
        }
        for t in op.inputs.iter().chain(op.refresh.iter().map(|r| &r.tensor)) {
            if last.get(t) == Some(&i) {
                values.remove(t);
            }
        }
        values.insert(op.output.clone(), y);
        stats.ops.push((op.name.clone(), started.elapsed().as_secs_f64()));
        Ok(())
    }

    fn bootstrap<E: SessionEval>(&self, keys: &SessionKeys<E>, x: &E::Ct, stats: &mut FheRunStats) -> Result<E::Ct> {
        let t0 = Instant::now();
        let boot = self.bootstrapper()?;
        let (slots, sparse) = (x.slots(), boot.params().slots());
        let ev = keys.ops.evaluator();
        let y = if sparse < slots {
            // A sparse shape: the compiler checked that the tensor repeats every `sparse` slots,
            // so it is a `sparse`-slot message, and the bootstrap's output repeats alike.
            let mut short = ev.duplicate(x).map_err(ckks)?;
            short.assume_log_slots(sparse.trailing_zeros());
            let mut y = ev.bootstrap(boot, &short, keys.encapsulation.as_ref(), &keys.diagonals)?;
            y.assume_log_slots(slots.trailing_zeros());
            y
        } else {
            ev.bootstrap(boot, x, keys.encapsulation.as_ref(), &keys.diagonals)?
        };
        stats.bootstraps += 1;
        stats.bootstrap_s += t0.elapsed().as_secs_f64();
        Ok(y)
    }

    /// The input parts whose terms op `i` sums, when it has several and no refresh (an MPConv
    /// or the pooling layer over a tensor of several ciphertexts): each term can run apart
    /// ([`Self::term`]) and their sum after ([`Self::finish`]), bit for bit [`Self::step`].
    pub(crate) fn split_terms(&self, i: usize) -> Option<Vec<usize>> {
        if !self.program.ops[i].refresh.is_empty() {
            return None;
        }
        let used: Vec<usize> = match &self.prepared[i] {
            Prepared::MpConv { convs, .. } => convs.iter().enumerate().filter_map(|(k, c)| c.as_ref().map(|_| k)).collect(),
            Prepared::PoolFc { layers } => layers.iter().enumerate().filter_map(|(k, l)| l.as_ref().map(|_| k)).collect(),
            _ => return None,
        };
        (used.len() > 1).then_some(used)
    }

    /// Term `k` of op `i` (one of [`Self::split_terms`]): its layer on input part `k` alone.
    pub(crate) fn term<E: SessionEval>(&self, keys: &SessionKeys<E>, i: usize, k: usize, x: &E::Ct, stats: &mut FheRunStats) -> Result<E::Ct> {
        let op = &self.program.ops[i];
        if x.level() < op.depth {
            return Err(invalid(format!("op '{}': its input is at level {}, below its depth {} (the refresh plan does not fit)", op.name, x.level(), op.depth)));
        }
        let t0 = Instant::now();
        let missing = || invalid(format!("op '{}' has no term for input part {k}", op.name));
        let y = match &self.prepared[i] {
            Prepared::MpConv { convs, .. } => convs.get(k).and_then(Option::as_ref).ok_or_else(missing)?.evaluate(&keys.ops, x).map_err(nn)?,
            Prepared::PoolFc { layers } => layers.get(k).and_then(Option::as_ref).ok_or_else(missing)?.evaluate(&keys.ops, x).map_err(nn)?,
            _ => return Err(missing()),
        };
        stats.conv_s += t0.elapsed().as_secs_f64();
        Ok(y)
    }

    /// Op `i` from its terms in the order of its parts: their sum, as [`Self::step`] adds them,
    /// and its bias. Needs no key.
    pub(crate) fn finish<E: SessionEval>(&self, keys: &SessionKeys<E>, i: usize, terms: Vec<E::Ct>, late: &AtomicU64) -> Result<E::Ct> {
        let ev = keys.ops.evaluator();
        let mut terms = terms.into_iter();
        let first = terms.next().ok_or_else(|| invalid(format!("op '{}' finished without its terms", self.program.ops[i].name)))?;
        let sum = terms.try_fold(first, |s, y| ev.add(&s, &y).map_err(ckks))?;
        match &self.prepared[i] {
            Prepared::MpConv { bias: Some(b), .. } => ev.add_vector(&sum, b, &self.encoder, late),
            _ => Ok(sum),
        }
    }

    /// x / bound (one level), bootstrapped, times the bound (an integer: no level).
    fn refresh<E: SessionEval>(&self, keys: &SessionKeys<E>, x: &E::Ct, bound: f64, stats: &mut FheRunStats) -> Result<E::Ct> {
        let ev = keys.ops.evaluator();
        let scaled = ev.rescale(&ev.mul_const(x, 1.0 / bound).map_err(ckks)?).map_err(ckks)?;
        let y = self.bootstrap(keys, &scaled, stats)?;
        if bound >= 1.0 {
            if bound.fract() != 0.0 || bound > i64::MAX as f64 {
                return Err(invalid(format!("a refresh bound of {bound} (a power of two at least 1, or below 1)")));
            }
            ev.mul_integer(&y, bound as i64).map_err(ckks)
        } else {
            ev.rescale(&ev.mul_const(&y, bound).map_err(ckks)?).map_err(ckks)
        }
    }

    fn run_op<E: SessionEval>(
        &self,
        keys: &SessionKeys<E>,
        op: &FheOp,
        prep: &Prepared,
        values: &HashMap<String, E::Ct>,
        late: &AtomicU64,
        stats: &mut FheRunStats,
    ) -> Result<E::Ct> {
        let ops = &keys.ops;
        let ev = ops.evaluator();
        let x = &values[&op.inputs[0]];
        let all_inputs = |op: &FheOp| -> Result<Vec<&E::Ct>> {
            op.inputs.iter().map(|t| values.get(t).ok_or_else(|| invalid(format!("op '{}' reads '{t}', which is not live", op.name)))).collect()
        };
        let enc = &self.encoder;
        let add_bias = |y: E::Ct, bias: &Option<Plain>| -> Result<E::Ct> {
            match bias {
                Some(b) => ev.add_vector(&y, b, enc, late),
                None => Ok(y),
            }
        };
        let times = |x: &E::Ct, v: &Plain| -> Result<E::Ct> {
            let scale = ev.plaintext_scale_at(x.level(), x.scale()).map_err(ckks)?;
            ev.rescale(&ev.mul_vector(x, v, scale, enc, late)?).map_err(ckks)
        };
        Ok(match prep {
            Prepared::Linear { transform, sum_steps, bias } => {
                let mut y = ops.linear_transform(x, transform).map_err(nn)?;
                for &s in sum_steps {
                    y = ev.add(&y, &ev.rotate(&y, s).map_err(ckks)?).map_err(ckks)?;
                }
                add_bias(y, bias)?
            }
            Prepared::Replicate { steps } => {
                let mut y = ev.duplicate(x).map_err(ckks)?;
                for &s in steps {
                    y = ev.add(&y, &ev.rotate(&y, s).map_err(ckks)?).map_err(ckks)?;
                }
                y
            }
            Prepared::Alias => ev.duplicate(x).map_err(ckks)?,
            Prepared::Quadratic { a, b, c } => {
                let mut y = match a {
                    None => ev.rescale(&ev.mul_relin(x, x).map_err(ckks)?).map_err(ckks)?,
                    Some(a) => ev.rescale(&ev.mul_relin(&times(x, a)?, x).map_err(ckks)?).map_err(ckks)?,
                };
                if let Some(b) = b {
                    y = ev.add(&y, &times(x, b)?).map_err(ckks)?;
                }
                add_bias(y, c)?
            }
            Prepared::ScaleShift { b, c } => add_bias(times(x, b)?, c)?,
            Prepared::Add => ev.add(x, &values[&op.inputs[1]]).map_err(ckks)?,
            Prepared::MpConv { convs, bias } => add_bias(sum_parts(ev, convs, &all_inputs(op)?, |c, x| c.evaluate(ops, x).map_err(nn))?, bias)?,
            Prepared::Hyphen { ca, ra, a, b, c, bias } => {
                let mids = ca.evaluate(ops, x).map_err(nn)?;
                let t1 = Instant::now();
                let mids =
                    mids.par_iter().enumerate().map(|(j, m)| scalar_quadratic(ev, m, a.as_ref().map(|a| a[j]), b[j], c[j])).collect::<Result<Vec<_>>>()?;
                stats.quadratic_s += t1.elapsed().as_secs_f64();
                stats.conv_s -= t1.elapsed().as_secs_f64();
                add_bias(ra.evaluate(ops, &mids).map_err(nn)?, bias)?
            }
            Prepared::CompositeRelu { bound, stages, depths } => {
                let t0 = Instant::now();
                let boot_before = stats.bootstrap_s;
                let (flags, _) = composite_relu_schedule(depths, x.level(), self.program.input_level)?;
                let mut u = ev.rescale(&ev.mul_const(x, 1.0 / bound).map_err(ckks)?).map_err(ckks)?;
                if flags[0] {
                    u = self.bootstrap(keys, &u, stats)?;
                }
                let mut y = ev.duplicate(&u).map_err(ckks)?;
                for (i, stage) in stages.iter().enumerate() {
                    if i > 0 && flags[i] {
                        y = self.bootstrap(keys, &y, stats)?;
                    }
                    y = lycaon_ckks::evaluate_chebyshev(ev, &y, stage).map_err(ckks)?;
                }
                let out = ev.rescale(&ev.mul_relin(&u, &y).map_err(ckks)?).map_err(ckks)?;
                stats.relu_s += t0.elapsed().as_secs_f64() - (stats.bootstrap_s - boot_before);
                out
            }
            Prepared::PoolFc { layers } => sum_parts(ev, layers, &all_inputs(op)?, |l, x| l.evaluate(ops, x).map_err(nn))?,
        })
    }
}

/// a x^2 + b x + c with one coefficient set for every slot (one RA ciphertext is one channel):
/// one level when `a` is None (monic), two otherwise.
fn scalar_quadratic<E: CkksOps>(ev: &E, x: &E::Ct, a: Option<f64>, b: f64, c: f64) -> Result<E::Ct> {
    let mut y = match a {
        None => ev.rescale(&ev.mul_relin(x, x).map_err(ckks)?).map_err(ckks)?,
        Some(a) => {
            let ax = ev.rescale(&ev.mul_const(x, a).map_err(ckks)?).map_err(ckks)?;
            ev.rescale(&ev.mul_relin(&ax, x).map_err(ckks)?).map_err(ckks)?
        }
    };
    if b != 0.0 {
        y = ev.add(&y, &ev.rescale(&ev.mul_const(x, b).map_err(ckks)?).map_err(ckks)?).map_err(ckks)?;
    }
    if c != 0.0 {
        y = ev.add_const(&y, Complex64::new(c, 0.0)).map_err(ckks)?;
    }
    Ok(y)
}
