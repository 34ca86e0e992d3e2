//! FHE-mode networks on one multiplexed ciphertext (Lee et al., ICML 2022): the packing
//! ([`MpLayout`]), the operations ([`FheLayer`], [`FheNetwork`], [`resnet20`]), the level plan of
//! 002 with bootstrapping, and the rotation table they produce ([`fhe_rotation_table`]).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::{canonical_step, FheParams, Phase, Rotation, RotationTable};
use crate::PlanError;

/// Lee et al.'s multiplexed parallel layout of an h x w x c tensor in n/2 slots: gap k (k^2
/// channels interleaved in a kh x kw grid), t = ceil(c / k^2) such grids one after the other, and
/// p = 2^floor(log2(slots / (k^2 h w t))) copies of the whole at stride slots / p.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MpLayout {
    pub k: usize,
    pub h: usize,
    pub w: usize,
    pub c: usize,
    pub t: usize,
    pub p: usize,
}

impl MpLayout {
    pub fn new(k: usize, h: usize, w: usize, c: usize, slots: usize) -> Result<Self, PlanError> {
        if k == 0 || h == 0 || w == 0 || c == 0 {
            return Err(PlanError::InvalidModel { model: "fhe network".into(), reason: format!("empty tensor {h}x{w}x{c} (gap {k})") });
        }
        let t = c.div_ceil(k * k);
        let used = k * k * h * w * t;
        if used > slots {
            return Err(PlanError::InvalidModel {
                model: "fhe network".into(),
                reason: format!(
                    "a {h}x{w}x{c} tensor with gap {k} needs {used} slots, more than the {slots} of one ciphertext (multi-ciphertext packing is not modelled)"
                ),
            });
        }
        let p = 1usize << (slots / used).ilog2();
        Ok(Self { k, h, w, c, t, p })
    }

    /// Slot of channel o at pixel (0, 0) in copy 0.
    pub fn channel_offset(&self, o: usize) -> usize {
        let kk = self.k * self.k;
        kk * self.h * self.w * (o / kk) + self.k * self.w * ((o % kk) / self.k) + o % self.k
    }

    /// Slots between two grids (one block of k^2 channels).
    pub fn block(&self) -> usize {
        self.k * self.k * self.h * self.w
    }
}

/// Lee et al.'s SumSlots(m, p): sum_{j < m} Rot(x, j p) in about log2(m) rotations; returns the
/// steps (p 2^j for j < floor(log2 m), then one per further set bit of m).
pub fn sum_slots_steps(m: usize, p: i64) -> Vec<i64> {
    if m <= 1 {
        return Vec::new();
    }
    let top = m.ilog2();
    let mut steps: Vec<i64> = (0..top).map(|j| p << j).collect();
    for j in 0..top {
        if (m >> j) & 1 == 1 {
            steps.push(((m >> (j + 1)) << (j + 1)) as i64 * p);
        }
    }
    steps
}

/// An activation: the depths of its stages (bootstrapping may run between stages).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActivationKind {
    /// AESPA (002 Sec. 3): a trained quadratic, one level.
    Aespa,
    /// Lee et al.'s composite minimax ReLU (alpha = 13: degrees 15, 15, 27, depths 4, 4, 5) and
    /// the product x (1 + sgn x) / 2: 14 levels in four stages (004's "MPCNN").
    CompositeRelu,
    /// Any other polynomial activation, by stage depths.
    Custom { stage_depths: Vec<usize> },
}

impl ActivationKind {
    pub fn stage_depths(&self) -> Vec<usize> {
        match self {
            ActivationKind::Aespa => vec![1],
            ActivationKind::CompositeRelu => vec![4, 4, 5, 1],
            ActivationKind::Custom { stage_depths } => stage_depths.clone(),
        }
    }

    pub fn label(&self) -> String {
        match self {
            ActivationKind::Aespa => "aespa".into(),
            ActivationKind::CompositeRelu => "composite_relu".into(),
            ActivationKind::Custom { stage_depths } => format!("custom{stage_depths:?}"),
        }
    }

    pub fn parse(text: &str) -> Result<Self, PlanError> {
        match text {
            "aespa" => Ok(Self::Aespa),
            "composite_relu" | "mpcnn" | "relu" => Ok(Self::CompositeRelu),
            _ => Err(PlanError::Invalid(format!("unknown activation {text:?}; known: aespa, composite_relu"))),
        }
    }
}

/// One operation of an FHE-mode network on a single multiplexed ciphertext.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum FheLayer {
    /// Multiplexed parallel convolution (odd kernel, stride 1 or 2, same padding).
    Conv {
        name: String,
        c_out: usize,
        kernel: usize,
        stride: usize,
    },
    Activation {
        name: String,
        kind: ActivationKind,
    },
    /// Remembers the current ciphertext as a residual block's shortcut input.
    BlockStart {
        name: String,
    },
    /// A projection shortcut (1x1 strided convolution) applied to the block's input.
    Shortcut {
        name: String,
        c_out: usize,
        kernel: usize,
        stride: usize,
    },
    /// Adds the shortcut (the block input, or the projection) to the main path.
    BlockEnd {
        name: String,
    },
    /// Global average pooling into c contiguous slots.
    AvgPool {
        name: String,
    },
    /// Fully connected layer on the vector in the first slots.
    Fc {
        name: String,
        outputs: usize,
    },
}

impl FheLayer {
    pub fn name(&self) -> &str {
        match self {
            FheLayer::Conv { name, .. }
            | FheLayer::Activation { name, .. }
            | FheLayer::BlockStart { name }
            | FheLayer::Shortcut { name, .. }
            | FheLayer::BlockEnd { name }
            | FheLayer::AvgPool { name }
            | FheLayer::Fc { name, .. } => name,
        }
    }
}

/// An FHE-mode network: input shape and the operations in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FheNetwork {
    pub name: String,
    pub input_h: usize,
    pub input_w: usize,
    pub input_c: usize,
    pub layers: Vec<FheLayer>,
}

/// ResNet-20 for CIFAR-10 (He et al.): a 3x3 convolution to 16 channels, three stages of three
/// basic blocks (16, 32, 64 channels; the first block of stages 2 and 3 has stride 2 and a 1x1
/// strided projection shortcut, as in Lee et al.'s implementation), global average pooling, and a
/// 64-to-10 fully connected layer. Batch normalisation is folded into the convolutions.
pub fn resnet20(activation: ActivationKind) -> FheNetwork {
    let conv = |name: String, c_out, stride| FheLayer::Conv { name, c_out, kernel: 3, stride };
    let act = |name: String| FheLayer::Activation { name, kind: activation.clone() };
    let mut layers = vec![conv("conv1".into(), 16, 1), act("act1".into())];
    for (stage, channels) in [(1usize, 16usize), (2, 32), (3, 64)] {
        for block in 0..3 {
            let b = format!("layer{stage}.{block}");
            let stride = if stage > 1 && block == 0 { 2 } else { 1 };
            layers.push(FheLayer::BlockStart { name: b.clone() });
            layers.push(conv(format!("{b}.conv1"), channels, stride));
            layers.push(act(format!("{b}.act1")));
            layers.push(conv(format!("{b}.conv2"), channels, 1));
            if stride == 2 {
                layers.push(FheLayer::Shortcut { name: format!("{b}.shortcut"), c_out: channels, kernel: 1, stride: 2 });
            }
            layers.push(FheLayer::BlockEnd { name: format!("{b}.add") });
            layers.push(act(format!("{b}.act2")));
        }
    }
    layers.push(FheLayer::AvgPool { name: "avgpool".into() });
    layers.push(FheLayer::Fc { name: "fc".into(), outputs: 10 });
    FheNetwork { name: format!("resnet20-{}", activation.label()), input_h: 32, input_w: 32, input_c: 3, layers }
}

/// One step of the level plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedOp {
    pub layer: String,
    /// Bootstrapped right before this operation.
    pub bootstrap_before: bool,
    pub level_in: usize,
    pub level_out: usize,
    pub rotations: u64,
}

/// Where each operation ran and how many bootstrappings the network needed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelPlan {
    pub comp_level: usize,
    pub min_level: usize,
    pub bootstraps: usize,
    pub ops: Vec<PlannedOp>,
}

/// The steps of one DFT factor with `r` merged radix-2 stages at `stride`, evaluated by
/// baby-step giant-step: diagonals j * stride for |j| < 2^r, baby steps b * stride (b < n1 =
/// 2^ceil((r+1)/2)) and giant steps g * n1 * stride.
fn dft_factor_steps(r: u32, stride: i64, slots: usize) -> (Vec<i64>, Vec<i64>) {
    let span = (1i64 << r) - 1;
    let n1 = 1i64 << (r + 1).div_ceil(2);
    let m = slots as i64;
    let reduce = |s: i64| s.rem_euclid(m);
    let baby: BTreeSet<i64> = (1..n1.min(span + 1)).map(|b| reduce(b * stride)).filter(|&s| s != 0).collect();
    let giant: BTreeSet<i64> =
        ((-span).div_euclid(n1)..=span.div_euclid(n1)).filter(|&g| g != 0).map(|g| reduce(g * n1 * stride)).filter(|&s| s != 0).collect();
    (baby.into_iter().collect(), giant.into_iter().collect())
}

/// Splits the log2(slots) radix-2 stages of the DFT into `depth` factors as evenly as possible.
fn dft_factors(log_slots: u32, depth: usize) -> Vec<(u32, i64)> {
    let depth = depth as u32;
    let mut out = Vec::new();
    let mut offset = 0u32;
    for i in 0..depth {
        let r = log_slots / depth + u32::from(i < log_slots % depth);
        out.push((r, 1i64 << offset));
        offset += r;
    }
    out
}

/// Adds one bootstrapping's rotations: CoeffsToSlots factors (strides descending) at their levels,
/// the conjugation splitting real and imaginary parts after it, and SlotsToCoeffs factors
/// (strides ascending) at theirs. Each factor's baby and giant rotations run at the factor's
/// input level (the rescale follows the whole factor, as in Lattigo).
fn push_bootstrap(table: &mut RotationTable, params: &FheParams, name: &str) -> Result<u64, PlanError> {
    let slots = table.slots;
    let log_slots = slots.ilog2();
    let before = table.total();
    let mut factors = dft_factors(log_slots, params.bootstrap.stc_depth);
    for ((r, stride), level) in factors.iter().zip(params.stc_levels()) {
        let (baby, giant) = dft_factor_steps(*r, *stride, slots);
        for s in baby.into_iter().chain(giant) {
            table.push(&format!("{name}.stc"), Phase::Bootstrapping, Rotation::Step(canonical_step(s, slots)?), level, 1)?;
        }
    }
    factors = dft_factors(log_slots, params.bootstrap.cts_depth);
    factors.reverse();
    let cts_levels = params.cts_levels();
    for ((r, stride), level) in factors.iter().zip(&cts_levels) {
        let (baby, giant) = dft_factor_steps(*r, *stride, slots);
        for s in baby.into_iter().chain(giant) {
            table.push(&format!("{name}.cts"), Phase::Bootstrapping, Rotation::Step(canonical_step(s, slots)?), *level, 1)?;
        }
    }
    let after_cts = cts_levels.last().copied().unwrap_or(0).saturating_sub(1);
    table.push(&format!("{name}.cts"), Phase::Bootstrapping, Rotation::Conjugate, after_cts, 1)?;
    Ok(table.total() - before)
}

/// A residual block being planned: its input (layout, level) and the projected shortcut's.
type OpenBlock = (MpLayout, usize, Option<(MpLayout, usize)>);

struct LevelState<'a> {
    params: &'a FheParams,
    table: RotationTable,
    plan: LevelPlan,
    level: usize,
    bootstraps: usize,
}

impl LevelState<'_> {
    /// Bootstraps when an operation of `depth` levels would go below the minimum level; returns
    /// whether it did.
    fn make_room(&mut self, layer: &str, depth: usize) -> Result<bool, PlanError> {
        let (min, comp) = (self.params.min_level(), self.params.comp_level());
        if comp < min + depth {
            return Err(PlanError::Infeasible(format!(
                "{layer} needs {depth} levels but a bootstrapped ciphertext only has {} above the minimum level {min}",
                comp - min
            )));
        }
        if self.level >= min + depth {
            return Ok(false);
        }
        self.bootstraps += 1;
        let rotations = push_bootstrap(&mut self.table, self.params, &format!("bootstrap{}", self.bootstraps))?;
        self.plan.ops.push(PlannedOp { layer: format!("bootstrap{}", self.bootstraps), bootstrap_before: false, level_in: min, level_out: comp, rotations });
        self.level = comp;
        Ok(true)
    }
}

/// Pushes the rotations of one multiplexed parallel convolution starting at `level`; returns the
/// output layout. Lee et al.'s MultParConv: the f^2 - 1 tap rotations of the input (k^2 w dx +
/// k dy) at the input level; per group of p_in output channels (one per input copy), after the
/// weight product (one level), SumSlots(k, 1), SumSlots(k, k w) and SumSlots(t, k^2 h w) over
/// the input channels; then per output channel a mask product (one more level) and the rotation
/// from its copy to its place in the output layout (by baby and giant steps, as MpConv does:
/// `lycaon_nn::fhe::Placement`); finally SumSlots(p_out, -slots/p_out)
/// replicates the output into its p_out copies. Two levels in all.
fn push_conv(table: &mut RotationTable, name: &str, input: MpLayout, c_out: usize, kernel: usize, stride: usize, level: usize) -> Result<MpLayout, PlanError> {
    let bad = |reason: String| PlanError::InvalidLayer { layer: name.to_string(), reason };
    if kernel % 2 == 0 || !(stride == 1 || stride == 2) || c_out == 0 {
        return Err(bad(format!("kernel {kernel} must be odd, stride {stride} 1 or 2, c_out {c_out} positive")));
    }
    if level < 2 {
        return Err(bad(format!("a convolution needs two levels, the ciphertext is at level {level}")));
    }
    if stride == 2 && (input.h % 2 != 0 || input.w % 2 != 0) {
        return Err(bad(format!("stride 2 needs an even image, got {}x{}", input.h, input.w)));
    }
    let slots = table.slots;
    let output = MpLayout::new(input.k * stride, input.h / stride, input.w / stride, c_out, slots)?;
    let (k, w) = (input.k as i64, input.w as i64);
    let half = (kernel / 2) as i64;
    for dx in -half..=half {
        for dy in -half..=half {
            let step = k * k * w * dx + k * dy;
            if step != 0 {
                table.push_step(name, Phase::Network, step, level, 1)?;
            }
        }
    }
    let groups = c_out.div_ceil(input.p);
    let mut channel_sum = sum_slots_steps(input.k, 1);
    channel_sum.extend(sum_slots_steps(input.k, k * w));
    channel_sum.extend(sum_slots_steps(input.t, input.block() as i64));
    for step in &channel_sum {
        table.push_step(name, Phase::Network, *step, level - 1, groups as u64)?;
    }
    // Placement as lycaon-nn's MpConv runs it: baby and giant steps where the layouts are those
    // MpConv takes (powers of two), else one rotation per output channel (Lee et al.).
    let layouts = lycaon_nn::fhe::MultiplexedLayout::new(input.c, input.h, input.w, input.k, slots)
        .and_then(|i| Ok((i, lycaon_nn::fhe::MultiplexedLayout::new(c_out, output.h, output.w, output.k, slots)?)));
    let placement = match layouts {
        Ok((i, o)) => lycaon_nn::fhe::Placement::fewest_keys(&i, &o, c_out).ok(),
        Err(_) => None,
    };
    let steps: Vec<i64> = match &placement {
        Some(pl) => (0..c_out).map(|o| pl.baby_of(o)).chain(pl.giant.iter().copied()).collect(),
        None => {
            let copy_stride = (slots / input.p) as i64;
            (0..c_out).map(|o| ((o % input.p) as i64 * copy_stride - output.channel_offset(o) as i64).rem_euclid(slots as i64)).collect()
        }
    };
    for step in steps {
        if step != 0 {
            table.push_step(name, Phase::Network, canonical_step(step, slots)?, level - 2, 1)?;
        }
    }
    for step in sum_slots_steps(output.p, -((slots / output.p) as i64)) {
        let s = step.rem_euclid(slots as i64);
        if s != 0 {
            table.push_step(name, Phase::Network, canonical_step(s, slots)?, level - 2, 1)?;
        }
    }
    Ok(output)
}

/// The rotation table of an FHE-mode network under a parameter set and the level plan behind it.
///
/// Level plan (002 Fig. 1): the input is encrypted at the top computation level; a convolution
/// takes two levels, an activation the sum of its stage depths, average pooling and the fully
/// connected layer one each. Before an operation that would go below the minimum level the
/// ciphertext is bootstrapped (dropped to the minimum level, refreshed to the top computation
/// level); a residual block is bootstrapped at its start when its main path would not fit, so
/// the shortcut and the main path meet at a usable level; the sum takes the lower of the two.
/// Average pooling: SumSlots over the columns and rows of each grid, then per channel a mask
/// and a rotation to slot o. Fully connected: one replication by -m (m = inputs rounded up to a
/// power of two), then baby-step giant-step diagonals (baby steps 1..n1-1 before the product,
/// giant steps g n1 after it, n1 = 2^ceil(log2(m)/2)).
pub fn fhe_rotation_table(network: &FheNetwork, params: &FheParams) -> Result<(RotationTable, LevelPlan), PlanError> {
    params.validate()?;
    let slots = params.chain.slots();
    let mut st = LevelState {
        params,
        table: RotationTable::new(slots, params.chain.max_level()),
        plan: LevelPlan { comp_level: params.comp_level(), min_level: params.min_level(), bootstraps: 0, ops: Vec::new() },
        level: params.comp_level(),
        bootstraps: 0,
    };
    let mut layout = MpLayout::new(1, network.input_h, network.input_w, network.input_c, slots)?;
    // (layout, level) of the block input, and the shortcut's output when projected.
    let mut block: Option<OpenBlock> = None;
    let conv_depth = 2usize;
    for (index, op) in network.layers.iter().enumerate() {
        let name = op.name().to_string();
        let before = st.table.total();
        let level_in;
        let mut booted = false;
        match op {
            FheLayer::Conv { c_out, kernel, stride, .. } => {
                booted = st.make_room(&name, conv_depth)?;
                level_in = st.level;
                layout = push_conv(&mut st.table, &name, layout, *c_out, *kernel, *stride, st.level)?;
                st.level -= conv_depth;
            }
            FheLayer::Activation { kind, .. } => {
                level_in = st.level;
                for d in kind.stage_depths() {
                    booted |= st.make_room(&name, d)?;
                    st.level -= d;
                }
            }
            FheLayer::BlockStart { .. } => {
                let depth: usize = network.layers[index + 1..]
                    .iter()
                    .take_while(|l| !matches!(l, FheLayer::BlockEnd { .. }))
                    .map(|l| match l {
                        FheLayer::Conv { .. } => conv_depth,
                        FheLayer::Activation { kind, .. } => kind.stage_depths().iter().sum(),
                        _ => 0,
                    })
                    .sum();
                let usable = params.comp_level() - params.min_level();
                if depth <= usable {
                    booted = st.make_room(&name, depth)?;
                }
                level_in = st.level;
                block = Some((layout, st.level, None));
            }
            FheLayer::Shortcut { c_out, kernel, stride, .. } => {
                let Some((input, input_level, _)) = block else {
                    return Err(PlanError::InvalidLayer { layer: name, reason: "a shortcut must follow a block_start".into() });
                };
                if input_level < params.min_level() + conv_depth {
                    return Err(PlanError::Infeasible(format!("{name}: the block input at level {input_level} has no two levels left for the projection")));
                }
                level_in = input_level;
                let out = push_conv(&mut st.table, &name, input, *c_out, *kernel, *stride, input_level)?;
                block = Some((input, input_level, Some((out, input_level - conv_depth))));
            }
            FheLayer::BlockEnd { .. } => {
                let Some((input, input_level, projected)) = block.take() else {
                    return Err(PlanError::InvalidLayer { layer: name, reason: "a block_end must follow a block_start".into() });
                };
                let (short_layout, short_level) = projected.unwrap_or((input, input_level));
                if short_layout != layout {
                    return Err(PlanError::InvalidLayer {
                        layer: name,
                        reason: format!(
                            "the shortcut ({}x{}x{}) and the main path ({}x{}x{}) differ; add a projection shortcut",
                            short_layout.h, short_layout.w, short_layout.c, layout.h, layout.w, layout.c
                        ),
                    });
                }
                level_in = st.level;
                st.level = st.level.min(short_level);
            }
            FheLayer::AvgPool { .. } => {
                booted = st.make_room(&name, 1)?;
                level_in = st.level;
                let k = layout.k as i64;
                let mut steps = sum_slots_steps(layout.w, k);
                steps.extend(sum_slots_steps(layout.h, k * k * layout.w as i64));
                for s in steps {
                    st.table.push_step(&name, Phase::Network, s, st.level, 1)?;
                }
                for o in 0..layout.c {
                    let s = layout.channel_offset(o) as i64 - o as i64;
                    if s != 0 {
                        st.table.push_step(&name, Phase::Network, s, st.level - 1, 1)?;
                    }
                }
                st.level -= 1;
                layout = MpLayout::new(1, 1, 1, layout.c, slots)?;
            }
            FheLayer::Fc { outputs, .. } => {
                booted = st.make_room(&name, 1)?;
                level_in = st.level;
                let m = layout.c.next_power_of_two();
                if 2 * m > slots {
                    return Err(PlanError::InvalidLayer { layer: name, reason: format!("{} inputs do not fit twice in {slots} slots", layout.c) });
                }
                st.table.push_step(&name, Phase::Network, -(m as i64), st.level, 1)?;
                let n1 = 1usize << m.ilog2().div_ceil(2);
                for b in 1..n1 {
                    st.table.push_step(&name, Phase::Network, b as i64, st.level, 1)?;
                }
                for g in 1..m / n1 {
                    st.table.push_step(&name, Phase::Network, (g * n1) as i64, st.level - 1, 1)?;
                }
                st.level -= 1;
                layout = MpLayout::new(1, 1, 1, *outputs, slots)?;
            }
        }
        st.plan.ops.push(PlannedOp { layer: name, bootstrap_before: booted, level_in, level_out: st.level, rotations: st.table.total() - before });
    }
    st.plan.bootstraps = st.bootstraps;
    Ok((st.table, st.plan))
}
