"""Float executor of the IR in numpy (NCHW), the reference the encrypted pipelines are checked
against after quantisation."""

from __future__ import annotations

import numpy as np

from .ir import Graph, ModelError, Node


def _pad(x: np.ndarray, pads, value=0.0) -> np.ndarray:
    top, left, bottom, right = pads
    return np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=value)


def _windows(x: np.ndarray, kh: int, kw: int, sh: int, sw: int) -> np.ndarray:
    """(N, C, OH, OW, kh, kw) view of sliding windows."""
    n, c, h, w = x.shape
    oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    s = x.strides
    return np.lib.stride_tricks.as_strided(x, (n, c, oh, ow, kh, kw), (s[0], s[1], s[2] * sh, s[3] * sw, s[2], s[3]), writeable=False)


def conv2d(x: np.ndarray, w: np.ndarray, b, stride, pads, groups: int) -> np.ndarray:
    x = _pad(x, pads)
    out_c, in_per_group, kh, kw = w.shape
    cols = _windows(x, kh, kw, stride[0], stride[1])
    n, _, oh, ow = cols.shape[:4]
    outs = []
    opg = out_c // groups
    for g in range(groups):
        # im2col then one BLAS matrix product per group.
        xg = cols[:, g * in_per_group:(g + 1) * in_per_group].transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, in_per_group * kh * kw)
        wg = w[g * opg:(g + 1) * opg].reshape(opg, -1)
        outs.append((xg @ wg.T).reshape(n, oh, ow, opg).transpose(0, 3, 1, 2))
    y = np.concatenate(outs, axis=1)
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y


def run_node(node: Node, ins: list, relu=None) -> np.ndarray:
    """One node in float64; `relu` replaces max(x, 0) (an approximation under study), and then
    clip(x, 0, M) is computed through it as relu(x) - relu(x - M)."""
    x, a, p = ins[0], node.attrs, node.params
    if node.op == "conv":
        return conv2d(x, p["weight"], p.get("bias"), a.get("stride", (1, 1)), a.get("pads", (0, 0, 0, 0)), a.get("groups", 1))
    if node.op == "batchnorm":
        inv = p["scale"] / np.sqrt(p["var"] + a.get("eps", 1e-5))
        return (x - p["mean"].reshape(1, -1, 1, 1)) * inv.reshape(1, -1, 1, 1) + p["bias"].reshape(1, -1, 1, 1)
    if node.op == "relu":
        return np.maximum(x, 0) if relu is None else relu(x)
    if node.op == "clip":
        high = float(a["max"])
        return np.clip(x, 0.0, high) if relu is None else relu(x) - relu(x - high)
    if node.op == "poly":
        coeffs = np.asarray(p["coefficients"])
        if coeffs.ndim == 1:
            return np.polynomial.polynomial.polyval(x, coeffs)
        # One row per channel (axis 1), broadcast over the other axes; Horner from the top.
        rows = coeffs.T.reshape((coeffs.shape[1], 1, coeffs.shape[0]) + (1,) * (x.ndim - 2))
        y = np.broadcast_to(rows[-1], x.shape).astype(np.result_type(x, coeffs))
        for c in rows[-2::-1]:
            y = y * x + c
        return y
    if node.op in ("maxpool", "avgpool"):
        k, s = a["kernel"], a.get("stride", a["kernel"])
        padded = _pad(x, a.get("pads", (0, 0, 0, 0)), -np.inf if node.op == "maxpool" else 0.0)
        win = _windows(padded, k[0], k[1], s[0], s[1])
        return win.max(axis=(4, 5)) if node.op == "maxpool" else win.mean(axis=(4, 5))
    if node.op == "global_avgpool":
        return x.mean(axis=(2, 3), keepdims=True)
    if node.op == "flatten":
        return x.reshape(x.shape[0], -1)
    if node.op == "linear":
        y = x @ p["weight"].T
        return y + p["bias"] if p.get("bias") is not None else y
    if node.op == "add":
        return ins[0] + ins[1]
    if node.op == "concat":
        return np.concatenate(ins, axis=1)
    raise ModelError(f"{node.describe()}: no float kernel")


def run_float(graph: Graph, x: np.ndarray, batch: int = 64, progress=None, relu=None) -> np.ndarray:
    """Runs a batch (N, *input_shape) through the graph in float64 and returns the output;
    `progress(done)` is called after each chunk of `batch` inputs; `relu`, a function on arrays,
    replaces every ReLU (e.g. the FHE mode's polynomial one, `approx.composite_relu`) and every
    clip(x, 0, M), as relu(x) - relu(x - M)."""
    x = np.asarray(x, dtype=np.float64)
    if x.shape[1:] != tuple(graph.input_shape):
        raise ModelError(f"input has shape {x.shape[1:]}, the model expects {tuple(graph.input_shape)}")
    outs = []
    schedule = graph.release_schedule()
    for start in range(0, len(x), batch):
        values = {graph.input_name: x[start:start + batch]}
        for node, done in zip(graph.nodes, schedule):
            values[node.output] = run_node(node, [values[i] for i in node.inputs], relu)
            for name in done:
                del values[name]
        outs.append(values[graph.output])
        if progress is not None:
            progress(min(start + batch, len(x)))
    return np.concatenate(outs)
