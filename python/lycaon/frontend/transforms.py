"""Graph rewrites that keep the function and shrink the encrypted work: batch-norm folded into
the convolution or linear layer before it, chains of 1x1 convolutions composed into one, and
max-pooling moved before the ReLU that feeds it."""

from __future__ import annotations

import numpy as np

from .ir import Graph, Node


def _consumers(graph: Graph, tensor: str) -> list[Node]:
    return [n for n in graph.nodes if tensor in n.inputs]


def _rebuild(graph: Graph, nodes: list[Node], renames: dict[str, str]) -> Graph:
    out = Graph(graph.input_name, graph.input_shape, name=graph.name)
    for n in nodes:
        out.add(Node(n.op, n.name, [renames.get(i, i) for i in n.inputs], n.output, dict(n.attrs), dict(n.params)))
    out.output = renames.get(graph.output, graph.output)
    return out


def fold_batchnorm(graph: Graph) -> Graph:
    """Folds each batch-norm into the conv/linear node that feeds only it."""
    nodes: list[Node] = []
    renames: dict[str, str] = {}
    # Work on copies: the caller's graph keeps its weights.
    copies = [Node(n.op, n.name, list(n.inputs), n.output, dict(n.attrs), dict(n.params), n.shape) for n in graph.nodes]
    by_output = {n.output: n for n in copies}
    for node in copies:
        prev = by_output.get(node.inputs[0]) if node.op == "batchnorm" else None
        if prev is not None and prev.op in ("conv", "linear") and len(_consumers(graph, prev.output)) == 1 and graph.output != prev.output:
            p = node.params
            inv = p["scale"] / np.sqrt(p["var"] + node.attrs.get("eps", 1e-5))
            w = prev.params["weight"]
            prev.params["weight"] = w * inv.reshape((-1,) + (1,) * (w.ndim - 1))
            b = prev.params.get("bias")
            prev.params["bias"] = ((b if b is not None else 0.0) - p["mean"]) * inv + p["bias"]
            renames[node.output] = prev.output
            continue
        nodes.append(node)
    return _rebuild(graph, nodes, renames)


def compose_pointwise(graph: Graph) -> Graph:
    """Replaces conv(1x1, stride s) -> conv(1x1, stride r), both without padding or groups and the
    first used only by the second, with one 1x1 convolution of stride s*r (subsampling composes:
    ceil(ceil(h/s)/r) = ceil(h/(s r)))."""
    nodes: list[Node] = []
    renames: dict[str, str] = {}
    by_output = {n.output: n for n in graph.nodes}
    removed = set()

    def pointwise(n: Node) -> bool:
        return n.op == "conv" and n.params["weight"].shape[2:] == (1, 1) and n.attrs.get("groups", 1) == 1 and not any(n.attrs.get("pads", (0, 0, 0, 0)))

    for node in graph.nodes:
        prev = by_output.get(renames.get(node.inputs[0], node.inputs[0]))
        if (
            pointwise(node) and prev is not None and pointwise(prev)
            and len(_consumers(graph, prev.output)) == 1 and prev.params.get("bias") is None
        ):
            w = node.params["weight"][:, :, 0, 0] @ prev.params["weight"][:, :, 0, 0]
            s1, s2 = prev.attrs.get("stride", (1, 1)), node.attrs.get("stride", (1, 1))
            attrs = dict(prev.attrs, stride=(s1[0] * s2[0], s1[1] * s2[1]))
            merged = Node("conv", node.name, list(prev.inputs), node.output, attrs, {"weight": w[:, :, None, None], "bias": node.params.get("bias")})
            removed.add(prev.output)
            nodes = [n for n in nodes if n.output != prev.output]
            nodes.append(merged)
            by_output[node.output] = merged
            continue
        nodes.append(node)
    return _rebuild(graph, nodes, renames)


def pool_before_relu(graph: Graph) -> Graph:
    """Rewrites relu -> maxpool (the ReLU's output read by the pool alone) as maxpool -> relu:
    max and ReLU commute (ReLU is monotone; a window of negatives gives 0 either way), and the
    ReLU then runs on the pooled map, k^2/s^2 times fewer values (ResNet-50's stem: 4x, LeNet-5's
    2x2 pools: 4x). Tensor names stay: the ReLU's output tensor now holds the pooled values."""
    by_output = {n.output: n for n in graph.nodes}
    swapped: dict[str, Node] = {}
    for node in graph.nodes:
        prev = by_output.get(node.inputs[0]) if node.op == "maxpool" else None
        if prev is not None and prev.op == "relu" and len(_consumers(graph, prev.output)) == 1 and graph.output != prev.output:
            swapped[prev.output] = node
    nodes: list[Node] = []
    for node in graph.nodes:
        pool = swapped.get(node.output)
        if pool is not None:
            nodes.append(Node("maxpool", pool.name, list(node.inputs), node.output, dict(pool.attrs), dict(pool.params)))
            nodes.append(Node("relu", node.name, [node.output], pool.output, dict(node.attrs), dict(node.params)))
        elif not (node.op == "maxpool" and node.inputs[0] in swapped):
            nodes.append(node)
    return _rebuild(graph, nodes, {})


def simplify(graph: Graph) -> Graph:
    """The rewrites the HE pipelines want: fold batch-norm, compose pointwise convolutions, pool
    before ReLU."""
    return pool_before_relu(compose_pointwise(fold_batchnorm(graph)))
