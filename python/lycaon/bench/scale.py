"""Past one machine (``lycaon bench scale``): one hybrid inference with its linear layers on 1, 2
and 4 single-threaded Ray workers on this machine, against the same inference on one machine
without Ray, and a model of N machines built from the measured task times and transfer sizes.

Per model (``resnet20-cifar10`` on a bundled test image with its bundled weights; ``resnet50``
at 224 x 224 with random weights and random calibration, bench only): the server plans for the
LAN with 40 bits of noise flooding; each configuration serves one private inference over
loopback TCP (client in this process) and checks its logits against the fixed-point twin's. The
record per configuration: latency, the server's time in its linear layers (the part the workers
share), the two-party and client time, the bytes the fanout moved between processes (each
worker reads a layer's inputs once; outputs come back once), and per layer the seconds of each
worker call.

The model of N machines takes the 1-worker run's per-layer time T (one thread), its units U
(the most parts a layer splits into), its input bytes I and output bytes O, and a link of
``--link-gbps`` and ``--link-ms``: a layer on N machines takes T / min(N, U) + (N I + O) / bandwidth
+ 2 delay (the server sends each machine the inputs and receives every output); everything else
of the inference (two-party work, the client) stays as measured.

Sessions per minute: ``sessions`` concurrent one-image sessions (clients in this process) through
1 and 2 replicas behind one address (``lycaon.replicas``; each replica a whole server running its
own linear layers), wall time from the first session's start to the last one's end. On one
machine the replicas share its cores: this measures the front's overhead and the spread, not
the throughput of replicas on separate machines.
"""

from __future__ import annotations

import json
import time
from typing import Optional, Sequence

import numpy as np

WORKER_COUNTS = (1, 2, 4)
MACHINES = (1, 2, 4, 8, 16, 32, 64)


def _model(name: str, seed: int = 0):
    """(graph or zoo name, calibration or None, one input (1, C, H, W), note)."""
    if name == "resnet20-cifar10":
        from lycaon import data  # noqa: PLC0415
        from lycaon.plan import preprocessor  # noqa: PLC0415

        raw, _ = data.cifar10_test_subset()
        return name, None, preprocessor("cifar10")(raw[:1]), "bundled weights, CIFAR-10 test image 0"
    from lycaon.bench.imagenet import MODELS, _graph  # noqa: PLC0415

    if name not in MODELS:
        raise ValueError(f"unknown model {name!r} (known: resnet20-cifar10, {', '.join(MODELS)})")
    shape = MODELS[name]
    rng = np.random.default_rng(seed + 1)
    return _graph(name, shape, seed), rng.standard_normal((4, *shape)), rng.standard_normal((1, *shape)), f"random weights (seed {seed}; bench only)"


def _server(model, calibration, workers: Optional[int], plan):
    from lycaon import Server  # noqa: PLC0415

    kwargs = {} if workers is None else {"ray": "local", "workers": workers, "worker_threads": 1}
    return Server(model, calibration=calibration, plan=plan, link="lan", flood_bits=40.0, max_sessions=1, timeout_s=3600.0, **kwargs)


def _one(server, x, twin, fraction_bits: int, workers: Optional[int]) -> dict:
    from lycaon import Client  # noqa: PLC0415

    try:
        address = server.start(0)
        began = time.perf_counter()
        result = Client(address, timeout_s=3600.0).infer(x)
        latency = time.perf_counter() - began
        got = np.round(result.logits * 2.0**fraction_bits).astype(np.int64)
        linear = [row for row in result.layers if row["op"] == "linear"]
        record = {"workers": workers or "none (one machine, all cores)", "latency_s": latency, "server_linear_s": sum(r["server_s"] for r in linear),
                  "two_party_s": result.two_party_s, "client_s": result.client_s, "equal_to_fixed_point_twin": bool((got == twin).all())}
        if server.fanout is not None:
            records = server.fanout.records
            record["moved_bytes"] = sum(r["input_bytes"] * r["ranges"] + r["output_bytes"] for r in records)
            record["layers"] = [{k: r[k] for k in ("layer", "units", "ranges", "seconds", "input_bytes", "output_bytes", "retries")} for r in records]
        return record
    finally:
        server.stop()


def sessions_per_minute(model, calibration, plan, x, replicas: int, sessions: int) -> dict:
    """``sessions`` concurrent one-image sessions through ``replicas`` replicas behind one
    address (each replica runs its own linear layers): sessions per minute of wall time, and how
    many each replica served."""
    from lycaon import Server  # noqa: PLC0415
    from lycaon.bench.e2e import concurrency  # noqa: PLC0415

    server = Server(model, calibration=calibration, plan=plan, link="lan", flood_bits=40.0, max_sessions=sessions, timeout_s=3600.0, ray="local",
                    replicas=replicas, workers=0)
    try:
        server.start(0)
        row = concurrency(server, x, levels=[sessions], samples=sessions, timeout_s=3600.0)[0]
        return {"replicas": replicas, "sessions": sessions, "wall_s": row["wall_s"], "sessions_per_minute": 60.0 * row["inferences"] / row["wall_s"],
                "served_per_replica": list(server._server.served), "errors": row["errors"]}
    finally:
        server.stop()


def machines_model(single: dict, gbps: float, delay_ms: float) -> list[dict]:
    """Latency on N machines from the 1-worker record (module docstring)."""
    bandwidth = gbps * 1e9 / 8.0
    rest = single["latency_s"] - sum(l["seconds"] for l in single["layers"])
    rows = []
    for n in MACHINES:
        linear = sum(l["seconds"] / min(n, l["units"]) + (n * l["input_bytes"] + l["output_bytes"]) / bandwidth + 2 * delay_ms / 1e3 for l in single["layers"])
        rows.append({"machines": n, "latency_s": rest + linear, "linear_s": linear, "rest_s": rest})
    return rows


def run(models: Sequence[str], json_path: Optional[str] = None, link_gbps: float = 10.0, link_ms: float = 0.1, workers: Sequence[int] = WORKER_COUNTS,
        sessions: int = 4) -> list[dict]:
    from lycaon.frontend.quantize import run_integer  # noqa: PLC0415

    out = []
    for name in models:
        model, calibration, x, note = _model(name)
        rec = {"model": name, "weights": note, "link_assumed": {"gbps": link_gbps, "one_way_ms": link_ms}, "configurations": []}
        # Planned once (by the one-machine server): every configuration serves the same program.
        plan = twin = fraction_bits = None
        for w in (None, *workers):
            server = _server(model, calibration, w, plan)
            if plan is None:
                plan, q = server.plan, server.quantized
                twin, fraction_bits = run_integer(q, q.encode_input(x)), q.fraction_bits
            row = _one(server, x, twin, fraction_bits, w)
            rec["configurations"].append(row)
            print(f"{name}: workers {row['workers']}: {row['latency_s']:.1f} s, server linear {row['server_linear_s']:.1f} s, "
                  f"exact {row['equal_to_fixed_point_twin']}" + (f", moved {row['moved_bytes'] / 2**20:.0f} MiB" if "moved_bytes" in row else ""), flush=True)
        by = {r["workers"]: r for r in rec["configurations"]}
        if 1 in by:
            for w in workers:
                if w != 1 and w in by:
                    rec[f"server_linear_speedup_{w}_workers"] = by[1]["server_linear_s"] / by[w]["server_linear_s"]
            rec["machines_model"] = machines_model(by[1], link_gbps, link_ms)
            for row in rec["machines_model"]:
                print(f"  model: {row['machines']:>2} machines: {row['latency_s']:.1f} s (linear {row['linear_s']:.1f} s)")
        if sessions:
            rec["sessions_per_minute"] = []
            for r in (1, 2):
                row = sessions_per_minute(model, calibration, plan, x, r, sessions)
                rec["sessions_per_minute"].append(row)
                print(f"  {sessions} concurrent sessions over {r} replica{'s' if r > 1 else ''}: {row['sessions_per_minute']:.1f} a minute "
                      f"({row['wall_s']:.1f} s; per replica {row['served_per_replica']})", flush=True)
        out.append(rec)
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"records": out}, f, indent=1)
    return out
