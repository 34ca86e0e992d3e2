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
use crate::kernels;

/// Ones per row of A (Ferret's d = 10).
pub(crate) const ROW_WEIGHT: usize = 10;
/// AES blocks that give one row's positions.
const BLOCKS_PER_ROW: usize = 3;
/// Rows handled by one parallel task.
const ROWS_PER_TASK: usize = 4096;
/// Rows whose positions are drawn in one AES call (a multiple of 16, so that every AES call
/// fills the kernels' pipeline).
const ROWS_PER_BATCH: usize = 128;

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

    /// Row `first + r`'s positions into `positions[r]` for every r < `positions.len()`.
    fn positions(&self, first: usize, positions: &mut [[u32; ROW_WEIGHT]]) {
        let mut blocks = [0u128; ROWS_PER_BATCH * BLOCKS_PER_ROW];
        let k = self.k as u32;
        for (b, batch) in positions.chunks_mut(ROWS_PER_BATCH).enumerate() {
            let blocks = &mut blocks[..batch.len() * BLOCKS_PER_ROW];
            let base = ((first + b * ROWS_PER_BATCH) * BLOCKS_PER_ROW) as u128;
            for (j, x) in blocks.iter_mut().enumerate() {
                *x = base + j as u128;
            }
            self.aes.encrypt_in_place(blocks);
            kernels::map_positions(blocks, k, batch);
        }
    }

    /// Calls `row(i, positions)` for rows `first .. first + count`.
    #[cfg(test)]
    fn for_rows(&self, first: usize, count: usize, mut row: impl FnMut(usize, &[u32; ROW_WEIGHT])) {
        let mut positions = vec![[0u32; ROW_WEIGHT]; count];
        self.positions(first, &mut positions);
        for (r, p) in positions.iter().enumerate() {
            row(first + r, p);
        }
    }

    /// `out[i] ^= XOR_{j in row i} input[j]` for every row i < out.len() (the sender's side, all
    /// rows at once; the protocol applies [`Self::encode_add_rows`] tree by tree instead).
    #[cfg(test)]
    pub(crate) fn encode_add(&self, input: &[Block], out: &mut [Block]) {
        out.par_chunks_mut(ROWS_PER_TASK).enumerate().for_each(|(task, chunk)| self.encode_add_rows(input, task * ROWS_PER_TASK, chunk));
    }

    /// [`Self::encode_add`] for rows `first .. first + out.len()` only, on the calling thread:
    /// the sender applies it to each tree's leaves while they are still in its caches.
    pub(crate) fn encode_add_rows(&self, input: &[Block], first: usize, out: &mut [Block]) {
        debug_assert_eq!(input.len(), self.k);
        let _t = lycaon_math::profile::time(lycaon_math::profile::Kernel::OtExtension);
        let mut positions = [[0u32; ROW_WEIGHT]; ROWS_PER_TASK];
        for (c, chunk) in out.chunks_mut(ROWS_PER_TASK).enumerate() {
            let positions = &mut positions[..chunk.len()];
            self.positions(first + c * ROWS_PER_TASK, positions);
            kernels::gather_xor::<true, ROW_WEIGHT>(input, positions, chunk);
        }
    }

    /// The receiver's side for rows `first ..`: `out[i] = XOR_{j in row first + i} input[j]` (overwriting, so `out` needs no
    /// zeroing first), and `out_bits[i]` its lowest bit: the receiver's blocks carry their choice
    /// bit there (the sender's have 0 there and delta has 1), and the code is linear, so the
    /// lowest bit of a row's sum is the sum of its choice bits.
    pub(crate) fn encode_with_bits(&self, input: &[Block], first: usize, out: &mut [Block], out_bits: &mut [bool]) {
        debug_assert_eq!(input.len(), self.k);
        debug_assert_eq!(out.len(), out_bits.len());
        out.par_chunks_mut(ROWS_PER_TASK).zip(out_bits.par_chunks_mut(ROWS_PER_TASK)).enumerate().for_each(|(task, (chunk, bits))| {
            let _t = lycaon_math::profile::time(lycaon_math::profile::Kernel::OtExtension);
            let mut positions = [[0u32; ROW_WEIGHT]; ROWS_PER_TASK];
            let positions = &mut positions[..chunk.len()];
            self.positions(first + task * ROWS_PER_TASK, positions);
            kernels::gather_xor::<false, ROW_WEIGHT>(input, positions, chunk);
            for (b, o) in bits.iter_mut().zip(chunk.iter()) {
                *b = o & 1 == 1;
            }
        });
    }

    /// The vector-OT receiver's side for rows `first ..`: `out[i]` (blocks) and `out_values[i]`
    /// (its m-bit values, one byte each) overwritten with the XOR of row `first + i`'s entries
    /// of `input` and `input_values`. One draw of positions serves both gathers; the value table
    /// (k bytes) stays in the core's L2.
    pub(crate) fn encode_with_values(&self, input: &[Block], input_values: &[u8], first: usize, out: &mut [Block], out_values: &mut [u8]) {
        debug_assert_eq!((input.len(), input_values.len()), (self.k, self.k));
        debug_assert_eq!(out.len(), out_values.len());
        out.par_chunks_mut(ROWS_PER_TASK).zip(out_values.par_chunks_mut(ROWS_PER_TASK)).enumerate().for_each(|(task, (chunk, values))| {
            let _t = lycaon_math::profile::time(lycaon_math::profile::Kernel::OtExtension);
            let mut positions = [[0u32; ROW_WEIGHT]; ROWS_PER_TASK];
            let positions = &mut positions[..chunk.len()];
            self.positions(first + task * ROWS_PER_TASK, positions);
            kernels::gather_xor::<false, ROW_WEIGHT>(input, positions, chunk);
            for (v, p) in values.iter_mut().zip(positions.iter()) {
                *v = p.iter().fold(0, |acc, &j| acc ^ input_values[j as usize]);
            }
        });
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
        // The receiver's blocks carry their bits in the lowest bit.
        let bits: Vec<bool> = (0..k).map(|i| i % 3 == 0).collect();
        let input: Vec<Block> = (0..k as u128).map(|i| ((i * 0x1234_5678_9abc_def1 + 3) & !1) | u128::from(bits[i as usize])).collect();
        let mut out = vec![5u128; n];
        let mut out_bits = vec![true; n];
        code.encode_with_bits(&input, 0, &mut out, &mut out_bits);
        let mut out_sender = vec![0u128; n];
        code.encode_add(&input, &mut out_sender);
        assert_eq!(out, out_sender);
        code.for_rows(0, n, |i, p| {
            assert_eq!(out[i], p.iter().fold(0, |a, &j| a ^ input[j as usize]));
            assert_eq!(out_bits[i], p.iter().fold(false, |a, &j| a ^ bits[j as usize]));
        });
    }
}

#[cfg(test)]
mod timing {
    use super::*;

    #[test]
    #[ignore]
    fn time_main_encode() {
        let (n, k) = (10_608_640usize, std::env::var("LPN_K").map(|v| v.parse().unwrap()).unwrap_or(589_824usize));
        let code = LocalLinearCode::new(1, n, k);
        let input: Vec<Block> = (0..k as u128).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835)).collect();
        let mut out = vec![0u128; n];
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let mut best = f64::MAX;
        for _ in 0..6 {
            let t = std::time::Instant::now();
            pool.install(|| code.encode_add(&input, &mut out));
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!("encode_add 1 thread: best {:.3} s ({:.1} ns/row)", best, best * 1e9 / n as f64);
        // Positions alone, a task's worth at a time as the encoders draw them.
        let t = std::time::Instant::now();
        let mut positions = vec![[0u32; ROW_WEIGHT]; ROWS_PER_TASK];
        let mut sum = 0u32;
        for first in (0..n).step_by(ROWS_PER_TASK) {
            code.positions(first, &mut positions);
            sum ^= positions[7][3];
        }
        println!("positions only: {:.3} s ({sum:x})", t.elapsed().as_secs_f64());
    }
}
