//! Bindings of the two-party layer: run one protocol as both parties (two threads, an in-memory
//! channel with an optional link model) and report outputs, time, bytes and rounds.

use std::time::{Duration, Instant};

use lycaon_mpc::{
    channel::{run_pair, ChannelStats, LinkModel},
    compare::less_than,
    nonlinear::{convert, drelu, max_pool, relu, relu_bounded, relu_within, truncate, truncate_exact, truncate_relu},
    party::{OtKind, Party, Role},
    ring::ShareRing,
    MpcError,
};
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::LycaonError;

fn mpc_err(e: MpcError) -> PyErr {
    LycaonError::new_err(e.to_string())
}

/// A modulus given from Python: a power of two 2^l (l <= 64) or an odd prime below 2^62.
fn ring_of(modulus: u128) -> PyResult<ShareRing> {
    if modulus.is_power_of_two() {
        ShareRing::power_of_two(modulus.trailing_zeros()).map_err(mpc_err)
    } else if modulus < (1 << 62) {
        ShareRing::prime(modulus as u64).map_err(mpc_err)
    } else {
        Err(LycaonError::new_err(format!("modulus {modulus} is neither a power of two up to 2^64 nor an odd prime below 2^62")))
    }
}

fn ot_of(ot: &str) -> PyResult<OtKind> {
    match ot {
        "iknp" => Ok(OtKind::Iknp),
        "silent" | "ferret" => Ok(OtKind::Silent),
        "silent-compact" => Ok(OtKind::SilentCompact),
        other => Err(LycaonError::new_err(format!("unknown OT '{other}': use 'iknp', 'silent' or 'silent-compact'"))),
    }
}

/// What one party did: its output, setup and protocol figures.
struct PartyRun {
    output: Vec<u64>,
    setup: (Duration, ChannelStats),
    protocol: (Duration, ChannelStats),
    /// Per run: batch (silent-OT iteration) bytes of this party's sending direction that the
    /// run triggered, and what its COTs cost at the long-run rate.
    batch_bytes: f64,
    batch_share: f64,
}

#[derive(Clone, Copy)]
enum Op {
    Relu,
    ReluBounded,
    ReluWithin(u32),
    TruncateRelu(u32, u32),
    Drelu,
    Truncate(u32),
    TruncateExact(u32),
    MaxPool(usize),
    Convert(ShareRing),
    LessThan(u32),
}

fn op_of(op: &str, shift: u32, window: usize, to_modulus: Option<u128>, bits: Option<u32>) -> PyResult<Op> {
    Ok(match op {
        "relu" => Op::Relu,
        "relu_bounded" => Op::ReluBounded,
        "relu_within" => Op::ReluWithin(bits.ok_or_else(|| LycaonError::new_err("op 'relu_within' needs bits (the inputs' magnitude bound, |x| < 2^bits)"))?),
        "truncate_relu" => {
            Op::TruncateRelu(shift, bits.ok_or_else(|| LycaonError::new_err("op 'truncate_relu' needs bits (the inputs' magnitude bound) and shift"))?)
        }
        "drelu" => Op::Drelu,
        "truncate" => Op::Truncate(shift),
        "truncate_exact" => Op::TruncateExact(shift),
        "maxpool" => Op::MaxPool(window),
        "convert" => Op::Convert(ring_of(to_modulus.ok_or_else(|| LycaonError::new_err("op 'convert' needs to_modulus"))?)?),
        "less_than" => Op::LessThan(bits.ok_or_else(|| LycaonError::new_err("op 'less_than' needs bits"))?),
        other => Err(LycaonError::new_err(format!(
            "unknown op '{other}': relu, relu_bounded, relu_within, truncate_relu, drelu, truncate, truncate_exact, maxpool, convert or less_than"
        )))?,
    })
}

fn party_run(role: Role, ch: &mut dyn lycaon_mpc::Channel, kind: OtKind, ring: ShareRing, op: Op, input: &[u64], reps: usize) -> lycaon_mpc::Result<PartyRun> {
    let started = Instant::now();
    let mut party = Party::new(role, ch, kind)?;
    let setup = (started.elapsed(), party.channel().stats());
    let (cots_before, batch_before) = party.sent_cots();
    let vector_before = party.sent_vector_ots().unwrap_or_default();
    let began = Instant::now();
    let mut output = Vec::new();
    for _ in 0..reps {
        output = run_op(&mut party, ring, op, input)?;
    }
    let mut protocol = (began.elapsed() / reps as u32, party.channel().stats().since(&setup.1));
    protocol.1.bytes_sent /= reps as u64;
    protocol.1.bytes_received /= reps as u64;
    protocol.1.messages_sent /= reps as u64;
    protocol.1.rounds /= reps as u64;
    let (cots_after, batch_after) = party.sent_cots();
    let batch_bytes = (batch_after.bytes - batch_before.bytes) as f64 / reps as f64;
    let batch_share = (cots_after - cots_before) as f64 * batch_after.bytes_per_cot / reps as f64;
    // The vector OTs' generator (party 0 of a silent session) alike.
    let (vector_used, vector_batch) = party.sent_vector_ots().unwrap_or_default();
    let batch_bytes = batch_bytes + (vector_batch.bytes - vector_before.1.bytes) as f64 / reps as f64;
    let batch_share = batch_share + (vector_used - vector_before.0) as f64 * vector_batch.bytes_per_cot / reps as f64;
    Ok(PartyRun { output, setup, protocol, batch_bytes, batch_share })
}

fn run_op(party: &mut Party, ring: ShareRing, op: Op, input: &[u64]) -> lycaon_mpc::Result<Vec<u64>> {
    Ok(match op {
        Op::Relu => relu(party, ring, input)?,
        Op::ReluBounded => relu_bounded(party, ring, input)?,
        Op::ReluWithin(bits) => relu_within(party, ring, input, bits)?,
        Op::TruncateRelu(shift, bits) => truncate_relu(party, ring, input, shift, bits)?,
        Op::Drelu => drelu(party, ring, input)?.into_iter().map(u64::from).collect(),
        Op::Truncate(shift) => truncate(party, ring, input, shift)?,
        Op::TruncateExact(shift) => truncate_exact(party, ring, input, shift)?,
        Op::MaxPool(window) => max_pool(party, ring, input, window)?,
        Op::Convert(to) => convert(party, ring, to, input)?,
        Op::LessThan(bits) => less_than(party, input, bits, lycaon_mpc::compare::DEFAULT_DIGIT_BITS)?.into_iter().map(u64::from).collect(),
    })
}

fn stats_dict<'py>(py: Python<'py>, s: &ChannelStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("bytes_sent", s.bytes_sent)?;
    d.set_item("bytes_received", s.bytes_received)?;
    d.set_item("messages_sent", s.messages_sent)?;
    d.set_item("rounds", s.rounds)?;
    Ok(d)
}

/// Runs a two-party protocol with both parties in this process and returns both parties'
/// output shares with the protocol's wall time, bytes (both directions) and rounds, and the same
/// for the one-time OT setup. With `reps` > 1 the protocol runs that many times in one session
/// and the figures are per run. "amortized_bytes" prices silent OT's iterations by the COTs the
/// run used (what a long session pays per run), where "bytes" has the iterations it happened to
/// trigger. `threads` gives each party a pool of that many workers (1: single-threaded parties);
/// without it both parties share the process's pool. Ops: `relu_within` and `truncate_relu`
/// take the inputs' magnitude bound as `bits` (|x| < 2^bits; `truncate_relu` on Z_2^l only).
#[pyfunction]
#[pyo3(signature = (op, modulus, share0, share1, ot="silent", shift=0, window=1, to_modulus=None, bits=None, bandwidth_bytes_per_s=None, latency_ms=0.0, reps=1, threads=None))]
#[allow(clippy::too_many_arguments)]
pub fn run_two_party<'py>(
    py: Python<'py>,
    op: &str,
    modulus: u128,
    share0: PyReadonlyArray1<'py, u64>,
    share1: PyReadonlyArray1<'py, u64>,
    ot: &str,
    shift: u32,
    window: usize,
    to_modulus: Option<u128>,
    bits: Option<u32>,
    bandwidth_bytes_per_s: Option<f64>,
    latency_ms: f64,
    reps: usize,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyDict>> {
    let ring = ring_of(modulus)?;
    let kind = ot_of(ot)?;
    let op = op_of(op, shift, window, to_modulus, bits)?;
    if !(latency_ms.is_finite() && latency_ms >= 0.0) {
        return Err(LycaonError::new_err(format!("latency_ms must be a non-negative number, not {latency_ms}")));
    }
    if reps == 0 {
        return Err(LycaonError::new_err("reps must be at least 1"));
    }
    let link = LinkModel::new(bandwidth_bytes_per_s, Duration::from_secs_f64(latency_ms / 1e3)).map_err(mpc_err)?;
    let s0 = share0.as_slice().map_err(|e| LycaonError::new_err(e.to_string()))?.to_vec();
    let s1 = share1.as_slice().map_err(|e| LycaonError::new_err(e.to_string()))?.to_vec();
    if s0.len() != s1.len() {
        return Err(LycaonError::new_err(format!("share0 has {} elements, share1 {}", s0.len(), s1.len())));
    }
    // Each party on a pool of its own (`threads` workers each), or both on the process's pool.
    let pools = match threads {
        Some(0) => return Err(LycaonError::new_err("threads must be at least 1")),
        Some(n) => {
            let pool = || rayon::ThreadPoolBuilder::new().num_threads(n).build().map_err(|e| LycaonError::new_err(format!("thread pool: {e}")));
            Some((pool()?, pool()?))
        }
        None => None,
    };
    let in_pool = |pool: Option<&rayon::ThreadPool>, role: Role, ch: &mut dyn lycaon_mpc::Channel, input: &[u64]| match pool {
        Some(pool) => pool.install(|| party_run(role, ch, kind, ring, op, input, reps)),
        None => party_run(role, ch, kind, ring, op, input, reps),
    };
    let ((r0, _), (r1, _)) = py
        .detach(|| run_pair(link, |ch| in_pool(pools.as_ref().map(|p| &p.0), Role::P0, ch, &s0), |ch| in_pool(pools.as_ref().map(|p| &p.1), Role::P1, ch, &s1)))
        .map_err(mpc_err)?;
    let d = PyDict::new(py);
    let total = |a: &ChannelStats, b: &ChannelStats| a.bytes_sent + b.bytes_sent;
    d.set_item("out0", PyArray1::from_vec(py, r0.output))?;
    d.set_item("out1", PyArray1::from_vec(py, r1.output))?;
    d.set_item("seconds", r0.protocol.0.max(r1.protocol.0).as_secs_f64())?;
    d.set_item("bytes", total(&r0.protocol.1, &r1.protocol.1))?;
    // A short run pays for whole silent-OT iterations (about 10 million COTs, 0.56 MB each way)
    // or for none; a long session pays for the COTs it uses.
    let amortized = total(&r0.protocol.1, &r1.protocol.1) as f64 - r0.batch_bytes - r1.batch_bytes + r0.batch_share + r1.batch_share;
    d.set_item("amortized_bytes", amortized)?;
    d.set_item("rounds", r0.protocol.1.rounds.max(r1.protocol.1.rounds))?;
    d.set_item("setup_seconds", r0.setup.0.max(r1.setup.0).as_secs_f64())?;
    d.set_item("setup_bytes", total(&r0.setup.1, &r1.setup.1))?;
    d.set_item("party0", stats_dict(py, &r0.protocol.1)?)?;
    d.set_item("party1", stats_dict(py, &r1.protocol.1)?)?;
    d.set_item("ring_bits", ring.bits())?;
    d.set_item("ot", ot)?;
    d.set_item("threads_per_party", threads)?;
    Ok(d)
}
