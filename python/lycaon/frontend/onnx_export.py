"""Export of the IR to ONNX (opset 17), so any model Lycaon holds can be run by onnxruntime or
other tools (a `clip` node as Clip with constant min and max inputs). A parameter-free 1x1 convolution that only subsamples and zero-pads channels (the
option-A shortcut) is written as Slice + Pad, the way PyTorch exports it."""

from __future__ import annotations

import numpy as np

from .ir import Graph, ModelError, Node


def _selection(node: Node):
    """(stride, pad_before, pad_after) if the node is a strided channel-padding identity."""
    w, a = node.params["weight"], node.attrs
    if node.op != "conv" or w.shape[2:] != (1, 1) or node.params.get("bias") is not None or a.get("groups", 1) != 1 or any(a.get("pads", (0, 0, 0, 0))):
        return None
    out_c, in_c = w.shape[:2]
    if out_c < in_c:
        return None
    before = (out_c - in_c) // 2
    want = np.zeros((out_c, in_c))
    want[before:before + in_c] = np.eye(in_c)
    if not np.array_equal(w[:, :, 0, 0], want):
        return None
    return a.get("stride", (1, 1)), before, out_c - in_c - before


def to_onnx(graph: Graph):
    """An onnx.ModelProto computing the same function as the graph (float32 weights)."""
    from onnx import TensorProto, helper, numpy_helper  # noqa: PLC0415

    nodes, inits = [], []

    def init(name, array, dtype=np.float32):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array, dtype=dtype), name))
        return name

    for n in graph.nodes:
        x, a, p = n.inputs, n.attrs, n.params
        if n.op == "conv" and _selection(n) is not None:
            (sh, sw), before, after = _selection(n)
            sl = [init(f"{n.name}.{k}", v, np.int64) for k, v in (("starts", [0, 0]), ("ends", [2**62, 2**62]), ("axes", [2, 3]), ("steps", [sh, sw]))]
            nodes.append(helper.make_node("Slice", [x[0], *sl], [f"{n.output}:slice"], name=f"{n.name}.slice"))
            pads = init(f"{n.name}.pads", [0, before, 0, 0, 0, after, 0, 0], np.int64)
            nodes.append(helper.make_node("Pad", [f"{n.output}:slice", pads], [n.output], name=n.name, mode="constant"))
        elif n.op == "conv":
            ins = [x[0], init(f"{n.name}.weight", p["weight"])] + ([init(f"{n.name}.bias", p["bias"])] if p.get("bias") is not None else [])
            nodes.append(helper.make_node("Conv", ins, [n.output], name=n.name, strides=list(a.get("stride", (1, 1))), pads=list(a.get("pads", (0, 0, 0, 0))), group=a.get("groups", 1), kernel_shape=list(p["weight"].shape[2:])))
        elif n.op == "batchnorm":
            ins = [x[0]] + [init(f"{n.name}.{k}", p[k]) for k in ("scale", "bias", "mean", "var")]
            nodes.append(helper.make_node("BatchNormalization", ins, [n.output], name=n.name, epsilon=a.get("eps", 1e-5)))
        elif n.op in ("relu", "global_avgpool", "add"):
            op = {"relu": "Relu", "global_avgpool": "GlobalAveragePool", "add": "Add"}[n.op]
            nodes.append(helper.make_node(op, list(x), [n.output], name=n.name))
        elif n.op == "clip":
            bounds = [init(f"{n.name}.min", np.float32(a.get("min", 0.0))), init(f"{n.name}.max", np.float32(a["max"]))]
            nodes.append(helper.make_node("Clip", [x[0], *bounds], [n.output], name=n.name))
        elif n.op in ("maxpool", "avgpool"):
            extra = {"count_include_pad": 1} if n.op == "avgpool" else {}
            nodes.append(helper.make_node("MaxPool" if n.op == "maxpool" else "AveragePool", [x[0]], [n.output], name=n.name, kernel_shape=list(a["kernel"]), strides=list(a.get("stride", a["kernel"])), pads=list(a.get("pads", (0, 0, 0, 0))), **extra))
        elif n.op == "flatten":
            nodes.append(helper.make_node("Flatten", [x[0]], [n.output], name=n.name, axis=1))
        elif n.op == "linear":
            ins = [x[0], init(f"{n.name}.weight", p["weight"])] + ([init(f"{n.name}.bias", p["bias"])] if p.get("bias") is not None else [])
            nodes.append(helper.make_node("Gemm", ins, [n.output], name=n.name, transB=1))
        elif n.op == "concat":
            nodes.append(helper.make_node("Concat", list(x), [n.output], name=n.name, axis=1))
        else:
            raise ModelError(f"{n.describe()}: no ONNX export for this operation")
    out_shape = graph.shapes()[graph.output]
    g = helper.make_graph(
        nodes, graph.name,
        [helper.make_tensor_value_info(graph.input_name, TensorProto.FLOAT, ["N", *graph.input_shape])],
        [helper.make_tensor_value_info(graph.output, TensorProto.FLOAT, ["N", *out_shape])],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="lycaon")
