"""The planner from Python: what private inference of a model will cost, layer by layer, before
anything is deployed (``lycaon plan MODEL``).

For the hybrid mode every linear layer gets its own BFV parameters and algorithm: the Rust
planner prices every secure parameter set and every algorithm that can run the layer with the
noise model (practical, at a target decryption-failure probability, and worst case) and the cost
model (operation counts times per-operation costs measured once on this machine and cached in
``~/.cache/lycaon/op-costs.json``, plus the client's encryption and decryption and the link), and
keeps the fastest point that leaves a non-negative noise margin.

The plaintext modulus of a layer is the share ring of its outputs: it must hold the layer's
largest accumulator exactly, so its bits come from the quantised model (calibrated on a few
training images when the data set is at hand, else the quantisation's plaintext bound).
"""

from __future__ import annotations

import json
from typing import Any, Optional, Sequence

import numpy as np

from lycaon import _native

__all__ = ["linear_layers", "plan", "write_report"]

#: Safety bits between a layer's calibrated largest accumulator and its plaintext modulus.
T_MARGIN_BITS = 2


def linear_layers(graph) -> list[dict]:
    """The convolutions and fully connected layers of a (simplified) model graph, with their
    input shapes, as the planner takes them."""
    shapes = graph.shapes()
    layers = []
    for node in graph.nodes:
        if node.op not in ("conv", "linear"):
            continue
        in_shape = shapes[node.inputs[0]] if node.inputs else graph.input_shape
        w = np.asarray(node.params["weight"])
        if node.op == "conv":
            c, h, wd = in_shape
            stride = node.attrs.get("stride", (1, 1))
            pads = node.attrs.get("pads", (0, 0, 0, 0))
            if w.shape[2] != w.shape[3] or stride[0] != stride[1] or len(set(pads)) != 1 or h != wd:
                raise ValueError(f"layer {node.name}: the planner takes square inputs, kernels, strides and symmetric padding")
            shape = {"h": h, "w": wd, "c_in": c, "c_out": int(w.shape[0]), "k": int(w.shape[2]), "stride": int(stride[0]), "pad": int(pads[0]), "groups": int(node.attrs.get("groups", 1))}
        else:
            shape = {"h": 1, "w": 1, "c_in": int(w.shape[1]), "c_out": int(w.shape[0]), "k": 1, "stride": 1, "pad": 0, "groups": 1}
        layers.append({"name": node.name, "shape": shape, "weight": w})
    return layers


def _value_bits(model: str, graph, layers: list[dict], calibration_images: int) -> dict[str, tuple[int, int]]:
    """(weight bits, plaintext bits) per layer from the quantised model."""
    from lycaon.frontend.quantize import QuantConfig, quantize  # noqa: PLC0415

    config = QuantConfig()
    x = None
    try:
        from lycaon.frontend import lenet, resnet, zoo  # noqa: PLC0415

        if tuple(graph.input_shape) == (3, 32, 32):
            (train_x, _), prep = zoo.cifar10("train"), resnet.preprocess
        elif tuple(graph.input_shape) == (1, 28, 28):
            from lycaon.data import load_mnist  # noqa: PLC0415

            (train_x, _), prep = load_mnist("train"), lenet.preprocess
        else:
            train_x = None
        if train_x is not None:
            idx = np.random.default_rng(0).choice(len(train_x), min(calibration_images, len(train_x)), replace=False)
            x = prep(train_x[idx])
    except (OSError, ValueError, ImportError):  # no data set here: fall back to the bound
        x = None
    if x is None:
        return {l["name"]: (config.weight_bits + 1, config.plaintext_bits) for l in layers}
    q = quantize(graph, x, config)
    out = {}
    for layer in layers:
        wq = q.layers.get(layer["name"], (None,))[0]
        weight_bits = int(np.ceil(np.log2(np.abs(wq).max() + 1))) + 1 if wq is not None and np.size(wq) else config.weight_bits + 1
        acc = q.accumulator_bits.get(layer["name"], config.plaintext_bits - 1)
        t_bits = int(min(config.plaintext_bits, np.ceil(acc) + 1 + T_MARGIN_BITS))
        out[layer["name"]] = (max(2, weight_bits), max(20, t_bits))
    return out


def plan(model: str, *, link: str = "lan", failure_probability: float = 2.0 ** -40, reserve_bits: float = 0.0,
         algorithms: Sequence[str] = (), design_space: bool = False, calibration_images: int = 16,
         t_bits: Optional[int] = None, cache: Optional[str] = None) -> dict[str, Any]:
    """Plans the hybrid mode of a model (a zoo name or an ONNX/PyTorch file the model front
    imports). Returns the plan: {"layers": [{name, shape, algorithm, params, noise_margin_bits,
    noise_worst_case_bits, predicted_s, server_s, client_s, comm_s, bytes_up, bytes_down,
    key_bytes, rotations, galois_elements, ...}], "predicted_s", "speedup_vs_single_set", ...}."""
    from lycaon.frontend import simplify, zoo  # noqa: PLC0415

    graph = simplify(zoo.load_model(model))
    layers = linear_layers(graph)
    if not layers:
        raise ValueError(f"model {model!r} has no convolution or fully connected layer to plan")
    bits = _value_bits(model, graph, layers, calibration_images)
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
    if cache is not None:
        request["cache"] = cache
    result = json.loads(_native.plan_json(json.dumps(request)))
    result["model"] = model
    return result


def _short(name: str) -> str:
    return name if len(name) <= 18 else name[:8] + ".." + name[-8:]


def write_report(result: dict, path: str) -> None:
    """One self-contained HTML file: the plan's table, per-layer latency (stacked: server, client,
    network) and bytes, the design space of the costliest layer as time against noise margin with
    the chosen point marked (like 003's Fig. 3), and the single-set comparison."""
    from lycaon.report import HtmlReport, bar_chart, scatter_chart  # noqa: PLC0415

    layers = result["layers"]
    labels = [_short(l["name"]) for l in layers]
    rep = HtmlReport(
        f"Lycaon plan: {result.get('model', 'model')} ({result['mode']} mode, link {result['link']['name']})",
        "Every linear layer runs under its own BFV parameters and algorithm, chosen to minimise predicted latency "
        "while keeping a non-negative noise margin: the bits of noise budget left at a decryption-failure "
        f"probability of {result['failure_probability']:.1e}. Times are predictions from operation counts and "
        "per-operation costs measured on this machine.",
    )
    rep.heading("Summary")
    single = result.get("single_set")
    rep.table(
        ["quantity", "value"],
        [
            ["predicted latency (s)", result["predicted_s"]],
            ["bytes up + down (MB)", sum(l["bytes_up"] + l["bytes_down"] for l in layers) / 1e6],
            ["Galois key bytes (MB)", sum(l["key_bytes"] for l in layers) / 1e6],
            ["best single parameter set", "none fits every layer" if single is None else _label(single)],
            ["its predicted latency (s)", result["single_set_predicted_s"]],
            ["speed-up of per-layer tuning", result["speedup_vs_single_set"]],
        ],
    )
    rep.heading("Per layer")
    rep.table(
        ["layer", "algorithm", "n", "log q", "t bits", "digits", "noise margin", "rotations", "predicted s", "up MB", "down MB", "key MB"],
        [[l["name"], l["algorithm"], l["params"]["n"], sum(l["params"]["q_bits"]), l["params"]["t_bits"], l["params"]["digits"],
          round(l["noise_margin_bits"], 1), l["rotations"], l["predicted_s"], l["bytes_up"] / 1e6, l["bytes_down"] / 1e6, l["key_bytes"] / 1e6]
         for l in layers],
    )
    rep.chart(bar_chart(labels, {"server": [l["server_s"] for l in layers], "client": [l["client_s"] for l in layers], "network": [l["comm_s"] for l in layers]},
                        ylabel="seconds", title="Predicted latency per layer", stacked=True),
              "Where each layer's time goes: the server's homomorphic evaluation, the client's encryption and decryption, and the link.")
    rep.chart(bar_chart(labels, {"client to server": [l["bytes_up"] / 1e6 for l in layers], "server to client": [l["bytes_down"] / 1e6 for l in layers]},
                        ylabel="MB", title="Bytes per layer"),
              "Ciphertexts sent per layer: seeded inputs up, modulus-switched outputs down.")
    spaces = [l for l in layers if l.get("design_space")]
    if spaces:
        worst = max(spaces, key=lambda l: l["predicted_s"])
        by_alg: dict[str, list] = {}
        for p in worst["design_space"]:
            by_alg.setdefault(p["algorithm"], []).append((p["noise_margin_bits"], p["predicted_s"]))
        rep.chart(scatter_chart(by_alg, xlabel="noise margin (bits)", ylabel="predicted seconds", title=f"Design space of {worst['name']}",
                                highlight=(worst["noise_margin_bits"], worst["predicted_s"], f"chosen: {worst['algorithm']}"), logy=True),
                  "Each point is one algorithm under one 128-bit parameter set that decrypts correctly; the star is the plan's choice. "
                  "Points far to the right waste budget: their larger moduli make every operation slower.")
    if any(l.get("single_set_point") for l in layers):
        rep.chart(bar_chart(labels, {"tuned per layer": [l["predicted_s"] for l in layers],
                                     "best single set": [(l.get("single_set_point") or {}).get("predicted_s", 0.0) for l in layers]},
                            ylabel="seconds", title="Per-layer tuning against one parameter set for the network"),
                  "The best single parameter set must fit the noisiest layer, so it over-provisions the others.")
    rep.write(path)


def _label(p: dict) -> str:
    return f"n={p['n']} q={'+'.join(map(str, p['q_bits']))} p={'+'.join(map(str, p['p_bits'])) or '-'} digits={p['digits']}"
