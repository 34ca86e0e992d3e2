//! Operation counts under the BFV parameters lycaon-nn runs with, for the algorithms it
//! implements (Gazelle packed convolution, Cheetah coefficient convolution and mat-vec, Hyena,
//! diagonal FC), so the simulator's counts can be checked against the real layers.
//!
//! The paper's counts (Table 2, [`super::packing`]) are for CKKS slots on an accelerator; the
//! BFV layers of lycaon-nn differ in what they count, and this module counts what they count:
//! - slots: n batch slots in two rows of n/2 (CKKS: n/2);
//! - a rotation is a Galois automorphism with a key switch; rotations of one ciphertext share one
//!   hoisted decomposition (input-aligned Gazelle, diagonal baby steps);
//! - Gazelle here is the input-aligned schedule over dense tiles (Reagen et al. 2021): its
//!   rotations are the distinct non-trivial (row swap, shift) pairs per input ciphertext, where
//!   Table 2 counts one per kernel offset and channel group;
//! - Hyena aggregates a psum with log2(B_w) rotate-and-add steps (000's binary-tree option,
//!   Sec. 5.3) and never permutes (the client sends all windows): Table 2 counts RS C_t
//!   sequential shifts and C/C_t IF permutations;
//! - NTTs are single-limb transforms of the backend: decompositions, key switches and the modulus
//!   switches to level 0 before sending (Table 2 counts domain round trips of a ciphertext).

use serde::{Deserialize, Serialize};

use super::models::{LayerKind, LayerSpec};
use crate::PlanError;

/// The shape of a BFV parameter set that counting needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BfvParams {
    pub n: usize,
    /// Ciphertext primes L (the top level is L - 1).
    pub q_primes: usize,
    /// Special primes of hybrid key switching.
    pub special_primes: usize,
    /// Key-switching digits the L primes are grouped into (L: one prime per digit).
    pub digits: usize,
}

/// What lycaon-nn's `OpCounts` holds, counted without running.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BfvCounts {
    pub rotations: u64,
    pub hoisted_decompositions: u64,
    pub key_switches: u64,
    pub plain_mults: u64,
    pub scalar_mults: u64,
    pub additions: u64,
    pub mod_switches: u64,
    pub ntts: u64,
}

impl BfvParams {
    fn validate(&self) -> Result<(), PlanError> {
        if !self.n.is_power_of_two() || self.n < 16 || self.q_primes == 0 || self.digits == 0 || self.digits > self.q_primes {
            return Err(PlanError::InvalidParams { reason: format!("BFV parameters {self:?}: n a power of two >= 16, 1 <= digits <= q_primes") });
        }
        Ok(())
    }

    fn top(&self) -> usize {
        self.q_primes - 1
    }

    /// NTTs of decomposing c_1 at the top level: the INTT, then each digit's ModUp.
    fn decomposition_ntts(&self) -> u64 {
        let limbs = self.q_primes;
        let size = limbs.div_ceil(self.digits);
        let mut sizes = Vec::new();
        let mut start = 0;
        while start < limbs {
            let end = (start + size).min(limbs);
            sizes.push(end - start);
            start = end;
        }
        (limbs + sizes.iter().map(|d| limbs + self.special_primes - d).sum::<usize>()) as u64
    }

    /// NTTs of one key switch from decomposed digits (two ModDowns).
    fn key_switch_ntts(&self) -> u64 {
        2 * (self.special_primes + self.q_primes) as u64
    }

    /// NTTs of switching one ciphertext from the top level to level 0.
    fn lowest_level_ntts(&self) -> u64 {
        (1..=self.top()).map(|l| 2 * l as u64).sum()
    }
}

/// lycaon-nn's algorithms that the cross-check covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BfvAlgorithm {
    /// Gazelle packed convolution, input-aligned, no plaintext decomposition (`PackedConv`).
    Channel,
    /// Cheetah coefficient convolution (`CoeffConv`) or, for a fully connected layer, mat-vec
    /// (`CoeffMatVec`).
    C2pc,
    /// Hyena packing (`HyenaConv`).
    Hyena,
    /// Halevi-Shoup diagonal FC with baby-step giant-step (`DiagonalFc`).
    DiagonalFc,
}

/// Counts `spec` under `algorithm` and `params` as lycaon-nn's plan states them.
pub fn bfv_counts(spec: &LayerSpec, algorithm: BfvAlgorithm, params: &BfvParams, batch: usize) -> Result<BfvCounts, PlanError> {
    spec.validate()?;
    params.validate()?;
    let unsupported = |reason: String| PlanError::Unpackable { packing: format!("{algorithm:?}"), layer: spec.name.clone(), reason };
    let groups = if spec.kind == LayerKind::Depthwise { spec.c_in } else { 1 };
    let fc = spec.h == 1 && spec.w == 1 && spec.k == 1 && groups == 1;
    match algorithm {
        BfvAlgorithm::Hyena => Ok(hyena(spec, params, groups, batch.max(1))),
        BfvAlgorithm::C2pc if fc => Ok(coeff_matvec(spec, params)),
        BfvAlgorithm::C2pc if groups != 1 => Err(unsupported("grouped and depthwise convolutions are not coefficient-encoded".into())),
        BfvAlgorithm::C2pc => coeff_conv(spec, params).ok_or_else(|| unsupported("the kernel does not fit n coefficients".into())),
        BfvAlgorithm::DiagonalFc if !fc => Err(unsupported("needs a fully connected shape".into())),
        BfvAlgorithm::DiagonalFc => Ok(diagonal(spec, params)),
        BfvAlgorithm::Channel => packed(spec, params, groups).map_err(unsupported),
    }
}

fn products_then_lowest(outs: u64, terms: u64, p: &BfvParams) -> BfvCounts {
    BfvCounts {
        plain_mults: outs * terms,
        additions: outs * (terms - 1),
        mod_switches: outs * p.top() as u64,
        ntts: outs * p.lowest_level_ntts(),
        ..Default::default()
    }
}

fn full(spec: &LayerSpec) -> (usize, usize) {
    (spec.h + 2 * spec.pad + 1 - spec.k, spec.w + 2 * spec.pad + 1 - spec.k)
}

/// Hyena on BFV (lycaon-nn `hyena.rs`): windows of C_t RS values in blocks of B_w =
/// next_pow2(C_t RS) slots; K_t = min(K, n / B_w); one psum per (IF group, kernel group, shift);
/// log2(B_w) rotations per psum.
fn hyena(spec: &LayerSpec, p: &BfvParams, groups: usize, batch: usize) -> BfvCounts {
    let (n, half, rs) = (p.n, p.n / 2, spec.k * spec.k);
    let per_in = spec.c_in / groups;
    let mut c_t = per_in.min(half / rs).max(1);
    while (c_t * rs).next_power_of_two() > half && c_t > 1 {
        c_t -= 1;
    }
    let block = (c_t * rs).next_power_of_two();
    let blocks = n / block;
    let k_t = spec.c_out.min(blocks);
    let windows = batch * spec.out_h() * spec.out_w();
    let if_groups = windows.div_ceil(blocks) as u64;
    let kernel_groups = spec.c_out.div_ceil(k_t) as u64;
    let psums = if_groups * kernel_groups * k_t as u64;
    let inputs = (groups * per_in.div_ceil(c_t)) as u64;
    let rotations = psums * u64::from(block.trailing_zeros());
    let plain_mults = psums * inputs;
    BfvCounts {
        rotations,
        hoisted_decompositions: rotations,
        key_switches: rotations,
        plain_mults,
        scalar_mults: 0,
        additions: plain_mults - psums + rotations,
        mod_switches: psums * p.top() as u64,
        ntts: rotations * (p.decomposition_ntts() + p.key_switch_ntts()) + psums * p.lowest_level_ntts(),
    }
}

/// Cheetah convolution (lycaon-nn `coeff.rs`): blocks minimising ciphertexts up plus down.
fn coeff_conv(spec: &LayerSpec, p: &BfvParams) -> Option<BfvCounts> {
    let (fh, fw) = full(spec);
    // (key: ciphertexts up + down, products, block size) -> (channel blocks, spatial blocks)
    type Choice = ((usize, usize, usize), (usize, usize));
    let mut best: Option<Choice> = None;
    for oh in 1..=fh {
        let bh = oh + spec.k - 1;
        for ow in 1..=fw {
            let bw = ow + spec.k - 1;
            if bh * bw > p.n {
                break;
            }
            let c = spec.c_in.min(p.n / (bh * bw));
            let spatial = fh.div_ceil(oh) * fw.div_ceil(ow);
            let cb = spec.c_in.div_ceil(c);
            let key = (cb * spatial + spec.c_out * spatial, spec.c_out * cb * spatial, bh * bw);
            if best.is_none_or(|(k, _)| key < k) {
                best = Some((key, (cb, spatial)));
            }
        }
    }
    let (_, (cb, spatial)) = best?;
    Some(products_then_lowest((spec.c_out * spatial) as u64, cb as u64, p))
}

/// Cheetah mat-vec (lycaon-nn `CoeffMatVec`): n_i columns and n_o rows per block, fewest
/// ciphertexts up plus down, then fewest products.
fn coeff_matvec(spec: &LayerSpec, p: &BfvParams) -> BfvCounts {
    let (k, m) = (spec.c_in, spec.c_out);
    let (cols, rows) = (1..=k.min(p.n))
        .map(|ni| (ni, m.min(p.n / ni)))
        .min_by_key(|&(ni, no)| (k.div_ceil(ni) + m.div_ceil(no), k.div_ceil(ni) * m.div_ceil(no)))
        .unwrap_or((1, 1));
    products_then_lowest(m.div_ceil(rows) as u64, k.div_ceil(cols) as u64, p)
}

/// Diagonal FC (lycaon-nn `diagonal.rs`): N = next_pow2(max(K, C)) up to n/2, b1 = 2^ceil(log2 N / 2)
/// baby steps (hoisted per input block), N / b1 giant steps per output block.
fn diagonal(spec: &LayerSpec, p: &BfvParams) -> BfvCounts {
    let dim = spec.c_in.max(spec.c_out).next_power_of_two().min(p.n / 2);
    let baby = 1usize << dim.trailing_zeros().div_ceil(2);
    let giant = (dim / baby) as u64;
    let (kb, mb) = (spec.c_in.div_ceil(dim) as u64, spec.c_out.div_ceil(dim) as u64);
    let baby_rot = kb * (baby as u64 - 1);
    let baby_dec = if baby > 1 { kb } else { 0 };
    let giant_rot = mb * (giant - 1);
    let plain_mults = mb * kb * dim as u64;
    BfvCounts {
        rotations: baby_rot + giant_rot,
        hoisted_decompositions: baby_dec + giant_rot,
        key_switches: baby_rot + giant_rot,
        plain_mults,
        scalar_mults: 0,
        additions: plain_mults - mb * giant + mb * (giant - 1),
        mod_switches: mb * p.top() as u64,
        ntts: (baby_dec + giant_rot) * p.decomposition_ntts() + (baby_rot + giant_rot) * p.key_switch_ntts() + mb * p.lowest_level_ntts(),
    }
}

/// The tile geometry of lycaon-nn's Gazelle convolution: blocks of B slots (a power of two up to
/// n/2) hold one tile each, the rows of one channel an output strip needs.
struct Grid {
    block: usize,
    blocks: usize,
    strip: usize,
    strips: usize,
    img_h: usize,
    img_w: usize,
    pad: usize,
    k: usize,
    stride: usize,
    full_h: usize,
    full_w: usize,
}

impl Grid {
    fn new(spec: &LayerSpec, n: usize) -> Result<Self, String> {
        if 2 * spec.pad + 1 > spec.k {
            return Err(format!("unpadded tiles need pad <= (k - 1) / 2, got pad {} for k {}", spec.pad, spec.k));
        }
        let (full_h, full_w) = full(spec);
        let half = n / 2;
        let mut g = Self {
            block: half,
            blocks: 2,
            strip: full_h,
            strips: 1,
            img_h: spec.h,
            img_w: spec.w,
            pad: spec.pad,
            k: spec.k,
            stride: spec.stride,
            full_h,
            full_w,
        };
        let block = if g.slots_needed(full_h) <= half { g.slots_needed(full_h).next_power_of_two() } else { half };
        let strip = (1..=full_h).rev().find(|&r| g.slots_needed(r) <= block).ok_or("a block cannot hold one output row; use a larger n")?;
        g.block = block;
        g.blocks = n / block;
        g.strip = strip;
        g.strips = full_h.div_ceil(strip);
        Ok(g)
    }

    fn slots_needed(&self, r: usize) -> usize {
        (0..self.full_h.div_ceil(r))
            .map(|s| {
                let y0 = (s * r).saturating_sub(self.pad);
                let y1 = (s * r + r + self.k - 1).saturating_sub(self.pad).min(self.img_h);
                let out_last = ((s + 1) * r).min(self.full_h) - 1;
                (y1 - y0).max(out_last + 1 - y0) * self.img_w
            })
            .max()
            .unwrap_or(0)
    }

    fn per_row(&self) -> usize {
        self.blocks / 2
    }

    fn source_block(&self, b: usize, swap: bool, shift: usize) -> usize {
        let per_row = self.per_row();
        (((b / per_row) ^ usize::from(swap)) * per_row) + (b % per_row + shift) % per_row
    }

    fn kept_rows(&self, s: usize) -> impl Iterator<Item = usize> + '_ {
        (s * self.strip..((s + 1) * self.strip).min(self.full_h)).filter(|y| y % self.stride == 0)
    }

    fn tap_valid(&self, y: usize, x: usize, dy: usize, dx: usize) -> bool {
        let iy = (y + dy) as isize - self.pad as isize;
        let ix = (x + dx) as isize - self.pad as isize;
        iy >= 0 && ix >= 0 && (iy as usize) < self.img_h && (ix as usize) < self.img_w
    }

    /// (swap, rotation mod n/2) of tap (dy, dx) from block shift `shift`; (false, 0) is the identity.
    fn element(&self, swap: bool, shift: usize, dy: usize, dx: usize) -> (bool, usize) {
        let r = (shift * self.block) as i64 + (dy as i64 - self.pad as i64) * self.img_w as i64 + (dx as i64 - self.pad as i64);
        (swap, r.rem_euclid((self.blocks / 2 * self.block) as i64) as usize)
    }
}

/// Gazelle input-aligned (lycaon-nn `packed.rs`): tiles (channel, strip) placed strip-major, one
/// term per (input ct, output ct, diagonal, tap) that some weight reaches.
fn packed(spec: &LayerSpec, p: &BfvParams, groups: usize) -> Result<BfvCounts, String> {
    let g = Grid::new(spec, p.n)?;
    let tile = |channels: usize, ct: usize, b: usize| {
        let t = ct * g.blocks + b;
        (t < channels * g.strips).then(|| (t % channels, t / channels))
    };
    let in_cts = (spec.c_in * g.strips).div_ceil(g.blocks);
    let out_cts = (spec.c_out * g.strips).div_ceil(g.blocks);
    let (per_in, per_out) = (spec.c_in / groups, spec.c_out / groups);
    let kk = spec.k * spec.k;
    let kept_cols: Vec<usize> = (0..g.full_w).step_by(g.stride).collect();
    let tap_used: Vec<Vec<bool>> = (0..g.strips)
        .map(|s| (0..kk).map(|t| g.kept_rows(s).any(|y| kept_cols.iter().any(|&x| g.tap_valid(y, x, t / spec.k, t % spec.k)))).collect())
        .collect();
    let mut terms = 0u64;
    let mut elements: Vec<std::collections::BTreeSet<(bool, usize)>> = vec![Default::default(); in_cts];
    for output in 0..out_cts {
        for (input, set) in elements.iter_mut().enumerate() {
            for swap in [false, true] {
                for shift in 0..g.per_row() {
                    let mut hit = vec![false; g.strips];
                    for b in 0..g.blocks {
                        let Some((o, s)) = tile(spec.c_out, output, b) else { continue };
                        let Some((c, s2)) = tile(spec.c_in, input, g.source_block(b, swap, shift)) else { continue };
                        if s == s2 && o / per_out == c / per_in {
                            hit[s] = true;
                        }
                    }
                    for t in 0..kk {
                        if hit.iter().zip(&tap_used).any(|(&h, used)| h && used[t]) {
                            terms += 1;
                            set.insert(g.element(swap, shift, t / spec.k, t % spec.k));
                        }
                    }
                }
            }
        }
    }
    let nontrivial: Vec<u64> = elements.iter().map(|s| s.iter().filter(|&&e| e != (false, 0)).count() as u64).collect();
    let rotations: u64 = nontrivial.iter().sum();
    let decompositions = nontrivial.iter().filter(|&&r| r > 0).count() as u64;
    let outs = out_cts as u64;
    Ok(BfvCounts {
        rotations,
        hoisted_decompositions: decompositions,
        key_switches: rotations,
        plain_mults: terms,
        scalar_mults: 0,
        additions: terms - outs,
        mod_switches: outs * p.top() as u64,
        ntts: decompositions * p.decomposition_ntts() + rotations * p.key_switch_ntts() + outs * p.lowest_level_ntts(),
    })
}
