"""Encrypted (hybrid) accuracy of a zoo model on its test set, next to the float model and the
fixed-point twin: one private inference per image (server and client on this machine, loopback
TCP), resumable: every image's result is appended to a JSON-lines file and skipped on a rerun.

    python scripts/hybrid_accuracy.py resnet20-cifar10 --images 1000 --out ~/.cache/lycaon/hybrid_resnet20.jsonl

Prints a running summary; ``--summary`` only prints the summary of the file.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np


def summarise(path: Path) -> dict:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    if not rows:
        return {"images": 0}
    get = lambda k: np.array([r[k] for r in rows])  # noqa: E731
    y = get("label")
    return {
        "images": len(rows),
        "float_accuracy": float((get("float") == y).mean()),
        "fixed_point_accuracy": float((get("twin") == y).mean()),
        "hybrid_accuracy": float((get("private") == y).mean()),
        "top1_equal_fixed_point": float((get("private") == get("twin")).mean()),
        "max_logit_difference_units": int(get("logit_units").max()),
        "mean_seconds": float(get("seconds").mean()),
        "mean_bytes": float(get("bytes").mean()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", default="resnet20-cifar10")
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--out", default=str(Path.home() / ".cache" / "lycaon" / "hybrid_accuracy.jsonl"))
    ap.add_argument("--summary", action="store_true")
    ap.add_argument("--shard", default="0/1", help="K/N: this process takes the images i with i %% N == K (run N processes on one file)")
    args = ap.parse_args()
    out = Path(args.out).expanduser()
    if args.summary:
        print(json.dumps(summarise(out), indent=2))
        return
    from lycaon.frontend import run_float, zoo
    from lycaon.frontend.quantize import run_integer
    from lycaon.hybrid import Client, Server
    from lycaon.plan import dataset_of, preprocessor

    server = Server(args.model, flood_bits=40.0)
    dataset = dataset_of(server.quantized.graph)
    if dataset == "cifar10":
        d = np.load(zoo.data_dir() / "cifar10" / "test.npz")
        # Official order first (rows of official test images 0..499), then the rest.
        first = list(d["official_first500"])
        order = first + [i for i in range(len(d["y"])) if i not in set(first)]
        raw, labels = d["x"][order], d["y"][order]
    else:
        from lycaon.data import load_mnist

        raw, labels = load_mnist("test")
    done = {json.loads(line)["index"] for line in out.read_text().splitlines() if line.strip()} if out.exists() else set()
    out.parent.mkdir(parents=True, exist_ok=True)
    q, prep = server.quantized, preprocessor(dataset)
    address = server.start(0)
    client = Client(address)
    try:
        k, n = (int(v) for v in args.shard.split("/"))
        for i in range(min(args.images, len(raw))):
            if i in done or i % n != k:
                continue
            x = prep(raw[i:i + 1])
            twin = run_integer(q, q.encode_input(x))[0]
            flt = run_float(q.graph, x)[0]
            t0 = time.perf_counter()
            r = client.infer(x)
            seconds = time.perf_counter() - t0
            units = int(np.abs(np.array(r.logits[0]) * 2.0**q.fraction_bits - twin).max())
            row = {"index": i, "label": int(labels[i]), "private": int(r.labels[0]), "twin": int(twin.argmax()), "float": int(flt.argmax()),
                   "logit_units": units, "seconds": seconds, "bytes": int(r.bytes)}
            with out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            if (i + 1) % 10 == 0:
                print(json.dumps(summarise(out)), flush=True)
    finally:
        server.stop()
    print(json.dumps(summarise(out), indent=2))


if __name__ == "__main__":
    main()
