"""A small intermediate representation of a convolutional network, with shapes inferred and
validated when the graph is built.

Tensors are NCHW (batch first); a graph has one input and one output, and nodes are kept in
topological order. Every node names the tensors it reads and the one it writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

SUPPORTED_OPS = ("conv", "batchnorm", "relu", "clip", "poly", "maxpool", "avgpool", "global_avgpool", "linear", "flatten", "add", "concat")

#: Element-wise activations that are monotone (non-decreasing) and map 0 to 0: ReLU and
#: clip(x, 0, max) (ReLU6 and its kind). Both commute with max-pooling, and both are exact
#: two-party comparisons on integers.
MONOTONE_ACTIVATIONS = ("relu", "clip")


class ModelError(ValueError):
    """A model Lycaon cannot take, with the node and the reason."""


@dataclass
class Node:
    """One operation. `params` holds arrays (weights), `attrs` holds integers and tuples."""

    op: str
    name: str
    inputs: list[str]
    output: str
    attrs: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    shape: tuple = ()

    def describe(self) -> str:
        return f"{self.op} node '{self.name}'"


def clip_node(name: str, inputs: list[str], output: str, low, high, what: str) -> Node:
    """The IR node of clip(x, low, high) as importers meet it (ONNX Clip, ReLU6, Hardtanh,
    clamp): `low` must be 0; `high` None or infinite makes it a ReLU, a finite positive `high` a
    `clip` node. `what` names the source node in errors (e.g. "Clip node 'c1'")."""
    low = None if low is None else float(np.asarray(low, dtype=np.float64).reshape(-1)[0])
    high = None if high is None else float(np.asarray(high, dtype=np.float64).reshape(-1)[0])
    if high is not None and (np.isinf(high) and high > 0 or high >= float(np.finfo(np.float32).max)):
        high = None  # +inf, or the float32 maximum older opsets write for "no upper bound"
    if low is None or (np.isinf(low) and low < 0) or low <= -float(np.finfo(np.float32).max):
        raise ModelError(f"{what}: clipping without a lower bound of 0 is not supported (only ReLU and clip(x, 0, max) such as ReLU6 are)")
    if low != 0.0:
        raise ModelError(f"{what}: clipping from {low:g} is not supported; only a lower bound of 0 (ReLU, ReLU6-style clip(x, 0, max)) is")
    if high is None:
        return Node("relu", name, list(inputs), output)
    if not np.isfinite(high) or high <= 0.0:
        raise ModelError(f"{what}: clip(x, 0, {high:g}) needs an upper bound above 0")
    return Node("clip", name, list(inputs), output, {"min": 0.0, "max": high})


def _conv_out(size: int, kernel: int, stride: int, pad_lo: int, pad_hi: int) -> int:
    return (size + pad_lo + pad_hi - kernel) // stride + 1


@dataclass
class Graph:
    """A validated network: input shape (C, H, W) or (F,), nodes, and the output tensor name."""

    input_name: str
    input_shape: tuple
    nodes: list[Node] = field(default_factory=list)
    output: Optional[str] = None
    name: str = "model"

    def shapes(self) -> dict[str, tuple]:
        out = {self.input_name: self.input_shape}
        for node in self.nodes:
            out[node.output] = node.shape
        return out

    def add(self, node: Node) -> Node:
        """Appends a node after inferring and checking its output shape."""
        shapes = self.shapes()
        if node.op not in SUPPORTED_OPS:
            raise ModelError(f"{node.describe()}: unsupported operation; supported: {', '.join(SUPPORTED_OPS)}")
        if node.output in shapes:
            raise ModelError(f"{node.describe()}: tensor '{node.output}' is written twice")
        for name in node.inputs:
            if name not in shapes:
                raise ModelError(f"{node.describe()}: input '{name}' is not produced by any earlier node")
        node.shape = _infer(node, [shapes[i] for i in node.inputs])
        self.nodes.append(node)
        self.output = node.output
        return node

    def release_schedule(self) -> list[list[str]]:
        """Per node, the tensors nothing after it reads (the output is kept): what an executor
        can free after running it, so one image of an ImageNet network holds only live tensors."""
        last: dict[str, int] = {}
        for i, node in enumerate(self.nodes):
            for name in node.inputs:
                last[name] = i
        schedule: list[list[str]] = [[] for _ in self.nodes]
        for name, i in last.items():
            if name != self.output:
                schedule[i].append(name)
        return schedule

    def summary(self) -> list[dict]:
        """One row per node: name, op, output shape, parameter count, multiply-accumulates."""
        rows = []
        shapes = self.shapes()
        for node in self.nodes:
            params = int(sum(np.asarray(p).size for p in node.params.values() if p is not None))
            rows.append({"name": node.name, "op": node.op, "shape": node.shape, "params": params, "macs": _macs(node, shapes)})
        return rows


def _macs(node: Node, shapes: dict) -> int:
    if node.op == "conv":
        w = node.params["weight"]
        return int(np.prod(node.shape) * w.shape[1] * w.shape[2] * w.shape[3])
    if node.op == "linear":
        return int(node.params["weight"].size)
    return 0


def _infer(node: Node, ins: Sequence[tuple]) -> tuple:
    op, a = node.op, node.attrs
    x = ins[0]
    if op in ("conv", "maxpool", "avgpool", "batchnorm", "global_avgpool") and len(x) != 3:
        raise ModelError(f"{node.describe()}: expects a (C, H, W) input, got shape {x}")
    if op == "conv":
        w = node.params.get("weight")
        if w is None or w.ndim != 4:
            raise ModelError(f"{node.describe()}: weight must have shape (out, in/groups, kh, kw)")
        groups = a.get("groups", 1)
        if x[0] != w.shape[1] * groups or w.shape[0] % groups:
            raise ModelError(f"{node.describe()}: weight {w.shape} with groups={groups} does not fit {x[0]} input channels")
        if a.get("dilation", (1, 1)) != (1, 1):
            raise ModelError(f"{node.describe()}: dilation other than 1 is not supported")
        s, p = a.get("stride", (1, 1)), a.get("pads", (0, 0, 0, 0))
        h = _conv_out(x[1], w.shape[2], s[0], p[0], p[2])
        wd = _conv_out(x[2], w.shape[3], s[1], p[1], p[3])
        if h < 1 or wd < 1:
            raise ModelError(f"{node.describe()}: output would be empty for input {x}")
        return (w.shape[0], h, wd)
    if op == "batchnorm":
        for key in ("scale", "bias", "mean", "var"):
            if node.params[key].shape != (x[0],):
                raise ModelError(f"{node.describe()}: {key} has shape {node.params[key].shape}, expected ({x[0]},)")
        return x
    if op == "poly":
        # Coefficients in ascending order: one vector for every value, or one row per channel
        # (per feature on a flat input), as AESPA's folded quadratics.
        coeffs = np.asarray(node.params.get("coefficients"))
        if coeffs.ndim == 1 and coeffs.size >= 1:
            return x
        if coeffs.ndim == 2 and coeffs.shape[1] >= 1 and coeffs.shape[0] == x[0]:
            return x
        raise ModelError(f"{node.describe()}: coefficients of shape {coeffs.shape} do not fit input {x}: "
                         f"give (degree + 1,) for all values or ({x[0]}, degree + 1) per channel")
    if op == "relu":
        return x
    if op == "clip":
        low, high = a.get("min", 0.0), a.get("max")
        if low != 0.0 or high is None or not np.isfinite(high) or high <= 0.0:
            raise ModelError(f"{node.describe()}: attrs must be {{'min': 0.0, 'max': M}} with a finite M > 0, got min={low!r}, max={high!r}")
        return x
    if op in ("maxpool", "avgpool"):
        k, s, p = a["kernel"], a.get("stride", a["kernel"]), a.get("pads", (0, 0, 0, 0))
        return (x[0], _conv_out(x[1], k[0], s[0], p[0], p[2]), _conv_out(x[2], k[1], s[1], p[1], p[3]))
    if op == "global_avgpool":
        return (x[0], 1, 1)
    if op == "flatten":
        return (int(np.prod(x)),)
    if op == "linear":
        w = node.params["weight"]
        if len(x) != 1 or w.shape[1] != x[0]:
            raise ModelError(f"{node.describe()}: weight {w.shape} does not fit input shape {x} (flatten first)")
        return (w.shape[0],)
    if op == "concat":
        if len(ins) < 2 or any(len(i) != 3 or i[1:] != x[1:] for i in ins):
            raise ModelError(f"{node.describe()}: channel concatenation needs (C, H, W) inputs of one spatial size, got {list(ins)}")
        return (sum(i[0] for i in ins), x[1], x[2])
    if op == "add":
        if len(ins) != 2 or ins[0] != ins[1]:
            raise ModelError(f"{node.describe()}: residual addition needs two inputs of one shape, got {list(ins)}")
        return x
    raise ModelError(f"{node.describe()}: unsupported operation")
