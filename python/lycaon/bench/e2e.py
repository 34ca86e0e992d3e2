"""Private inference end to end (``lycaon bench e2e``): Lycaon's hybrid mode against SecretFlow
SPU's CHEETAH on whole networks, where the time of one inference goes, latency under concurrent
sessions, and ResNet-50's bytes next to Cheetah's published figure.

Lycaon: for ResNet-20 on CIFAR-10 and LeNet-5 on MNIST (real test images), a ``hybrid.Server``
(planned for the LAN, 40 bits of noise flooding, up to 10 sessions) and a ``hybrid.Client`` run in
this process over TCP on loopback with no link emulation, one session per image (key upload and
OT setup included). Each link's time is then modelled from the session's bytes and rounds, as
``lycaon_runtime::ClientOutcome::account`` does:

    link time = 8 * bytes / bandwidth + 2 * rounds * one-way delay,

with lycaon-plan's links (costs.rs ``Link``): lan = 2 Gbps and 0.25 ms one way, wan = 400 Mbps
and 20 ms one way (40 ms round trip). So both links come from one run, and ``lycaon_s`` for a
link is the loopback wall time plus that link time. Loopback time splits into the client's HE
(key generation, encryption, decryption), the server's HE (evaluation, masking, flooding) and the
rest, the two-party protocols' computation together with serialisation and loopback transfer
(the runtime's records do not separate those).

The peer (``lycaon_benchmarks.spu_peer.spu_network``): the same architecture in jax with
batch-norm folded (the float weights of ``frontend.simplify(zoo.load_model(name))``), the weights
shared by alice (rank 0), the image by bob (rank 1), CHEETAH over brpc on loopback, FM64 with 18
fraction bits. SPU
computes every convolution and FC layer with both operands secret-shared, more work than Lycaon's
client-input x server-weight setting. SPU logs bytes per run but no rounds (only its send
actions), so its link time is modelled from bytes alone, ``8 * bytes / bandwidth``, which leaves
out every delay and favours SPU; ``peer_s_with_send_delays`` adds one one-way delay per send
action as an upper bound. ``peer_s`` and ``peer_bytes`` are SPU's cold run (run 0: its Ferret OT
and HE key setup included), the counterpart of Lycaon's one session per image; the warm runs are
recorded beside them. The input sharing before a run is not timed or counted.

Records: {"model", "link", "lycaon_s", "lycaon_bytes", "peer", "peer_s", "peer_bytes",
"time_ratio", "bytes_ratio"} (ratio < 1: Lycaon better), with the components in "details".
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import platform
import sys
import threading
import time
from typing import Any, Optional, Sequence

import numpy as np

from lycaon import _native

from . import peers

spu_peer, _PEER_IMPORT_ERROR = peers.load("spu_peer")  # lycaon-benchmarks' adapter; SPU itself is imported only when the peer runs

#: lycaon-plan's links (costs.rs ``Link::lan``, ``Link::wan``).
LINKS = {
    "lan": {"bandwidth_bits_per_s": 2e9, "one_way_delay_s": 0.25e-3},
    "wan": {"bandwidth_bits_per_s": 400e6, "one_way_delay_s": 20e-3},
}
#: Zoo name -> data set of its bundled test images.
MODELS = {"resnet20-cifar10": "cifar10", "lenet5-mnist": "mnist"}
#: Huang et al., "Cheetah: Lean and Fast Secure Two-Party Deep Neural Network Inference" (USENIX
#: Security 2022): ResNet-50 on ImageNet, total communication.
CHEETAH_RESNET50_BYTES = 2.3e9
#: Sessions at once for the latency distribution.
CONCURRENCY = (1, 4, 10)
#: ResNet-20 serves the concurrency study when ten of its sessions take at most this long in a row.
CONCURRENCY_BUDGET_S = 180.0
#: How long the ResNet-50 planning may take before it is reported as not waited for.
RESNET50_PLAN_LIMIT_S = 300.0
PEER = "spu-cheetah"
SPU_CAVEAT = ("SPU computes every convolution and FC layer with both operands secret-shared (weights shared by alice, image by bob): "
              "more work than Lycaon's client-input x server-weight setting")
RECORD_KEYS = ("model", "link", "lycaon_s", "lycaon_bytes", "peer", "peer_s", "peer_bytes", "time_ratio", "bytes_ratio")


def link_seconds(nbytes: float, rounds: float, link: str) -> float:
    """What ``link`` adds to moving ``nbytes`` in ``rounds`` round trips."""
    spec = LINKS[link]
    return nbytes * 8.0 / spec["bandwidth_bits_per_s"] + 2.0 * rounds * spec["one_way_delay_s"]


def peer_missing() -> Optional[str]:
    """None when SPU and its adapter can be imported here, else the line that says they cannot."""
    if spu_peer is None:
        return f"peer not installed: {_PEER_IMPORT_ERROR}"
    try:
        found = importlib.util.find_spec("spu") is not None
    except (ImportError, ValueError):  # a broken or blocked package
        found = False
    if not found:
        return (f"peer not installed: spu is not importable from {sys.executable} "
                "(an optional extra: pip install -e 'benchmarks[peers]' in a Python 3.11 x86_64 environment, see benchmarks/lycaon_benchmarks/spu_peer.py)")
    return None


def bundled_images(model: str, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``count`` bundled test images of the model's data set (uint8) and their labels."""
    from lycaon.data import demo_images  # noqa: PLC0415

    raw, labels = demo_images(MODELS[model])
    if not 1 <= count <= len(raw):
        raise ValueError(f"{model}: between 1 and {len(raw)} test images, not {count}")
    return raw[:count], labels[:count].astype(np.int64)


def start_server(model: str, flood_bits: float = 40.0, plan: Any = None, exact_truncation: bool = True, link: str = "lan"):
    """A ``hybrid.Server`` for ``model`` planned for ``link`` (or on ``plan``), listening on a
    free loopback port with no link emulation, ``max(CONCURRENCY)`` sessions at once."""
    from lycaon.hybrid import Server  # noqa: PLC0415

    server = Server(model, plan=plan, link=link, flood_bits=flood_bits, max_sessions=max(CONCURRENCY), exact_truncation=exact_truncation)
    server.plan_link = link if plan is None else "given"
    server.start(0, "127.0.0.1")
    return server


def _mean(rows: Sequence[dict], key: str) -> float:
    return float(np.mean([r[key] for r in rows]))


def run_lycaon(server: Any, raw: np.ndarray, labels: np.ndarray) -> dict:
    """One session per image against ``server``; the means over the images, each link's
    modelled time, the per-image records and the float model's and fixed-point twin's labels.
    "x" holds the preprocessed images (for the peer)."""
    from lycaon.frontend import run_float  # noqa: PLC0415
    from lycaon.frontend.quantize import run_integer  # noqa: PLC0415
    from lycaon.hybrid import Client  # noqa: PLC0415

    client = Client(server.address)
    x = client.preprocess(raw)
    per_image = []
    for i in range(len(x)):
        cpu0, kernels0 = time.process_time(), _native.profile_seconds()
        res = client.infer(x[i:i + 1])
        cpu1, kernels1 = time.process_time(), _native.profile_seconds()
        img = res.images[0]
        per_image.append({"cpu_s": cpu1 - cpu0, "kernel_cpu_s": {k: kernels1[k] - kernels0[k] for k in kernels1},"label": int(res.labels[0]), "true_label": int(labels[i]), "logits": None if res.logits is None else res.logits[0].tolist(),
                          **{k: img[k] for k in ("total_s", "client_s", "server_s", "two_party_s", "bytes", "rounds")},
                          "setup": img["setup"], "layers": img["layers"]})
    q = server.quantized
    float_labels = run_float(q.graph, x).argmax(1)
    twin_labels = run_integer(q, q.encode_input(x)).argmax(1)
    private = np.array([r["label"] for r in per_image])
    out = {"model": server.program["name"], "images": len(x), "plan_link": server.plan_link, "flood_bits": server.options["flood_bits"],
           **{k: _mean(per_image, k) for k in ("total_s", "client_s", "server_s", "two_party_s", "bytes", "rounds")},
           "setup_bytes": float(np.mean([r["setup"]["bytes_sent"] + r["setup"]["bytes_received"] for r in per_image])),
           "labels": private.tolist(), "true_labels": labels.tolist(), "float_labels": float_labels.tolist(), "fixed_point_labels": twin_labels.tolist(),
           "top1_equal_float": bool(np.array_equal(private, float_labels)), "top1_equal_fixed_point": bool(np.array_equal(private, twin_labels)),
           "links": {}, "per_image": per_image, "x": x}
    for link in LINKS:
        comm = [link_seconds(r["bytes"], r["rounds"], link) for r in per_image]
        out["links"][link] = {"comm_s": float(np.mean(comm)), "total_s": float(np.mean([r["total_s"] + c for r, c in zip(per_image, comm)]))}
    return out


def run_peer(model: str, x: np.ndarray, weights: str = "secret") -> dict:
    """The model through SPU CHEETAH on the preprocessed images ``x``, with each link's modelled
    time; {"peer", "error"} when SPU is missing or fails."""
    missing = peer_missing()
    if missing:
        return {"peer": PEER, "error": missing}
    from lycaon.frontend import simplify, zoo  # noqa: PLC0415

    try:
        res = spu_peer.spu_network(simplify(zoo.load_model(model)), x, weights=weights)
    except Exception as exc:  # noqa: BLE001 - a failing peer is recorded, not fatal
        return {"peer": PEER, "error": f"{type(exc).__name__}: {exc}"}
    res["weights"] = weights
    res["links"] = {}
    for link in LINKS:
        one_way = LINKS[link]["one_way_delay_s"]
        entry = {"cold_s": res["first_run_s"] + link_seconds(res["first_run_bytes"], 0, link),
                 "warm_s": res["peer_s"] + link_seconds(res["peer_bytes"], 0, link)}
        if "first_run_send_actions" in res:
            entry["cold_s_with_send_delays"] = entry["cold_s"] + res["first_run_send_actions"] * one_way
            entry["warm_s_with_send_delays"] = entry["warm_s"] + res["peer_send_actions"] * one_way
        res["links"][link] = entry
    return res


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a is not None and b else None


def make_records(by_link: dict, peer: dict) -> tuple[list[dict], list[dict]]:
    """(records with exactly ``RECORD_KEYS``, details with the components) for one model, one
    pair per link; ``by_link``: ``run_lycaon``'s summary of the run planned for each link.
    Without a peer result its fields and the ratios are None."""
    records, details = [], []
    ok = "error" not in peer
    for link in LINKS:
        lyc = by_link[link]
        lycaon_s, lycaon_bytes = lyc["links"][link]["total_s"], lyc["bytes"]
        peer_s = peer["links"][link]["cold_s"] if ok else None
        peer_bytes = peer["first_run_bytes"] if ok else None
        records.append({"model": lyc["model"], "link": link, "lycaon_s": lycaon_s, "lycaon_bytes": lycaon_bytes, "peer": PEER, "peer_s": peer_s,
                        "peer_bytes": peer_bytes, "time_ratio": _ratio(lycaon_s, peer_s), "bytes_ratio": _ratio(lycaon_bytes, peer_bytes)})
        d = {"model": lyc["model"], "link": link, "images": lyc["images"], "lycaon_server_s": lyc["server_s"], "lycaon_client_s": lyc["client_s"],
             "lycaon_two_party_s": lyc["two_party_s"], "lycaon_comm_s": lyc["links"][link]["comm_s"], "lycaon_loopback_s": lyc["total_s"],
             "lycaon_rounds": lyc["rounds"], "lycaon_setup_bytes": lyc["setup_bytes"], "lycaon_plan_link": lyc["plan_link"]}
        if ok:
            warm_s = peer["links"][link]["warm_s"]
            d.update(peer_loopback_s=peer["first_run_s"], peer_comm_s=peer_s - peer["first_run_s"], peer_rounds=None,
                     peer_send_actions=peer.get("first_run_send_actions"), peer_s_with_send_delays=peer["links"][link].get("cold_s_with_send_delays"),
                     peer_warm_s=warm_s, peer_warm_bytes=peer["peer_bytes"], time_ratio_vs_warm=_ratio(lycaon_s, warm_s),
                     bytes_ratio_vs_warm=_ratio(lycaon_bytes, peer["peer_bytes"]), peer_weights=peer["weights"], peer_note=SPU_CAVEAT)
        else:
            d["peer_error"] = peer["error"]
        details.append(d)
    return records, details


def breakdown(image: dict) -> dict:
    """Where the time of one inference went (like 003 Fig. 7, at the granularity the runtime
    records): one session's per-op records split into the client's HE, the server's HE, the
    two-party ops, the linear ops' remainder and the setup's, and each link's modelled network
    time. The loopback rows add up to the session's wall time."""
    setup, layers = image["setup"], image["layers"]
    linear = [l for l in layers if l["op"] == "linear"]
    other = [l for l in layers if l["op"] != "linear"]
    moved = lambda rows: sum(l["bytes_sent"] + l["bytes_received"] for l in rows)  # noqa: E731
    rows = [
        {"part": "client HE (key generation, encryption, decryption)", "seconds": setup["client_s"] + sum(l["client_s"] for l in linear)},
        {"part": "server HE (evaluation, masking, noise flooding)", "seconds": sum(l["server_s"] for l in linear)},
        {"part": "two-party ops (ReLU, truncation, share conversions; with their loopback messaging)", "seconds": sum(l["seconds"] for l in other),
         "bytes": moved(other), "rounds": sum(l["rounds"] for l in other)},
        {"part": "linear ops beyond HE (ring conversion, serialisation, loopback transfer)",
         "seconds": sum(l["seconds"] - l["client_s"] - l["server_s"] for l in linear), "bytes": moved(linear), "rounds": sum(l["rounds"] for l in linear)},
        {"part": "setup beyond key generation (key upload, OT setup)", "seconds": setup["seconds"] - setup["client_s"], "bytes": moved([setup]),
         "rounds": setup["rounds"]},
    ]
    rows.append({"part": "output reveal, timings report and connection", "seconds": image["total_s"] - setup["seconds"] - sum(l["seconds"] for l in layers),
                 "bytes": image["bytes"] - moved(layers) - moved([setup]), "rounds": image["rounds"] - sum(l["rounds"] for l in layers) - setup["rounds"]})
    for link in LINKS:
        rows.append({"part": f"network, {link} (modelled: 8 bytes / bandwidth + 2 rounds x delay)", "seconds": link_seconds(image["bytes"], image["rounds"], link),
                     "link": link})
    by_op: dict[str, dict] = {}
    for l in layers:
        row = by_op.setdefault(l["op"], {"op": l["op"], "count": 0, "seconds": 0.0, "client_s": 0.0, "server_s": 0.0, "bytes": 0, "rounds": 0})
        row["count"] += 1
        for key in ("seconds", "client_s", "server_s", "rounds"):
            row[key] += l[key]
        row["bytes"] += l["bytes_sent"] + l["bytes_received"]
    return {"loopback_s": image["total_s"], "bytes": image["bytes"], "rounds": image["rounds"], "rows": rows, "by_op": list(by_op.values()),
            "totals": {link: image["total_s"] + link_seconds(image["bytes"], image["rounds"], link) for link in LINKS},
            "kernels": kernel_split(image)}


#: The kernels lycaon_math::profile times, as the bench names them.
KERNEL_PARTS = {"ntt": "NTT (all: encryption, products, modulus switching, inside key switching)",
                "key_switch": "key switching (decomposition, inner products, ModDown; its NTTs included)",
                "ot_extension": "silent-OT extension (Ferret: half-trees and LPN encoding)",
                "ot_hash": "OT hashing (fixed-key AES of derived OTs and Ferret's masks)",
                "serialize": "ciphertext (de)serialisation and seed expansion"}


def kernel_split(image: dict) -> Optional[dict]:
    """One session's process CPU time (both parties: they share this process) split by kernel,
    from lycaon_math::profile's counters: CPU seconds summed over threads, so they compare with
    the CPU total, not the wall time. "other" is the rest: element-wise arithmetic (products,
    masks, noise, share arithmetic), comparisons' own logic, messaging."""
    k = image.get("kernel_cpu_s")
    if not k:
        return None
    cpu = image["cpu_s"]
    exclusive = k["ntt"] + k["key_switch"] + k["ot_extension"] + k["ot_hash"] + k["serialize"]
    rows = [{"kernel": name, "part": KERNEL_PARTS[name], "cpu_s": k[name], "share_of_cpu": k[name] / cpu if cpu else None} for name in KERNEL_PARTS]
    rows.append({"kernel": "other", "part": "everything else (element-wise arithmetic, comparison logic, messaging)",
                 "cpu_s": max(cpu - exclusive, 0.0), "share_of_cpu": max(cpu - exclusive, 0.0) / cpu if cpu else None})
    return {"cpu_s": cpu, "rows": rows,
            "note": "CPU seconds of both parties (one process), summed over threads; NTTs inside key switching count in both rows "
                    "(key switching is 0 for plans without rotations), so 'other' is then a lower bound"}


def concurrency(server: Any, x: np.ndarray, levels: Sequence[int] = CONCURRENCY, samples: int = 3, timeout_s: float = 300.0) -> list[dict]:
    """Latency with ``levels`` sessions at once on one server: that many client threads, each
    running ceil(samples / sessions) inferences in a row (so at least ``samples`` per level).
    Latency is each ``Client.infer``'s wall time on loopback (no link); mean, std, p95.
    ``timeout_s``: each client's."""
    from lycaon.hybrid import Client  # noqa: PLC0415

    rows = []
    for sessions in levels:
        per_thread = max(1, math.ceil(samples / sessions))
        clients = [Client(server.address, timeout_s=timeout_s) for _ in range(sessions)]
        for c in clients:
            _ = c.program  # fetched before the clock starts, so only inference sessions overlap
        latencies: list[float] = []
        errors: list[str] = []
        lock = threading.Lock()

        def work(k: int, client: Any) -> None:
            for j in range(per_thread):
                i = (k + j) % len(x)
                t0 = time.perf_counter()
                try:
                    client.infer(x[i:i + 1])
                except Exception as exc:  # noqa: BLE001 - recorded with the level
                    with lock:
                        errors.append(f"{type(exc).__name__}: {exc}")
                    return
                with lock:
                    latencies.append(time.perf_counter() - t0)

        threads = [threading.Thread(target=work, args=(k, c)) for k, c in enumerate(clients)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - t0
        lat = np.array(latencies)
        rows.append({"sessions": sessions, "inferences": len(lat), "mean_s": float(lat.mean()) if len(lat) else None,
                     "std_s": float(lat.std()) if len(lat) else None, "p95_s": float(np.percentile(lat, 95)) if len(lat) else None,
                     "min_s": float(lat.min()) if len(lat) else None, "max_s": float(lat.max()) if len(lat) else None, "wall_s": elapsed,
                     "throughput_per_s": len(lat) / elapsed if elapsed else None, "errors": errors})
    return rows


def resnet50_bytes(flood_bits: float = 40.0, limit_s: float = RESNET50_PLAN_LIMIT_S, exact_truncation: bool = True) -> dict:
    """ResNet-50 at ImageNet shape (random weights): the planner's total bytes and rounds,
    next to Cheetah's published 2.3 GB, with ``exact_truncation`` (the runtime's default) and,
    under "faithful_truncation", with the truncation of Cheetah's own class (off by at most one
    unit). A count, not a run; planning longer than ``limit_s`` is reported, not waited for."""
    from lycaon import plan as planner  # noqa: PLC0415

    box: dict = {}

    def work() -> None:
        try:
            box["plan"] = planner.plan("resnet50", flood_bits=flood_bits, nonlinear=True, exact_truncation=exact_truncation)
            if exact_truncation:
                box["faithful"] = planner.plan("resnet50", flood_bits=flood_bits, nonlinear=True, exact_truncation=False)
        except Exception as exc:  # noqa: BLE001 - reported in the record
            box["error"] = f"{type(exc).__name__}: {exc}"

    t0 = time.perf_counter()
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(limit_s)
    elapsed = time.perf_counter() - t0
    base = {"model": "resnet50", "input_shape": [3, 224, 224], "weights": "random", "source": "the planner's count (lycaon.plan.plan), not a run",
            "cheetah_published_bytes": CHEETAH_RESNET50_BYTES, "cheetah_reference": "Huang et al. 2022 (USENIX Security), ResNet-50 on ImageNet",
            "plan_s": elapsed, "flood_bits": flood_bits, "truncation": "exact" if exact_truncation else "faithful"}
    if thread.is_alive():
        return {**base, "error": f"planning took more than {limit_s:.0f} s; not waited for"}
    if "error" in box:
        return {**base, "error": box["error"]}
    plan = box["plan"]
    layers = plan["layers"]
    parts = _plan_parts(plan)
    total = float(sum(parts.values()))
    dedup = total - parts["keys"] + _deduplicated_key_bytes(layers)
    if "faithful" in box:
        fp = _plan_parts(box["faithful"])
        f_total = float(sum(fp.values()))
        base["faithful_truncation"] = {"total_bytes": f_total, "rounds": box["faithful"]["rounds"], "bytes": fp, "ratio_to_cheetah": f_total / CHEETAH_RESNET50_BYTES,
                                       "why": "Cheetah's truncation is of this class (off by at most one unit): the like-for-like count"}
    # The runtime converts shares between rings only where a residual add joins two rings; the
    # planner does not price those conversions, so count the rings the plan uses.
    rings = sorted({(int(l["params"]["t_bits"]), int(l["params"]["n"])) for l in layers})
    return {**base, "total_bytes": total, "rounds": plan["rounds"], "planner_total_bytes": plan["total_bytes"], "bytes": parts,
            "share_rings": [{"t_bits": t, "n": n} for t, n in rings],
            "total_bytes_keys_deduplicated": dedup, "ratio_to_cheetah": total / CHEETAH_RESNET50_BYTES,
            "ratio_to_cheetah_keys_deduplicated": dedup / CHEETAH_RESNET50_BYTES, "linear_layers": len(layers),
            "nonlinear_elements": sum(l["nonlinear_elements"] for l in layers), "algorithms": sorted({l["algorithm"] for l in layers}),
            "two_party_costs": plan["two_party_costs"],
            "how": ("total = linear layers' bytes up and down + their key bytes (summed per layer) + the two-party ReLU and truncation the planner "
                    "prices on every linear layer's outputs (per-element bytes from a short run at "
                    f"{plan['two_party_costs']['ring_bits']} bits) + the OT setup; plan()'s own total_bytes leaves the keys out. "
                    "keys_deduplicated: one key set per parameter set holding the union of its layers' Galois elements, as the runtime uploads them")}


def _plan_parts(plan: dict) -> dict:
    layers = plan["layers"]
    return {"linear_up": sum(l["bytes_up"] for l in layers), "linear_down": sum(l["bytes_down"] for l in layers),
            "keys": sum(l["key_bytes"] for l in layers), "nonlinear": sum(l.get("nonlinear_bytes", 0) for l in layers),
            "two_party_setup": plan.get("two_party_costs", {}).get("setup_bytes", 0)}


def _deduplicated_key_bytes(layers: Sequence[dict]) -> float:
    """Key bytes with one key set per parameter set (n, q, p, digits) holding the union of its
    layers' Galois elements, each element priced as in the plan (key_bytes / elements)."""
    per_element: dict[tuple, float] = {}
    elements: dict[tuple, set] = {}
    for l in layers:
        if l["galois_elements"]:
            p = l["params"]
            key = (p["n"], tuple(p["q_bits"]), tuple(p["p_bits"]), p["digits"])
            per_element[key] = max(per_element.get(key, 0.0), l["key_bytes"] / len(l["galois_elements"]))
            elements.setdefault(key, set()).update(l["galois_elements"])
    return float(sum(per_element[k] * len(v) for k, v in elements.items()))


def planner_check(server: Any, measured: dict, flood_bits: float) -> dict:
    """The planner's count, part by part, for a model that also ran (``measured``:
    ``run_lycaon``'s summary), to calibrate the ResNet-50 count."""
    from lycaon import plan as planner  # noqa: PLC0415

    plan = planner.plan(server.program["name"], quantized=server.quantized, flood_bits=flood_bits, nonlinear=True,
                        exact_truncation=bool(server.program.get("exact_truncation", True)))
    parts = _plan_parts(plan)
    split = [breakdown(image) for image in measured["per_image"]]
    got = {key: float(np.mean([b["rows"][k].get("bytes", 0) for b in split])) for k, key in
           ((2, "two_party_ops"), (3, "linear_ops"), (4, "setup"), (5, "rest"))}
    # Adds are local; an add's bytes are the conversion of its skip input from another ring.
    got["ring_conversions"] = float(np.mean([sum(r["bytes"] for r in b["by_op"] if r["op"] == "add") for b in split]))
    priced = got["two_party_ops"] - got["ring_conversions"]
    planned = float(sum(parts.values()))
    return {"model": server.program["name"], "planned_bytes": planned, "planned_parts": parts, "measured_bytes": measured["bytes"], "measured_parts": got,
            "planned_over_measured": planned / measured["bytes"],
            "nonlinear_measured_over_planned": priced / parts["nonlinear"] if parts["nonlinear"] else None,
            "planned_rounds": plan["rounds"], "measured_rounds": measured["rounds"],
            "measured_parts_note": ("linear_ops include the ring conversions before each linear layer; two_party_ops are every non-linear op, "
                                    "ring_conversions (the residual adds' skip inputs moved between rings) among them; "
                                    "nonlinear_measured_over_planned compares the ops the planner prices (two_party_ops - ring_conversions)")}


def _mb(v: Optional[float]) -> str:
    return "-" if v is None else f"{v / 1e6:.2f}"


def _s(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.3f}"


def _r(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.2f}"


def _print(out: dict, console: Any) -> None:
    from rich.table import Table  # noqa: PLC0415

    t = Table(title=f"Private inference end to end, Lycaon hybrid vs {PEER} ({out['elapsed_s']:.0f} s; ratio < 1: Lycaon better)", title_justify="left")
    for col in ["model", "link", "Lycaon s", "server HE", "client HE", "2PC+ser.", "network", "Lycaon MB", "rounds", "SPU s", "SPU MB",
                "time ratio", "bytes ratio", "SPU warm s", "SPU warm MB"]:
        t.add_column(col, justify="left" if col in ("model", "link") else "right")
    for r, d in zip(out["records"], out["details"]):
        t.add_row(r["model"], r["link"], _s(r["lycaon_s"]), _s(d["lycaon_server_s"]), _s(d["lycaon_client_s"]), _s(d["lycaon_two_party_s"]),
                  _s(d["lycaon_comm_s"]), _mb(r["lycaon_bytes"]), f"{d['lycaon_rounds']:g}", _s(r["peer_s"]), _mb(r["peer_bytes"]), _r(r["time_ratio"]),
                  _r(r["bytes_ratio"]), _s(d.get("peer_warm_s")), _mb(d.get("peer_warm_bytes")))
    console.print(t)
    console.print(f"* {SPU_CAVEAT}.\n* SPU s: its cold run (OT and HE setup included, as Lycaon's per-image session) on loopback + 8 bytes / bandwidth; "
                  "SPU logs no rounds, so no delay is added (favours SPU; details.peer_s_with_send_delays adds one per send action).")
    errors = {m: p["error"] for m, p in out["peer"].items() if "error" in p}
    for m, e in errors.items():
        console.print(f"* {m}: {e}")
    t = Table(title="Top-1 on the images used", title_justify="left")
    for col in ["model", "images", "true", "float", "Lycaon", "Lycaon = float", "SPU", "SPU = float", "SPU max |logit - float|"]:
        t.add_column(col, justify="left" if col == "model" else "right")
    for m, lyc in out["lycaon"].items():
        p = out["peer"].get(m, {})
        t.add_row(m, str(lyc["images"]), str(lyc["true_labels"]), str(lyc["float_labels"]), str(lyc["labels"]), str(lyc["top1_equal_float"]),
                  str(p.get("labels", "-")), str(p.get("top1_equal", "-")), f"{p['max_abs_logit_error']:.2g}" if "max_abs_logit_error" in p else "-")
    console.print(t)
    b = out.get("breakdown")
    if b:
        t = Table(title=f"One {b['model']} inference: where the time goes (loopback {b['loopback_s']:.3f} s, {b['bytes'] / 1e6:.2f} MB, {b['rounds']} rounds)",
                  title_justify="left")
        for col in ["part", "seconds", "share of loopback", "MB", "rounds"]:
            t.add_column(col, justify="left" if col == "part" else "right")
        for row in b["rows"]:
            share = "-" if "link" in row else f"{100 * row['seconds'] / b['loopback_s']:.1f} %"
            t.add_row(row["part"], _s(row["seconds"]), share, _mb(row.get("bytes")), str(row.get("rounds", "-")))
        console.print(t)
        k = b.get("kernels")
        if k:
            t = Table(title=f"The same inference's CPU time by kernel ({k['cpu_s']:.3f} CPU s, both parties)", title_justify="left")
            for col in ["kernel", "CPU s", "share of CPU"]:
                t.add_column(col, justify="left" if col == "kernel" else "right")
            for row in k["rows"]:
                t.add_row(row["part"], _s(row["cpu_s"]), "-" if row["share_of_cpu"] is None else f"{100 * row['share_of_cpu']:.1f} %")
            console.print(t)
            console.print(f"* {k['note']}.")
    c = out.get("concurrency")
    if c and "rows" in c:
        t = Table(title=f"Latency with concurrent sessions on one server: {c['model']} on loopback ({c['why']})", title_justify="left")
        for col in ["sessions", "inferences", "mean s", "std s", "p95 s", "max s", "inferences / s", "errors"]:
            t.add_column(col, justify="right")
        for row in c["rows"]:
            t.add_row(str(row["sessions"]), str(row["inferences"]), _s(row["mean_s"]), _s(row["std_s"]), _s(row["p95_s"]), _s(row["max_s"]),
                      _r(row["throughput_per_s"]), str(len(row["errors"])))
        console.print(t)
    r50 = out.get("resnet50")
    if r50:
        if "error" in r50:
            console.print(f"ResNet-50 (ImageNet shape): {r50['error']}")
        else:
            parts = ", ".join(f"{k} {v / 1e9:.3f} GB" for k, v in r50["bytes"].items())
            console.print(f"ResNet-50 (ImageNet shape, random weights): {r50['total_bytes'] / 1e9:.2f} GB and {r50['rounds']} rounds by {r50['source']} "
                          f"({parts}); Cheetah published {CHEETAH_RESNET50_BYTES / 1e9:.1f} GB: ratio {r50['ratio_to_cheetah']:.2f}. "
                          f"With keys deduplicated per parameter set: {r50['total_bytes_keys_deduplicated'] / 1e9:.2f} GB "
                          f"(ratio {r50['ratio_to_cheetah_keys_deduplicated']:.2f}); truncation {r50['truncation']}.")
            ft = r50.get("faithful_truncation")
            if ft:
                console.print(f"  with the faithful truncation (Cheetah's class, off by at most one unit): {ft['total_bytes'] / 1e9:.2f} GB, "
                              f"{ft['rounds']} rounds (ratio {ft['ratio_to_cheetah']:.2f})")
            chk = r50.get("planner_check")
            if chk:
                console.print(f"  planner check on {chk['model']}: planned {chk['planned_bytes'] / 1e6:.1f} MB / {chk['planned_rounds']} rounds, "
                              f"measured {chk['measured_bytes'] / 1e6:.1f} MB / {chk['measured_rounds']:g} rounds; two-party bytes of the priced ops "
                              f"measured / planned {chk['nonlinear_measured_over_planned']:.2f}; ring conversions at residual adds "
                              f"{chk['measured_parts']['ring_conversions'] / 1e6:.2f} MB (not priced; ResNet-50's plan uses "
                              f"{len(r50.get('share_rings', []))} share ring(s))")
            ext = r50.get("extrapolated_bytes")
            if ext:
                console.print(f"  {ext['how']}: {ext['bytes'] / 1e9:.2f} GB (ratio {ext['ratio_to_cheetah']:.2f})")


def run(images: Optional[dict] = None, json_path: Optional[str] = None, peer: bool = True, peer_weights: str = "secret", concurrency_model: str = "auto",
        resnet50: bool = True, flood_bits: float = 40.0, plans: Optional[dict] = None, concurrency_samples: int = 3, quiet: bool = False,
        exact_truncation: bool = True) -> dict:
    """The whole bench. ``images``: test images per model (default ResNet-20 2, LeNet-5 3; a
    model left out is not run); ``concurrency_model``: "auto" (ResNet-20 when ten of its sessions
    in a row take at most ``CONCURRENCY_BUDGET_S``, else LeNet-5), a zoo name, or "none";
    ``plans``: a plan per model instead of planning (tests). Returns what ``json_path`` gets."""
    from rich.console import Console  # noqa: PLC0415

    console = Console(width=200, quiet=quiet)
    images = dict(images or {"resnet20-cifar10": 2, "lenet5-mnist": 3})
    unknown = sorted(set(images) - set(MODELS))
    if unknown:
        raise ValueError(f"models {unknown}: the bench runs {', '.join(MODELS)}")
    started = time.time()
    missing = peer_missing() if peer else "not run (--no-peer)"
    settings = {
        "links": {k: {**v, "model": "8 * bytes / bandwidth + 2 * rounds * one-way delay, added to the loopback wall time"} for k, v in LINKS.items()},
        "lycaon": {"transport": "TCP on 127.0.0.1, server and client in one process, no link emulation; both links modelled from one run",
                   "session": "one per image: key generation and upload, OT setup, every layer; logits revealed",
                   "plan_link": ("each link's records come from a server planned for that link (wan: one share ring for the network, "
                                 "lycaon serve --link wan); both links' times are modelled from that server's run"), "flood_bits": flood_bits, "max_sessions": max(CONCURRENCY),
                   "truncation": "exact" if exact_truncation else "faithful (off by at most one unit each)",
                   "timing": "mean over the images of the client's wall time per session"},
        "peer": {"name": PEER, "weights": peer_weights, "caveat": SPU_CAVEAT,
                 "timing": "cold run (run 0, Ferret OT and HE key setup included) on loopback, plus 8 * bytes / bandwidth; SPU logs no rounds, "
                           "so no link delay is added; warm runs (median time, mean bytes) in details; input sharing not timed",
                 "jax_model": "frontend.simplify(zoo.load_model(name)): batch-norm folded, float32 weights, conv/relu/avgpool/fc as jax.lax ops"},
        "images": images, "concurrency": list(CONCURRENCY),
        "machine": {"cpu_count": os.cpu_count(), "load_average_at_start": list(os.getloadavg()), "platform": platform.platform(), "python": sys.version.split()[0]},
    }
    if missing is None:
        settings["peer"].update(spu_peer.spu_info())
    else:
        settings["peer"]["error"] = missing
    out: dict[str, Any] = {"bench": "e2e", "settings": settings, "records": [], "details": [], "lycaon": {}, "lycaon_wan_plan": {}, "peer": {}}
    servers: dict[str, Any] = {}
    try:
        for model, count in images.items():
            raw, labels = bundled_images(model, count)
            with console.status(f"{model}: quantising, planning and compiling"):
                servers[model] = start_server(model, flood_bits, (plans or {}).get(model), exact_truncation)
            with console.status(f"{model}: Lycaon, {count} image(s), one session each"):
                lyc = run_lycaon(servers[model], raw, labels)
            x = lyc.pop("x")
            by_link = {"lan": lyc, "wan": lyc}
            if (plans or {}).get(model) is None:
                with console.status(f"{model}: Lycaon planned for the wan, {count} image(s)"):
                    wan_server = start_server(model, flood_bits, None, exact_truncation, link="wan")
                    try:
                        if wan_server.program != servers[model].program:
                            by_link["wan"] = run_lycaon(wan_server, raw, labels)
                            by_link["wan"].pop("x")
                            out["lycaon_wan_plan"][model] = by_link["wan"]
                    finally:
                        wan_server.stop()
            if missing is None:
                with console.status(f"{model}: SPU CHEETAH, {max(count, 2)} run(s)"):
                    p = run_peer(model, x, peer_weights)
            else:
                p = {"peer": PEER, "error": missing}
            recs, dets = make_records(by_link, p)
            out["records"] += recs
            out["details"] += dets
            out["lycaon"][model] = lyc
            out["peer"][model] = p
        if "resnet20-cifar10" in out["lycaon"]:
            out["breakdown"] = {"model": "resnet20-cifar10", "image": 0, **breakdown(out["lycaon"]["resnet20-cifar10"]["per_image"][0])}
        if concurrency_model != "none":
            if concurrency_model == "auto":
                r20 = out["lycaon"].get("resnet20-cifar10")
                ten = 10 * r20["total_s"] if r20 else None
                chosen = "resnet20-cifar10" if ten is not None and ten <= CONCURRENCY_BUDGET_S else "lenet5-mnist"
                why = (f"ten ResNet-20 sessions in a row take ~{ten:.0f} s" + (" <= " if chosen == "resnet20-cifar10" else " > ") +
                       f"{CONCURRENCY_BUDGET_S:.0f} s") if ten is not None else "ResNet-20 not run"
            else:
                chosen, why = concurrency_model, "chosen"
            if chosen not in servers:
                with console.status(f"{chosen}: quantising, planning and compiling"):
                    servers[chosen] = start_server(chosen, flood_bits, (plans or {}).get(chosen), exact_truncation)
            raw, _ = bundled_images(chosen, max(images.get(chosen, 1), 1))
            from lycaon.hybrid import Client  # noqa: PLC0415

            x = Client(servers[chosen].address).preprocess(raw)
            with console.status(f"{chosen}: {', '.join(map(str, CONCURRENCY))} concurrent sessions"):
                rows = concurrency(servers[chosen], x, CONCURRENCY, concurrency_samples)
            out["concurrency"] = {"model": chosen, "why": why, "latency": "wall time of Client.infer on loopback (no link), one session per inference",
                                  "samples_per_level": f"at least {concurrency_samples} (ceil({concurrency_samples} / sessions) per thread)", "rows": rows}
        if resnet50:
            with console.status("resnet50: planning (the planner's count, not a run)"):
                out["resnet50"] = resnet50_bytes(flood_bits, exact_truncation=exact_truncation)
            r50 = out["resnet50"]
            if "resnet20-cifar10" in servers and "error" not in r50:
                chk = r50["planner_check"] = planner_check(servers["resnet20-cifar10"], out["lycaon"]["resnet20-cifar10"], flood_bits)
                if chk["nonlinear_measured_over_planned"]:
                    scaled = r50["total_bytes_keys_deduplicated"] - r50["bytes"]["nonlinear"] * (1 - chk["nonlinear_measured_over_planned"])
                    one_ring = len(r50.get("share_rings", [])) == 1
                    r50["extrapolated_bytes"] = {
                        "bytes": scaled, "ratio_to_cheetah": scaled / CHEETAH_RESNET50_BYTES,
                        "how": ("an extrapolation, not a count: keys deduplicated, and the planner's two-party bytes scaled by what ResNet-20's run "
                                f"measured over what the planner priced for it ({chk['nonlinear_measured_over_planned']:.2f}); "
                                + ("no ring conversions (one share ring)" if one_ring else "ring conversions at residual adds not included"))}
    finally:
        for server in servers.values():
            server.stop()
    out["elapsed_s"] = time.time() - started
    settings["machine"]["load_average_at_end"] = list(os.getloadavg())  # other jobs on the machine inflate the times, not the bytes
    out["notes"] = [SPU_CAVEAT, settings["peer"]["timing"], "ratios: Lycaon / SPU, < 1 means Lycaon is better"]
    _print(out, console)
    if json_path:
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
        console.print(f"wrote {json_path}")
    return out
