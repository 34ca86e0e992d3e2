"""``lycaon demo``: client and server on this machine, bundled models and test images, beside the plaintext model."""

from __future__ import annotations

import json
import time
from typing import Optional

import numpy as np

import lycaon
from lycaon.cli.images import bundled_test_images
from lycaon.cli.models import DEMO_MODELS
from lycaon.cli.output import layer_rows, print_table, si, write_json


def _demo_fhe(model: str, images: int, json_path: Optional[str]) -> int:
    """FHE mode on this machine: the server compiles the network (cnn-square: quadratic
    activations, no bootstrapping; resnet20: AESPA quadratics with bootstrapping; resnet20-relu:
    the composite minimax ReLU) and serves it over TCP; the client makes its level-aware keys
    (and the bootstrapping keys) and sends them once, then each image goes up encrypted and its
    logits come back encrypted; printed next to the float model. ResNet-20 takes about 16 GiB
    and minutes an image on 2 cores."""
    from rich.console import Console  # noqa: PLC0415
    from rich.progress import Progress  # noqa: PLC0415

    from lycaon import fhe  # noqa: PLC0415
    from lycaon.fhe_resnet import RESNET20_MODELS  # noqa: PLC0415
    from lycaon.frontend import resnet, zoo  # noqa: PLC0415
    from lycaon.hybrid import Client, Server  # noqa: PLC0415

    bootstrapped = model in RESNET20_MODELS
    name = RESNET20_MODELS[model] if bootstrapped else DEMO_MODELS.get(model, model)
    raw, y = bundled_test_images("cifar10")
    calibration, spare = None, len(raw)
    if bootstrapped:  # value bounds for the bootstraps: training images, else the bundled images not classified
        try:
            calibration = zoo.cifar10("train")[0][:64].copy()
        except OSError:
            calibration, spare = raw[-64:], len(raw) - 64
    elif tuple(zoo.load_model(name).input_shape) != (3, 32, 32):
        raise lycaon.LycaonError(f"demo --mode fhe classifies bundled CIFAR-10 images; {name} takes input of shape {zoo.load_model(name).input_shape}")
    if images < 1 or images > spare:
        raise lycaon.LycaonError(f"--images must be 1..{spare} (the bundled CIFAR-10 test images)")
    x, y = resnet.preprocess(raw[:images]), y[:images].astype(np.int64)
    t0 = time.perf_counter()
    with Console(stderr=True).status(f"{name}: compiling for CKKS (packings, levels, bootstrap placement) and preparing the program"):
        server = Server(model if bootstrapped else name, mode="fhe", calibration=calibration)
    compile_s = time.perf_counter() - t0
    program, compiled = server.program, server.compiled
    address = server.start(0)
    client = Client(address)
    try:
        with Console(stderr=True).status("key generation") as status:
            client.on_keys = lambda what: status.update(f"key generation: {what}")
            keys = json.loads(client.fhe_session.keys)
        results = []
        with Progress(transient=True) as bar:
            task = bar.add_task("encrypted inference", total=images)
            op_task = bar.add_task("", total=len(program["ops"]))
            for i in range(images):
                def progress(done, total, step, i=i):
                    bar.update(op_task, completed=done, total=total, description=f"image {i + 1}: {step}")

                res = client.infer(x[i], progress=progress)
                results.append(res.images[0])
                bar.update(task, completed=i + 1)
    finally:
        client.close()
        server.stop()
    plain = np.array([compiled.reference(v) for v in x])
    enc = np.array([r["logits"] for r in results])
    bits = [fhe.precision_bits(e, p) for e, p in zip(enc, plain)]
    fl, pr = plain.argmax(1), enc.argmax(1)
    reports = [r["report"] for r in results]
    params = program["parameters"]
    summary = {
        "model": name, "mode": "fhe", "images": images, "bootstrapping": bootstrapped,
        "parameters": params, "activation": ("composite minimax ReLU" if compiled.relu else "AESPA quadratics") if bootstrapped else "quadratics",
        "compile_s": compile_s, "keygen_s": keys["keys_s"], "key_bytes": keys["key_bytes"], "key_upload_bytes": keys["upload_bytes"],
        "rotation_keys": len(program["rotation_levels"]),
        "float": {"accuracy": float((fl == y).mean())},
        "fhe": {"accuracy": float((pr == y).mean()), "top1_agreement_float": float((pr == fl).mean()), "min_bits": min(bits),
                "server_s": float(np.mean([r["server_s"] for r in reports])), "client_s": float(np.mean([r["client_s"] for r in results])),
                "bootstraps": reports[0]["bootstraps"], "up_bytes": results[0]["up_bytes"], "down_bytes": results[0]["down_bytes"],
                "flood_log2": reports[0]["flood_log2"]},
        "per_image": [{"label": int(p), "true_label": int(t), "bits": b, **r} for p, t, b, r in zip(pr, y, bits, reports)],
    }
    if bootstrapped:
        summary["per_image"] = [{**d, "range_ratio": float(q)} for d, q in zip(summary["per_image"], compiled.range_ratio(x))]
    else:
        summary["layers"] = compiled.summary()
    h = summary["fhe"]
    ring = f"CKKS logN {int(np.log2(params['n']))}, {params['levels']} levels, no bootstrapping" if not bootstrapped else \
        f"CKKS {params['shape']}, {summary['activation']}, {h['bootstraps']} bootstraps an image"
    print_table(f"{name}: {images} bundled CIFAR-10 test images, FHE private inference ({ring})",
           ["", "accuracy", "top-1 = float", "precision", "server / image", "client / image", "up / image", "down / image"],
           [["plaintext float", summary["float"]["accuracy"], "-", "-", "", "", "", ""],
            ["FHE (private)", h["accuracy"], h["top1_agreement_float"], f"{h['min_bits']:.1f} bits", si(h["server_s"], "s"), si(h["client_s"], "s"),
             si(h["up_bytes"], "B"), si(h["down_bytes"], "B")]])
    print(f"once per session: compile {si(compile_s, 's')} (server), keys made and sent in {si(keys['keys_s'], 's')} (client): "
          f"{summary['rotation_keys']} rotation keys by level, {si(keys['key_bytes'], 'B')} in the server's memory, {si(keys['upload_bytes'], 'B')} uploaded (seeded); "
          f"answers flooded with noise up to 2^{h['flood_log2']}")
    if not bootstrapped:
        print_table("Program", ["step", "kind", "level", "depth"], [[r["step"], r["kind"], r["level"], r["depth"]] for r in summary["layers"]])
    else:
        outside = sum(d["range_ratio"] > 1 for d in summary["per_image"])
        if outside:
            print(f"warning: {outside} image(s) left the value range the bootstraps were calibrated for; their encrypted logits are not meaningful")
    write_json(json_path, summary)
    return 0


def _demo(mode: str, model: Optional[str], images: int, link: str, json_path: Optional[str], flood_bits: float, exact_truncation: bool = True) -> int:
    if mode == "fhe":
        return _demo_fhe(model or "cnn-square", images, json_path)
    model = model or "lenet5"
    from rich.console import Console  # noqa: PLC0415
    from rich.progress import Progress  # noqa: PLC0415

    from lycaon.frontend import run_float  # noqa: PLC0415
    from lycaon.frontend.quantize import run_integer  # noqa: PLC0415
    from lycaon.hybrid import Client, Server  # noqa: PLC0415

    name = DEMO_MODELS.get(model, model)
    with Console(stderr=True).status(f"{name}: quantising, planning for link {link} and compiling"):
        server = Server(name, link=link, emulate_link=True, flood_bits=flood_bits, exact_truncation=exact_truncation)
    q = server.quantized
    raw, y = bundled_test_images(server.metadata["preprocess"])
    if images < 1 or images > len(raw):
        raise lycaon.LycaonError(f"--images must be 1..{len(raw)} (the bundled {server.metadata['preprocess']} test images)")
    raw, y = raw[:images], y[:images].astype(np.int64)
    address = server.start(0, "127.0.0.1")
    try:
        client = Client(address, link=link)
        x = client.preprocess(raw)
        results = []
        with Progress(transient=True) as bar:
            task = bar.add_task("private inference", total=images)
            layer_task = bar.add_task("", total=len(server.program["ops"]))
            for i in range(images):
                def progress(done, total, op_name, i=i):
                    bar.update(layer_task, completed=done, total=total, description=f"image {i + 1}: {op_name}")

                results.append(client.infer(x[i:i + 1], progress=progress))
                bar.update(task, completed=i + 1)
    finally:
        server.stop()
    t0 = time.perf_counter()
    float_logits = run_float(q.graph, x)
    float_s = (time.perf_counter() - t0) / images
    t0 = time.perf_counter()
    twin_int = run_integer(q, q.encode_input(x))
    twin_s = (time.perf_counter() - t0) / images
    f = q.fraction_bits
    private = np.array([r.labels[0] for r in results])
    fl, tw = float_logits.argmax(1), twin_int.argmax(1)
    revealed = all(r.logits is not None for r in results)
    logit_units = int(np.abs(np.array([r.logits[0] for r in results]) * 2.0**f - twin_int).max()) if revealed else None

    def mean(key):
        return float(np.mean([r[key] for r in results]))

    summary = {
        "model": name, "mode": "hybrid", "link": link, "images": images, "fraction_bits": f, "reveal": server.program["reveal"],
        "float": {"accuracy": float((fl == y).mean()), "seconds_per_image": float_s},
        "fixed_point": {"accuracy": float((tw == y).mean()), "top1_agreement_float": float((tw == fl).mean()), "seconds_per_image": twin_s},
        "hybrid": {"accuracy": float((private == y).mean()), "top1_agreement_float": float((private == fl).mean()), "top1_agreement_fixed_point": float((private == tw).mean()),
                   "max_logit_difference_units": logit_units, "client_s": mean("client_s"), "server_s": mean("server_s"), "comm_s": mean("comm_s"),
                   "two_party_s": mean("two_party_s"), "total_s": mean("total_s"), "bytes": mean("bytes"), "rounds": mean("rounds")},
    }
    h = summary["hybrid"]
    print_table(f"{name}: {images} bundled test images, hybrid private inference over an emulated {link} link",
           ["", "accuracy", "top-1 = float", "top-1 = fixed point", "latency / image", "client HE", "server HE", "2PC compute", "network", "bytes / image", "rounds"],
           [["plaintext float", summary["float"]["accuracy"], "-", f"{(fl == tw).mean():.4f}", si(float_s, "s"), "", "", "", "", "", ""],
            ["fixed-point twin", summary["fixed_point"]["accuracy"], summary["fixed_point"]["top1_agreement_float"], "-", si(twin_s, "s"), "", "", "", "", "", ""],
            ["hybrid (private)", h["accuracy"], h["top1_agreement_float"], h["top1_agreement_fixed_point"], si(h["total_s"], "s"), si(h["client_s"], "s"),
             si(h["server_s"], "s"), si(h["two_party_s"], "s"), si(h["comm_s"], "s"), si(h["bytes"], "B"), f"{h['rounds']:g}"]])
    by_op: dict[str, dict] = {}
    for r in results:
        for layer in r.layers:
            row = by_op.setdefault(layer.get("op", "?"), {"name": layer.get("op", "?"), "op": 0})
            row["op"] += 1
            for key in ("seconds", "client_s", "server_s", "bytes_sent", "bytes_received", "rounds"):
                row[key] = row.get(key, 0) + layer.get(key, 0)
    for row in by_op.values():
        row["op"] = f"{row['op'] / images:g}"
    print_table("Per image by op kind (mean)", ["op", "count", "time", "client", "server", "sent", "received", "rounds"], layer_rows(list(by_op.values()), images))
    if logit_units is not None:
        print(f"private logits differ from the fixed-point twin's by at most {logit_units} unit(s) of 2^-{f} (0: bit for bit)")
    summary["by_op"] = by_op
    summary["per_image"] = [{"label": r.labels[0], "true_label": int(t), "layers": r.layers, "client_s": r.client_s, "server_s": r.server_s, "comm_s": r.comm_s,
                             "total_s": r.total_s, "bytes": r.bytes, "rounds": r.rounds} for r, t in zip(results, y)]
    write_json(json_path, summary)
    return 0


def add_parser(sub) -> None:
    demo = sub.add_parser("demo", help="private inference end to end on this machine: a server in-process, bundled test images, next to the plaintext model")
    demo.add_argument("--mode", choices=("hybrid", "fhe"), default="hybrid", help="hybrid (default: BFV + two-party ReLU) or fhe (the whole network under CKKS)")
    demo.add_argument("--model", default=None, metavar="NAME", help="hybrid: lenet5 (MNIST, default), resnet20 (CIFAR-10) or a model name; "
                      "fhe: cnn-square (CIFAR-10, default), resnet20 (trained AESPA quadratics, bootstrapping; ~16 GiB, ~8 min an image), "
                      "resnet20-relu (composite minimax ReLU; ~20 min an image) or a model with quadratic activations")
    demo.add_argument("--images", type=int, default=10, help="bundled test images to classify (default 10)")
    demo.add_argument("--link", choices=("lan", "wan"), default="lan", help="link to plan for and emulate (default lan)")
    demo.add_argument("--flood-bits", type=float, default=40.0, help="statistical security of the server's noise flooding (default 40)")
    demo.add_argument("--faithful-truncation", action="store_true", help="truncate with an error of up to one unit (fewer rounds) instead of exactly")
    demo.add_argument("--json", metavar="FILE", help="write the summary, per image and per layer, as JSON")


def run(args) -> int:
    return _demo(args.mode, args.model, args.images, args.link, args.json, args.flood_bits, not args.faithful_truncation)
