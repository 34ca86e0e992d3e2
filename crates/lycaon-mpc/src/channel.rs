//! The link between the two parties: whole messages, counted in bytes, messages and rounds, with
//! an optional model of the link's bandwidth and one-way delay so that a run on one machine can
//! report the time it would take at the papers' network settings.
//!
//! `Channel` is message-oriented: `send` hands over one message, `recv` returns the next one
//! whole. Byte counts are payload bytes (the framing of a transport is not counted, as SPU and
//! the papers count). A round is a change of direction: a party's round counter goes up when it
//! sends after having received (or sends first), so a protocol's rounds are the larger of the
//! two parties' counters.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use crate::{bits::Bits, cot::Block, MpcError, Result};

/// How long a party waits for a message before it gives up on its peer.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// What went over one party's end of a channel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChannelStats {
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub messages_sent: u64,
    pub messages_received: u64,
    pub rounds: u64,
}

impl ChannelStats {
    /// Bytes in both directions as seen from this end.
    pub fn total_bytes(&self) -> u64 {
        self.bytes_sent + self.bytes_received
    }

    /// What happened between an earlier snapshot and this one.
    pub fn since(&self, earlier: &ChannelStats) -> ChannelStats {
        ChannelStats {
            bytes_sent: self.bytes_sent - earlier.bytes_sent,
            bytes_received: self.bytes_received - earlier.bytes_received,
            messages_sent: self.messages_sent - earlier.messages_sent,
            messages_received: self.messages_received - earlier.messages_received,
            rounds: self.rounds - earlier.rounds,
        }
    }
}

/// A link's bandwidth and one-way delay (both directions alike). `None` bandwidth: unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LinkModel {
    pub bandwidth_bytes_per_s: Option<f64>,
    pub latency: Duration,
}

impl LinkModel {
    /// No emulation: messages arrive as fast as the transport carries them.
    pub const UNLIMITED: LinkModel = LinkModel { bandwidth_bytes_per_s: None, latency: Duration::ZERO };

    pub fn new(bandwidth_bytes_per_s: Option<f64>, latency: Duration) -> Result<Self> {
        if let Some(bw) = bandwidth_bytes_per_s {
            if !(bw.is_finite() && bw > 0.0) {
                return Err(MpcError::InvalidArgument(format!("bandwidth must be a positive number of bytes per second, not {bw}")));
            }
        }
        Ok(LinkModel { bandwidth_bytes_per_s, latency })
    }

    /// Time to put `bytes` on the wire.
    pub fn transmission(&self, bytes: usize) -> Duration {
        self.bandwidth_bytes_per_s.map_or(Duration::ZERO, |bw| Duration::from_secs_f64(bytes as f64 / bw))
    }
}

/// The sender-side clock of an emulated link: when the wire is free again, and when a message
/// put on it now arrives. Messages queue behind each other on the wire, as on a real link.
#[derive(Debug)]
pub(crate) struct LinkClock {
    model: LinkModel,
    wire_free_at: Instant,
}

impl LinkClock {
    pub(crate) fn new(model: LinkModel) -> Self {
        LinkClock { model, wire_free_at: Instant::now() }
    }

    /// The instant a message of `bytes` sent now is fully at the receiver.
    pub(crate) fn arrival(&mut self, bytes: usize) -> Instant {
        let start = self.wire_free_at.max(Instant::now());
        self.wire_free_at = start + self.model.transmission(bytes);
        self.wire_free_at + self.model.latency
    }
}

/// Counters shared by every transport.
#[derive(Debug, Default)]
pub(crate) struct Counter {
    stats: ChannelStats,
    last_was_send: bool,
}

impl Counter {
    pub(crate) fn sent(&mut self, bytes: usize) {
        if !self.last_was_send {
            self.stats.rounds += 1;
        }
        self.last_was_send = true;
        self.stats.bytes_sent += bytes as u64;
        self.stats.messages_sent += 1;
    }

    pub(crate) fn received(&mut self, bytes: usize) {
        self.last_was_send = false;
        self.stats.bytes_received += bytes as u64;
        self.stats.messages_received += 1;
    }

    pub(crate) fn stats(&self) -> ChannelStats {
        self.stats
    }
}

/// One party's end of a two-party link.
pub trait Channel: Send {
    /// Sends one message.
    fn send(&mut self, message: &[u8]) -> Result<()>;
    /// The next message from the peer, whole; an error if the peer is gone or silent too long.
    fn recv(&mut self) -> Result<Vec<u8>>;
    /// What this end has sent and received so far.
    fn stats(&self) -> ChannelStats;

    /// Sends blocks as one message (little-endian, 16 bytes each).
    fn send_blocks(&mut self, blocks: &[Block]) -> Result<()> {
        let bytes: Vec<u8> = blocks.iter().flat_map(|b| b.to_le_bytes()).collect();
        self.send(&bytes)
    }

    /// Receives a message of exactly `count` blocks.
    fn recv_blocks(&mut self, count: usize) -> Result<Vec<Block>> {
        let bytes = self.recv_exact(count * 16, "blocks")?;
        Ok(bytes.chunks_exact(16).map(|c| u128::from_le_bytes(c.try_into().expect("16-byte chunk"))).collect())
    }

    /// Sends 64-bit words as one message (little-endian).
    fn send_u64s(&mut self, words: &[u64]) -> Result<()> {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.send(&bytes)
    }

    /// Receives a message of exactly `count` 64-bit words.
    fn recv_u64s(&mut self, count: usize) -> Result<Vec<u64>> {
        let bytes = self.recv_exact(count * 8, "64-bit words")?;
        Ok(bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8-byte chunk"))).collect())
    }

    /// Sends bits packed eight to a byte.
    fn send_bits(&mut self, bits: &[bool]) -> Result<()> {
        self.send(&pack_bits(bits))
    }

    /// Receives `count` bits packed eight to a byte.
    fn recv_bits(&mut self, count: usize) -> Result<Vec<bool>> {
        Ok(self.recv_packed(count)?.to_bools())
    }

    /// Sends packed bits in the same bytes as [`Channel::send_bits`].
    fn send_packed(&mut self, bits: &Bits) -> Result<()> {
        self.send(&bits.to_bytes())
    }

    /// Receives `count` packed bits, as sent by `send_packed` or `send_bits`.
    fn recv_packed(&mut self, count: usize) -> Result<Bits> {
        let bytes = self.recv_exact(count.div_ceil(8), "packed bits")?;
        Ok(Bits::from_bytes(&bytes, count))
    }

    /// Sends words of `bits` bits each (1..=64), packed end to end: a share of a 20-bit ring
    /// costs 20 bits on the wire, not 64.
    fn send_words(&mut self, words: &[u64], bits: u32) -> Result<()> {
        self.send(&pack_words(words, bits))
    }

    /// Receives `count` words of `bits` bits each, as sent by `send_words`.
    fn recv_words(&mut self, count: usize, bits: u32) -> Result<Vec<u64>> {
        let bytes = self.recv_exact((count * bits as usize).div_ceil(8), "packed words")?;
        Ok(unpack_words(&bytes, count, bits))
    }

    /// The next message, which must be exactly `len` bytes long (`what` names it in the error).
    fn recv_exact(&mut self, len: usize, what: &str) -> Result<Vec<u8>> {
        let message = self.recv()?;
        if message.len() != len {
            return Err(MpcError::Malformed(format!("expected {len} bytes of {what}, got {}", message.len())));
        }
        Ok(message)
    }
}

/// Bits packed eight to a byte, least significant bit first.
pub fn pack_bits(bits: &[bool]) -> Vec<u8> {
    let mut out = vec![0u8; bits.len().div_ceil(8)];
    for (i, &b) in bits.iter().enumerate() {
        out[i / 8] |= (b as u8) << (i % 8);
    }
    out
}

/// The first `count` bits of `bytes`, least significant bit first.
pub fn unpack_bits(bytes: &[u8], count: usize) -> Vec<bool> {
    (0..count).map(|i| (bytes[i / 8] >> (i % 8)) & 1 == 1).collect()
}

/// Words of `bits` bits each, packed end to end, least significant bit first.
pub fn pack_words(words: &[u64], bits: u32) -> Vec<u8> {
    let mut packer = WordPacker::new(bits, words.len());
    words.iter().for_each(|&w| packer.push(w));
    packer.finish()
}

/// [`pack_words`] a word at a time, for words made on the fly (no array of them is ever whole).
pub struct WordPacker {
    out: Vec<u8>,
    // The pending bits, below 64 of them: a word that does not fit flushes the accumulator
    // and leaves its high part.
    acc: u64,
    pending: u32,
    bits: u32,
    mask: u64,
}

impl WordPacker {
    /// A packer of `bits`-bit words (1..=64) with room for `words` of them.
    pub fn new(bits: u32, words: usize) -> Self {
        assert!((1..=64).contains(&bits), "word width {bits} is not in 1..=64");
        let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
        WordPacker { out: Vec::with_capacity((words * bits as usize).div_ceil(8)), acc: 0, pending: 0, bits, mask }
    }

    /// Appends the low `bits` of `word`.
    #[inline]
    pub fn push(&mut self, word: u64) {
        let word = word & self.mask;
        self.acc |= word << self.pending;
        let filled = self.pending + self.bits;
        if filled >= 64 {
            self.out.extend_from_slice(&self.acc.to_le_bytes());
            // The part of the word that did not fit (none when it started a fresh accumulator).
            self.acc = word.checked_shr(64 - self.pending).unwrap_or(0);
            self.pending = filled - 64;
        } else {
            self.pending = filled;
        }
    }

    /// The packed bytes (the last one padded with zeros).
    pub fn finish(mut self) -> Vec<u8> {
        let tail = self.pending.div_ceil(8) as usize;
        self.out.extend_from_slice(&self.acc.to_le_bytes()[..tail]);
        self.out
    }
}

/// The first `count` words of `bits` bits each from bytes written by `pack_words`.
pub fn unpack_words(bytes: &[u8], count: usize, bits: u32) -> Vec<u64> {
    let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
    let mut out = Vec::with_capacity(count);
    let (mut acc, mut available) = (0u128, 0u32);
    let mut chunks = bytes.chunks(8);
    while out.len() < count {
        if available < bits {
            let chunk = chunks.next().unwrap_or(&[]);
            let mut buf = [0u8; 8];
            buf[..chunk.len()].copy_from_slice(chunk);
            acc |= (u64::from_le_bytes(buf) as u128) << available;
            available += 64;
        }
        out.push(acc as u64 & mask);
        acc >>= bits;
        available -= bits;
    }
    out
}

/// One end of an in-process channel (the two parties in two threads of one process).
pub struct MemoryChannel {
    tx: Sender<(Instant, Vec<u8>)>,
    rx: Receiver<(Instant, Vec<u8>)>,
    clock: LinkClock,
    counter: Counter,
    timeout: Duration,
}

impl MemoryChannel {
    /// Two connected ends with no link emulation.
    pub fn pair() -> (MemoryChannel, MemoryChannel) {
        Self::pair_with(LinkModel::UNLIMITED, DEFAULT_TIMEOUT)
    }

    /// Two connected ends over an emulated link; `recv` gives up after `timeout`.
    pub fn pair_with(link: LinkModel, timeout: Duration) -> (MemoryChannel, MemoryChannel) {
        let (tx_a, rx_b) = mpsc::channel();
        let (tx_b, rx_a) = mpsc::channel();
        let end = |tx, rx| MemoryChannel { tx, rx, clock: LinkClock::new(link), counter: Counter::default(), timeout };
        (end(tx_a, rx_a), end(tx_b, rx_b))
    }
}

impl Channel for MemoryChannel {
    fn send(&mut self, message: &[u8]) -> Result<()> {
        let arrival = self.clock.arrival(message.len());
        self.tx.send((arrival, message.to_vec())).map_err(|_| MpcError::PeerClosed("in-process peer dropped its end".into()))?;
        self.counter.sent(message.len());
        Ok(())
    }

    fn recv(&mut self) -> Result<Vec<u8>> {
        let (arrival, message) = self.rx.recv_timeout(self.timeout).map_err(|e| match e {
            RecvTimeoutError::Timeout => MpcError::Timeout(self.timeout),
            RecvTimeoutError::Disconnected => MpcError::PeerClosed("in-process peer dropped its end".into()),
        })?;
        let now = Instant::now();
        if arrival > now {
            std::thread::sleep(arrival - now);
        }
        self.counter.received(message.len());
        Ok(message)
    }

    fn stats(&self) -> ChannelStats {
        self.counter.stats()
    }
}

/// Runs the two halves of a protocol in two threads over an in-memory channel and returns both
/// results with both ends' counters. Party 0's half runs on the calling thread.
pub fn run_pair<A, B, RA, RB>(link: LinkModel, party0: A, party1: B) -> Result<((RA, ChannelStats), (RB, ChannelStats))>
where
    A: FnOnce(&mut dyn Channel) -> Result<RA>,
    B: FnOnce(&mut dyn Channel) -> Result<RB> + Send,
    RB: Send,
{
    let (mut c0, mut c1) = MemoryChannel::pair_with(link, DEFAULT_TIMEOUT);
    std::thread::scope(|scope| {
        let other = scope.spawn(move || {
            let r = party1(&mut c1);
            r.map(|v| (v, c1.stats()))
        });
        let mine = party0(&mut c0).map(|v| (v, c0.stats()));
        drop(c0); // a failed party 0 must not leave party 1 waiting out its timeout
        let theirs = other.join().map_err(|_| MpcError::PeerClosed("party 1 panicked".into()))?;
        match (mine, theirs) {
            (Ok(a), Ok(b)) => Ok((a, b)),
            // One side failing makes the other see a closed channel: report the cause.
            (Err(MpcError::PeerClosed(_)), Err(cause)) | (Err(cause), _) | (_, Err(cause)) => Err(cause),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_bytes_messages_and_rounds() {
        let ((_, s0), (_, s1)) = run_pair(
            LinkModel::UNLIMITED,
            |ch| {
                ch.send(&[1, 2, 3])?;
                ch.send(&[4])?;
                let m = ch.recv()?;
                assert_eq!(m, vec![9; 10]);
                ch.send_blocks(&[7, 8])
            },
            |ch| {
                assert_eq!(ch.recv()?, vec![1, 2, 3]);
                assert_eq!(ch.recv()?, vec![4]);
                ch.send(&[9; 10])?;
                assert_eq!(ch.recv_blocks(2)?, vec![7, 8]);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!((s0.bytes_sent, s0.bytes_received, s0.messages_sent, s0.rounds), (36, 10, 3, 2));
        assert_eq!((s1.bytes_sent, s1.bytes_received, s1.rounds), (10, 36, 1));
    }

    #[test]
    fn link_model_delays_delivery() {
        let link = LinkModel::new(Some(1e6), Duration::from_millis(20)).unwrap();
        let start = Instant::now();
        run_pair(link, |ch| ch.send(&vec![0u8; 50_000]), |ch| ch.recv().map(|_| ())).unwrap();
        // 50 kB at 1 MB/s is 50 ms on the wire, plus 20 ms of delay.
        assert!(start.elapsed() >= Duration::from_millis(70), "{:?}", start.elapsed());
    }

    #[test]
    fn dropped_peer_and_silence_are_errors() {
        let (mut a, b) = MemoryChannel::pair_with(LinkModel::UNLIMITED, Duration::from_millis(50));
        assert!(matches!(a.recv(), Err(MpcError::Timeout(_))));
        drop(b);
        assert!(matches!(a.recv(), Err(MpcError::PeerClosed(_))));
        assert!(matches!(a.send(&[1]), Err(MpcError::PeerClosed(_))));
    }

    #[test]
    fn wrong_length_is_malformed() {
        let (mut a, mut b) = MemoryChannel::pair();
        a.send(&[0; 15]).unwrap();
        assert!(matches!(b.recv_blocks(1), Err(MpcError::Malformed(_))));
        for bits in [1, 7, 20, 37, 63, 64] {
            let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
            let words: Vec<u64> = (0..29u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) & mask).collect();
            let packed = pack_words(&words, bits);
            assert_eq!(packed.len(), (29 * bits as usize).div_ceil(8));
            assert_eq!(unpack_words(&packed, 29, bits), words, "{bits} bits");
        }
        assert_eq!(
            unpack_bits(&pack_bits(&[true, false, true, true, false, false, false, false, true]), 9),
            [true, false, true, true, false, false, false, false, true]
        );
    }

    proptest::proptest! {
        #[test]
        fn packed_words_are_their_bits_end_to_end(bits in 1u32..=64, words in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..40)) {
            let packed = pack_words(&words, bits);
            let width = bits as usize;
            let expected = crate::bits::Bits::from_fn(words.len() * width, |i| (words[i / width] >> (i % width)) & 1 == 1);
            proptest::prop_assert_eq!(&packed, &expected.to_bytes());
            let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
            proptest::prop_assert_eq!(unpack_words(&packed, words.len(), bits), words.iter().map(|w| w & mask).collect::<Vec<_>>());
        }
    }
}
