//! IKNP OT extension producing random correlated OT: from 128 base OTs, any number of pairs
//! (`q_i`; `b_i`, `t_i = q_i ^ b_i * delta`) at 128 bits of communication each.
//!
//! Ishai, Kilian, Nissim and Petrank, "Extending Oblivious Transfers Efficiently" (CRYPTO 2003),
//! in its semi-honest form without the KOS consistency check, with the roles swapped for the
//! base OTs:
//!
//! * setup: the extension sender draws `delta` (= `s`) and, as base-OT receiver with choice bits
//!   `s_j` (bit `j` of `delta`), learns `k_j^{s_j}` of 128 random base-OT key pairs sent by the
//!   extension receiver (`base_ot`, Chou–Orlandi);
//! * extension by `m`: the receiver draws random choice bits `r` (m bits) and, for every column
//!   `j < 128`, sets `t^j = G(k_j^0)` and sends `u^j = t^j ⊕ G(k_j^1) ⊕ r`; the sender sets
//!   `q^j = G(k_j^{s_j}) ⊕ s_j · u^j = t^j ⊕ s_j · r`. Transposing the 128 × m bit matrices,
//!   row `i` gives `q_i = t_i ⊕ r_i · delta`: exactly the random COT of `cot.rs`.
//!
//! `G` is AES-128 in counter mode keyed by the 128-bit seed; each seed's stream continues across
//! calls (both sides advance by the same ⌈m/128⌉ blocks per batch), so no PRG output is used twice.
//! A call sends one message of `128 * ⌈m/8⌉` bytes from receiver to sender per batch of at most
//! `MAX_BATCH` correlations; the sender sends nothing. Setup costs 32 + 32 · 128 = 4128 bytes.
//! Outputs are random COT: no hashing happens here (see `ot.rs` for derandomisation).

use aes::cipher::generic_array::GenericArray;
use aes::cipher::KeyInit;
use aes::Aes128;
use rand_chacha::ChaCha20Rng;
use rand_core::{CryptoRng, Rng, SeedableRng};
use rayon::prelude::*;
use zeroize::Zeroize;

use crate::base_ot::{base_ot_receive, base_ot_send};
use crate::channel::Channel;
use crate::cot::{Block, CotReceiver, CotSender};
use crate::kernels::encrypt_portable;
use crate::Result;

/// Base OTs (the security parameter: the width of the extension matrix).
pub const BASE_OTS: usize = 128;
/// Most correlations per message (16 MiB of matrix); larger requests are cut into batches.
pub const MAX_BATCH: usize = 1 << 20;

/// AES-128-CTR keyed by a base-OT seed.
struct SeedPrg {
    aes: Aes128,
    counter: u128,
}

impl SeedPrg {
    fn new(seed: Block) -> Self {
        let mut key = seed.to_le_bytes();
        let aes = Aes128::new(&GenericArray::from(key));
        key.zeroize();
        SeedPrg { aes, counter: 0 }
    }

    /// The next `out.len()` blocks of the stream.
    fn fill(&mut self, out: &mut [Block]) {
        for (k, o) in out.iter_mut().enumerate() {
            *o = self.counter.wrapping_add(k as u128);
        }
        self.counter = self.counter.wrapping_add(out.len() as u128);
        encrypt_portable(&self.aes, out);
    }
}

/// Transposes a 128 × 128 bit matrix in place: bit `c` of `rows[r]` becomes bit `r` of `rows[c]`.
/// Seven rounds of block swaps (Eklundh's algorithm).
pub fn transpose_128(rows: &mut [Block; 128]) {
    const MASKS: [(usize, u128); 7] = [
        (64, 0x0000_0000_0000_0000_ffff_ffff_ffff_ffff),
        (32, 0x0000_0000_ffff_ffff_0000_0000_ffff_ffff),
        (16, 0x0000_ffff_0000_ffff_0000_ffff_0000_ffff),
        (8, 0x00ff_00ff_00ff_00ff_00ff_00ff_00ff_00ff),
        (4, 0x0f0f_0f0f_0f0f_0f0f_0f0f_0f0f_0f0f_0f0f),
        (2, 0x3333_3333_3333_3333_3333_3333_3333_3333),
        (1, 0x5555_5555_5555_5555_5555_5555_5555_5555),
    ];
    for (s, mask) in MASKS {
        for base in (0..128).step_by(2 * s) {
            for i in base..base + s {
                // Swap bits (i, j + s) and (i + s, j) for every j with bit s clear.
                let x = ((rows[i] >> s) ^ rows[i + s]) & mask;
                rows[i + s] ^= x;
                rows[i] ^= x << s;
            }
        }
    }
}

/// Rows of the m × 128 matrix whose 128 columns of `blocks` blocks each are laid end to end in
/// `columns` (column `j` is `columns[j * blocks..(j + 1) * blocks]`, bit `i` of the column is
/// bit `i % 128` of its block `i / 128`). Returns `blocks * 128` rows.
fn transpose_columns(columns: &[Block], blocks: usize) -> Vec<Block> {
    let mut rows = vec![0u128; blocks * 128];
    rows.par_chunks_mut(128).enumerate().for_each(|(k, out)| {
        let mut tile = [0u128; 128];
        for (j, t) in tile.iter_mut().enumerate() {
            *t = columns[j * blocks + k];
        }
        transpose_128(&mut tile);
        out.copy_from_slice(&tile);
    });
    rows
}

/// Size of one column on the wire: `m` bits, rounded up to bytes.
fn column_bytes(m: usize) -> usize {
    m.div_ceil(8)
}

/// The extension sender: holds `delta` and the base-OT keys `k_j^{s_j}`.
pub struct IknpSender {
    delta: Block,
    prgs: Vec<SeedPrg>,
}

impl std::fmt::Debug for IknpSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IknpSender { .. }")
    }
}

impl IknpSender {
    /// Draws `delta` and runs the 128 base OTs as their receiver (one message each way:
    /// receives 32 bytes, sends 4096). Pair with `IknpReceiver::new` on the other side.
    /// `delta`'s lowest bit is always 1 (127 random bits, as in emp-ot): silent OT built on
    /// these COTs keeps each receiver's choice bit in the lowest bit of its block.
    /// Errors: the channel's errors and `base_ot_receive`'s.
    pub fn new<R: CryptoRng + ?Sized>(channel: &mut dyn Channel, rng: &mut R) -> Result<Self> {
        let mut bytes = [0u8; 16];
        rng.fill_bytes(&mut bytes);
        let delta = u128::from_le_bytes(bytes) | 1;
        bytes.zeroize();
        let choices: Vec<bool> = (0..BASE_OTS).map(|j| (delta >> j) & 1 == 1).collect();
        let mut seeds = base_ot_receive(channel, &choices, rng)?;
        let prgs = seeds.iter().map(|&s| SeedPrg::new(s)).collect();
        seeds.zeroize();
        Ok(IknpSender { delta, prgs })
    }

    fn extend_batch(&mut self, channel: &mut dyn Channel, m: usize) -> Result<Vec<Block>> {
        let blocks = m.div_ceil(128);
        let col_bytes = column_bytes(m);
        let u = channel.recv_exact(BASE_OTS * col_bytes, "IKNP extension matrix")?;
        let delta = self.delta;
        let mut columns = vec![0u128; BASE_OTS * blocks];
        columns.par_chunks_mut(blocks).zip(self.prgs.par_iter_mut()).enumerate().for_each(|(j, (col, prg))| {
            prg.fill(col);
            if (delta >> j) & 1 == 1 {
                let u_col = &u[j * col_bytes..(j + 1) * col_bytes];
                for (k, c) in col.iter_mut().enumerate() {
                    let mut buf = [0u8; 16];
                    let start = k * 16;
                    let end = (start + 16).min(col_bytes);
                    buf[..end - start].copy_from_slice(&u_col[start..end]);
                    *c ^= u128::from_le_bytes(buf);
                }
            }
        });
        let mut rows = transpose_columns(&columns, blocks);
        columns.zeroize();
        rows.truncate(m);
        Ok(rows)
    }
}

impl CotSender for IknpSender {
    fn delta(&self) -> Block {
        self.delta
    }

    /// Receives `⌈count / MAX_BATCH⌉` messages totalling `128 * ⌈m/8⌉` bytes per batch of `m`;
    /// sends nothing. Errors: the channel's; `Malformed` if a message has the wrong length.
    fn extend(&mut self, channel: &mut dyn Channel, count: usize) -> Result<Vec<Block>> {
        if count <= MAX_BATCH {
            return if count == 0 { Ok(Vec::new()) } else { self.extend_batch(channel, count) };
        }
        let mut out = Vec::with_capacity(count);
        let mut done = 0;
        while done < count {
            let m = (count - done).min(MAX_BATCH);
            out.extend(self.extend_batch(channel, m)?);
            done += m;
        }
        Ok(out)
    }
}

impl Drop for IknpSender {
    fn drop(&mut self) {
        self.delta.zeroize();
    }
}

/// The extension receiver: holds both base-OT keys of every column and draws the choice bits.
pub struct IknpReceiver {
    prgs: Vec<(SeedPrg, SeedPrg)>,
    rng: ChaCha20Rng,
}

impl std::fmt::Debug for IknpReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IknpReceiver { .. }")
    }
}

impl IknpReceiver {
    /// Runs the 128 base OTs as their sender (sends 32 bytes, receives 4096) and seeds its
    /// choice-bit generator from `rng`. Pair with `IknpSender::new` on the other side.
    /// Errors: the channel's errors and `base_ot_send`'s.
    pub fn new<R: CryptoRng + ?Sized>(channel: &mut dyn Channel, rng: &mut R) -> Result<Self> {
        let mut pairs = base_ot_send(channel, BASE_OTS, rng)?;
        let prgs = pairs.iter().map(|&(k0, k1)| (SeedPrg::new(k0), SeedPrg::new(k1))).collect();
        pairs.zeroize();
        let mut seed = [0u8; 32];
        rng.fill_bytes(&mut seed);
        let own = ChaCha20Rng::from_seed(seed);
        seed.zeroize();
        Ok(IknpReceiver { prgs, rng: own })
    }

    fn extend_batch(&mut self, channel: &mut dyn Channel, m: usize) -> Result<(Vec<bool>, Vec<Block>)> {
        let blocks = m.div_ceil(128);
        let col_bytes = column_bytes(m);
        let mut r = vec![0u128; blocks];
        for b in r.iter_mut() {
            let mut bytes = [0u8; 16];
            self.rng.fill_bytes(&mut bytes);
            *b = u128::from_le_bytes(bytes);
        }
        // Bits beyond m in the last block: choice bits there are never used, and the padding of
        // each column of u is sent as zeros.
        let tail = m % 128;
        let last_mask = if tail == 0 { u128::MAX } else { (1u128 << tail) - 1 };
        r[blocks - 1] &= last_mask;
        let mut columns = vec![0u128; BASE_OTS * blocks];
        let mut message = vec![0u8; BASE_OTS * col_bytes];
        columns.par_chunks_mut(blocks).zip(message.par_chunks_mut(col_bytes)).zip(self.prgs.par_iter_mut()).for_each(|((t_col, u_bytes), (g0, g1))| {
            g0.fill(t_col);
            let mut u_col = vec![0u128; blocks];
            g1.fill(&mut u_col);
            for ((u, t), rb) in u_col.iter_mut().zip(t_col.iter()).zip(r.iter()) {
                *u ^= t ^ rb;
            }
            u_col[blocks - 1] &= last_mask;
            for (k, chunk) in u_bytes.chunks_mut(16).enumerate() {
                chunk.copy_from_slice(&u_col[k].to_le_bytes()[..chunk.len()]);
            }
        });
        channel.send(&message)?;
        let mut rows = transpose_columns(&columns, blocks);
        columns.zeroize();
        rows.truncate(m);
        let bits = (0..m).map(|i| (r[i / 128] >> (i % 128)) & 1 == 1).collect();
        r.zeroize();
        Ok((bits, rows))
    }
}

impl CotReceiver for IknpReceiver {
    /// Sends `⌈count / MAX_BATCH⌉` messages totalling `128 * ⌈m/8⌉` bytes per batch of `m`;
    /// receives nothing. Errors: the channel's.
    fn extend(&mut self, channel: &mut dyn Channel, count: usize) -> Result<(Vec<bool>, Vec<Block>)> {
        if count <= MAX_BATCH {
            return if count == 0 { Ok((Vec::new(), Vec::new())) } else { self.extend_batch(channel, count) };
        }
        let mut bits = Vec::with_capacity(count);
        let mut blocks = Vec::with_capacity(count);
        let mut done = 0;
        while done < count {
            let m = (count - done).min(MAX_BATCH);
            let (b, t) = self.extend_batch(channel, m)?;
            bits.extend(b);
            blocks.extend(t);
            done += m;
        }
        Ok((bits, blocks))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::{run_pair, LinkModel};
    use crate::MpcError;

    fn naive_transpose(rows: &[Block; 128]) -> [Block; 128] {
        let mut out = [0u128; 128];
        for (r, row) in rows.iter().enumerate() {
            for (c, o) in out.iter_mut().enumerate() {
                *o |= ((row >> c) & 1) << r;
            }
        }
        out
    }

    #[test]
    fn transpose_matches_naive() {
        let mut rng = ChaCha20Rng::seed_from_u64(9);
        let mut m = [0u128; 128];
        for row in m.iter_mut() {
            let mut b = [0u8; 16];
            rng.fill_bytes(&mut b);
            *row = u128::from_le_bytes(b);
        }
        let expected = naive_transpose(&m);
        let mut t = m;
        transpose_128(&mut t);
        assert_eq!(t, expected);
        transpose_128(&mut t);
        assert_eq!(t, m);
    }

    /// `delta` and `q` of the sender, `b` and `t` of the receiver, per call.
    type Outputs = ((Block, Vec<Block>), (Vec<bool>, Vec<Block>));

    fn run(counts: &[usize]) -> Vec<Outputs> {
        let counts_r = counts.to_vec();
        let counts_s = counts.to_vec();
        let ((sent, s0), (received, s1)) = run_pair(
            LinkModel::UNLIMITED,
            move |ch| {
                let mut s = IknpSender::new(ch, &mut ChaCha20Rng::seed_from_u64(1))?;
                counts_s.iter().map(|&n| Ok((s.delta(), s.extend(ch, n)?))).collect::<Result<Vec<_>>>()
            },
            move |ch| {
                let mut r = IknpReceiver::new(ch, &mut ChaCha20Rng::seed_from_u64(2))?;
                counts_r.iter().map(|&n| r.extend(ch, n)).collect::<Result<Vec<_>>>()
            },
        )
        .unwrap();
        // Setup: 32 bytes one way, 32 * 128 the other; then 128 * ceil(m/8) per batch.
        let extension: u64 = counts.iter().map(|&m| 128 * m.div_ceil(8) as u64).sum();
        assert_eq!(s0.bytes_sent, 4096);
        assert_eq!(s0.bytes_received, 32 + extension);
        assert_eq!(s1.bytes_sent, 32 + extension);
        assert_eq!(s1.bytes_received, 4096);
        sent.into_iter().zip(received).collect()
    }

    #[test]
    fn random_cot_has_the_correlation() {
        let counts = [0usize, 1, 127, 128, 129, 10_000, 8, 7];
        let results = run(&counts);
        for (&n, ((delta, q), (b, t))) in counts.iter().zip(&results) {
            assert_eq!((q.len(), b.len(), t.len()), (n, n, n));
            for i in 0..n {
                assert_eq!(t[i], q[i] ^ if b[i] { *delta } else { 0 }, "count {n}, instance {i}");
            }
        }
        // Choice bits are balanced and outputs are fresh across calls.
        let (_, (b, _)) = &results[5];
        let ones = b.iter().filter(|&&x| x).count();
        assert!((4_500..5_500).contains(&ones), "{ones} ones in 10000 choice bits");
        let (_, (_, t3)) = &results[3];
        let (_, (_, t4)) = &results[4];
        assert!(t3.iter().all(|x| !t4.contains(x)));
        let delta = results[0].0 .0;
        assert!(delta.count_ones() > 32 && delta.count_ones() < 96);
    }

    #[test]
    fn batches_beyond_max_batch() {
        let n = MAX_BATCH + 300;
        let results = run(&[n]);
        let ((delta, q), (b, t)) = &results[0];
        assert!((0..n).all(|i| t[i] == q[i] ^ if b[i] { *delta } else { 0 }));
    }

    #[test]
    fn wrong_length_is_malformed() {
        let r = run_pair(
            LinkModel::UNLIMITED,
            |ch| {
                let mut s = IknpSender::new(ch, &mut ChaCha20Rng::seed_from_u64(1))?;
                s.extend(ch, 100)
            },
            |ch| {
                let _r = IknpReceiver::new(ch, &mut ChaCha20Rng::seed_from_u64(2))?;
                ch.send(&[0u8; 17])
            },
        );
        assert!(matches!(r, Err(MpcError::Malformed(_))), "{r:?}");
    }
}
