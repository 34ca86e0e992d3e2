"""``lycaon serve``: private inference of a model for remote clients, in the hybrid or the FHE mode."""

from __future__ import annotations

import sys
import time
from typing import Optional

import numpy as np

from lycaon.cli.models import DEMO_MODELS
from lycaon.cli.output import print_table


def _log_line(record: dict) -> str:
    """One server log record on one line: its scalar fields."""
    return " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in record.items() if not isinstance(v, (list, dict)))


def _log_until_interrupted(server) -> int:
    """Prints the server's log lines as they come (errors to stderr) until Ctrl-C, then stops it."""
    seen = 0
    try:
        while True:
            time.sleep(0.5)
            records = server.logs()
            for record in records[seen:]:
                print(_log_line(record), file=sys.stderr if "error" in record else sys.stdout, flush=True)
            seen = len(records)
    except KeyboardInterrupt:
        print("stopping", file=sys.stderr)
    finally:
        server.stop()
    return 0


def _preprocess_spec(args) -> Optional[dict]:
    """The preprocessing spec of ``lycaon serve``'s flags: --preprocess (JSON or a JSON file),
    overridden field by field by --resize, --crop, --mean, --std, --scale, --channel-order."""
    from lycaon.preprocessing import Preprocess  # noqa: PLC0415

    base = Preprocess.from_any(args.preprocess)
    spec = base.to_dict() if base is not None else {}
    for key in ("resize", "crop", "mean", "std", "scale", "channel_order"):
        value = getattr(args, key, None)
        if value is not None:
            spec[key] = value[0] if key in ("resize", "crop") and len(value) == 1 else value
    return Preprocess.from_any(spec).to_dict() if spec else None


def _serve(model: str, port: int, host: str, plan_path: Optional[str], reveal: str, max_sessions: int, link: str, flood_bits: float,
           exact_truncation: bool = True, calibration: Optional[str] = None, preprocess: Optional[dict] = None, labels: Optional[str] = None,
           calibration_images: int = 16, random_weights: Optional[int] = None, ray: Optional[str] = None, workers: int = 2, worker_threads: int = 1, replicas: int = 0) -> int:
    from rich.console import Console  # noqa: PLC0415

    from lycaon.hybrid import Server, load_graph  # noqa: PLC0415

    graph = None
    if random_weights is not None:
        from lycaon.frontend.random_weights import with_random_weights  # noqa: PLC0415

        graph = with_random_weights(load_graph(model), seed=random_weights)
        print(f"{model}: random weights (seed {random_weights}; for benchmarks, not predictions)", file=sys.stderr)
    with Console(stderr=True).status(f"{model}: quantising, {'reading the plan' if plan_path else f'planning for link {link}'} and compiling"):
        server = Server(graph if graph is not None else model, plan=plan_path, reveal=reveal, link=link, max_sessions=max_sessions, flood_bits=flood_bits,
                        exact_truncation=exact_truncation, calibration=calibration, preprocess=preprocess, labels=labels,
                        calibration_images=calibration_images, ray=ray, workers=workers, worker_threads=worker_threads,
                        replicas=replicas)
    program = server.program
    linear = [op for op in program["ops"] if op["op"] == "linear"]
    print_table(f"{model}: hybrid program ({len(program['ops'])} ops, {program['fraction_bits']} fraction bits, reveals {reveal})",
           ["layer", "algorithm", "n", "log q", "t bits", "c_in", "c_out", "k", "stride"],
           [[op["name"], op["algorithm"], op["params"]["n"], sum(op["params"]["q_bits"]), op["params"]["t_bits"],
             op["shape"]["c_in"], op["shape"]["c_out"], op["shape"]["k"], op["shape"]["stride"]] for op in linear])
    address = server.start(port, host)
    meta = server.metadata
    where = f"; linear layers on {workers} Ray workers (pids {', '.join(map(str, server.fanout.pids))})" if server.fanout is not None else ""
    if replicas:
        where = f"; {replicas} replicas at {', '.join(server._server.addresses)}" + (f", each with {workers} Ray workers" if workers else "")
    print(f"serving {model} on {address} (input {tuple(meta['input_shape'])}, {meta['classes']} classes, up to {max_sessions} sessions at once{where}); Ctrl-C stops",
          flush=True)
    return _log_until_interrupted(server)


def _fhe_summary(program: dict) -> str:
    """One line on an FHE program: parameters, ops by kind, bootstraps, rotation keys."""
    kinds = [op["kind"] for op in program["ops"]]
    counts = ", ".join(f"{kinds.count(k)} {k}" for k in dict.fromkeys(kinds))
    refreshes = sum(len(op.get("refresh") or []) for op in program["ops"])
    params = program["parameters"]
    ring = f"CKKS logN {int(np.log2(params['n']))}, {params['levels']} levels" if params["kind"] == "scale_stable" else f"CKKS {params['shape']} with bootstrapping"
    return f"{program['name']}: FHE program ({ring}; {counts}; {refreshes} refreshes an image; {len(program['rotation_levels'])} rotation keys by level)"


def _serve_fhe(model: str, port: int, host: str, max_sessions: Optional[int], device: str = "cpu", flood_precision_bits: float = 20.0,
               calibration: Optional[str] = None, preprocess: Optional[dict] = None, labels: Optional[str] = None, calibration_images: int = 64,
               random_weights: Optional[int] = None, ray: Optional[str] = None, replicas: int = 0, workers: int = 2, worker_threads: int = 1) -> int:
    from rich.console import Console  # noqa: PLC0415

    from lycaon.fhe_resnet import RESNET20_MODELS  # noqa: PLC0415
    from lycaon.hybrid import Server, load_graph  # noqa: PLC0415

    if model not in RESNET20_MODELS:
        model = DEMO_MODELS.get(model, model)
    source = model
    if random_weights is not None:
        from lycaon.frontend.random_weights import with_random_weights  # noqa: PLC0415

        source = with_random_weights(load_graph(model), seed=random_weights)
        print(f"{model}: random weights (seed {random_weights}; for benchmarks, not predictions)", file=sys.stderr)
    with Console(stderr=True).status(f"{model}: compiling for CKKS (packings, levels, bootstrap placement) and preparing the program"):
        server = Server(source, mode="fhe", max_sessions=max_sessions, device=device, flood_precision_bits=flood_precision_bits, calibration=calibration,
                        preprocess=preprocess, labels=labels, calibration_images=calibration_images, ray=ray, replicas=replicas,
                        workers=workers if ray is not None else 0, worker_threads=worker_threads)
    holder = "each Ray worker holds" if ray is not None and workers else "a session holds"
    print(_fhe_summary(server.program) + (f"; {holder} about 10 GB of each session's keys" if server.program["parameters"]["kind"] == "bootstrappable" else ""))
    address = server.start(port, host)
    sessions = server.options["max_sessions"]
    where = f" per replica; {replicas} replicas at {', '.join(server._server.addresses)}" if replicas else ""
    if ray is not None and workers:
        where += f"; ops on {workers} Ray worker{'s' if workers != 1 else ''}" + (" per replica" if replicas else f" (pids {', '.join(map(str, server.fanout.pids))})")
    print(f"serving {model} in the FHE mode on {address} (up to {sessions} session{'s' if sessions != 1 else ''} at once{where}); Ctrl-C stops", flush=True)
    return _log_until_interrupted(server)


def add_parser(sub) -> None:
    serve = sub.add_parser("serve", help="serve private inference of a model (hybrid mode: HE linear layers, two-party ReLU and truncation)")
    serve.add_argument("model", help="built-in model (lenet5-mnist, resnet20-cifar10, resnet56-reference, ...) or a model file (ONNX, PyTorch); with --mode fhe "
                       "also cnn-square, resnet20 (trained AESPA quadratics, bootstrapping) or resnet20-relu; any other network's ReLUs run as composite "
                       "minimax polynomials with bootstraps placed from --calibration data")
    serve.add_argument("--threads", type=int, metavar="N", help="worker threads of this server, for HE and two-party work alike (default: the cores)")
    serve.add_argument("--mode", choices=("hybrid", "fhe"), default="hybrid", help="hybrid (default) or fhe (the whole network under CKKS: polynomial activations, or ReLU as composite minimax polynomials with bootstrapping)")
    serve.add_argument("--port", type=int, default=None, help="TCP port (default 7451, both modes; 0: any free port)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)")
    serve.add_argument("--plan", metavar="PLAN.json", help="a plan from lycaon plan --json (default: plan here for --link)")
    serve.add_argument("--reveal", choices=("logits", "label"), default="logits", help="what clients learn: the logits (default) or only the label")
    serve.add_argument("--max-sessions", type=int, default=None, help="clients served at once (default 4; fhe ResNet-20: 1, ~10 GB of keys a session)")
    serve.add_argument("--link", default="lan", metavar="lan|wan|BW,DELAY", help="link the plan is tuned for (default lan)")
    serve.add_argument("--flood-bits", type=float, default=40.0, help="statistical security of the noise flooding the server's ciphertexts (default 40)")
    serve.add_argument("--faithful-truncation", action="store_true", help="truncate with an error of up to one unit (fewer rounds) instead of exactly")
    serve.add_argument("--calibration", metavar="DATA", help="data the quantiser takes its scales from: a .npy/.npz of model-ready float tensors (N, C, H, W) "
                       "or a folder of images (with --preprocess or --resize/--crop/--mean/--std); required unless the model is a bundled MNIST/CIFAR-10 one")
    serve.add_argument("--calibration-images", type=int, default=None, metavar="N",
                       help="calibration samples used, spread over the data (default 16; --mode fhe: 64, for the value bounds of its bootstraps)")
    serve.add_argument("--labels", metavar="FILE", help="class names: a text file (one per line) or a JSON list; sent to clients")
    serve.add_argument("--preprocess", metavar="JSON|FILE", help='how images become model inputs, e.g. {"resize": 256, "crop": 224, "mean": [0.485, 0.456, 0.406], '
                       '"std": [0.229, 0.224, 0.225], "scale": 255, "channel_order": "rgb"}; published to clients')
    serve.add_argument("--resize", type=int, nargs="+", metavar="S", help="resize the shorter side to S, or to exactly H W")
    serve.add_argument("--crop", type=int, nargs="+", metavar="S", help="centre crop to S x S, or H W")
    serve.add_argument("--mean", type=float, nargs="+", help="per-channel mean (after dividing by --scale)")
    serve.add_argument("--std", type=float, nargs="+", help="per-channel standard deviation")
    serve.add_argument("--scale", type=float, help="divide pixel values by this first (default 255)")
    serve.add_argument("--channel-order", choices=("rgb", "bgr", "gray"), help="channel order of the model's input (default rgb)")
    serve.add_argument("--device", default="cpu", metavar="cpu|cuda:N", help="--mode fhe: where the server's CKKS work runs (default cpu)")
    serve.add_argument("--flood-precision-bits", type=float, default=20.0, metavar="BITS",
                       help="--mode fhe: bits of precision the noise flooding of answers leaves in the logits (default 20; 0: no flooding)")
    serve.add_argument("--ray", metavar="ADDRESS|auto|local", help="run the server's work on Ray workers (hybrid mode: the linear layers; FHE mode: every op, "
                       "independent ones on different workers); with --replicas: run the "
                       "replicas there: a cluster's address, auto (the cluster this machine belongs to) or local (start Ray here); needs pip install 'lycaon[ray]'")
    serve.add_argument("--workers", type=int, default=2, metavar="N", help="with --ray: worker actors (default 2; with --replicas: per replica, 0 for none)")
    serve.add_argument("--replicas", type=int, default=0, metavar="R", help="with --ray (either mode): R whole servers as Ray actors behind this address, "
                       "each session on one")
    serve.add_argument("--worker-threads", type=int, default=1, metavar="N", help="with --ray: threads per worker (default 1; 0: all cores)")
    serve.add_argument("--random-weights", type=int, metavar="SEED", help="benchmarks only: give a built-in architecture (resnet50, squeezenet, ...) random weights")


def run(args) -> int:
    if args.replicas and args.ray is None:
        print("lycaon serve: --replicas runs the replicas on Ray: give --ray ADDRESS|auto|local", file=sys.stderr)
        return 2
    if args.mode == "fhe":
        return _serve_fhe(args.model, 7451 if args.port is None else args.port, args.host, args.max_sessions, args.device, args.flood_precision_bits,
                          calibration=args.calibration, preprocess=_preprocess_spec(args), labels=args.labels,
                          calibration_images=64 if args.calibration_images is None else args.calibration_images, random_weights=args.random_weights,
                          ray=args.ray, replicas=args.replicas, workers=args.workers, worker_threads=args.worker_threads)
    if args.device != "cpu":
        print(f"lycaon serve: --device {args.device} applies to --mode fhe; the hybrid mode runs on the CPU", file=sys.stderr)
        return 2
    return _serve(args.model, 7451 if args.port is None else args.port, args.host, args.plan, args.reveal, 4 if args.max_sessions is None else args.max_sessions,
                  args.link, args.flood_bits, not args.faithful_truncation, calibration=args.calibration, preprocess=_preprocess_spec(args), labels=args.labels,
                  calibration_images=16 if args.calibration_images is None else args.calibration_images, random_weights=args.random_weights,
                  ray=args.ray, workers=args.workers, worker_threads=args.worker_threads, replicas=args.replicas)
