"""Past one machine (``lycaon bench scale``): one hybrid inference with its linear layers on 1, 2
and 4 single-threaded Ray workers on this machine, against the same inference on one machine
without Ray, and a model of N machines built from the measured task times and transfer sizes;
then the same for FHE inferences with every op on 1 and 2 workers (the end of this docstring).

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

FHE (``--fhe-models``: ``wide-cnn``, a random-weight network whose tensors take two ciphertexts,
the default; ``resnet20``, the bundled AESPA network, one ciphertext a tensor and about 13 GB of
keys and bootstrapping diagonals per worker): one inference on this machine (all cores), then
with its ops on 1 and 2 single-threaded Ray workers (keys sent and parsed by the workers before
the timed inference); latency, the precision of the logits against the plaintext network, the
bytes the steps moved and each step's batches. The model of N machines takes the runtime's
schedule for N workers with each unit's seconds from the 1-worker run (``fhe_machines_model``).
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
        sessions: int = 4, fhe_models: Sequence[str] = ("wide-cnn",), fhe_workers: Sequence[int] = (1, 2)) -> list[dict]:
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
    out.extend(run_fhe(fhe_models, fhe_workers, link_gbps, link_ms))
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"records": out}, f, indent=1)
    return out


# --- The FHE mode ---------------------------------------------------------------------------

FHE_MODELS = ("wide-cnn", "resnet20")


def wide_cnn(seed: int = 0):
    """A network whose tensors take two ciphertexts (16 x 64 x 64 at 2^15 slots): conv 3 -> 16,
    per-channel quadratic, conv 16 -> 16, quadratic, 2 x 2 average pooling (into one ciphertext),
    global pooling and a fully connected layer to 10; random weights. Its depth fits the
    bootstrappable ring's 10 levels, so it never bootstraps."""
    from lycaon.frontend.ir import Graph, Node  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    g = Graph("image", (3, 64, 64), name="wide-cnn")
    src = "image"
    for i, (c_in, c_out, scale) in enumerate(((3, 16, 0.3), (16, 16, 0.2)), start=1):
        g.add(Node("conv", f"conv{i}", [src], f"conv{i}:o", {"stride": (1, 1), "pads": (1,) * 4},
                   {"weight": rng.normal(0, scale, (c_out, c_in, 3, 3)), "bias": rng.normal(0, 0.1, c_out)}))
        g.add(Node("poly", f"act{i}", [f"conv{i}:o"], f"act{i}:o", {}, {"coefficients": rng.normal(0, 0.2, (c_out, 3)) + [0, 0, 1]}))
        src = f"act{i}:o"
    g.add(Node("avgpool", "pool", [src], "pool:o", {"kernel": (2, 2), "stride": (2, 2)}))
    g.add(Node("global_avgpool", "gap", ["pool:o"], "gap:o"))
    g.add(Node("flatten", "flat", ["gap:o"], "flat:o"))
    g.add(Node("linear", "fc", ["flat:o"], "logits", {}, {"weight": rng.normal(0, 0.2, (10, 16)), "bias": rng.normal(0, 0.1, 10)}))
    return g, rng.uniform(0, 1, (4, 3, 64, 64)), rng.uniform(0, 1, (1, 3, 64, 64))


def _fhe_model(name: str, seed: int = 0):
    """(model, calibration or None, one input (1, C, H, W), note)."""
    if name == "wide-cnn":
        g, calibration, x = wide_cnn(seed)
        return g, calibration, x, f"random weights (seed {seed}), two ciphertexts a tensor"
    if name == "resnet20":
        from lycaon import data  # noqa: PLC0415
        from lycaon.plan import preprocessor  # noqa: PLC0415

        raw, _ = data.cifar10_test_subset()
        return name, None, preprocessor("cifar10")(raw[:1]), "bundled AESPA weights, CIFAR-10 test image 0 (one ciphertext a tensor)"
    raise ValueError(f"unknown FHE model {name!r} (known: {', '.join(FHE_MODELS)})")


def _fhe_one(model, calibration, x, workers: Optional[int]) -> dict:
    """One FHE inference (keys sent first, not timed) with the ops on ``workers`` single-threaded
    Ray workers, or on this machine (None)."""
    from lycaon import Client, Server, fhe  # noqa: PLC0415

    kwargs = {} if workers is None else {"ray": "local", "workers": workers, "worker_threads": 1}
    server = Server(model, mode="fhe", calibration=calibration, max_sessions=1, timeout_s=3600.0, **kwargs)
    try:
        client = Client(server.start(0), timeout_s=3600.0)
        _ = client.fhe_session  # keys made, sent and (with Ray) parsed by every worker
        began = time.perf_counter()
        result = client.infer(x)
        latency = time.perf_counter() - began
        client.close()
        want = fhe.plaintext_reference(server.compiled.graph, x[0])
        record = {"workers": workers or "none (one machine, all cores)", "latency_s": latency, "server_s": result.server_s,
                  "precision_bits": fhe.precision_bits(result.logits[0], want), "program": server.program}
        if server.fanout is not None:
            records = server.fanout.records
            record["moved_bytes"] = sum(r["input_bytes"] + r["output_bytes"] for r in records)
            record["steps"] = [{k: r[k] for k in ("units", "batches", "seconds", "batch_seconds", "unit_seconds", "input_bytes", "output_bytes", "retries")}
                               for r in records]
        return record
    finally:
        server.stop()


def fhe_machines_model(single: dict, gbps: float, delay_ms: float) -> list[dict]:
    """Latency on N machines from the 1-worker record: the runtime's schedule for N workers,
    each unit taking its measured seconds; a step takes its slowest batch, plus its batches'
    ciphertexts in and out at ``gbps`` (each ciphertext 2 n 8 (level + 1) bytes at the level its
    op leaves it) and two delays; the server's sums and everything outside the steps as
    measured."""
    from lycaon._native import fhe_schedule  # noqa: PLC0415

    program = single["program"]
    seconds = {name: s for step in single["steps"] for name, s in step["unit_seconds"]}
    ops = program["ops"]
    ring = int(program["parameters"].get("n", 1 << 16))  # the bootstrappable shapes are logN = 16

    def unit_name(u: dict) -> str:
        return ops[u["op"]]["name"] if "op" in u else f"{ops[u['term'][0]]['name']}~{u['term'][1]}"

    level: dict[str, int] = {}
    for op in ops:
        level[op["output"]] = max(op["level"] - op["depth"], 0)
        for r in op.get("refresh") or []:
            level[r["tensor"]] = program["input_level"]

    def size(t: str) -> int:
        return 2 * ring * 8 * (level.get(t.split("~")[0], program["input_level"]) + 1)

    bandwidth = gbps * 1e9 / 8.0
    measured_units = sum(seconds.values())
    rest = single["latency_s"] - sum(s["seconds"] for s in single["steps"])
    rows = []
    for machines in MACHINES:
        steps = json.loads(fhe_schedule(json.dumps(program), machines))
        work = 0.0
        for step in steps:
            if step["batches"]:
                slowest = max(sum(seconds.get(unit_name(u), 0.0) for u in b["units"]) for b in step["batches"])
                moved = sum(size(t) for b in step["batches"] for t in b["inputs"] + b["outputs"])
                work += slowest + moved / bandwidth + 2 * delay_ms / 1e3
        rows.append({"machines": machines, "latency_s": rest + work, "steps_s": work, "rest_s": rest, "unit_seconds_1_worker": measured_units})
    return rows


def run_fhe(models: Sequence[str], workers: Sequence[int] = (1, 2), link_gbps: float = 10.0, link_ms: float = 0.1) -> list[dict]:
    """Per FHE model: one inference on this machine, then with its ops on each count of
    single-threaded Ray workers; the speedups against 1 worker and the model of N machines."""
    out = []
    for name in models:
        model, calibration, x, note = _fhe_model(name)
        rec = {"model": name, "mode": "fhe", "weights": note, "link_assumed": {"gbps": link_gbps, "one_way_ms": link_ms}, "configurations": []}
        for w in (None, *workers):
            row = _fhe_one(model, calibration, x, w)
            rec["configurations"].append(row)
            print(f"{name} (FHE): workers {row['workers']}: {row['latency_s']:.1f} s, precision {row['precision_bits']:.1f} bits"
                  + (f", moved {row['moved_bytes'] / 2**20:.0f} MiB in {len(row['steps'])} steps" if "moved_bytes" in row else ""), flush=True)
        by = {r["workers"]: r for r in rec["configurations"]}
        if 1 in by:
            for w in workers:
                if w != 1 and w in by:
                    rec[f"speedup_{w}_workers"] = by[1]["latency_s"] / by[w]["latency_s"]
                    print(f"  {w} workers against 1: {rec[f'speedup_{w}_workers']:.2f}x", flush=True)
            rec["machines_model"] = fhe_machines_model(by[1], link_gbps, link_ms)
            for row in rec["machines_model"]:
                print(f"  model: {row['machines']:>2} machines: {row['latency_s']:.1f} s (steps {row['steps_s']:.1f} s)")
        for row in rec["configurations"]:
            row.pop("program", None)
        out.append(rec)
    return out
