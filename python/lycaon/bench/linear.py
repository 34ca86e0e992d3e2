"""Encrypted linear layers: every algorithm on the layer shapes of ../papers/001 (Tables 2-4) and
on ResNet-20's, and, in the same run, the same convolutions through SecretFlow SPU's CHEETAH
protocol (two parties on loopback) for the ResNet-20 shapes.

Each Lycaon record runs the layer as client and server (keys, encryption, the server's evaluation,
decryption) on random 8-bit inputs and weights and checks the result against the integer
reference; ``exact`` and ``counts_match`` (stated operation counts equal the instrumented run)
are part of every record. Layers whose prepared weights would not fit in memory are not run;
their records carry the plan's stated figures and ``"run": false``.

Parameters (128-bit secure per the HE standard, n = 4096, log2(QP) <= 109): the papers' n = 2048
with a 60-bit q is below 128 bits. Slot algorithms use SEAL's BFV default split, Q = 36 + 36
bits and one 37-bit special prime; the conventional method is also run as 001 ran it, with one
ciphertext prime (54 bits, P 55) and plaintext decomposition; the coefficient algorithm needs no
key switching and takes Q = 55 + 54 bits. The plaintext modulus is a 20-bit prime (the papers
use 19-20 bits).
"""

from __future__ import annotations

import json
import time
from typing import Optional, Sequence

import numpy as np

import lycaon

from . import peers

spu_peer, _PEER_IMPORT_ERROR = peers.load("spu_peer")  # the SPU side is optional (lycaon-benchmarks)

N = 4096
T_BITS = 20
#: (H=W, c_in, c_out, k, stride, groups) of 001's Tables 2-4.
PAPER_LAYERS = [
    (32, 64, 128, 3, 1, 1),
    (32, 128, 128, 3, 1, 1),
    (64, 64, 64, 3, 1, 1),
    (128, 64, 128, 3, 1, 1),
    (256, 3, 64, 3, 1, 1),
    (224, 3, 64, 3, 1, 1),
    (56, 64, 256, 1, 1, 1),
    (56, 256, 64, 1, 1, 1),
    (28, 192, 192, 3, 1, 192),
]
#: ResNet-20 (CIFAR-10) convolutions, one per distinct shape.
RESNET20_LAYERS = [
    (32, 3, 16, 3, 1, 1),
    (32, 16, 16, 3, 1, 1),
    (32, 16, 32, 3, 2, 1),
    (16, 32, 32, 3, 1, 1),
    (16, 32, 64, 3, 2, 1),
    (8, 64, 64, 3, 1, 1),
]
#: (algorithm, options, parameter set).
ALGORITHMS = [
    ("gazelle", {"schedule": "IA"}, "slots"),
    ("gazelle", {"schedule": "PA"}, "slots"),
    ("gazelle", {"schedule": "IA", "decomposition_bits": 10}, "single"),
    ("walsh", {}, "slots"),
    ("padded", {}, "slots"),
    ("cheetah", {}, "coeff"),
    ("hyena", {}, "slots"),
]
#: Hyena packing sends every output neuron's window: run it on the small ResNet-20 layers only.
HYENA_MAX_OUTPUTS = 32 * 32 * 32
#: Prepared weights above this many bytes are not built (the machine has 24 GiB).
WEIGHT_LIMIT = 3 << 30


#: Moduli bits (Q, P) of each parameter set, all within the standard's 109 bits for n = 4096.
PARAMETER_SETS = {
    "slots": ([36, 36], [37]),  # SEAL's BFV default split
    "single": ([54], [55]),  # one ciphertext prime: the conventional method then needs plaintext decomposition
    "coeff": ([55, 54], []),  # no key switching
}


def _params(name: str) -> "lycaon.BfvParameters":
    q, p = PARAMETER_SETS[name]
    return lycaon.BfvParameters.from_bits(N, q, p, T_BITS)


def layer_name(layer: Sequence[int]) -> str:
    h, c_in, c_out, k, stride, groups = layer
    kind = "dw" if groups > 1 else "conv"
    return f"{kind} {h}x{h}x{c_in}->{c_out} k{k} s{stride}"


def _shape(layer: Sequence[int]) -> dict:
    h, c_in, c_out, k, stride, groups = layer
    return {"h": h, "w": h, "c_in": c_in, "c_out": c_out, "k": k, "stride": stride, "pad": k // 2, "groups": groups}


def run_lycaon(layer: Sequence[int], algorithm: str, options: dict, param_set: str, reps: int, rng: np.random.Generator) -> dict:
    shape = _shape(layer)
    params = _params(param_set)
    plan = lycaon.plan_linear(algorithm, shape, params, options)
    q, p = PARAMETER_SETS[param_set]
    record = {"layer": layer_name(layer), "shape": shape, "algorithm": plan["algorithm"], "n": N, "q_bits": q, "p_bits": p}
    h, c_in, c_out = layer[0], layer[1], layer[2]
    if plan["weight_bytes"] > WEIGHT_LIMIT:
        record.update(run=False, reason=f"{plan['weight_bytes'] / 2**30:.1f} GiB of prepared weights", **_figures(plan))
        return record
    if algorithm == "hyena" and h * h * c_out > HYENA_MAX_OUTPUTS:
        record.update(run=False, reason="Hyena packing is run on the ResNet-20 layers only", **_figures(plan))
        return record
    h, c_in, c_out, k, _, groups = layer
    x = rng.integers(-128, 128, size=c_in * h * h, dtype=np.int64)
    w = rng.integers(-128, 128, size=c_out * (c_in // groups) * k * k, dtype=np.int64)
    run = lycaon.run_linear(algorithm, shape, params, x, w, reps, options)
    record.update(run=True, **_figures(run))
    record.update(
        server_s=run["server_s"],
        client_s=run["encrypt_s"] + run["decrypt_s"],
        exact=run["exact"],
        counts_match=run["counts_match"],
        min_noise_budget_bits=run["min_noise_budget_bits"],
    )
    return record


def _figures(plan: dict) -> dict:
    return {
        "up_bytes": plan["up_bytes"],
        "down_bytes": plan["down_bytes"],
        "weight_bytes": plan["weight_bytes"],
        "key_bytes": plan["key_bytes"],
        "rotations": plan["counts"]["rotations"],
        "counts": plan["counts"],
    }


def _peer_record(layer: Sequence[int], lycaon_rows: list[dict], reps: int) -> dict:
    h, c_in, c_out, k, stride, _ = layer
    record = {"layer": layer_name(layer), "peer": "spu-cheetah"}
    if spu_peer is None:
        record["error"] = f"spu unavailable: {_PEER_IMPORT_ERROR}"
        return record
    try:
        peer = spu_peer.spu_conv2d(h, h, c_in, c_out, k, stride=stride, pad=k // 2, reps=reps)
    except Exception as exc:  # noqa: BLE001 - a failing peer is recorded, not fatal
        record["error"] = f"{type(exc).__name__}: {exc}"
        return record
    record.update(peer)
    ran = [r for r in lycaon_rows if r.get("run") and r["layer"] == record["layer"]]
    for r in ran:
        r["lycaon_s"] = r["server_s"] + r["client_s"]
        r["lycaon_bytes"] = r["up_bytes"] + r["down_bytes"]
        r["time_ratio"] = r["lycaon_s"] / peer["peer_s"]
        r["bytes_ratio"] = r["lycaon_bytes"] / peer["peer_bytes"]
    both = [r for r in ran if r["time_ratio"] <= 1.0 and r["bytes_ratio"] <= 1.0]
    best = min(both or ran, key=lambda r: max(r["time_ratio"], r["bytes_ratio"]), default=None)
    if best is not None:
        record.update(best_algorithm=best["algorithm"], time_ratio=best["time_ratio"], bytes_ratio=best["bytes_ratio"])
    return record


def run(layers: Optional[Sequence[Sequence[int]]] = None, reps: int = 1, json_path: Optional[str] = None, peer: bool = True, seed: int = 0) -> list[dict]:
    from rich.console import Console  # noqa: PLC0415
    from rich.progress import Progress  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    if peer and spu_peer is None:
        print(f"SPU peer unavailable ({_PEER_IMPORT_ERROR}): showing Lycaon only")
    layers = list(layers) if layers is not None else PAPER_LAYERS + RESNET20_LAYERS
    rows: list[dict] = []
    peers: list[dict] = []
    started = time.time()
    with Progress(transient=True) as progress:
        task = progress.add_task("linear layers", total=len(layers) * len(ALGORITHMS))
        for layer in layers:
            here = []
            for algorithm, options, param_set in ALGORITHMS:
                progress.update(task, description=f"{layer_name(layer)}: {algorithm}")
                try:
                    here.append(run_lycaon(layer, algorithm, options, param_set, reps, rng))
                except lycaon.LycaonError as exc:
                    here.append({"layer": layer_name(layer), "algorithm": algorithm, "run": False, "reason": str(exc)})
                progress.advance(task)
            rows.extend(here)
            if peer and tuple(layer) in {tuple(x) for x in RESNET20_LAYERS}:
                progress.update(task, description=f"{layer_name(layer)}: SPU CHEETAH")
                peers.append(_peer_record(layer, here, reps))

    table = Table(title=f"Linear layers, n = {N}, t of {T_BITS} bits ({time.time() - started:.0f} s)")
    for col in ["layer", "algorithm", "server s", "client s", "up MB", "down MB", "weights MB", "keys MB", "rot", "exact"]:
        table.add_column(col, justify="left" if col in ("layer", "algorithm") else "right")
    for r in rows:
        mb = lambda v: f"{v / 1e6:.2f}" if isinstance(v, (int, float)) else "-"  # noqa: E731
        table.add_row(
            r["layer"], r["algorithm"],
            f"{r['server_s']:.3f}" if r.get("run") else "not run",
            f"{r['client_s']:.3f}" if r.get("run") else "-",
            mb(r.get("up_bytes")), mb(r.get("down_bytes")), mb(r.get("weight_bytes")), mb(r.get("key_bytes")),
            str(r.get("rotations", "-")), str(r.get("exact", "-")),
        )
    console = Console(width=max(Console().width, 150))
    console.print(table)
    if peers:
        pt = Table(title="ResNet-20 layers: best Lycaon algorithm vs SPU CHEETAH (ratio < 1: Lycaon better)")
        for col in ["layer", "peer s", "peer MB", "best", "time ratio", "bytes ratio"]:
            pt.add_column(col, justify="left" if col in ("layer", "best") else "right")
        for p in peers:
            if "error" in p:
                pt.add_row(p["layer"], "-", "-", p["error"][:60], "-", "-")
            else:
                pt.add_row(p["layer"], f"{p['peer_s']:.3f}", f"{p['peer_bytes'] / 1e6:.2f}", p.get("best_algorithm", "-"), f"{p.get('time_ratio', float('nan')):.3f}", f"{p.get('bytes_ratio', float('nan')):.3f}")
        console.print(pt)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(rows + peers, f, indent=1)
    return rows + peers
