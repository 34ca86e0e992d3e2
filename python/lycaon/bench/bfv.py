"""Side-by-side BFV benchmark: every operation through Lycaon and through SEAL in one run.

Both libraries are called the same way (one Python call per operation, timed with
``time.perf_counter_ns``, median of ``reps`` runs after warm-up, one thread), on the same primes
and with the same key-switching setup (one special prime, one prime per digit: SEAL's only
option). ``ratio`` is lycaon_us / peer_us: below 1 means Lycaon is faster.
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Callable, Optional, Sequence

import numpy as np

import lycaon

from . import peers

# The SEAL side is optional (lycaon-benchmarks' seal_peer): without it the benchmark shows Lycaon alone.
seal_peer, _PEER_IMPORT_ERROR = peers.load("seal_peer")

#: SEAL's BFVDefault split of the 128-bit modulus budget: data primes, then the special prime.
SEAL_LIKE_BITS = {4096: ([36, 36], [37]), 8192: ([43, 43, 44, 44], [44])}

OPS = ["encrypt", "encrypt_symmetric", "decrypt", "mul_plain", "mul_scalar", "rotate_1", "rotate_9_hoisted", "mul_relin", "ntt_limb"]


def _median_us(op: Callable[[], object], reps: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        op()
    samples = []
    for _ in range(reps):
        start = time.perf_counter_ns()
        op()
        samples.append((time.perf_counter_ns() - start) / 1e3)
    return statistics.median(samples)


def parameters(n: int) -> lycaon.BfvParameters:
    """Lycaon parameters with SEAL's default split at n (4096 or 8192), t a 20-bit batching prime."""
    if n not in SEAL_LIKE_BITS:
        raise lycaon.ParameterError(f"the BFV benchmark covers n in {sorted(SEAL_LIKE_BITS)}, not {n}")
    q_bits, p_bits = SEAL_LIKE_BITS[n]
    return lycaon.BfvParameters.from_bits(n, q_bits, p_bits, 20, key_switch_digits=len(q_bits))


def lycaon_timings(params: lycaon.BfvParameters, reps: int) -> dict[str, float]:
    """Median microseconds per operation, each result checked once against numpy first."""
    n, t = params.n, params.plaintext_modulus
    keys = lycaon.KeyGenerator(params)
    pk, rk = keys.public_key(), keys.relin_key()
    steps = list(range(1, 10))
    gk = keys.galois_keys(steps)
    encoder = lycaon.BatchEncoder(params)
    encryptor = lycaon.PublicEncryptor(params, pk)
    secret_encryptor = lycaon.SecretEncryptor(params, keys.secret_key())
    decryptor = lycaon.Decryptor(params, keys.secret_key())
    evaluator = lycaon.Evaluator(params)
    rng = np.random.default_rng()
    x = rng.integers(0, t, n, dtype=np.uint64)
    y = rng.integers(0, t, n, dtype=np.uint64)
    pt_x, pt_y = encoder.encode(x), encoder.encode(y)
    ct_x, ct_y = encryptor.encrypt(pt_x), encryptor.encrypt(pt_y)
    half = n // 2

    def decode(ct) -> np.ndarray:
        return encoder.decode(decryptor.decrypt(ct))

    prod = (x.astype(object) * y.astype(object)) % t
    rot = np.concatenate([np.roll(x[:half], -1), np.roll(x[half:], -1)])
    for name, got, want in [
        ("mul_plain", decode(evaluator.mul_plain(ct_x, pt_y)), prod),
        ("mul_scalar", decode(evaluator.mul_scalar(ct_x, 5)), (x.astype(object) * 5) % t),
        ("rotate_1", decode(evaluator.rotate_rows(ct_x, 1, gk)), rot),
        ("mul_relin", decode(evaluator.multiply_relin(ct_x, ct_y, rk)), prod),
    ]:
        if not np.array_equal(got.astype(object), np.asarray(want, dtype=object)):
            raise AssertionError(f"Lycaon {name} gave a wrong result; the timings would be meaningless")
    limb = lycaon.NttLimb(n, params.ciphertext_moduli[0])
    return {
        "encrypt": _median_us(lambda: encryptor.encrypt(pt_x), reps),
        "encrypt_symmetric": _median_us(lambda: secret_encryptor.encrypt(pt_x), reps),
        "decrypt": _median_us(lambda: decryptor.decrypt(ct_x), reps),
        "mul_plain": _median_us(lambda: evaluator.mul_plain(ct_x, pt_y), reps),
        "mul_scalar": _median_us(lambda: evaluator.mul_scalar(ct_x, 5), reps),
        "rotate_1": _median_us(lambda: evaluator.rotate_rows(ct_x, 1, gk), reps),
        "rotate_9_hoisted": _median_us(lambda: evaluator.rotate_rows_hoisted(ct_x, steps, gk), reps),
        "mul_relin": _median_us(lambda: evaluator.multiply_relin(ct_x, ct_y, rk), reps),
        "ntt_limb": _median_us(limb.roundtrip, max(reps, 200)),
    }


def _peer_name(out) -> Optional[str]:
    """SEAL's version string when the peer can run, else None (after saying why)."""
    if seal_peer is None:
        out(f"SEAL peer unavailable ({_PEER_IMPORT_ERROR}): showing Lycaon only")
        return None
    try:
        return seal_peer.seal_version()
    except ImportError:
        out("SEAL not installed: showing Lycaon only (pip install tenseal to compare)")
        return None


def run(ns: Sequence[int] = (4096, 8192), reps: int = 20, json_path: Optional[str] = None, out=print) -> list[dict]:
    """Runs the benchmark, prints a table and returns (and optionally writes) the rows.

    Each row is ``{"op", "n", "lycaon_us", "peer", "peer_us", "ratio"}``; ``peer``, ``peer_us``
    and ``ratio`` are None when SEAL (tenseal) is not installed.
    """
    if reps < 1:
        raise lycaon.LycaonError("reps must be at least 1")
    for n in ns:
        parameters(n)  # refuse an unsupported n before any timing
    info = lycaon.bench_info()
    out(f"Lycaon {info['version']}: {info['backend']} backend, {info['ntt']} NTT (IFMA {'on' if info['ifma'] else 'off'}), "
        f"{info['threads']} thread, median of {reps} runs after 3 warm-up runs")
    peer_name = _peer_name(out)
    rows = []
    for n in ns:
        params = parameters(n)
        ours = lycaon_timings(params, reps)
        theirs: dict[str, float] = {}
        if peer_name is not None:
            primes = list(params.ciphertext_moduli) + list(params.special_moduli)
            theirs = seal_peer.seal_bfv_timings(n, primes, params.plaintext_modulus, reps)
        for op in OPS:
            peer_us = theirs.get(op)
            rows.append({
                "op": op,
                "n": n,
                "lycaon_us": round(ours[op], 2),
                "peer": peer_name,
                "peer_us": None if peer_us is None else round(peer_us, 2),
                "ratio": None if peer_us is None else round(ours[op] / peer_us, 3),
            })
    if peer_name is not None:
        out(f"peer: {peer_name}; ratio = lycaon_us / seal_us (below 1: Lycaon is faster)")
    out(f"{'op':<18} {'n':>6} {'lycaon_us':>11} {'seal_us':>11} {'ratio':>7}")
    for r in rows:
        peer = "-" if r["peer_us"] is None else f"{r['peer_us']:.1f}"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        out(f"{r['op']:<18} {r['n']:>6} {r['lycaon_us']:>11.1f} {peer:>11} {ratio:>7}")
    if json_path:
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=2)
        out(f"wrote {json_path}")
    return rows
