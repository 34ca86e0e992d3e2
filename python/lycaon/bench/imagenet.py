"""Private inference of ImageNet-size networks end to end (``lycaon bench e2e --models resnet50
squeezenet mobilenet_v2 densenet121``), each party in its own process so each party's peak
resident memory is its own.

Per model: the built-in architecture at its ImageNet input shape gets random weights (seed 0) and
is quantised on random calibration inputs (standard normal, like normalised images): a
benchmark of cost and exactness, not of predictions, and the record says so. The server party
(``python -m lycaon.bench.imagenet server``) quantises, plans for the LAN with 40 bits of noise
flooding, compiles, computes the fixed-point twin's logits of the input, then serves on loopback;
the client party (``... client``) runs one private inference and decrypts. Peak RSS is read from
/proc (VmHWM): the server's preparation (quantisation, planning, compilation) and its serving
separately (the high-water mark is reset between them), the client's whole run.

Records: {"model", "input_shape", "weights": "random (seed 0)", "calibration": "random normal",
"equal_to_fixed_point_twin", "total_s", "client_he_s", "server_he_s", "two_party_s",
"link_s": {lan, wan}, "total_s_by_link", "bytes", "rounds", "server_peak_rss", "client_peak_rss",
"server_prepare_peak_rss", "prepare_s", "layers": [per linear layer: measured and predicted]}.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

#: The networks and their input shapes (SqueezeNet at 227x227, as Cheetah ran it).
MODELS = {"resnet50": (3, 224, 224), "squeezenet": (3, 227, 227), "mobilenet_v2": (3, 224, 224), "densenet121": (3, 224, 224),
          "vgg16": (3, 224, 224), "mobilenet_v1": (3, 224, 224), "resnet20": (3, 32, 32)}
#: Calibration samples (random normal): few, so preparation stays within the memory budget.
CALIBRATION = 4
#: The Cheetah paper's own code measured on this kind of machine (2 cores, both parties,
#: loopback; ../shared/TOOLCHAIN.md): seconds and bytes.
OPENCHEETAH = {"resnet50": {"seconds": 210.0, "bytes": 1.77 * 2**30}, "squeezenet": {"seconds": 67.5, "bytes": 426 * 2**20}}
#: Targets of the bring-your-own-network issue on this machine (lan, both parties here).
TARGETS = {"resnet50": {"seconds": 140.0, "bytes": 1.2 * 2**30}, "squeezenet": {"seconds": 45.0, "bytes": 300 * 2**20}}
#: Each party's peak RSS must stay below this.
RSS_LIMIT = 4 * 2**30


def _peak_rss() -> int:
    """This process's peak resident memory (VmHWM), bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    import resource  # noqa: PLC0415

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _reset_peak_rss() -> bool:
    """Resets VmHWM to the current RSS (Linux: clear_refs 5); False where that is not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _graph(model: str, shape: tuple, seed: int):
    from lycaon.frontend import architectures  # noqa: PLC0415
    from lycaon.frontend.random_weights import with_random_weights  # noqa: PLC0415

    if model == "resnet20":  # the CIFAR-10 network 001 also compares on (its layers; weights drawn below)
        from lycaon.frontend.zoo import load_model  # noqa: PLC0415

        return with_random_weights(load_model("resnet20-cifar10"), seed)
    builder = architectures.ARCHITECTURES[model]
    # Builders that take an input size (SqueezeNet) get the bench's; the others are fixed.
    graph = builder(shape=shape) if "shape" in inspect.signature(builder).parameters else builder()
    if tuple(graph.input_shape) != tuple(shape):
        raise ValueError(f"{model}: built at {graph.input_shape}, asked for {shape}")
    return with_random_weights(graph, seed)


def _server_party(args) -> int:
    from lycaon.frontend.quantize import run_integer  # noqa: PLC0415
    from lycaon.hybrid import Server  # noqa: PLC0415

    t0 = time.perf_counter()
    shape = tuple(json.loads(args.shape))
    graph = _graph(args.model, shape, args.seed)
    calibration = np.load(args.calibration)
    server = Server(graph, calibration=calibration, link="lan", flood_bits=40.0, max_sessions=1, timeout_s=3600.0,
                    algorithms=tuple(args.algorithm or ()))
    del calibration, graph
    x = np.load(args.input)
    q = server.quantized
    twin = run_integer(q, q.encode_input(x[None]))[0]
    prepare_s = time.perf_counter() - t0
    plan_layers = {l["name"]: {k: l.get(k) for k in ("algorithm", "predicted_s", "server_s", "client_s", "comm_s", "bytes_up", "bytes_down")}
                   for l in server.plan["layers"]}
    record = {"prepare_s": prepare_s, "prepare_peak_rss": _peak_rss(), "fraction_bits": q.fraction_bits, "twin_logits": twin.tolist(),
              "plan_layers": plan_layers, "plan_predicted_s": server.plan.get("predicted_s"), "ops": len(server.program["ops"])}
    record["peak_reset"] = _reset_peak_rss()
    address = server.start(0, "127.0.0.1")
    print(f"address {address}", flush=True)
    done = threading.Event()
    threading.Thread(target=_report_server_progress, args=(server, done), daemon=True).start()
    sys.stdin.readline()  # the orchestrator writes a line when the client is done
    done.set()
    record["serving_peak_rss"] = _peak_rss()
    record["logs"] = [r for r in server.logs() if "error" in r]
    server.stop()
    Path(args.out).write_text(json.dumps(record))
    return 0


def _report_server_progress(server, done, every_s: float = 10.0) -> None:
    """Prints the session's progress as the server logs it (ops done of the total), every
    ``every_s`` seconds while the session runs, beside the client's lines."""
    shown = None
    while not done.wait(every_s):
        latest = next((r for r in reversed(server.logs()) if r.get("event") == "session_progress"), None)
        if latest is not None and latest != shown:
            print(f"  server: {latest['done']}/{latest['total']} ops ({latest['op']})", file=sys.stderr, flush=True)
            shown = latest


def _client_party(args) -> int:
    from lycaon.hybrid import Client  # noqa: PLC0415

    x = np.load(args.input)
    client = Client(args.address, timeout_s=3600.0)
    progress = None
    if sys.stderr.isatty():
        from rich.progress import Progress  # noqa: PLC0415

        bar = Progress(transient=True)
        bar.start()
        task = bar.add_task("client", total=len(client.program["ops"]))

        def progress(done, total, name):
            bar.update(task, completed=done, total=total, description=f"client: {name}")
    else:
        last = [0.0]

        def progress(done, total, name):
            now = time.perf_counter()
            if now - last[0] > 10 or done == total:
                print(f"  client: {done}/{total} ops ({name})", file=sys.stderr, flush=True)
                last[0] = now
    res = client.infer(x[None], progress=progress)
    img = res.images[0]
    record = {"logits_int": [int(round(v * 2.0 ** client.program["fraction_bits"])) for v in res.logits[0]], "label": res.labels[0],
              "peak_rss": _peak_rss(), **{k: img[k] for k in ("total_s", "client_s", "server_s", "two_party_s", "comm_s", "bytes", "rounds")},
              "setup": img["setup"], "layers": img["layers"]}
    Path(args.out).write_text(json.dumps(record))
    return 0


def run_model(model: str, algorithms: Sequence[str] = (), seed: int = 0, workdir: Optional[str] = None) -> dict:
    """One model end to end, the parties in two processes; the record (module docstring)."""
    from .e2e import LINKS, link_seconds  # noqa: PLC0415

    shape = MODELS[model]
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        d = Path(tmp)
        rng = np.random.default_rng(seed + 1)
        np.save(d / "calibration.npy", rng.standard_normal((CALIBRATION, *shape)))
        np.save(d / "input.npy", rng.standard_normal(shape))
        cmd = [sys.executable, "-m", "lycaon.bench.imagenet", "server", "--model", model, "--shape", json.dumps(list(shape)), "--seed", str(seed),
               "--calibration", str(d / "calibration.npy"), "--input", str(d / "input.npy"), "--out", str(d / "server.json")]
        for a in algorithms:
            cmd += ["--algorithm", a]
        t0 = time.perf_counter()
        server = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            line = server.stdout.readline()
            if not line.startswith("address "):
                server.wait()
                raise RuntimeError(f"{model}: the server party did not start (exit {server.returncode})")
            address = line.split()[1]
            print(f"{model}: prepared in {time.perf_counter() - t0:.0f} s, serving on {address}", file=sys.stderr, flush=True)
            subprocess.run([sys.executable, "-m", "lycaon.bench.imagenet", "client", "--address", address, "--input", str(d / "input.npy"),
                            "--out", str(d / "client.json")], check=True)
            server.stdin.write("done\n")
            server.stdin.flush()
            server.wait(timeout=120)
        finally:
            if server.poll() is None:
                server.kill()
        srv = json.loads((d / "server.json").read_text())
        cli = json.loads((d / "client.json").read_text())
    links = {link: link_seconds(cli["bytes"], cli["rounds"], link) for link in LINKS}
    layers = []
    for row in cli["layers"]:
        if row["op"] != "linear":
            continue
        p = srv["plan_layers"].get(row["name"], {})
        layers.append({"name": row["name"], "algorithm": p.get("algorithm"), "measured_s": row["seconds"], "server_s": row["server_s"],
                       "client_s": row["client_s"], "bytes": row["bytes_sent"] + row["bytes_received"], "predicted_s": p.get("predicted_s"),
                       "predicted_server_s": p.get("server_s"), "predicted_client_s": p.get("client_s")})
    by_op: dict[str, dict] = {}
    for row in cli["layers"]:
        agg = by_op.setdefault(row["op"], {"count": 0, "seconds": 0.0, "bytes": 0, "rounds": 0})
        agg["count"] += 1
        agg["seconds"] += row["seconds"]
        agg["bytes"] += row["bytes_sent"] + row["bytes_received"]
        agg["rounds"] += row["rounds"]
    rec = {"model": model, "input_shape": list(shape), "weights": f"random (seed {seed}; bench only)", "calibration": f"{CALIBRATION} random normal inputs (bench only)",
           "algorithms": list(algorithms) or "planner's choice", "equal_to_fixed_point_twin": cli["logits_int"] == srv["twin_logits"],
           "total_s": cli["total_s"], "client_he_s": cli["client_s"], "server_he_s": cli["server_s"], "two_party_s": cli["two_party_s"],
           "link_s": links, "total_s_by_link": {k: cli["total_s"] + v for k, v in links.items()}, "bytes": cli["bytes"], "rounds": cli["rounds"],
           "setup_bytes": cli["setup"]["bytes_sent"] + cli["setup"]["bytes_received"], "setup_s": cli["setup"]["seconds"],
           "server_peak_rss": srv["serving_peak_rss"], "server_prepare_peak_rss": srv["prepare_peak_rss"], "client_peak_rss": cli["peak_rss"],
           "peak_rss_within_4gib": max(srv["serving_peak_rss"], cli["peak_rss"]) <= RSS_LIMIT, "prepare_s": srv["prepare_s"],
           "planner_predicted_linear_s": srv["plan_predicted_s"], "by_op": by_op, "layers": layers, "server_errors": srv["logs"]}
    if model in OPENCHEETAH:
        rec["opencheetah"] = OPENCHEETAH[model]
        rec["target"] = TARGETS[model]
    return rec


def _gib(b: float) -> str:
    return f"{b / 2**30:.2f} GiB" if b >= 2**30 else f"{b / 2**20:.0f} MiB"


def run(models: Sequence[str], json_path: Optional[str] = None, algorithms: Sequence[str] = (), compare_packed: bool = False) -> list[dict]:
    """Every model in ``models`` end to end; with ``compare_packed`` 001's end-to-end comparison:
    each model once with ``algorithms`` (e.g. walsh) where the planner finds them faster than the
    conventional packed convolution ("gazelle") and that one elsewhere, as 001 deploys Hyena on
    the layers with large feature maps only, and once with the conventional one throughout; the
    fully connected layers by the same matrix-vector product in both runs."""
    records = []
    conventional = ("gazelle", "cheetah-matvec")
    variants = [tuple(dict.fromkeys((*algorithms, *conventional))), conventional] if compare_packed else [tuple(algorithms)]
    for model in models:
        for algs in variants:
            rec = run_model(model, algs)
            records.append(rec)
            rec["layers_by_algorithm"] = chosen = dict(Counter(l["algorithm"] for l in rec["layers"]))
            print(f"{model} [{', '.join(f'{a} x{c}' for a, c in chosen.items())}]: {rec['total_s']:.1f} s loopback ({rec['total_s_by_link']['lan']:.1f} s lan, "
                  f"{rec['total_s_by_link']['wan']:.1f} s wan): client HE {rec['client_he_s']:.1f} s, server HE {rec['server_he_s']:.1f} s, "
                  f"two-party {rec['two_party_s']:.1f} s; {_gib(rec['bytes'])}, {rec['rounds']} rounds; peak RSS server {_gib(rec['server_peak_rss'])} "
                  f"(preparing {_gib(rec['server_prepare_peak_rss'])}), client {_gib(rec['client_peak_rss'])}; "
                  f"{'equals' if rec['equal_to_fixed_point_twin'] else 'DIFFERS FROM'} the fixed-point twin", flush=True)
            if compare_packed and algs == conventional:
                rec["compared_with_conventional"] = comparison = _against_conventional(records[-2], rec)
                paper = {k: "-".join(map(str, v)) for k, v in comparison["paper"].items()}
                print(f"{model}: {', '.join(algorithms)} against the conventional packed convolution (in brackets 001's figures): latency "
                      f"{comparison['latency']:.2f}x lower [{paper['latency']}], server peak RSS {comparison['server_memory']:.2f}x less "
                      f"[memory {paper['memory']}], communication {comparison['communication']:.2f}x less [{paper['communication']}]; setup (keys, OT) "
                      f"{_gib(comparison['keys_bytes'][0])} against {_gib(comparison['keys_bytes'][1])}", flush=True)
            if json_path:
                Path(json_path).write_text(json.dumps({"records": records, "note": "random weights and random calibration inputs: a benchmark of cost "
                                                       "and exactness, not of predictions"}, indent=1))
    return records


def _against_conventional(ours: dict, conventional: dict) -> dict:
    """001's end-to-end comparison: how many times lower the conventional packed run's latency,
    server peak memory and bytes are under ``ours`` (each > 1 where ours is better), and both
    runs' key bytes (the setup: public and Galois keys, OT setup)."""
    return {"latency": conventional["total_s"] / ours["total_s"], "latency_lan": conventional["total_s_by_link"]["lan"] / ours["total_s_by_link"]["lan"],
            "server_memory": conventional["server_peak_rss"] / ours["server_peak_rss"], "communication": conventional["bytes"] / ours["bytes"],
            "keys_bytes": [ours["setup_bytes"], conventional["setup_bytes"]], "paper": {"latency": [1.3, 2.5], "memory": [2.1, 7.9], "communication": [1.4, 1.5]}}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lycaon.bench.imagenet")
    sub = parser.add_subparsers(dest="role", required=True)
    s = sub.add_parser("server")
    s.add_argument("--model", required=True)
    s.add_argument("--shape", required=True)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--calibration", required=True)
    s.add_argument("--input", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--algorithm", action="append")
    c = sub.add_parser("client")
    c.add_argument("--address", required=True)
    c.add_argument("--input", required=True)
    c.add_argument("--out", required=True)
    r = sub.add_parser("run")
    r.add_argument("models", nargs="+", choices=sorted(MODELS))
    r.add_argument("--json")
    args = parser.parse_args(argv)
    if args.role == "server":
        return _server_party(args)
    if args.role == "client":
        return _client_party(args)
    run(args.models, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
