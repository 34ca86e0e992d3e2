"""Two-party protocols: ReLU, truncation and truncation followed by ReLU on 2^16 (optionally 2^20)
secret-shared elements with IKNP and with silent OT, and, in the same run, SecretFlow SPU's
CHEETAH on the same operations (two processes on loopback).

Lycaon runs both parties in one process over an in-memory channel; ``lycaon_s`` is the slower
party's wall time for one run of the protocol, ``lycaon_bytes`` the payload both parties sent.
The one-time OT setup (base OTs, IKNP bootstrap of silent OT) is reported apart, as SPU's first
run is; silent OT's iterations are amortised over ``reps`` runs in one session, as SPU refills its
OT pool over a session (a truncation draws so few COTs that its silent runs are repeated until
2^24 COTs are drawn). Every Lycaon run is checked against the clear function.

The rings: Z_2^64, SPU's ring (FM64; the like-for-like comparison), Z_2^37 (the ring Cheetah's
own code runs), and Z_p for the 20-bit BFV plaintext prime that shares live in in Lycaon's hybrid
mode. ReLU runs on the whole ring ("relu") and, on Z_2^64, also within the inputs' magnitude bound
("relu |x|<2^40": the comparison on the 40 bits the values have; SPU is given the same inputs but
compares all 64). On a 35-bit prime like today's hybrid layers' plaintext moduli, the ReLU the
runtime runs: within a quarter of the ring ("relu_bounded", one comparison) and, after a 12-bit
truncation, within 2^22 ("relu |x|<2^22": a comparison of 22 bits). "truncate+relu" is a
truncation by 12 bits followed by a ReLU on the bits left, against SPU's ``max(x * 0.25, 0)``
(one truncation, one ReLU). ``threads`` gives each party its own
pool of that many workers (1: single-threaded parties, as SPU's runtime here); by default both
parties share the process's pool.
"""

from __future__ import annotations

import json
import time
from typing import Optional

import numpy as np

import lycaon

from . import peers

spu_peer, _PEER_IMPORT_ERROR = peers.load("spu_peer")  # lycaon-benchmarks' adapter; SPU itself is imported only when the peer runs

#: The hybrid mode's plaintext prime (20 bits, 1 mod 8192 so it batches at n = 4096).
HYBRID_PRIME = 1_032_193
TRUNCATION_SHIFT = 12
#: Magnitude bound (bits) of the Z_2^64 inputs: |x| < 2^40.
Z64_INPUT_BITS = 40
#: A 35-bit plaintext prime like the ImageNet layers' (1 mod 16384), and the magnitude bound
#: (bits) of its inputs after a 12-bit truncation.
LAYER_PRIME = 34_359_410_689
LAYER_PRIME_INPUT_BITS = 22
#: Cheetah's ring width (its code runs ell = 37).
CHEETAH_RING_BITS = 37


def _ring_name(modulus: int) -> str:
    if modulus in (HYBRID_PRIME, LAYER_PRIME):
        return f"Z_p (p = {modulus}, {modulus.bit_length()} bits)"
    return f"Z_2^{modulus.bit_length() - 1}"


def _input_bound(modulus: int, op: str = "relu") -> tuple[int, int]:
    """(bound, bits): the inputs drawn on this ring are in [-bound, bound], bound < 2^bits; 2^40 on
    Z_2^64, 2^22 for the narrow ReLU on the layer prime, a quarter of the ring else (what
    truncation and the bounded ReLU need on Z_p)."""
    if modulus == 2**64:
        bound = 2**Z64_INPUT_BITS - 1
    elif modulus == LAYER_PRIME and op == "relu_within":
        bound = 2**LAYER_PRIME_INPUT_BITS - 1
    else:
        bound = modulus // 4 - 1
    return bound, bound.bit_length()


def _share(values: np.ndarray, modulus: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if modulus == 2**64:
        s0 = rng.integers(0, 2**64, size=values.shape, dtype=np.uint64)
        return s0, values.astype(np.uint64) - s0  # wraps mod 2^64
    if modulus & (modulus - 1) == 0:  # a smaller power of two: wrap, then mask
        s0 = rng.integers(0, modulus, size=values.shape, dtype=np.uint64)
        return s0, (values.astype(np.uint64) - s0) & np.uint64(modulus - 1)
    s0 = rng.integers(0, modulus, size=values.shape, dtype=np.uint64)
    return s0, ((values.astype(object) - s0.astype(object)) % modulus).astype(np.uint64)


def _signed(values: np.ndarray, modulus: int) -> np.ndarray:
    v = values.astype(object) % modulus
    return np.where(v > (modulus - 1) // 2, v - modulus, v).astype(object)


def _check(op: str, x: np.ndarray, out: np.ndarray, modulus: int) -> bool:
    got = _signed(out, modulus)
    if op in ("relu", "relu_within", "relu_bounded"):
        return bool(np.array_equal(got, np.maximum(x.astype(object), 0)))
    want = np.array([v >> TRUNCATION_SHIFT for v in x.tolist()], dtype=object)  # floor division
    if op == "truncate_relu":
        want = np.maximum(want, 0)
        return bool(np.all((got >= 0) & (abs(got - want) <= 1)))
    err = got - want
    power_of_two = modulus & (modulus - 1) == 0
    return bool(np.all((err == 0) | (err == -1) | ((err == 1) & (not power_of_two))))


def run_lycaon(op: str, modulus: int, elements: int, ot: str, reps: int, rng: np.random.Generator, link: Optional[dict] = None,
               threads: Optional[int] = None) -> dict:
    """One operation through Lycaon's protocols, checked against the clear result."""
    bound, bits = _input_bound(modulus, op)
    x = rng.integers(-bound, bound, size=elements, dtype=np.int64)
    encoded = np.array([int(v) % modulus for v in x.tolist()], dtype=object)
    s0, s1 = _share(encoded.astype(np.uint64) if modulus != 2**64 else x.astype(np.uint64), modulus, rng)
    kwargs: dict = {}
    if op in ("truncate", "truncate_relu"):
        kwargs["shift"] = TRUNCATION_SHIFT
    if op in ("relu_within", "truncate_relu"):
        kwargs["bits"] = bits
    run = lycaon.run_two_party(op, modulus, s0, s1, ot=ot, reps=reps, threads=threads, **kwargs, **(link or {}))
    total = (run["out0"].astype(object) + run["out1"].astype(object)) % modulus
    label = {"relu_within": f"relu |x|<2^{bits}", "truncate_relu": "truncate+relu"}.get(op, op)
    return {
        "op": label, "protocol": op, "elements": elements, "ring": _ring_name(modulus), "ot": ot, "input_bits": bits,
        "lycaon_s": run["seconds"], "lycaon_bytes": run["bytes"], "bytes_per_element": run["bytes"] / elements,
        "rounds": run["rounds"], "setup_s": run["setup_seconds"], "setup_bytes": run["setup_bytes"], "reps": reps,
        "threads_per_party": threads, "correct": _check(op, x, total, modulus),
    }


def _peer(op: str, elements: int, reps: int) -> dict:
    if spu_peer is None:
        return {"peer": "spu-cheetah", "error": _PEER_IMPORT_ERROR}
    try:
        if op == "relu":
            return spu_peer.spu_relu(elements, reps=reps)
        if op == "truncate_relu":
            return spu_peer.spu_truncate_relu(elements, reps=reps)
        return spu_peer.spu_truncate(elements, reps=reps)
    except Exception as exc:  # noqa: BLE001 - a failing peer is recorded, not fatal
        return {"peer": "spu-cheetah", "error": f"{type(exc).__name__}: {exc}"}


#: (protocol, ring modulus, OT kinds): every row of the bench, SPU's run shared per op.
CASES = (
    ("relu", 2**64, ("iknp", "silent")),
    ("relu_within", 2**64, ("silent",)),
    ("relu", 2**CHEETAH_RING_BITS, ("silent",)),
    ("relu", HYBRID_PRIME, ("iknp", "silent")),
    ("relu_bounded", LAYER_PRIME, ("silent",)),
    ("relu_within", LAYER_PRIME, ("silent",)),
    ("truncate", 2**64, ("iknp", "silent")),
    ("truncate", HYBRID_PRIME, ("iknp", "silent")),
    ("truncate_relu", 2**64, ("silent",)),
    ("truncate_relu", 2**CHEETAH_RING_BITS, ("silent",)),
)


def run(sizes: tuple[int, ...] = (2**16,), reps: int = 3, json_path: Optional[str] = None, peer: bool = True, seed: int = 0,
        bandwidth_mb_s: Optional[float] = None, latency_ms: float = 0.0, threads: Optional[int] = None) -> list[dict]:
    """``bandwidth_mb_s`` / ``latency_ms`` model Lycaon's link (e.g. 9 MB/s and 50 ms); SPU then
    still runs on plain loopback, so its ratios are only meaningful without them. ``threads``:
    workers per party (None: both parties share the process's pool)."""
    from rich.console import Console  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    link = {"bandwidth_bytes_per_s": bandwidth_mb_s * 1e6 if bandwidth_mb_s else None, "latency_ms": latency_ms}
    modelled = bandwidth_mb_s is not None or latency_ms > 0
    if peer and not modelled and spu_peer is None:
        print(f"SPU peer unavailable ({_PEER_IMPORT_ERROR}): showing Lycaon only")
    records: list[dict] = []
    started = time.time()
    for elements in sizes:
        peers: dict[str, dict] = {}
        for op, modulus, ots in CASES:
            peer_op = "relu" if op in ("relu_within", "relu_bounded") else op  # SPU has one ReLU, on the whole ring
            if peer_op not in peers:
                peers[peer_op] = _peer(peer_op, elements, reps) if peer and not modelled else {"peer": "spu-cheetah", "error": "not run (--no-peer)"}
            spu = peers[peer_op]
            for ot in ots:
                # A truncation draws one COT per element: enough runs that silent OT's
                # iterations (10.6 million COTs each) are amortised as over a session.
                runs = max(reps, 2**24 // elements) if (ot, op) == ("silent", "truncate") else reps
                rec = run_lycaon(op, modulus, elements, ot, runs, rng, link, threads)
                rec["peer"] = "spu-cheetah"
                if modelled:
                    rec.update(link_bandwidth_mb_s=bandwidth_mb_s, link_latency_ms=latency_ms)
                if "error" in spu or modelled:
                    rec["peer_error"] = spu.get("error", "not compared: Lycaon ran on a modelled link, SPU on loopback")
                if "peer_error" not in rec:
                    rec.update(peer_s=spu["peer_s"], peer_bytes=spu["peer_bytes"], peer_field=spu["field"],
                               peer_fxp_fraction_bits=spu["fxp_fraction_bits"], peer_first_run_bytes=spu["first_run_bytes"],
                               time_ratio=rec["lycaon_s"] / spu["peer_s"], bytes_ratio=rec["lycaon_bytes"] / spu["peer_bytes"])
                records.append(rec)

    who = "both parties on one pool" if threads is None else f"{threads} thread(s) per party"
    table = Table(title=f"Two-party protocols, Lycaon ({who}) vs SPU CHEETAH ({time.time() - started:.0f} s; ratio < 1: Lycaon better)")
    for col in ["op", "elements", "ring", "OT", "Lycaon s", "Lycaon MB", "B/elem", "rounds", "SPU s", "SPU MB", "time ratio", "bytes ratio", "correct"]:
        table.add_column(col, justify="left" if col in ("op", "ring", "OT") else "right")
    for r in records:
        f = lambda k, fmt: fmt.format(r[k]) if k in r else "-"  # noqa: E731
        table.add_row(r["op"], str(r["elements"]), r["ring"], r["ot"], f("lycaon_s", "{:.3f}"), f"{r['lycaon_bytes'] / 1e6:.2f}",
                      f("bytes_per_element", "{:.1f}"), str(r["rounds"]), f("peer_s", "{:.3f}"),
                      f"{r['peer_bytes'] / 1e6:.2f}" if "peer_bytes" in r else "-", f("time_ratio", "{:.2f}"), f("bytes_ratio", "{:.2f}"), str(r["correct"]))
    Console(width=160).print(table)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(records, f, indent=1)
    return records
