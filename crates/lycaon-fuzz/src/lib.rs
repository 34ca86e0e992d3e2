//! A coverage-free mutational fuzzer that runs on stable Rust (cargo-fuzz needs nightly, which CI
//! does not have). Each target parses bytes with a deserialiser; the fuzzer mutates valid objects
//! (bit flips, interesting integers, header edits, truncation, splicing) and, for most inputs,
//! repairs the checksum so that mutations reach the payload parsers behind it. A panic or an
//! input slower than the hang limit is a crash.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use lycaon_rlwe::wire::{CHECKSUM_LEN, HEADER_LEN};

pub mod targets;

/// Parses one input and says whether it was accepted; it must never panic.
pub type Parser = Box<dyn Fn(&[u8]) -> bool + Sync + Send>;

/// One deserialiser under test.
pub struct FuzzTarget {
    pub name: &'static str,
    pub seeds: Vec<Vec<u8>>,
    pub run: Parser,
}

#[derive(Debug, Default)]
pub struct FuzzStats {
    pub inputs: u64,
    pub accepted: u64,
    pub rejected: u64,
    pub crashes: Vec<(Vec<u8>, String)>,
    pub slowest: Duration,
}

/// SplitMix64: deterministic and dependency-free.
struct Prng(u64);

impl Prng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }
}

/// Recomputes the trailing checksum of an envelope (and optionally its payload length field).
pub fn fix_envelope_checksum(bytes: &mut [u8], fix_length: bool) {
    if bytes.len() < HEADER_LEN + CHECKSUM_LEN {
        return;
    }
    let body_end = bytes.len() - CHECKSUM_LEN;
    if fix_length {
        let len = (body_end - HEADER_LEN) as u64;
        bytes[HEADER_LEN - 8..HEADER_LEN].copy_from_slice(&len.to_le_bytes());
    }
    let sum = blake3::hash(&bytes[..body_end]);
    bytes[body_end..].copy_from_slice(&sum.as_bytes()[..CHECKSUM_LEN]);
}

const INTERESTING: [u64; 12] = [0, 1, 2, 0x7f, 0x80, 0xff, 0xffff, 0xffff_ffff, u64::MAX, 1 << 31, 1 << 40, 1 << 63];

fn mutate(input: &mut Vec<u8>, rng: &mut Prng, seeds: &[Vec<u8>]) {
    let rounds = 1 + rng.below(8);
    for _ in 0..rounds {
        let len = input.len();
        match rng.below(12) {
            0 if len > 0 => {
                let i = rng.below(len);
                input[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                input[i] = [0u8, 1, 0x7f, 0x80, 0xff, rng.next() as u8][rng.below(6)];
            }
            2 if len >= 8 => {
                let width = [1usize, 2, 4, 8][rng.below(4)];
                let i = rng.below(len - width + 1);
                let v = INTERESTING[rng.below(INTERESTING.len())].wrapping_add(rng.below(3) as u64).wrapping_sub(1);
                input[i..i + width].copy_from_slice(&v.to_le_bytes()[..width]);
            }
            3 => {
                let i = rng.below(len + 1);
                let count = 1 + rng.below(16);
                for _ in 0..count {
                    input.insert(i, rng.next() as u8);
                }
            }
            4 if len > 0 => {
                let i = rng.below(len);
                let end = (i + 1 + rng.below(32)).min(len);
                input.drain(i..end);
            }
            5 => input.truncate(rng.below(len + 1)),
            6 if len > 0 => {
                let i = rng.below(len);
                let end = (i + 1 + rng.below(64)).min(len);
                let chunk = input[i..end].to_vec();
                let at = rng.below(len + 1);
                input.splice(at..at, chunk);
            }
            7 if !seeds.is_empty() => {
                let other = &seeds[rng.below(seeds.len())];
                let cut = rng.below(len.min(other.len()) + 1);
                input.truncate(cut);
                input.extend_from_slice(&other[cut..]);
            }
            8 if len >= HEADER_LEN => {
                // Header fields: version, kind, flags, params id, payload length.
                match rng.below(5) {
                    0 => input[4] = rng.below(4) as u8,
                    1 => input[6] = rng.below(12) as u8,
                    2 => input[7] = rng.below(2) as u8,
                    3 => input[8 + rng.below(32)] ^= 1,
                    _ => {
                        let v = INTERESTING[rng.below(INTERESTING.len())];
                        input[40..48].copy_from_slice(&v.to_le_bytes());
                    }
                }
            }
            9 if len > HEADER_LEN + 4 => {
                // Small fields at the start of the payload (counts, levels, bit widths).
                let i = HEADER_LEN + rng.below(8.min(len - HEADER_LEN));
                input[i] = [0u8, 1, 2, 3, 0xff, rng.next() as u8][rng.below(6)];
            }
            10 => input.resize(rng.below(2 * len + 64), rng.next() as u8),
            _ => {}
        }
    }
}

/// Runs `iterations` mutated inputs through the target.
pub fn fuzz(target: &FuzzTarget, iterations: u64, seed: u64, hang_limit: Duration) -> FuzzStats {
    let mut rng = Prng(seed ^ blake3::hash(target.name.as_bytes()).as_bytes()[0] as u64);
    let mut stats = FuzzStats::default();
    let mut corpus: Vec<Vec<u8>> = target.seeds.clone();
    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    for i in 0..iterations {
        let base = &corpus[rng.below(corpus.len())];
        let mut input = base.clone();
        mutate(&mut input, &mut rng, &target.seeds);
        if rng.below(10) != 0 {
            fix_envelope_checksum(&mut input, rng.below(2) == 0);
        }
        let start = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| (target.run)(&input)));
        let elapsed = start.elapsed();
        stats.slowest = stats.slowest.max(elapsed);
        stats.inputs += 1;
        if elapsed > hang_limit {
            stats.crashes.push((input.clone(), format!("hang: {elapsed:?}")));
        }
        match outcome {
            Ok(true) => {
                stats.accepted += 1;
                // Keep some accepted mutants: they reach deeper states than the seeds.
                if corpus.len() < 256 && i % 7 == 0 {
                    corpus.push(input);
                }
            }
            Ok(false) => stats.rejected += 1,
            Err(payload) => {
                let msg = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panic".into());
                stats.crashes.push((input, msg));
            }
        }
    }
    std::panic::set_hook(previous_hook);
    stats
}
