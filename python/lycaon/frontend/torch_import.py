"""Import of PyTorch modules into the IR through torch.fx (torch is an optional extra).

Standard layers (Conv2d, BatchNorm2d, ReLU, ReLU6, Hardtanh(0, M), pooling, Linear, Flatten,
Identity, Dropout) map to IR nodes; functional calls (relu, relu6, hardtanh(x, 0, M), clamp/clip(x,
0, M), add, adaptive/average/max pooling, flatten, cat), strided
subsampling x[:, :, ::s, ::s] and zero channel padding (F.pad) are traced through, the last two
becoming fixed 1x1 convolutions exactly as the ONNX importer makes them. Element-wise
polynomials of one activation (x * x, x ** 2, torch.square, torch.pow(x, 2), a * x, x + c, x - c,
x / c, -x; constants that are numbers or per-channel parameters and buffers, shape (C, 1, 1))
become one `poly` node of degree 2 at most (`polynomial.py`), as the ONNX importer makes them;
arithmetic on parameters and buffers alone (e.g. `self.a.view(1, -1, 1, 1)`) is folded.
"""

from __future__ import annotations

import operator

import numpy as np

from .ir import Graph, ModelError, Node, clip_node
from .polynomial import Polynomial, combine, tensor_operand, write_pending

#: Operators of traced polynomial arithmetic (x * x, x ** 2, a * x + b, ...). In-place forms
#: (x += c, x.mul_(c)) are left out: the traced graph does not show what their mutation reaches.
_OPERATORS = {operator.add: "add", operator.sub: "sub", operator.mul: "mul", operator.truediv: "div", operator.pow: "pow", operator.neg: "neg"}
#: Tensor methods and torch functions of the same, by name.
_NAMED = {
    "add": "add", "sub": "sub", "subtract": "sub", "mul": "mul", "multiply": "mul", "div": "div", "divide": "div", "true_divide": "div",
    "pow": "pow", "neg": "neg", "negative": "neg", "square": "square",
}


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


def _attribute(module, target: str):
    """The parameter, buffer or constant a get_attr node reads (a dotted path)."""
    value = module
    for part in target.split("."):
        value = getattr(value, part)
    return value


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
    # Parameters and buffers read as tensors (get_attr), and what folds from them alone.
    consts: dict = {}
    # Traced values that are a polynomial of an IR tensor not written yet: (it, the node that
    # completed it). Polynomial arithmetic extends it; any other reader writes it (`src`).
    pending: dict[str, tuple[Polynomial, str]] = {}

    def resolve(name: str) -> str:
        while name in alias:
            name = alias[name]
        return name

    def src(arg) -> str:
        """The IR tensor of a traced value, writing its pending polynomial first."""
        if not isinstance(arg, torch.fx.Node):
            raise ModelError(f"expected a tensor argument, got {arg!r}")
        if arg.name in consts:
            raise ModelError(f"node '{arg.name}': a parameter or buffer is read as an activation; parameters and buffers are only supported inside layers "
                             "and as constants of polynomial activations (a * x, x + b)")
        return write_pending(pending, alias, g, resolve(arg.name))

    def selection(n, x: str, stride, before=0, after=0) -> None:
        c = g.shapes()[x][0]
        w = np.zeros((before + c + after, c, 1, 1))
        w[before:before + c, :, 0, 0] = np.eye(c)
        g.add(Node("conv", n.name, [x], n.name, {"stride": stride, "pads": (0, 0, 0, 0), "groups": 1}, {"weight": w, "bias": None}))

    def constant_call(n) -> bool:
        """Folds a call whose tensor arguments are all parameters, buffers or folded values."""
        read: list = []
        torch.fx.node.map_arg((n.args, n.kwargs), read.append)
        if not read or any(r.name not in consts for r in read):
            return False
        args, kwargs = torch.fx.node.map_arg((n.args, n.kwargs), lambda r: consts[r.name])
        try:
            with torch.no_grad():
                consts[n.name] = n.target(*args, **kwargs) if n.op == "call_function" else getattr(args[0], n.target)(*args[1:], **kwargs)
        except Exception as exc:
            raise ModelError(f"node '{n.name}': cannot fold its constant arguments: {exc}") from exc
        return True

    def operand(arg, what: str):
        """A polynomial operand: a constant, a pending polynomial or (the identity of) an IR tensor."""
        if isinstance(arg, torch.fx.Node):
            if arg.name in consts:
                value = consts[arg.name]
                return _arr(value) if torch.is_tensor(value) else np.asarray(value, dtype=np.float64)
            return tensor_operand(pending, g, resolve(arg.name), what, shown=arg.name)
        if isinstance(arg, (int, float)) and not isinstance(arg, bool):
            return np.asarray(float(arg))
        raise ModelError(f"{what}: unsupported argument {arg!r}")

    def polynomial(n, kind: str) -> None:
        """x * x, a * x + b, x ** 2 and kin: extends a pending polynomial (or adds a residual)."""
        what = f"node '{n.name}' ({kind})"
        args, kwargs = list(n.args), dict(n.kwargs)
        if kind == "square":
            kind, args = "pow", [args[0], 2]
        for key in ("other", "exponent"):  # torch.mul(x, other=c), torch.pow(x, exponent=2)
            if len(args) == 1 and kind != "neg" and key in kwargs:
                args.append(kwargs.pop(key))
        if kind == "div" and kwargs.pop("rounding_mode", None) is not None:
            raise ModelError(f"{what}: division with rounding is not a polynomial")
        alpha = kwargs.pop("alpha", 1)
        if kwargs:
            raise ModelError(f"{what}: unsupported arguments {sorted(kwargs)}")
        operands = [operand(a, what) for a in args]
        if alpha != 1:  # torch.add(x, y, alpha=a) is x + a y
            if not isinstance(alpha, (int, float)):
                raise ModelError(f"{what}: alpha must be a number, not {alpha!r}")
            operands[1] = combine("mul", [operands[1], np.asarray(float(alpha))], what) if isinstance(operands[1], Polynomial) else operands[1] * alpha
        polys = [o for o in operands if isinstance(o, Polynomial)]
        if kind == "add" and len(polys) == 2 and polys[0].tensor != polys[1].tensor and alpha == 1:
            # Two different activations (a residual connection): their polynomials are written first.
            g.add(Node("add", n.name, [src(args[0]), src(args[1])], n.name))
        else:
            pending[n.name] = (combine(kind, operands, what), n.name)

    for n in traced.graph.nodes:
        if n.op == "placeholder":
            alias[n.name] = "image"
            continue
        if n.op == "output":
            g.output = src(n.args[0])  # a pending polynomial at the output is written here
            continue
        if n.op == "get_attr":
            consts[n.name] = _attribute(traced, n.target)
            continue
        target, args = n.target, n.args
        if n.op == "call_module" and isinstance(modules[target], (nn.Identity, nn.Dropout)):
            alias[n.name] = resolve(args[0].name) if isinstance(args[0], torch.fx.Node) else src(args[0])  # a pending polynomial stays pending
            continue
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
            else:
                raise ModelError(f"module '{target}' ({type(m).__name__}): unsupported; supported: Conv2d, BatchNorm2d, ReLU, ReLU6, Hardtanh(0, M), MaxPool2d, AvgPool2d, AdaptiveAvgPool2d(1), Flatten, Linear, Identity, Dropout")
        elif n.op in ("call_function", "call_method"):
            fname = target if isinstance(target, str) else getattr(target, "__name__", str(target))
            kind = _OPERATORS.get(target) if n.op == "call_function" and not isinstance(target, str) else None
            if kind is None and (n.op == "call_method" or getattr(torch, fname, None) is target):
                kind = _NAMED.get(fname)
            if constant_call(n):
                continue
            if kind is not None:
                polynomial(n, kind)
            elif target in (F.relu, torch.relu) or fname == "relu":
                g.add(Node("relu", n.name, [src(args[0])], n.name))
            elif target is F.relu6 or fname == "relu6":
                g.add(clip_node(n.name, [src(args[0])], n.name, 0.0, 6.0, f"node '{n.name}' (relu6)"))
            elif target is F.hardtanh or fname in ("hardtanh", "hardtanh_"):
                low, high = _arg(args, n.kwargs, 1, "min_val", -1.0), _arg(args, n.kwargs, 2, "max_val", 1.0)
                g.add(clip_node(n.name, [src(args[0])], n.name, _number(low, n), _number(high, n), f"node '{n.name}' (hardtanh)"))
            elif target in (torch.clamp, torch.clip) or fname in ("clamp", "clip", "clamp_", "clip_"):
                low, high = _arg(args, n.kwargs, 1, "min", None), _arg(args, n.kwargs, 2, "max", None)
                g.add(clip_node(n.name, [src(args[0])], n.name, _number(low, n), _number(high, n), f"node '{n.name}' ({fname})"))
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
                raise ModelError(f"node '{n.name}' ({fname}): unsupported function; supported: relu, relu6, hardtanh(x, 0, M), clamp(x, 0, M), add, "
                                 "polynomials of one activation (x * x, x ** 2, square, pow(x, 2), a * x, x + c, x - c, x / c, -x), adaptive_avg_pool2d(1), "
                                 "flatten, cat, x[:, :, ::s, ::s], F.pad on channels")
        else:
            raise ModelError(f"node '{n.name}': unsupported graph operation {n.op}")
    if g.output is None:
        raise ModelError("the traced module has no output")
    return g
