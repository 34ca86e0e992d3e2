"""`lycaon bench fhe`: FHE-mode private inference, Lycaon against Orion (Lattigo CKKS) in one run.

For Orion's MLP and LeNet-5 (x^2 activations; lycaon.frontend.lenet.mlp_square / lenet5_square)
both systems run the same network with the same seeded weights
(lycaon_benchmarks.orion_peer.draw_weights, so these two need lycaon-benchmarks even without Orion)
on the same bundled MNIST test images, each in a process of its own so that peak memory is the
process's own (ru_maxrss). Lycaon uses Orion's own CKKS bit sizes for each network (its
configs: scale, q_0 and special primes), so the precision is of one class; Lycaon's ring is the
standard one with 128-bit ternary secrets (Orion's LeNet config uses a sparse secret and the
conjugate-invariant ring, twice the real slots).

Records: {"model", "lycaon_s", "lycaon_peak_bytes", "lycaon_key_bytes", "peer", "peer_s",
"peer_peak_bytes", "peer_key_bytes", "time_ratio", "memory_ratio"} plus compile and key
generation times, precision (bits of the logits against the float64 twin), top-1 agreement,
and per keyset strategy (004 Table 3) key memory and latency.

ResNet-20 (AESPA activations, MPConv, bootstrapping: lycaon.fhe_resnet) runs in a worker of its
own; Orion's does not fit 24 GiB here, so its record sits beside the published figures and the
planner's keysets next to 004's Table 3. `resnet20-relu` is the reference ReLU ResNet-20
(../shared/data/models, trained with ReLU, not retrained) through the composite minimax ReLU:
the network FHE-MP-CNN's published 2,271 s is for.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

# Lycaon's CKKS bit sizes per network (log q_0, log scale): the MLP's are Orion's own (mlp.yml:
# q_0 29, scale 26); for LeNet-5 a scale of 2^32 (Orion's lenet.yaml: 2^35) already gives more
# bits than Orion gets, so the precision is of one class. Special primes: fhe.special_primes.
LYCAON_BITS = {"mlp": (29, 26), "lenet5": (42, 32)}
PUBLISHED_RESNET20 = [
    {"system": "FHE-MP-CNN (Lee et al. 2022, 004's baseline)", "latency_s": 2271.0, "hardware": "one CPU thread"},
    {"system": "AESPA + HyPHEN (002)", "latency_s": 1.4, "hardware": "NVIDIA A100"},
    {"system": "Orion (ASPLOS 2025, its paper)", "latency_s": None, "hardware": "see the Orion paper; not reproduced here (its ResNet-20 does not fit 24 GiB)"},
]
KEYSET_STRATEGIES = ("level-aware", "all-required", "power-of-two")
RESNET20_NETWORKS = ("resnet20", "resnet20-relu")
#: Networks at ImageNet shape with random weights and random inputs (benchmark only): 002's
#: ResNet-18 (AESPA quadratic activations, the stem's max pooling an average pooling).
IMAGENET_NETWORKS = ("resnet18-imagenet",)
#: What the bootstrapping circuit keeps besides the network's rotation keys at logN = 16 with
#: full slots: its own Galois and encapsulation keys plus its transforms' encoded diagonals,
#: measured on ResNet-20 (keys 9.51 GB of which its 104 network keys are 3.10 GB, diagonals
#: 3.1 GB). Used only to refuse, before any key is made, a run that cannot fit.
BOOTSTRAP_RESIDENT_BYTES = 9.5e9
# Test images on which the float64 twin with the composite ReLU is compared with exact ReLU (cheap:
# what the approximation alone does to top-1, beyond the few images encrypted).
FLOAT_CHECK_IMAGES = 200


def _graph(model: str, weights: dict):
    from lycaon.frontend.lenet import lenet5_square, mlp_square  # noqa: PLC0415

    return {"mlp": mlp_square, "lenet5": lenet5_square}[model](weights)


def _inputs(images: int) -> tuple[np.ndarray, np.ndarray]:
    from lycaon.data.mnist import mnist_test_subset  # noqa: PLC0415

    x, y = mnist_test_subset()
    return (x[:images].astype(np.float64) / 255.0)[:, None], y[:images]


def _return_freed_memory() -> None:
    """Hands memory that Python freed back to the OS (glibc keeps freed heap otherwise), so the
    peak measured is the keys' and the evaluation's, not leftovers of loading data."""
    import ctypes  # noqa: PLC0415
    import gc  # noqa: PLC0415

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _session(program: dict, keyset: str = "level-aware"):
    """The runtime's FHE session with both halves in this process (the TCP protocol on an
    in-memory channel): the client's keys made and sent."""
    return _native_session(json.dumps(program), keyset)


#: Where the workers' sessions run ("cpu", or "cuda:N": the server keeps every tensor, key and
#: plaintext of the session on the GPU); set from the worker's --device.
_DEVICE = "cpu"


def _native_session(program_json: str, keyset: str = "level-aware"):
    from lycaon import _native  # noqa: PLC0415

    return _native.FheSession.local(program_json, json.dumps({"keyset": keyset, "device": _DEVICE}))


def lycaon_worker(model: str, weights_path: str, inputs_path: str, phase: str = "run") -> dict:
    """Lycaon's side, run in a process of its own. phase 'run': compile, the level-aware keyset,
    inference on every image through the runtime (the peak memory reported is this process's,
    both halves). phase 'keysets': each keyset strategy in turn (key memory, upload bytes,
    generation time as real keys, and the latency of inferences for the strategies the runtime
    serves: level-aware and all-required)."""
    from lycaon import CkksKeyGenerator, fhe  # noqa: PLC0415

    weights = dict(np.load(weights_path))
    x = np.load(inputs_path)
    graph = _graph(model, weights)
    log_q0, log_scale = LYCAON_BITS[model]
    t0 = time.perf_counter()
    server = fhe.FheModel(graph, log_scale=log_scale, log_q0=log_q0)
    program = server.program(model)
    compile_s = time.perf_counter() - t0
    result = {"model": model, "log_n": int(np.log2(server.params.n)), "levels": server.params.max_level, "log_scale": log_scale, "log_q0": log_q0,
              "digits": server.params.key_switch_digits, "log2_qp": server.params.log2_qp, "compile_s": compile_s, "layers": server.summary()}
    strategies = KEYSET_STRATEGIES if phase == "keysets" else ("level-aware",)
    keysets: dict = {}
    kg = CkksKeyGenerator(server.params)
    for strategy in strategies:  # each keyset as real keys: memory, bytes, generation time
        pairs = server.spec.keyset(strategy)
        t0 = time.perf_counter()
        relin = kg.relin_key(level=server.spec.relin_level if strategy == "level-aware" else None) if server.spec.relin_level is not None else None
        galois = kg.galois_keys([s for s, _ in pairs], levels=[lv for _, lv in pairs]) if pairs else None
        keygen_s = time.perf_counter() - t0
        keysets[strategy] = {"keys": len(pairs) + (relin is not None), "keygen_s": keygen_s,
                             "key_bytes": (relin.memory_bytes if relin else 0) + (galois.memory_bytes if galois else 0),
                             "upload_bytes": (len(relin.to_bytes()) if relin else 0) + (len(galois.to_bytes()) if galois else 0), "latency_s": None}
        del relin, galois
    # The runtime serves level-aware and all-required keys (power-of-two needs every rotation
    # split into +-2^i rotations, which the linear transforms do not do: memory only).
    served = [s for s in strategies if s != "power-of-two"]
    t0 = time.perf_counter()
    sessions = {s: _session(program, s) for s in served}
    setup_s = time.perf_counter() - t0
    per_image = []
    times: dict = {s: [] for s in served}
    # Interleaved, first one then the other first, so that a noisy machine falls on both alike.
    for i in range(len(x) if phase == "run" else 6):
        for strategy in (served if i % 2 == 0 else served[::-1]):
            xi = x[i % len(x)].reshape(graph.input_shape)
            out = json.loads(sessions[strategy].infer(np.ascontiguousarray(xi.ravel(), dtype=np.float64)))
            times[strategy].append(out["report"]["server_s"])
            if phase == "run":
                got = np.asarray(out["logits"])
                want = fhe.plaintext_reference(graph, xi)
                err = float(np.abs(got - want).max())
                per_image.append({"latency_s": times[strategy][-1], "max_abs_err": err, "bits": float(-np.log2(max(err, 1e-300) / np.abs(want).max())),
                                  "top1": int(np.argmax(got)), "plain_top1": int(np.argmax(want)), "logits": got.tolist()})
    runtime_keys = {s: json.loads(sessions[s].keys) for s in served}
    for session in sessions.values():
        session.close()
    for strategy, t in times.items():
        keysets[strategy]["latency_s"] = float(np.median(t))
        keysets[strategy]["latencies_s"] = t
        keysets[strategy]["runtime_key_bytes"] = runtime_keys[strategy]["key_bytes"]
    result.update(keysets=keysets, images=per_image, peak_bytes=_peak_bytes(), session_setup_s=setup_s)
    if phase == "run":
        result.update(inference_s=float(np.median([r["latency_s"] for r in per_image])), key_bytes=runtime_keys["level-aware"]["key_bytes"],
                      keygen_s=runtime_keys["level-aware"]["keys_s"])
    return result


def _run_json(cmd: Sequence[str], out: Path, env: Optional[dict] = None, timeout: float = 1800) -> tuple[Optional[dict], str]:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, env=env, timeout=timeout)
    if proc.returncode != 0 or not out.is_file():
        return None, (proc.stderr or proc.stdout)[-2000:]
    return json.loads(out.read_text()), ""


def orion_python(explicit: Optional[str] = None) -> Optional[str]:
    """The interpreter that has `orion` (orion-fhe): --peer-python, $LYCAON_ORION_PYTHON, or this one."""
    for cand in (explicit, os.environ.get("LYCAON_ORION_PYTHON"), sys.executable):
        if cand and subprocess.run([cand, "-c", "import orion"], capture_output=True).returncode == 0:
            return cand
    return None


def run(models: Sequence[str] = ("mlp", "lenet5", "resnet20"), images: int = 2, json_path: Optional[str] = None, peer: bool = True,
        peer_python: Optional[str] = None, seed: int = 0, out=sys.stdout, resnet20_images: int = 1, resnet20_first: int = 0,
        resnet20_log: Optional[str] = None, resnet20_packing: str = "hyphen", ops: Optional[int] = None, device: str = "cpu") -> list[dict]:
    from lycaon.bench import peers  # noqa: PLC0415

    orion_peer, orion_missing = peers.load("orion_peer")  # numpy only at import
    root = Path(__file__).resolve().parents[2]
    # Lycaon's workers and, from the adapter's own place, Orion's interpreter find their modules.
    paths = [str(root)] + ([str(Path(orion_peer.__file__).resolve().parents[1])] if orion_peer is not None else [])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    py = orion_python(peer_python) if peer else None
    records = []
    with tempfile.TemporaryDirectory(prefix="lycaon-bench-fhe-") as tmp:
        tmp = Path(tmp)
        x, labels = _inputs(images)
        np.save(tmp / "x.npy", x)
        for model in models:
            if model in RESNET20_NETWORKS:
                path = tmp / f"{model}_lycaon.json"
                cmd = [sys.executable, "-m", "lycaon.bench.fhe", "--device", device, "--worker", model, "--images", str(resnet20_images), "--first", str(resnet20_first),
                       "--packing", resnet20_packing, "--worker-out", str(path)] + (["--log", str(Path(resnet20_log).resolve())] if resnet20_log else [])
                ours, err = _run_json(cmd, path, env, timeout=3600 * max(1, resnet20_images))
                rec = {"model": model, "lycaon_s": None if ours is None else ours["inference_s"], "lycaon_peak_bytes": None if ours is None else ours["peak_bytes"],
                       "lycaon_key_bytes": None if ours is None else ours["key_bytes"], "peer": "orion", "peer_s": None, "peer_peak_bytes": None,
                       "peer_key_bytes": None, "time_ratio": None, "memory_ratio": None,
                       "peer_status": "not run: Orion's ResNet-20 does not fit 24 GiB here (its packing of the last layer was killed for memory)",
                       "published": PUBLISHED_RESNET20, "planned": _planned_resnet20(), "lycaon": ours if ours is not None else {"error": err}}
                records.append(rec)
                _print_resnet20(rec, out)
                continue
            if model in IMAGENET_NETWORKS:
                path = tmp / f"{model}_lycaon.json"
                cmd = [sys.executable, "-m", "lycaon.bench.fhe", "--device", device, "--worker", model, "--images", str(resnet20_images), "--worker-out", str(path)] + \
                    (["--ops", str(ops)] if ops else []) + (["--log", str(Path(resnet20_log).resolve())] if resnet20_log else [])
                ours, err = _run_json(cmd, path, env, timeout=4 * 3600 * max(1, resnet20_images))
                rec = {"model": model, "lycaon_s": None if ours is None or "refused" in ours else ours["inference_s"],
                       "lycaon_peak_bytes": None if ours is None else ours.get("peak_bytes"), "peer": None, "lycaon": ours if ours is not None else {"error": err}}
                records.append(rec)
                _print_imagenet(rec, out)
                continue
            if model not in LYCAON_BITS:  # any other network: compiled by compile_model, on its data set's test images
                path = tmp / f"{model}_lycaon.json"
                cmd = [sys.executable, "-m", "lycaon.bench.fhe", "--device", device, "--worker", model, "--images", str(resnet20_images), "--first", str(resnet20_first),
                       "--worker-out", str(path)] + (["--log", str(Path(resnet20_log).resolve())] if resnet20_log else [])
                ours, err = _run_json(cmd, path, env, timeout=3600 * max(1, resnet20_images))
                rec = {"model": model, "lycaon_s": None if ours is None else ours["inference_s"], "lycaon_peak_bytes": None if ours is None else ours["peak_bytes"],
                       "lycaon_key_bytes": None if ours is None else ours["key_bytes"], "peer": None, "lycaon": ours if ours is not None else {"error": err}}
                records.append(rec)
                _print_network(rec, out)
                continue
            if orion_peer is None:
                print(f"{model}: not run (Orion's network, its weights drawn by the Orion adapter); {orion_missing}", file=out)
                continue
            weights = orion_peer.draw_weights(model, seed, x)
            np.savez(tmp / f"{model}_w.npz", **weights)
            def worker(phase: str) -> dict:
                path = tmp / f"{model}_lycaon_{phase}.json"
                res, err = _run_json([sys.executable, "-m", "lycaon.bench.fhe", "--device", device, "--worker", model, "--phase", phase, "--weights", str(tmp / f"{model}_w.npz"),
                                      "--inputs", str(tmp / "x.npy"), "--worker-out", str(path)], path, env)
                if res is None:
                    raise RuntimeError(f"Lycaon's FHE worker ({phase}) failed on {model}: {err}")
                return res

            ours = worker("run")
            ours["keysets"] = worker("keysets")["keysets"]
            theirs, peer_err = (None, "orion-fhe is not installed (pip install orion-fhe, or --peer-python PATH)") if py is None else \
                _run_json([py, "-m", "lycaon_benchmarks.orion_peer", "--model", model, "--weights", str(tmp / f"{model}_w.npz"), "--inputs", str(tmp / "x.npy"),
                           "--out", str(tmp / f"{model}_orion.json")], tmp / f"{model}_orion.json", env)
            rec = {"model": model, "lycaon_s": ours["inference_s"], "lycaon_peak_bytes": ours["peak_bytes"], "lycaon_key_bytes": ours["key_bytes"], "peer": "orion"}
            if theirs is not None:
                s = theirs["summary"]
                rec.update(peer_s=s["inference_s"]["median"], peer_peak_bytes=s["peak_rss_bytes"], peer_key_bytes=s["evaluation_key_bytes"],
                           time_ratio=ours["inference_s"] / s["inference_s"]["median"], memory_ratio=ours["peak_bytes"] / s["peak_rss_bytes"],
                           peer_compile_s=s["compile_s"], peer_keygen_s=s["keygen_s"], peer_bits=s["bits_rel_min"], peer_top1_agreement=s["top1_agreement"],
                           peer_params=theirs.get("ckks"))
            else:
                rec.update(peer_s=None, peer_peak_bytes=None, peer_key_bytes=None, time_ratio=None, memory_ratio=None, peer_status=peer_err)
            agree = [r["top1"] == r["plain_top1"] for r in ours["images"]]
            rec.update(images=len(ours["images"]), lycaon_compile_s=ours["compile_s"], lycaon_keygen_s=ours["keygen_s"],
                       lycaon_bits=min(r["bits"] for r in ours["images"]), lycaon_top1_agreement=float(np.mean(agree)), keysets=ours["keysets"],
                       lycaon_params={k: ours[k] for k in ("log_n", "levels", "log_scale", "log_q0", "digits", "log2_qp")}, layers=ours["layers"])
            records.append(rec)
            _print(rec, out)
    if json_path:
        Path(json_path).write_text(json.dumps(records, indent=2))
    return records


def _planned_resnet20() -> Optional[dict]:
    """The planner's figures for ResNet-20 in the FHE mode (004's three keysets, levels,
    bootstraps): planned from the cost model, not measured."""
    from lycaon import plan  # noqa: PLC0415

    try:
        r = plan.plan_fhe("resnet20-cifar10")
    except Exception as e:  # noqa: BLE001  the planner's own error, reported in the record
        return {"error": str(e)}
    return {"source": "lycaon.plan.plan_fhe (cost model; not a measurement)", "log_n": r["log_n"], "bootstraps": r["bootstraps"], "rotations": r["rotations"],
            "keysets": r["keysets"], "comparison_004": r["comparison_004"]}


def resnet20_worker(images: int, network: str = "resnet20", first: int = 0, log: Optional[str] = None, packing: str = "hyphen") -> dict:
    """ResNet-20 under CKKS with bootstrapping (fhe_resnet), in a process of its own. `resnet20`:
    AESPA activations, the shipped AESPA weights when they exist, else `aespa.synthetic_weights`
    (said in the record); `resnet20-relu`: the reference ReLU ResNet-20 of ../shared/data/models
    (else the shipped ReLU ResNet-20) through the composite minimax ReLU. CIFAR-10 test images
    from ../shared/data (or the bundled ones): `images` of a fixed seeded sample, after its
    `first`, so that runs on several machines or sessions add up to one sample; with `log`, each
    image's record is appended to that file as one JSON line as soon as it is decrypted.
    `packing`: "mpconv" (one multiplexed packing throughout), "hyphen" (HyPHEN's changing packing
    where it applies, `FheResNet(hyphen=True)`), or "both": each image through both networks in
    turn, with one client's keys (the union of their rotation steps), records tagged by packing."""

    from lycaon import fhe_resnet  # noqa: PLC0415
    from lycaon.frontend import aespa, resnet, zoo  # noqa: PLC0415
    from lycaon.models import load_weights  # noqa: PLC0415

    try:
        raw, labels = zoo.cifar10("test")
    except OSError:
        raw, labels = __import__("lycaon.data", fromlist=["demo_images"]).demo_images("cifar10")
    # A seeded sample (the test set is sorted by class), never from the last 64 images, which
    # calibrate when the training set is absent.
    pool = np.random.default_rng(1).permutation(len(raw) - 64)
    if first < 0 or images < 1 or first + images > len(pool):
        raise ValueError(f"test images {first}..{first + images - 1} of the sample: the sample has {len(pool)}")
    picked = pool[first:first + images]  # in sample order: a run cut short has covered a prefix
    x, labels = resnet.preprocess(raw[picked]), labels[picked].copy()
    float_check = resnet.preprocess(raw[np.sort(pool[:FLOAT_CHECK_IMAGES])])
    try:  # calibration (value bounds for bootstrapping) on training images, never the test images run
        calibration = resnet.preprocess(zoo.cifar10("train")[0][:64])
    except OSError:
        calibration = resnet.preprocess(raw[-64:])
    del raw
    if network == "resnet20-relu":
        try:
            graph, source = resnet.resnet_cifar(resnet.reference_state_dict(20), 20), "reference ReLU ResNet-20 (../shared/data/models/resnet20-12fca82f.th), composite minimax ReLU 15-15-27"
        except OSError:
            graph, source = resnet.resnet_cifar(load_weights("resnet20-cifar10"), 20), "shipped resnet20-cifar10 (ReLU), composite minimax ReLU 15-15-27"
    else:
        try:
            graph, source = aespa.graph(load_weights("resnet20-aespa-cifar10")), "shipped resnet20-aespa-cifar10"
        except KeyError:
            graph, source = aespa.graph(aespa.synthetic_weights(calibration[:16])), "aespa.synthetic_weights (untrained: the AESPA training has not finished; accuracy is chance)"
    if packing not in ("mpconv", "hyphen", "both"):
        raise ValueError(f"packing {packing!r}: mpconv, hyphen or both")
    t0 = time.perf_counter()
    nets = {p: fhe_resnet.FheResNet(graph, calibration, hyphen=p == "hyphen") for p in (("mpconv", "hyphen") if packing == "both" else (packing,))}
    programs = {p: n.program(network) for p, n in nets.items()}
    compile_s = (time.perf_counter() - t0) / len(nets)
    net = next(iter(nets.values()))
    composite_check = None
    if net.relu is not None:
        exact = np.array([net.reference(v) for v in float_check])
        approx = np.array([net.reference(v, approximate=True) for v in float_check])
        composite_check = {"images": len(float_check), "top1_agreement": int((exact.argmax(1) == approx.argmax(1)).sum()),
                           "bits": _bits(approx, exact)}
    del float_check
    _return_freed_memory()  # the data sets and calibration temporaries, before the keys
    per_image = []
    keys: dict = {}
    for name, net in nets.items():  # one session (one client's keys) per packing, in turn
        session = _session(programs[name])
        keys[name] = json.loads(session.keys)
        for i in range(images):
            out = json.loads(session.infer(np.ascontiguousarray(x[i].ravel(), dtype=np.float64)))
            stats = out["report"]
            got, want = np.asarray(out["logits"]), net.reference(x[i])
            record = {"test_row": int(picked[i]), "packing": name, "planned_bootstraps": net.planned_bootstraps, "range_ratio": float(net.range_ratio(x[i:i + 1])[0]),
                      "latency_s": stats["server_s"], "bits": _bits(got, want), "top1": int(np.argmax(got)), "plain_top1": int(np.argmax(want)), "label": int(labels[i]),
                      **{k: stats[k] for k in ("bootstraps", "bootstrap_s", "conv_s", "quadratic_s", "relu_s", "other_s", "late_encodings", "flood_log2")}}
            if net.relu is not None:  # against the float twin with the same composite ReLU: the encryption's own error
                twin = net.reference(x[i], approximate=True)
                record.update(bits_vs_composite=_bits(got, twin), composite_top1=int(np.argmax(twin)))
            per_image.append(record)
            if log:
                with open(log, "a") as f:
                    f.write(json.dumps({"network": network, "weights": source, "threads": _threads(), **record}) + "\n")
        session.close()
    first = keys[next(iter(nets))]
    return {"weights": source, "packing": packing, "log_n": 16, "compile_s": compile_s, "composite_float_check": composite_check, "keygen_s": first["keys_s"],
            "key_bytes": first["key_bytes"], "key_upload_bytes": first["upload_bytes"], "rotation_keys": len(net.rotation_levels()),
            "inference_s": float(np.median([r["latency_s"] for r in per_image if r["packing"] == next(iter(nets))])),
            "inference_s_by_packing": {p: float(np.median([r["latency_s"] for r in per_image if r["packing"] == p])) for p in nets}, "images": per_image, "peak_bytes": _peak_bytes()}


def network_worker(model: str, images: int, first: int = 0, log: Optional[str] = None) -> dict:
    """Any network `fhe.compile_model` takes (a built-in name such as resnet56-reference, a
    model file) in the FHE mode, in a process of its own: compiled (the path the compiler
    chooses; bounds from the bundled training images of an MNIST- or CIFAR-10-shaped model),
    then `images` test images of its data set (after its `first`), each against the float64
    twin: latency, bootstraps, precision, top-1; peak memory and keys."""
    from lycaon import fhe, plan  # noqa: PLC0415
    from lycaon.data import demo_images  # noqa: PLC0415

    t0 = time.perf_counter()
    program, net = fhe.compile_model(model)
    compile_s = time.perf_counter() - t0
    dataset = plan.dataset_of(net.graph)
    if dataset is None:
        raise ValueError(f"{model}: input {net.graph.input_shape} has no bundled test images (MNIST 1x28x28 or CIFAR-10 3x32x32)")
    raw, labels = demo_images(dataset)
    x, labels = plan.preprocessor(dataset)(raw[first:first + images]), labels[first:first + images]
    _return_freed_memory()
    session = _session(program)
    keys = json.loads(session.keys)
    per_image = []
    for i in range(len(x)):
        out = json.loads(session.infer(np.ascontiguousarray(x[i].ravel(), dtype=np.float64)))
        stats, got, want = out["report"], np.asarray(out["logits"]), net.reference(x[i])
        record = {"test_row": first + i, "label": int(labels[i]), "latency_s": stats["server_s"], "bits": _bits(got, want), "top1": int(np.argmax(got)),
                  "plain_top1": int(np.argmax(want)), "range_ratio": float(net.range_ratio(x[i:i + 1])[0]),
                  **{k: stats[k] for k in ("bootstraps", "bootstrap_s", "conv_s", "quadratic_s", "relu_s", "other_s")}}
        per_image.append(record)
        if log:
            with open(log, "a") as f:
                f.write(json.dumps({"network": model, "threads": _threads(), **record}) + "\n")
    session.close()
    return {"path": program["parameters"]["kind"], "compile_s": compile_s, "planned_bootstraps": net.planned_bootstraps, "keygen_s": keys["keys_s"],
            "key_bytes": keys["key_bytes"], "key_upload_bytes": keys["upload_bytes"], "inference_s": float(np.median([r["latency_s"] for r in per_image])),
            "images": per_image, "peak_bytes": _peak_bytes()}


def _network_key_bytes(program: dict) -> int:
    """The bytes of the program's rotation keys (one Galois key per step at its level)."""
    from lycaon import _native  # noqa: PLC0415

    params = _native.CkksBootstrapParams.logn16_full_slots().parameters()
    kg = _native.CkksKeyGenerator(params)
    size = {lv: kg.galois_keys([1], levels=[lv]).memory_bytes for lv in set(program["rotation_levels"].values())}
    return int(sum(size[lv] for lv in program["rotation_levels"].values()))


def _memory_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _cut_program(program: dict, ops: int) -> tuple[dict, dict]:
    """The program's first `ops` ops, answering with every slot of the last one's output, with
    only the rotation keys those ops use; and where that output sits (the convolution that reads
    it next: its part's channels and layout)."""
    from lycaon._native import fhe_rotation_plan  # noqa: PLC0415

    if not 1 <= ops < len(program["ops"]):
        raise ValueError(f"--ops {ops}: the program has {len(program['ops'])} ops")
    cut = dict(program, ops=program["ops"][:ops])
    output = cut["ops"][-1]["output"]
    reader = next((o for o in program["ops"][ops:] if output in o["inputs"] and o["kind"] == "mp_conv"), None)
    if reader is None:
        raise ValueError(f"--ops {ops}: its last output '{output}' is not read by a convolution, whose packing would place it; cut elsewhere")
    layout = reader["input"]
    per = reader.get("part_channels") or layout["channels"]
    k = reader["inputs"].index(output)
    channels = (k * per, min((k + 1) * per, layout["channels"]))
    slots = 1 << 15
    cut.update(output=output, output_slots=list(range(slots)))
    cut["rotation_levels"] = {str(s): lv for s, lv in json.loads(fhe_rotation_plan(json.dumps(cut))).items()}
    tensor = output.rsplit("#", 1)[0] if "#" in output and output.rsplit("#", 1)[1].isdigit() else output
    return cut, {"tensor": tensor, "channels": channels, "layout": layout, "slots": slots}


def _packed_tensor(graph, x: np.ndarray, where: dict) -> np.ndarray:
    """The float twin's value of `where`'s tensor part on input `x`, in its multiplexed packing."""
    from lycaon._native import multiplexed_pack  # noqa: PLC0415
    from lycaon.frontend.executor import run_node  # noqa: PLC0415

    values = {graph.input_name: np.asarray(x, dtype=np.float64)[None]}
    for node in graph.nodes:
        values[node.output] = run_node(node, [values[i] for i in node.inputs])
        if node.output == where["tensor"]:
            break
    lo, hi = where["channels"]
    t = values[where["tensor"]][0, lo:hi]
    lay = where["layout"]
    grid = np.zeros((hi - lo, lay["height"], lay["width"]))
    grid[:, :t.shape[1], :t.shape[2]] = t
    return multiplexed_pack(hi - lo, lay["height"], lay["width"], lay["gap"], where["slots"], np.ascontiguousarray(grid.ravel()))


def imagenet_worker(model: str, images: int, ops: Optional[int] = None, log: Optional[str] = None) -> dict:
    """ResNet-18 at ImageNet shape (3 x 224 x 224) in the FHE mode, in a process of its own: 002's
    network with AESPA quadratic activations (the stem's max pooling an average pooling), random
    weights and random N(0, 1) inputs (a benchmark of cost, said in the record), value bounds
    from 4 random calibration inputs. The input arrives space-to-depth and the wide tensors in
    several ciphertexts (the compiler decides). With `ops`, only the first `ops` ops run, with
    the keys they use, and the decrypted tensor is checked against the float twin's; else the
    whole network against the twin's logits. Before any key is made, a run whose keys cannot fit
    this machine's memory is refused with the figures."""
    from lycaon import fhe  # noqa: PLC0415
    from lycaon.frontend.architectures import resnet18  # noqa: PLC0415
    from lycaon.frontend.random_weights import with_random_weights  # noqa: PLC0415

    if model not in IMAGENET_NETWORKS:
        raise ValueError(f"{model}: expected one of {IMAGENET_NETWORKS}")
    rng = np.random.default_rng(0)
    graph = with_random_weights(resnet18("quadratic"), seed=0)
    calibration = rng.standard_normal((4, 3, 224, 224))
    x = rng.standard_normal((images, 3, 224, 224))
    t0 = time.perf_counter()
    program, net = fhe.compile_model(graph, calibration=calibration)
    compile_s = time.perf_counter() - t0
    full = {"ops": len(program["ops"]), "planned_bootstraps": net.planned_bootstraps, "rotation_keys": len(program["rotation_levels"]),
            "network_key_bytes": _network_key_bytes(program), "input_packing": program["input_packing"]}
    where = None
    if ops is not None:
        program, where = _cut_program(program, ops)
        program_json = json.dumps(program)
    else:
        program_json = net.program_json
    need = _network_key_bytes(program) + BOOTSTRAP_RESIDENT_BYTES
    record = {"weights": "random (He-normal, seed 0; quadratics near ReLU's fit): a benchmark of cost, not of accuracy", "inputs": "random N(0, 1), seed 0",
              "compile_s": compile_s, "full_program": full, "ops_run": len(program["ops"]), "checked": where and {k: where[k] for k in ("tensor", "channels")},
              "rotation_keys": len(program["rotation_levels"]), "estimated_resident_key_bytes": need, "machine_bytes": _memory_bytes()}
    if need > 0.9 * _memory_bytes():
        record["refused"] = (f"the evaluation keys alone need about {need / 1e9:.1f} GB ({len(program['rotation_levels'])} rotation keys at their levels plus "
                             f"the bootstrapping circuit's keys and diagonals), more than 90% of this machine's {_memory_bytes() / 1e9:.1f} GB; run a prefix with --ops N")
        return record
    # The weights live on in the runtime; the float twin needs only the graph (about 1 GB of
    # program JSON and its Python objects freed before the keys).
    net.program = net.program_json = program = None
    del calibration
    _return_freed_memory()
    session = _native_session(program_json)
    del program_json
    keys = json.loads(session.keys)
    per_image = []
    for i in range(images):
        out = json.loads(session.infer(np.ascontiguousarray(x[i].ravel(), dtype=np.float64)))
        stats, got = out["report"], np.asarray(out["logits"])
        want = _packed_tensor(net.graph, x[i], where) if where else net.reference(x[i])
        r = {"latency_s": stats["server_s"], "bits": _bits(got, want), **{k: stats[k] for k in ("bootstraps", "bootstrap_s", "conv_s", "quadratic_s", "other_s", "late_encodings")},
             "slowest_ops": sorted(stats["ops"], key=lambda o: -o[1])[:8]}
        if where is None:
            r.update(top1=int(np.argmax(got)), plain_top1=int(np.argmax(want)))
        per_image.append(r)
        if log:
            with open(log, "a") as f:
                f.write(json.dumps({"network": model, "ops": record["ops_run"], "threads": _threads(), **r}) + "\n")
    session.close()
    record.update(keygen_s=keys["keys_s"], key_bytes=keys["key_bytes"], key_upload_bytes=keys["upload_bytes"], images=per_image,
                  inference_s=float(np.median([r["latency_s"] for r in per_image])), peak_bytes=_peak_bytes())
    return record


def _print_imagenet(r: dict, out) -> None:
    ours, full = r["lycaon"], r["lycaon"].get("full_program", {})
    if "error" in ours:
        print(f"\n{r['model']}: Lycaon's run failed: {ours['error']}", file=out)
        return
    print(f"\n{r['model']} (random weights and inputs; input {full.get('input_packing')}): {full.get('ops')} ops, {full.get('planned_bootstraps')} bootstraps planned, "
          f"{full.get('rotation_keys')} rotation keys ({_fmt(full.get('network_key_bytes'), ' GB', 1e9)}), compiled in {_fmt(ours['compile_s'], ' s', digits=1)}", file=out)
    if "refused" in ours:
        print(f"  not run: {ours['refused']}", file=out)
        return
    scope = f"first {ours['ops_run']} ops, checked on {ours['checked']}" if ours["checked"] else "whole network"
    for i in ours["images"]:
        top = f", top-1 {i['top1']} (plaintext {i['plain_top1']})" if "top1" in i else ""
        print(f"  {scope}: {_fmt(i['latency_s'], ' s', digits=1)} ({i['bootstraps']} bootstraps, {_fmt(i['bootstrap_s'], ' s', digits=1)}; convolutions "
              f"{_fmt(i['conv_s'], ' s', digits=1)}), precision {i['bits']:.1f} bits{top}", file=out)
    print(f"  keys {_fmt(ours['key_bytes'], ' GB', 1e9)} in {_fmt(ours['keygen_s'], ' s', digits=1)}, peak RSS {_fmt(ours['peak_bytes'], ' GB', 1e9)}", file=out)


def _print_network(r: dict, out) -> None:
    ours = r["lycaon"]
    if "error" in ours:
        print(f"\n{r['model']}: Lycaon's run failed: {ours['error']}", file=out)
        return
    runs = ours["images"]
    print(f"\n{r['model']} ({ours['path']}, {ours['planned_bootstraps']} bootstraps planned): {len(runs)} test image(s), "
          f"{sum(i['top1'] == i['label'] for i in runs)} classified correctly, top-1 = plaintext on {sum(i['top1'] == i['plain_top1'] for i in runs)}", file=out)
    print(f"  inference {_fmt(ours['inference_s'], ' s', digits=1)} median ({runs[0]['bootstraps']} bootstraps, {_fmt(runs[0]['bootstrap_s'], ' s', digits=1)}; "
          f"convolutions {_fmt(runs[0]['conv_s'], ' s', digits=1)}, ReLU polynomials {_fmt(runs[0]['relu_s'], ' s', digits=1)}), precision "
          f"{min(i['bits'] for i in runs):.1f} bits, peak RSS {_fmt(ours['peak_bytes'], ' GB', 1e9)}, keys {_fmt(ours['key_bytes'], ' GB', 1e9)} "
          f"(uploaded {_fmt(ours['key_upload_bytes'], ' GB', 1e9)} in {_fmt(ours['keygen_s'], ' s', digits=1)}), compile {_fmt(ours['compile_s'], ' s', digits=1)}", file=out)


def _threads() -> int:
    from lycaon import ckks_threads  # noqa: PLC0415

    return ckks_threads()


def _bits(got: np.ndarray, want: np.ndarray) -> float:
    from lycaon.fhe import precision_bits  # noqa: PLC0415

    return precision_bits(got, want)


def _print_resnet20(r: dict, out) -> None:
    ours = r.get("lycaon") or {}
    if "error" in ours:
        print(f"\nresnet20: Lycaon's run failed: {ours['error']}", file=out)
    else:
        agree = sum(i["top1"] == i["plain_top1"] for i in ours["images"])
        kind = "composite ReLU" if r["model"] == "resnet20-relu" else "AESPA"
        correct = sum(i["top1"] == i["label"] for i in ours["images"])
        print(f"\n{r['model']} ({kind}, logN 16, bootstrapping; weights: {ours['weights']}): {len(ours['images'])} runs, "
              f"{correct} classified correctly", file=out)
        by_packing = ours.get("inference_s_by_packing") or {}
        if len(by_packing) > 1:  # the A/B of --resnet20-packing both
            for p, secs in by_packing.items():
                runs = [i for i in ours["images"] if i["packing"] == p]
                print(f"  packing {p}: {secs:.1f} s median over {len(runs)} image(s), {runs[0]['bootstraps']} bootstraps "
                      f"({sum(i['bootstrap_s'] for i in runs) / len(runs):.1f} s), convolutions {sum(i['conv_s'] for i in runs) / len(runs):.1f} s, "
                      f"quadratics {sum(i['quadratic_s'] for i in runs) / len(runs):.1f} s, {min(i['bits'] for i in runs):.1f} bits", file=out)
            first, second = list(by_packing.values())[:2]
            print(f"  time ratio {list(by_packing)[1]} / {list(by_packing)[0]}: {second / first:.3f}", file=out)
        print(f"  inference {_fmt(ours['inference_s'], ' s', digits=1)} on this machine's 2 cores ({ours['images'][0]['bootstraps']} bootstraps, "
              f"{_fmt(ours['images'][0]['bootstrap_s'], ' s', digits=1)} of them), peak RSS {_fmt(ours['peak_bytes'], ' GB', 1e9)} "
              f"({ours['peak_bytes'] / 2**30:.2f} GiB), keys {_fmt(ours['key_bytes'], ' GB', 1e9)} (network and bootstrapping, each key once at its highest level), "
              f"precision {min(i['bits'] for i in ours['images']):.1f} bits, top-1 = plaintext on {agree}/{len(ours['images'])}", file=out)
        if any("bits_vs_composite" in i for i in ours["images"]):
            print(f"  against the float twin with the same composite ReLU: {min(i['bits_vs_composite'] for i in ours['images']):.1f} bits "
                  f"(the rest is the composite's own approximation of ReLU)", file=out)
        check = ours.get("composite_float_check")
        if check:
            print(f"  float64, composite ReLU against exact ReLU on {check['images']} test images: top-1 equal on {check['top1_agreement']}, "
                  f"logits within {check['bits']:.1f} bits", file=out)
    print(f"  Orion: {r['peer_status']}", file=out)
    for p in r["published"]:
        print(f"  published: {p['system']}: {_fmt(p['latency_s'], ' s', digits=1)} ({p['hardware']})", file=out)
    planned = r.get("planned") or {}
    for k in planned.get("keysets", []):
        print(f"  planned keyset {k['strategy']:13s} {k['keys']:4d} keys  {k['memory_bytes'] / 1e9:6.2f} GB  rotations {k['rotation_s']:.0f} s (model)", file=out)
    for c in planned.get("comparison_004", []):
        print(f"  vs 004 Table 3: {c['quantity']}: paper {c['paper']:.2f}, planned {c['ours']:.2f}", file=out)


def _fmt(v, unit="", scale=1.0, digits=2):
    return "-" if v is None else f"{v / scale:.{digits}f}{unit}"


def _print(r: dict, out) -> None:
    print(f"\n{r['model']}: {r['images']} images, Lycaon logN {r['lycaon_params']['log_n']} ({r['lycaon_params']['levels']} levels, scale 2^{r['lycaon_params']['log_scale']})", file=out)
    print(f"  inference  Lycaon {_fmt(r['lycaon_s'], ' s', digits=3)}   Orion {_fmt(r['peer_s'], ' s', digits=3)}   time_ratio {_fmt(r['time_ratio'], digits=3)}", file=out)
    print(f"  peak RSS   Lycaon {_fmt(r['lycaon_peak_bytes'], ' GB', 1e9)}   Orion {_fmt(r['peer_peak_bytes'], ' GB', 1e9)}   memory_ratio {_fmt(r['memory_ratio'], digits=3)}", file=out)
    print(f"  keys       Lycaon {_fmt(r['lycaon_key_bytes'], ' MB', 1e6, 1)}   Orion {_fmt(r['peer_key_bytes'], ' MB', 1e6, 1)}", file=out)
    print(f"  compile    Lycaon {_fmt(r['lycaon_compile_s'], ' s')}   Orion {_fmt(r.get('peer_compile_s'), ' s')};  key generation Lycaon {_fmt(r['lycaon_keygen_s'], ' s')}   Orion {_fmt(r.get('peer_keygen_s'), ' s')}", file=out)
    print(f"  precision  Lycaon {r['lycaon_bits']:.1f} bits (top-1 = plaintext on {r['lycaon_top1_agreement']:.0%})   Orion {_fmt(r.get('peer_bits'), ' bits', digits=1)}", file=out)
    for name, k in r["keysets"].items():
        print(f"  keyset {name:13s} {k['keys']:4d} keys  {k['key_bytes'] / 1e6:8.1f} MB  upload {k['upload_bytes'] / 1e6:7.1f} MB  latency {_fmt(k.get('latency_s'), ' s', digits=3)}", file=out)
    if r.get("peer_status"):
        print(f"  Orion: {r['peer_status']}", file=out)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="worker of lycaon bench fhe (one network through Lycaon's FHE mode, JSON out)")
    ap.add_argument("--worker", required=True, help=f"{', '.join(sorted(LYCAON_BITS) + list(RESNET20_NETWORKS))} or any network compile_model takes")
    ap.add_argument("--images", type=int, default=1, help="resnet20: test images")
    ap.add_argument("--first", type=int, default=0, help="resnet20: skip this many images of the seeded sample")
    ap.add_argument("--log", help="resnet20: append each image's record to this file as a JSON line")
    ap.add_argument("--packing", choices=("mpconv", "hyphen", "both"), default="hyphen", help="resnet20: convolution packing (see resnet20_worker)")
    ap.add_argument("--weights")
    ap.add_argument("--inputs")
    ap.add_argument("--worker-out", required=True)
    ap.add_argument("--phase", choices=("run", "keysets"), default="run")
    ap.add_argument("--ops", type=int, help="resnet18-imagenet: only the first OPS ops, checked against the float twin")
    ap.add_argument("--device", default="cpu", help="where the server's CKKS work runs: cpu, or cuda:N (every tensor, key and plaintext on the GPU)")
    a = ap.parse_args(argv)
    global _DEVICE
    _DEVICE = a.device
    if a.worker in IMAGENET_NETWORKS:
        result = imagenet_worker(a.worker, a.images, a.ops, a.log)
    elif a.worker in RESNET20_NETWORKS:
        result = resnet20_worker(a.images, a.worker, a.first, a.log, a.packing)
    elif a.worker in LYCAON_BITS:
        result = lycaon_worker(a.worker, a.weights, a.inputs, a.phase)
    else:
        result = network_worker(a.worker, a.images, a.first, a.log)
    Path(a.worker_out).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
