//! The leveled path (Python's `FheModel`): networks with quadratic activations whose whole depth
//! fits one ring, no bootstrapping. Every tensor in the gap packing ([`super::packing`]);
//! convolutions, average pooling and fully connected layers as slot matrices evaluated by the
//! diagonal method (one level; [`super::linear`]); per-channel quadratics a x^2 + b x + c per
//! slot (one level when monic, two otherwise); flatten as an alias; residual additions of
//! equally packed tensors. Parameters with exactly the network's depth
//! ([`super::parameters`]); every rotation key at the highest level it is used at.

use std::collections::{BTreeMap, HashMap};

use super::linear::{conv_matrix, dense_matrix, diagonal_rotations, replication_steps, SlotMatrix};
use super::packing::{grid_row, slots_needed, SlotPacking};
use super::parameters::choose_parameters;
use super::{fail, CompileOptions};
use crate::fhe::graph::{GraphNode, ModelGraph, NodeOp};
use crate::fhe::program::{FheOp, FheOpKind, FheParameters, FheProgram, InputPacking, SlotValues, FHE_PROGRAM_FORMAT};
use crate::Result;

/// Levels `node` consumes on this path (Python's `FheModel._node_depth`), or why the path does
/// not take it.
pub fn node_depth(node: &GraphNode) -> Result<usize> {
    let d = node.describe();
    match node.op {
        NodeOp::Conv | NodeOp::Avgpool | NodeOp::Linear => Ok(1),
        NodeOp::Poly => {
            let c = node.required("coefficients")?;
            let width = *c.shape.last().unwrap_or(&0);
            if width > 3 {
                return Err(fail(format!(
                    "{d}: the FHE mode evaluates polynomials up to degree 2 (trained quadratics); degree {} is not built yet",
                    width - 1
                )));
            }
            // Monic (a = 1 in every channel) or no square term: one level.
            let monic = width < 3 || c.data.chunks(width).all(|row| row[2] == 1.0);
            Ok(if monic { 1 } else { 2 })
        }
        NodeOp::Flatten | NodeOp::Add => Ok(0),
        NodeOp::Relu => Err(fail(format!(
            "{d}: ReLU under CKKS needs the composite minimax approximation and bootstrapping (the bootstrapped path); the leveled path takes quadratic activations"
        ))),
        other => Err(fail(format!("{d}: the leveled FHE path does not compile '{}'", other.as_str()))),
    }
}

/// The network's depth: the longest chain of levels from the input to the output.
pub fn depth(graph: &ModelGraph) -> Result<usize> {
    let mut level: HashMap<&str, usize> = HashMap::from([(graph.input.as_str(), 0)]);
    for node in &graph.nodes {
        let from = node.inputs.iter().map(|i| level.get(i.as_str()).copied().unwrap_or(0)).max().unwrap_or(0);
        level.insert(node.output.as_str(), from + node_depth(node)?);
    }
    level.get(graph.output.as_str()).copied().ok_or_else(|| fail(format!("the output '{}' is never written", graph.output)))
}

/// The depth and parameters of `graph` on this path, or why it does not fit.
pub fn plan_parameters(graph: &ModelGraph, options: &CompileOptions) -> Result<(usize, FheParameters)> {
    let depth = depth(graph)?;
    let params = choose_parameters(depth, slots_needed(graph), options.log_scale, options.log_q0, options.p_bits.as_deref(), options.log_n)?;
    Ok((depth, params))
}

/// A dense per-slot vector as the program stores it (its non-zero slots).
fn slot_values(v: Option<Vec<f64>>) -> Option<SlotValues> {
    v.map(|v| SlotValues::from_dense(&v))
}

struct Step {
    op: FheOp,
    /// Rotation steps it uses, all at its level.
    rotations: Vec<i64>,
}

/// An op of the node that uses no level and no rotation (an alias, an addition).
fn free_step(node: &GraphNode, level: usize, kind: FheOpKind) -> Step {
    Step {
        op: FheOp { name: node.name.clone(), inputs: node.inputs.clone(), output: node.output.clone(), level, depth: 0, refresh: vec![], kind },
        rotations: vec![],
    }
}

fn linear_op(node: &GraphNode, inputs: Vec<String>, level: usize, matrix: SlotMatrix, sum_steps: Vec<i64>, bias: Option<Vec<f64>>, slots: usize) -> Step {
    let mut rotations = diagonal_rotations(&matrix.diagonal_indices(slots), slots);
    rotations.extend(&sum_steps);
    let s = slots as i64;
    let kind = FheOpKind::Linear {
        rows: matrix.rows.iter().map(|&r| r as u32).collect(),
        cols: matrix.cols.iter().map(|&c| c.rem_euclid(s) as u32).collect(),
        values: matrix.values,
        period: matrix.period,
        sum_steps,
        bias: slot_values(bias),
    };
    Step { op: FheOp { name: node.name.clone(), inputs, output: node.output.clone(), level, depth: 1, refresh: vec![], kind }, rotations }
}

/// Python's `FheModel._quadratic`: the coefficients per slot (a absent when monic).
fn quadratic_op(node: &GraphNode, src: &SlotPacking, level: usize, slots: usize) -> Result<Step> {
    let c = node.required("coefficients")?;
    let width = *c.shape.last().unwrap_or(&0);
    if !(1..=3).contains(&width) {
        return Err(fail(format!("{}: the FHE mode evaluates polynomials up to degree 2, not {} coefficients", node.describe(), width)));
    }
    let channels = src.shape[0];
    // Rows (c, b, a) per channel, padded with zeros to degree 2.
    let rows: Vec<[f64; 3]> = if c.shape.len() == 1 {
        let mut r = [0.0; 3];
        r[..width].copy_from_slice(&c.data);
        vec![r; channels]
    } else {
        c.data
            .chunks(width)
            .map(|row| {
                let mut r = [0.0; 3];
                r[..width].copy_from_slice(row);
                r
            })
            .collect()
    };
    if rows.len() != channels {
        return Err(fail(format!("{}: {} coefficient rows for {channels} channels", node.describe(), rows.len())));
    }
    let inner = src.inner();
    let per_slot = |j: usize| {
        let mut v = vec![0.0; slots];
        src.for_all_slots(slots, |slot, i| v[slot] = rows[i / inner][j]);
        v
    };
    let any = |j: usize| rows.iter().any(|r| r[j] != 0.0);
    let name = node.name.clone();
    let (inputs, output) = (node.inputs.clone(), node.output.clone());
    if width < 3 {
        // b x + c: one level (Python writes a quadratic with a = 0 of two levels here, against
        // its own level plan of one; a scale-and-shift is what the plan means).
        let kind = FheOpKind::ScaleShift { b: SlotValues::from_dense(&per_slot(1)), c: any(0).then(|| SlotValues::from_dense(&per_slot(0))) };
        return Ok(Step { op: FheOp { name, inputs, output, level, depth: 1, refresh: vec![], kind }, rotations: vec![] });
    }
    let monic = rows.iter().all(|r| r[2] == 1.0);
    let kind = FheOpKind::Quadratic {
        a: (!monic).then(|| SlotValues::from_dense(&per_slot(2))),
        b: any(1).then(|| SlotValues::from_dense(&per_slot(1))),
        c: any(0).then(|| SlotValues::from_dense(&per_slot(0))),
    };
    Ok(Step { op: FheOp { name, inputs, output, level, depth: if monic { 1 } else { 2 }, refresh: vec![], kind }, rotations: vec![] })
}

/// The program of `graph` at `depth` levels on `parameters` (Python's `FheModel._compile` and
/// `program`).
pub fn compile(graph: &ModelGraph, options: &CompileOptions, depth: usize, parameters: FheParameters) -> Result<FheProgram> {
    let FheParameters::ScaleStable { n, .. } = parameters else {
        return Err(fail("the leveled path runs on scale-stable parameters"));
    };
    let slots = n / 2;
    let shapes = graph.shapes();
    let input = if graph.input_shape.len() == 3 { SlotPacking::input(&graph.input_shape, grid_row(graph)) } else { SlotPacking::input(&graph.input_shape, 0) };
    if input.period > slots {
        return Err(fail(format!(
            "the input ({} values) does not fit one ciphertext of {slots} slots; several ciphertexts are not built yet",
            graph.input_shape.iter().product::<usize>()
        )));
    }
    let mut packings: HashMap<&str, SlotPacking> = HashMap::from([(graph.input.as_str(), input.clone())]);
    let mut levels: HashMap<&str, usize> = HashMap::from([(graph.input.as_str(), depth)]);
    let mut steps: Vec<Step> = Vec::new();
    for node in &graph.nodes {
        let d = node.describe();
        let src = packings.get(node.inputs[0].as_str()).ok_or_else(|| fail(format!("{d}: input '{}' has no packing", node.inputs[0])))?.clone();
        let lvl = node.inputs.iter().map(|i| levels.get(i.as_str()).copied().unwrap_or(0)).min().unwrap_or(0);
        let out = match node.op {
            NodeOp::Conv | NodeOp::Avgpool => {
                let m = conv_matrix(node, shapes[node.inputs[0].as_str()], &src, slots)?;
                steps.push(linear_op(node, node.inputs.clone(), lvl, m.matrix, vec![], m.bias, slots));
                m.packing
            }
            NodeOp::Linear => {
                let mut src = src;
                let mut inputs = node.inputs.clone();
                if src.period == slots && src.extent() <= (slots / 2) as i64 {
                    // A vector that does not repeat: replicate it first (no level).
                    let (t, rep) = replication_steps(src.extent() as usize, slots);
                    let replicated = format!("{}:replicated", node.inputs[0]);
                    let op = FheOp {
                        name: format!("{}:replicate", node.name),
                        inputs: node.inputs.clone(),
                        output: replicated.clone(),
                        level: lvl,
                        depth: 0,
                        refresh: vec![],
                        kind: FheOpKind::Replicate { steps: rep.clone() },
                    };
                    steps.push(Step { op, rotations: rep });
                    src.period = t;
                    inputs = vec![replicated];
                }
                let m = dense_matrix(node, &src, slots)?;
                steps.push(linear_op(node, inputs, lvl, m.matrix, m.sum_steps, m.bias, slots));
                m.packing
            }
            NodeOp::Poly => {
                steps.push(quadratic_op(node, &src, lvl, slots)?);
                src
            }
            NodeOp::Flatten => {
                steps.push(free_step(node, lvl, FheOpKind::Alias));
                src.flattened()
            }
            NodeOp::Add => {
                let other = packings.get(node.inputs[1].as_str()).ok_or_else(|| fail(format!("{d}: input '{}' has no packing", node.inputs[1])))?;
                if other.period != src.period || other.index != src.index {
                    return Err(fail(format!("{d}: its inputs are packed differently (a packing change before a residual addition is not built yet)")));
                }
                steps.push(free_step(node, lvl, FheOpKind::Add));
                src
            }
            other => return Err(fail(format!("{d}: the leveled FHE path does not compile '{}'", other.as_str()))),
        };
        packings.insert(node.output.as_str(), out);
        let consumed = node_depth(node)?;
        levels.insert(node.output.as_str(), lvl.checked_sub(consumed).ok_or_else(|| fail(format!("{d}: no level left")))?);
    }
    let mut rotation_levels: BTreeMap<i64, usize> = BTreeMap::new();
    let mut relin_level: Option<usize> = None;
    for st in &steps {
        for &r in &st.rotations {
            let r = r.rem_euclid(slots as i64);
            if r != 0 {
                let e = rotation_levels.entry(r).or_insert(0);
                *e = (*e).max(st.op.level);
            }
        }
        if let FheOpKind::Quadratic { a, .. } = &st.op.kind {
            let at = if a.is_none() { st.op.level } else { st.op.level.saturating_sub(1) };
            relin_level = Some(relin_level.unwrap_or(0).max(at));
        }
    }
    let out = packings.get(graph.output.as_str()).ok_or_else(|| fail(format!("the output '{}' is never written", graph.output)))?;
    if out.shape.len() != 1 {
        return Err(fail("the network's output must be a flat vector (logits)"));
    }
    Ok(FheProgram {
        format: FHE_PROGRAM_FORMAT,
        name: options.name.clone().unwrap_or_else(|| graph.name.clone()),
        parameters,
        input: graph.input.clone(),
        input_shape: graph.input_shape.clone(),
        input_packing: InputPacking::Slots { index: input.index.iter().map(|&i| i as u32).collect(), period: input.period },
        input_level: depth,
        output: graph.output.clone(),
        output_slots: out.index.iter().map(|&i| i as u32).collect(),
        ops: steps.into_iter().map(|s| s.op).collect(),
        rotation_levels,
        relin_level,
        metadata: options.metadata.clone().unwrap_or_else(|| serde_json::json!({})),
    })
}
