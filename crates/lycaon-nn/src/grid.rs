//! The slot geometry shared by the SIMD convolutions. The n batch slots form two rows of n/2;
//! each row is cut into blocks of B slots (B a power of two), so a ciphertext has n/B blocks.
//! A block holds one tile: the rows of one channel's image needed for a strip of R output rows
//! (with the kernel's halo), row-major with row width Wt. The output of the tile lands at the same
//! slots, output row Y at tile row Y - y0, so one rotation by dy * Wt + dx (shifted by the
//! padding) aligns the kernel tap (dy, dx) for every output of every tile at once.
//!
//! Unpadded tiles (Gazelle) store the image as it is; taps that fall outside the image are
//! masked by zeros in the weight plaintexts. Padded tiles store the zero-padded image, so every
//! tap is valid and a weight is one scalar per tile: what scalar-weight algorithms need.

use lycaon_math::{rotation_galois_element, row_swap_galois_element};

use crate::layout::{Encoding, Layout, Placement};
use crate::{ConvShape, NnError};

#[derive(Clone, Debug)]
pub(crate) struct TileGrid {
    pub n: usize,
    pub block: usize,
    pub blocks: usize,
    pub padded: bool,
    /// Stored image size (padded if `padded`).
    pub img_h: usize,
    pub img_w: usize,
    /// Padding still to be applied by masking (0 when padded).
    pub ph: usize,
    pub pw: usize,
    pub shape: ConvShape,
    /// Output rows per strip and number of strips.
    pub strip: usize,
    pub strips: usize,
}

impl TileGrid {
    pub fn new(shape: &ConvShape, n: usize, padded: bool, block: Option<usize>, algorithm: &'static str) -> Result<Self, NnError> {
        shape.validate()?;
        let (img_h, img_w, ph, pw) =
            if padded { (shape.h + 2 * shape.pad_h, shape.w + 2 * shape.pad_w, 0, 0) } else { (shape.h, shape.w, shape.pad_h, shape.pad_w) };
        if !padded && 2 * shape.pad_w + 1 > shape.kw {
            return Err(NnError::Unsupported {
                algorithm,
                reason: format!("unpadded tiles need pad_w <= (kw - 1) / 2, got pad_w = {} for kw = {}", shape.pad_w, shape.kw),
            });
        }
        let half = n / 2;
        let mut grid = Self { n, block: half, blocks: 2, padded, img_h, img_w, ph, pw, shape: *shape, strip: shape.full_h(), strips: 1 };
        let fits = |g: &Self, r: usize, b: usize| g.slots_needed(r) <= b;
        let block = match block {
            Some(b) if b.is_power_of_two() && b <= half => b,
            Some(b) => return Err(NnError::Unsupported { algorithm, reason: format!("block size {b} must be a power of two up to n/2 = {half}") }),
            None if fits(&grid, shape.full_h(), half) => grid.slots_needed(shape.full_h()).next_power_of_two(),
            None => half,
        };
        let strip = (1..=shape.full_h()).rev().find(|&r| fits(&grid, r, block)).ok_or_else(|| NnError::Unsupported {
            algorithm,
            reason: format!(
                "a block of {block} slots cannot hold even one output row of a {}-wide image with a {}-row kernel; use a larger n",
                img_w, shape.kh
            ),
        })?;
        grid.block = block;
        grid.blocks = n / block;
        grid.strip = strip;
        grid.strips = shape.full_h().div_ceil(strip);
        Ok(grid)
    }

    /// Slots a tile needs when strips have r output rows (the largest over strips).
    fn slots_needed(&self, r: usize) -> usize {
        let strips = self.shape.full_h().div_ceil(r);
        (0..strips)
            .map(|s| {
                let y0 = self.y0_for(s, r);
                let y1 = self.y1_for(s, r);
                let out_last = ((s + 1) * r).min(self.shape.full_h()) - 1;
                (y1 - y0).max(out_last + 1 - y0) * self.img_w
            })
            .max()
            .unwrap_or(0)
    }

    fn y0_for(&self, s: usize, r: usize) -> usize {
        (s * r).saturating_sub(self.ph)
    }

    fn y1_for(&self, s: usize, r: usize) -> usize {
        ((s * r + r + self.shape.kh - 1).saturating_sub(self.ph)).min(self.img_h)
    }

    /// First stored image row of strip s.
    pub fn y0(&self, s: usize) -> usize {
        self.y0_for(s, self.strip)
    }

    pub fn half(&self) -> usize {
        self.n / 2
    }

    pub fn blocks_per_row(&self) -> usize {
        self.blocks / 2
    }

    /// First slot of block b (blocks 0 .. n/B/2 in row 0, then row 1).
    pub fn block_slot(&self, b: usize) -> usize {
        let per_row = self.blocks_per_row();
        (b / per_row) * self.half() + (b % per_row) * self.block
    }

    /// The block read by block b under a diagonal (row swap, block shift).
    pub fn source_block(&self, b: usize, swap: bool, shift: usize) -> usize {
        let per_row = self.blocks_per_row();
        let row = (b / per_row) ^ usize::from(swap);
        row * per_row + (b % per_row + shift) % per_row
    }

    /// Row rotation (left) that brings tap (dy, dx) of block b + shift to block b's output slots.
    pub fn rotation(&self, shift: usize, dy: usize, dx: usize) -> i64 {
        (shift * self.block) as i64 + (dy as i64 - self.ph as i64) * self.img_w as i64 + (dx as i64 - self.pw as i64)
    }

    /// The Galois element of that rotation, composed with the row swap when asked.
    pub fn galois(&self, swap: bool, shift: usize, dy: usize, dx: usize) -> u64 {
        let g = rotation_galois_element(self.rotation(shift, dy, dx), self.n);
        if swap {
            g * row_swap_galois_element(self.n) % (2 * self.n as u64)
        } else {
            g
        }
    }

    /// The Galois element that moves block b + shift (of the other row, with `swap`) to block b.
    pub fn block_galois(&self, swap: bool, shift: usize) -> u64 {
        let g = rotation_galois_element((shift * self.block) as i64, self.n);
        if swap {
            g * row_swap_galois_element(self.n) % (2 * self.n as u64)
        } else {
            g
        }
    }

    /// Slot (within its block) of stride-1 output (y, x) of strip s.
    pub fn out_offset(&self, s: usize, y: usize, x: usize) -> usize {
        (y - self.y0(s)) * self.img_w + x
    }

    /// Whether tap (dy, dx) of output (y, x) reads inside the stored image.
    pub fn tap_valid(&self, y: usize, x: usize, dy: usize, dx: usize) -> bool {
        let iy = (y + dy) as isize - self.ph as isize;
        let ix = (x + dx) as isize - self.pw as isize;
        iy >= 0 && ix >= 0 && (iy as usize) < self.img_h && (ix as usize) < self.img_w
    }

    /// The stride-1 output rows of strip s that the layer keeps.
    pub fn kept_rows(&self, s: usize) -> impl Iterator<Item = usize> + '_ {
        (s * self.strip..((s + 1) * self.strip).min(self.shape.full_h())).filter(|y| y % self.shape.stride == 0)
    }

    /// The stride-1 output columns the layer keeps.
    pub fn kept_cols(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.shape.full_w()).step_by(self.shape.stride)
    }

    /// Layout of the input with tile (c, s) at `place(c, s)` = (ciphertext, block).
    pub fn input_layout(&self, num_cts: usize, place: impl Fn(usize, usize) -> (usize, usize)) -> Layout {
        let sh = &self.shape;
        let (dy_pad, dx_pad) = if self.padded { (sh.pad_h, sh.pad_w) } else { (0, 0) };
        let mut placements = Vec::new();
        for c in 0..sh.c_in {
            for s in 0..self.strips {
                let (ct, b) = place(c, s);
                let (y0, y1) = (self.y0(s), self.y1_for(s, self.strip));
                for y in 0..sh.h {
                    let ys = y + dy_pad;
                    if ys < y0 || ys >= y1 {
                        continue;
                    }
                    for x in 0..sh.w {
                        let pos = self.block_slot(b) + (ys - y0) * self.img_w + x + dx_pad;
                        placements.push(Placement { element: ((c * sh.h + y) * sh.w + x) as u32, ct: ct as u32, pos: pos as u32 });
                    }
                }
            }
        }
        Layout::new(Encoding::Batch, num_cts, sh.input_len(), placements)
    }

    /// Layout of the output with tile (o, s) at `place(o, s)`.
    pub fn output_layout(&self, num_cts: usize, place: impl Fn(usize, usize) -> (usize, usize)) -> Layout {
        let sh = &self.shape;
        let (oh, ow) = (sh.out_h(), sh.out_w());
        let mut placements = Vec::with_capacity(sh.output_len());
        for o in 0..sh.c_out {
            for s in 0..self.strips {
                let (ct, b) = place(o, s);
                for y in self.kept_rows(s) {
                    for x in self.kept_cols() {
                        let pos = self.block_slot(b) + self.out_offset(s, y, x);
                        let element = (o * oh + y / sh.stride) * ow + x / sh.stride;
                        placements.push(Placement { element: element as u32, ct: ct as u32, pos: pos as u32 });
                    }
                }
            }
        }
        Layout::new(Encoding::Batch, num_cts, sh.output_len(), placements)
    }
}

/// Tiles (channel, strip) in strip-major order, `blocks` per ciphertext: a ciphertext holds
/// channels of one strip whenever there are at least as many channels as blocks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DensePlacement {
    pub channels: usize,
    pub blocks: usize,
}

impl DensePlacement {
    pub fn place(&self, c: usize, s: usize) -> (usize, usize) {
        let t = s * self.channels + c;
        (t / self.blocks, t % self.blocks)
    }

    pub fn num_cts(&self, strips: usize) -> usize {
        (self.channels * strips).div_ceil(self.blocks)
    }

    /// The tile (channel, strip) at block b of ciphertext ct, if any.
    pub fn tile(&self, ct: usize, b: usize, strips: usize) -> Option<(usize, usize)> {
        let t = ct * self.blocks + b;
        (t < self.channels * strips).then(|| (t % self.channels, t / self.channels))
    }
}

/// One weight term of a diagonal convolution: the input ciphertext, the output ciphertext, the
/// diagonal (row swap, block shift) and the kernel tap.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Term {
    pub input: usize,
    pub output: usize,
    pub swap: bool,
    pub shift: usize,
    pub dy: usize,
    pub dx: usize,
}

/// The terms whose plaintext has a non-zero slot for some choice of weights.
pub(crate) fn diagonal_terms(g: &TileGrid, in_place: &DensePlacement, out_place: &DensePlacement, in_cts: usize, out_cts: usize) -> Vec<Term> {
    let sh = &g.shape;
    // tap_used[s][dy][dx]: some kept output of strip s reads inside the image at this tap.
    let tap_used: Vec<Vec<bool>> = (0..g.strips)
        .map(|s| (0..sh.kh * sh.kw).map(|k| g.kept_rows(s).any(|y| g.kept_cols().any(|x| g.tap_valid(y, x, k / sh.kw, k % sh.kw)))).collect())
        .collect();
    let mut terms = Vec::new();
    for output in 0..out_cts {
        for input in 0..in_cts {
            for swap in [false, true] {
                for shift in 0..g.blocks_per_row() {
                    let mut strips_hit = vec![false; g.strips];
                    let mut hits = 0;
                    for b in 0..g.blocks {
                        // Every strip found: the other blocks can add nothing (with n blocks
                        // per ciphertext, a fully connected layer would scan n^2 pairs).
                        if hits == g.strips {
                            break;
                        }
                        let Some((o, s)) = out_place.tile(output, b, g.strips) else {
                            continue;
                        };
                        let src = g.source_block(b, swap, shift);
                        let Some((c, s2)) = in_place.tile(input, src, g.strips) else {
                            continue;
                        };
                        if s == s2 && sh.weight_group_match(o, c) && !strips_hit[s] {
                            strips_hit[s] = true;
                            hits += 1;
                        }
                    }
                    for k in 0..sh.kh * sh.kw {
                        if strips_hit.iter().zip(&tap_used).any(|(&hit, used)| hit && used[k]) {
                            terms.push(Term { input, output, swap, shift, dy: k / sh.kw, dx: k % sh.kw });
                        }
                    }
                }
            }
        }
    }
    terms
}
