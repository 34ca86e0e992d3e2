"""The planner from Python: what private inference of a model will cost, layer by layer, before
anything is deployed (``lycaon plan MODEL``).

For the hybrid mode every linear layer gets its own BFV parameters and algorithm: the Rust
planner prices every secure parameter set and every algorithm that can run the layer with the
noise model (practical, at a target decryption-failure probability, and worst case) and the cost
model (operation counts times per-operation costs measured once on this machine and cached in
``~/.cache/lycaon/op-costs-v2.json``, plus the client's encryption and decryption and the link), and
keeps the fastest point that leaves a non-negative noise margin.

The plaintext modulus of a layer is the share ring of its outputs: it must hold the layer's
largest accumulator exactly, so its bits come from the quantised model (calibrated on a few
training images when the data set is at hand, else the quantisation's plaintext bound).
"""

from __future__ import annotations

import json
import subprocess
from typing import Any, Optional, Sequence

import numpy as np

from lycaon import _native

__all__ = ["calibration_inputs", "compare", "dataset_of", "layer_shape", "linear_layers", "plan", "plan_fhe", "preprocessor", "quantize_calibrated", "two_party_costs", "write_report"]

#: Safety bits between a layer's calibrated largest accumulator and its plaintext modulus.
T_MARGIN_BITS = 2


def layer_shape(node, in_shape: tuple) -> dict:
    """The planner's shape of a conv or linear node with input shape ``in_shape``: {h, w, c_in,
    c_out, k, stride, pad, groups} (fully connected: h = w = k = 1, c_in = the input length).
    Inputs may be rectangular (h != w). Raises ``ModelError`` for what the planner does not take:
    non-square kernels, unequal strides, asymmetric padding, a convolution without a (C, H, W)
    input or a fully connected layer without a 1-D one."""
    from lycaon.frontend.ir import ModelError  # noqa: PLC0415

    w = np.asarray(node.params["weight"])
    if node.op == "conv":
        if len(in_shape) != 3:
            raise ModelError(f"{node.describe()}: a convolution takes a (C, H, W) input, got {tuple(in_shape)}")
        c, h, wd = in_shape
        stride = node.attrs.get("stride", (1, 1))
        pads = node.attrs.get("pads", (0, 0, 0, 0))
        if w.shape[2] != w.shape[3] or stride[0] != stride[1] or len(set(pads)) != 1:
            raise ModelError(f"{node.describe()}: the planner takes square kernels, equal strides and symmetric padding "
                             f"(input {h}x{wd}, kernel {w.shape[2]}x{w.shape[3]}, stride {tuple(stride)}, pads {tuple(pads)})")
        return {"h": h, "w": wd, "c_in": c, "c_out": int(w.shape[0]), "k": int(w.shape[2]), "stride": int(stride[0]), "pad": int(pads[0]), "groups": int(node.attrs.get("groups", 1))}
    if node.op == "linear":
        if len(in_shape) != 1:
            raise ModelError(f"{node.describe()}: a fully connected layer takes a 1-D input, got {tuple(in_shape)} (flatten first)")
        return {"h": 1, "w": 1, "c_in": int(w.shape[1]), "c_out": int(w.shape[0]), "k": 1, "stride": 1, "pad": 0, "groups": 1}
    raise ModelError(f"{node.describe()}: not a convolution or fully connected layer")


def linear_layers(graph) -> list[dict]:
    """The convolutions and fully connected layers of a (simplified) model graph, with their
    input shapes, as the planner takes them (``layer_shape``)."""
    shapes = graph.shapes()
    layers = []
    for node in graph.nodes:
        if node.op not in ("conv", "linear"):
            continue
        in_shape = shapes[node.inputs[0]] if node.inputs else graph.input_shape
        layers.append({"name": node.name, "shape": layer_shape(node, in_shape), "weight": np.asarray(node.params["weight"])})
    return layers


def dataset_of(graph) -> Optional[str]:
    """The data set a model's input shape belongs to: "cifar10" (3x32x32), "mnist" (1x28x28) or
    None."""
    return {(3, 32, 32): "cifar10", (1, 28, 28): "mnist"}.get(tuple(graph.input_shape))


def preprocessor(dataset: str):
    """uint8 images of a data set as it stores them -> model-ready float (N, C, H, W)."""
    from lycaon.frontend import lenet, resnet  # noqa: PLC0415

    preps = {"cifar10": resnet.preprocess, "mnist": lenet.preprocess}
    if dataset not in preps:
        raise ValueError(f"no preprocessing for data set {dataset!r}; known: {', '.join(preps)}")
    return preps[dataset]


def calibration_inputs(graph, calibration_images: int) -> Optional[np.ndarray]:
    """Model-ready calibration inputs: ``calibration_images`` training images drawn with a fixed
    seed, so every caller quantises the same way; None when the data set is not at hand."""
    dataset = dataset_of(graph)
    try:
        if dataset == "cifar10":
            from lycaon.frontend import zoo  # noqa: PLC0415

            train_x, _ = zoo.cifar10("train")
        elif dataset == "mnist":
            from lycaon.data import load_mnist, mnist_test_subset  # noqa: PLC0415

            try:
                train_x, _ = load_mnist("train")
            except (OSError, ValueError, subprocess.SubprocessError):
                # No npm or no network: the bundled test images 500..999 (only pixel ranges are
                # taken from them; demos classify the first ones), so a fresh install still runs.
                train_x = mnist_test_subset()[0][500:]
        else:
            return None
    except (OSError, ValueError, ImportError, subprocess.SubprocessError):  # no data set here
        return None
    idx = np.random.default_rng(0).choice(len(train_x), min(calibration_images, len(train_x)), replace=False)
    return preprocessor(dataset)(train_x[idx])


def quantize_calibrated(graph, calibration_images: int = 16):
    """The quantised model the planner sizes the plaintext moduli for and the hybrid runtime
    executes (``QuantConfig()`` defaults, calibrated by ``calibration_inputs``); None when no
    calibration data is at hand."""
    from lycaon.frontend.quantize import QuantConfig, quantize  # noqa: PLC0415

    x = calibration_inputs(graph, calibration_images)
    return None if x is None else quantize(graph, x, QuantConfig())


def _pool_growth_bits(q) -> dict[str, float]:
    """Per linear layer whose (truncated) output reaches an average pool through ReLU, clip,
    max-pooling, residual additions or concatenation: the bits the pool's input may take (the
    largest truncated accumulator among the layers that meet there, plus one per addition) plus
    the bits its window sums times its multiplier add. The runtime sums in the share ring of the
    pool's input, one of those layers' rings, so their plaintext moduli must hold that."""
    if q is None:
        return {}
    from lycaon.hybrid import _pool_scale  # noqa: PLC0415

    graph = q.graph
    shapes = graph.shapes()
    # tensor -> {linear layer whose ring it may live in: value bits of the tensor}
    sources: dict[str, dict[str, float]] = {}
    need: dict[str, float] = {}
    for node in graph.nodes:
        ins = [sources.get(i, {}) for i in node.inputs]
        if node.op in ("conv", "linear") and node.name in q.layers and node.name in q.accumulator_bits:
            sources[node.output] = {node.name: q.accumulator_bits[node.name] - q.layers[node.name][2]}
        elif node.op in ("relu", "clip", "maxpool", "flatten"):
            sources[node.output] = dict(ins[0])
        elif node.op in ("add", "concat"):
            merged: dict[str, float] = {}
            for src in ins:
                for layer, bits in src.items():
                    merged[layer] = max(merged.get(layer, -1e9), bits + (1.0 if node.op == "add" else 0.0))
            sources[node.output] = merged
        elif node.op in ("avgpool", "global_avgpool") and ins[0] and node.name in q.pools:
            mult, shift = _pool_scale(node, q)
            window = int(np.prod(node.attrs["kernel"])) if node.op == "avgpool" else int(np.prod(shapes[node.inputs[0]][1:]))
            bits = max(ins[0].values()) + float(np.log2(window * mult))
            for layer in ins[0]:
                need[layer] = max(need.get(layer, 0.0), bits)
            # After its truncation the average lives in the same rings (DenseNet's transitions).
            sources[node.output] = {layer: v + float(np.log2(window * mult)) - shift for layer, v in ins[0].items()}
    return need


def _value_bits(layers: list[dict], q) -> dict[str, tuple[int, int]]:
    """(weight bits, plaintext bits) per layer from the quantised model ``q``, or from the
    quantisation's bounds when there is none. A layer that feeds an average pool gets the bits
    the pool's sums add to its truncated outputs (``_pool_growth_bits``)."""
    from lycaon.frontend.quantize import QuantConfig  # noqa: PLC0415

    config = QuantConfig() if q is None else q.config
    if q is None:
        return {l["name"]: (config.weight_bits + 1, config.plaintext_bits) for l in layers}
    growth = _pool_growth_bits(q)
    out = {}
    for layer in layers:
        wq = q.layers.get(layer["name"], (None,))[0]
        weight_bits = int(np.ceil(np.log2(np.abs(wq).max() + 1))) + 1 if wq is not None and np.size(wq) else config.weight_bits + 1
        acc = q.accumulator_bits.get(layer["name"], config.plaintext_bits - 1)
        t_bits = int(min(config.plaintext_bits, np.ceil(acc) + 1 + T_MARGIN_BITS))
        if layer["name"] in growth:  # the pool's sums, with the 2 bits the compiler's ring check keeps
            t_bits = max(t_bits, int(np.ceil(growth[layer["name"]])) + 1 + T_MARGIN_BITS + 2)
        out[layer["name"]] = (max(2, weight_bits), max(20, t_bits))
    return out


#: Ops whose output stays in their (first) input's share ring in the hybrid runtime.
_RING_KEEPING = ("relu", "clip", "maxpool", "flatten", "add", "concat")


def _ring_groups(graph, q) -> list[list[str]]:
    """Linear layers whose shares meet: the readers of tensors joined through ReLU, clip,
    max-pooling, flattening, residual adds and concats (and a layer whose output is not truncated,
    which lives in its own ring). The runtime keeps each such tensor in one reader's plaintext
    modulus (a truncation writes into it), so readers with another modulus, and an add's or
    concat's inputs from another ring, cost a conversion (a comparison per element) unless the
    group shares one t. Groups of two or more layers, in graph order."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: str, b: str) -> None:
        parent[find(a)] = find(b)

    for node in graph.nodes:
        # A 1x1 average pool (subsample_before_pointwise's subsample) sums one value: no truncation.
        if node.op in _RING_KEEPING or (node.op == "avgpool" and tuple(node.attrs.get("kernel", ())) == (1, 1)):
            for i in node.inputs:
                union(f"tensor:{i}", f"tensor:{node.output}")
        elif node.op in ("conv", "linear"):
            union(f"layer:{node.name}", f"tensor:{node.inputs[0]}")
            if q is not None and node.name in q.layers and q.layers[node.name][2] == 0:
                union(f"layer:{node.name}", f"tensor:{node.output}")
    groups: dict[str, list[str]] = {}
    for node in (n for n in graph.nodes if n.op in ("conv", "linear")):
        groups.setdefault(find(f"layer:{node.name}"), []).append(node.name)
    return [g for g in groups.values() if len(g) > 1]


def _share_plaintext_moduli(result: dict, groups: list[list[str]]) -> None:
    """Gives each group's layers one plaintext modulus: the same t_bits (set before planning) and,
    where their ring degrees differ, t chosen for the largest (params "t_n"), so t is one prime."""
    by_name = {l["name"]: l for l in result["layers"]}
    for group in groups:
        layers = [by_name[name] for name in group if name in by_name]
        degrees = {l["params"]["n"] for l in layers}
        if len(degrees) > 1:
            for l in layers:
                l["params"]["t_n"] = max(degrees)


def plan(model: str, *, link: str = "lan", failure_probability: float = 2.0 ** -40, reserve_bits: float = 0.0,
         algorithms: Sequence[str] = (), design_space: bool = False, calibration_images: int = 16,
         t_bits: Optional[int] = None, cache: Optional[str] = None, nonlinear: bool = True, flood_bits: float = 0.0,
         quantized=None, uniform_t: bool = False, exact_truncation: bool = True) -> dict[str, Any]:
    """Plans the hybrid mode of a model (a zoo name or an ONNX/PyTorch file the model front
    imports). Returns the plan: {"layers": [{name, shape, algorithm, params, noise_margin_bits,
    noise_worst_case_bits, predicted_s, server_s, client_s, comm_s, bytes_up, bytes_down,
    key_bytes, rotations, galois_elements, nonlinear_s, nonlinear_bytes, ...}], "predicted_s" (linear
    layers), "nonlinear_s", "total_s", "total_bytes", "rounds", "speedup_vs_single_set", ...}. With
    ``nonlinear`` the two-party ReLU and truncation after each layer are priced by a short run of
    the protocols on this machine. ``flood_bits`` is the statistical security of the noise the
    server floods its returned ciphertexts with, which every layer's noise budget must leave room
    for (0: no flooding). ``quantized`` (a ``QuantizedModel`` of this model) sizes the plaintext
    moduli instead of quantising again with ``calibration_images`` training images. With
    ``uniform_t`` every layer gets the widest layer's plaintext bits and one prime: one share ring
    for the whole network, so the two-party layer converts no shares between layers (a
    conversion costs a comparison per element). Without it, the layers whose shares meet
    (``_ring_groups``: a residual stream's readers) share one plaintext modulus, the rest keep
    their own narrower ones. ``exact_truncation`` prices the runtime's default truncation
    (False: the faithful one, ``--faithful-truncation``)."""
    if quantized is not None:
        graph = quantized.graph
    else:
        from lycaon.frontend import simplify, subsample_before_pointwise, zoo  # noqa: PLC0415

        graph = subsample_before_pointwise(simplify(zoo.load_model(model)))
    layers = linear_layers(graph)
    if not layers:
        raise ValueError(f"model {model!r} has no convolution or fully connected layer to plan")
    q = quantized if quantized is not None else quantize_calibrated(graph, calibration_images)
    bits = _value_bits(layers, q)
    if uniform_t and t_bits is None:
        t_bits = max(b[1] for b in bits.values())
    groups = [[l["name"] for l in layers]] if uniform_t or t_bits is not None else _ring_groups(graph, q)
    for group in groups:
        widest = max(bits[name][1] for name in group)
        for name in group:
            bits[name] = (bits[name][0], widest)
    request = {
        "layers": [
            {"name": l["name"], "shape": l["shape"], "weight_bits": bits[l["name"]][0], "t_bits": t_bits or bits[l["name"]][1]}
            for l in layers
        ],
        "link": link,
        "failure_probability": failure_probability,
        "reserve_bits": reserve_bits,
        "algorithms": list(algorithms),
        "design_space": design_space,
    }
    if flood_bits > 0:  # only when asked, so planners without the key still read the request
        request["flood_bits"] = float(flood_bits)
    if cache is not None:
        request["cache"] = cache
    result = json.loads(_native.plan_json(json.dumps(request)))
    _share_plaintext_moduli(result, groups)
    result["model"] = model
    if nonlinear:
        _add_nonlinear(result, result["link"], graph, q, exact_truncation)
    return result


#: The truncation priced when no quantised model gives the layers' own (12: the weight fraction
#: bits of a layer whose largest weight is near 1 under the default 12-bit weights).
DEFAULT_SHIFT = 12


def two_party_costs(ring_bits: int, elements: int = 1 << 16, exact_truncation: bool = True, shifts: Sequence[int] = (DEFAULT_SHIFT,)) -> dict[str, Any]:
    """Per-element time and bytes, and rounds, of the two-party ReLU and truncation on this
    machine (silent OT, one short run each, both parties in this process), on a prime ring of
    ``ring_bits`` bits like the layers' plaintext moduli. Bytes are the runs' amortized bytes:
    silent OT makes COTs in segments of at least 1.3 million (38 kB), one generator per
    direction, so a short run pays for two segments or none; a session pays for the COTs it
    uses (0.029 B each). The ops are the runtime's: ReLU on values within a
    quarter of the ring (one comparison), ReLU after a truncation by the first shift (``relu_within``:
    the comparison on the bits the truncated values have left, about ring_bits - 1 - shift;
    "relu_within_*"), and the exact truncation (or the faithful one), whose
    cost grows with the shift: one run per shift in ``shifts`` ("truncate" holds them by shift;
    the flat truncate_* keys are the first shift's)."""
    import lycaon  # noqa: PLC0415

    p = lycaon.ntt_primes(ring_bits, 4096, 1)[0]
    rng = np.random.default_rng()
    s0 = rng.integers(0, p, elements, dtype=np.uint64)
    s1 = rng.integers(0, p, elements, dtype=np.uint64)
    relu = lycaon.run_two_party("relu_bounded", p, s0, s1, ot="silent")
    pool = lycaon.run_two_party("relu", p, s0, s1, ot="silent")  # max-pooling's differences span half the ring
    within_bits = max(1, ring_bits - 1 - int(shifts[0]))
    within = lycaon.run_two_party("relu_within", p, s0, s1, ot="silent", bits=within_bits)
    trunc = {}
    for shift in dict.fromkeys(int(v) for v in shifts):
        r = lycaon.run_two_party("truncate_exact" if exact_truncation else "truncate", p, s0, s1, ot="silent", shift=shift)
        trunc[shift] = {"s": r["seconds"] / elements, "bytes": r["amortized_bytes"] / elements, "rounds": r["rounds"]}
    first = trunc[int(shifts[0])]
    return {
        "ring_bits": ring_bits, "exact_truncation": exact_truncation,
        "relu_s": relu["seconds"] / elements, "relu_bytes": relu["amortized_bytes"] / elements, "relu_rounds": relu["rounds"],
        "relu_within_bits": within_bits, "relu_within_s": within["seconds"] / elements, "relu_within_bytes": within["amortized_bytes"] / elements,
        "relu_within_rounds": within["rounds"],
        "pool_relu_s": pool["seconds"] / elements, "pool_relu_bytes": pool["amortized_bytes"] / elements, "pool_relu_rounds": pool["rounds"],
        "truncate_s": first["s"], "truncate_bytes": first["bytes"], "truncate_rounds": first["rounds"], "truncate": trunc,
        "setup_s": relu["setup_seconds"], "setup_bytes": relu["setup_bytes"],
    }


def _max_pool_comparisons(in_shape, out_shape, kernel) -> tuple[int, int]:
    """Comparisons and rounds of comparisons of the runtime's max-pool (session.rs
    ``MaxPoolPlan``): whole windows, or rows then columns where that takes fewer."""
    c, h = in_shape[0], in_shape[1]
    oh, ow = out_shape[1], out_shape[2]
    kh, kw = int(kernel[0]), int(kernel[1])
    whole, separable = oh * ow * (kh * kw - 1), h * ow * (kw - 1) + oh * ow * (kh - 1)
    if separable < whole:
        return c * separable, int(np.ceil(np.log2(kw))) + int(np.ceil(np.log2(kh)))
    return c * whole, int(np.ceil(np.log2(kh * kw)))


def _two_party_work(graph, q) -> dict[str, dict]:
    """Per linear layer of ``graph``, the two-party work the runtime does after it until the
    next one: {"shift", "truncated" (its output elements, truncated by the layer's shift),
    "relus" (elements through ReLU), "relu_ops", "pool_relus" and "pool_bounded_relus"
    (max-pool comparisons, each with its
    multiplexer: max(a, b) = b + ReLU(a - b); bounded, one comparison of the truncated values'
    bits, where the values come from a truncation), "pool_levels" (max-pool rounds of
    comparisons in sequence)}. ReLUs after a truncation compare only the bits it leaves."""
    work: dict[str, dict] = {}
    shapes = graph.shapes()
    current = None
    for node in graph.nodes:
        size = int(np.prod(node.shape))
        if node.op in ("conv", "linear"):
            shift = q.layers[node.name][2] if q is not None and node.name in q.layers else DEFAULT_SHIFT
            current = work[node.name] = {"shift": int(shift), "truncated": size if shift else 0, "relus": 0, "relu_ops": 0,
                                         "pool_relus": 0, "pool_bounded_relus": 0, "pool_levels": 0}
        elif current is None:
            continue
        elif node.op == "relu":
            current["relus"] += size
            current["relu_ops"] += 1
        elif node.op == "clip":  # relu(x) - relu(x - M): two ReLUs in one batch
            current["relus"] += 2 * size
            current["relu_ops"] += 1
        elif node.op == "maxpool":
            comparisons, levels = _max_pool_comparisons(shapes[node.inputs[0]], shapes[node.output], node.attrs["kernel"])
            current["pool_bounded_relus" if current["shift"] else "pool_relus"] += comparisons
            current["pool_levels"] += levels
    return work


def _add_nonlinear(result: dict, link: dict, graph, q, exact_truncation: bool = True) -> None:
    """Adds the two-party work after every linear layer (``_two_party_work``: truncation of its
    outputs by its shift, the ReLUs and max-pool comparisons of the graph up to the next linear
    layer; max-pooling's ReLUs on differences take the bounded ReLU after a truncation, else
    the full-range one) to a hybrid plan: per layer seconds, bytes and rounds, and the totals over the network."""
    work = _two_party_work(graph, q)
    costs = two_party_costs(max(l["t_bits"] for l in result["layers"]), exact_truncation=exact_truncation,
                            shifts=sorted({w["shift"] for w in work.values() if w["truncated"]}) or [DEFAULT_SHIFT])
    bw, delay = link["bandwidth_bits_per_s"], link["one_way_delay_s"]
    for layer in result["layers"]:
        w = work[layer["name"]]
        t = costs["truncate"].get(w["shift"], {"s": 0.0, "bytes": 0.0, "rounds": 0})
        relus = w["relus"] + w["pool_bounded_relus"]
        # After a truncation the comparison takes the bits it leaves (runtime: relu_up_to).
        relu = "relu_within" if w["truncated"] else "relu"
        nl_bytes = w["truncated"] * t["bytes"] + relus * costs[f"{relu}_bytes"] + w["pool_relus"] * costs["pool_relu_bytes"]
        pool_rounds = costs[f"{relu}_rounds"] if w["pool_bounded_relus"] else costs["pool_relu_rounds"]
        rounds = (t["rounds"] if w["truncated"] else 0) + w["relu_ops"] * costs[f"{relu}_rounds"] + w["pool_levels"] * pool_rounds
        layer["nonlinear_elements"] = w["truncated"] + relus + w["pool_relus"]
        layer.update(truncated_elements=w["truncated"], relu_elements=w["relus"], pool_relu_elements=w["pool_relus"] + w["pool_bounded_relus"], shift=w["shift"])
        layer["nonlinear_bytes"] = nl_bytes
        layer["nonlinear_rounds"] = rounds
        compute = w["truncated"] * t["s"] + relus * costs[f"{relu}_s"] + w["pool_relus"] * costs["pool_relu_s"]
        layer["nonlinear_s"] = compute + nl_bytes * 8 / bw + rounds * 2 * delay
    result["two_party_costs"] = costs
    result["nonlinear_s"] = sum(l["nonlinear_s"] for l in result["layers"])
    result["total_s"] = result["predicted_s"] + result["nonlinear_s"] + costs["setup_s"]
    result["total_bytes"] = sum(l["bytes_up"] + l["bytes_down"] + l["nonlinear_bytes"] for l in result["layers"]) + costs["setup_bytes"]
    result["rounds"] = sum(1 + l["nonlinear_rounds"] for l in result["layers"])


def plan_fhe(model: str, *, link: str = "lan", params: str = "lycaon", activation: str = "aespa") -> dict[str, Any]:
    """The FHE mode's level plan and rotation keysets (004) for a model: ResNet-20 on CIFAR-10
    under CKKS at logN = 16 with AESPA quadratic activations (the FHE network of the FHE-mode
    issue). Other models are refused until that mode covers them."""
    import lycaon  # noqa: PLC0415

    if "resnet20" not in model:
        raise ValueError(f"the FHE-mode planner covers ResNet-20 (CIFAR-10) so far, not {model!r}")
    report = json.loads(lycaon.keyset_json(json.dumps({"model": "resnet20", "params": params, "activation": activation})))
    net = report["models"][0]
    # The bootstraps and the rotation keys by level of the program the runtime executes (the
    # compiled network, bounds from the bundled images), not a separate model of it.
    from lycaon import _native, fhe  # noqa: PLC0415
    from lycaon.data import demo_images  # noqa: PLC0415

    name = "resnet20-relu" if activation == "composite_relu" else "resnet20"
    program, _ = fhe.compile_model(name, calibration=demo_images("cifar10")[0][-64:])
    facts = json.loads(_native.fhe_program_facts(json.dumps(program)))
    full = net["with_bootstrapping"]
    chain = full["chain"]
    n = 1 << chain["log_n"]
    top_limbs = len(chain["q_bits"])
    ct_bytes_up = n * top_limbs * 8 + 32  # seeded: c_0 over every limb, c_1 as a seed
    ct_bytes_down = 2 * n * 8  # two parts at the lowest level
    level_aware = next(k for k in full["strategies"] if k["strategy"] == "level_aware")
    return {
        "log_n": chain["log_n"],
        "activation": activation,
        "bootstraps": facts["bootstraps"],
        "program": facts,
        "rotations": full["rotations"],
        "keysets": full["strategies"],
        "level_plan": net["level_plan"],
        "bytes_up": ct_bytes_up + level_aware["wire_bytes"],
        "bytes_down": ct_bytes_down,
        "rotation_s": level_aware["rotation_s"],
        "comparison_004": report["comparison"],
        "cost_model": report["cost_model"],
    }


def compare(hybrid: dict, fhe: dict) -> list[dict]:
    """The two modes side by side (000 Sec. 3, Fig. 1): rounds and bytes against bootstrapping,
    key memory and server time."""
    bw = hybrid["link"]["bandwidth_bits_per_s"]
    delay = hybrid["link"]["one_way_delay_s"]
    fhe_net = (fhe["bytes_up"] + fhe["bytes_down"]) * 8 / bw + 2 * delay
    level_aware = next(k for k in fhe["keysets"] if k["strategy"] == "level_aware")
    rows = [
        ("round trips", hybrid["rounds"], 1),
        ("bytes on the wire (MB)", round(hybrid["total_bytes"] / 1e6, 2), round((fhe["bytes_up"] + fhe["bytes_down"]) / 1e6, 2)),
        ("of which evaluation keys (MB)", round(sum(l["key_bytes"] for l in hybrid["layers"]) / 1e6, 2), round(level_aware["wire_bytes"] / 1e6, 2)),
        ("server key memory (MB)", round(sum(l["key_bytes"] for l in hybrid["layers"]) / 1e6, 2), round(level_aware["memory_bytes"] / 1e6, 2)),
        ("bootstrappings", 0, fhe["bootstraps"]),
        ("linear layers, server (s)", round(sum(l["server_s"] for l in hybrid["layers"]), 3), f">= {fhe['rotation_s']:.1f} (rotations alone)"),
        ("non-linear layers (s)", round(hybrid["nonlinear_s"], 3), "in the server time (polynomials)"),
        ("network time at this link (s)", round(sum(l["comm_s"] for l in hybrid["layers"]) + sum(l["nonlinear_bytes"] * 8 / bw + l["nonlinear_rounds"] * 2 * delay for l in hybrid["layers"]), 3), round(fhe_net, 3)),
        ("predicted total (s)", round(hybrid["total_s"], 3), f">= {fhe['rotation_s'] + fhe_net:.1f}"),
    ]
    return [{"quantity": q, "hybrid": h, "fhe": f} for q, h, f in rows]


def _short(name: str) -> str:
    return name if len(name) <= 18 else name[:8] + ".." + name[-8:]


def write_report(result: dict, path: str) -> None:
    """One self-contained HTML file: the plan's table, per-layer latency (stacked: server, client,
    network, two-party non-linear layers) and bytes, the design space of the costliest layer as
    time against noise margin with the chosen point marked (like 003's Fig. 3), the single-set
    comparison, the rotation keysets (memory against rotation latency, 004) and, in compare
    mode, the two modes side by side."""
    from lycaon.report import HtmlReport, bar_chart, scatter_chart  # noqa: PLC0415

    model = result.get("model", "model")
    rep = HtmlReport(
        f"Lycaon plan: {model} ({result.get('mode', 'hybrid')} mode)",
        "What private inference of this model will cost, before anything is deployed. In the hybrid mode every linear layer "
        "runs under its own BFV parameters and algorithm, chosen to minimise predicted latency while keeping a non-negative "
        "noise margin (the bits of noise budget left at the target decryption-failure probability); ReLU and truncation run "
        "as two-party protocols. In the FHE mode the whole network runs on the server under CKKS with bootstrapping. "
        "Times are predictions from operation counts and per-operation costs measured on this machine.",
    )
    layers = result.get("layers") or []
    if layers:
        labels = [_short(l["name"]) for l in layers]
        rep.heading("Hybrid mode: summary")
        single = result.get("single_set")
        rep.table(
            ["quantity", "value"],
            [
                ["link", f"{result['link']['name']}: {result['link']['bandwidth_bits_per_s'] / 1e6:g} Mbps, {result['link']['one_way_delay_s'] * 1e3:g} ms one way"],
                ["decryption-failure probability", f"{result['failure_probability']:.2e}"],
                ["predicted latency, linear layers (s)", result["predicted_s"]],
                ["predicted latency, two-party non-linear layers (s)", result.get("nonlinear_s", 0.0)],
                ["predicted total (s)", result.get("total_s", result["predicted_s"])],
                ["bytes on the wire (MB)", result.get("total_bytes", sum(l["bytes_up"] + l["bytes_down"] for l in layers)) / 1e6],
                ["round trips", result.get("rounds", len(layers))],
                ["Galois key bytes (MB)", sum(l["key_bytes"] for l in layers) / 1e6],
                ["best single parameter set", "none fits every layer" if single is None else _label(single)],
                ["its predicted latency, linear layers (s)", result["single_set_predicted_s"]],
                ["speed-up of per-layer tuning", result["speedup_vs_single_set"]],
            ],
        )
        rep.heading("Hybrid mode: per layer")
        rep.table(
            ["layer", "algorithm", "n", "log q", "t bits", "digits", "noise margin", "worst case", "rotations", "predicted s", "up MB", "down MB", "key MB"],
            [[l["name"], l["algorithm"], l["params"]["n"], sum(l["params"]["q_bits"]), l["params"]["t_bits"], l["params"]["digits"],
              round(l["noise_margin_bits"], 1), round(l["noise_worst_case_bits"], 1), l["rotations"], l["predicted_s"], l["bytes_up"] / 1e6, l["bytes_down"] / 1e6, l["key_bytes"] / 1e6]
             for l in layers],
        )
        series = {"server (HE)": [l["server_s"] for l in layers], "client (encrypt, decrypt)": [l["client_s"] for l in layers], "network (HE)": [l["comm_s"] for l in layers]}
        if "nonlinear_s" in layers[0]:
            series["ReLU + truncation (two-party)"] = [l["nonlinear_s"] for l in layers]
        rep.chart(bar_chart(labels, series, ylabel="seconds", title="Predicted latency per layer", stacked=True),
                  "Where each layer's time goes: the server's homomorphic evaluation, the client's encryption and decryption, the link, and the two-party ReLU and truncation of its outputs.")
        bytes_series = {"client to server": [l["bytes_up"] / 1e6 for l in layers], "server to client": [l["bytes_down"] / 1e6 for l in layers]}
        if "nonlinear_bytes" in layers[0]:
            bytes_series["two-party (both ways)"] = [l["nonlinear_bytes"] / 1e6 for l in layers]
        rep.chart(bar_chart(labels, bytes_series, ylabel="MB", title="Bytes per layer"),
                  "Ciphertexts sent per layer (seeded inputs up, modulus-switched outputs down) and the two-party protocols' traffic.")
        spaces = [l for l in layers if l.get("design_space")]
        if spaces:
            worst = max(spaces, key=lambda l: l["predicted_s"])
            by_alg: dict[str, list] = {}
            for p in worst["design_space"]:
                if p["noise_margin_bits"] > -60:  # hopeless points would squash the axis
                    by_alg.setdefault(p["algorithm"], []).append((p["noise_margin_bits"], p["predicted_s"]))
            rep.chart(scatter_chart(by_alg, xlabel="noise margin (bits); below 0 decryption fails", ylabel="predicted seconds", title=f"Design space of {worst['name']}",
                                    highlight=(worst["noise_margin_bits"], worst["predicted_s"], f"chosen: {worst['algorithm']}"), logy=True),
                      "Each point is one algorithm under one 128-bit parameter set; points left of 0 would fail to decrypt, the star is the "
                      "plan's choice. Points far to the right waste budget: their larger moduli make every operation slower.")
        if any(l.get("single_set_point") for l in layers):
            rep.chart(bar_chart(labels, {"tuned per layer": [l["predicted_s"] for l in layers],
                                         "best single set": [(l.get("single_set_point") or {}).get("predicted_s", 0.0) for l in layers]},
                                ylabel="seconds", title="Per-layer tuning against one parameter set for the network"),
                      "The best single parameter set must fit the noisiest layer, so it over-provisions the others.")
    fhe = result.get("fhe")
    if fhe:
        rep.heading(f"FHE mode: rotation keysets (CKKS logN {fhe['log_n']}, {fhe['bootstraps']} bootstrappings, {fhe['rotations']} rotations)")
        rep.table(["keyset", "keys", "server memory (GB)", "upload, seeded (GB)", "key switches", "predicted rotation time (s)"],
                  [[k["strategy"], k["keys"], k["memory_bytes"] / 1e9, k["wire_bytes"] / 1e9, k["key_switches"], k["rotation_s"]] for k in fhe["keysets"]])
        rep.chart(scatter_chart({k["strategy"].replace("_", "-"): [(k["memory_bytes"] / 1e9, k["rotation_s"])] for k in fhe["keysets"]},
                                xlabel="rotation-key memory on the server (GB)", ylabel="predicted rotation time (s)", title="Rotation keysets: memory against latency"),
                  "Power-of-two keys are few but compose most rotations from several key switches; all-required keys rotate in one switch "
                  "but hold every step at the top level; level-aware keys (004) hold each step only up to the level it is used at.")
        rep.table(["quantity", "004", "ours", "ratio"], [[r["quantity"], r["paper"], r["ours"], r["ratio"]] for r in fhe["comparison_004"]],
                  caption="Next to 004's Tables 3-4 (their HEaAN network and parameters; ours: Lycaon's model of the same network)")
    if result.get("comparison"):
        rep.heading("Hybrid against FHE")
        rep.paragraph("The hybrid mode talks more (a round trip per layer and the two-party protocols' traffic) but computes on small parameters "
                      "without bootstrapping; the FHE mode sends one ciphertext each way and its keys once, and pays in bootstrapping, large "
                      "parameters and key memory (000 Sec. 3).")
        rep.table(["quantity", "hybrid", "fhe"], [[r["quantity"], r["hybrid"], r["fhe"]] for r in result["comparison"]])
    rep.write(path)


def _label(p: dict) -> str:
    return f"n={p['n']} q={'+'.join(map(str, p['q_bits']))} p={'+'.join(map(str, p['p_bits'])) or '-'} digits={p['digits']}"
