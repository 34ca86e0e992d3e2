"""Hybrid private inference: a quantised model compiled into a program of homomorphic linear
layers and two-party non-linear layers, the server that holds its weights and the client that
holds the image.

The program (its JSON form is the contract with the Rust runtime, ``lycaon-runtime``) lists ops in
topological order over named tensors: ``linear`` (a convolution or fully connected layer under
BFV, its output the exact integer accumulator W x + b), ``truncate`` (floor division by 2^s on
shares), ``relu``, ``clip`` (min(max(x, 0), M): ReLU6), ``maxpool``, ``sumpool`` and ``global_sumpool`` (window sums times an integer
multiplier), ``flatten``, ``add`` and ``concat``. Values are signed integers at the activation
scale 2^f of the quantised model; ``reference_run`` executes a program on plain integers and
equals ``frontend.quantize.run_integer`` exactly, which the two-party runtime matches up to one
unit per truncation. The weights never leave the server: ``compile_program`` returns them
beside the program, and only the program (with the server's metadata) is public.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from lycaon import _native

__all__ = [
    "Client",
    "InferenceResult",
    "LABELS",
    "REVEALS",
    "Server",
    "compile_program",
    "prepare",
    "reference_run",
    "run_local",
]

#: Program format version (the ``version`` key).
PROGRAM_VERSION = 2
#: What the client may learn: the logits, or only the label the server's argmax picks.
REVEALS = ("logits", "label")
#: Port ``Server.serve`` listens on when none is given.
DEFAULT_PORT = 7451
#: Class names per data set, sent to clients in the server's metadata.
LABELS = {
    "mnist": [str(d) for d in range(10)],
    "cifar10": ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"],
}
#: How each data set stores one raw uint8 image.
RAW_SHAPES = {"mnist": (28, 28), "cifar10": (32, 32, 3)}

PlanLike = Union[dict, str, os.PathLike, None]


def _model_error(message: str) -> Exception:
    from lycaon.frontend.ir import ModelError  # noqa: PLC0415

    return ModelError(message)


def _pool_scale(node, q) -> tuple[int, int]:
    """An average pool's (multiplier, shift) with the common powers of two cancelled:
    floor(x m 2^z / 2^s) = floor(x m / 2^(s - z)) exactly, and the window sums times m must fit
    the share ring before the truncation (a 2x2 pool's 2^14 / 2^16 becomes 1 / 2^2)."""
    mult, shift = (int(v) for v in q.pools[node.name])
    if mult <= 0:
        raise _model_error(f"{node.describe()}: pooling multiplier {mult} (a window larger than 2^{shift})")
    while shift and mult % 2 == 0:
        mult, shift = mult // 2, shift - 1
    return mult, shift


def _check_pool_rings(ops: list[dict], q, windows: dict[str, int]) -> None:
    """Raises ``ModelError`` when a pool's window sums times its multiplier may leave the share
    ring of its input (the plaintext modulus of the linear layer that produced it), judged from
    the calibrated accumulator bits carried through truncations, ReLUs and additions."""
    bits: dict[str, Optional[float]] = {}
    ring: dict[str, Optional[int]] = {}
    for op in ops:
        ins = op["inputs"]
        b = [bits.get(i) for i in ins]
        r = [ring.get(i) for i in ins]
        out_bits: Optional[float] = None if any(v is None for v in b) else max(b)
        out_ring: Optional[int] = None if any(v is None for v in r) else min(r)
        if op["op"] == "linear":
            out_bits, out_ring = q.accumulator_bits.get(op["name"]), int(op["params"]["t_bits"])
        elif op["op"] == "truncate" and out_bits is not None:
            out_bits -= op["shift"]
        elif op["op"] == "add" and out_bits is not None:
            out_bits += 1
        elif op["op"] in ("sumpool", "global_sumpool") and out_bits is not None:
            out_bits += float(np.log2(windows[op["name"]] * op["multiplier"]))
            if out_ring is not None and out_bits >= out_ring - 2:
                raise _model_error(f"pool '{op['name']}': window sums times {op['multiplier']} reach 2^{out_bits:.1f}, beyond the {out_ring}-bit share ring "
                                   "of its input; a pooling window that is a power of two avoids the multiplier")
        bits[op["output"]], ring[op["output"]] = out_bits, out_ring


def compile_program(q, plan: dict, reveal: str = "logits") -> tuple[dict, dict]:
    """The hybrid program of a quantised model ``q`` (``frontend.quantize.QuantizedModel``) under
    a hybrid plan (``lycaon.plan.plan``'s dict: one entry per conv/linear layer with "name",
    "algorithm", "params" and "shape"), and the server's integer weights.

    Every conv/linear node becomes a ``linear`` op (accumulator including the bias) and, unless
    its shift is 0, a ``truncate`` by its weight scale; average pools become a ``sumpool`` (or
    ``global_sumpool``) by the quantised multiplier and a ``truncate`` by its shift, with the
    powers of two they share cancelled (``_pool_scale``; the result is the same). Returns
    ``(program, weights)``: weights maps each linear op's name to {"weight": int64 flat
    [out][in/groups][kh][kw] (FC: [out][in]), "bias": int64 [out]} ("bias" absent when the layer
    has none). Raises ``ModelError`` when the model holds an op the runtime does not run
    (batch-norm not folded, polynomial activations), a layer the plan does not cover or sizes
    differently (another model's plan, grouped convolutions the plan has no groups for), a layer
    whose accumulators the plan's plaintext modulus cannot hold, a pool whose window sums would
    leave their share ring, or an output that is not 1-D."""
    if reveal not in REVEALS:
        raise _model_error(f"reveal must be one of {', '.join(REVEALS)}, not {reveal!r}")
    if not isinstance(plan, dict) or not isinstance(plan.get("layers"), list):
        raise _model_error("the plan must be a hybrid plan dict with a 'layers' list (lycaon.plan.plan or lycaon plan --json)")
    from lycaon.plan import layer_shape  # noqa: PLC0415

    graph = q.graph
    shapes = graph.shapes()
    planned = {}
    for layer in plan["layers"]:
        missing = {"name", "algorithm", "params", "shape"} - set(layer)
        if missing:
            raise _model_error(f"plan layer {layer.get('name', '?')!r} lacks {', '.join(sorted(missing))}")
        planned[layer["name"]] = layer
    linear_nodes = [n.name for n in graph.nodes if n.op in ("conv", "linear")]
    extra = sorted(set(planned) - set(linear_nodes))
    if extra:
        raise _model_error(f"the plan has layers this model does not ({', '.join(extra)}): a plan of another model?")
    out_shape = shapes[graph.output]
    if len(out_shape) != 1:
        raise _model_error(f"the model's output '{graph.output}' has shape {out_shape}; the hybrid runtime returns a 1-D vector of logits")

    ops: list[dict] = []
    weights: dict[str, dict[str, np.ndarray]] = {}
    windows: dict[str, int] = {}  # pooling window per pool op
    tensors = set(shapes)

    def fresh(name: str) -> str:
        if name in tensors:
            raise _model_error(f"tensor name '{name}' is taken; rename the model's nodes")
        tensors.add(name)
        return name

    def emit(op: str, name: str, inputs: list, output: str, **fields) -> None:
        ops.append({"op": op, "name": name, "inputs": list(inputs), "output": output, **fields})

    for node in graph.nodes:
        ins = [shapes[i] for i in node.inputs]
        a = node.attrs
        if node.op in ("conv", "linear"):
            shape = layer_shape(node, ins[0])
            layer = planned.get(node.name)
            if layer is None:
                raise _model_error(f"{node.describe()}: not in the plan (plan this model: lycaon plan MODEL --json FILE)")
            got = layer["shape"]
            if "groups" not in got and shape["groups"] != 1:
                raise _model_error(f"{node.describe()}: a grouped convolution ({shape['groups']} groups) but the plan has no groups for it")
            diff = [k for k in shape if got.get(k, 1 if k == "groups" else None) != shape[k]]
            if diff:
                raise _model_error(f"{node.describe()}: the plan sizes it {got}, the model {shape} (differs in {', '.join(diff)}): a plan of another model?")
            if node.name not in q.layers:
                raise _model_error(f"{node.describe()}: not quantised")
            wq, bq, shift = q.layers[node.name]
            t_bits = int(layer["params"]["t_bits"])
            acc_bits = q.accumulator_bits.get(node.name)
            # t >= 2^(t_bits - 1), so |acc| <= 2^(t_bits - 3) is within a quarter of the ring: the
            # range exact truncation, bounded ReLU and max-pooling need.
            if acc_bits is not None and acc_bits > t_bits - 3:
                raise _model_error(f"{node.describe()}: accumulators reach 2^{acc_bits:.1f} but the plan's plaintext modulus has {t_bits} bits "
                                   f"(needs at least {int(np.ceil(acc_bits)) + 3}); plan again with this quantisation")
            acc = node.output if shift == 0 else fresh(f"{node.name}:acc")
            emit("linear", node.name, node.inputs[:1], acc, algorithm=layer["algorithm"], params=layer["params"], shape=shape, has_bias=bq is not None)
            if shift:
                emit("truncate", f"{node.name}.truncate", [acc], node.output, shift=int(shift))
            w = {"weight": np.ascontiguousarray(np.asarray(wq, dtype=np.int64).reshape(-1))}
            if bq is not None:
                w["bias"] = np.ascontiguousarray(np.asarray(bq, dtype=np.int64).reshape(-1))
            weights[node.name] = w
        elif node.op == "relu":
            emit("relu", node.name, node.inputs, node.output)
        elif node.op == "clip":  # ReLU6 and kin: min(max(x, 0), M) at the activation scale
            emit("clip", node.name, node.inputs, node.output, max=int(q.clip_limit(node)))
        elif node.op in ("maxpool", "avgpool"):
            k = [int(v) for v in a["kernel"]]
            s = [int(v) for v in a.get("stride", a["kernel"])]
            p = [int(v) for v in a.get("pads", (0, 0, 0, 0))]
            if node.op == "maxpool":
                emit("maxpool", node.name, node.inputs, node.output, kernel=k, stride=s, pads=p)
            else:
                mult, shift = _pool_scale(node, q)
                sums = fresh(f"{node.name}:sum") if shift else node.output
                emit("sumpool", node.name, node.inputs, sums, kernel=k, stride=s, pads=p, multiplier=mult)
                windows[node.name] = k[0] * k[1]
                if shift:
                    emit("truncate", f"{node.name}.truncate", [sums], node.output, shift=shift)
        elif node.op == "global_avgpool":
            mult, shift = _pool_scale(node, q)
            sums = fresh(f"{node.name}:sum") if shift else node.output
            emit("global_sumpool", node.name, node.inputs, sums, multiplier=mult)
            windows[node.name] = int(np.prod(ins[0][1:]))
            if shift:
                emit("truncate", f"{node.name}.truncate", [sums], node.output, shift=shift)
        elif node.op in ("flatten", "add", "concat"):
            emit(node.op, node.name, node.inputs, node.output)
        elif node.op == "batchnorm":
            raise _model_error(f"{node.describe()}: fold batch-norm into the layer before it first (frontend.simplify)")
        elif node.op == "poly":
            from lycaon.frontend.quantize import polynomial_refusal  # noqa: PLC0415

            raise polynomial_refusal(node)
        else:
            raise _model_error(f"{node.describe()}: the hybrid runtime has no '{node.op}' op")
    _check_pool_rings(ops, q, windows)
    names = [op["name"] for op in ops]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise _model_error(f"op names must be unique; {', '.join(dup)} repeat (rename the model's nodes)")
    program = {
        "version": PROGRAM_VERSION,
        "name": str(plan.get("model", graph.name)),
        "input": graph.input_name,
        "input_shape": [int(d) for d in graph.input_shape],
        "fraction_bits": int(q.fraction_bits),
        "output": graph.output,
        "reveal": reveal,
        "exact_truncation": True,
        "ops": ops,
    }
    return program, weights


def _as_batch(program: dict, x_int) -> tuple[np.ndarray, bool]:
    """(N, *input_shape) int64 and whether one image came in."""
    shape = tuple(program["input_shape"])
    size = int(np.prod(shape))
    x = np.asarray(x_int)
    if x.dtype.kind not in "iu":
        raise TypeError(f"the program runs on integers at scale 2^{program['fraction_bits']}, not {x.dtype} (encode with round(x * 2^f))")
    if x.shape == shape or (x.ndim == 1 and x.size == size):
        return x.reshape((1, *shape)).astype(np.int64), True
    if x.shape[1:] == shape or (x.ndim == 2 and x.shape[1] == size):
        return x.reshape((len(x), *shape)).astype(np.int64), False
    raise ValueError(f"input of shape {x.shape} fits neither one image {shape} nor a batch (N, {', '.join(map(str, shape))})")


def reference_run(program: dict, weights: dict, x_int, tensors: Optional[dict] = None) -> np.ndarray:
    """Executes a program on plain signed integers (int64) with exact floor truncation: one
    image (``input_shape`` or flat) gives the 1-D output, a batch (N, ...) gives (N, F). Equals
    ``run_integer`` of the model the program was compiled from. ``tensors``, when given, receives
    every tensor by name (batch first), e.g. to see how close values come to their rings."""
    from lycaon.frontend.executor import _pad, _windows  # noqa: PLC0415
    from lycaon.frontend.quantize import _conv_int, _int_matmul  # noqa: PLC0415

    x, single = _as_batch(program, x_int)
    values = {program["input"]: x}
    for op in program["ops"]:
        kind, name = op["op"], op["name"]
        try:
            ins = [values[i] for i in op["inputs"]]
        except KeyError as exc:
            raise ValueError(f"op '{name}' reads tensor {exc} before any op writes it") from None
        v = ins[0]
        if kind == "linear":
            sh, w = op["shape"], weights[name]
            c_in, c_out, k, groups = sh["c_in"], sh["c_out"], sh["k"], sh.get("groups", 1)
            bias = w.get("bias")
            if v.ndim == 2:  # fully connected: (N, F)
                if v.shape[1] != c_in:
                    raise ValueError(f"linear op '{name}' takes {c_in} inputs, got {v.shape[1]}")
                y = _int_matmul(v, np.asarray(w["weight"], dtype=np.int64).reshape(c_out, c_in).T)
                if bias is not None:
                    y = y + np.asarray(bias, dtype=np.int64)
            else:
                if v.shape[1:] != (c_in, sh["h"], sh["w"]):
                    raise ValueError(f"linear op '{name}' takes ({c_in}, {sh['h']}, {sh['w']}), got {v.shape[1:]}")
                wq = np.asarray(w["weight"], dtype=np.int64).reshape(c_out, c_in // groups, k, k)
                pad = sh["pad"] if sh.get("pad") is not None else k // 2
                y = _conv_int(v, wq, (sh["stride"], sh["stride"]), (pad,) * 4, groups)
                if bias is not None:
                    y = y + np.asarray(bias, dtype=np.int64).reshape(1, -1, 1, 1)
        elif kind == "truncate":
            y = v >> int(op["shift"])  # arithmetic shift: floor division by 2^s
        elif kind == "relu":
            y = np.maximum(v, 0)
        elif kind == "clip":
            y = np.clip(v, 0, int(op["max"]))
        elif kind == "maxpool":
            k, s = op["kernel"], op["stride"]
            y = _windows(_pad(v, op["pads"], np.iinfo(np.int64).min // 2), k[0], k[1], s[0], s[1]).max(axis=(4, 5))
        elif kind == "sumpool":
            k, s = op["kernel"], op["stride"]
            y = _windows(_pad(v, op["pads"]), k[0], k[1], s[0], s[1]).sum(axis=(4, 5)) * int(op["multiplier"])
        elif kind == "global_sumpool":
            y = v.sum(axis=(2, 3), keepdims=True) * int(op["multiplier"])
        elif kind == "flatten":
            y = v.reshape(len(v), -1)
        elif kind == "add":
            y = ins[0] + ins[1]
        elif kind == "concat":
            y = np.concatenate(ins, axis=1)
        else:
            raise ValueError(f"op '{name}': unknown op '{kind}'")
        values[op["output"]] = y
    if tensors is not None:
        tensors.update(values)
    out = values[program["output"]]
    return out[0] if single else out


# ----------------------------------------------------------------------------- preparation


def _load_plan(plan: PlanLike) -> Optional[dict]:
    if plan is None or isinstance(plan, dict):
        return plan
    path = Path(plan)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise _model_error(f"{path}: not a plan JSON ({exc})") from None


def _calibration_help(graph, name: str) -> str:
    shape = ", ".join(map(str, graph.input_shape))
    return (f"{name}: no calibration data: give --calibration DATA (Python: calibration=...), a .npy/.npz of model-ready float tensors "
            f"(N, {shape}) or a folder of images with a preprocessing spec (--preprocess JSON, or --resize/--crop/--mean/--std); "
            "the quantiser takes its scales from it (built-in MNIST and CIFAR-10 models find their training sets by themselves)")


def calibration_for(graph, name: str, calibration=None, preprocess=None, calibration_images: int = 16) -> np.ndarray:
    """Model-ready float calibration inputs for ``graph``: from ``calibration`` (an array, a
    .npy/.npz file or a folder of images preprocessed by ``preprocess``), at most
    ``calibration_images`` of them spread over the data; else the training images of a bundled
    data set (MNIST- and CIFAR-10-shaped models). Raises ``ModelError`` saying how to give data
    when there is none: never a random calibration."""
    from lycaon import plan as planner  # noqa: PLC0415
    from lycaon.preprocessing import Preprocess, load_calibration  # noqa: PLC0415

    if calibration is not None:
        return load_calibration(calibration, graph.input_shape, Preprocess.from_any(preprocess), limit=calibration_images)
    x = planner.calibration_inputs(graph, calibration_images)
    if x is None:
        raise _model_error(_calibration_help(graph, name))
    return x


def load_graph(model, input_shape: Optional[tuple] = None):
    """A simplified model graph from a zoo name, an ONNX or PyTorch file, or a ``Graph``;
    ``input_shape`` (C, H, W) for TorchScript files, which do not record it."""
    from lycaon.frontend import simplify, zoo  # noqa: PLC0415
    from lycaon.frontend.ir import Graph  # noqa: PLC0415

    return simplify(model if isinstance(model, Graph) else zoo.load_model(str(model), input_shape))


def _sample_shape(calibration, preprocess) -> Optional[tuple]:
    """The (C, H, W) of one calibration sample, when it can be told without the model."""
    from lycaon.preprocessing import Preprocess, read_array  # noqa: PLC0415

    if calibration is None:
        return None
    if isinstance(calibration, np.ndarray):
        return tuple(calibration.shape[1:]) if calibration.ndim == 4 else tuple(calibration.shape)
    path = Path(calibration)
    if path.is_dir():
        spec = Preprocess.from_any(preprocess)
        return (spec.channels, *spec.crop) if spec is not None and spec.crop else None
    if path.suffix.lower() in (".npy", ".npz") and path.is_file():
        x = read_array(path)[0]
        return tuple(x.shape[1:]) if x.ndim == 4 else tuple(x.shape)
    return None


def prepare(model, *, link: str = "lan", calibration_images: int = 16, reveal: str = "logits", flood_bits: float = 40.0,
            plan: PlanLike = None, calibration=None, preprocess=None, algorithms: Sequence[str] = ()) -> tuple[dict, dict, Any]:
    """Everything a server needs for a model (a zoo name, a model file or a ``Graph``): the model
    loaded and simplified, quantised on ``calibration`` (see ``calibration_for``; at most
    ``calibration_images`` samples), planned for ``link`` leaving ``flood_bits`` of
    noise-flooding security (searching only ``algorithms`` when given) unless a plan (a dict, or
    the path of ``lycaon plan --json``) is given, and compiled. Returns ``(program, weights,
    quantized_model)``."""
    program, weights, q, _ = _prepare(model, link=link, calibration_images=calibration_images, reveal=reveal, flood_bits=flood_bits, plan=plan,
                                      calibration=calibration, preprocess=preprocess, algorithms=algorithms)
    return program, weights, q


def _prepare(model, *, link: str, calibration_images: int, reveal: str, flood_bits: float, plan: PlanLike, calibration, preprocess,
             algorithms: Sequence[str]) -> tuple[dict, dict, Any, dict]:
    """``prepare`` and the plan it compiled."""
    from lycaon import plan as planner  # noqa: PLC0415
    from lycaon.frontend import subsample_before_pointwise  # noqa: PLC0415
    from lycaon.frontend.quantize import QuantConfig, quantize  # noqa: PLC0415

    if reveal not in REVEALS:
        raise _model_error(f"reveal must be one of {', '.join(REVEALS)}, not {reveal!r}")
    torch_script = isinstance(model, (str, os.PathLike)) and Path(model).suffix.lower() in (".pt", ".pth")
    # Strided 1x1 convolutions read a subsample, s^2 times fewer values under HE.
    graph = subsample_before_pointwise(load_graph(model, _sample_shape(calibration, preprocess) if torch_script else None))
    poly = next((n for n in graph.nodes if n.op == "poly"), None)
    if poly is not None:  # before asking for calibration data the model could not use
        from lycaon.frontend.quantize import polynomial_refusal  # noqa: PLC0415

        raise polynomial_refusal(poly)
    name = graph.name if not isinstance(model, (str, os.PathLike)) else str(model)
    x = calibration_for(graph, name, calibration, preprocess, calibration_images)
    if not any(np.any(n.params["weight"]) for n in graph.nodes if n.op in ("conv", "linear")):
        raise _model_error(f"{name}: every weight is zero (a built-in architecture carries layer shapes only): serve your own trained model file, "
                           "or give it random weights for a benchmark (lycaon serve ... --random-weights SEED)")
    q = quantize(graph, x, QuantConfig())
    del x
    plan_dict = _load_plan(plan)
    if plan_dict is None:
        # Per-layer share rings on every link. One ring for the network (plan(uniform_t=True)) saves
        # the conversions between rings (ResNet-20 with exact truncation: 363 -> 267 rounds) but
        # widens every two-party op (60.9 -> 94.1 MB), which the wan's bandwidth and the bytes
        # budget against Cheetah do not repay.
        plan_dict = planner.plan(name, link=link, nonlinear=False, flood_bits=flood_bits, quantized=q, algorithms=algorithms)
    program, weights = compile_program(q, plan_dict, reveal=reveal)
    program["name"] = name
    return program, weights, q, plan_dict


# ----------------------------------------------------------------------------- the two parties


def _native_fn(name: str):
    fn = getattr(_native, name, None)
    if fn is None:
        raise _native.LycaonError(f"this build of lycaon has no hybrid runtime (lycaon._native.{name}); rebuild the extension (maturin develop --release)")
    return fn


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


def run_local(program: dict, weights: dict, x_int, *, link: str = "none", flood_bits: float = 0.0) -> dict:
    """Both parties in this process over an emulated ``link`` ("lan", "wan" or "none"): the
    native runtime's result dict for one image (integers at scale 2^f, flat or ``input_shape``)."""
    x, single = _as_batch(program, x_int)
    if not single:
        raise ValueError("run_local takes one image")
    options = {"link": link, "flood_bits": float(flood_bits)}
    return json.loads(_native_fn("hybrid_local")(json.dumps(program), weights, np.ascontiguousarray(x.reshape(-1)), json.dumps(options)))


class Server:
    """Serves private inference of a model: it holds the quantised weights and runs its half of
    every linear layer (homomorphic) and non-linear layer (two-party); it never sees the image nor
    holds a secret key of the client's.

    ``model`` is a zoo name, an ONNX or PyTorch file, or a model ``Graph``; ``calibration`` the
    data the quantiser takes its scales from (an array or .npy/.npz of model-ready float tensors
    (N, C, H, W), or a folder of images that ``preprocess`` turns into tensors; bundled MNIST and
    CIFAR-10 models default to their training sets, any other model must be given data);
    ``preprocess`` a ``preprocessing.Preprocess`` spec (dict, JSON or file) that the server
    publishes so clients preprocess PNG/JPEG files the same way; ``labels`` class names (a list or
    a text/JSON file). ``plan`` a plan dict or plan JSON path (planned here for ``link``
    otherwise); ``reveal`` "logits" or "label" (the client then learns only the argmax).
    ``emulate_link`` delays and throttles traffic as ``link`` would (demos on one machine);
    ``flood_bits`` is the statistical security of the noise flooding the server's ciphertexts
    before they go back; ``max_sessions`` clients are served at once; a session idle for
    ``timeout_s`` is dropped.

    ``mode="fhe"``: the whole network under CKKS (``lycaon.fhe.compile_model``); the client sends
    its public keys once per session. A network with ReLUs is bootstrapped, its bootstraps placed
    from the value bounds of ``calibration`` (as above; ``calibration_images`` samples, default
    64, else 16 in the hybrid mode). ``flood_precision_bits`` is the precision the answers'
    noise flooding leaves in the logits (0: no flooding); ``device`` ("cpu", "cuda:N") is where
    the server's CKKS work runs.

    ``ray``: run the server's work on Ray workers (``lycaon.cluster``): in the hybrid mode the
    linear layers, in the FHE mode every op (independent ops of a step on different workers; the
    workers hold the sessions' evaluation keys, this server none). A cluster's address, "auto"
    for the cluster this machine belongs to, or "local" to start a Ray instance here; ``workers``
    actors of ``worker_threads`` threads each (0: all cores). The logits are bit for bit those
    of one machine. ``replicas`` R > 0 (either mode, with ``ray``): R whole servers as Ray actors
    (each with ``workers`` workers of its own; 0: none)
    behind this server's address, each connection (a session) piped to the replica with the
    fewest open ones (``lycaon.replicas``)."""

    def __init__(self, model, *, mode: str = "hybrid", calibration=None, preprocess=None, labels=None, plan: PlanLike = None, reveal: str = "logits",
                 link: str = "lan", emulate_link: bool = False, calibration_images: Optional[int] = None, flood_bits: float = 40.0, max_sessions: Optional[int] = None,
                 timeout_s: float = 300.0, exact_truncation: bool = True, algorithms: Sequence[str] = (), flood_precision_bits: float = 20.0,
                 device: str = "cpu", ray: Optional[str] = None, workers: int = 2, worker_threads: int = 1, replicas: int = 0):
        from lycaon.plan import dataset_of  # noqa: PLC0415
        from lycaon.preprocessing import Preprocess, load_labels  # noqa: PLC0415

        native_server = _native_fn("HybridServer")  # before the minutes of planning
        if mode not in ("hybrid", "fhe"):
            raise ValueError(f"mode must be 'hybrid' or 'fhe', not {mode!r}")
        self.mode = mode
        self.fanout = None
        if mode == "fhe":
            if ray is not None and device != "cpu":
                raise ValueError(f"device {device!r}: with ray, the FHE mode's ops run on the Ray workers' CPUs; give device='cpu'")
            self._init_fhe(native_server, model, calibration, preprocess, 64 if calibration_images is None else calibration_images, labels, max_sessions, timeout_s,
                           link if emulate_link else "none", flood_precision_bits, device)
            if replicas:
                from lycaon.replicas import ReplicaSet  # noqa: PLC0415

                # Each replica prepares the program and holds its own sessions' keys (with
                # ``workers`` workers of its own); this process only forwards connections.
                self._server = ReplicaSet(self.program, None, self.options, replicas=replicas, workers=workers, threads=worker_threads, address=ray)
            else:
                if ray is not None:
                    from lycaon.cluster import start_fhe_fanout  # noqa: PLC0415

                    self.fanout = start_fhe_fanout(self.program, address=ray, workers=workers, threads=worker_threads)
                self._server = native_server.fhe(self.compiled.program_json, json.dumps(self.options), self.fanout)
            return
        if device != "cpu":
            raise ValueError(f"device {device!r}: the hybrid mode runs on the CPU; a device applies to the FHE mode (mode='fhe')")
        max_sessions = 4 if max_sessions is None else max_sessions
        calibration_images = 16 if calibration_images is None else calibration_images
        spec = Preprocess.from_any(preprocess)
        self.program, self.weights, self.quantized, self.plan = _prepare(model, link=link, calibration_images=calibration_images, reveal=reveal,
                                                                         flood_bits=flood_bits, plan=plan, calibration=calibration, preprocess=spec,
                                                                         algorithms=algorithms)
        # Exact: logits bit for bit the fixed-point model's; faithful: each truncation off by at
        # most one unit (a near tie can then flip the top-1), about 7 fewer rounds per truncation.
        self.program["exact_truncation"] = bool(exact_truncation)
        graph = self.quantized.graph
        classes = int(np.prod(graph.shapes()[graph.output]))
        dataset = dataset_of(graph)
        if spec is not None:
            spec.check_shape(graph.input_shape)
        names = load_labels(labels, classes) if labels is not None else LABELS.get(dataset) if calibration is None else None
        self.metadata = {"model": self.program["name"], "input_shape": [int(d) for d in graph.input_shape], "classes": classes,
                         "preprocess": spec.to_dict() if spec is not None else dataset if calibration is None else None, "labels": names}
        self.options = {"max_sessions": int(max_sessions), "timeout_s": float(timeout_s), "link": link if emulate_link else "none",
                        "flood_bits": float(flood_bits), "metadata": self.metadata}
        if replicas:
            from lycaon.replicas import ReplicaSet  # noqa: PLC0415

            # Each replica is a whole server (with its own workers when ``workers``); this process
            # only forwards connections.
            self._server = ReplicaSet(self.program, self.weights, self.options, replicas=replicas, workers=workers, threads=worker_threads, address=ray)
            self.address = None
            return
        if ray is not None:
            from lycaon.cluster import start_fanout  # noqa: PLC0415

            self.fanout = start_fanout(self.program, self.weights, address=ray, workers=workers, threads=worker_threads, flood_bits=flood_bits)
        self._server = native_server(json.dumps(self.program), self.weights, json.dumps(self.options), self.fanout)
        self.address: Optional[str] = None

    def _init_fhe(self, native_server, model, calibration, preprocess, calibration_images: int, labels, max_sessions: Optional[int], timeout_s: float,
                  link: str, flood_precision_bits: float, device: str) -> None:
        """The FHE mode: the network compiled for CKKS (lycaon.fhe), served by the runtime; the
        server holds the weights and each session's public keys. ResNet-20 sessions hold about
        10 GB of keys each: one at a time unless ``max_sessions`` says otherwise."""
        from lycaon import fhe  # noqa: PLC0415
        from lycaon.plan import dataset_of  # noqa: PLC0415
        from lycaon.preprocessing import Preprocess, load_labels  # noqa: PLC0415

        spec = Preprocess.from_any(preprocess)
        self.program, self.compiled = fhe.compile_model(model, calibration=calibration, preprocess=spec, calibration_images=calibration_images)
        graph = self.compiled.graph
        classes = len(self.program["output_slots"])
        dataset = dataset_of(graph)
        names = load_labels(labels, classes) if labels is not None else LABELS.get(dataset)
        # What clients apply to image files: the given preprocessing, else the bundled data set's.
        self.metadata = {"model": self.program["name"], "input_shape": [int(d) for d in graph.input_shape], "classes": classes,
                         "preprocess": spec.to_dict() if spec is not None else dataset, "labels": names}
        bootstrapping = self.program["parameters"]["kind"] == "bootstrappable"
        self.options = {"max_sessions": int(max_sessions if max_sessions is not None else 1 if bootstrapping else 4), "timeout_s": float(timeout_s),
                        "link": link, "metadata": self.metadata, "flood_precision_bits": float(flood_precision_bits),
                        "max_message_bytes": 1 << 30, "device": str(device)}
        self.weights, self.quantized, self.plan = None, None, None
        self.address = None

    def start(self, port: int = 0, host: str = "127.0.0.1") -> str:
        """Listens on host:port (0: any free port) in background threads; returns the bound
        "host:port"."""
        self.address = self._server.start(_address(host, port))
        return self.address

    def serve(self, port: int = DEFAULT_PORT, host: str = "127.0.0.1") -> None:
        """Listens on host:port and serves until interrupted (Ctrl-C)."""
        self.address = _address(host, port)
        self._server.serve(self.address)

    def stop(self) -> None:
        """Stops listening and ends open sessions (and the Ray workers, when ``ray`` was given)."""
        self._server.stop()
        if self.fanout is not None:
            self.fanout.shutdown()
            self.fanout = None

    def logs(self) -> list[dict]:
        """The server's log records: per session, per-layer timings and bytes, and errors."""
        return [json.loads(line) for line in self._server.logs()]

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.address or "not listening"
        if self.mode == "fhe":
            return f"Server({self.program['name']!r}, mode='fhe', {len(self.program['ops'])} ops, {where})"
        linear = sum(op["op"] == "linear" for op in self.program["ops"])
        return f"Server({self.program['name']!r}, {len(self.program['ops'])} ops, {linear} linear, reveal={self.program['reveal']!r}, {where})"


class InferenceResult(dict):
    """The result of ``Client.infer``, a dict whose keys read as attributes too: "labels" (one
    per image), "logits" (float array (N, classes), decoded by 2^-f; None when the server
    reveals only labels), "top5" (class indices, best first; None without logits), "layers"
    (per op: name, op, seconds, client_s, server_s, bytes_sent, bytes_received, rounds; summed
    over the images), "client_s", "server_s", "comm_s", "two_party_s" (the protocols' own
    computation), "total_s", "bytes", "rounds" (summed over the images), "images" (the runtime's result per image) and "program" (the server's public
    program)."""

    def __getattr__(self, key: str):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


def _collect(raws: list[dict], program: dict) -> InferenceResult:
    f = program["fraction_bits"]
    revealed = all(r.get("logits") is not None for r in raws)
    logits = np.array([r["logits"] for r in raws], dtype=np.float64) / 2.0**f if revealed and raws else None
    layers: list[dict] = []
    for r in raws:
        for k, row in enumerate(r.get("layers") or []):
            if k == len(layers):
                layers.append({"name": row.get("name"), "op": row.get("op")})
            for key, value in row.items():
                if key not in ("name", "op") and isinstance(value, (int, float)):
                    layers[k][key] = layers[k].get(key, 0) + value
    totals = {key: sum(r.get(key) or 0 for r in raws) for key in ("client_s", "server_s", "comm_s", "two_party_s", "total_s", "bytes", "rounds")}
    return InferenceResult(
        labels=[int(r["label"]) for r in raws],
        logits=logits,
        top5=[list(map(int, np.argsort(-row, kind="stable")[:5])) for row in logits] if logits is not None else None,
        layers=layers,
        **totals,
        images=[{k: v for k, v in r.items() if k != "program"} for r in raws],
        program=program,
    )


class Client:
    """The party with the image: ``Client("host:port").infer(x)``. It learns the program (layers,
    fraction bits, preprocessing, class names) from the server, encodes the image, and runs its
    half of the protocol; the server learns nothing of the image and the client nothing of the
    weights beyond the revealed output."""

    def __init__(self, addr: str, *, timeout_s: float = 300.0, link: str = "none", mode: Optional[str] = None, device: str = "cpu"):
        """``link`` emulates a link on what the client sends (``lan``, ``wan``, ``100mbps,10ms``;
        the server emulates its own direction) and prices communication time in the results.
        ``mode``: the mode the server must serve ("hybrid" or "fhe"; None: whichever it serves).
        In the FHE mode the first ``infer`` makes this client's keys and sends them once (a
        ResNet-20 session: about 5 GB and minutes); later calls reuse the session. ``device``
        ("cpu", "cuda:N"): where the FHE mode's key generation, encryption and decryption run."""
        self.address = addr
        self.device = device
        self.options = {"timeout_s": float(timeout_s), "link": link}
        self._expected_mode = mode
        self._public: Optional[dict] = None
        self._fhe = None
        self.on_keys: Optional[Callable[[str], None]] = None

    @property
    def public(self) -> dict:
        """What the server serves: {"mode", "program"} (fetched once)."""
        if self._public is None:
            self._public = json.loads(_native_fn("fetch_public_model")(self.address, json.dumps({"timeout_s": self.options["timeout_s"]})))
            mode = self._public["mode"]
            if self._expected_mode is not None and mode != self._expected_mode:
                raise _native.LycaonError(f"the server at {self.address} serves the {mode} mode, not {self._expected_mode}; run the client with --mode {mode}")
        return self._public

    @property
    def mode(self) -> str:
        """"hybrid" or "fhe", as the server says."""
        return self.public["mode"]

    @property
    def program(self) -> dict:
        """The server's public program."""
        return self.public["program"]

    @property
    def metadata(self) -> dict:
        return self.program.get("metadata") or {}

    @property
    def labels(self) -> Optional[list]:
        """Class names, when the server gives them."""
        return self.metadata.get("labels")

    @property
    def preprocessing(self):
        """The server's ``preprocessing.Preprocess`` spec for image files and raw uint8 images,
        or the name of a bundled data set ("mnist", "cifar10"), or None."""
        from lycaon.preprocessing import Preprocess  # noqa: PLC0415

        spec = self.metadata.get("preprocess")
        return Preprocess.from_any(spec) if isinstance(spec, dict) else spec

    def preprocess(self, x) -> np.ndarray:
        """Model-ready float inputs (N, *input_shape). uint8 arrays are raw images (as a bundled
        data set stores them: MNIST (28, 28), CIFAR-10 (32, 32, 3); or (H, W, C) images for a
        server that publishes a preprocessing spec), one or a batch, and get the server's
        preprocessing; float arrays are model inputs already, one (C, H, W) or a batch."""
        from lycaon.plan import preprocessor  # noqa: PLC0415

        x = np.asarray(x)
        shape = tuple(self.program["input_shape"])
        if x.dtype == np.uint8:
            spec = self.preprocessing
            if spec is not None and not isinstance(spec, str):
                return spec.apply_uint8(x)
            if spec not in RAW_SHAPES:
                raise ValueError(f"the server names no preprocessing for raw uint8 images (got {spec!r}); pass float model inputs {shape}")
            raw = RAW_SHAPES[spec]
            if x.shape == raw:
                x = x[None]
            if x.shape[1:] != raw:
                raise ValueError(f"raw {spec} images have shape {raw} (one) or (N, {', '.join(map(str, raw))}), not {x.shape}")
            return preprocessor(spec)(x)
        if x.dtype.kind not in "fiu":
            raise TypeError(f"images must be numbers, not {x.dtype}")
        x = x.astype(np.float64)
        if x.shape == shape:
            x = x[None]
        if x.shape[1:] != shape:
            raise ValueError(f"the model takes {shape} (one image) or (N, {', '.join(map(str, shape))}), not {x.shape}")
        if not np.isfinite(x).all():
            raise ValueError("the input holds NaN or infinite values")
        return x

    @property
    def fhe_session(self):
        """The FHE session (keys made and sent on first use)."""
        if self._fhe is None:
            opts = {"timeout_s": max(self.options["timeout_s"], 3600.0), "device": self.device}
            self._fhe = _native_fn("FheSession").connect(self.address, json.dumps(opts), self.on_keys)
        return self._fhe

    def close(self) -> None:
        """Ends the FHE session, if one is open (hybrid sessions end with each image)."""
        if self._fhe is not None:
            self._fhe.close()
            self._fhe = None

    def _infer_fhe(self, x, progress) -> InferenceResult:
        session = self.fhe_session
        raws = [json.loads(session.infer(np.ascontiguousarray(row.reshape(-1), dtype=np.float64), progress)) for row in self.preprocess(x)]
        logits = np.array([r["logits"] for r in raws], dtype=np.float64)
        totals = {key: sum(r.get(key) or 0 for r in raws) for key in ("client_s", "comm_s", "total_s")}
        return InferenceResult(labels=[int(r["label"]) for r in raws], logits=logits, top5=[list(map(int, np.argsort(-row, kind="stable")[:5])) for row in logits],
                               layers=[], server_s=sum(r["report"]["server_s"] for r in raws), two_party_s=0.0, **totals,
                               bytes=sum(r["up_bytes"] + r["down_bytes"] for r in raws), rounds=len(raws), images=raws, program=self.program,
                               session_keys=json.loads(session.keys))

    def encode(self, x) -> np.ndarray:
        """Integer inputs at scale 2^f, (N, C*H*W) int64: round(x * 2^f) of the preprocessed images,
        as ``QuantizedModel.encode_input``."""
        x = self.preprocess(x)
        return np.round(x * 2.0 ** self.program["fraction_bits"]).astype(np.int64).reshape(len(x), -1)

    def infer(self, x, *, progress: Optional[Callable[[int, int, str], None]] = None) -> InferenceResult:
        """Private inference of one image or a batch (see ``preprocess``), one session per image.
        ``progress(done, total, name)`` is called after each op of each image."""
        if self.mode == "fhe":
            return self._infer_fhe(x, progress)
        program = self.program
        fn = _native_fn("hybrid_infer")
        raws = []
        for row in self.encode(x):
            raw = json.loads(fn(self.address, np.ascontiguousarray(row), json.dumps(self.options), progress))
            seen = raw.get("program") or {}
            if seen and seen.get("fraction_bits", program["fraction_bits"]) != program["fraction_bits"]:
                raise _native.LycaonError(f"the server at {self.address} changed its program during the session; create a new Client")
            raws.append(raw)
        return _collect(raws, program)

    def __repr__(self) -> str:
        return f"Client({self.address!r})"
