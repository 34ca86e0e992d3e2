//! Packings and dataflows of 000 Secs. 4-5 (Fig. 5, Table 2): per layer, the packing factors, the
//! homomorphic operations and the data each structure moves.
//!
//! Every packing is a loop nest over polynomials (000 Fig. 5). [`count_layer`] evaluates its trip
//! counts in closed form and returns a [`LayerCounts`]: products, rotations split into cyclic
//! shifts and permutations, plaintext (weight) rotations, NTT conversions, key switches, the
//! pipeline events the accelerator model times, and the bytes each data structure (IF, W, psum,
//! keys) moves on and off chip. The rules below cite the section they come from.
//!
//! Conventions (000 Table 2): a layer reads an X x Y x C input with K kernels of R x S (R = S = k
//! here), P output neurons per channel; a `_t` factor is how many of that dimension one
//! polynomial packs. Depthwise layers are counted as HEPack-Sim lists them: K = 1 kernel over C
//! channels (the products are the same; the aggregation sums RS values per channel, which Table 2
//! does not distinguish). A matrix product over `h` columns is a 1 x 1 convolution over an h x 1
//! image (the HEPack-Sim GNMT encoding). Packing factors are the largest powers of two that
//! satisfy each packing's slot constraints, as HEPack-Sim chooses them.

use serde::{Deserialize, Serialize};

use super::models::{LayerKind, LayerSpec};
use crate::PlanError;

/// The encryption scheme whose slot count the packings fill.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scheme {
    /// CKKS: n/2 complex slots (000 Sec. 2.3).
    Ckks,
    /// BFV batching: n integer slots in two rows of n/2.
    Bfv,
}

/// HE parameters of one layer (000 Sec. 7.1.1: CKKS, n = 1024, log Q = 32, depth 1, one RNS limb,
/// which fits one 1K-lane PE).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeParams {
    pub scheme: Scheme,
    /// Ring degree.
    pub n: usize,
    /// Bits of the ciphertext modulus Q.
    pub log_q: u32,
    /// Bits of one stored coefficient (a 32-bit word per RNS limb, 000 Sec. 6.1).
    pub word_bits: u32,
}

impl HeParams {
    /// The paper's parameters: CKKS, (n, log Q) = (1024, 32), 32-bit words (000 Sec. 7.1.1).
    pub fn paper() -> Self {
        Self { scheme: Scheme::Ckks, n: 1024, log_q: 32, word_bits: 32 }
    }

    /// Checks n is a power of two of at least 16 and the modulus fits whole words.
    pub fn validate(&self) -> Result<(), PlanError> {
        if !self.n.is_power_of_two() || self.n < 16 || self.n > 1 << 17 {
            return Err(PlanError::InvalidParams { reason: format!("n = {} must be a power of two in 16..=131072", self.n) });
        }
        if self.log_q == 0 || self.word_bits == 0 || self.word_bits > 64 || self.log_q > 4096 {
            return Err(PlanError::InvalidParams {
                reason: format!("log Q = {} and word bits = {} must be positive (word bits at most 64)", self.log_q, self.word_bits),
            });
        }
        Ok(())
    }

    /// Slots a polynomial packs.
    pub fn slots(&self) -> usize {
        match self.scheme {
            Scheme::Ckks => self.n / 2,
            Scheme::Bfv => self.n,
        }
    }

    /// RNS limbs of a polynomial (words per coefficient).
    pub fn limbs(&self) -> usize {
        self.log_q.div_ceil(self.word_bits) as usize
    }

    /// Bytes of one polynomial (a plaintext).
    pub fn poly_bytes(&self) -> u64 {
        (self.n * self.limbs()) as u64 * u64::from(self.word_bits) / 8
    }

    /// Bytes of a ciphertext (two polynomials).
    pub fn ct_bytes(&self) -> u64 {
        2 * self.poly_bytes()
    }

    /// Bytes of one key-switching hint (a pair of polynomials per limb of the decomposition).
    pub fn ksh_bytes(&self) -> u64 {
        2 * self.poly_bytes() * self.limbs() as u64
    }
}

/// The packings and dataflows of 000.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Packing {
    /// LoLa-Pack (Brutzkus et al. 2019; 000 Sec. 4.2).
    Lola,
    /// Ch-Pack, Gazelle's channel packing (Juvekar et al. 2018; 000 Sec. 4.3).
    Channel,
    /// GALA (Zhang et al. 2021; 000 Sec. 7.2): Ch-Pack with psum rotations delayed over channels.
    Gala,
    /// C2PC-Pack, Cheetah's coefficient encoding (Huang et al. 2022; 000 Sec. 4.4).
    C2pc,
    /// A+W-Pack (000 Sec. 5.1).
    AplusW,
    /// Hyena-Pack and dataflow (000 Secs. 5.2-5.3).
    Hyena,
    /// BatchWise-Pack: one value of `batch` images per ciphertext (CryptoNets/nGraph-HE; 000 Sec. 7.3).
    BatchWise,
    /// BatchWise-Pack+: BatchWise with output channels in the spare slots (000 Sec. 7.3).
    BatchWisePlus,
    /// Hyena-Pack+: Hyena packing images of the batch before input channels (000 Sec. 7.3).
    HyenaPlus,
}

impl Packing {
    /// All packings, in the paper's order.
    pub const ALL: [Packing; 9] = [
        Packing::Lola,
        Packing::Channel,
        Packing::Gala,
        Packing::C2pc,
        Packing::AplusW,
        Packing::Hyena,
        Packing::BatchWise,
        Packing::BatchWisePlus,
        Packing::HyenaPlus,
    ];

    /// The name used in requests and reports.
    pub fn name(self) -> &'static str {
        match self {
            Packing::Lola => "lola",
            Packing::Channel => "channel",
            Packing::Gala => "gala",
            Packing::C2pc => "c2pc",
            Packing::AplusW => "a+w",
            Packing::Hyena => "hyena",
            Packing::BatchWise => "batchwise",
            Packing::BatchWisePlus => "batchwise+",
            Packing::HyenaPlus => "hyena+",
        }
    }

    /// Parses a name (case-insensitive; the paper's and HEPack-Sim's aliases accepted).
    pub fn parse(name: &str) -> Result<Packing, PlanError> {
        let key: String = name.trim().to_lowercase().chars().filter(|c| !matches!(c, '-' | '_' | ' ')).collect();
        Ok(match key.as_str() {
            "lola" | "lolapack" | "cheetah" => Packing::Lola,
            "channel" | "ch" | "chpack" | "gazelle" => Packing::Channel,
            "gala" => Packing::Gala,
            "c2pc" | "cheetah2pc" | "lion" | "coefficient" => Packing::C2pc,
            "a+w" | "aw" | "apw" | "a+wpack" | "epic" => Packing::AplusW,
            "hyena" | "hyenapack" => Packing::Hyena,
            "batchwise" | "ngraph" => Packing::BatchWise,
            "batchwise+" | "batchwiseplus" | "ngraphplus" => Packing::BatchWisePlus,
            "hyena+" | "hyenaplus" => Packing::HyenaPlus,
            _ => {
                return Err(PlanError::UnknownPacking { name: name.into(), known: Packing::ALL.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ") });
            }
        })
    }

    /// Whether the packing processes a batch in one pass (the others run images one after another,
    /// 000 Sec. 7.3).
    pub fn packs_batch(self) -> bool {
        matches!(self, Packing::BatchWise | Packing::BatchWisePlus | Packing::HyenaPlus)
    }
}

/// What the loop nests see of a layer (000 Table 2 notation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoopShape {
    /// Input width X and height Y.
    pub x: usize,
    pub y: usize,
    /// Input channels C and kernels K (K = 1 for a depthwise layer, as HEPack-Sim lists it).
    pub c: usize,
    pub k: usize,
    /// Kernel side R = S.
    pub r: usize,
    pub stride: usize,
    /// Output neurons per channel P.
    pub p: usize,
}

impl LoopShape {
    /// The shape of `spec` (validated).
    pub fn of(spec: &LayerSpec) -> Result<Self, PlanError> {
        spec.validate()?;
        let p = spec.out_h() * spec.out_w();
        Ok(match spec.kind {
            LayerKind::Depthwise => Self { x: spec.w, y: spec.h, c: spec.c_in, k: 1, r: spec.k, stride: spec.stride, p },
            _ => Self { x: spec.w, y: spec.h, c: spec.c_in, k: spec.c_out, r: spec.k, stride: spec.stride, p },
        })
    }

    fn rs(&self) -> usize {
        self.r * self.r
    }
}

/// Packing factors of one layer; a factor a packing does not use is 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PackingFactors {
    /// Input channels per polynomial (C_t).
    pub c_t: u64,
    /// Kernels (output channels) per polynomial (K_t).
    pub k_t: u64,
    /// Input pixels per polynomial (X_t Y_t; LoLa and A+W).
    pub xy_t: u64,
    /// Output neurons per polynomial (P_t; Channel and GALA).
    pub p_t: u64,
    /// Non-overlapping RS windows in all (M) and per polynomial (M_t; Hyena).
    pub m: u64,
    pub m_t: u64,
    /// IF slides (N_on; Hyena Step P).
    pub n_on: u64,
    /// Copies of the IF windows in one polynomial (Hyena, when M_t C_t RS < slots).
    pub if_copies: u64,
    /// Images per polynomial (B_t; BatchWise, Hyena+).
    pub b_t: u64,
    /// Spatial blocks (C2PC).
    pub spatial_blocks: u64,
    /// Fraction of the IF and W slots that hold useful values.
    pub if_utilisation: f64,
    pub w_utilisation: f64,
}

/// Events of the three pipelines of 000 Fig. 5 (bottom) that the accelerator model times.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PipelineEvents {
    /// Passes of the product pipeline (a product, with whatever rotation the packing chains to it).
    pub mult: u64,
    /// Passes of the psum rotation pipeline (rotate, key switch, accumulate).
    pub psum: u64,
    /// Passes of the IF rotation sequence (convert, permute, convert back, key switch).
    pub if_seq: u64,
}

/// Bytes per data structure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Traffic {
    pub input: u64,
    pub weights: u64,
    pub psum: u64,
    pub keys: u64,
}

impl Traffic {
    pub fn total(&self) -> u64 {
        self.input + self.weights + self.psum + self.keys
    }

    fn scaled(self, f: u64) -> Self {
        Self { input: self.input * f, weights: self.weights * f, psum: self.psum * f, keys: self.keys * f }
    }
}

impl std::ops::Add for Traffic {
    type Output = Traffic;
    fn add(self, o: Traffic) -> Traffic {
        Traffic { input: self.input + o.input, weights: self.weights + o.weights, psum: self.psum + o.psum, keys: self.keys + o.keys }
    }
}

/// Operation counts and data movement of one layer under one packing (for the whole batch).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerCounts {
    pub packing: Packing,
    pub factors: PackingFactors,
    /// Ciphertext-plaintext products (Table 2 MUL).
    pub mults: u64,
    /// Ciphertext rotations, each with a key switch: cyclic shifts (automorphisms) plus
    /// permutations (Table 2 ROT without the plaintext rotations).
    pub rotations: u64,
    pub shifts: u64,
    pub permutations: u64,
    /// Rotations of plaintext weights (no key switch; A+W and Hyena, Table 2 ROT's W part).
    pub plaintext_rotations: u64,
    /// Round trips between the evaluation and coefficient domains (an INTT and an NTT of a
    /// ciphertext) that permutations need (Table 2 NTT).
    pub ntts: u64,
    /// Key-switch-hint uses (one per ciphertext rotation, 000 Sec. 2.4).
    pub keyswitches: u64,
    /// Distinct key-switching hints the layer uses.
    pub distinct_keys: u64,
    pub events: PipelineEvents,
    /// Bytes moved between HBM and the chip, per data structure.
    pub offchip: Traffic,
    /// Bytes read from the L2 buffers, per data structure.
    pub l2_reads: Traffic,
}

/// On-chip capacities the dataflows tile for (from the architecture, 000 Table 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capacities {
    /// IF ciphertexts the IF L2 holds.
    pub if_cts: u64,
    /// W plaintexts the W L2 holds.
    pub w_polys: u64,
    /// Key-switching hints the KSH L2 holds.
    pub keys: u64,
    /// Psum ciphertext registers (K_t <= this, 000 Sec. 6.3).
    pub psum_registers: u64,
}

/// Knobs of the counting rules that the paper states but its results do not apply.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CountingOptions {
    /// Fraction of LoLa's weight polynomials that are non-zero. 000 Sec. 7.1 says LoLa "is
    /// evaluated with 50% sparsity", but the released HEPack-Sim and the paper's Fig. 7 ratios
    /// (Ch-Pack 1.9x faster than LoLa) use dense weights: 1.0 reproduces the paper.
    pub lola_weight_density: f64,
}

impl Default for CountingOptions {
    fn default() -> Self {
        Self { lola_weight_density: 1.0 }
    }
}

/// Largest power of two at most `cap` (and at least 1) for which `ok` holds, growing from 1.
fn largest_pow2(cap: usize, ok: impl Fn(usize) -> bool) -> usize {
    let mut v = 1usize;
    while v * 2 <= cap.max(1) && ok(v * 2) {
        v *= 2;
    }
    v
}

fn div_ceil(a: usize, b: usize) -> u64 {
    a.div_ceil(b.max(1)) as u64
}

/// Bytes moved by a structure of `footprint` items (each `bytes`), read `passes` times, of which
/// `capacity` items stay on chip between passes: the resident part comes once, the rest every pass.
fn streamed(footprint: u64, passes: u64, capacity: u64, bytes: u64) -> u64 {
    let resident = footprint.min(capacity);
    (resident + passes.max(1) * (footprint - resident)) * bytes
}

/// Key bytes for `rotations` rotations with `distinct` keys when the KSH buffer holds `capacity`:
/// each key once, and the rotations whose key is not resident fetch it again.
fn key_traffic(rotations: u64, distinct: u64, capacity: u64, bytes: u64) -> u64 {
    if distinct == 0 {
        return 0;
    }
    let resident = distinct.min(capacity);
    let refetched = rotations.saturating_sub(resident) * (distinct - resident) / distinct;
    (resident + refetched) * bytes
}

/// Counts one layer (all `batch` images) under `packing`.
///
/// Errors: an invalid layer, parameters or batch, or a layer the packing cannot hold (an R x S
/// window larger than a polynomial).
pub fn count_layer(
    spec: &LayerSpec,
    packing: Packing,
    he: &HeParams,
    caps: &Capacities,
    batch: usize,
    opts: &CountingOptions,
) -> Result<LayerCounts, PlanError> {
    he.validate()?;
    if batch == 0 {
        return Err(PlanError::InvalidBatch { batch, reason: "at least one image".into() });
    }
    let s = LoopShape::of(spec)?;
    let slots = he.slots();
    if s.rs() > slots {
        return Err(PlanError::Unpackable {
            packing: packing.name().into(),
            layer: spec.name.clone(),
            reason: format!("a {}x{} window ({} values) exceeds the {slots} slots of a polynomial", s.r, s.r, s.rs()),
        });
    }
    let unpackable = |reason: String| PlanError::Unpackable { packing: packing.name().into(), layer: spec.name.clone(), reason };
    let mut c = match packing {
        Packing::Lola => lola(&s, he, caps, opts),
        Packing::Channel => channel(&s, he, caps, false),
        Packing::Gala => channel(&s, he, caps, true),
        Packing::C2pc => c2pc(&s, he, caps)
            .ok_or_else(|| unpackable(format!("no block of the {}x{} input holds a {}x{} kernel in {} coefficients", s.y, s.x, s.r, s.r, slots)))?,
        Packing::AplusW => a_plus_w(&s, he, caps),
        Packing::Hyena => hyena(&s, he, caps, 1),
        Packing::HyenaPlus => hyena(&s, he, caps, batch),
        Packing::BatchWise => batchwise(&s, he, caps, batch, false),
        Packing::BatchWisePlus => batchwise(&s, he, caps, batch, true),
    };
    // Layers that run several times per inference, and images run one after another.
    let repeat = spec.count as u64 * if packing.packs_batch() { 1 } else { batch as u64 };
    if repeat > 1 {
        for v in [&mut c.mults, &mut c.rotations, &mut c.shifts, &mut c.permutations, &mut c.plaintext_rotations, &mut c.ntts, &mut c.keyswitches] {
            *v *= repeat;
        }
        c.events = PipelineEvents { mult: c.events.mult * repeat, psum: c.events.psum * repeat, if_seq: c.events.if_seq * repeat };
        // Keys stay in the KSH buffer across repeats; everything else moves again.
        let keys = c.offchip.keys;
        c.offchip = Traffic { keys, ..c.offchip.scaled(repeat) };
        c.l2_reads = c.l2_reads.scaled(repeat);
    }
    c.packing = packing;
    Ok(c)
}

fn base(packing: Packing) -> LayerCounts {
    LayerCounts {
        packing,
        factors: PackingFactors::default(),
        mults: 0,
        rotations: 0,
        shifts: 0,
        permutations: 0,
        plaintext_rotations: 0,
        ntts: 0,
        keyswitches: 0,
        distinct_keys: 0,
        events: PipelineEvents::default(),
        offchip: Traffic::default(),
        l2_reads: Traffic::default(),
    }
}

/// LoLa-Pack (000 Sec. 4.2, Fig. 5 Algorithm 1, Table 2 row LoLa).
///
/// IF: X_t Y_t input pixels of C_t channels (X_t Y_t = XY when it fits a polynomial with room for
/// C_t >= 1 channels, else one polynomial of pixels). W: one weight value replicated. For every IF
/// tile, kernel k, channel group and kernel offset (RS C_t of them) one product is made and its
/// unstructured psum is permuted into place: Table 2 MUL = ROT = NTT = (XY / X_tY_t) RSCK, all
/// rotations permutations (Fig. 3). W comes from memory for every product (its reuse distance
/// RSC_tK is too large to cache, Sec. 4.2); the IF tile is reused across kernels from L2; one psum
/// per (tile, kernel, channel group) leaves the chip.
fn lola(s: &LoopShape, he: &HeParams, caps: &Capacities, opts: &CountingOptions) -> LayerCounts {
    let slots = he.slots();
    let xy = s.x * s.y;
    let (xy_t, c_t) = if xy < slots { (xy, largest_pow2(s.c, |c| xy * c <= slots)) } else { (slots, 1) };
    let tiles = div_ceil(xy, xy_t);
    let cg = div_ceil(s.c, c_t);
    let dense = (tiles * s.k as u64 * cg * (s.rs() * c_t) as u64) as f64;
    let products = (dense * opts.lola_weight_density.clamp(0.0, 1.0)).ceil() as u64;
    let mut c = base(Packing::Lola);
    c.factors = PackingFactors {
        c_t: c_t as u64,
        xy_t: xy_t as u64,
        if_utilisation: (xy_t * c_t) as f64 / slots as f64,
        w_utilisation: (xy_t) as f64 / slots as f64,
        ..Default::default()
    };
    c.mults = products;
    c.permutations = products;
    c.rotations = products;
    c.ntts = products;
    c.keyswitches = products;
    // Each permutation of an unstructured psum is a different slot mapping: as many keys as the
    // KSH buffer holds.
    c.distinct_keys = products.min(caps.keys);
    c.events.mult = products;
    let if_cts = tiles * cg;
    c.offchip = Traffic {
        input: streamed(cg, s.k as u64, caps.if_cts, he.ct_bytes()) * tiles,
        weights: products * he.poly_bytes(),
        psum: tiles * s.k as u64 * cg * he.ct_bytes(),
        keys: key_traffic(products, c.distinct_keys, caps.keys, he.ksh_bytes()),
    };
    c.l2_reads = Traffic { input: if_cts * s.k as u64 * he.ct_bytes(), weights: 0, psum: 0, keys: products * he.ksh_bytes() };
    c
}

/// Ch-Pack (Gazelle; 000 Sec. 4.3, Fig. 5 Algorithm 2, Table 2 row Ch) and GALA (Sec. 7.2).
///
/// IF: C_t channels of P_t output neurons' SISO faces; W: for each of the C_t x C_t (input,
/// output) channel pairs of a block and each kernel offset, one weight per slot, so RS C_t^2 P_t
/// <= slots (K_t = C_t). Per output block and channel group the IF is rotated RS times (one
/// rotation per kernel offset: coefficient-domain permutations with NTTs on the accelerator,
/// Table 2 NTT = (P/P_t)(C/C_t) RS); per kernel group and diagonal one product per offset
/// (MUL = (P/P_t) RSCK / K_t); each of the C_t diagonal psums is shift-rotated into its output
/// (ROT's CK/K_t part). GALA delays those psum rotations until all channel groups are added,
/// which divides them by C/C_t (Sec. 7.2) but keeps all RS C/C_t rotated IFs live: the products
/// read them from L2 while they fit and from memory beyond.
fn channel(s: &LoopShape, he: &HeParams, caps: &Capacities, gala: bool) -> LayerCounts {
    let slots = he.slots();
    let rs = s.rs();
    let c_t = largest_pow2(s.c.min(s.k), |c| rs * c * c <= slots);
    let p_t = (slots / (rs * c_t * c_t)).max(1);
    let outer = div_ceil(s.p, p_t);
    let cg = div_ceil(s.c, c_t);
    let kg = div_ceil(s.k, c_t);
    let if_rot = outer * cg * rs as u64;
    let (products, psum_rot) = if gala {
        // For each kernel group and diagonal: RS C/C_t products, one rotation at the end.
        (outer * kg * c_t as u64 * div_ceil(rs * s.c, c_t), outer * kg * c_t as u64)
    } else {
        (outer * cg * kg * (c_t * rs) as u64, outer * cg * kg * c_t as u64)
    };
    let mut c = base(if gala { Packing::Gala } else { Packing::Channel });
    c.factors = PackingFactors {
        c_t: c_t as u64,
        k_t: c_t as u64,
        p_t: p_t as u64,
        if_utilisation: (p_t * c_t * rs).min(slots) as f64 / slots as f64,
        w_utilisation: (p_t * c_t) as f64 / slots as f64,
        ..Default::default()
    };
    c.mults = products;
    c.permutations = if_rot;
    c.shifts = psum_rot;
    c.rotations = if_rot + psum_rot;
    c.ntts = if_rot;
    c.keyswitches = c.rotations;
    // Keys: one per kernel offset (IF) and one per diagonal shift (psum).
    c.distinct_keys = (rs + c_t) as u64;
    c.events = PipelineEvents { mult: products, psum: psum_rot, if_seq: if_rot };
    let rotated_ifs = if gala { cg * rs as u64 } else { rs as u64 };
    let if_from_memory = if gala {
        // Every product reads one of the RS C/C_t rotated IFs; those beyond the IF buffer come
        // from memory each time.
        let beyond = rotated_ifs.saturating_sub(caps.if_cts);
        outer * kg * c_t as u64 * beyond * he.ct_bytes()
    } else {
        0
    };
    c.offchip = Traffic {
        input: outer * cg * he.ct_bytes() + if_from_memory,
        weights: products * he.poly_bytes(),
        psum: (if gala { outer * kg * c_t as u64 } else { outer * cg * kg }) * he.ct_bytes(),
        keys: key_traffic(c.rotations, c.distinct_keys, caps.keys, he.ksh_bytes()),
    };
    c.l2_reads = Traffic { input: (if_rot + products) * he.ct_bytes(), weights: 0, psum: 0, keys: c.rotations * he.ksh_bytes() };
    c
}

/// C2PC-Pack (Cheetah; 000 Sec. 4.4, Fig. 5 Algorithm 3, Table 2 row C2PC).
///
/// Coefficient encoding: an IF polynomial holds a C_w x H_w x W_w block of the input, a W
/// polynomial the C_w R S weights of one kernel; the product holds the block's outputs without
/// rotations. The combined utilisation is bounded near 50% (Sec. 4.4: M_tC_tRS + RSC_tK_t <= N/2 +
/// RSC_t), so blocks are cut for N/2 coefficients. (H_w, W_w) minimises the number of products
/// (ceil(C / C_w) times the spatial blocks); C_w = min(C, N/2 / (H_w W_w)). One product per
/// (spatial block, kernel, channel group): MUL = (P/P_t)(CK/C_t), no rotation, no NTT. Almost
/// every product needs a new W (Sec. 7.2), so W streams from memory.
fn c2pc(s: &LoopShape, he: &HeParams, caps: &Capacities) -> Option<LayerCounts> {
    let n_half = he.slots();
    let (h, w, r) = (s.y, s.x, s.r);
    let out_h = h.checked_sub(r)? + 1;
    let out_w = w.checked_sub(r)? + 1;
    let mut best: Option<(u64, usize, usize)> = None;
    for hw in r..=h {
        for ww in r..=w {
            if hw * ww > n_half {
                break;
            }
            let c_w = s.c.min(n_half / (hw * ww));
            let cost = div_ceil(s.c, c_w) * div_ceil(out_h, hw - r + 1) * div_ceil(out_w, ww - r + 1);
            if best.is_none_or(|(b, _, _)| cost < b) {
                best = Some((cost, hw, ww));
            }
        }
    }
    let (_, hw, ww) = best?;
    let c_w = s.c.min(n_half / (hw * ww)).max(1);
    let spatial = div_ceil(out_h, hw - r + 1) * div_ceil(out_w, ww - r + 1);
    let cg = div_ceil(s.c, c_w);
    let products = spatial * s.k as u64 * cg;
    let mut c = base(Packing::C2pc);
    c.factors = PackingFactors {
        c_t: c_w as u64,
        k_t: 1,
        spatial_blocks: spatial,
        if_utilisation: (c_w * hw * ww) as f64 / he.n as f64,
        w_utilisation: (c_w * r * r) as f64 / he.n as f64,
        ..Default::default()
    };
    c.mults = products;
    c.events.mult = products;
    c.offchip = Traffic {
        input: streamed(cg, s.k as u64, caps.if_cts, he.ct_bytes()) * spatial,
        weights: products * he.poly_bytes(),
        psum: spatial * s.k as u64 * he.ct_bytes(),
        keys: 0,
    };
    c.l2_reads = Traffic { input: products * he.ct_bytes(), ..Default::default() };
    Some(c)
}

/// A+W-Pack (000 Sec. 5.1, Fig. 5 Algorithm 4, Table 2 row A+W).
///
/// IF as LoLa; W packs the RS faces of the same C_t channels for K_t kernels (RS C_t K_t <=
/// slots). Every product is preceded by a W rotation (plaintext permutation) and followed by a
/// psum permutation with NTTs: MUL = NTT = (XY/X_tY_t) RSCK / C_t, ROT = twice that (Table 2).
/// The IF (C/C_t polynomials) and W (CK/(C_tK_t)) of a tile are reused from L2 when they fit.
fn a_plus_w(s: &LoopShape, he: &HeParams, caps: &Capacities) -> LayerCounts {
    let slots = he.slots();
    let xy = s.x * s.y;
    let rs = s.rs();
    let (xy_t, c_t) = if xy < slots { (xy, largest_pow2(s.c, |c| xy * c <= slots)) } else { (slots, 1) };
    let k_t = largest_pow2(s.k, |k| k * c_t * rs <= slots);
    let tiles = div_ceil(xy, xy_t);
    let cg = div_ceil(s.c, c_t);
    let kg = div_ceil(s.k, k_t);
    let products = tiles * kg * cg * (rs * k_t) as u64;
    let mut c = base(Packing::AplusW);
    c.factors = PackingFactors {
        c_t: c_t as u64,
        k_t: k_t as u64,
        xy_t: xy_t as u64,
        if_utilisation: (xy_t * c_t) as f64 / slots as f64,
        w_utilisation: (rs * c_t * k_t) as f64 / slots as f64,
        ..Default::default()
    };
    c.mults = products;
    c.plaintext_rotations = products;
    c.permutations = products;
    c.rotations = products;
    c.ntts = products;
    c.keyswitches = products;
    c.distinct_keys = products.min(caps.keys);
    c.events.mult = products;
    c.offchip = Traffic {
        input: tiles * streamed(cg, kg, caps.if_cts, he.ct_bytes()),
        weights: tiles * streamed(cg * kg, 1, caps.w_polys, he.poly_bytes()),
        psum: tiles * kg * he.ct_bytes(),
        keys: key_traffic(products, c.distinct_keys, caps.keys, he.ksh_bytes()),
    };
    c.l2_reads = Traffic { input: tiles * kg * cg * he.ct_bytes(), weights: tiles * kg * cg * he.poly_bytes(), psum: 0, keys: products * he.ksh_bytes() };
    c
}

/// Hyena-Pack and dataflow (000 Secs. 5.2-5.3, Fig. 4, Fig. 5 Algorithm 5, Table 2 row Hyena);
/// with `batch` > 1 Hyena-Pack+ (Sec. 7.3), which packs B_t images before input channels.
///
/// - M = ceil(X/R) ceil(Y/S) non-overlapping R x S windows (at most P), M_t = min(slots/RS, M)
///   per IF polynomial (Sec. 5.2 footnote 1); B_t images share it (Hyena+).
/// - K_t <= 64 kernels per W (one psum register each, Sec. 6.3) with RS K_t <= slots; C_t
///   channels with M_t C_t RS B_t <= slots and K_t C_t RS B_t <= slots (IF packs M_tC_tRS and W
///   K_tC_tRS values, Sec. 5.2 step 5). Slots still free hold copies of the windows, aligned with
///   further kernels, so one product serves `if_copies` kernels.
/// - Step P slides the IF (N_on = (R-1)(S-1)/stride^2 + 1 positions, at most P, Sec. 5.3) with
///   one permutation per channel group (NTT, key switch), off the critical path (Sec. 6.4).
/// - Per window group and slide: for each kernel group and channel group, K_t products with W
///   shifted between them (Step B, plaintext rotations); psums of all channel groups add up
///   aligned (Step C); then RS C_t 1-stride shift-rotations aggregate each psum (Step D).
///   So MUL = (M N_on / M_t) CK / C_t and ROT = (M N_on / M_t)(CK/C_t + RSC_tK/K_t + C/C_t).
/// - IF and W of a window group (C/C_t and CK/(C_tK_t) polynomials) are fetched once and reused
///   from L2 while they fit (Sec. 6.3); one psum per kernel group and slide leaves the chip.
fn hyena(s: &LoopShape, he: &HeParams, caps: &Capacities, batch: usize) -> LayerCounts {
    let slots = he.slots();
    let rs = s.rs();
    let m = (s.x.div_ceil(s.r) * s.y.div_ceil(s.r)).min(s.p).max(1);
    let m_t = (slots / rs).min(m).max(1);
    // Hyena+ packs images first (Sec. 7.3: "prioritize packing across batches over input channels").
    let b_t = if batch > 1 { (1..=batch).rev().find(|&b| rs * m_t * b <= slots).unwrap_or(1) } else { 1 };
    let k_t = largest_pow2(s.k.min(caps.psum_registers as usize), |k| rs * k * b_t <= slots);
    let c_t = largest_pow2(s.c, |c| m_t * rs * c * b_t <= slots && rs * c * k_t * b_t <= slots);
    let if_copies = (slots / (m_t * c_t * rs * b_t)).max(1);
    let n_on = ((s.r - 1) * (s.r - 1) / (s.stride * s.stride) + 1).min(s.p) as u64;
    let groups = div_ceil(m, m_t);
    let passes = div_ceil(batch, b_t);
    let cg = div_ceil(s.c, c_t);
    let kg = div_ceil(s.k, k_t);
    let products_per_block = div_ceil(k_t, if_copies);
    let mults = passes * groups * n_on * kg * cg * products_per_block;
    let psum_rot = passes * groups * n_on * kg * (rs * c_t) as u64;
    let if_perm = passes * groups * (n_on - 1) * cg;
    let mut c = base(if batch > 1 { Packing::HyenaPlus } else { Packing::Hyena });
    c.factors = PackingFactors {
        c_t: c_t as u64,
        k_t: k_t as u64,
        m: m as u64,
        m_t: m_t as u64,
        n_on,
        if_copies: if_copies as u64,
        b_t: b_t as u64,
        if_utilisation: (m_t * c_t * rs * b_t * if_copies) as f64 / slots as f64,
        w_utilisation: (k_t * c_t * rs) as f64 / slots as f64,
        ..Default::default()
    };
    c.mults = mults;
    c.plaintext_rotations = mults;
    c.shifts = psum_rot;
    c.permutations = if_perm;
    c.rotations = psum_rot + if_perm;
    c.ntts = if_perm;
    c.keyswitches = c.rotations;
    // One key for the 1-stride shift, one per slide of the IF.
    c.distinct_keys = 1 + (n_on - 1);
    c.events = PipelineEvents { mult: mults, psum: psum_rot, if_seq: if_perm };
    let w_footprint = cg * kg;
    c.offchip = Traffic {
        input: passes * groups * streamed(cg, n_on * kg, caps.if_cts, he.ct_bytes()),
        weights: passes * groups * streamed(w_footprint, n_on, caps.w_polys, he.poly_bytes()),
        psum: passes * groups * n_on * kg * he.ct_bytes(),
        keys: key_traffic(c.rotations, c.distinct_keys, caps.keys, he.ksh_bytes()),
    };
    c.l2_reads = Traffic {
        input: (passes * groups * n_on * kg * cg + if_perm) * he.ct_bytes(),
        weights: passes * groups * n_on * kg * cg * he.poly_bytes(),
        psum: 0,
        keys: c.rotations * he.ksh_bytes(),
    };
    c
}

/// BatchWise-Pack (CryptoNets / nGraph-HE; 000 Sec. 7.3) and BatchWise-Pack+.
///
/// One IF value of up to `slots` images per ciphertext and one weight replicated per plaintext:
/// one product per multiply-accumulate of one image (P K C RS), no rotation. Images beyond the
/// slots run in further passes. BatchWise+ fills the slots the batch leaves free with
/// K_t = min(slots / B, K) output channels, so the products drop to P ceil(K/K_t) C RS. IF values
/// are tiled RS C at a time (the IF buffer), psums of up to `if_cts / 2` kernels stay on chip;
/// weights stream from memory.
fn batchwise(s: &LoopShape, he: &HeParams, caps: &Capacities, batch: usize, plus: bool) -> LayerCounts {
    let slots = he.slots();
    let rs = s.rs();
    let b_t = batch.min(slots);
    let passes = div_ceil(batch, b_t);
    let k_t = if plus { (slots / b_t).min(s.k).max(1) } else { 1 };
    let kg = div_ceil(s.k, k_t);
    let products = passes * s.p as u64 * kg * (s.c * rs) as u64;
    let mut c = base(if plus { Packing::BatchWisePlus } else { Packing::BatchWise });
    c.factors = PackingFactors {
        k_t: k_t as u64,
        b_t: b_t as u64,
        if_utilisation: b_t as f64 / slots as f64,
        w_utilisation: (b_t * k_t) as f64 / slots as f64,
        ..Default::default()
    };
    c.mults = products;
    c.events.mult = products;
    let if_tile = (caps.if_cts as usize / rs).clamp(1, s.c) as u64;
    let psum_tile = (caps.if_cts / 2).clamp(1, kg);
    let input_cts = passes * s.p as u64 * div_ceil(kg as usize, psum_tile as usize) * (s.c * rs) as u64;
    let _ = if_tile;
    c.offchip = Traffic { input: input_cts * he.ct_bytes(), weights: products * he.poly_bytes(), psum: passes * s.p as u64 * kg * 2 * he.ct_bytes(), keys: 0 };
    c.l2_reads = Traffic { input: products * he.ct_bytes(), psum: 2 * passes * s.p as u64 * kg * he.ct_bytes(), ..Default::default() };
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps() -> Capacities {
        Capacities { if_cts: 256, w_polys: 1024, keys: 1024, psum_registers: 64 }
    }

    fn count(spec: &LayerSpec, p: Packing) -> LayerCounts {
        count_layer(spec, p, &HeParams::paper(), &caps(), 1, &CountingOptions::default()).unwrap()
    }

    #[test]
    fn lola_counts_one_permuted_product_per_weight() {
        // 8x8x4 input, 2 kernels of 3x3, no padding; 512 slots.
        // XY = 64 < 512: X_tY_t = 64, C_t = largest power of two <= 4 with 64 C_t <= 512 = 4.
        // Tiles = 1, channel groups = 1; products = 1 tile x K=2 x 1 group x RS C_t = 9*4 = 72.
        // Table 2: (XY/X_tY_t) RSCK = 1 * 9*4*2 = 72 = MUL = ROT = NTT.
        let c = count(&LayerSpec::conv("l", 8, 4, 2, 3, 1, 0), Packing::Lola);
        assert_eq!((c.factors.xy_t, c.factors.c_t), (64, 4));
        assert_eq!((c.mults, c.rotations, c.permutations, c.ntts, c.shifts), (72, 72, 72, 72, 0));
        // W: one 4 KB polynomial (1024 x 32 bits) per product; psum: 1 x 2 x 1 ciphertexts of 8 KB.
        assert_eq!(c.offchip.weights, 72 * 4096);
        assert_eq!(c.offchip.psum, 2 * 8192);
        assert_eq!(c.events.mult, 72);
    }

    #[test]
    fn channel_rotates_inputs_per_offset_and_psums_per_diagonal() {
        // 8x8x4 -> 4 kernels 3x3 no padding: P = 36. C_t: largest power of two <= min(4,4) with
        // 9 C_t^2 <= 512: C_t = 4 (144). P_t = 512 / 144 = 3. Outer = ceil(36/3) = 12.
        // IF rotations = 12 x 1 channel group x RS 9 = 108 (permutations, one NTT round trip each).
        // Products = 12 x 1 x 1 kernel group x (C_t RS = 36) = 432 = (P/P_t) RSCK/K_t = 12*9*4*4/4.
        // Psum shifts = 12 x 1 x 1 x C_t 4 = 48 = (P/P_t) CK/K_t = 12*16/4.
        let c = count(&LayerSpec::conv("l", 8, 4, 4, 3, 1, 0), Packing::Channel);
        assert_eq!((c.factors.c_t, c.factors.p_t), (4, 3));
        assert_eq!((c.permutations, c.mults, c.shifts, c.ntts), (108, 432, 48, 108));
        assert_eq!(c.rotations, 156);
        assert_eq!(c.keyswitches, 156);
        // W streams: one plaintext per product; IF: one ciphertext per (outer, channel group).
        assert_eq!(c.offchip.weights, 432 * 4096);
        assert_eq!(c.offchip.input, 12 * 8192);
        // GALA: same products, psum rotations divided by C/C_t = 1 here; 8 channels halve them:
        // 8x8x8 -> 4, C_t = 4, cg = 2: Channel psum shifts 12*2*1*4 = 96, GALA 12*1*4 = 48.
        let l = LayerSpec::conv("l", 8, 8, 4, 3, 1, 0);
        assert_eq!(count(&l, Packing::Channel).shifts, 96);
        assert_eq!(count(&l, Packing::Gala).shifts, 48);
        assert_eq!(count(&l, Packing::Gala).mults, count(&l, Packing::Channel).mults);
    }

    #[test]
    fn c2pc_needs_no_rotation() {
        // 16x16x4 -> 8 kernels 3x3, N/2 = 512 coefficients. Blocks (H_w, W_w) minimise
        // ceil(4 / C_w) x spatial blocks: 16x16 (C_w = 2, 2 groups, 1 block) costs 2 like
        // 16x8... the first minimum found in row-major search is kept: H_w = 3..16, W_w = 3..16.
        // With H_w = 16, W_w = 16: C_w = min(4, 512/256) = 2, cost 2 x 1 = 2; no block reaches 1
        // (C_w = 4 needs H_wW_w <= 128, i.e. at least 2 spatial blocks). Products = 2 x 8 = 16.
        let c = count(&LayerSpec::conv("l", 16, 4, 8, 3, 1, 0), Packing::C2pc);
        assert_eq!(c.mults, 16);
        assert_eq!((c.rotations, c.ntts, c.keyswitches), (0, 0, 0));
        assert_eq!(c.offchip.weights, 16 * 4096);
    }

    #[test]
    fn a_plus_w_rotates_weights_and_permutes_psums() {
        // 8x8x4 -> 8 kernels 3x3: X_tY_t = 64, C_t = 4; K_t: largest power of two <= 8 with
        // 9 x 4 K_t <= 512: K_t = 8 (288). Products = 1 tile x 1 kernel group x 1 channel group x
        // RS K_t = 72 = (XY/X_tY_t) RSCK/C_t = 9*4*8/4. ROT = 2 x 72 (Table 2): 72 W rotations
        // (plaintext) + 72 psum permutations; NTT = 72.
        let c = count(&LayerSpec::conv("l", 8, 4, 8, 3, 1, 0), Packing::AplusW);
        assert_eq!((c.factors.c_t, c.factors.k_t), (4, 8));
        assert_eq!((c.mults, c.plaintext_rotations, c.permutations, c.ntts), (72, 72, 72, 72));
        assert_eq!(c.rotations + c.plaintext_rotations, 144);
    }

    #[test]
    fn hyena_follows_table_2() {
        // 12x12x8 -> 16 kernels 3x3, stride 1, no padding: P = 100.
        // M = ceil(12/3)^2 = 16 windows; M_t = min(512/9 = 56, 16) = 16.
        // K_t: largest power of two <= min(16, 64) with 9 K_t <= 512: 16.
        // C_t: largest power of two <= 8 with 16*9*C_t <= 512 (C_t <= 3.5) and 9*16*C_t <= 512:
        // C_t = 2. IF copies = 512 / (16*2*9 = 288) = 1.
        // N_on = (3-1)(3-1)/1 + 1 = 5. Groups = 1, channel groups 4, kernel groups 1.
        // MUL = 1 x 5 x 1 x 4 x K_t 16 = 320 = (M N_on / M_t) CK/C_t = 5 x 8*16/2.
        // Psum shifts = 1 x 5 x 1 x RS C_t 18 = 90 = (M N_on/M_t) RSC_tK/K_t = 5*18*1.
        // IF permutations (Step P, slides after the first) = 1 x 4 x 4 = 16; NTT = 16.
        let c = count(&LayerSpec::conv("l", 12, 8, 16, 3, 1, 0), Packing::Hyena);
        let f = c.factors;
        assert_eq!((f.m, f.m_t, f.k_t, f.c_t, f.if_copies, f.n_on), (16, 16, 16, 2, 1, 5));
        assert_eq!((c.mults, c.plaintext_rotations, c.shifts, c.permutations, c.ntts), (320, 320, 90, 16, 16));
        assert_eq!(c.rotations, 106);
        // Off chip: IF 4 ciphertexts, W 4 x 1 plaintexts, once (they fit); psums 5 x 1.
        assert_eq!(c.offchip.input, 4 * 8192);
        assert_eq!(c.offchip.weights, 4 * 4096);
        assert_eq!(c.offchip.psum, 5 * 8192);
        // Two keys: the 1-stride shift and... one per extra slide: 1 + 4 = 5 keys of 8 KB.
        assert_eq!(c.offchip.keys, 5 * 8192);
    }

    #[test]
    fn hyena_replicates_small_ifs_and_gnmt_matches_the_paper() {
        // A GNMT product: 4096 -> 2048 over 128 columns (a 128 x 1 image, 1x1 kernel).
        // M = 128, M_t = 128, K_t = 64, C_t: 128 C_t <= 512 -> 4; copies = 512/(128*4) = 1.
        // MUL = 1 group x 1 slide x 32 kernel groups x 1024 channel groups x 64 = 2^21.
        let c = count(&LayerSpec::matmul("g", 128, 4096, 2048), Packing::Hyena);
        assert_eq!((c.factors.c_t, c.factors.k_t, c.factors.if_copies), (4, 64, 1));
        assert_eq!(c.mults, 1 << 21);
        assert_eq!(c.shifts, 32 * 4);
        // A 4x4 image with a 1x1 kernel and 8 channels: M = 16, M_t = 16, K_t = 4 (K = 4),
        // C_t = 8 (16*8 = 128 <= 512), copies = 512 / 128 = 4: one product covers the K_t = 4
        // kernels: MUL = 1 x 1 x 1 x 1 x ceil(4/4) = 1.
        let c = count(&LayerSpec::conv("s", 4, 8, 4, 1, 1, 0), Packing::Hyena);
        assert_eq!((c.factors.if_copies, c.mults), (4, 1));
    }

    #[test]
    fn batchwise_and_plus_and_hyena_plus_use_the_batch() {
        let l = LayerSpec::conv("l", 8, 4, 8, 3, 1, 0);
        let he = HeParams::paper();
        let opts = CountingOptions::default();
        // BatchWise: P K C RS = 36*8*4*9 = 10368 products for any batch up to 512 slots.
        for b in [1, 64, 512] {
            assert_eq!(count_layer(&l, Packing::BatchWise, &he, &caps(), b, &opts).unwrap().mults, 10368);
        }
        assert_eq!(count_layer(&l, Packing::BatchWise, &he, &caps(), 513, &opts).unwrap().mults, 2 * 10368);
        // BatchWise+: batch 64 leaves 512/64 = 8 kernels per polynomial: 36*1*4*9 = 1296.
        assert_eq!(count_layer(&l, Packing::BatchWisePlus, &he, &caps(), 64, &opts).unwrap().mults, 1296);
        // Sequential packings scale with the batch; Hyena+ packs images when windows leave room.
        let h1 = count_layer(&l, Packing::Hyena, &he, &caps(), 1, &opts).unwrap();
        let h8 = count_layer(&l, Packing::Hyena, &he, &caps(), 8, &opts).unwrap();
        assert_eq!(h8.mults, 8 * h1.mults);
        let hp = count_layer(&l, Packing::HyenaPlus, &he, &caps(), 8, &opts).unwrap();
        // M = 9 (ceil(8/3)^2), M_t = 9, 9*9*B_t <= 512 -> B_t = 6; then K_t = 8 (9*8*6 <= 512),
        // C_t = 1 (81*6*C_t <= 512). Products: 2 passes x 5 slides x 4 channel groups x 8 = 320,
        // as for 8 sequential Hyena runs (C_t = 4, 8 x 5 x 1 x 8 = 320): images replace channels.
        // Psum shifts: Hyena+ 2 x 5 x RS C_t 9 = 90; Hyena 8 x 5 x 36 = 1440.
        assert_eq!(hp.factors.b_t, 6);
        assert_eq!((hp.mults, h8.mults), (320, 320));
        assert_eq!((hp.shifts, h8.shifts), (90, 1440));
    }

    #[test]
    fn bad_input_is_an_error() {
        let l = LayerSpec::conv("l", 8, 4, 8, 3, 1, 0);
        let he = HeParams::paper();
        let opts = CountingOptions::default();
        assert!(matches!(count_layer(&l, Packing::Hyena, &he, &caps(), 0, &opts), Err(PlanError::InvalidBatch { .. })));
        let bad = HeParams { n: 1000, ..he };
        assert!(matches!(count_layer(&l, Packing::Hyena, &bad, &caps(), 1, &opts), Err(PlanError::InvalidParams { .. })));
        let big = LayerSpec::conv("big", 40, 4, 8, 33, 1, 0);
        assert!(matches!(count_layer(&big, Packing::Hyena, &he, &caps(), 1, &opts), Err(PlanError::Unpackable { .. })));
        assert!(matches!(Packing::parse("nope"), Err(PlanError::UnknownPacking { .. })));
        assert_eq!(Packing::parse("A+W").unwrap(), Packing::AplusW);
        for p in Packing::ALL {
            assert_eq!(Packing::parse(p.name()).unwrap(), p);
        }
    }
}
