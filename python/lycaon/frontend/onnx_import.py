"""Import of ONNX models into the IR (the `onnx` package; opsets 9 and later).

Batch-norm, dropout and identity nodes are handled; Clip(x, 0, M) (ReLU6) becomes a `clip` node
and Clip(x, 0) a ReLU, with the bounds from constant inputs (opset 11 and later) or attributes
(opsets 6 to 10); a stride-2 slice followed by a zero channel pad (the "option A" ResNet shortcut
that PyTorch exports as Slice + Pad) becomes a fixed 1x1 convolution, which the encrypted pipeline
treats like any other linear layer. Element-wise polynomials of one activation built from Mul,
Pow (a constant integer exponent), Add, Sub, Div by a constant and Neg, with scalar or per-channel
constants (x * x as in CryptoNets and Orion, a x^2 + b x + c), become one `poly` node of degree 2
at most (`polynomial.py`), named after the node that completes it; an Add of a constant right
after a MatMul is the linear layer's bias, and an Add of two different activations a residual
`add`. The first node that cannot be imported (in the graph's topological order) stops the import
with a ModelError naming it, its operator and why.
"""

from __future__ import annotations

from typing import Union

import numpy as np

from .ir import Graph, ModelError, Node, clip_node
from .polynomial import Polynomial, channel_constant, combine, tensor_operand, write_pending

SUPPORTED_ONNX_OPS = (
    "Conv", "BatchNormalization", "Relu", "Clip", "MaxPool", "AveragePool", "GlobalAveragePool", "Flatten", "Reshape",
    "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Pow", "Neg", "Concat", "Slice", "Pad", "Identity", "Dropout", "Constant",
)

#: Element-wise operators that build a polynomial of one activation (`polynomial.combine`).
_POLYNOMIAL_OPS = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow", "Neg": "neg"}


#: Why common operators are refused (the rest: "no IR operation computes it").
_WHY_UNSUPPORTED = {
    **dict.fromkeys(
        ("Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Gelu", "Erf", "Elu", "Selu", "Celu", "LeakyRelu", "PRelu", "Softplus", "Mish", "Exp", "Log"),
        "a non-linear activation other than ReLU or clip(x, 0, max) has no exact integer twin or two-party protocol here; retrain with ReLU or ReLU6",
    ),
    "Softmax": "a softmax has no exact integer twin; a trailing Softmax does not change the top-1 prediction, so export the model without it (the logits are the output)",
    "LogSoftmax": "a log-softmax has no exact integer twin; a trailing LogSoftmax does not change the top-1 prediction, so export the model without it (the logits are the output)",
    "Sqrt": "a square root is not a polynomial; polynomial activations of degree 2 at most (x * x, a * x^2 + b * x + c) are supported",
    "Reciprocal": "1 / x is not a polynomial; only division by a constant is supported",
    "Transpose": "transposing activations is not supported (the IR's activations are NCHW throughout)",
    "LRN": "local response normalisation has no exact integer twin",
    "InstanceNormalization": "instance normalisation depends on the input's statistics and cannot be folded into a linear layer",
    "LayerNormalization": "layer normalisation depends on the input's statistics and cannot be folded into a linear layer",
    "ConvTranspose": "transposed convolutions are not implemented",
    "Resize": "resizing (upsampling) is not implemented",
    "Upsample": "upsampling is not implemented",
    "GlobalMaxPool": "global max-pooling is not implemented (use GlobalAveragePool or a MaxPool over the whole map)",
}


def _unsupported(op: str, name: str) -> ModelError:
    why = _WHY_UNSUPPORTED.get(op, "no IR operation computes it")
    return ModelError(f"{op} node '{name}': unsupported operator ({why}); supported: {', '.join(SUPPORTED_ONNX_OPS)}")


#: Operators that exporters use for shape arithmetic: folded when all their inputs are constants.
_FOLDABLE = {
    "Gather", "Unsqueeze", "Squeeze", "Concat", "ConstantOfShape", "Cast", "Reshape", "Slice", "Mul", "Add",
    "Sub", "Div", "Range", "Expand", "Transpose", "Identity", "Where", "Equal", "Neg", "Pow",
}


def _evaluate(node, consts) -> np.ndarray:
    from onnx.reference import ReferenceEvaluator  # noqa: PLC0415

    feeds = {i: consts[i] for i in node.input if i}
    try:
        return ReferenceEvaluator(node).run(None, feeds)[0]
    except Exception as exc:
        raise ModelError(f"{node.op_type} node '{node.name}': cannot fold its constant inputs: {exc}") from exc


def _attrs(node) -> dict:
    import onnx  # noqa: PLC0415

    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _name(node, index: int) -> str:
    return node.name or f"{node.op_type.lower()}_{index}"


def load_onnx(model: Union[str, bytes, "object"]) -> Graph:
    """Reads an ONNX model (path, bytes or ModelProto) into a validated IR graph."""
    import onnx  # noqa: PLC0415
    from onnx import numpy_helper  # noqa: PLC0415

    if isinstance(model, (str, bytes)) and not isinstance(model, onnx.ModelProto):
        try:
            model = onnx.load_from_string(model) if isinstance(model, bytes) else onnx.load(model)
        except Exception as exc:  # onnx raises DecodeError and friends
            raise ModelError(f"cannot read the ONNX model: {exc}") from exc
    try:
        onnx.checker.check_model(model)
    except Exception as exc:
        raise ModelError(f"the ONNX model is malformed: {exc}") from exc
    g = model.graph
    consts = {t.name: numpy_helper.to_array(t).astype(np.float64) if numpy_helper.to_array(t).dtype.kind == "f" else numpy_helper.to_array(t) for t in g.initializer}
    inputs = [i for i in g.input if i.name not in consts]
    if len(inputs) != 1 or len(g.output) != 1:
        raise ModelError(f"the model must have one input and one output, it has {len(inputs)} and {len(g.output)}")
    dims = inputs[0].type.tensor_type.shape.dim
    shape = []
    for k, d in enumerate(dims):
        if k == 0:
            continue  # the batch dimension may be symbolic
        if not d.HasField("dim_value") or d.dim_value <= 0:
            raise ModelError(f"input '{inputs[0].name}' has a dynamic dimension {k} ('{d.dim_param}'); export the model with a fixed input size")
        shape.append(d.dim_value)
    graph = Graph(input_name=inputs[0].name, input_shape=tuple(shape), name=g.name or "model")
    alias: dict[str, str] = {}
    # ONNX tensors that are a polynomial of an IR tensor not written yet: (it, the ONNX node that
    # completed it). Consecutive Mul/Add/... nodes extend it; any other reader writes it (`src`).
    pending: dict[str, tuple[Polynomial, str]] = {}
    readers: dict[str, int] = {}
    for n in g.node:
        for i in n.input:
            readers[i] = readers.get(i, 0) + 1

    def resolve(name: str) -> str:
        while name in alias:
            name = alias[name]
        return name

    def src(name: str) -> str:
        """The IR tensor of an ONNX tensor, writing its pending polynomial first."""
        return write_pending(pending, alias, graph, resolve(name))

    def operand(name: str, what: str):
        """A polynomial operand: a constant, a pending polynomial or (the identity of) an IR tensor."""
        if name in consts:
            return consts[name]
        return tensor_operand(pending, graph, resolve(name), what)

    def const(node, k: int, what: str) -> np.ndarray:
        if len(node.input) <= k or node.input[k] not in consts:
            raise ModelError(f"{node.op_type} node '{node.name}': {what} must be a constant (initializer)")
        return consts[node.input[k]]

    for index, node in enumerate(g.node):
        op, a, name = node.op_type, _attrs(node), _name(node, index)
        out = node.output[0]
        if node.domain not in ("", "ai.onnx"):
            raise _unsupported(f"{node.domain}.{op}", name)
        if op == "Constant":
            consts[out] = numpy_helper.to_array(a["value"])
            continue
        if op == "Shape":
            # Shapes are static here (the batch dimension counts as 1), so shape arithmetic folds.
            x = node.input[0]
            t = resolve(x)
            t = pending[t][0].tensor if t in pending else t  # a polynomial keeps its tensor's shape
            if x not in consts and t not in graph.shapes():
                raise ModelError(f"Shape node '{name}': input '{x}' is not produced by any earlier node")
            shape = consts[x].shape if x in consts else (1, *graph.shapes()[t])
            consts[out] = np.array(shape, dtype=np.int64)[a.get("start", 0):a.get("end", None)]
            continue
        if op in _FOLDABLE and all(i in consts for i in node.input if i):
            consts[out] = _evaluate(node, consts)
            continue
        if op in ("Identity", "Dropout"):
            alias[out] = resolve(node.input[0])  # a pending polynomial stays pending
            continue
        if op == "Conv":
            if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
                raise ModelError(f"Conv node '{name}': auto_pad is not supported; export with explicit pads")
            w = const(node, 1, "the weight")
            bias = consts.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
            attrs = {"stride": tuple(a.get("strides", (1, 1))), "pads": tuple(a.get("pads", (0, 0, 0, 0))), "groups": int(a.get("group", 1)), "dilation": tuple(a.get("dilations", (1, 1)))}
            graph.add(Node("conv", name, [src(node.input[0])], out, attrs, {"weight": w, "bias": bias}))
        elif op == "BatchNormalization":
            params = {"scale": const(node, 1, "scale"), "bias": const(node, 2, "bias"), "mean": const(node, 3, "mean"), "var": const(node, 4, "var")}
            graph.add(Node("batchnorm", name, [src(node.input[0])], out, {"eps": float(a.get("epsilon", 1e-5))}, params))
        elif op == "Relu":
            graph.add(Node("relu", name, [src(node.input[0])], out))
        elif op == "Clip":
            low, high = _clip_bounds(node, name, a, consts)
            graph.add(clip_node(name, [src(node.input[0])], out, low, high, f"Clip node '{name}'"))
        elif op in ("MaxPool", "AveragePool"):
            if a.get("ceil_mode", 0):
                raise ModelError(f"{op} node '{name}': ceil_mode=1 is not supported")
            pads = tuple(a.get("pads", (0, 0, 0, 0)))
            if op == "AveragePool" and any(pads) and not a.get("count_include_pad", 0):
                raise ModelError(f"AveragePool node '{name}': padding that is excluded from the average is not supported")
            kernel = tuple(a["kernel_shape"])
            attrs = {"kernel": kernel, "stride": tuple(a.get("strides", kernel)), "pads": pads}
            graph.add(Node("maxpool" if op == "MaxPool" else "avgpool", name, [src(node.input[0])], out, attrs))
        elif op == "GlobalAveragePool":
            graph.add(Node("global_avgpool", name, [src(node.input[0])], out))
        elif op in ("Flatten", "Reshape"):
            if op == "Flatten" and a.get("axis", 1) != 1:
                raise ModelError(f"Flatten node '{name}': only axis=1 is supported")
            if op == "Reshape":
                target = const(node, 1, "the target shape")
                x = src(node.input[0])  # first: it may write a pending polynomial
                if len(target) != 2 or target[1] not in (-1, int(np.prod(graph.shapes()[x]))):
                    raise ModelError(f"Reshape node '{name}': only flattening to (batch, features) is supported, not {list(target)}")
            graph.add(Node("flatten", name, [src(node.input[0])], out))
        elif op == "Gemm":
            w = const(node, 1, "the weight")
            if a.get("transA", 0) or a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0:
                raise ModelError(f"Gemm node '{name}': only alpha = beta = 1 without transA is supported")
            w = w if a.get("transB", 0) else w.T
            bias = consts.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
            graph.add(Node("linear", name, [src(node.input[0])], out, {}, {"weight": w, "bias": bias}))
        elif op == "MatMul":
            graph.add(Node("linear", name, [src(node.input[0])], out, {}, {"weight": const(node, 1, "the weight").T, "bias": None}))
        elif op in _POLYNOMIAL_OPS:
            what = f"{op} node '{name}'"
            operands = [operand(i, what) for i in node.input]
            polys = [o for o in operands if isinstance(o, Polynomial)]
            prev = None
            x = next((i for i in node.input if i not in consts), "")
            if op == "Add" and len(polys) == 1 and resolve(x) not in pending:
                prev = next((n for n in graph.nodes if n.output == resolve(x)), None)
                # The bias of a MatMul (a Linear exported without Gemm), folded when nothing else reads the product.
                if prev is not None and (prev.op != "linear" or prev.params.get("bias") is not None or max(readers.get(x, 0), readers.get(prev.output, 0)) > 1
                                         or prev.output in (o.name for o in g.output)):
                    prev = None
            if prev is not None:
                b = channel_constant(next(o for o in operands if not isinstance(o, Polynomial)), prev.shape, what)
                prev.params["bias"] = np.broadcast_to(b, prev.shape).copy()
                alias[out] = prev.output
            elif op == "Add" and len(polys) == 2 and polys[0].tensor != polys[1].tensor:
                # Two different activations (a residual connection): their polynomials are written first.
                graph.add(Node("add", name, [src(node.input[0]), src(node.input[1])], out))
            else:
                pending[out] = (combine(_POLYNOMIAL_OPS[op], operands, what), name)
        elif op == "Concat":
            if a.get("axis") != 1:
                raise ModelError(f"Concat node '{name}': only concatenation of channels (axis 1) is supported")
            graph.add(Node("concat", name, [src(i) for i in node.input], out))
        elif op == "Slice":
            graph.add(_slice_as_conv(node, name, consts, graph, src))
        elif op == "Pad":
            graph.add(_pad_as_conv(node, name, consts, a, graph, src))
        else:
            raise _unsupported(op, name)
    graph.output = src(g.output[0].name)  # a pending polynomial at the output is written here
    if graph.output not in graph.shapes():
        raise ModelError(f"output '{g.output[0].name}' is not produced by any node")
    return graph


def _clip_bounds(node, name, a, consts) -> tuple:
    """(min, max) of a Clip node, None where absent: the optional inputs 1 and 2 (opset 11 and
    later; they must be constants) or the attributes `min` and `max` (opsets 6 to 10)."""
    if "min" in a or "max" in a:
        return a.get("min"), a.get("max")
    bounds = []
    for k, what in ((1, "min"), (2, "max")):
        if len(node.input) <= k or not node.input[k]:
            bounds.append(None)
        elif node.input[k] in consts:
            bounds.append(consts[node.input[k]])
        else:
            raise ModelError(f"Clip node '{name}': its {what} must be a constant (an initializer or a Constant node), not the computed tensor '{node.input[k]}'")
    return tuple(bounds)


def _slice_as_conv(node, name, consts, graph, src) -> Node:
    """x[:, :, ::sh, ::sw] as a 1x1 convolution with stride (sh, sw) and identity weights."""
    ins = [consts.get(i) if i else None for i in node.input[1:]]
    starts, ends = ins[0], ins[1]
    axes = ins[2] if len(ins) > 2 and ins[2] is not None else np.arange(len(starts))
    steps = ins[3] if len(ins) > 3 and ins[3] is not None else np.ones(len(starts), dtype=np.int64)
    if starts is None or ends is None:
        raise ModelError(f"Slice node '{name}': starts and ends must be constants")
    x = src(node.input[0])  # first: it may write a pending polynomial
    c, h, w = graph.shapes()[x]
    stride = [1, 1]
    for s, e, ax, st in zip(starts, ends, axes, steps):
        ax = int(ax) % 4
        if ax not in (2, 3) or int(s) != 0 or int(e) < (h if ax == 2 else w) or int(st) < 1:
            raise ModelError(f"Slice node '{name}': only strided subsampling of the spatial axes (x[:, :, ::s, ::s]) is supported")
        stride[ax - 2] = int(st)
    weight = np.eye(c).reshape(c, c, 1, 1)
    return Node("conv", name, [x], node.output[0], {"stride": tuple(stride), "pads": (0, 0, 0, 0), "groups": 1}, {"weight": weight, "bias": None})


def _pad_as_conv(node, name, consts, a, graph, src) -> Node:
    """Zero padding of the channel axis as a 1x1 convolution with a padded identity."""
    pads = consts.get(node.input[1]) if len(node.input) > 1 else np.asarray(a.get("pads", []))
    mode = a.get("mode", b"constant")
    value = consts.get(node.input[2]) if len(node.input) > 2 and node.input[2] else 0.0
    if pads is None or mode not in (b"constant", "constant") or float(np.asarray(value).reshape(-1)[0] if np.size(value) else 0.0) != 0.0:
        raise ModelError(f"Pad node '{name}': only constant zero padding with constant pads is supported")
    pads = [int(p) for p in pads]
    if len(pads) != 8 or any(pads[k] for k in (0, 2, 3, 4, 6, 7)):
        raise ModelError(f"Pad node '{name}': only padding of the channel axis is supported (pads {pads})")
    x = src(node.input[0])  # first: it may write a pending polynomial
    c = graph.shapes()[x][0]
    before, after = pads[1], pads[5]
    weight = np.zeros((before + c + after, c, 1, 1))
    weight[before:before + c, :, 0, 0] = np.eye(c)
    return Node("conv", name, [x], node.output[0], {"stride": (1, 1), "pads": (0, 0, 0, 0), "groups": 1}, {"weight": weight, "bias": None})
