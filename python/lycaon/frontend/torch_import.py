"""Import of PyTorch modules into the IR through torch.fx (torch is an optional extra).

Standard layers (Conv2d, BatchNorm2d, ReLU, ReLU6, Hardtanh(0, M), pooling, Linear, Flatten,
Identity, Dropout) map to IR nodes; functional calls (relu, relu6, hardtanh(x, 0, M), clamp/clip(x,
0, M), add, adaptive/average/max pooling, flatten, cat), strided
subsampling x[:, :, ::s, ::s] and zero channel padding (F.pad) are traced through, the last two
becoming fixed 1x1 convolutions exactly as the ONNX importer makes them.
"""

from __future__ import annotations

import operator

import numpy as np

from .ir import Graph, ModelError, Node, clip_node


def _arr(t) -> np.ndarray | None:
    return None if t is None else t.detach().cpu().numpy().astype(np.float64)


def _pair(v) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def _arg(args, kwargs, k: int, key: str, default):
    """Argument k of a traced call, positional or by keyword."""
    return args[k] if len(args) > k else kwargs.get(key, default)


def _number(value, n):
    """A clip bound of a traced call: a Python number (or None), not a tensor."""
    if value is None or isinstance(value, (int, float)):
        return value
    raise ModelError(f"node '{n.name}': clip bounds must be numbers, not {value!r}")


def load_torch(module, input_shape: tuple, name: str = "model") -> Graph:
    """Traces `module` (in eval mode) for inputs of shape (C, H, W) and returns its IR."""
    import torch  # noqa: PLC0415
    import torch.fx  # noqa: PLC0415
    from torch import nn  # noqa: PLC0415
    from torch.nn import functional as F  # noqa: PLC0415

    module = module.eval()
    try:
        traced = torch.fx.symbolic_trace(module)
    except Exception as exc:
        raise ModelError(f"torch.fx cannot trace this module: {exc}") from exc
    modules = dict(traced.named_modules())
    g = Graph("image", tuple(input_shape), name=name)
    alias: dict[str, str] = {}

    def src(arg) -> str:
        if not isinstance(arg, torch.fx.Node):
            raise ModelError(f"expected a tensor argument, got {arg!r}")
        return alias.get(arg.name, arg.name)

    def selection(n, x: str, stride, before=0, after=0) -> None:
        c = g.shapes()[x][0]
        w = np.zeros((before + c + after, c, 1, 1))
        w[before:before + c, :, 0, 0] = np.eye(c)
        g.add(Node("conv", n.name, [x], n.name, {"stride": stride, "pads": (0, 0, 0, 0), "groups": 1}, {"weight": w, "bias": None}))

    for n in traced.graph.nodes:
        if n.op == "placeholder":
            alias[n.name] = "image"
            continue
        if n.op == "output":
            g.output = src(n.args[0])
            continue
        if n.op == "get_attr":
            raise ModelError(f"node '{n.name}': parameters used as tensors are not supported")
        target, args = n.target, n.args
        if n.op == "call_module":
            m = modules[target]
            x = src(args[0])
            if isinstance(m, nn.Conv2d):
                if m.padding_mode != "zeros" or isinstance(m.padding, str):
                    raise ModelError(f"Conv2d '{target}': only explicit zero padding is supported")
                ph, pw = _pair(m.padding)
                attrs = {"stride": _pair(m.stride), "pads": (ph, pw, ph, pw), "groups": m.groups, "dilation": _pair(m.dilation)}
                g.add(Node("conv", target, [x], n.name, attrs, {"weight": _arr(m.weight), "bias": _arr(m.bias)}))
            elif isinstance(m, nn.BatchNorm2d):
                params = {"scale": _arr(m.weight), "bias": _arr(m.bias), "mean": _arr(m.running_mean), "var": _arr(m.running_var)}
                g.add(Node("batchnorm", target, [x], n.name, {"eps": m.eps}, params))
            elif isinstance(m, nn.ReLU):
                g.add(Node("relu", target, [x], n.name))
            elif isinstance(m, nn.Hardtanh):  # ReLU6 is Hardtanh(0, 6)
                g.add(clip_node(target, [x], n.name, m.min_val, m.max_val, f"{type(m).__name__} '{target}'"))
            elif isinstance(m, (nn.MaxPool2d, nn.AvgPool2d)):
                k = _pair(m.kernel_size)
                p = _pair(m.padding)
                if m.ceil_mode or (isinstance(m, nn.AvgPool2d) and any(p) and not m.count_include_pad):
                    raise ModelError(f"{type(m).__name__} '{target}': ceil_mode or excluded padding is not supported")
                attrs = {"kernel": k, "stride": _pair(m.stride or k), "pads": (p[0], p[1], p[0], p[1])}
                g.add(Node("maxpool" if isinstance(m, nn.MaxPool2d) else "avgpool", target, [x], n.name, attrs))
            elif isinstance(m, nn.AdaptiveAvgPool2d) and _pair(m.output_size) == (1, 1):
                g.add(Node("global_avgpool", target, [x], n.name))
            elif isinstance(m, nn.Flatten) and m.start_dim == 1:
                g.add(Node("flatten", target, [x], n.name))
            elif isinstance(m, nn.Linear):
                g.add(Node("linear", target, [x], n.name, {}, {"weight": _arr(m.weight), "bias": _arr(m.bias)}))
            elif isinstance(m, (nn.Identity, nn.Dropout)):
                alias[n.name] = x
            else:
                raise ModelError(f"module '{target}' ({type(m).__name__}): unsupported; supported: Conv2d, BatchNorm2d, ReLU, ReLU6, Hardtanh(0, M), MaxPool2d, AvgPool2d, AdaptiveAvgPool2d(1), Flatten, Linear, Identity, Dropout")
        elif n.op in ("call_function", "call_method"):
            fname = target if isinstance(target, str) else getattr(target, "__name__", str(target))
            if target in (F.relu, torch.relu) or fname == "relu":
                g.add(Node("relu", n.name, [src(args[0])], n.name))
            elif target is F.relu6 or fname == "relu6":
                g.add(clip_node(n.name, [src(args[0])], n.name, 0.0, 6.0, f"node '{n.name}' (relu6)"))
            elif target is F.hardtanh or fname in ("hardtanh", "hardtanh_"):
                low, high = _arg(args, n.kwargs, 1, "min_val", -1.0), _arg(args, n.kwargs, 2, "max_val", 1.0)
                g.add(clip_node(n.name, [src(args[0])], n.name, _number(low, n), _number(high, n), f"node '{n.name}' (hardtanh)"))
            elif target in (torch.clamp, torch.clip) or fname in ("clamp", "clip", "clamp_", "clip_"):
                low, high = _arg(args, n.kwargs, 1, "min", None), _arg(args, n.kwargs, 2, "max", None)
                g.add(clip_node(n.name, [src(args[0])], n.name, _number(low, n), _number(high, n), f"node '{n.name}' ({fname})"))
            elif target in (operator.add, torch.add) or fname in ("add", "__add__"):
                g.add(Node("add", n.name, [src(args[0]), src(args[1])], n.name))
            elif target is F.adaptive_avg_pool2d and _pair(args[1] if len(args) > 1 else n.kwargs["output_size"]) == (1, 1):
                g.add(Node("global_avgpool", n.name, [src(args[0])], n.name))
            elif target is torch.flatten or fname in ("flatten", "view", "reshape"):
                g.add(Node("flatten", n.name, [src(args[0])], n.name))
            elif target is torch.cat:
                g.add(Node("concat", n.name, [src(a) for a in args[0]], n.name))
            elif target is operator.getitem:
                index = args[1]
                ok = isinstance(index, tuple) and len(index) == 4 and all(isinstance(i, slice) for i in index)
                if ok and index[0] == slice(None) and index[1] == slice(None) and all(i.start in (None, 0) and i.stop is None for i in index[2:]):
                    selection(n, src(args[0]), (index[2].step or 1, index[3].step or 1))
                else:
                    raise ModelError(f"node '{n.name}': only x[:, :, ::s, ::s] indexing is supported")
            elif target is F.pad:
                pad = args[1]
                value = n.kwargs.get("value", 0.0) or 0.0
                if len(pad) != 6 or any(pad[:4]) or value != 0.0 or n.kwargs.get("mode", "constant") != "constant":
                    raise ModelError(f"node '{n.name}': only zero padding of the channel dimension is supported, not {pad}")
                selection(n, src(args[0]), (1, 1), pad[4], pad[5])
            else:
                raise ModelError(f"node '{n.name}' ({fname}): unsupported function; supported: relu, relu6, hardtanh(x, 0, M), clamp(x, 0, M), add, adaptive_avg_pool2d(1), flatten, cat, x[:, :, ::s, ::s], F.pad on channels")
        else:
            raise ModelError(f"node '{n.name}': unsupported graph operation {n.op}")
    if g.output is None:
        raise ModelError("the traced module has no output")
    return g
