//! The public local linear code of primal LPN: an n x k matrix A over F_2 whose row i has
//! `ROW_WEIGHT` ones at positions drawn from AES in counter mode under a key derived from a
//! public seed (Ferret, Appendix A.2, as in emp-ot's `lpn_f2.h`). Encoding adds `A * u` to an
//! output vector, for u a vector of k blocks (and, on the receiver's side, of k bits).
//!
//! Row i's positions come from the three counter blocks 3i, 3i+1, 3i+2 (twelve 32-bit words, the
//! first ten used), each mapped to [0, k) by `(w * k) >> 32`; the map's bias (below k / 2^32)
//! and the chance that two of a row's positions coincide (about 45 / k, the row then has
//! weight 8) are properties of the public code, not of any secret, as in emp-ot.

use rayon::prelude::*;

use super::fixed_key::FixedKeyAes;
use crate::cot::Block;

/// Ones per row of A (Ferret's d = 10).
pub(crate) const ROW_WEIGHT: usize = 10;
/// AES blocks that give one row's positions.
const BLOCKS_PER_ROW: usize = 3;
/// Rows handled by one parallel task.
const ROWS_PER_TASK: usize = 1 << 12;
/// Rows whose positions are drawn in one AES call (a multiple of 8, so that every AES call
/// fills the AES-NI backend's 8-block pipeline).
const ROWS_PER_BATCH: usize = 128;

/// The choice bits of the LPN secret packed 64 to a word: k / 8 bytes rather than k, so the
/// receiver's bit table stays in the core's first caches beside the block table.
pub(crate) struct PackedBits {
    words: Vec<u64>,
}

impl PackedBits {
    pub(crate) fn new(bits: &[bool]) -> Self {
        let words = bits.chunks(64).map(|c| c.iter().enumerate().fold(0u64, |w, (i, &b)| w | (u64::from(b) << i))).collect();
        PackedBits { words }
    }

    #[inline(always)]
    fn get(&self, i: usize) -> u64 {
        (self.words[i >> 6] >> (i & 63)) & 1
    }
}

/// The code A for one parameter set (n rows, k columns), fixed by a public seed.
#[derive(Clone)]
pub(crate) struct LocalLinearCode {
    k: usize,
    aes: FixedKeyAes,
}

impl LocalLinearCode {
    pub(crate) fn new(seed: Block, n: usize, k: usize) -> Self {
        let mut context = Vec::with_capacity(32);
        context.extend_from_slice(&seed.to_le_bytes());
        context.extend_from_slice(&(n as u64).to_le_bytes());
        context.extend_from_slice(&(k as u64).to_le_bytes());
        LocalLinearCode { k, aes: FixedKeyAes::from_label("lycaon-mpc ferret local linear code", &context) }
    }

    /// Calls `batch(first_row, positions)` for consecutive batches of rows covering `first ..
    /// first + count`, `positions[r]` being row `first_row + r`'s positions.
    #[inline(always)]
    fn for_batches(&self, first: usize, count: usize, mut batch: impl FnMut(usize, &[[u32; ROW_WEIGHT]])) {
        let mut blocks = [0u128; ROWS_PER_BATCH * BLOCKS_PER_ROW];
        let mut positions = [[0u32; ROW_WEIGHT]; ROWS_PER_BATCH];
        let k = self.k as u64;
        let mut done = 0;
        while done < count {
            let m = (count - done).min(ROWS_PER_BATCH);
            let blocks = &mut blocks[..m * BLOCKS_PER_ROW];
            let base = ((first + done) * BLOCKS_PER_ROW) as u128;
            for (j, b) in blocks.iter_mut().enumerate() {
                *b = base + j as u128;
            }
            self.aes.encrypt_in_place(blocks);
            for (p, row) in positions[..m].iter_mut().zip(blocks.chunks_exact(BLOCKS_PER_ROW)) {
                let words: [u32; 4 * BLOCKS_PER_ROW] = core::array::from_fn(|w| (row[w / 4] >> (32 * (w % 4))) as u32);
                *p = core::array::from_fn(|w| ((words[w] as u64 * k) >> 32) as u32);
            }
            batch(first + done, &positions[..m]);
            done += m;
        }
    }

    /// Calls `row(i, positions)` for rows `first .. first + count`.
    #[cfg(test)]
    fn for_rows(&self, first: usize, count: usize, mut row: impl FnMut(usize, &[u32; ROW_WEIGHT])) {
        self.for_batches(first, count, |start, positions| {
            for (r, p) in positions.iter().enumerate() {
                row(start + r, p);
            }
        });
    }

    /// `out[i] ^= XOR_{j in row i} input[j]` for every row i < out.len() (the sender's side).
    pub(crate) fn encode_add(&self, input: &[Block], out: &mut [Block]) {
        debug_assert_eq!(input.len(), self.k);
        out.par_chunks_mut(ROWS_PER_TASK).enumerate().for_each(|(task, chunk)| {
            let _t = lycaon_math::profile::time(lycaon_math::profile::Kernel::OtExtension);
            let first = task * ROWS_PER_TASK;
            self.for_batches(first, chunk.len(), |start, positions| gather_blocks::<true>(input, positions, &mut chunk[start - first..]));
        });
    }

    /// The receiver's side: `out[i] = XOR_{j in row i} input[j]`, and likewise for the choice
    /// bits (overwriting, so neither output needs zeroing first).
    pub(crate) fn encode_with_bits(&self, input: &[Block], input_bits: &PackedBits, out: &mut [Block], out_bits: &mut [bool]) {
        debug_assert_eq!(input.len(), self.k);
        debug_assert!(input_bits.words.len() * 64 >= self.k);
        debug_assert_eq!(out.len(), out_bits.len());
        out.par_chunks_mut(ROWS_PER_TASK).zip(out_bits.par_chunks_mut(ROWS_PER_TASK)).enumerate().for_each(|(task, (chunk, bits))| {
            let _t = lycaon_math::profile::time(lycaon_math::profile::Kernel::OtExtension);
            let first = task * ROWS_PER_TASK;
            self.for_batches(first, chunk.len(), |start, positions| {
                // Two lean loops rather than one: the block gathers miss the caches, and the
                // fewer instructions per row, the more rows' misses the core keeps in flight.
                gather_blocks::<false>(input, positions, &mut chunk[start - first..]);
                for (b, p) in bits[start - first..].iter_mut().zip(positions) {
                    *b = p.iter().fold(0, |a, &j| a ^ input_bits.get(j as usize)) == 1;
                }
            });
        });
    }
}

/// `out[r] ^= XOR_{j in positions[r]} input[j]` (`out[r] =` unless `ADD`).
#[inline(always)]
fn gather_blocks<const ADD: bool>(input: &[Block], positions: &[[u32; ROW_WEIGHT]], out: &mut [Block]) {
    for (o, p) in out.iter_mut().zip(positions) {
        let mut acc = 0u128;
        for &j in p {
            acc ^= input[j as usize];
        }
        *o = if ADD { *o ^ acc } else { acc };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_deterministic_in_range_and_spread() {
        let code = LocalLinearCode::new(7, 10_000, 1_000);
        let mut rows_a = Vec::new();
        code.for_rows(0, 10_000, |_, p| rows_a.push(*p));
        let mut rows_b = Vec::new();
        code.for_rows(5_000, 5_000, |_, p| rows_b.push(*p));
        assert_eq!(&rows_a[5_000..], &rows_b[..], "a row's positions must not depend on where a task starts");
        let mut hits = vec![0u32; 1_000];
        for p in rows_a.iter().flatten() {
            hits[*p as usize] += 1;
        }
        // 100,000 positions over 1,000 columns: about 100 each.
        assert!(hits.iter().all(|&h| (40..200).contains(&h)), "{:?}", hits.iter().min());
        let other = LocalLinearCode::new(8, 10_000, 1_000);
        let mut first_other = [0u32; ROW_WEIGHT];
        other.for_rows(0, 1, |_, p| first_other = *p);
        assert_ne!(first_other, rows_a[0], "the seed must change the code");
    }

    #[test]
    fn encoding_is_linear_and_matches_rows() {
        let (n, k) = (9_000, 700);
        let code = LocalLinearCode::new(1, n, k);
        let input: Vec<Block> = (0..k as u128).map(|i| i * 0x1234_5678_9abc_def1 + 3).collect();
        let bits: Vec<bool> = (0..k).map(|i| i % 3 == 0).collect();
        let mut out = vec![5u128; n];
        let mut out_bits = vec![true; n];
        code.encode_with_bits(&input, &PackedBits::new(&bits), &mut out, &mut out_bits);
        let mut out_sender = vec![0u128; n];
        code.encode_add(&input, &mut out_sender);
        assert_eq!(out, out_sender);
        code.for_rows(0, n, |i, p| {
            assert_eq!(out[i], p.iter().fold(0, |a, &j| a ^ input[j as usize]));
            assert_eq!(out_bits[i], p.iter().fold(false, |a, &j| a ^ bits[j as usize]));
        });
    }
}
