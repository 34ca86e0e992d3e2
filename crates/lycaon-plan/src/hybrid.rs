//! The hybrid-mode planner (003's HE-PTune, on Lycaon's algorithms): for each linear layer, every
//! secure BFV parameter set of the search space and every algorithm that runs the layer, priced
//! by the noise model (practical and worst case) and the cost model (operation counts times
//! per-operation costs calibrated on this machine, plus the client's encryption and decryption
//! and the link); the cheapest point that keeps a non-negative practical budget wins.
//!
//! The search space per layer: n in {2048, ..., 16384}; one to four ciphertext primes of
//! 30-60 bits with at most one special prime (none for the rotation-free coefficient encodings);
//! one key-switching digit or one digit per prime; the plaintext modulus is the smallest prime
//! t = 1 mod 2n of the bits the layer's values need (larger t only costs budget). Every set is
//! checked against the HE standard's 128-bit bound by `Parameters::new`.

use std::collections::BTreeMap;
use std::sync::Arc;

use lycaon_bfv::noise::NoiseModel;
use lycaon_bfv::rlwe::{Parameters, ParametersLiteral, MAX_LOG_QP_128};
use lycaon_nn::algorithm::Algorithm;
use lycaon_nn::{ConvShape, LinearPlan, ValueBounds};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::costs::{CostTable, Link};
use crate::PlanError;

/// A BFV parameter set as the plan records it (primes are regenerated from the bit sizes the same
/// way on both sides, so the record is small and exact).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ParamChoice {
    pub n: usize,
    pub q_bits: Vec<u32>,
    pub p_bits: Vec<u32>,
    pub t_bits: u32,
    pub digits: usize,
    /// The ring degree the plaintext modulus is chosen for (t = 1 mod 2 t_n, a power of two at
    /// least n; absent: n). Layers whose shares meet at a residual add or feed one tensor share
    /// one t though their n differ, so no ring conversion runs between them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_n: Option<usize>,
}

impl ParamChoice {
    /// The validated parameters (128-bit security checked).
    pub fn parameters(&self) -> Result<Arc<Parameters>, PlanError> {
        let mut literal = ParametersLiteral::bfv_from_bits(self.n, &self.q_bits, &self.p_bits, self.t_bits)?;
        literal.key_switch_digits = self.digits;
        if let Some(t_n) = self.t_n {
            if t_n < self.n || !t_n.is_power_of_two() {
                return Err(PlanError::InvalidLayer {
                    layer: self.label(),
                    reason: format!("t_n = {t_n} must be a power of two at least n = {}", self.n),
                });
            }
            literal.plaintext_modulus = Some(lycaon_math::ntt_primes(self.t_bits, t_n, 1, &[]).map_err(|e| PlanError::InvalidLayer { layer: self.label(), reason: e.to_string() })?[0]);
        }
        Ok(Parameters::new(literal)?)
    }

    pub fn log_q(&self) -> u32 {
        self.q_bits.iter().sum()
    }

    pub fn log_qp(&self) -> u32 {
        self.log_q() + self.p_bits.iter().sum::<u32>()
    }

    /// Short label: n=4096 q=36+36 p=37 t=20 d=2.
    pub fn label(&self) -> String {
        let join = |v: &[u32]| if v.is_empty() { "-".to_string() } else { v.iter().map(u32::to_string).collect::<Vec<_>>().join("+") };
        let t_n = self.t_n.map_or(String::new(), |m| format!(" t_n={m}"));
        format!("n={} q={} p={} t={} d={}{t_n}", self.n, join(&self.q_bits), join(&self.p_bits), self.t_bits, self.digits)
    }
}

/// Prime sizes the search tries for ciphertext primes.
const PRIME_BITS: [u32; 9] = [30, 36, 40, 45, 50, 52, 55, 57, 60];

/// Every secure parameter set of the search space for plaintexts of `t_bits` bits; with
/// `with_keys` one special prime (as large as the largest ciphertext prime) is included.
pub fn candidate_sets(t_bits: u32, with_keys: bool) -> Vec<ParamChoice> {
    let mut out = Vec::new();
    for &(n, max_qp) in MAX_LOG_QP_128.iter().filter(|(n, _)| (2048..=16384).contains(n)) {
        if (t_bits as f64) < ((2 * n) as f64).log2() + 1.0 {
            continue; // no batching prime t = 1 mod 2n this small
        }
        for primes in 1..=4usize {
            for &bits in &PRIME_BITS {
                // Equal primes, or one larger first prime (it absorbs the last switch's rounding).
                for first_extra in [0u32, 5, 10] {
                    let mut q_bits = vec![bits; primes];
                    q_bits[0] = (bits + first_extra).min(60);
                    if first_extra > 0 && q_bits[0] == bits {
                        continue;
                    }
                    let p_bits = if with_keys { vec![*q_bits.iter().max().unwrap_or(&bits)] } else { Vec::new() };
                    let total: u32 = q_bits.iter().chain(&p_bits).sum();
                    // Every ciphertext prime must exceed t (the parameters require it).
                    if total > max_qp || q_bits.iter().sum::<u32>() <= t_bits + 8 || q_bits.iter().any(|&b| b <= t_bits) {
                        continue;
                    }
                    let digit_options: &[usize] = if with_keys && primes > 1 { &[1, primes] } else { &[1] };
                    for &digits in digit_options {
                        out.push(ParamChoice { n, q_bits: q_bits.clone(), p_bits: p_bits.clone(), t_bits, digits, t_n: None });
                    }
                }
            }
        }
    }
    out
}

/// What the planner needs to know of one linear layer.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LayerRequest {
    pub name: String,
    pub shape: ShapeSpec,
    /// Bits of the largest |weight| (signed): |w| < 2^(weight_bits - 1).
    pub weight_bits: u32,
    /// Bits the layer's outputs need in the plaintext ring (signed values, so t >= 2^t_bits
    /// holds them exactly).
    pub t_bits: u32,
}

/// A convolution or fully connected shape (a fully connected layer is h = w = k = 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShapeSpec {
    pub h: usize,
    pub w: usize,
    pub c_in: usize,
    pub c_out: usize,
    pub k: usize,
    pub stride: usize,
    #[serde(default)]
    pub pad: Option<usize>,
    #[serde(default = "one")]
    pub groups: usize,
}

fn one() -> usize {
    1
}

impl ShapeSpec {
    pub fn conv_shape(&self) -> ConvShape {
        let pad = self.pad.unwrap_or(self.k / 2);
        ConvShape {
            h: self.h,
            w: self.w,
            c_in: self.c_in,
            c_out: self.c_out,
            kh: self.k,
            kw: self.k,
            stride: self.stride,
            pad_h: pad,
            pad_w: pad,
            groups: self.groups,
        }
    }
}

/// Options of a tuning run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TuneOptions {
    pub link: Link,
    /// Target decryption-failure probability of the practical noise model.
    pub failure_probability: f64,
    /// Budget bits every layer must keep beyond zero (e.g. for the protocol's noise flooding).
    pub reserve_bits: f64,
    /// Statistical security of the noise flooding the protocol adds before the final modulus
    /// switch (0: no flooding, the budgets are those of the bare layer); see
    /// `lycaon_nn::Flooding`. Budgets are then those of the flooded outputs.
    #[serde(default)]
    pub flood_bits: f64,
    /// Algorithms to consider (all when empty).
    pub algorithms: Vec<String>,
}

impl Default for TuneOptions {
    fn default() -> Self {
        Self { link: Link::lan(), failure_probability: 2f64.powi(-40), reserve_bits: 0.0, flood_bits: 0.0, algorithms: Vec::new() }
    }
}

/// One evaluated design point: an algorithm under a parameter set for one layer.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DesignPoint {
    pub algorithm: String,
    pub params: ParamChoice,
    pub server_s: f64,
    pub client_s: f64,
    pub comm_s: f64,
    pub predicted_s: f64,
    pub noise_margin_bits: f64,
    pub noise_worst_case_bits: f64,
    /// Low bits the response drops from c_0's and c_1's coefficients ([`lycaon_nn::ResponseDrop`]),
    /// already taken off `bytes_down`; `noise_margin_bits` is the budget before the drop.
    #[serde(default)]
    pub response_drop_bits: [u32; 2],
    pub bytes_up: usize,
    pub bytes_down: usize,
    pub key_bytes: usize,
    pub rotations: u64,
    pub galois_elements: Vec<u64>,
}

impl DesignPoint {
    pub fn feasible(&self, reserve_bits: f64) -> bool {
        self.noise_margin_bits >= reserve_bits
    }
}

fn algorithms(options: &TuneOptions) -> Result<Vec<Algorithm>, PlanError> {
    if options.algorithms.is_empty() {
        return Ok(Algorithm::ALL.to_vec());
    }
    options.algorithms.iter().map(|a| Algorithm::parse(a).map_err(PlanError::from)).collect()
}

/// Prices one algorithm under one parameter set for a layer (None when it cannot run it). The
/// costs of the set's shape must already be in `costs` ([`CostTable::calibrate`]).
pub fn price(
    layer: &LayerRequest,
    algorithm: Algorithm,
    set: &ParamChoice,
    costs: &CostTable,
    options: &TuneOptions,
) -> Result<Option<DesignPoint>, PlanError> {
    let params = set.parameters()?;
    let shape = layer.shape.conv_shape();
    let plan: Box<dyn LinearPlan> = match algorithm.build(&shape, &params) {
        Ok(p) => p,
        Err(_) => return Ok(None),
    };
    price_plan(layer, algorithm, set, &params, plan.as_ref(), costs, options)
}

/// Prices a plan already built under `params` (the parameters of `set`).
fn price_plan(
    layer: &LayerRequest,
    algorithm: Algorithm,
    set: &ParamChoice,
    params: &Arc<Parameters>,
    plan: &dyn LinearPlan,
    costs: &CostTable,
    options: &TuneOptions,
) -> Result<Option<DesignPoint>, PlanError> {
    let counts = plan.counts();
    if counts.rotations > 0 && set.p_bits.is_empty() {
        return Ok(None);
    }
    let model = NoiseModel::from_params(&params).ok_or_else(|| PlanError::Invalid("not a BFV parameter set".into()))?;
    let bounds = ValueBounds { weight: 1u64 << (layer.weight_bits.max(1) - 1), input: 1u64 << (layer.t_bits - 1) };
    let noise = plan.noise(&model, model.fresh_symmetric(params.max_level()), bounds)?;
    // Every coefficient of an output may travel (coefficient layouts send fewer: conservative).
    let sent = params.n() as f64;
    let (practical, worst, drop) = if options.flood_bits > 0.0 {
        let f = noise.flooding(&model, options.flood_bits, options.failure_probability, sent);
        (f.practical_budget, f.worst_case_budget, f.drop)
    } else {
        let drop = noise.unflooded_drop(&model, options.failure_probability, sent)?;
        (noise.practical_budget(&model, options.failure_probability), noise.worst_case_budget(&model), drop)
    };
    let op = costs.lookup(params)?;
    let inputs = plan.input_layout().num_ciphertexts;
    let outputs = plan.output_layout().num_ciphertexts;
    let server_s = op.layer_seconds(&counts, plan.scalar_mac_fanout(), inputs, outputs);
    let mut cost = plan.cost();
    cost.down_bytes = plan.output_layout().dropped_down_bytes(params, drop);
    let client_s = inputs as f64 * op.encrypt_s + outputs as f64 * op.decrypt_s;
    // The Galois keys the layer needs travel once per session; charged to every layer that needs
    // them (an upper bound where layers share a key set), so a key-hungry algorithm wins only
    // where its saving pays for its keys.
    let comm_s = options.link.seconds(cost.up_bytes + cost.down_bytes + cost.key_bytes, 1);
    Ok(Some(DesignPoint {
        algorithm: algorithm.to_string(),
        params: set.clone(),
        server_s,
        client_s,
        comm_s,
        predicted_s: server_s + client_s + comm_s,
        noise_margin_bits: practical,
        noise_worst_case_bits: worst,
        response_drop_bits: [drop.c0, drop.c1],
        bytes_up: cost.up_bytes,
        bytes_down: cost.down_bytes,
        key_bytes: cost.key_bytes,
        rotations: counts.rotations,
        galois_elements: plan.galois_elements(),
    }))
}

/// Parameter sets of equal cost: same n, number of ciphertext and special primes, and digits
/// (every word is 64 bits whatever the prime sizes). Within a class only the noise differs.
fn cost_class(p: &ParamChoice) -> (usize, usize, usize, usize) {
    (p.n, p.q_bits.len(), p.p_bits.len(), p.digits)
}

/// The (algorithm, parameter set) pairs to price for a layer: every set when `exhaustive`, else
/// per cost class only the set with the largest ciphertext modulus (the largest noise margin of
/// the class: every set of a class costs the same, so no other can be a better choice).
fn search_points(layer: &LayerRequest, options: &TuneOptions, exhaustive: bool) -> Result<Vec<(Algorithm, ParamChoice)>, PlanError> {
    let mut out = Vec::new();
    for algorithm in algorithms(options)? {
        let mut sets = candidate_sets(layer.t_bits, algorithm.needs_batching());
        if !exhaustive {
            let mut best: BTreeMap<(usize, usize, usize, usize), ParamChoice> = BTreeMap::new();
            for s in sets {
                let e = best.entry(cost_class(&s)).or_insert_with(|| s.clone());
                if s.log_q() > e.log_q() {
                    *e = s;
                }
            }
            sets = best.into_values().collect();
        }
        out.extend(sets.into_iter().map(|s| (algorithm, s)));
    }
    Ok(out)
}

fn check_layer(layer: &LayerRequest) -> Result<(), PlanError> {
    if layer.t_bits < 2 || layer.t_bits > 60 || layer.weight_bits == 0 || layer.weight_bits > 32 {
        return Err(PlanError::Invalid(format!(
            "layer '{}': t_bits must be 2..=60 and weight_bits 1..=32 (got {} and {})",
            layer.name, layer.t_bits, layer.weight_bits
        )));
    }
    layer.shape.conv_shape().validate().map_err(|e| PlanError::Invalid(format!("layer '{}': {e}", layer.name)))?;
    Ok(())
}

/// Every design point of a layer over the search space (see [`search_points`]), priced in
/// parallel after the costs of every parameter shape involved are calibrated.
pub fn design_space(layer: &LayerRequest, costs: &mut CostTable, options: &TuneOptions, exhaustive: bool) -> Result<Vec<DesignPoint>, PlanError> {
    priced_space(layer, costs, options, exhaustive, false)
}

/// The design points the tuner chooses from: [`design_space`] less points that provably cannot
/// be the cheapest feasible point of their parameter set (so neither the layer's choice nor the
/// single-set comparison can change). Algorithms whose plans are costly to build but whose
/// ciphertext counts are known beforehand are priced last, and a set is skipped when its
/// client time and traffic alone exceed a feasible point already priced under the same set.
fn tuning_space(layer: &LayerRequest, costs: &mut CostTable, options: &TuneOptions) -> Result<Vec<DesignPoint>, PlanError> {
    Ok(priced_space(layer, costs, options, false, true)?.into_iter().filter(|p| p.feasible(options.reserve_bits)).collect())
}

/// A lower bound on a point's predicted time from its ciphertext counts alone: the client's
/// encryptions and decryptions and the link, computed as [`price_plan`] does (whole batch
/// ciphertexts down), so predicted_s = server_s + client_s + comm_s is never below it.
fn client_and_link_seconds(inputs: usize, outputs: usize, params: &Parameters, costs: &CostTable, options: &TuneOptions) -> Result<f64, PlanError> {
    let op = costs.lookup(params)?;
    let client_s = inputs as f64 * op.encrypt_s + outputs as f64 * op.decrypt_s;
    let up = inputs * lycaon_nn::layout::seeded_ciphertext_bytes(params, params.max_level());
    let down = outputs * lycaon_nn::layout::ciphertext_bytes(params, 0);
    Ok(client_s + options.link.seconds(up + down, 1))
}

fn priced_space(
    layer: &LayerRequest,
    costs: &mut CostTable,
    options: &TuneOptions,
    exhaustive: bool,
    skip_dominated: bool,
) -> Result<Vec<DesignPoint>, PlanError> {
    check_layer(layer)?;
    // A set whose primes do not exist (no t = 1 mod 2n of exactly t_bits bits, for instance) is
    // left out of the space; everything else is calibrated before the parallel pricing.
    // Each set's parameters are made once (prime generation and NTT tables), not per algorithm.
    let mut made: BTreeMap<ParamChoice, Option<Arc<Parameters>>> = BTreeMap::new();
    let mut points: Vec<(Algorithm, ParamChoice, Arc<Parameters>)> = Vec::new();
    for (alg, set) in search_points(layer, options, exhaustive)? {
        if let Some(params) = made.entry(set.clone()).or_insert_with(|| set.parameters().ok()).clone() {
            points.push((alg, set, params));
        }
    }
    for (_, _, params) in &points {
        costs.calibrate(params)?;
    }
    // A plan's structure (layouts, terms, rotations, plaintext norms) depends on the algorithm,
    // n and t alone: build it once per (algorithm, n, t) and re-parameterise it for every set
    // of the group, which only changes the moduli the counts and noise are priced under.
    let mut groups: BTreeMap<(String, usize, Option<u64>), Vec<usize>> = BTreeMap::new();
    for (i, (alg, _, params)) in points.iter().enumerate() {
        groups.entry((alg.to_string(), params.n(), params.plaintext_modulus().map(|t| t.value()))).or_default().push(i);
    }
    let shape = layer.shape.conv_shape();
    let table: &CostTable = costs;
    let (deferred, now): (Vec<_>, Vec<_>) =
        groups.into_iter().partition(|((_, n, _), members)| skip_dominated && points[members[0]].0.ciphertexts_without_building(&shape, *n).is_some());
    let price_groups = |groups: Vec<(_, Vec<usize>)>| -> Result<Vec<(usize, Option<DesignPoint>)>, PlanError> {
        let priced: Vec<Vec<(usize, Option<DesignPoint>)>> = groups
            .into_par_iter()
            .filter(|(_, members): &(_, Vec<usize>)| !members.is_empty())
            .map(|(_, members)| {
                let (alg, _, first) = &points[members[0]];
                let Ok(plan) = alg.build(&shape, first) else {
                    return Ok(members.iter().map(|&i| (i, None)).collect());
                };
                members
                    .iter()
                    .map(|&i| {
                        let (alg, set, params) = &points[i];
                        let rebound = plan.with_params(params)?;
                        Ok((i, price_plan(layer, *alg, set, params, rebound.as_ref(), table, options)?))
                    })
                    .collect::<Result<Vec<_>, PlanError>>()
            })
            .collect::<Result<_, PlanError>>()?;
        Ok(priced.into_iter().flatten().collect())
    };
    // Back in the order of the search points (ties between equal predictions keep going to the
    // first point, as before).
    let mut by_point: Vec<Option<DesignPoint>> = vec![None; points.len()];
    for (i, point) in price_groups(now)? {
        by_point[i] = point;
    }
    if !deferred.is_empty() {
        let mut best: BTreeMap<ParamChoice, f64> = BTreeMap::new();
        for p in by_point.iter().flatten().filter(|p| p.feasible(options.reserve_bits)) {
            let e = best.entry(p.params.clone()).or_insert(f64::INFINITY);
            *e = e.min(p.predicted_s);
        }
        let mut kept = Vec::with_capacity(deferred.len());
        for (key, members) in deferred {
            let mut left = Vec::with_capacity(members.len());
            for i in members {
                let (alg, set, params) = &points[i];
                let (inputs, outputs) = alg.ciphertexts_without_building(&shape, params.n()).unwrap_or((0, 0));
                let floor = client_and_link_seconds(inputs, outputs, params, table, options)?;
                if !best.get(set).is_some_and(|&b| floor > b) {
                    left.push(i);
                }
            }
            kept.push((key, left));
        }
        for (i, point) in price_groups(kept)? {
            by_point[i] = point;
        }
    }
    Ok(by_point.into_iter().flatten().collect())
}

/// The tuned plan of a network.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HybridPlan {
    pub version: u32,
    pub mode: String,
    pub link: Link,
    pub failure_probability: f64,
    pub layers: Vec<PlannedLayer>,
    pub predicted_s: f64,
    /// Best single parameter set for the whole network, t included (each layer still picks its
    /// algorithm).
    pub single_set: Option<ParamChoice>,
    pub single_set_predicted_s: f64,
    pub speedup_vs_single_set: f64,
}

/// One layer of a plan: the chosen point and the design space it was chosen from.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PlannedLayer {
    pub name: String,
    pub shape: ShapeSpec,
    pub weight_bits: u32,
    pub t_bits: u32,
    #[serde(flatten)]
    pub chosen: DesignPoint,
    /// The chosen algorithm under the single parameter set (for the comparison).
    pub single_set_point: Option<DesignPoint>,
    /// Every feasible point (algorithm, parameters) that was priced, for the report.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub design_space: Vec<DesignPoint>,
}

fn cheapest<'a>(points: impl Iterator<Item = &'a DesignPoint>) -> Option<&'a DesignPoint> {
    points.min_by(|a, b| a.predicted_s.total_cmp(&b.predicted_s))
}

/// Tunes every layer. With `keep_design_space`, the costliest layer of the plan also carries its
/// exhaustive design space (every parameter set, feasible or not) for the report's scatter.
pub fn tune(layers: &[LayerRequest], costs: &mut CostTable, options: &TuneOptions, keep_design_space: bool) -> Result<HybridPlan, PlanError> {
    if layers.is_empty() {
        return Err(PlanError::Invalid("the model has no linear layer to plan".into()));
    }
    // Identical layers share their design space.
    let mut spaces: BTreeMap<String, Vec<DesignPoint>> = BTreeMap::new();
    let key = |l: &LayerRequest| format!("{:?}/{}/{}", l.shape, l.weight_bits, l.t_bits);
    for layer in layers {
        if !spaces.contains_key(&key(layer)) {
            let feasible = tuning_space(layer, costs, options)?;
            if feasible.is_empty() {
                return Err(PlanError::Infeasible(format!(
                    "layer '{}': no algorithm and 128-bit parameter set keeps {:.0} bits of noise budget (t needs {} bits); lower the plaintext bits or the reserve",
                    layer.name, options.reserve_bits, layer.t_bits
                )));
            }
            spaces.insert(key(layer), feasible);
        }
    }
    // The best single set: one parameter set (n, q, p, t, digits) for every layer, t wide enough
    // for the widest layer, each layer picking its best algorithm under it (what a deployment
    // without per-layer tuning would run).
    let t_max = layers.iter().map(|l| l.t_bits).max().unwrap_or(0);
    let mut single_spaces: BTreeMap<String, Vec<DesignPoint>> = BTreeMap::new();
    for layer in layers {
        let at_max = LayerRequest { t_bits: t_max, ..layer.clone() };
        if !single_spaces.contains_key(&key(&at_max)) {
            let space = match spaces.get(&key(&at_max)) {
                Some(s) => s.clone(),
                None => tuning_space(&at_max, costs, options)?,
            };
            single_spaces.insert(key(&at_max), space);
        }
    }
    let single_space = |layer: &LayerRequest| &single_spaces[&key(&LayerRequest { t_bits: t_max, ..layer.clone() })];
    let mut single: BTreeMap<ParamChoice, (f64, usize)> = BTreeMap::new();
    for layer in layers {
        let mut best_here: BTreeMap<&ParamChoice, f64> = BTreeMap::new();
        for p in single_space(layer) {
            let e = best_here.entry(&p.params).or_insert(f64::INFINITY);
            *e = e.min(p.predicted_s);
        }
        for (k, s) in best_here {
            let e = single.entry(k.clone()).or_insert((0.0, 0));
            e.0 += s;
            e.1 += 1;
        }
    }
    let single_best =
        single.iter().filter(|(_, (_, count))| *count == layers.len()).min_by(|a, b| a.1 .0.total_cmp(&b.1 .0)).map(|(k, (s, _))| (k.clone(), *s));

    let mut planned = Vec::with_capacity(layers.len());
    for layer in layers {
        let space = &spaces[&key(layer)];
        let chosen = cheapest(space.iter()).cloned().ok_or_else(|| PlanError::Infeasible(layer.name.clone()))?;
        let single_set_point = single_best.as_ref().and_then(|(k, _)| cheapest(single_space(layer).iter().filter(|p| &p.params == k)).cloned());
        planned.push(PlannedLayer {
            name: layer.name.clone(),
            shape: layer.shape,
            weight_bits: layer.weight_bits,
            t_bits: layer.t_bits,
            chosen,
            single_set_point,
            design_space: Vec::new(),
        });
    }
    if keep_design_space {
        if let Some(costliest) = planned.iter_mut().max_by(|a, b| a.chosen.predicted_s.total_cmp(&b.chosen.predicted_s)) {
            let request = LayerRequest { name: costliest.name.clone(), shape: costliest.shape, weight_bits: costliest.weight_bits, t_bits: costliest.t_bits };
            costliest.design_space = design_space(&request, costs, options, true)?;
        }
    }
    let predicted_s: f64 = planned.iter().map(|l| l.chosen.predicted_s).sum();
    let (single_set, single_s) = match single_best {
        Some((set, s)) => (Some(set), s),
        None => (None, f64::INFINITY),
    };
    Ok(HybridPlan {
        version: 1,
        mode: "hybrid".into(),
        link: options.link.clone(),
        failure_probability: options.failure_probability,
        layers: planned,
        predicted_s,
        single_set,
        single_set_predicted_s: single_s,
        speedup_vs_single_set: if single_s.is_finite() { single_s / predicted_s } else { f64::INFINITY },
    })
}

/// A planning request as JSON (what the Python side sends).
#[derive(Clone, Debug, Deserialize)]
struct PlanRequest {
    layers: Vec<LayerRequest>,
    #[serde(default)]
    link: Option<String>,
    #[serde(default)]
    failure_probability: Option<f64>,
    #[serde(default)]
    reserve_bits: Option<f64>,
    #[serde(default)]
    flood_bits: Option<f64>,
    #[serde(default)]
    algorithms: Vec<String>,
    #[serde(default)]
    design_space: bool,
    /// Cost cache file; the default cache when absent, none (recalibrate) when "".
    #[serde(default)]
    cache: Option<String>,
}

/// Tunes a network from a JSON request {"layers": [{"name", "shape": {h, w, c_in, c_out, k,
/// stride}, "weight_bits", "t_bits"}], "link": "lan", "failure_probability": 2^-40,
/// "reserve_bits": 0, "algorithms": [], "design_space": false, "cache": path} and returns the
/// plan as JSON.
pub fn plan_json(request: &str) -> Result<String, PlanError> {
    let req: PlanRequest = serde_json::from_str(request).map_err(|e| PlanError::Invalid(format!("malformed plan request: {e}")))?;
    let mut options = TuneOptions::default();
    if let Some(link) = &req.link {
        options.link = Link::parse(link)?;
    }
    if let Some(p) = req.failure_probability {
        if !(p > 0.0 && p < 1.0) {
            return Err(PlanError::Invalid(format!("failure_probability must be in (0, 1), not {p}")));
        }
        options.failure_probability = p;
    }
    if let Some(r) = req.reserve_bits {
        if !(r.is_finite() && r >= 0.0) {
            return Err(PlanError::Invalid(format!("reserve_bits must be a non-negative number, not {r}")));
        }
        options.reserve_bits = r;
    }
    if let Some(f) = req.flood_bits {
        if !(f.is_finite() && (0.0..=128.0).contains(&f)) {
            return Err(PlanError::Invalid(format!("flood_bits must be a number of bits in [0, 128], not {f}")));
        }
        options.flood_bits = f;
    }
    options.algorithms = req.algorithms.clone();
    let mut costs = match req.cache.as_deref() {
        Some("") => CostTable::in_memory(),
        Some(path) => CostTable::cached(path.into())?,
        None => CostTable::cached(CostTable::default_path())?,
    };
    let plan = tune(&req.layers, &mut costs, &options, req.design_space)?;
    costs.save()?;
    serde_json::to_string(&plan).map_err(|e| PlanError::Io(e.to_string()))
}
