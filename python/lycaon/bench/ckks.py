"""Side-by-side CKKS benchmark: every operation through Lycaon and, in the same run, through SEAL
(``seal_ckks_peer``, via ``tenseal.sealapi``) and Lattigo (``lattigo_peer``, the library shipped in
``orion-fhe``, in a child process). Both adapters come with lycaon-benchmarks (``benchmarks/`` of
a checkout) and both peers are optional extras; without them the benchmark says so in one line
and reports Lycaon alone.

Parameters (128-bit secure by the HE standard's table for a ternary secret):

- logN = 16: Orion's ResNet set, log Q = 55 + 10 x 40, log P = 3 x 61, scale 2^40, 2^15 slots
  (log QP = 638). SEAL keeps one 61-bit special prime (it has no other key-switching mode).
- logN = 14: log Q = 55 + 8 x 40, log P = 61 (log QP = 436 <= 438), scale 2^40, 2^13 slots: one
  special prime, so all three libraries switch keys the same way (one prime per digit).

Lycaon's primes are chosen so the canonical scale stays at 2^40 at every level
(``CkksParameters.scale_stable``); SEAL's are the largest NTT primes of each size; Lattigo picks
its own. Operations (median of ``reps`` timed runs after one warm-up; inputs prepared untimed):

- ``mul_relin``: product of two top-level ciphertexts, relinearised (not rescaled);
- ``rescale``: rescaling of a fresh product;
- ``rotate_1``: one rotation by one slot;
- ``rotate_hoisted_8``: rotations by 1..8 of one ciphertext; Lycaon hoists the decomposition,
  SEAL has no hoisting and the orion-fhe facade exports none, so the peers rotate 8 times;
- ``linear_transform``: plaintext matrix times encrypted vector (diagonals encoded ahead,
  untimed; result rescaled). At logN = 14 a dense 2^13 x 2^13 matrix (all 8192 diagonals) applied
  at level 1, where its encoded diagonals take about 3 GB per library; at logN = 16 a banded
  matrix of 64 consecutive diagonals at the top level (a dense 2^15 one needs tens of GB). Lycaon
  generates its rotation keys only up to the transform's level; the peers' keys are full-level;
- ``poly_63``: a Chebyshev series of degree 63 on [-1, 1] (random coefficients), 6 levels;
- ``bootstrap`` (logN = 16 only, with ``bootstrap=True``): one full-slot bootstrapping of a
  level-0 ciphertext. Lycaon's ``CkksBootstrapParams.logn16_full_slots`` (the same residual
  shape: 10 levels at 2^40 over a 60-bit q_0, sparse-secret encapsulation, log QP = 1725) against
  Lattigo's default bootstrapping parameters on Orion's residual chain, its keys with six 61-bit
  special primes as Lycaon's (with Orion's three its key generation ran out of memory here).
  Lycaon's first call encodes the transforms' diagonals; the second is timed (Lattigo encodes
  them in ``NewBootstrapper`` and its first call is timed). Off by default: Lattigo's keys take
  about 17 GB, Lycaon's 6.9 GB (12 GB resident with the encoded diagonals and working set); the
  two never run at once, and each is skipped with a message when the machine has too little
  memory available. Its records also carry CPU seconds (all threads), which vary less than
  wall time on a shared machine.

``ratio`` is lycaon_us / peer_us: below 1 means Lycaon is faster. ``precision_bits`` is
-log2 of the mean absolute error against float64 (Lattigo's inputs cross its C facade as float32,
which caps its figures near 24 bits). Key memory: Lycaon's exact bytes of the keys each operation
uses (8 bytes per residue); SEAL's from its key shape; for bootstrapping Lattigo's resident-memory
growth in ``NewBootstrapper`` (keys and pre-encoded diagonals), beside which Lycaon's
resident-memory growth over key generation and the first bootstrap is given. Threads: Lycaon's
rayon pool and Lattigo's GOMAXPROCS are set to the same count; SEAL is single-threaded.
"""

from __future__ import annotations

import gc
import json
import os
from typing import Optional, Sequence

import lycaon

from . import peers

# The peers are optional (lycaon-benchmarks' adapters): without them the benchmark shows Lycaon alone.
seal_ckks_peer, _SEAL_IMPORT_ERROR = peers.load("seal_ckks_peer")
lattigo_peer, _LATTIGO_IMPORT_ERROR = peers.load("lattigo_peer")

#: Per ring degree: residual chain, special primes, scale, and the linear transform's shape
#: (diagonal count, None = all slots; level, None = top).
PARAMETER_SETS: dict[int, dict] = {
    16: {"log_q": [55] + [40] * 10, "log_p": [61] * 3, "log_scale": 40, "lt_diagonals": 64, "lt_level": None},
    14: {"log_q": [55] + [40] * 8, "log_p": [61], "log_scale": 40, "lt_diagonals": None, "lt_level": 1},
}
HOISTED = 8
POLY_DEGREE = 63
OPS = ["mul_relin", "rescale", "rotate_1", f"rotate_hoisted_{HOISTED}", "linear_transform", f"poly_{POLY_DEGREE}", "bootstrap"]
#: Memory (bytes) a logN = 16 bootstrapping needs on top of what is in use, per library.
BOOTSTRAP_MEMORY = {"lycaon": 13 << 30, "lattigo": 18 << 30}
SEAL_NAME, LATTIGO_NAME = "seal", "lattigo"
#: Special primes of Lattigo's bootstrapping keys: six of 61 bits, as Lycaon's bootstrapping set
#: has. With the scheme's three (more digits per key) its key generation was killed for memory
#: with 22 GB available.
LATTIGO_BOOT_LOG_P = [61] * 6


def _available_bytes() -> Optional[int]:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def parameters(log_n: int) -> lycaon.CkksParameters:
    """Lycaon's parameters for a benchmarked ring degree (see the module docstring)."""
    if log_n not in PARAMETER_SETS:
        raise lycaon.ParameterError(f"the CKKS benchmark covers logN in {sorted(PARAMETER_SETS)}, not {log_n}")
    p = PARAMETER_SETS[log_n]
    return lycaon.CkksParameters.scale_stable(1 << log_n, p["log_q"][0], p["log_scale"], len(p["log_q"]) - 1, p["log_p"])


def lycaon_timings(log_n: int, reps: int, lt_diagonals: Optional[int] = None, seed: int = 1, device: str = "cpu") -> dict:
    """Microseconds, precision and key bytes per operation (keys ``<op>_us``, ``<op>_bits``,
    ``<op>_key_bytes``), each result checked for precision once: measured by the runtime
    (lycaon-runtime's ``ckks_bench``) on ``device`` ("cpu", "cuda:N")."""
    spec = PARAMETER_SETS[log_n]
    request = {"log_n": log_n, "log_q": spec["log_q"], "log_p": spec["log_p"], "log_scale": spec["log_scale"], "reps": int(reps),
               "lt_diagonals": lt_diagonals or spec["lt_diagonals"], "lt_level": spec["lt_level"], "hoisted": HOISTED, "poly_degree": POLY_DEGREE, "seed": int(seed)}
    out = json.loads(lycaon._native.ckks_bench_ops(json.dumps(request), device))
    out["params"] = repr(parameters(log_n))
    return out


def lycaon_bootstrap(seed: int = 1, device: str = "cpu") -> dict:
    """One logN = 16 full-slot bootstrapping (the runtime's ``ckks_bench``): keys, a first call
    (which encodes the transforms' diagonals), a timed second call, precision against the input
    and levels left."""
    return json.loads(lycaon._native.ckks_bench_bootstrap(seed, device))


def _seal_status() -> Optional[str]:
    """None when SEAL can run, else why not."""
    if seal_ckks_peer is None:
        return _SEAL_IMPORT_ERROR if _SEAL_IMPORT_ERROR == peers.MISSING else f"SEAL peer unavailable ({_SEAL_IMPORT_ERROR})"
    try:
        seal_ckks_peer.seal_version()
    except ImportError:
        return "SEAL not installed (pip install tenseal to compare)"
    return None


def _lattigo_status() -> Optional[str]:
    if lattigo_peer is None:
        return _LATTIGO_IMPORT_ERROR if _LATTIGO_IMPORT_ERROR == peers.MISSING else f"Lattigo peer unavailable ({_LATTIGO_IMPORT_ERROR})"
    try:
        lattigo_peer.library_path()
    except ImportError as exc:
        return str(exc)
    return None


def _fmt_time(us: Optional[float]) -> str:
    if us is None:
        return "-"
    if us >= 1e6:
        return f"{us / 1e6:.2f} s"
    if us >= 1e3:
        return f"{us / 1e3:.2f} ms"
    return f"{us:.0f} µs"


def _fmt_bytes(b: Optional[float]) -> str:
    if b is None:
        return "-"
    return f"{b / 1e9:.2f} GB" if b >= 1e9 else f"{b / 1e6:.1f} MB"


def _record(op: str, log_n: int, ours: dict, peer: Optional[str], theirs: Optional[dict], threads: int) -> Optional[dict]:
    """One record in the BFV benchmark's shape plus precision, levels and key memory."""
    lycaon_us = ours.get(f"{op}_us")
    peer_ran = bool(theirs) and theirs.get(f"{op}_s") is not None
    if lycaon_us is None and not (op == "bootstrap" and peer_ran):
        return None
    rec: dict = {"op": op, "n": 1 << log_n, "log_n": log_n, "lycaon_us": None if lycaon_us is None else round(lycaon_us, 2), "peer": peer, "peer_us": None, "ratio": None,
                 "precision_bits": round(ours[f"{op}_bits"], 2) if f"{op}_bits" in ours else None, "peer_precision_bits": None,
                 "key_bytes": ours.get(f"{op}_key_bytes"), "threads": threads}
    if op == "linear_transform":
        rec.update(diagonals=ours["lt_diagonals"], level=ours["lt_level"], baby_steps=ours.get("linear_transform_baby_steps"))
    if op.startswith("poly_"):
        rec["levels_used"] = ours.get(f"{op}_levels_used")
    if op == "bootstrap" and lycaon_us is not None:
        rec.update(levels_left=ours["bootstrap_levels_left"], min_precision_bits=round(ours["bootstrap_min_bits"], 2),
                   first_call_s=round(ours["bootstrap_first_s"], 2), cpu_s=round(ours["bootstrap_cpu_s"], 2), rss_growth_bytes=ours["bootstrap_rss_growth_bytes"],
                   key_bytes_seeded=ours["bootstrap_key_bytes_seeded"], params=ours["bootstrap_params"], log2_qp=ours["bootstrap_log2_qp"])
    elif op == "bootstrap":
        rec.update(levels_left=None, note=ours.get("bootstrap_note", "Lycaon's bootstrapping did not run"))
    if theirs is not None and "error" not in theirs:
        secs = theirs.get(f"{op}_s")
        if secs is not None:
            rec["peer_us"] = round(secs * 1e6, 2)
            rec["ratio"] = None if lycaon_us is None else round(lycaon_us / rec["peer_us"], 3)
        bits_key = {"mul_relin": "mul_precision_bits", "rescale": "mul_precision_bits", "rotate_1": "rotate_precision_bits"}.get(op, f"{op}_precision_bits")
        if theirs.get(bits_key) is not None:
            rec["peer_precision_bits"] = round(theirs[bits_key], 2)
        rec["peer_threads"] = theirs.get("threads")
        key = "relin_key_bytes" if op in ("mul_relin", f"poly_{POLY_DEGREE}") else f"{op}_key_bytes"
        if secs is not None and theirs.get(key) is not None:
            rec["peer_key_bytes"] = theirs[key]
        if op == "bootstrap":
            rec["peer_levels_left"] = theirs.get("bootstrap_levels_left")
            rec["peer_rss_growth_bytes"] = theirs.get("bootstrap_rss_growth_bytes")
            rec["peer_peak_rss_bytes"] = theirs.get("peak_rss_bytes")
            rec["peer_bootstrap_log_p"] = theirs.get("bootstrap_log_p")
            rec["peer_cpu_s"] = theirs.get("bootstrap_cpu_s")
        if op == "linear_transform":
            rec["peer_level"] = theirs.get("linear_transform_level")
        if theirs.get(f"{op}_note"):
            rec["peer_note"] = theirs[f"{op}_note"]
        if secs is None:
            rec["peer_note"] = rec.get("peer_note") or f"{peer} has no {op.replace('_', ' ')}"
    elif theirs is not None:
        rec["peer_note"] = theirs["error"]
    return rec


def run(log_ns: Sequence[int] = (14, 16), reps: int = 5, json_path: Optional[str] = None, peer: bool = True, bootstrap: bool = False,
        threads: Optional[int] = None, lt_diagonals: Optional[int] = None, out=print, bootstrap_only: bool = False, device: str = "cpu") -> list[dict]:
    """Runs the benchmark, prints a table and returns (and optionally writes) the records.

    Records have the BFV benchmark's shape, one per (op, n, peer): ``{"op", "n", "lycaon_us",
    "peer", "peer_us", "ratio", ...}`` plus ``precision_bits`` / ``peer_precision_bits``,
    ``key_bytes`` / ``peer_key_bytes``, thread counts, and ``levels_left`` /
    ``peer_levels_left`` on bootstrapping records. ``peer`` is None (and the peer fields too)
    when no peer ran. ``bootstrap`` adds the logN = 16 bootstrapping (see the module docstring);
    ``lt_diagonals`` overrides the transform's diagonal count (tests use a small one);
    ``bootstrap_only`` runs the logN = 16 bootstrapping alone; ``device`` ("cpu", "cuda:N") is
    where Lycaon's side runs.
    The JSON file holds ``{"info": ..., "records": [...]}``.
    """
    if reps < 1:
        raise lycaon.LycaonError("reps must be at least 1")
    if bootstrap_only:
        log_ns, bootstrap = [16], True
    for log_n in log_ns:
        parameters(log_n)  # refuse an unsupported ring degree before any timing
    if threads is not None:
        os.environ["RAYON_NUM_THREADS"] = str(threads)  # read when rayon's pool first starts
    lycaon_threads = lycaon.ckks_threads()
    if threads is not None and lycaon_threads != threads:
        out(f"note: Lycaon's thread pool had already started with {lycaon_threads} threads; asked for {threads}")
    threads = lycaon_threads
    info = dict(lycaon.bench_info(), backend="cpu-rayon" if device == "cpu" else device, threads=threads)
    out(f"Lycaon {info['version']}: CKKS on {threads} threads (rayon), median of {reps} runs after one warm-up run")
    seal_why = _seal_status() if peer else "not run (--no-peer)"
    lattigo_why = _lattigo_status() if peer else "not run (--no-peer)"
    peers_on = [name for name, why in ((SEAL_NAME, seal_why), (LATTIGO_NAME, lattigo_why)) if why is None]
    if not peer:
        out("peers: not run (--no-peer): showing Lycaon only")
    elif not peers_on:
        out(f"peers unavailable: showing Lycaon only ({'; '.join(dict.fromkeys((seal_why, lattigo_why)))})")
    else:
        missing = [why for why in (seal_why, lattigo_why) if why is not None]
        out(f"peers: {', '.join(peers_on)} (SEAL single-threaded; Lattigo with GOMAXPROCS={threads})" + (f"; {missing[0]}" if missing else ""))
    records: list[dict] = []
    rows: list[tuple[dict, dict, dict]] = []  # (ours, seal, lattigo) per ring degree, for the table
    for log_n in log_ns:
        spec = PARAMETER_SETS[log_n]
        ours = {} if bootstrap_only else lycaon_timings(log_n, reps, lt_diagonals, device=device)
        gc.collect()
        seal: dict = {}
        lattigo: dict = {}
        d = ours.get("lt_diagonals")
        if SEAL_NAME in peers_on and not bootstrap_only:
            try:
                seal = seal_ckks_peer.seal_ckks_timings(log_n, spec["log_q"], spec["log_p"], spec["log_scale"], reps, HOISTED, d, spec["lt_level"])
            except Exception as exc:  # noqa: BLE001 - a failing peer becomes a note, not a crash
                seal = {"error": f"SEAL failed: {type(exc).__name__}: {exc}"}
            gc.collect()
        if LATTIGO_NAME in peers_on and not bootstrap_only:
            lattigo = lattigo_peer.run(log_n, spec["log_q"], spec["log_p"], spec["log_scale"], reps=reps, lt_diagonals=d,
                                       lt_level=spec["lt_level"], hoisted=HOISTED, threads=threads)
        if bootstrap and log_n == 16:
            # Never two logN = 16 bootstrappings at once: Lattigo's child has exited before
            # Lycaon's starts, and each first checks the memory available.
            if LATTIGO_NAME in peers_on:
                avail = _available_bytes()
                if avail is not None and avail < BOOTSTRAP_MEMORY["lattigo"]:
                    lattigo["bootstrap_note"] = f"skipped: {avail / 2**30:.1f} GiB available, it needs about {BOOTSTRAP_MEMORY['lattigo'] / 2**30:.0f} GiB"
                    out(f"Lattigo bootstrapping {lattigo['bootstrap_note']}")
                else:
                    boot = lattigo_peer.run(log_n, spec["log_q"], spec["log_p"], spec["log_scale"], reps=1, bootstrap=True, operations=False, threads=threads,
                                            boot_log_p=LATTIGO_BOOT_LOG_P)
                    if "error" in boot:
                        lattigo["bootstrap_note"] = f"failed: {boot['error']}"
                        out(f"Lattigo bootstrapping failed: {boot['error']}")
                    else:
                        lattigo.update({k: v for k, v in boot.items() if k.startswith("bootstrap") or k in ("peak_rss_bytes", "threads")})
            avail = _available_bytes()
            if avail is not None and avail < BOOTSTRAP_MEMORY["lycaon"]:
                ours["bootstrap_note"] = f"skipped: {avail / 2**30:.1f} GiB available, it needs about {BOOTSTRAP_MEMORY['lycaon'] / 2**30:.0f} GiB"
                out(f"Lycaon bootstrapping {ours['bootstrap_note']}")
            else:
                ours.update(lycaon_bootstrap(device=device))
                gc.collect()
        elif bootstrap:
            out(f"bootstrapping at logN = {log_n}: not run (no 128-bit secure bootstrappable chain fits logN = {log_n}; only logN = 16 is benchmarked)")
        for op in OPS:
            pairs = [(SEAL_NAME, seal), (LATTIGO_NAME, lattigo)] if peers_on else [(None, None)]
            for name, theirs in pairs:
                if name is not None and name not in peers_on:
                    continue
                rec = _record(op, log_n, ours, name, theirs, threads)
                if rec is not None:
                    records.append(rec)
        rows.append((ours, seal, lattigo))
        for name, theirs in ((SEAL_NAME, seal), (LATTIGO_NAME, lattigo)):
            if theirs.get("error"):
                out(f"{name} at logN = {log_n}: {theirs['error']}")
    _print_table(records, peers_on, threads, out)
    if json_path:
        payload = {"info": {"lycaon": info, "threads": threads, "seal_threads": 1 if SEAL_NAME in peers_on else None,
                            "lattigo_threads": threads if LATTIGO_NAME in peers_on else None, "reps": reps, "peers": peers_on,
                            "parameter_sets": {str(k): v for k, v in PARAMETER_SETS.items() if k in log_ns}},
                   "records": records}
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=1)
        out(f"wrote {json_path}")
    return records


def _print_table(records: list[dict], peers_on: Sequence[str], threads: int, out) -> None:
    """One row per (op, logN): Lycaon, each peer and its ratio, precision, levels, key memory."""
    by_op: dict[tuple[str, int], dict[Optional[str], dict]] = {}
    for r in records:
        by_op.setdefault((r["op"], r["log_n"]), {})[r["peer"]] = r
    columns = ["op", "logN", "Lycaon"]
    for p in peers_on:
        columns += [p.upper() if p == SEAL_NAME else p.capitalize(), f"ratio {p}"]
    short = {SEAL_NAME: "S", LATTIGO_NAME: "La"}
    columns += ["bits Ly" + "".join(f"/{short[p]}" for p in peers_on), "levels left", "keys Lycaon", "keys peer"]
    lines = []
    for (op, log_n), per_peer in by_op.items():
        any_rec = next(iter(per_peer.values()))
        label = op
        if op == "linear_transform":
            label = f"linear_transform ({any_rec['diagonals']} diag., level {any_rec['level']})"
        row = [label, str(log_n), _fmt_time(any_rec["lycaon_us"])]
        bits = [f"{any_rec['precision_bits']:.1f}" if any_rec["precision_bits"] is not None else "-"]
        peer_keys = []
        for p in peers_on:
            r = per_peer.get(p, {})
            row += [_fmt_time(r.get("peer_us")), f"{r['ratio']:.2f}" if r.get("ratio") is not None else "-"]
            bits.append(f"{r['peer_precision_bits']:.1f}" if r.get("peer_precision_bits") is not None else "-")
            if r.get("peer_key_bytes") is not None:
                peer_keys.append(f"{short[p]} {_fmt_bytes(r['peer_key_bytes'])}")
            if r.get("peer_rss_growth_bytes") is not None:
                peer_keys.append(f"{short[p]} {_fmt_bytes(r['peer_rss_growth_bytes'])} RSS")
        levels = "-"
        if op == "bootstrap":
            levels = str(any_rec["levels_left"] if any_rec["levels_left"] is not None else "-") + "".join(f"/{per_peer[p]['peer_levels_left']}" for p in peers_on if per_peer.get(p, {}).get("peer_levels_left") is not None)
        ours_keys = _fmt_bytes(any_rec.get("key_bytes"))
        if op == "bootstrap" and any_rec.get("rss_growth_bytes") is not None:
            ours_keys += f" ({_fmt_bytes(any_rec['rss_growth_bytes'])} RSS)"
        row += ["/".join(bits), levels, ours_keys, ", ".join(peer_keys) or "-"]
        lines.append(row)
    title = f"CKKS, Lycaon vs {' and '.join(peers_on) or 'no peer'} (ratio = Lycaon / peer, below 1: Lycaon faster; Lycaon {threads} threads, SEAL 1, Lattigo GOMAXPROCS {threads})"
    try:
        from rich.console import Console  # noqa: PLC0415
        from rich.table import Table  # noqa: PLC0415
    except ImportError:
        out(title)
        out(" | ".join(columns))
        for row in lines:
            out(" | ".join(row))
        return
    table = Table(title=title)
    for c in columns:
        table.add_column(c, justify="left" if c == "op" else "right")
    for row in lines:
        table.add_row(*row)
    Console(width=220).print(table)
