"""``lycaon demo``: client and server on this machine, bundled models and test images, beside the plaintext model."""

from __future__ import annotations

import time
from typing import Optional

import numpy as np

import lycaon
from lycaon.cli.images import bundled_test_images
from lycaon.cli.models import DEMO_MODELS
from lycaon.cli.output import layer_rows, print_table, si, write_json


def _demo_fhe(model: str, images: int, json_path: Optional[str]) -> int:
    """FHE mode on this machine: the server compiles the network, the client generates the
    level-aware keyset and uploads it (seeded), then each image goes up encrypted and its logits
    come back encrypted; printed next to the float model."""
    from rich.console import Console  # noqa: PLC0415
    from rich.progress import Progress  # noqa: PLC0415

    from lycaon import fhe  # noqa: PLC0415
    from lycaon.frontend import resnet, run_float, zoo  # noqa: PLC0415

    name = DEMO_MODELS.get(model, model)
    graph = zoo.load_model(name)
    if tuple(graph.input_shape) != (3, 32, 32):
        raise lycaon.LycaonError(f"demo --mode fhe classifies bundled CIFAR-10 images; {name} takes input of shape {graph.input_shape}")
    raw, y = bundled_test_images("cifar10")
    if images < 1 or images > len(raw):
        raise lycaon.LycaonError(f"--images must be 1..{len(raw)} (the bundled CIFAR-10 test images)")
    x, y = resnet.preprocess(raw[:images]), y[:images].astype(np.int64)
    t0 = time.perf_counter()
    with Console(stderr=True).status(f"{name}: compiling for CKKS (packings, diagonals, level plan)"):
        server = fhe.FheModel(graph)
    compile_s = time.perf_counter() - t0
    client = fhe.FheClient(server.spec)
    with Progress(transient=True) as bar:
        task = bar.add_task("key generation (level-aware keyset)", total=None)
        t0 = time.perf_counter()
        relin, galois = client.evaluation_keys("level-aware")
        keygen_s = time.perf_counter() - t0
        bar.update(task, total=1, completed=1)
    upload = {"relin": relin.to_bytes(), "galois": galois.to_bytes(), "public": client.public_key.to_bytes()}
    params = server.params
    server.attach_keys(lycaon.CkksRelinKey.from_bytes(params, upload["relin"]), lycaon.CkksGaloisKeys.from_bytes(params, upload["galois"]),
                       lycaon.CkksPublicKey.from_bytes(params, upload["public"]))
    results = []
    with Progress(transient=True) as bar:
        task = bar.add_task("encrypted inference", total=images)
        layer_task = bar.add_task("", total=len(server.steps))
        for i in range(images):
            t0 = time.perf_counter()
            query = client.encrypt(x[i])
            up = query.to_bytes()
            t1 = time.perf_counter()

            def progress(done, total, step, i=i):
                bar.update(layer_task, completed=done, total=total, description=f"image {i + 1}: {step}")

            answer = server.infer(lycaon.CkksCiphertext.from_bytes(params, up), progress=progress)
            down = answer.to_bytes()
            t2 = time.perf_counter()
            logits = client.decrypt(lycaon.CkksCiphertext.from_bytes(params, down))
            t3 = time.perf_counter()
            results.append({"logits": logits, "client_s": (t1 - t0) + (t3 - t2), "server_s": t2 - t1, "up_bytes": len(up), "down_bytes": len(down)})
            bar.update(task, completed=i + 1)
    plain = run_float(graph, x)
    enc = np.array([r["logits"] for r in results])
    bits = [fhe.precision_bits(e, p) for e, p in zip(enc, plain)]
    fl, pr = plain.argmax(1), enc.argmax(1)
    key_bytes = relin.memory_bytes + galois.memory_bytes
    summary = {
        "model": name, "mode": "fhe", "images": images, "log_n": int(np.log2(params.n)), "levels": params.max_level, "log2_qp": params.log2_qp,
        "compile_s": compile_s, "keygen_s": keygen_s, "key_bytes": key_bytes, "key_upload_bytes": len(upload["relin"]) + len(upload["galois"]) + len(upload["public"]),
        "float": {"accuracy": float((fl == y).mean())},
        "fhe": {"accuracy": float((pr == y).mean()), "top1_agreement_float": float((pr == fl).mean()), "min_bits": min(bits),
                "server_s": float(np.mean([r["server_s"] for r in results])), "client_s": float(np.mean([r["client_s"] for r in results])),
                "up_bytes": results[0]["up_bytes"], "down_bytes": results[0]["down_bytes"]},
        "per_image": [{"label": int(p), "true_label": int(t), "bits": b, "server_s": r["server_s"]} for p, t, b, r in zip(pr, y, bits, results)],
        "layers": server.summary(),
    }
    h = summary["fhe"]
    print_table(f"{name}: {images} bundled CIFAR-10 test images, FHE private inference (CKKS logN {summary['log_n']}, {params.max_level} levels, no bootstrapping)",
           ["", "accuracy", "top-1 = float", "precision", "server / image", "client / image", "up / image", "down / image"],
           [["plaintext float", summary["float"]["accuracy"], "-", "-", "", "", "", ""],
            ["FHE (private)", h["accuracy"], h["top1_agreement_float"], f"{h['min_bits']:.1f} bits", si(h["server_s"], "s"), si(h["client_s"], "s"),
             si(h["up_bytes"], "B"), si(h["down_bytes"], "B")]])
    print(f"once per session: compile {si(compile_s, 's')} (server), key generation {si(keygen_s, 's')} (client), "
          f"keys {si(key_bytes, 'B')} in memory, {si(summary['key_upload_bytes'], 'B')} uploaded (seeded)")
    print_table("Program", ["step", "kind", "level", "rotations", "diagonals"], [[r["step"], r["kind"], r["level"], r["rotations"], r.get("diagonals", "")] for r in summary["layers"]])
    write_json(json_path, summary)
    return 0


def _demo_fhe_resnet20(model: str, images: int, json_path: Optional[str]) -> int:
    """ResNet-20 in the FHE mode with bootstrapping (fhe_resnet): AESPA quadratics (the shipped
    trained weights) or, for the ReLU network, the composite minimax ReLU. The client generates
    the level-aware rotation keys and the bootstrapping keys; each image goes up encrypted and its
    logits come back encrypted; printed next to the float twin. About 16 GiB and, on 2 cores,
    8 minutes an image (AESPA) or 20 (ReLU)."""
    from rich.progress import Progress  # noqa: PLC0415

    from lycaon import fhe, fhe_resnet  # noqa: PLC0415
    from lycaon.frontend import resnet, zoo  # noqa: PLC0415

    name = fhe_resnet.RESNET20_MODELS[model]
    raw, y = bundled_test_images("cifar10")
    try:  # value bounds for the bootstraps: training images, else the bundled images not classified
        calibration, spare = zoo.cifar10("train")[0][:64].copy(), len(raw)
    except OSError:
        calibration, spare = raw[-64:], len(raw) - 64
    if images < 1 or images > spare:
        raise lycaon.LycaonError(f"--images must be 1..{spare} (the bundled CIFAR-10 test images)")
    x, y = resnet.preprocess(raw[:images]), y[:images].astype(np.int64)
    t0 = time.perf_counter()
    net = fhe_resnet.load_resnet20(model, calibration)
    compile_s = time.perf_counter() - t0
    client = fhe_resnet.FheResNetClient(net.spec)
    with Progress(transient=True) as bar:
        task = bar.add_task("key generation", total=2)
        steps = iter(range(3))
        t0 = time.perf_counter()
        relin, galois, boot_keys = client.keys(progress=lambda what: bar.update(task, completed=next(steps), description=f"key generation: {what}"))
        keygen_s = time.perf_counter() - t0
    results = []
    with Progress(transient=True) as bar:
        task = bar.add_task("encrypted inference", total=images)
        op_task = bar.add_task("", total=len(net.ops))
        for i in range(images):
            ct = client.encrypt(x[i])

            def progress(done, total, step, i=i):
                bar.update(op_task, completed=done, total=total, description=f"image {i + 1}: {step}")

            t0 = time.perf_counter()
            out, stats = fhe_resnet.infer(net, relin, galois, boot_keys, ct, progress=progress)
            results.append({"logits": client.decrypt(out), "server_s": time.perf_counter() - t0, **stats})
            bar.update(task, completed=i + 1)
    plain = np.array([net.reference(v) for v in x])
    enc = np.array([r["logits"] for r in results])
    bits = [fhe.precision_bits(e, p) for e, p in zip(enc, plain)]
    fl, pr = plain.argmax(1), enc.argmax(1)
    ratio = net.range_ratio(x)
    summary = {
        "model": name, "mode": "fhe", "images": images, "log_n": int(np.log2(net.params.n)), "bootstrapping": True,
        "activation": "composite minimax ReLU" if net.relu is not None else "AESPA quadratics",
        "compile_s": compile_s, "keygen_s": keygen_s, "network_key_bytes": relin.memory_bytes + galois.memory_bytes,
        "bootstrap_key_bytes": boot_keys.memory_bytes, "rotation_keys": len(net.rotation_levels()),
        "float": {"accuracy": float((fl == y).mean())},
        "fhe": {"accuracy": float((pr == y).mean()), "top1_agreement_float": float((pr == fl).mean()), "min_bits": min(bits),
                "server_s": float(np.mean([r["server_s"] for r in results])), "bootstraps": results[0]["bootstraps"]},
        "per_image": [{"label": int(p), "true_label": int(t), "bits": b, "server_s": r["server_s"], "range_ratio": float(q)}
                      for p, t, b, r, q in zip(pr, y, bits, results, ratio)],
    }
    h = summary["fhe"]
    print_table(f"{name}: {images} bundled CIFAR-10 test images, FHE private inference (CKKS logN {summary['log_n']}, {summary['activation']}, "
           f"{h['bootstraps']} bootstraps an image)",
           ["", "accuracy", "top-1 = float", "precision", "server / image"],
           [["plaintext float", summary["float"]["accuracy"], "-", "-", ""],
            ["FHE (private)", h["accuracy"], h["top1_agreement_float"], f"{h['min_bits']:.1f} bits", si(h["server_s"], "s")]])
    print(f"once per session: compile {si(compile_s, 's')} (server), key generation {si(keygen_s, 's')} (client): "
          f"{summary['rotation_keys']} rotation keys by level and relinearisation {si(summary['network_key_bytes'], 'B')}, bootstrapping {si(summary['bootstrap_key_bytes'], 'B')}")
    outside = int((ratio > 1).sum())
    if outside:
        print(f"warning: {outside} image(s) left the value range the bootstraps were calibrated for; their encrypted logits are not meaningful")
    write_json(json_path, summary)
    return 0


def _demo(mode: str, model: Optional[str], images: int, link: str, json_path: Optional[str], flood_bits: float, exact_truncation: bool = True) -> int:
    from lycaon.fhe_resnet import RESNET20_MODELS  # noqa: PLC0415

    if mode == "fhe" and model in RESNET20_MODELS:
        return _demo_fhe_resnet20(model, images, json_path)
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
