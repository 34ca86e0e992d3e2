//! Oblivious transfer derived from random correlated OT (`q_i`; `b_i`, `t_i = q_i ^ b_i·Δ`) of
//! any source, IKNP or silent: chosen-message 1-out-of-2 OT of blocks, random OT, correlated OT
//! of words modulo any M <= 2^64, and random and chosen-message 1-out-of-N OT for N = 2^k.
//!
//! Every derived key is `H(q_i ⊕ x·Δ, tweak)` with `H` the tweakable circular
//! correlation-robust hash of GKWY20 (`crh::Hasher::tccr`) and a tweak unique to the COT
//! instance: both sides count the COTs they have consumed through this wrapper (`next_index`),
//! so the two halves of every call must be made in the same order on both sides.
//!
//! * Chosen 1-of-2 OT (Beaver's derandomisation): the receiver sends `d_i = c_i ⊕ b_i`; the
//!   sender sends `y_i^x = m_i^x ⊕ H(q_i ⊕ (x ⊕ d_i)·Δ, i)`; the receiver outputs
//!   `y_i^{c_i} ⊕ H(t_i, i)`. Cost: 1 COT, 1 bit up, 256 bits down per instance.
//! * Correlated OT modulo M (as in the IKNP/ALSZ13 "C-OT" used by SecureML and CrypTFlow2): the
//!   sender's output `x_i = H(K_i^0) mod M` is random, it sends `y_i = x_i + a_i − H(K_i^1) mod M`
//!   and the receiver outputs `H(K_i^{c_i}) + c_i·y_i = x_i + c_i·a_i mod M`. Cost: 1 COT, 1 bit
//!   up (the choice is chosen, not the COT's random bit), ⌈log2 M⌉ bits down per instance.
//!   Reducing a 128-bit hash modulo M has statistical distance below 2^-64 from uniform.
//! * Random 1-of-N OT from k = log2 N COTs (1-out-of-N from log N random 1-out-of-2 OTs): the
//!   per-bit keys `K_j^c = H(q_j ⊕ c·Δ, (idx_j, 0))` are hashed apart first, so they are
//!   independent random keys of which the receiver knows exactly `K_j^{b_j}`; message `x` of an
//!   instance is `H(⊕_j K_j^{x_j}, (idx_0, 1 + x))`. For `x` other than the receiver's choice the
//!   XOR contains a key it does not know, so (modelling H as a random oracle) every other message
//!   is uniform and independent of what it holds; the outer hash also removes the XOR relations
//!   among messages that XOR-ing bare keys would leave (`m_00 ⊕ m_01 ⊕ m_10 ⊕ m_11 = 0`). The
//!   sender hashes `2k + N` blocks per instance (24 for N = 16, where a PRF per key and index,
//!   Naor and Pinkas, STOC 1999, costs `N·k` = 64), the receiver `k + 1`. No communication
//!   beyond the COTs.
//! * Chosen 1-of-N OT of `l`-bit messages: random 1-of-N, then the receiver sends
//!   `e_i = c_i ⊕ r_i` (k bits) and the sender sends `y_{i,x} = M_{i,x} ⊕ m_{i, x ⊕ e_i}`
//!   (N·l bits); the receiver outputs `y_{i,c_i} ⊕ m_{i,r_i}`.
//!
//! * With a vector-OT generator (`enable_vector_ot`, silent sessions): a random 1-of-2^k OT,
//!   k <= m, is one vector correlation (u; v, w = v ⊕ L(u)): message `x` goes under
//!   `H(v ⊕ L(x ⊕ e), (idx, x))` where the receiver sends `e = c ⊕ u` (m bits), and the receiver's
//!   pad is `H(w, (idx, c))`. For `x ≠ c` the input differs from `w` by `L(x ⊕ c)`, a nonzero
//!   combination of the secret basis: unknown to the receiver. Own hash key and index counter.
//!
//! All instances of one call travel in one message per direction (plus the COT source's own).
//! Security: semi-honest, as the COT source.

use rayon::prelude::*;

use crate::bits::Bits;
use crate::channel::{Channel, WordPacker};
use crate::cot::{BatchCost, Block, CotReceiver, CotSender};
use crate::crh::{derive_key, Hasher};
use crate::ferret::{VoleReceiver, VoleSender};
use crate::{MpcError, Result};

/// Largest k = log2 N of 1-out-of-N OT (N = 256: the sender hashes N·k blocks per instance).
pub const MAX_LOG_N: u32 = 8;

/// The tweak of COT instance `index`, output index `x`.
#[inline]
fn tweak(index: u64, x: u64) -> Block {
    (u128::from(index) << 64) | u128::from(x)
}

#[inline]
fn select(bit: bool, delta: Block) -> Block {
    (bit as u128).wrapping_neg() & delta
}

/// The modulus of correlated OT, checked: 2 <= M <= 2^64. Returns its width in bits.
fn modulus_bits(modulus: u128) -> Result<u32> {
    if !(2..=1u128 << 64).contains(&modulus) {
        return Err(MpcError::InvalidArgument(format!("the modulus of correlated OT must be in [2, 2^64], not {modulus}")));
    }
    Ok(128 - (modulus - 1).leading_zeros())
}

/// `h mod M` for a 128-bit hash.
#[inline]
fn reduce(h: Block, modulus: u128) -> u64 {
    if modulus.is_power_of_two() {
        (h & (modulus - 1)) as u64
    } else {
        (h % modulus) as u64
    }
}

fn check_log_n(log_n: u32) -> Result<usize> {
    if !(1..=MAX_LOG_N).contains(&log_n) {
        return Err(MpcError::InvalidArgument(format!("1-out-of-N OT needs N = 2^k with 1 <= k <= {MAX_LOG_N}, not k = {log_n}")));
    }
    Ok(1usize << log_n)
}

fn word_mask(bits: u32) -> Result<u64> {
    if !(1..=64).contains(&bits) {
        return Err(MpcError::InvalidArgument(format!("message width must be 1..=64 bits, not {bits}")));
    }
    Ok(if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 })
}

/// Instances of 1-out-of-N OT processed together: their keys and pads stay in cache. A multiple
/// of 8, so a whole chunk's packed messages end on a byte boundary.
const INSTANCES_PER_CHUNK: usize = 512;
const _: () = assert!(INSTANCES_PER_CHUNK.is_multiple_of(8));

/// The N random messages of each 1-out-of-N instance whose k COTs are `q` (instance-major), the
/// first COT having tweak index `first`: m_x = H(XOR_j K_j^{x_j}, (index of the instance's first
/// COT, 1 + x)) with K_j^c = H(q_j ^ c delta, (index_j, 0)).
fn one_of_n_pads(hasher: &Hasher, q: &[Block], delta: Block, first: u64, k: usize) -> Vec<Block> {
    let n_msgs = 1usize << k;
    let mut keys: Vec<Block> = q.iter().flat_map(|&q| [q, q ^ delta]).collect();
    hasher.tccr_many(&mut keys, |p| tweak(first + (p / 2) as u64, 0));
    let count = q.len() / k;
    let mut pads = vec![0u128; count * n_msgs];
    for (i, msgs) in pads.chunks_exact_mut(n_msgs).enumerate() {
        let own = &keys[2 * i * k..2 * (i + 1) * k];
        for (x, m) in msgs.iter_mut().enumerate() {
            *m = (0..k).fold(0, |acc, j| acc ^ own[2 * j + ((x >> j) & 1)]);
        }
    }
    hasher.tccr_many(&mut pads, |p| tweak(first + ((p / n_msgs) * k) as u64, 1 + (p % n_msgs) as u64));
    pads
}

/// Bits `[offset, offset + bits)` of a little-endian bit string, as a word.
fn read_bits(bytes: &[u8], offset: usize, bits: u32) -> u64 {
    let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
    let start = offset / 8;
    // One 8-byte load where the word and its shift fit in it (the common case: short words).
    if bits <= 56 {
        if let Some(chunk) = bytes.get(start..start + 8) {
            return (u64::from_le_bytes(chunk.try_into().expect("8 bytes")) >> (offset % 8)) & mask;
        }
    }
    let mut buf = [0u8; 16];
    let end = (offset + bits as usize).div_ceil(8).min(bytes.len());
    buf[..end - start].copy_from_slice(&bytes[start..end]);
    ((u128::from_le_bytes(buf) >> (offset % 8)) as u64) & mask
}

/// Checks the width of a random-OT word (1 to 8 bits).
fn check_short_word(bits: u32) -> Result<()> {
    if !(1..=8).contains(&bits) {
        return Err(MpcError::InvalidArgument(format!("random OT words are 1..=8 bits, not {bits}")));
    }
    Ok(())
}

/// A word type for the messages of chosen 1-out-of-N OT: narrow messages (a comparison's two
/// bits) can be passed as bytes, so the sender's N-fold message array is an eighth the size.
pub trait OtWord: Copy + Into<u64> + Sync {}
impl OtWord for u8 {}
impl OtWord for u16 {}
impl OtWord for u32 {}
impl OtWord for u64 {}

/// COTs whose derived keys are hashed and used together (a few tens of KB, in the core's caches):
/// the bulk OT kinds never hold an array of 2n keys.
const KEYS_PER_CHUNK: usize = 1 << 10;
const _: () = assert!(KEYS_PER_CHUNK.is_multiple_of(64));

/// Both keys of each COT, `H(q_i ⊕ d_i·Δ, base + i)` and `H(q_i ⊕ (1 ⊕ d_i)·Δ, base + i)`,
/// interleaved (`d` absent: all zero).
fn key_pairs(hasher: &Hasher, delta: Block, q: &[Block], d: Option<&[bool]>, base: u64) -> Vec<Block> {
    let mut keys: Vec<Block> = q
        .iter()
        .enumerate()
        .flat_map(|(i, &q)| {
            let k0 = q ^ select(d.is_some_and(|d| d[i]), delta);
            [k0, k0 ^ delta]
        })
        .collect();
    hasher.tccr_many(&mut keys, |k| tweak(base + (k / 2) as u64, 0));
    keys
}

/// The receiver's keys `H(t_i, base + i)`, in place.
fn receiver_keys(hasher: &Hasher, t: &mut [Block], base: u64) {
    hasher.tccr_many(t, |i| tweak(base + i as u64, 0));
}

/// Bit planes as bare words: plane k's words hold bit k of each of a run of words.
type PlaneWords = Vec<Vec<u64>>;

/// The low `bits` of `key(0..count)` as bit planes.
fn plane_words(count: usize, bits: u32, key: impl Fn(usize) -> Block) -> PlaneWords {
    let mut planes = vec![vec![0u64; count.div_ceil(64)]; bits as usize];
    for (w, start) in (0..count).step_by(64).enumerate() {
        let mut words = [0u64; 8];
        for i in start..count.min(start + 64) {
            let k = key(i) as u64;
            for (b, word) in words.iter_mut().enumerate().take(bits as usize) {
                *word |= ((k >> b) & 1) << (i - start);
            }
        }
        for (plane, word) in planes.iter_mut().zip(words) {
            plane[w] = word;
        }
    }
    planes
}

/// `planes` planes of `count` bits from per-chunk plane words (chunks of [`KEYS_PER_CHUNK`]
/// instances, a multiple of 64, so every chunk but the last fills whole words): plane k is the
/// chunks' words of plane k in turn.
fn joined_planes(chunks: &[PlaneWords], planes: usize, count: usize) -> Vec<Bits> {
    (0..planes).map(|k| Bits::from_words(chunks.iter().flat_map(|c| c[k].iter().copied()).collect(), count)).collect()
}

/// Buffers a call is done with, kept for the next COT batch to be made in
/// (`CotSender::extend_into`): a comparison asks for megabytes of COTs per call, and a fresh
/// vector's pages cost the kernel a clearing pass each (a fifth of a short ReLU run's CPU).
#[derive(Debug)]
struct Spares<T> {
    kept: Vec<Vec<T>>,
}

/// Buffers kept per kind: a few, for calls of different sizes in turn (a comparison's leaf OTs,
/// its AND triples, the multiplexer's correlated OTs).
const SPARE_BUFFERS: usize = 3;

impl<T> Spares<T> {
    fn new() -> Self {
        Spares { kept: Vec::new() }
    }

    /// The kept buffer that holds `n` most tightly, else the largest (it grows), else a new one.
    fn take(&mut self, n: usize) -> Vec<T> {
        let by_capacity = |(_, v): &(usize, &Vec<T>)| v.capacity();
        let fits = self.kept.iter().enumerate().filter(|(_, v)| v.capacity() >= n).min_by_key(by_capacity);
        match fits.or_else(|| self.kept.iter().enumerate().max_by_key(by_capacity)) {
            Some((i, _)) => self.kept.swap_remove(i),
            None => Vec::new(),
        }
    }

    /// Keeps `v` for a later [`Self::take`], dropping the smallest buffer beyond the limit.
    fn give_back(&mut self, v: Vec<T>) {
        self.kept.push(v);
        if self.kept.len() > SPARE_BUFFERS {
            if let Some((i, _)) = self.kept.iter().enumerate().min_by_key(|(_, v)| v.capacity()) {
                self.kept.swap_remove(i);
            }
        }
    }
}

/// The sender's side of every OT kind, over a random-COT sender `C`.
#[derive(Debug)]
pub struct OtSender<C: CotSender> {
    cot: C,
    hasher: Hasher,
    next_index: u64,
    spares: Spares<Block>,
    vector: Option<VectorOt<VoleSender>>,
}

/// The receiver's side of every OT kind, over a random-COT receiver `C`.
#[derive(Debug)]
pub struct OtReceiver<C: CotReceiver> {
    cot: C,
    hasher: Hasher,
    next_index: u64,
    spare_bits: Spares<bool>,
    spares: Spares<Block>,
    vector: Option<VectorOt<VoleReceiver>>,
}

/// A vector-OT generator serving 1-out-of-N OTs up to its width, with its own hash key and
/// instance counter (its keys are never those of a COT).
#[derive(Debug)]
struct VectorOt<G> {
    generator: G,
    hasher: Hasher,
    next_index: u64,
    /// The last call's correlations' buffers, reused (a fresh one costs a page fault a page).
    spare: Vec<Block>,
    spare_values: Vec<u8>,
}

impl<G> VectorOt<G> {
    fn new(generator: G) -> Self {
        VectorOt {
            generator,
            hasher: Hasher::with_key(derive_key("lycaon-mpc vector OT 1-of-N", &[])),
            next_index: 0,
            spare: Vec::new(),
            spare_values: Vec::new(),
        }
    }
}

/// Whether a vector-OT generator of `width`-bit values serves every 1-out-of-2^k OT of a call.
fn vector_serves(width: u32, mut log_ns: impl Iterator<Item = u32>) -> bool {
    log_ns.all(|k| k <= width)
}

impl<C: CotSender> OtSender<C> {
    /// Wraps a COT source whose peer is wrapped by `OtReceiver::new` on the other side.
    pub fn new(cot: C) -> Self {
        OtSender { cot, hasher: Hasher::new(), next_index: 0, spares: Spares::new(), vector: None }
    }

    /// The COT source (COTs taken from it directly do not disturb the tweak counters).
    pub fn cot_mut(&mut self) -> &mut C {
        &mut self.cot
    }

    pub fn cot(&self) -> &C {
        &self.cot
    }

    pub fn into_inner(self) -> C {
        self.cot
    }

    /// COTs consumed through this wrapper so far.
    pub fn cots_used(&self) -> u64 {
        self.next_index
    }

    /// Sets up a vector-OT generator of `bits`-bit values over this COT source (with the
    /// peer's [`OtReceiver::enable_vector_ot`]): from then on each 1-out-of-2^k OT with
    /// k <= `bits` takes one vector correlation instead of k COTs (see `ferret::vole`).
    /// Errors: the generator's setup.
    pub fn enable_vector_ot(&mut self, channel: &mut dyn Channel, bits: u32) -> Result<()> {
        self.vector = Some(VectorOt::new(VoleSender::setup(channel, &mut self.cot, bits)?));
        Ok(())
    }

    /// The vector-OT generator's correlations consumed so far and its batch traffic (None
    /// without one).
    pub fn vector_ots(&self) -> Option<(u64, BatchCost)> {
        self.vector.as_ref().map(|v| (v.next_index, v.generator.batch_cost()))
    }

    /// `n` fresh COTs and the tweak index of the first, in a kept buffer where there is one
    /// (hand it back with [`Self::recycle`]).
    fn take(&mut self, channel: &mut dyn Channel, n: usize) -> Result<(Vec<Block>, u64)> {
        let mut q = self.spares.take(n);
        self.cot.extend_into(channel, n, &mut q)?;
        if q.len() != n {
            return Err(MpcError::Crypto(format!("the COT source gave {} correlations, not {n}", q.len())));
        }
        let base = self.next_index;
        self.next_index += n as u64;
        Ok((q, base))
    }

    fn recycle(&mut self, q: Vec<Block>) {
        self.spares.give_back(q);
    }

    /// `n` fresh COTs derandomised to the receiver's chosen bits: receives its corrections
    /// `d = c ⊕ b` and returns both keys of each, key `c_i` being the one it can compute.
    fn chosen_key_pairs(&mut self, channel: &mut dyn Channel, n: usize) -> Result<Vec<Block>> {
        let (q, base) = self.take(channel, n)?;
        let d = channel.recv_bits(n)?;
        let keys = key_pairs(&self.hasher, self.cot.delta(), &q, Some(&d), base);
        self.recycle(q);
        Ok(keys)
    }

    /// Random OT: `count` pairs of random keys; the receiver learns one of each.
    /// No communication beyond the COT source's.
    pub fn send_random(&mut self, channel: &mut dyn Channel, count: usize) -> Result<Vec<(Block, Block)>> {
        let (q, base) = self.take(channel, count)?;
        let keys = key_pairs(&self.hasher, self.cot.delta(), &q, None, base);
        self.recycle(q);
        Ok(keys.chunks_exact(2).map(|k| (k[0], k[1])).collect())
    }

    /// Random OT of short words: the low `bits` (1 to 8) of each of [`Self::send_random`]'s keys
    /// (the receiver's [`OtReceiver::receive_random`] keys give its word the same way), hashed a
    /// chunk at a time, as bit planes: plane k of `(s0, s1)` holds bit k of every pair's words.
    /// Errors: `InvalidArgument` for a width outside 1..=8.
    pub fn send_random_words(&mut self, channel: &mut dyn Channel, count: usize, bits: u32) -> Result<(Vec<Bits>, Vec<Bits>)> {
        check_short_word(bits)?;
        let (q, base) = self.take(channel, count)?;
        let (hasher, delta) = (&self.hasher, self.cot.delta());
        // Per chunk, the planes of s0 and then those of s1.
        let chunks: Vec<PlaneWords> = q
            .par_chunks(KEYS_PER_CHUNK)
            .enumerate()
            .map(|(c, q)| {
                let keys = key_pairs(hasher, delta, q, None, base + (c * KEYS_PER_CHUNK) as u64);
                let mut planes = plane_words(q.len(), bits, |i| keys[2 * i]);
                planes.extend(plane_words(q.len(), bits, |i| keys[2 * i + 1]));
                planes
            })
            .collect();
        self.recycle(q);
        let mut planes = joined_planes(&chunks, 2 * bits as usize, count).into_iter();
        let s0 = planes.by_ref().take(bits as usize).collect();
        Ok((s0, planes.collect()))
    }

    /// Chosen-message 1-out-of-2 OT: the receiver learns `messages[i].c_i`.
    /// Receives `⌈n/8⌉` bytes, sends `32 n` bytes (after the COT source's traffic).
    /// Errors: the channel's and the COT source's; `Malformed` on a message of the wrong length.
    pub fn send_chosen(&mut self, channel: &mut dyn Channel, messages: &[(Block, Block)]) -> Result<()> {
        let n = messages.len();
        if n == 0 {
            return Ok(());
        }
        let keys = self.chosen_key_pairs(channel, n)?;
        let masked: Vec<Block> = messages.iter().zip(keys.chunks_exact(2)).flat_map(|(&(m0, m1), k)| [m0 ^ k[0], m1 ^ k[1]]).collect();
        channel.send_blocks(&masked)
    }

    /// Correlated OT modulo `modulus` (2 <= M <= 2^64, e.g. `ShareRing::modulus()`): returns
    /// random `x_i` in [0, M); the receiver learns `x_i + c_i·a_i mod M`.
    /// Receives `⌈n/8⌉` bytes, sends `⌈n·⌈log2 M⌉/8⌉` bytes (after the COT source's traffic).
    /// Errors (checked first, before any communication): `InvalidArgument` for a bad modulus or
    /// an `a_i >= M`; then the channel's and the COT source's.
    pub fn send_correlated(&mut self, channel: &mut dyn Channel, correlations: &[u64], modulus: u128) -> Result<Vec<u64>> {
        let bits = modulus_bits(modulus)?;
        if let Some(a) = correlations.iter().find(|&&a| u128::from(a) >= modulus) {
            return Err(MpcError::InvalidArgument(format!("correlation {a} is not below the modulus {modulus}")));
        }
        let n = correlations.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let (q, base) = self.take(channel, n)?;
        let d = channel.recv_bits(n)?;
        let (hasher, delta) = (&self.hasher, self.cot.delta());
        let (x, y): (Vec<u64>, Vec<u64>) = q
            .par_chunks(KEYS_PER_CHUNK)
            .zip(d.par_chunks(KEYS_PER_CHUNK))
            .zip(correlations.par_chunks(KEYS_PER_CHUNK))
            .enumerate()
            .flat_map_iter(|(c, ((q, d), a))| {
                let keys = key_pairs(hasher, delta, q, Some(d), base + (c * KEYS_PER_CHUNK) as u64);
                a.iter()
                    .zip(keys.chunks_exact(2))
                    .map(|(&a, k)| {
                        let x = reduce(k[0], modulus);
                        let pad = reduce(k[1], modulus);
                        (x, ((u128::from(x) + u128::from(a) + modulus - u128::from(pad)) % modulus) as u64)
                    })
                    .collect::<Vec<_>>()
            })
            .unzip();
        self.recycle(q);
        channel.send_words(&y, bits)?;
        Ok(x)
    }

    /// Random 1-out-of-N OT, N = 2^log_n: `count * N` random messages, instance `i`'s message
    /// `x` at `i * N + x`; the receiver learns one per instance. Uses `count * log_n` COTs and
    /// no further communication. Errors: `InvalidArgument` unless 1 <= log_n <= `MAX_LOG_N`.
    pub fn send_random_1_of_n(&mut self, channel: &mut dyn Channel, log_n: u32, count: usize) -> Result<Vec<Block>> {
        check_log_n(log_n)?;
        let k = log_n as usize;
        let (q, base) = self.take(channel, count * k)?;
        let (hasher, delta) = (&self.hasher, self.cot.delta());
        let pads = q
            .par_chunks(INSTANCES_PER_CHUNK * k)
            .enumerate()
            .flat_map_iter(|(c, q)| one_of_n_pads(hasher, q, delta, base + (c * INSTANCES_PER_CHUNK * k) as u64, k))
            .collect();
        self.recycle(q);
        Ok(pads)
    }

    /// Chosen-message 1-out-of-N OT of `bits`-bit messages (`messages[i * N + x]`, N = 2^log_n):
    /// the receiver learns `messages[i * N + c_i]`. Uses `count * log_n` COTs; receives
    /// `⌈count·log_n/8⌉` bytes and sends `⌈count·N·bits/8⌉` bytes.
    /// Errors (checked first): `InvalidArgument` for a bad `log_n` or `bits`, a message count
    /// that is not a multiple of N, or a message wider than `bits`; then the channel's.
    pub fn send_chosen_1_of_n<M: OtWord>(&mut self, channel: &mut dyn Channel, log_n: u32, messages: &[M], bits: u32) -> Result<()> {
        self.send_chosen_1_of_n_batches(channel, &[(log_n, bits, messages)])
    }

    /// Several chosen 1-out-of-N OTs, each `(log_n, bits, messages)` as in
    /// [`Self::send_chosen_1_of_n`], in one round trip: every batch's corrections are read before
    /// any batch's messages are sent (the receiver's [`OtReceiver::receive_chosen_1_of_n_batches`]
    /// sends them all first).
    pub fn send_chosen_1_of_n_batches<M: OtWord>(&mut self, channel: &mut dyn Channel, batches: &[(u32, u32, &[M])]) -> Result<()> {
        self.send_1_of_n_batches(channel, batches, Delivery::Chosen).map(drop)
    }

    /// Shared-output 1-out-of-N OT, in batches as [`Self::send_chosen_1_of_n_batches`]: instance
    /// i's `functions[i * N + x]` is f_i(x), and the parties end with XOR shares of f_i(c_i): the
    /// sender's share (returned, one vector per batch) is `f_i(0) ⊕ m_{i, e_i}`, so the message for
    /// x = 0 is zero and not sent: N - 1 messages per instance, `⌈count·(N-1)·bits/8⌉` bytes.
    /// The share is pseudorandom to the receiver unless it chose 0, when its own output is
    /// `m_{i, r_i}` = the share ⊕ f_i(0), as the functionality gives it. Errors: as the chosen
    /// variant's.
    pub fn send_shared_1_of_n_batches<M: OtWord>(&mut self, channel: &mut dyn Channel, batches: &[(u32, u32, &[M])]) -> Result<Vec<Vec<u64>>> {
        self.send_1_of_n_batches(channel, batches, Delivery::Shared)
    }

    fn send_1_of_n_batches<M: OtWord>(&mut self, channel: &mut dyn Channel, batches: &[(u32, u32, &[M])], delivery: Delivery) -> Result<Vec<Vec<u64>>> {
        let mut counts = Vec::with_capacity(batches.len());
        for &(log_n, bits, messages) in batches {
            let n_msgs = check_log_n(log_n)?;
            let mask = word_mask(bits)?;
            let count = messages.len() / n_msgs;
            if count * n_msgs != messages.len() {
                return Err(MpcError::InvalidArgument(format!("{} messages are not a whole number of instances of {n_msgs}", messages.len())));
            }
            if let Some(m) = messages.iter().map(|&m| m.into()).find(|&m| m & !mask != 0) {
                return Err(MpcError::InvalidArgument(format!("message {m} is wider than {bits} bits")));
            }
            counts.push(count);
        }
        // The random OTs: one vector correlation per instance where the generator is wide enough
        // for every batch (corrections of its width), else log N COTs per instance.
        let vector_bits = self.vector.as_ref().filter(|v| vector_serves(v.generator.bits(), batches.iter().map(|b| b.0))).map(|v| v.generator.bits());
        let (correlations, base) = match (vector_bits, self.vector.as_mut()) {
            (Some(_), Some(vector)) => {
                let mut v = std::mem::take(&mut vector.spare);
                vector.generator.extend_into(channel, &mut self.cot, counts.iter().sum(), &mut v)?;
                (v, vector.next_index)
            }
            _ => self.take(channel, batches.iter().zip(&counts).map(|(&(log_n, _, _), &count)| count * log_n as usize).sum())?,
        };
        let mut corrections = Vec::with_capacity(batches.len());
        for (&(log_n, _, _), &count) in batches.iter().zip(&counts) {
            corrections.push(if count == 0 { Vec::new() } else { channel.recv_words(count, vector_bits.unwrap_or(log_n))? });
        }
        let mut shares = Vec::with_capacity(batches.len());
        // Where the batch's correlations start: instances (vector) or COTs.
        let mut offset = 0;
        for ((&(log_n, bits, messages), e), &count) in batches.iter().zip(&corrections).zip(&counts) {
            if count == 0 {
                shares.push(Vec::new());
                continue;
            }
            let (k, n_msgs, base) = (log_n as usize, 1usize << log_n, base + offset as u64);
            let (packed, own) = match &self.vector {
                Some(vector) if vector_bits.is_some() => {
                    let (v, span, hasher) = (&correlations[offset..offset + count], vector.generator.span(), &vector.hasher);
                    offset += count;
                    // Message x of instance i goes under H(v_i ^ L(x ^ e_i), (i, x)); the
                    // receiver's w_i = v_i ^ L(u_i) with e_i = c_i ^ u_i is that input for x = c_i.
                    masked_1_of_n(count, log_n, messages, bits, delivery, |first, len| {
                        let mut p = Vec::with_capacity(len * n_msgs);
                        for i in first..first + len {
                            let (v, e) = (v[i], e[i] as usize);
                            p.extend((0..n_msgs).map(|x| v ^ span[x ^ e]));
                        }
                        // Shifts, not divisions: N is a power of two known only at run time.
                        hasher.tccr_many(&mut p, |j| tweak(base + (first + (j >> log_n)) as u64, (j & (n_msgs - 1)) as u64));
                        p
                    })
                }
                _ => {
                    let (q, hasher, delta) = (&correlations[offset..offset + count * k], &self.hasher, self.cot.delta());
                    offset += count * k;
                    // Random 1-of-N pads from k COTs each, then message x's at x ^ e_i.
                    masked_1_of_n(count, log_n, messages, bits, delivery, |first, len| {
                        let random = one_of_n_pads(hasher, &q[first * k..(first + len) * k], delta, base + (first * k) as u64, k);
                        (0..len).flat_map(|i| (0..n_msgs).map(move |x| (i, x))).map(|(i, x)| random[i * n_msgs + (x ^ e[first + i] as usize)]).collect()
                    })
                }
            };
            channel.send(&packed)?;
            shares.push(own);
        }
        match self.vector.as_mut().filter(|_| vector_bits.is_some()) {
            Some(vector) => {
                vector.next_index += offset as u64;
                vector.spare = correlations;
            }
            None => self.recycle(correlations),
        }
        Ok(shares)
    }
}

/// The sender's packed message of one 1-out-of-N batch of `count` instances, every message
/// masked with its pad (`pads(first, len)`: instances first..first + len, message x of each at
/// x, as the receiver's correction points them), and (shared delivery) the sender's shares.
fn masked_1_of_n<M: OtWord>(
    count: usize,
    log_n: u32,
    messages: &[M],
    bits: u32,
    delivery: Delivery,
    pads: impl Fn(usize, usize) -> Vec<Block> + Sync,
) -> (Vec<u8>, Vec<u64>) {
    let (n_msgs, mask) = (1usize << log_n, if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 });
    let skipped = delivery.skipped();
    // Chunk by chunk: pads, masking and packing, so no N-fold block array is ever whole. Returns
    // the chunk's packed words and its shares.
    let masked_chunk = |c: usize| -> (Vec<u8>, Vec<u64>) {
        let first = c * INSTANCES_PER_CHUNK;
        let pads = pads(first, INSTANCES_PER_CHUNK.min(count - first));
        let instances = pads.len() / n_msgs;
        let mut packer = WordPacker::new(bits, instances * (n_msgs - skipped));
        let mut shares = Vec::with_capacity(if skipped == 0 { 0 } else { instances });
        for (i, pads) in pads.chunks_exact(n_msgs).enumerate() {
            let msgs = &messages[(first + i) * n_msgs..(first + i + 1) * n_msgs];
            let share = if skipped == 0 {
                0
            } else {
                let share = (msgs[0].into() ^ pads[0] as u64) & mask;
                shares.push(share);
                share
            };
            for (&m, &pad) in msgs.iter().zip(pads).skip(skipped) {
                packer.push(m.into() ^ share ^ pad as u64);
            }
        }
        (packer.finish(), shares)
    };
    let chunks: Vec<(Vec<u8>, Vec<u64>)> = (0..count.div_ceil(INSTANCES_PER_CHUNK)).into_par_iter().map(masked_chunk).collect();
    let shares = chunks.iter().flat_map(|(_, s)| s.iter().copied()).collect();
    // Every chunk but the last holds a multiple of 8 instances, so it ends on a byte boundary
    // and the message is the chunks' bytes in turn.
    (chunks.iter().flat_map(|(bytes, _)| bytes.iter().copied()).collect(), shares)
}

/// What a 1-out-of-N OT delivers: the chosen message (all N sent), or XOR shares of it (the
/// sender's share fixed by message 0's pad, so N - 1 are sent).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Delivery {
    Chosen,
    Shared,
}

impl Delivery {
    /// Messages per instance not sent.
    fn skipped(self) -> usize {
        match self {
            Delivery::Chosen => 0,
            Delivery::Shared => 1,
        }
    }
}

impl<C: CotReceiver> OtReceiver<C> {
    /// Wraps a COT source whose peer is wrapped by `OtSender::new` on the other side.
    pub fn new(cot: C) -> Self {
        OtReceiver { cot, hasher: Hasher::new(), next_index: 0, spare_bits: Spares::new(), spares: Spares::new(), vector: None }
    }

    /// The COT source (COTs taken from it directly do not disturb the tweak counters).
    pub fn cot_mut(&mut self) -> &mut C {
        &mut self.cot
    }

    /// The receiver's half of [`OtSender::enable_vector_ot`], with the same `bits`.
    pub fn enable_vector_ot(&mut self, channel: &mut dyn Channel, bits: u32) -> Result<()> {
        self.vector = Some(VectorOt::new(VoleReceiver::setup(channel, &mut self.cot, bits)?));
        Ok(())
    }

    pub fn into_inner(self) -> C {
        self.cot
    }

    /// `n` fresh COTs and the tweak index of the first, in kept buffers where there are some
    /// (hand them back with [`Self::recycle`]).
    fn take(&mut self, channel: &mut dyn Channel, n: usize) -> Result<(Vec<bool>, Vec<Block>, u64)> {
        let (mut b, mut t) = (self.spare_bits.take(n), self.spares.take(n));
        self.cot.extend_into(channel, n, &mut b, &mut t)?;
        if b.len() != n || t.len() != n {
            return Err(MpcError::Crypto(format!("the COT source gave {} correlations, not {n}", t.len())));
        }
        let base = self.next_index;
        self.next_index += n as u64;
        Ok((b, t, base))
    }

    fn recycle(&mut self, b: Vec<bool>, t: Vec<Block>) {
        self.spare_bits.give_back(b);
        self.spares.give_back(t);
    }

    /// `n` fresh COTs derandomised to `choices`: sends the corrections `d = c ⊕ b` and returns
    /// the keys `H(t_i, i)`, each the sender's key `c_i`.
    fn chosen_keys(&mut self, channel: &mut dyn Channel, choices: &[bool]) -> Result<Vec<Block>> {
        let (b, mut t, base) = self.take(channel, choices.len())?;
        let d: Vec<bool> = choices.iter().zip(&b).map(|(&c, &b)| c ^ b).collect();
        self.spare_bits.give_back(b);
        channel.send_bits(&d)?;
        self.keys(&mut t, base);
        Ok(t)
    }

    /// `H(t_i, i)` in place.
    fn keys(&self, t: &mut [Block], base: u64) {
        receiver_keys(&self.hasher, t, base);
    }

    /// Random OT: random choice bits and the chosen key of each of the sender's pairs.
    pub fn receive_random(&mut self, channel: &mut dyn Channel, count: usize) -> Result<(Vec<bool>, Vec<Block>)> {
        let (b, mut t, base) = self.take(channel, count)?;
        self.keys(&mut t, base);
        Ok((b, t))
    }

    /// Random OT of short words ([`OtSender::send_random_words`]): random choices and the low
    /// `bits` of each chosen key, as bit planes.
    pub fn receive_random_words(&mut self, channel: &mut dyn Channel, count: usize, bits: u32) -> Result<(Bits, Vec<Bits>)> {
        check_short_word(bits)?;
        let (b, mut t, base) = self.take(channel, count)?;
        let hasher = &self.hasher;
        // Per chunk (hashed and packed while in cache), the choices' words, then the planes.
        let chunks: Vec<PlaneWords> = t
            .par_chunks_mut(KEYS_PER_CHUNK)
            .zip(b.par_chunks(KEYS_PER_CHUNK))
            .enumerate()
            .map(|(c, (t, b))| {
                receiver_keys(hasher, t, base + (c * KEYS_PER_CHUNK) as u64);
                let mut planes = vec![Bits::from_bools(b).words().to_vec()];
                planes.extend(plane_words(t.len(), bits, |i| t[i]));
                planes
            })
            .collect();
        self.recycle(b, t);
        let mut planes = joined_planes(&chunks, 1 + bits as usize, count).into_iter();
        let choices = planes.next().unwrap_or_default();
        Ok((choices, planes.collect()))
    }

    /// Chosen-message 1-out-of-2 OT: `messages[i].choices[i]` of the sender's messages.
    /// Sends `⌈n/8⌉` bytes, receives `32 n` bytes (after the COT source's traffic).
    /// Errors: the channel's and the COT source's; `Malformed` on a message of the wrong length.
    pub fn receive_chosen(&mut self, channel: &mut dyn Channel, choices: &[bool]) -> Result<Vec<Block>> {
        let n = choices.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let t = self.chosen_keys(channel, choices)?;
        let masked = channel.recv_blocks(2 * n)?;
        let out = choices.iter().enumerate().map(|(i, &c)| masked[2 * i + c as usize] ^ t[i]).collect();
        self.spares.give_back(t);
        Ok(out)
    }

    /// Correlated OT modulo `modulus`: `x_i + c_i·a_i mod M` for the sender's `x_i`, `a_i`.
    /// Sends `⌈n/8⌉` bytes, receives `⌈n·⌈log2 M⌉/8⌉` bytes (after the COT source's traffic).
    /// Errors: `InvalidArgument` for a bad modulus (checked first); the channel's; `Malformed`
    /// if a received word is not below M.
    pub fn receive_correlated(&mut self, channel: &mut dyn Channel, choices: &[bool], modulus: u128) -> Result<Vec<u64>> {
        let bits = modulus_bits(modulus)?;
        let n = choices.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let t = self.chosen_keys(channel, choices)?;
        let y = channel.recv_words(n, bits)?;
        if y.iter().any(|&y| u128::from(y) >= modulus) {
            return Err(MpcError::Malformed(format!("a correlated-OT word is not below the modulus {modulus}")));
        }
        let out = t
            .par_iter()
            .zip(y.par_iter())
            .zip(choices.par_iter())
            .map(|((&k, &y), &c)| {
                let pad = u128::from(reduce(k, modulus));
                ((pad + if c { u128::from(y) } else { 0 }) % modulus) as u64
            })
            .collect();
        self.spares.give_back(t);
        Ok(out)
    }

    /// Random 1-out-of-N OT, N = 2^log_n: random choices `c_i` in [0, N) and the sender's
    /// message `c_i` of each instance. Uses `count * log_n` COTs and no further communication.
    /// Errors: `InvalidArgument` unless 1 <= log_n <= `MAX_LOG_N`.
    pub fn receive_random_1_of_n(&mut self, channel: &mut dyn Channel, log_n: u32, count: usize) -> Result<(Vec<u32>, Vec<Block>)> {
        check_log_n(log_n)?;
        let (b, mut t, base) = self.take(channel, count * log_n as usize)?;
        let out = self.random_1_of_n(&b, &mut t, base, log_n);
        self.recycle(b, t);
        Ok(out)
    }

    /// The choices and chosen messages of random 1-out-of-2^`log_n` OTs from the COTs `b`, `t`
    /// whose first has tweak index `base` (`t` is hashed in place).
    fn random_1_of_n(&self, b: &[bool], t: &mut [Block], base: u64, log_n: u32) -> (Vec<u32>, Vec<Block>) {
        let k = log_n as usize;
        let choices: Vec<u32> = b.chunks_exact(k).map(|bits| bits.iter().enumerate().map(|(j, &bit)| u32::from(bit) << j).sum()).collect();
        self.keys(t, base);
        let mut messages: Vec<Block> = t.chunks_exact(k).map(|keys| keys.iter().fold(0, |acc, h| acc ^ h)).collect();
        self.hasher.tccr_many(&mut messages, |i| tweak(base + (i * k) as u64, 1 + u64::from(choices[i])));
        (choices, messages)
    }

    /// Chosen-message 1-out-of-N OT of `bits`-bit messages: message `choices[i]` (< N) of each
    /// instance. Uses `count * log_n` COTs; sends `⌈count·log_n/8⌉` bytes and receives
    /// `⌈count·N·bits/8⌉` bytes. Errors (checked first): `InvalidArgument` for a bad `log_n`,
    /// `bits` or a choice >= N; then the channel's.
    pub fn receive_chosen_1_of_n(&mut self, channel: &mut dyn Channel, log_n: u32, choices: &[u32], bits: u32) -> Result<Vec<u64>> {
        Ok(self.receive_chosen_1_of_n_batches(channel, &[(log_n, bits, choices)])?.remove(0))
    }

    /// Several chosen 1-out-of-N OTs, each `(log_n, bits, choices)` as in
    /// [`Self::receive_chosen_1_of_n`], in one round trip: sends every batch's corrections, then
    /// reads every batch's messages. One output vector per batch.
    pub fn receive_chosen_1_of_n_batches(&mut self, channel: &mut dyn Channel, batches: &[(u32, u32, &[u32])]) -> Result<Vec<Vec<u64>>> {
        self.receive_1_of_n_batches(channel, batches, Delivery::Chosen)
    }

    /// The receiver of [`OtSender::send_shared_1_of_n_batches`]: its XOR shares of f_i(c_i).
    pub fn receive_shared_1_of_n_batches(&mut self, channel: &mut dyn Channel, batches: &[(u32, u32, &[u32])]) -> Result<Vec<Vec<u64>>> {
        self.receive_1_of_n_batches(channel, batches, Delivery::Shared)
    }

    fn receive_1_of_n_batches(&mut self, channel: &mut dyn Channel, batches: &[(u32, u32, &[u32])], delivery: Delivery) -> Result<Vec<Vec<u64>>> {
        for &(log_n, bits, choices) in batches {
            let n_msgs = check_log_n(log_n)?;
            word_mask(bits)?;
            if let Some(c) = choices.iter().find(|&&c| c as usize >= n_msgs) {
                return Err(MpcError::InvalidArgument(format!("choice {c} is not below N = {n_msgs}")));
            }
        }
        // Each instance's pad (the chosen message's), batch after batch.
        let pads = match self.vector.as_mut().filter(|v| vector_serves(v.generator.bits(), batches.iter().map(|b| b.0))) {
            Some(vector) => {
                // One vector correlation (u, w) per instance: sends e = c ^ u (m bits), keeps
                // H(w, (i, c)), the pad of message c (see the sender).
                let bits = vector.generator.bits();
                let (mut u, mut w) = (std::mem::take(&mut vector.spare_values), std::mem::take(&mut vector.spare));
                vector.generator.extend_into(channel, &mut self.cot, batches.iter().map(|&(_, _, c)| c.len()).sum(), &mut u, &mut w)?;
                let mut offset = 0;
                for &(_, _, choices) in batches {
                    let range = offset..offset + choices.len();
                    let e: Vec<u64> = choices.iter().zip(&u[range.clone()]).map(|(&c, &u)| u64::from(c ^ u32::from(u))).collect();
                    if !choices.is_empty() {
                        channel.send_words(&e, bits)?;
                    }
                    let base = vector.next_index + offset as u64;
                    vector.hasher.tccr_many(&mut w[range], |i| tweak(base + i as u64, u64::from(choices[i])));
                    offset += choices.len();
                }
                vector.next_index += offset as u64;
                vector.spare_values = u;
                w
            }
            None => self.cot_pads(channel, batches)?,
        };
        let skipped = delivery.skipped();
        let mut out = Vec::with_capacity(batches.len());
        let mut offset = 0;
        for &(log_n, bits, choices) in batches {
            let pads = &pads[offset..offset + choices.len()];
            offset += choices.len();
            if choices.is_empty() {
                out.push(Vec::new());
                continue;
            }
            let (sent, mask) = ((1usize << log_n) - skipped, word_mask(bits)?);
            let masked = channel.recv_exact((choices.len() * sent * bits as usize).div_ceil(8), "1-out-of-N OT messages")?;
            // Only the chosen word of each instance is read out of the packed messages; under
            // shared delivery message 0 is zero and not sent.
            out.push(
                choices
                    .par_iter()
                    .enumerate()
                    .map(|(i, &c)| {
                        let word = match (c as usize).checked_sub(skipped) {
                            Some(x) => read_bits(&masked, (i * sent + x) * bits as usize, bits),
                            None => 0,
                        };
                        (word ^ pads[i] as u64) & mask
                    })
                    .collect(),
            );
        }
        // The pads' buffer serves the next call's vector correlations.
        if let Some(vector) = self.vector.as_mut().filter(|v| v.spare.capacity() < pads.capacity()) {
            vector.spare = pads;
        }
        Ok(out)
    }

    /// The receiver's pads of 1-out-of-N batches from k COTs per instance: sends each batch's
    /// corrections e = c ^ r (k bits), returns the pads of the chosen messages.
    fn cot_pads(&mut self, channel: &mut dyn Channel, batches: &[(u32, u32, &[u32])]) -> Result<Vec<Block>> {
        // Every batch's COTs in one buffer (as the sender takes them), batch after batch.
        let (b, mut t, base) = self.take(channel, batches.iter().map(|&(log_n, _, choices)| choices.len() * log_n as usize).sum())?;
        let mut pads = Vec::with_capacity(batches.iter().map(|&(_, _, c)| c.len()).sum());
        let mut offset = 0;
        for &(log_n, _, choices) in batches {
            let used = choices.len() * log_n as usize;
            if used == 0 {
                continue;
            }
            let (r, p) = self.random_1_of_n(&b[offset..offset + used], &mut t[offset..offset + used], base + offset as u64, log_n);
            let e: Vec<u64> = choices.iter().zip(&r).map(|(&c, &r)| u64::from(c ^ r)).collect();
            channel.send_words(&e, log_n)?;
            pads.extend(p);
            offset += used;
        }
        self.recycle(b, t);
        Ok(pads)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::{run_pair, ChannelStats, LinkModel};
    use crate::iknp::{IknpReceiver, IknpSender};
    use rand_chacha::ChaCha20Rng;
    use rand_core::{Rng, SeedableRng};

    type Sender = OtSender<IknpSender>;
    type Receiver = OtReceiver<IknpReceiver>;

    /// Runs the two halves over IKNP; the returned stats exclude the IKNP setup.
    fn with_ot<A, B, RA, RB>(sender: A, receiver: B) -> ((RA, ChannelStats), (RB, ChannelStats))
    where
        A: FnOnce(&mut Sender, &mut dyn Channel) -> Result<RA>,
        B: FnOnce(&mut Receiver, &mut dyn Channel) -> Result<RB> + Send,
        RB: Send,
    {
        let ((a, sa), (b, sb)) = run_pair(
            LinkModel::UNLIMITED,
            |ch| {
                let mut s = OtSender::new(IknpSender::new(ch, &mut ChaCha20Rng::seed_from_u64(11))?);
                let setup = ch.stats();
                Ok((sender(&mut s, ch)?, setup))
            },
            |ch| {
                let mut r = OtReceiver::new(IknpReceiver::new(ch, &mut ChaCha20Rng::seed_from_u64(12))?);
                let setup = ch.stats();
                Ok((receiver(&mut r, ch)?, setup))
            },
        )
        .unwrap();
        ((a.0, sa.since(&a.1)), (b.0, sb.since(&b.1)))
    }

    fn rng(seed: u64) -> ChaCha20Rng {
        ChaCha20Rng::seed_from_u64(seed)
    }

    fn blocks(n: usize, seed: u64) -> Vec<Block> {
        let mut r = rng(seed);
        (0..n).map(|_| (u128::from(r.next_u64()) << 64) | u128::from(r.next_u64())).collect()
    }

    fn bits(n: usize, seed: u64) -> Vec<bool> {
        let mut r = rng(seed);
        (0..n).map(|_| r.next_u32() & 1 == 1).collect()
    }

    /// IKNP's receiver-to-sender bytes for n COTs.
    fn iknp_bytes(n: usize) -> u64 {
        128 * n.div_ceil(8) as u64
    }

    const COUNTS: [usize; 6] = [0, 1, 127, 128, 129, 10_000];

    #[test]
    fn chosen_ot_outputs_the_chosen_messages() {
        for n in COUNTS {
            let m0 = blocks(n, 1);
            let m1 = blocks(n, 2);
            let choices = bits(n, 3);
            let messages: Vec<(Block, Block)> = m0.iter().copied().zip(m1.iter().copied()).collect();
            let c = choices.clone();
            let ((_, ss), (out, rs)) = with_ot(|s, ch| s.send_chosen(ch, &messages), move |r, ch| r.receive_chosen(ch, &c));
            let expected: Vec<Block> = (0..n).map(|i| if choices[i] { m1[i] } else { m0[i] }).collect();
            assert_eq!(out, expected, "n = {n}");
            let up = if n == 0 { 0 } else { iknp_bytes(n) + n.div_ceil(8) as u64 };
            assert_eq!((rs.bytes_sent, ss.bytes_sent), (up, 32 * n as u64), "n = {n}");
            assert_eq!((ss.bytes_received, rs.bytes_received), (up, 32 * n as u64));
        }
    }

    #[test]
    fn random_word_ot_gives_the_chosen_keys_low_bits() {
        for bits in [1u32, 2, 8] {
            for n in COUNTS.iter().copied().chain([3 * KEYS_PER_CHUNK + 5]) {
                let (((s0, s1), _), ((b, keys), _)) = with_ot(|s, ch| s.send_random_words(ch, n, bits), move |r, ch| r.receive_random(ch, n));
                assert_eq!((s0.len(), s1.len()), (bits as usize, bits as usize));
                for (k, (p0, p1)) in s0.iter().zip(&s1).enumerate() {
                    assert_eq!((p0.len(), p1.len()), (n, n));
                    for i in 0..n {
                        let bit = (keys[i] >> k) & 1 == 1;
                        assert_eq!(bit, if b[i] { p1.get(i) } else { p0.get(i) }, "instance {i} of {n}, bit {k} of {bits}");
                    }
                    // The words are not constant: each bit of a pair is about half ones.
                    let ones = p0.to_bools().into_iter().filter(|&x| x).count();
                    assert!(n < 100 || (n / 3..2 * n / 3).contains(&ones), "{ones} ones of {n}");
                }
            }
        }
        let ((refused, _), _) = with_ot(|s, ch| Ok(s.send_random_words(ch, 4, 9).err()), |_, _| Ok(()));
        assert!(refused.is_some_and(|e| e.to_string().contains("1..=8 bits")));
    }

    #[test]
    fn random_ot_gives_the_chosen_key() {
        for n in COUNTS {
            let ((pairs, _), ((b, keys), _)) = with_ot(|s, ch| s.send_random(ch, n), move |r, ch| r.receive_random(ch, n));
            assert_eq!((pairs.len(), keys.len()), (n, n));
            for i in 0..n {
                assert_eq!(keys[i], if b[i] { pairs[i].1 } else { pairs[i].0 });
                assert_ne!(pairs[i].0, pairs[i].1);
            }
        }
    }

    #[test]
    fn correlated_ot_adds_the_correlation() {
        let moduli: [u128; 8] = [2, 3, 1 << 17, 65_537, 1 << 37, (1 << 61) - 1, (1u128 << 64) - 59, 1 << 64];
        for n in COUNTS {
            for &m in &moduli {
                let mut r = rng(n as u64 ^ m as u64);
                let a: Vec<u64> = (0..n).map(|_| (u128::from(r.next_u64()) % m) as u64).collect();
                let choices = bits(n, 7);
                let c = choices.clone();
                let ((x, ss), (y, rs)) = with_ot(|s, ch| s.send_correlated(ch, &a, m), move |r, ch| r.receive_correlated(ch, &c, m));
                for i in 0..n {
                    assert!(u128::from(x[i]) < m && u128::from(y[i]) < m);
                    let want = (u128::from(x[i]) + if choices[i] { u128::from(a[i]) } else { 0 }) % m;
                    assert_eq!(u128::from(y[i]), want, "n = {n}, M = {m}, i = {i}");
                }
                let width = modulus_bits(m).unwrap() as usize;
                if n > 0 {
                    assert_eq!(ss.bytes_sent, (n * width).div_ceil(8) as u64, "M = {m}");
                    assert_eq!(rs.bytes_sent, iknp_bytes(n) + n.div_ceil(8) as u64);
                }
            }
        }
        assert_eq!(modulus_bits(1 << 64).unwrap(), 64);
        assert_eq!(modulus_bits(65_537).unwrap(), 17);
        assert_eq!(modulus_bits(2).unwrap(), 1);
    }

    #[test]
    fn random_1_of_n_gives_the_chosen_message() {
        for log_n in [1u32, 2, 4, 8] {
            for n in [0usize, 1, 129, 1000] {
                let ((msgs, ss), ((c, m), rs)) = with_ot(move |s, ch| s.send_random_1_of_n(ch, log_n, n), move |r, ch| r.receive_random_1_of_n(ch, log_n, n));
                let big_n = 1usize << log_n;
                assert_eq!((msgs.len(), c.len(), m.len()), (n * big_n, n, n));
                for i in 0..n {
                    assert!((c[i] as usize) < big_n);
                    assert_eq!(m[i], msgs[i * big_n + c[i] as usize], "log N = {log_n}, instance {i}");
                    let mut row = msgs[i * big_n..(i + 1) * big_n].to_vec();
                    row.sort_unstable();
                    row.dedup();
                    assert_eq!(row.len(), big_n, "messages of one instance are distinct");
                    if log_n >= 2 {
                        let x = &msgs[i * big_n..];
                        assert_ne!(x[0] ^ x[1] ^ x[2] ^ x[3], 0, "no XOR relation among messages");
                    }
                }
                assert_eq!((ss.bytes_sent, rs.bytes_sent), (0, iknp_bytes(n * log_n as usize)));
                if n == 1000 && log_n == 2 {
                    // Random choices cover all of [0, N).
                    assert!((0..4).all(|v| c.contains(&v)));
                }
            }
        }
    }

    #[test]
    fn chosen_1_of_n_outputs_the_chosen_message() {
        for (log_n, width) in [(1u32, 1u32), (2, 8), (4, 1), (4, 17), (8, 64)] {
            for n in [0usize, 1, 127, 128, 129, 2_000] {
                let big_n = 1usize << log_n;
                let mask = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
                let mut r = rng(u64::from(log_n * 100 + width) + n as u64);
                let messages: Vec<u64> = (0..n * big_n).map(|_| r.next_u64() & mask).collect();
                let choices: Vec<u32> = (0..n).map(|_| r.next_u32() % big_n as u32).collect();
                let c = choices.clone();
                let ((_, ss), (out, rs)) =
                    with_ot(|s, ch| s.send_chosen_1_of_n(ch, log_n, &messages, width), move |r, ch| r.receive_chosen_1_of_n(ch, log_n, &c, width));
                let expected: Vec<u64> = (0..n).map(|i| messages[i * big_n + choices[i] as usize]).collect();
                assert_eq!(out, expected, "log N = {log_n}, width {width}, n = {n}");
                if n > 0 {
                    assert_eq!(ss.bytes_sent, (n * big_n * width as usize).div_ceil(8) as u64);
                    assert_eq!(rs.bytes_sent, iknp_bytes(n * log_n as usize) + (n * log_n as usize).div_ceil(8) as u64);
                }
            }
        }
    }

    #[test]
    fn chosen_1_of_n_batches_take_one_round_trip() {
        let mut r = rng(7);
        let shapes = [(3u32, 2u32, 300usize), (3, 1, 0), (4, 2, 1_000), (1, 5, 17)];
        let messages: Vec<Vec<u64>> = shapes.iter().map(|&(k, w, n)| (0..n << k).map(|_| r.next_u64() & ((1 << w) - 1)).collect()).collect();
        let choices: Vec<Vec<u32>> = shapes.iter().map(|&(k, _, n)| (0..n).map(|_| r.next_u32() % (1 << k)).collect()).collect();
        let (m, c) = (messages.clone(), choices.clone());
        let ((_, ss), (out, rs)) = with_ot(
            move |s, ch| s.send_chosen_1_of_n_batches(ch, &shapes.iter().zip(&m).map(|(&(k, w, _), m)| (k, w, &m[..])).collect::<Vec<_>>()),
            move |r, ch| r.receive_chosen_1_of_n_batches(ch, &shapes.iter().zip(&c).map(|(&(k, w, _), c)| (k, w, &c[..])).collect::<Vec<_>>()),
        );
        for (b, &(k, _, n)) in shapes.iter().enumerate() {
            let expected: Vec<u64> = (0..n).map(|i| messages[b][(i << k) + choices[b][i] as usize]).collect();
            assert_eq!(out[b], expected, "batch {b}");
        }
        // IKNP extension only sends receiver to sender, so all batches make one flight each way.
        assert_eq!((ss.rounds, rs.rounds), (1, 1));
    }

    #[test]
    fn shared_1_of_n_gives_shares_of_the_chosen_value_and_sends_one_message_fewer() {
        for (log_n, width) in [(1u32, 1u32), (2, 2), (3, 2), (3, 1), (4, 17), (8, 64)] {
            for n in [0usize, 1, 127, 128, 129, 2_000] {
                let big_n = 1usize << log_n;
                let mask = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
                let mut r = rng(u64::from(log_n * 1000 + width) + n as u64);
                let functions: Vec<u64> = (0..n * big_n).map(|_| r.next_u64() & mask).collect();
                // Every choice, 0 (the message not sent) among them.
                let choices: Vec<u32> = (0..n).map(|i| (i % big_n) as u32 ^ ((r.next_u32() % big_n as u32) * u32::from(i % 3 == 0))).collect();
                let (f, c) = (functions.clone(), choices.clone());
                let ((shares, ss), (out, rs)) = with_ot(
                    move |s, ch| s.send_shared_1_of_n_batches(ch, &[(log_n, width, &f[..])]),
                    move |r, ch| r.receive_shared_1_of_n_batches(ch, &[(log_n, width, &c[..])]),
                );
                for i in 0..n {
                    assert_eq!(shares[0][i] ^ out[0][i], functions[i * big_n + choices[i] as usize], "log N = {log_n}, width {width}, instance {i} of {n}");
                    assert!(shares[0][i] <= mask && out[0][i] <= mask);
                }
                if n >= 1_000 {
                    // The sender's shares are not a function of its inputs alone.
                    let zero = shares[0].iter().filter(|&&s| s & 1 == 0).count();
                    assert!((n / 3..2 * n / 3).contains(&zero), "{zero} of {n} shares even");
                }
                if n > 0 {
                    assert_eq!(ss.bytes_sent, (n * (big_n - 1) * width as usize).div_ceil(8) as u64);
                    assert_eq!(rs.bytes_sent, iknp_bytes(n * log_n as usize) + (n * log_n as usize).div_ceil(8) as u64);
                }
            }
        }
    }

    #[test]
    fn vector_1_of_n_serves_every_width_up_to_its_own_and_falls_back_beyond() {
        use crate::ferret::{FerretParameters, FerretReceiver, FerretSender};
        // Batches of widths 1 to 3 (one empty) over 3-bit vector correlations, shared and chosen
        // delivery; then a 4-bit batch, which goes over COTs.
        let n = 1_500usize;
        let mut r = rng(77);
        let shapes = [(3u32, 2u32), (1, 1), (2, 5), (3, 2)];
        let functions: Vec<Vec<u64>> =
            shapes.iter().enumerate().map(|(b, &(k, w))| (0..if b == 1 { 0 } else { n << k }).map(|_| r.next_u64() & ((1 << w) - 1)).collect()).collect();
        let choices: Vec<Vec<u32>> = shapes.iter().zip(&functions).map(|(&(k, _), f)| (0..f.len() >> k).map(|_| r.next_u32() % (1 << k)).collect()).collect();
        let wide: Vec<u64> = (0..n << 4).map(|_| r.next_u64() & 0xff).collect();
        let wide_choices: Vec<u32> = (0..n).map(|_| r.next_u32() % 16).collect();
        let (f, c, fw, cw) = (functions.clone(), choices.clone(), wide.clone(), wide_choices.clone());
        let (((shared, cots_before, wide_cots, used), _), ((got, chosen, wide_got), _)) = run_pair(
            LinkModel::UNLIMITED,
            move |ch| {
                let mut base = IknpSender::new(ch, &mut rng(1))?;
                let mut s = OtSender::new(FerretSender::setup(ch, &mut base, &FerretParameters::default())?);
                s.enable_vector_ot(ch, 3)?;
                let batches: Vec<(u32, u32, &[u64])> = shapes.iter().zip(&f).map(|(&(k, w), f)| (k, w, &f[..])).collect();
                let shared = s.send_shared_1_of_n_batches(ch, &batches)?;
                s.send_chosen_1_of_n_batches(ch, &batches)?;
                let cots = s.cots_used();
                s.send_chosen_1_of_n(ch, 4, &fw, 8)?;
                Ok((shared, cots, s.cots_used() - cots, s.vector_ots().map(|v| v.0)))
            },
            move |ch| {
                let mut base = IknpReceiver::new(ch, &mut rng(2))?;
                let mut r = OtReceiver::new(FerretReceiver::setup(ch, &mut base, &FerretParameters::default())?);
                r.enable_vector_ot(ch, 3)?;
                let batches: Vec<(u32, u32, &[u32])> = shapes.iter().zip(&c).map(|(&(k, w), c)| (k, w, &c[..])).collect();
                let got = r.receive_shared_1_of_n_batches(ch, &batches)?;
                let chosen = r.receive_chosen_1_of_n_batches(ch, &batches)?;
                Ok((got, chosen, r.receive_chosen_1_of_n(ch, 4, &cw, 8)?))
            },
        )
        .unwrap();
        for (b, (&(k, _), c)) in shapes.iter().zip(&choices).enumerate() {
            for (i, &c) in c.iter().enumerate() {
                let want = functions[b][(i << k) + c as usize];
                assert_eq!(shared[b][i] ^ got[b][i], want, "shared, batch {b}, instance {i}");
                assert_eq!(chosen[b][i], want, "chosen, batch {b}, instance {i}");
            }
        }
        for (i, &c) in wide_choices.iter().enumerate() {
            assert_eq!(wide_got[i], wide[(i << 4) + c as usize]);
        }
        // The 3-bit batches took one vector correlation per instance and no COT; the 4-bit one
        // four COTs per instance.
        let instances: usize = choices.iter().map(Vec::len).sum();
        assert_eq!((used, cots_before, wide_cots), (Some(2 * instances as u64), 0, 4 * n as u64));
    }

    #[test]
    fn spares_hand_out_the_tightest_buffer_and_keep_a_few() {
        let mut spares: Spares<u8> = Spares::new();
        assert_eq!(spares.take(10).capacity(), 0, "nothing kept: a new buffer");
        for size in [100, 10, 1000] {
            spares.give_back(Vec::with_capacity(size));
        }
        assert!((100..1000).contains(&spares.take(50).capacity()), "the tightest that holds 50");
        assert!(spares.take(5000).capacity() >= 1000, "none holds 5000: the largest, to grow");
        for size in [1, 2, 3, 4] {
            spares.give_back(Vec::with_capacity(size));
        }
        assert_eq!(spares.kept.len(), SPARE_BUFFERS);
        assert!(spares.kept.iter().all(|v| v.capacity() >= 2), "the smallest is dropped first");
    }

    #[test]
    fn calls_in_sequence_stay_in_step() {
        let a = vec![5u64; 300];
        let ((x, _), (y, _)) = with_ot(
            |s, ch| {
                s.send_chosen(ch, &[(1, 2); 10])?;
                s.send_random_1_of_n(ch, 3, 20)?;
                s.send_correlated(ch, &a, 1 << 20)
            },
            |r, ch| {
                assert_eq!(r.receive_chosen(ch, &[true; 10])?, vec![2; 10]);
                r.receive_random_1_of_n(ch, 3, 20)?;
                r.receive_correlated(ch, &[true; 300], 1 << 20)
            },
        );
        assert!((0..300).all(|i| y[i] == (x[i] + 5) % (1 << 20)));
    }

    #[test]
    fn invalid_arguments_are_refused_before_any_traffic() {
        let ((errors, ss), _) = with_ot(
            |s, ch| {
                Ok(vec![
                    s.send_correlated(ch, &[1], 1).err(),
                    s.send_correlated(ch, &[1], (1 << 64) + 1).err(),
                    s.send_correlated(ch, &[7], 7).err(),
                    s.send_random_1_of_n(ch, 0, 1).err(),
                    s.send_random_1_of_n(ch, MAX_LOG_N + 1, 1).err(),
                    s.send_chosen_1_of_n(ch, 2, &[0u64; 4], 0).err(),
                    s.send_chosen_1_of_n(ch, 2, &[0u64; 4], 65).err(),
                    s.send_chosen_1_of_n(ch, 2, &[0u64; 5], 8).err(),
                    s.send_chosen_1_of_n(ch, 2, &[256u64, 0, 0, 0], 8).err(),
                ])
            },
            |r, ch| {
                let e = r.receive_chosen_1_of_n(ch, 2, &[4], 8).err();
                assert!(matches!(e, Some(MpcError::InvalidArgument(_))));
                assert!(matches!(r.receive_correlated(ch, &[true], 0), Err(MpcError::InvalidArgument(_))));
                Ok(())
            },
        );
        for e in errors {
            assert!(matches!(e, Some(MpcError::InvalidArgument(_))), "{e:?}");
        }
        assert_eq!(ss.total_bytes(), 0);
    }

    /// The receiver's view of chosen OT (its COT outputs and the masked pairs) looks the same
    /// whatever the sender's messages: the masked messages it cannot open are balanced bits
    /// both when all messages are zero and when all are ones.
    #[test]
    fn receiver_view_does_not_reveal_unchosen_messages() {
        let n = 4096;
        for fill in [0u128, u128::MAX] {
            let choices = bits(n, 21);
            let c = choices.clone();
            let ((_, _), (ones, _)) = with_ot(
                |s, ch| s.send_chosen(ch, &vec![(fill, fill); n]),
                move |r, ch| {
                    let (b, _t, _) = r.take(ch, n)?;
                    let d: Vec<bool> = c.iter().zip(&b).map(|(&c, &b)| c ^ b).collect();
                    ch.send_bits(&d)?;
                    let masked = ch.recv_blocks(2 * n)?;
                    Ok((0..n).map(|i| masked[2 * i + 1 - c[i] as usize].count_ones() as u64).sum::<u64>())
                },
            );
            // 4096 * 128 bits, mean half; 6 standard deviations is 0.0066 of the mean.
            let total = (n * 128) as f64;
            let ratio = ones as f64 / total;
            assert!((ratio - 0.5).abs() < 6.0 * 0.5 / total.sqrt(), "fill {fill:#x}: ratio {ratio}");
            let _ = choices;
        }
    }
}
