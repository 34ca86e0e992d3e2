"""Graph rewrites that keep the function and shrink the encrypted work: batch-norm folded into
the convolution or linear layer before it, chains of 1x1 convolutions composed into one, and
max-pooling moved before the ReLU (or ReLU6-style clip) that feeds it."""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from .ir import MONOTONE_ACTIVATIONS, Graph, ModelError, Node


def _consumers(graph: Graph, tensor: str) -> list[Node]:
    return [n for n in graph.nodes if tensor in n.inputs]


def _float_copies(graph: Graph) -> list[Node]:
    """The graph's nodes with their parameters copied as float64 arrays (rewrites change the
    copies; the caller's graph keeps its weights)."""
    return [Node(n.op, n.name, list(n.inputs), n.output, dict(n.attrs), {k: (None if v is None else np.array(v, dtype=np.float64)) for k, v in n.params.items()}, n.shape)
            for n in graph.nodes]


def _rebuild(graph: Graph, nodes: list[Node], renames: dict[str, str]) -> Graph:
    out = Graph(graph.input_name, graph.input_shape, name=graph.name)
    for n in nodes:
        out.add(Node(n.op, n.name, [renames.get(i, i) for i in n.inputs], n.output, dict(n.attrs), dict(n.params)))
    out.output = renames.get(graph.output, graph.output)
    return out


def _name_maker(graph: Graph) -> Callable[[str], str]:
    """A function that returns its argument, primed until no tensor or node of ``graph`` (nor an
    earlier answer) has that name."""
    taken = {graph.input_name, *(n.output for n in graph.nodes), *(n.name for n in graph.nodes)}

    def unused(name: str) -> str:
        while name in taken:
            name += "'"
        taken.add(name)
        return name

    return unused


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
    2x2 pools: 4x). clip(x, 0, M) (ReLU6) is monotone too and moves the same way. Tensor names
    stay: the activation's output tensor now holds the pooled values.

    A pool after a channel concat of such activations (SqueezeNet's fire modules) pools each
    part first (max-pooling is per channel): maxpool_i -> activation_i -> concat, the concat
    writing the pool's output tensor."""
    by_output = {n.output: n for n in graph.nodes}
    unused = _name_maker(graph)

    def read_once(tensor: str, ops) -> Optional[Node]:
        """The node of one of `ops` writing `tensor`, where nothing else reads it."""
        node = by_output.get(tensor)
        if node is not None and node.op in ops and len(_consumers(graph, tensor)) == 1 and graph.output != tensor:
            return node
        return None

    swapped: dict[str, Node] = {}  # activation output -> the pool it now follows
    concats: dict[str, Node] = {}  # concat output -> the pool it now writes for
    for node in graph.nodes:
        if node.op != "maxpool":
            continue
        concat = read_once(node.inputs[0], ("concat",))
        if read_once(node.inputs[0], MONOTONE_ACTIVATIONS) is not None:
            swapped[node.inputs[0]] = node
        elif concat is not None and all(read_once(i, MONOTONE_ACTIVATIONS) for i in concat.inputs):
            concats[concat.output] = node
            for i in concat.inputs:
                swapped[i] = node
    nodes: list[Node] = []
    for node in graph.nodes:
        pool = swapped.get(node.output)
        if pool is not None and pool.inputs[0] == node.output:
            nodes.append(Node("maxpool", pool.name, list(node.inputs), node.output, dict(pool.attrs), dict(pool.params)))
            nodes.append(Node(node.op, node.name, [node.output], pool.output, dict(node.attrs), dict(node.params)))
        elif pool is not None:  # one part of a concat: its activation keeps its output tensor
            pooled = unused(f"{node.output}:pooled")
            nodes.append(Node("maxpool", unused(f"{pool.name}.{node.name}"), list(node.inputs), pooled, dict(pool.attrs), dict(pool.params)))
            nodes.append(Node(node.op, node.name, [pooled], node.output, dict(node.attrs), dict(node.params)))
        elif node.output in concats:
            nodes.append(Node("concat", node.name, list(node.inputs), concats[node.output].output, dict(node.attrs), dict(node.params)))
        elif not (node.op == "maxpool" and (node.inputs[0] in swapped or node.inputs[0] in concats)):
            nodes.append(node)
    return _rebuild(graph, nodes, {})


def subsample_before_pointwise(graph: Graph) -> Graph:
    """Rewrites a 1x1 convolution of stride s > 1 without padding (ResNet's downsampling
    shortcuts) as a 1x1 average pool of stride s, a subsample (a window of one value: multiplier
    1, no truncation, local on shares), feeding the same convolution at stride 1. The values are
    the same; the homomorphic convolution takes s^2 times fewer inputs (ResNet-50's three such
    layers took 23 s of its 75 s of server HE, and 147 MiB of traffic). For the hybrid mode."""
    unused = _name_maker(graph)
    nodes: list[Node] = []
    for node in graph.nodes:
        stride = tuple(int(v) for v in node.attrs.get("stride", (1, 1)))
        pointwise = node.op == "conv" and np.shape(node.params["weight"])[2:] == (1, 1) and not any(node.attrs.get("pads", ()))
        if pointwise and stride != (1, 1):
            sub = unused(f"{node.name}.subsample")
            nodes.append(Node("avgpool", sub, [node.inputs[0]], sub, {"kernel": (1, 1), "stride": stride, "pads": (0, 0, 0, 0)}))
            nodes.append(Node("conv", node.name, [sub, *node.inputs[1:]], node.output, {**node.attrs, "stride": (1, 1)}, dict(node.params)))
        else:
            nodes.append(node)
    return _rebuild(graph, nodes, {})


def simplify(graph: Graph) -> Graph:
    """The rewrites the HE pipelines want: fold batch-norm, compose pointwise convolutions, pool
    before ReLU (and clip)."""
    return pool_before_relu(compose_pointwise(fold_batchnorm(graph)))


def monic_quadratics(graph: Graph, scale_at_adds: bool = False) -> Graph:
    """Rewrites every per-channel quadratic a x^2 + b x + c (a `poly` node of degree 2) as
    a (x^2 + (b/a) x + c/a) and moves the factor a out of the node, so that each quadratic is
    monic: under CKKS (x + b/2a)^2 + const is one ciphertext product (002's one level per
    AESPA activation), the shift and the constant being free additions.

    The factors travel as a pending per-channel scale S (the tensor holds values v with true
    values S v) until a node absorbs them exactly:
    - a conv/linear reading the tensor takes S into its input-channel weights;
    - a quadratic reading it becomes a S^2 x^2 + b S x + c (then monic in turn);
    - an add whose other input comes from a conv/linear used only there scales that layer's
      output channels (and bias) by S, and the sum carries S;
    - global average pooling and flatten pass S on (flatten: per feature).
    Raises ModelError where a scale would have to be applied by a product of its own (a
    quadratic with a = 0 for some channel, an add of two scaled inputs, a scale reaching the
    output).

    `scale_at_adds`: an add applies the scales of its inputs itself, each by a per-channel product
    of its own (a linear `poly` node, coefficients (0, S, 0): one level under CKKS), and its sum
    carries none. Along a residual stream the carried scale otherwise compounds (the next
    quadratic's a takes S^2, block after block, until float64 overflows); on a ResNet's identity
    shortcut the product costs no level that matters, the residual branch beside it spending
    five."""
    copies = _float_copies(graph)
    by_output = {n.output: n for n in copies}
    pending: dict[str, np.ndarray] = {}
    nodes: list[Node] = []
    for node in copies:
        if node.op == "add" and scale_at_adds:
            for k, name in enumerate(node.inputs):
                if name in pending:
                    factor = pending[name]
                    zero = np.zeros_like(factor)
                    scale = Node("poly", f"{node.name}.scale{k}", [name], f"{node.name}.scale{k}:out", {"kind": "channel-scale"},
                                 {"coefficients": np.stack([zero, factor, zero], axis=1)})
                    nodes.append(scale)
                    node.inputs[k] = scale.output
            nodes.append(node)
            continue
        nodes.append(node)
        s = pending.get(node.inputs[0]) if node.inputs else None
        if node.op in ("conv", "linear"):
            if s is not None:
                w = node.params["weight"]
                node.params["weight"] = w * s.reshape((1, -1) + (1,) * (w.ndim - 2))
        elif node.op == "poly":
            coeffs = node.params["coefficients"]
            if coeffs.ndim != 2 or coeffs.shape[1] != 3:
                if s is not None:
                    raise ModelError(f"{node.describe()}: a pending per-channel scale reaches a polynomial that is not a per-channel quadratic")
                continue
            c, b, a = coeffs[:, 0], coeffs[:, 1], coeffs[:, 2]
            if s is not None:
                b, a = b * s, a * s * s
            if np.any(a == 0):
                raise ModelError(f"{node.describe()}: channel(s) {np.flatnonzero(a == 0).tolist()} have no square term; cannot make the quadratic monic")
            node.params["coefficients"] = np.stack([c / a, b / a, np.ones_like(a)], axis=1)
            pending[node.output] = a
        elif node.op == "add":
            s0, s1 = pending.get(node.inputs[0]), pending.get(node.inputs[1])
            if s0 is not None and s1 is not None:
                raise ModelError(f"{node.describe()}: both inputs carry a scale")
            scaled, other = (node.inputs[0], node.inputs[1]) if s0 is not None else (node.inputs[1], node.inputs[0])
            s = s0 if s0 is not None else s1
            if s is not None:
                producer = by_output.get(other)
                if producer is None or producer.op not in ("conv", "linear") or len(_consumers(graph, other)) != 1:
                    raise ModelError(f"{node.describe()}: its unscaled input '{other}' is not a layer of its own that could take the scale")
                w = producer.params["weight"]
                producer.params["weight"] = w / s.reshape((-1,) + (1,) * (w.ndim - 1))
                if producer.params.get("bias") is not None:
                    producer.params["bias"] = producer.params["bias"] / s
                pending[node.output] = s
        elif node.op in ("global_avgpool", "avgpool") and s is not None:
            pending[node.output] = s
        elif node.op == "flatten" and s is not None:
            shape = graph.shapes()[node.inputs[0]]
            pending[node.output] = np.repeat(s, int(np.prod(shape[1:])) if len(shape) == 3 else 1)
        elif s is not None:
            raise ModelError(f"{node.describe()}: a pending per-channel scale cannot pass a {node.op}")
    if graph.output in pending:
        raise ModelError(f"the output '{graph.output}' would carry a per-channel scale")
    return _rebuild(graph, nodes, {})


def relu_input_bound(graph: Graph, x: np.ndarray, batch: int = 64) -> float:
    """The largest |value| entering any ReLU of `graph` on the inputs `x` (N, *input_shape), in
    float64: what [`scale_relu_inputs`] must divide by so that a polynomial ReLU on [-1, 1] sees
    every value (take a margin above it for unseen inputs)."""
    from .executor import run_float  # noqa: PLC0415

    seen = [0.0]

    def observed_relu(v: np.ndarray) -> np.ndarray:
        seen[0] = max(seen[0], float(np.abs(v).max()))
        return np.maximum(v, 0)

    run_float(graph, x, batch=batch, relu=observed_relu)
    return seen[0]


def scale_relu_inputs(graph: Graph, bound: float) -> Graph:
    """The same function with every tensor between the input and the last layer divided by
    `bound`, so that ReLU inputs within [-bound, bound] reach the ReLUs within [-1, 1] (the
    interval of the FHE mode's composite minimax ReLU). ReLU, max- and average pooling, additions
    and concatenation are positively homogeneous, so it is enough to divide the first layers'
    weights (those reading the graph's input) and every conv/linear bias by `bound`, and to
    multiply the weights of the layers that write the output by it; clip(x, 0, M) is not, but
    clip(x / b, 0, M / b) = clip(x, 0, M) / b, so its M is divided by `bound` as well. Needs
    batch-norm folded (`simplify`); raises ModelError for a polynomial activation (not
    homogeneous)."""
    if not (np.isfinite(bound) and bound > 0):
        raise ModelError(f"the bound must be a positive number, not {bound}")
    copies = _float_copies(graph)
    # Tensors that carry the division: everything downstream of the input through homogeneous ops.
    carried: set[str] = set()
    for node in copies:
        if node.op in ("batchnorm", "poly"):
            raise ModelError(f"{node.describe()}: scaling needs a graph of positively homogeneous operations (fold batch-norm first; polynomials are not homogeneous)")
        if node.op in ("conv", "linear") and node.output != graph.output or any(i in carried for i in node.inputs):
            carried.add(node.output)
        if node.op == "clip" and node.inputs[0] in carried:
            node.attrs["max"] = float(node.attrs["max"]) / bound
        if node.op not in ("conv", "linear"):
            continue
        if graph.input_name in node.inputs:
            node.params["weight"] = node.params["weight"] / bound
        if node.output == graph.output:
            node.params["weight"] = node.params["weight"] * bound
        elif node.params.get("bias") is not None:
            node.params["bias"] = node.params["bias"] / bound
    if not any(n.output == graph.output and n.op in ("conv", "linear") for n in copies):
        raise ModelError("the graph's output is not written by a conv or linear layer that could take the scale back")
    return _rebuild(graph, copies, {})
