"""Orion (PyPI ``orion-fhe``, CKKS on its Lattigo v6 fork) as the peer of Lycaon's encrypted
MNIST inference: the same MLP and LeNet-5, the same weights (one ``.npz`` shared by both sides),
the same images, one JSON report.

Optional and stand-alone: it imports only the standard library, numpy, torch and orion (torch and
orion only inside ``main``), never Lycaon's compiled extension, so it runs in its own virtual
environment, e.g.::

    python3 -m venv /tmp/orionenv && /tmp/orionenv/bin/pip install orion-fhe numpy
    PYTHONPATH=benchmarks /tmp/orionenv/bin/python -m lycaon_benchmarks.orion_peer \\
        --model lenet5 --weights W.npz --inputs X.npy --out R.json
    # or, without PYTHONPATH:  /tmp/orionenv/bin/python benchmarks/lycaon_benchmarks/orion_peer.py ...

Without ``--weights`` it draws seeded random weights (see ``draw_weights``) and writes them to
``--save-weights``; without ``--inputs`` it draws seeded uniform [0, 1) images (``--save-inputs``).
One process runs one model: fresh process, so peak RSS belongs to that model alone.

Networks (torch parameter names = the ``.npz`` keys ``<layer>.weight`` / ``<layer>.bias``):

- ``lenet5`` (1x28x28): conv1 = Conv2d(1,32,5,s2,p2) -> x^2 -> conv2 = Conv2d(32,64,5,s2,p2) ->
  x^2 -> flatten (C,H,W = 3136) -> fc1 = Linear(3136,512) -> x^2 -> fc2 = Linear(512,10).
  Orion's own ``orion.models.LeNet`` is this plus a BatchNorm (2d, 2d, 1d) after conv1, conv2 and
  fc1; Orion folds each into the layer before it when compiling (``fuse_modules``), so they add
  no FHE work and are left out here.
- ``mlp`` (Orion's ``orion.models.MLP``, the network of eprint 2017/396): flatten (784) ->
  fc1 = Linear(784,128) -> x^2 -> fc2 = Linear(128,128) -> x^2 -> fc3 = Linear(128,10); again
  without Orion's two BatchNorm1d(128) (after fc1 and fc2), which Orion folds into fc1 and fc2.

x^2 is ``orion.nn.Quad`` (one ciphertext multiplication + relinearisation + rescale).

CKKS parameters are Orion's own configs, embedded below (``ORION_CONFIGS``), ``--config`` takes a
YAML file of Orion's format instead:

- ``mlp``: ``configs/mlp.yml`` of the Orion repository (the one its ``examples/run_mlp.py`` uses):
  LogN 13, LogQ [29, 26x5], LogP [29, 29], LogScale 26, H 8192, ConjugateInvariant ring;
- ``lenet5``: the current repository has no LeNet config; this is its earlier
  ``configs/lenet.yaml`` ("Config for LeNet Large"): LogN 14, LogQ [45, 35x7], LogP [45, 45],
  LogScale 35, ConjugateInvariant ring (H absent there, so Orion's default 192), with the
  current format's ``orion:`` section of ``mlp.yml``.

Both have exactly the depth of their network (one level per linear layer and per square) and no
bootstrapping; the report says how many bootstraps Orion's placer put in (0 expected).

What is timed (wall clock, ``time.perf_counter``):

- ``init_scheme_s``: ``orion.init_scheme`` (parameters, key generator, encoder, evaluators);
  inside it ``keygen_basic_s`` (secret, public and relinearisation keys) and
  ``keygen_po2_rotations_s`` (Orion's evaluator makes every power-of-two rotation key up front);
- ``fit_s`` (``orion.fit``: cleartext range statistics) and ``compile_s`` (``orion.compile``:
  BatchNorm fusion, packing, diagonal encoding, bootstrap placement, and the rotation keys of the
  linear transforms, which Orion makes layer by layer while compiling: ``keygen_lt_rotations_s``,
  timed by wrapping ``lt_evaluator.generate_rotation_keys``); ``compile_excl_keygen_s`` is
  ``compile_s`` less that; ``keygen_s`` is the sum of the three key times;
  ``compile_generate_transforms_s`` (part of ``compile_s``) is the hand-over of the packed
  diagonals to Lattigo and their encoding, rotation keys included;
- per image: ``encode_s`` + ``encrypt_s`` (``orion.encode`` at the input level, ``orion.encrypt``),
  ``inference_s`` (``net(ctxt)`` in HE mode alone), ``decrypt_s`` + ``decode_s``.

Memory: ``ru_maxrss`` (KiB on Linux, x1024) and ``VmHWM`` / ``VmRSS`` of ``/proc/self/status``
after each phase. Key bytes: Orion exposes no size for its in-memory key set, but its Lattigo
binding can marshal a Galois key (``GenerateAndSerializeRotationKey``, the call of its
``io_mode: save``); one key is marshalled after the run (untimed) and its length multiplied by the
number of Galois keys held (the power-of-two set of the evaluator plus the linear-transform set of
the ``lintrans`` evaluator: two separate maps in Orion, so an element in both is held twice). The
relinearisation key has the same gadget shape as a Galois key and is counted at the same size.
``estimate`` gives the formula dnum x 2 x N x (|Q|+|P|) x 8 bytes per key beside it.

Precision: the reference is a float64 torch forward of the same weights; per image the report has
the max and mean absolute error of the decrypted logits, ``bits_rel`` = -log2(max abs err / max
|reference logit|), ``bits_abs`` = -log2(max abs err), Orion's own figure -log2(mean abs err),
and whether the arg-max agrees. Orion's ``Quad`` rescales x*x by the level's prime q_l but labels
the result with the scale of x (``set_scale``), so every square comes back multiplied by
Delta/q_l (1 - 2^-7.4 at one MLP level); ``logits_clear_quad_scale_model`` is the float64 forward
with those factors and ``vs_quad_scale_model`` the error left once they are accounted for (the
CKKS noise proper).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import platform
import re
import resource
import sys
import time
from typing import Any, Dict, List, Optional

import numpy as np

# ------------------------------------------------------------------ architectures and configs

#: (layer, kind, shape of weight) in forward order; "sq" marks x^2 after the layer.
ARCHS: Dict[str, List[Dict[str, Any]]] = {
    "lenet5": [
        {"name": "conv1", "kind": "conv", "weight": (32, 1, 5, 5), "stride": 2, "padding": 2, "square": True},
        {"name": "conv2", "kind": "conv", "weight": (64, 32, 5, 5), "stride": 2, "padding": 2, "square": True},
        {"name": "fc1", "kind": "linear", "weight": (512, 3136), "square": True},
        {"name": "fc2", "kind": "linear", "weight": (10, 512), "square": False},
    ],
    "mlp": [
        {"name": "fc1", "kind": "linear", "weight": (128, 784), "square": True},
        {"name": "fc2", "kind": "linear", "weight": (128, 128), "square": True},
        {"name": "fc3", "kind": "linear", "weight": (10, 128), "square": False},
    ],
}

ARCH_TEXT = {
    "lenet5": "conv1 Conv2d(1,32,5,stride=2,padding=2) -> x^2 -> conv2 Conv2d(32,64,5,stride=2,padding=2) -> x^2 -> "
              "flatten(C,H,W: 3136) -> fc1 Linear(3136,512) -> x^2 -> fc2 Linear(512,10)",
    "mlp": "flatten(784) -> fc1 Linear(784,128) -> x^2 -> fc2 Linear(128,128) -> x^2 -> fc3 Linear(128,10)",
}

ORION_OWN_DIFF = {
    "lenet5": "orion.models.LeNet has BatchNorm2d(32) after conv1, BatchNorm2d(64) after conv2 and BatchNorm1d(512) after fc1 "
              "(otherwise identical: same convs, Quad activations, 3136->512->10); Orion folds them into the preceding layer "
              "(fuse_modules), here they are absent (equivalently: folded into the shared weights).",
    "mlp": "orion.models.MLP has BatchNorm1d(128) after fc1 and after fc2 (otherwise identical); Orion folds them into fc1/fc2 "
           "(fuse_modules), here they are absent (equivalently: folded into the shared weights).",
}

_ORION_SECTION = {
    "margin": 2,
    "embedding_method": "hybrid",
    "backend": "lattigo",
    "fuse_modules": True,
    "debug": False,
    "diags_path": "",
    "keys_path": "",
    "io_mode": "none",
}

ORION_CONFIGS: Dict[str, Dict[str, Any]] = {
    "mlp": {
        "comment": "Orion configs/mlp.yml (MLP of eprint 2017/396)",
        "ckks_params": {"LogN": 13, "LogQ": [29, 26, 26, 26, 26, 26], "LogP": [29, 29], "LogScale": 26, "H": 8192,
                        "RingType": "ConjugateInvariant"},
        "orion": dict(_ORION_SECTION),
    },
    "lenet5": {
        "comment": "Orion configs/lenet.yaml (LeNet Large, earlier repository version; H: Orion default 192)",
        "ckks_params": {"LogN": 14, "LogQ": [45, 35, 35, 35, 35, 35, 35, 35], "LogP": [45, 45], "LogScale": 35,
                        "RingType": "ConjugateInvariant"},
        "orion": dict(_ORION_SECTION),
    },
}

# ------------------------------------------------------------------ weights, inputs, reference


def fan_in(shape) -> int:
    return int(np.prod(shape[1:]))


def draw_weights(model: str, seed: int, x: Optional[np.ndarray] = None) -> Dict[str, np.ndarray]:
    """Seeded random weights (float64) whose activations stay O(1) through the squares.

    W ~ N(0, 1/fan_in), b ~ U(-0.05, 0.05) (numpy default_rng(seed), layers in forward order,
    weight then bias). Then, layer by layer, W and b are scaled by one factor so that the
    pre-activation RMS over the images ``x`` (uniform [0,1) draws of the same seed without them) is
    1 for hidden layers (the square then stays O(1)) and 0.5 for the logits (inside Orion's MLP
    output range: |y| < 4 at level 0, q0 = 2^29, scale 2^26). Deterministic for given seed and x.
    """
    rng = np.random.default_rng(seed)
    layers = ARCHS[model]
    out: Dict[str, np.ndarray] = {}
    for layer in layers:
        shape = layer["weight"]
        out[f"{layer['name']}.weight"] = rng.standard_normal(shape) / math.sqrt(fan_in(shape))
        out[f"{layer['name']}.bias"] = rng.uniform(-0.05, 0.05, size=shape[0])
    if x is None:
        x = np.random.default_rng(seed).uniform(0.0, 1.0, size=(8, 1, 28, 28))
    h = np.asarray(x, dtype=np.float64)
    for i, layer in enumerate(layers):
        W, b = out[f"{layer['name']}.weight"], out[f"{layer['name']}.bias"]
        pre = _layer_np(layer, h, W, b)
        target = 0.5 if i == len(layers) - 1 else 1.0
        c = target / max(float(np.sqrt(np.mean(pre * pre))), 1e-12)
        out[f"{layer['name']}.weight"], out[f"{layer['name']}.bias"] = W * c, b * c
        h = pre * c
        if layer["square"]:
            h = h * h
    return out


def _layer_np(layer: Dict[str, Any], h: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One conv / linear layer in float64 numpy (zero padding, torch's cross-correlation)."""
    if layer["kind"] == "linear":
        return h.reshape(h.shape[0], -1) @ W.T + b
    s, p = layer["stride"], layer["padding"]
    co, ci, kh, kw = W.shape
    hp = np.pad(h, ((0, 0), (0, 0), (p, p), (p, p)))
    ho = (hp.shape[2] - kh) // s + 1
    wo = (hp.shape[3] - kw) // s + 1
    cols = np.empty((h.shape[0], ci, kh, kw, ho, wo))
    for u in range(kh):
        for v in range(kw):
            cols[:, :, u, v] = hp[:, :, u:u + s * ho:s, v:v + s * wo:s]
    return np.einsum("bcuvyx,ocuv->boyx", cols, W) + b[None, :, None, None]


def check_weights(model: str, w: Dict[str, np.ndarray]) -> None:
    for layer in ARCHS[model]:
        for key, shape in ((f"{layer['name']}.weight", layer["weight"]), (f"{layer['name']}.bias", (layer["weight"][0],))):
            if key not in w:
                raise KeyError(f"weights file lacks {key!r} (has {sorted(w)})")
            if tuple(w[key].shape) != tuple(shape):
                raise ValueError(f"{key}: shape {tuple(w[key].shape)}, expected {tuple(shape)}")


def reference_forward(model: str, w: Dict[str, np.ndarray], x: np.ndarray, torch,
                      square_factor: Optional[Dict[str, float]] = None) -> tuple:
    """float64 cleartext logits (B,10) and per-layer pre-activation statistics.

    ``square_factor[layer]`` multiplies the square after that layer (used to model Orion's Quad,
    which rescales x*x by the prime q_l but labels the result with the scale of x, so the value
    read back is x^2 * Delta / q_l)."""
    F = torch.nn.functional
    h = torch.from_numpy(np.asarray(x, dtype=np.float64))
    stats = []
    for layer in ARCHS[model]:
        W = torch.from_numpy(np.asarray(w[f"{layer['name']}.weight"], dtype=np.float64))
        b = torch.from_numpy(np.asarray(w[f"{layer['name']}.bias"], dtype=np.float64))
        if layer["kind"] == "conv":
            h = F.conv2d(h, W, b, stride=layer["stride"], padding=layer["padding"])
        else:
            h = F.linear(h.reshape(h.shape[0], -1), W, b)
        stats.append({"layer": layer["name"], "out_rms": float(h.pow(2).mean().sqrt()), "out_max_abs": float(h.abs().max())})
        if layer["square"]:
            h = h * h * (square_factor or {}).get(layer["name"], 1.0)
    return h.numpy(), stats


def build_orion_net(model: str, on, torch):
    """The network with Orion's layer classes (torch names as in ARCHS)."""

    class Net(on.Module):
        def __init__(self):
            super().__init__()
            self.flatten = on.Flatten()
            for layer in ARCHS[model]:
                shape = layer["weight"]
                if layer["kind"] == "conv":
                    mod = on.Conv2d(shape[1], shape[0], kernel_size=shape[2], stride=layer["stride"], padding=layer["padding"])
                else:
                    mod = on.Linear(shape[1], shape[0])
                setattr(self, layer["name"], mod)
                if layer["square"]:
                    setattr(self, "act_" + layer["name"], on.Quad())

        def forward(self, x):
            for layer in ARCHS[model]:
                if layer["kind"] == "linear" and layer is next(l for l in ARCHS[model] if l["kind"] == "linear"):
                    x = self.flatten(x)
                x = getattr(self, layer["name"])(x)
                if layer["square"]:
                    x = getattr(self, "act_" + layer["name"])(x)
            return x

    net = Net()
    return net


def load_into(net, w: Dict[str, np.ndarray], torch) -> None:
    params = dict(net.named_parameters())
    for key, value in w.items():
        if key not in params:
            raise KeyError(f"{key} is not a parameter of the Orion network ({sorted(params)})")
        if tuple(params[key].shape) != tuple(value.shape):
            raise ValueError(f"{key}: {tuple(value.shape)} vs {tuple(params[key].shape)}")
        with torch.no_grad():
            params[key].copy_(torch.from_numpy(np.asarray(value, dtype=np.float32)))


# ------------------------------------------------------------------ measurement helpers


def proc_status() -> Dict[str, int]:
    out = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("VmHWM", "VmRSS"):
                    out[key + "_bytes"] = int(rest.split()[0]) * 1024
    except OSError:
        pass
    out["ru_maxrss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return out


class Tee(io.TextIOBase):
    """Orion prints progress on stdout: keep it (on stderr) and a copy to parse."""

    def __init__(self, stream):
        self.stream, self.buf = stream, io.StringIO()

    def write(self, s):
        self.buf.write(s)
        if self.stream is not None:
            self.stream.write(s)
        return len(s)

    def flush(self):
        if self.stream is not None:
            self.stream.flush()


def timed_wrap(owner, attr: str, acc: Dict[str, float], key: str) -> None:
    fn = getattr(owner, attr)

    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            acc[key] = acc.get(key, 0.0) + time.perf_counter() - t0

    setattr(owner, attr, wrapper)


def galois_element(k: int, nth_root: int) -> int:
    """Lattigo's Parameters.GaloisElement(k) = 5^(k mod nthRoot) mod nthRoot."""
    return pow(5, k & (nth_root - 1), nth_root)


def precision(ref: np.ndarray, got: np.ndarray) -> Dict[str, float]:
    err = np.abs(np.asarray(ref, dtype=np.float64) - np.asarray(got, dtype=np.float64))
    max_err, mean_err = float(err.max()), float(err.mean())
    scale = float(np.abs(ref).max())
    tiny = 2.0 ** -60
    return {
        "max_abs_err": max_err,
        "mean_abs_err": mean_err,
        "max_abs_logit": scale,
        "bits_rel": float(-math.log2(max(max_err, tiny) / max(scale, tiny))),
        "bits_abs": float(-math.log2(max(max_err, tiny))),
        "bits_orion_mae": float(-math.log2(max(mean_err, tiny))),
    }


# ------------------------------------------------------------------ main


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, choices=sorted(ARCHS))
    p.add_argument("--weights", help="npz with <layer>.weight / <layer>.bias (torch shapes); absent: seeded random")
    p.add_argument("--save-weights", help="write the weights used (float64 npz) here")
    p.add_argument("--inputs", help="npy (B,1,28,28) or (B,28,28) float in [0,1] (uint8 is divided by 255); absent: seeded uniform")
    p.add_argument("--save-inputs", help="write the inputs used (float64 npy, (B,1,28,28)) here")
    p.add_argument("--num-images", type=int, default=None, help="use the first N images (default: all; 1 when drawn)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--config", help="Orion YAML config instead of the embedded one for --model")
    p.add_argument("--threads", type=int, default=None,
                   help="GOMAXPROCS for Lattigo's Go runtime and torch.set_num_threads (default: leave both alone)")
    p.add_argument("--out", required=True, help="JSON report path")
    p.add_argument("--quiet", action="store_true", help="drop Orion's progress output (normally sent to stderr)")
    return p.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.threads is not None:
        # Read by the Go runtime when the Lattigo shared library is loaded, i.e. before importing orion.
        os.environ["GOMAXPROCS"] = str(args.threads)
    mem = {"start": proc_status()}
    import torch

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    torch.set_default_dtype(torch.float32)

    # ---- inputs
    if args.inputs:
        x = np.load(args.inputs)
        if x.dtype == np.uint8:
            x = x.astype(np.float64) / 255.0
        x = np.asarray(x, dtype=np.float64)
        if x.ndim == 3:
            x = x[:, None]
        inputs_src = os.path.abspath(args.inputs)
    else:
        n = args.num_images or 1
        x = np.random.default_rng(args.seed + 1).uniform(0.0, 1.0, size=(n, 1, 28, 28))
        inputs_src = f"uniform[0,1) seed {args.seed + 1}"
    if args.num_images:
        x = x[: args.num_images]
    if x.shape[1:] != (1, 28, 28):
        raise ValueError(f"inputs must be (B,1,28,28), got {x.shape}")
    if args.save_inputs:
        np.save(args.save_inputs, x)

    # ---- weights
    if args.weights:
        with np.load(args.weights) as z:
            w = {k: np.asarray(z[k], dtype=np.float64) for k in z.files}
        weights_src = os.path.abspath(args.weights)
    else:
        w = draw_weights(args.model, args.seed, x)
        weights_src = f"draw_weights(seed={args.seed})"
    check_weights(args.model, w)
    w = {k: v for k, v in w.items() if any(k.startswith(l["name"] + ".") for l in ARCHS[args.model])}
    if args.save_weights:
        np.savez(args.save_weights, **w)

    ref_logits, ref_stats = reference_forward(args.model, w, x, torch)

    # ---- config
    if args.config:
        import yaml

        with open(args.config) as f:
            config = yaml.safe_load(f)
        config_src = os.path.abspath(args.config)
    else:
        config = json.loads(json.dumps(ORION_CONFIGS[args.model]))
        config_src = "embedded: " + config["comment"]
    ck = {k.lower(): v for k, v in config["ckks_params"].items()}

    log = Tee(None if args.quiet else sys.stderr)
    t_import = time.perf_counter()
    with contextlib.redirect_stdout(log):
        import orion
        import orion.nn as on
        from orion.backend.python import evaluator as o_evaluator
        from orion.backend.python import key_generator as o_keygen
    import_s = time.perf_counter() - t_import
    mem["after_import"] = proc_status()

    acc: Dict[str, float] = {}
    timed_wrap(o_keygen.NewKeyGenerator, "new_key_generator", acc, "keygen_basic_s")
    timed_wrap(o_evaluator.NewEvaluator, "new_evaluator", acc, "keygen_po2_rotations_s")

    with contextlib.redirect_stdout(log):
        t0 = time.perf_counter()
        scheme = orion.init_scheme(config)
        init_s = time.perf_counter() - t0
    mem["after_init_scheme"] = proc_status()
    timed_wrap(scheme.lt_evaluator, "generate_rotation_keys", acc, "keygen_lt_rotations_s")
    timed_wrap(scheme.lt_evaluator, "generate_transforms", acc, "compile_generate_transforms_s")

    net = build_orion_net(args.model, on, torch)
    load_into(net, w, torch)
    net.eval()
    with torch.no_grad():
        orion_clear32 = net(torch.from_numpy(x.astype(np.float32))).double().numpy()

    from torch.utils.data import DataLoader, TensorDataset

    # Fit on all images, compiled for batch 1 (Orion keeps the DataLoader's batch size).
    loader = DataLoader(TensorDataset(torch.from_numpy(x.astype(np.float32)), torch.zeros(len(x))), batch_size=1, shuffle=False)
    with contextlib.redirect_stdout(log):
        t0 = time.perf_counter()
        orion.fit(net, loader)
        fit_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        input_level = orion.compile(net)
        compile_s = time.perf_counter() - t0
    mem["after_compile"] = proc_status()
    moduli_q = [int(q) for q in scheme.encoder.get_moduli_chain()]
    delta = float(2 ** int(ck.get("logscale") or ck["logq"][-1]))
    quad_factor = {}
    for layer in ARCHS[args.model]:
        if layer["square"]:
            lvl = getattr(net, "act_" + layer["name"]).level
            quad_factor[layer["name"]] = {"level": int(lvl), "q_level": moduli_q[lvl], "factor": delta / moduli_q[lvl]}
    model_logits, _ = reference_forward(args.model, w, x, torch, {k: v["factor"] for k, v in quad_factor.items()})
    m = re.search(r"Network requires (\d+) bootstrap", log.buf.getvalue())
    num_bootstraps = int(m.group(1)) if m else None

    records = []
    for i in range(len(x)):
        xi = torch.from_numpy(x[i : i + 1].astype(np.float32))
        with contextlib.redirect_stdout(log):
            net.eval()
            t0 = time.perf_counter()
            ptxt = orion.encode(xi, input_level)
            t1 = time.perf_counter()
            ctxt = orion.encrypt(ptxt)
            t2 = time.perf_counter()
            net.he()
            t3 = time.perf_counter()
            out_ctxt = net(ctxt)
            t4 = time.perf_counter()
            out_ptxt = out_ctxt.decrypt()
            t5 = time.perf_counter()
            out = out_ptxt.decode()
            t6 = time.perf_counter()
            net.eval()
        fhe = np.asarray(out.detach().double().numpy()).reshape(-1)[:10]
        ref = ref_logits[i]
        rec = {
            "image": i,
            "encode_s": t1 - t0,
            "encrypt_s": t2 - t1,
            "inference_s": t4 - t3,
            "decrypt_s": t5 - t4,
            "decode_s": t6 - t5,
            "output_level": out_ctxt.level(),
            "logits_clear_f64": ref.tolist(),
            "logits_orion_clear_f32": orion_clear32[i].tolist(),
            "logits_fhe": fhe.tolist(),
            "top1_clear": int(np.argmax(ref)),
            "top1_fhe": int(np.argmax(fhe)),
            "top1_agree": bool(np.argmax(ref) == np.argmax(fhe)),
            **precision(ref, fhe),
            "f32_clear_max_abs_err": float(np.abs(orion_clear32[i] - ref).max()),
            "logits_clear_quad_scale_model": model_logits[i].tolist(),
            "vs_quad_scale_model": precision(model_logits[i], fhe),
        }
        records.append(rec)
        mem[f"after_image_{i}"] = proc_status()

    # ---- keys: count and marshalled size (untimed, after the run)
    backend = scheme.backend
    logn = int(ck["logn"])
    n_ring = 1 << logn
    ring = str(ck.get("ringtype", "standard")).lower()
    nth_root = (4 if ring == "conjugateinvariant" else 2) * n_ring
    slots = scheme.params.get_slots()
    po2_steps = []
    k = 1
    while k < slots:
        po2_steps.append(k)
        k *= 2
    po2_gal = {galois_element(s, nth_root) for s in po2_steps}
    lt_gal = set(int(g) for g in scheme.lt_evaluator.saved_rotation_keys)
    key_bytes_one = None
    sample_gal = next(iter(sorted(lt_gal or po2_gal)))
    arr, ptr = backend.GenerateAndSerializeRotationKey(int(sample_gal))
    key_bytes_one = int(len(arr))
    backend.FreeCArray(ptr)
    n_q, n_p = len(ck["logq"]), len(ck["logp"])
    dnum = math.ceil(n_q / n_p)
    est_one = dnum * 2 * n_ring * (n_q + n_p) * 8
    held = len(po2_gal) + len(lt_gal)
    keys = {
        "method": "Lattigo MarshalBinary of one Galois key (orion backend GenerateAndSerializeRotationKey) x keys held; "
                  "relinearisation key counted at the same size (same gadget shape)",
        "galois_key_bytes_marshalled": key_bytes_one,
        "galois_key_bytes_estimate": est_one,
        "estimate_formula": f"dnum({dnum}) x 2 x N({n_ring}) x (|Q|({n_q}) + |P|({n_p})) x 8",
        "num_galois_keys_po2_evaluator": len(po2_gal),
        "num_galois_keys_linear_transforms": len(lt_gal),
        "num_galois_keys_held": held,
        "num_galois_keys_distinct": len(po2_gal | lt_gal),
        "rotation_key_bytes": held * key_bytes_one,
        "relin_key_bytes": key_bytes_one,
        "evaluation_key_bytes": (held + 1) * key_bytes_one,
        "evaluation_key_bytes_distinct": (len(po2_gal | lt_gal) + 1) * key_bytes_one,
        "evaluation_key_bytes_estimate": (held + 1) * est_one,
    }

    keygen_s = sum(acc.get(k, 0.0) for k in ("keygen_basic_s", "keygen_po2_rotations_s", "keygen_lt_rotations_s"))
    timings = {
        "import_orion_s": import_s,
        "init_scheme_s": init_s,
        "fit_s": fit_s,
        "compile_s": compile_s,
        "fit_plus_compile_s": fit_s + compile_s,
        "keygen_basic_s": acc.get("keygen_basic_s", 0.0),
        "keygen_po2_rotations_s": acc.get("keygen_po2_rotations_s", 0.0),
        "keygen_lt_rotations_s": acc.get("keygen_lt_rotations_s", 0.0),
        "keygen_s": keygen_s,
        "compile_excl_keygen_s": compile_s - acc.get("keygen_lt_rotations_s", 0.0),
        # inside compile_s: Lattigo transforms (diagonals handed over as C floats and encoded) incl. their rotation keys
        "compile_generate_transforms_s": acc.get("compile_generate_transforms_s", 0.0),
    }
    final = proc_status()
    mem["end"] = final

    def summ(key):
        vals = [r[key] for r in records]
        return {"mean": float(np.mean(vals)), "median": float(np.median(vals)), "min": float(np.min(vals)), "max": float(np.max(vals))}

    try:
        from importlib.metadata import version as _v

        orion_version = _v("orion-fhe")
    except Exception:  # pragma: no cover
        orion_version = getattr(orion, "__version__", "?")

    report = {
        "peer": "orion",
        "orion_version": orion_version,
        "torch_version": torch.__version__,
        "python": platform.python_version(),
        "host": {"cpus": os.cpu_count(), "GOMAXPROCS": os.environ.get("GOMAXPROCS"), "torch_threads": torch.get_num_threads()},
        "model": args.model,
        "architecture": ARCH_TEXT[args.model],
        "orion_own_model_difference": ORION_OWN_DIFF[args.model],
        "weights": weights_src,
        "weights_saved_to": os.path.abspath(args.save_weights) if args.save_weights else None,
        "inputs": inputs_src,
        "num_images": int(len(x)),
        "reference_layer_stats": ref_stats,
        "config_source": config_src,
        "config": config,
        "ckks": {
            "logN": logn,
            "N": n_ring,
            "ring_type": ring,
            "slots": slots,
            "logQ": list(ck["logq"]),
            "logP": list(ck["logp"]),
            "logScale": int(ck.get("logscale") or ck["logq"][-1]),
            "levels": len(ck["logq"]) - 1,
            "logQP_bits": int(sum(ck["logq"]) + sum(ck["logp"])),
            "h": int(ck.get("h", 192)),
            "secret": f"ternary, Hamming weight {int(ck.get('h', 192))}",
            "dnum": dnum,
            "Q_primes": moduli_q,
            "Q_primes_bits": [round(math.log2(q), 3) for q in moduli_q],
            "bootstrapping_configured": "boot_params" in config,
            "bootstraps_placed": num_bootstraps,
            "input_level": int(input_level),
            "output_level": records[0]["output_level"] if records else None,
            "quad_scale_factors": quad_factor,
        },
        "timings": timings,
        "memory": {
            "peak_rss_bytes": final["ru_maxrss_bytes"],
            "vmhwm_bytes": final.get("VmHWM_bytes"),
            "phases": mem,
        },
        "keys": keys,
        "records": records,
        "summary": {
            "compile_s": fit_s + compile_s,
            "keygen_s": keygen_s,
            "encrypt_s": summ("encrypt_s"),
            "encode_plus_encrypt_s": {"mean": float(np.mean([r["encode_s"] + r["encrypt_s"] for r in records]))},
            "inference_s": summ("inference_s"),
            "decrypt_plus_decode_s": {"mean": float(np.mean([r["decrypt_s"] + r["decode_s"] for r in records]))},
            "max_abs_err": float(max(r["max_abs_err"] for r in records)),
            "bits_rel_min": float(min(r["bits_rel"] for r in records)),
            "bits_abs_min": float(min(r["bits_abs"] for r in records)),
            "top1_agreement": float(np.mean([r["top1_agree"] for r in records])),
            "peak_rss_bytes": final["ru_maxrss_bytes"],
            "vmhwm_bytes": final.get("VmHWM_bytes"),
            "evaluation_key_bytes": keys["evaluation_key_bytes"],
        },
    }
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)
    s = report["summary"]
    print(f"orion {args.model}: compile {s['compile_s']:.2f} s (keygen {keygen_s:.2f} s), inference {s['inference_s']['mean']:.3f} s, "
          f"peak RSS {s['peak_rss_bytes'] / 2**30:.2f} GiB, keys {s['evaluation_key_bytes'] / 2**20:.1f} MiB, "
          f"max err {s['max_abs_err']:.3g} ({s['bits_rel_min']:.1f} bits rel), top-1 {s['top1_agreement']:.2f} -> {args.out}")
    return report


if __name__ == "__main__":
    main()
