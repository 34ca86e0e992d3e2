"""AESPA activations (002 Sec. 3; Park et al., "AESPA: Accuracy Preserving Low-degree Polynomial
Activation for Fast Private Inference", arXiv:2201.06699) for the CIFAR ResNet, in numpy.

Training uses HerPN, the Hermite expansion of ReLU truncated at degree 2 with every basis batch-
normalised on its own:

    HerPN(x) = gamma * sum_{i=0..2} f_i * (h_i(x) - mu_i) / sqrt(var_i + eps) + beta

with the orthonormal (probabilists') Hermite polynomials h_0 = 1, h_1 = x, h_2 = (x^2 - 1)/sqrt(2)
and ReLU's coefficients in that basis f = (1/sqrt(2 pi), 1/2, 1/sqrt(4 pi)). The batch-normalised
constant h_0 is identically 0 (its batch mean is 1 and its variance 0), so only i = 1, 2 carry
statistics; the constant is beta's job. At inference the statistics are frozen and the whole
block is, per channel, the quadratic a x^2 + b x + c that `fold` returns, which is all CKKS
evaluates.

The network (`forward`) is ResNet-20 with option-A shortcuts as resnet.resnet_cifar, each
batch-norm + ReLU replaced by an activation: stem conv -> act1; per block
conv1 -> act1 -> conv2 -> (+ shortcut) -> act2 (the batch-norm before the addition goes, as
AESPA replaces both batch-norm and ReLU). Shipped weights (scripts/train_resnet20_aespa.py) use
the state-dict names of lycaon_benchmarks.torch_models.ResNetCifarAespa (benchmarks/) for
convolutions and the linear layer, and `{activation}.a`, `.b`, `.c` (one value per channel) for
the folded quadratics.
"""

from __future__ import annotations

import math

import numpy as np

from .executor import conv2d
from .ir import Graph, Node

#: ReLU's first three coefficients in the orthonormal Hermite basis: E[relu(X) h_i(X)], X ~ N(0, 1).
HERMITE_RELU = (1 / math.sqrt(2 * math.pi), 0.5, 1 / math.sqrt(4 * math.pi))
DEGREE = 2
#: torch.nn.BatchNorm2d's default epsilon, which training uses.
EPS = 1e-5
_trapezoid = getattr(np, "trapezoid", None) or np.trapz  # numpy < 2 names it trapz


def hermite(x, i: int):
    """h_i(x) = He_i(x) / sqrt(i!), orthonormal under the standard normal density (i <= 2)."""
    if i == 0:
        return np.ones_like(x)
    if i == 1:
        return x
    if i == 2:
        return (x * x - 1) / math.sqrt(2)
    raise ValueError("AESPA uses the Hermite basis up to degree 2")


def hermite_relu_coefficients(degree: int = DEGREE, half_width: float = 12.0, points: int = 400_001) -> np.ndarray:
    """f_i = E[relu(X) h_i(X)] by numerical integration with h_i from the He_n recurrence
    He_{n+1} = x He_n - n He_{n-1} (an independent check of HERMITE_RELU)."""
    x = np.linspace(0.0, half_width, points)  # relu vanishes on x < 0
    density = np.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    he = [np.ones_like(x), x]
    for n in range(1, degree):
        he.append(x * he[n] - n * he[n - 1])
    return np.array([_trapezoid(x * he[i] * density, x) / math.sqrt(math.factorial(i)) for i in range(degree + 1)])


def _channel(v) -> np.ndarray:
    return np.asarray(v, dtype=np.float64).reshape(1, -1, 1, 1)


def herpn(x, gamma, beta, mean, var, eps: float = EPS) -> np.ndarray:
    """HerPN on NCHW `x` with frozen statistics (inference); mean/var have shape (2, C): the running
    statistics of h_1 and h_2."""
    x = np.asarray(x, dtype=np.float64)
    mean, var = np.asarray(mean, dtype=np.float64), np.asarray(var, dtype=np.float64)
    y = sum(HERMITE_RELU[i] * (hermite(x, i) - _channel(mean[i - 1])) / np.sqrt(_channel(var[i - 1]) + eps) for i in (1, 2))
    return _channel(gamma) * y + _channel(beta)


def fold(gamma, beta, mean, var, eps: float = EPS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The per-channel (a, b, c) with HerPN(x) = a x^2 + b x + c (statistics frozen):
    with s_i = sqrt(var_i + eps),
        a = gamma f_2 / (sqrt2 s_2),  b = gamma f_1 / s_1,
        c = beta - gamma (f_1 mu_1 / s_1 + f_2 (mu_2 + 1/sqrt2) / s_2)."""
    gamma, beta = np.asarray(gamma, dtype=np.float64), np.asarray(beta, dtype=np.float64)
    mean, var = np.asarray(mean, dtype=np.float64), np.asarray(var, dtype=np.float64)
    _, f1, f2 = HERMITE_RELU
    s1, s2 = np.sqrt(var[0] + eps), np.sqrt(var[1] + eps)
    a = gamma * f2 / (math.sqrt(2) * s2)
    b = gamma * f1 / s1
    c = beta - gamma * (f1 * mean[0] / s1 + f2 * (mean[1] + 1 / math.sqrt(2)) / s2)
    return a, b, c


def quadratic(x, a, b, c) -> np.ndarray:
    """a x^2 + b x + c per channel of NCHW `x`, in Horner form (x (a x + b) + c) as CKKS would."""
    x = np.asarray(x, dtype=np.float64)
    return x * (_channel(a) * x + _channel(b)) + _channel(c)


def activation_names(depth: int = 20) -> list[str]:
    """The activations of a CIFAR ResNet in network order."""
    blocks = (depth - 2) // 6
    return ["act1"] + [f"layer{s}.{b}.act{k}" for s in (1, 2, 3) for b in range(blocks) for k in (1, 2)]


def _option_a(x: np.ndarray, planes: int) -> np.ndarray:
    pad = (planes - x.shape[1]) // 2
    return np.pad(x[:, :, ::2, ::2], ((0, 0), (pad, pad), (0, 0), (0, 0)))


def forward(weights: dict, x, depth: int = 20, batch: int = 100, absmax: dict | None = None) -> np.ndarray:
    """Logits of the folded AESPA ResNet on preprocessed NCHW images, in float64; when `absmax`
    is a dict it receives the largest |input| seen by each activation (the range CKKS must hold)."""
    w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
    blocks = (depth - 2) // 6

    def act(name, h):
        if absmax is not None:
            absmax[name] = max(absmax.get(name, 0.0), float(np.abs(h).max()))
        return quadratic(h, w[f"{name}.a"], w[f"{name}.b"], w[f"{name}.c"])

    def conv(name, h, stride):
        return conv2d(h, w[f"{name}.weight"], None, (stride, stride), (1, 1, 1, 1), 1)

    outs = []
    for start in range(0, len(x), batch):
        h = act("act1", conv("conv1", np.asarray(x[start:start + batch], dtype=np.float64), 1))
        for stage, planes in enumerate((16, 32, 64), start=1):
            for b in range(blocks):
                p = f"layer{stage}.{b}"
                stride = 2 if stage > 1 and b == 0 else 1
                r = conv(f"{p}.conv2", act(f"{p}.act1", conv(f"{p}.conv1", h, stride)), 1)
                shortcut = _option_a(h, planes) if stride != 1 else h
                h = act(f"{p}.act2", r + shortcut)
        outs.append(h.mean(axis=(2, 3)) @ w["linear.weight"].T + w["linear.bias"])
    return np.concatenate(outs)


def graph(weights: dict, depth: int = 20, name: str = "resnet20-aespa") -> Graph:
    """The folded AESPA ResNet as a model-front graph (what `forward` computes): convolutions
    without bias, each activation a per-channel quadratic (`poly` node, coefficients (C, 3) in
    ascending order c, b, a), option-A shortcuts as the fixed 1x1 stride-2 convolution that
    subsamples and zero-pads channels (resnet._shortcut_weight), global average pooling and the
    linear layer."""
    from .resnet import _shortcut_weight  # noqa: PLC0415

    w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
    blocks = (depth - 2) // 6
    g = Graph("image", (3, 32, 32), name=name)

    def conv(layer, x, stride):
        g.add(Node("conv", layer, [x], f"{layer}:out", {"stride": (stride, stride), "pads": (1, 1, 1, 1), "groups": 1}, {"weight": w[f"{layer}.weight"], "bias": None}))
        return f"{layer}:out"

    def act(activation, x):
        coefficients = np.stack([w[f"{activation}.c"], w[f"{activation}.b"], w[f"{activation}.a"]], axis=1)
        g.add(Node("poly", activation, [x], f"{activation}:out", {"kind": "aespa-quadratic"}, {"coefficients": coefficients}))
        return f"{activation}:out"

    x = act("act1", conv("conv1", "image", 1))
    channels = 16
    for stage, planes in enumerate((16, 32, 64), start=1):
        for b in range(blocks):
            p = f"layer{stage}.{b}"
            stride = 2 if stage > 1 and b == 0 else 1
            r = conv(f"{p}.conv2", act(f"{p}.act1", conv(f"{p}.conv1", x, stride)), 1)
            shortcut = x
            if stride != 1 or channels != planes:
                g.add(Node("conv", f"{p}.shortcut", [x], f"{p}.shortcut:out", {"stride": (stride, stride), "pads": (0, 0, 0, 0), "groups": 1},
                           {"weight": _shortcut_weight(channels, planes), "bias": None}))
                shortcut = f"{p}.shortcut:out"
            g.add(Node("add", f"{p}.add", [r, shortcut], f"{p}.add:out"))
            x, channels = act(f"{p}.act2", f"{p}.add:out"), planes
    g.add(Node("global_avgpool", "avgpool", [x], "avgpool:out"))
    g.add(Node("flatten", "flatten", ["avgpool:out"], "flatten:out"))
    g.add(Node("linear", "linear", ["flatten:out"], "logits", {}, {"weight": w["linear.weight"], "bias": w["linear.bias"]}))
    return g


def synthetic_weights(x: np.ndarray, depth: int = 20, seed: int = 0) -> dict:
    """Untrained folded-AESPA weights whose activations stay in range on the images `x`, for
    exercising the FHE path (latency, memory, precision, top-1 agreement with the plaintext twin)
    before trained weights exist: random convolutions scaled layer by layer to unit output RMS,
    each quadratic 0.05 (x/r)^2 + 0.7 (x/r) per channel with r its input's RMS, a random linear
    layer. Their accuracy is chance; never report it as the model's."""
    rng = np.random.default_rng(seed)
    blocks = (depth - 2) // 6
    shapes = {"conv1.weight": (16, 3, 3, 3)}
    planes_in = 16
    for s, planes in enumerate((16, 32, 64), start=1):
        for b in range(blocks):
            shapes[f"layer{s}.{b}.conv1.weight"] = (planes, planes_in, 3, 3)
            shapes[f"layer{s}.{b}.conv2.weight"] = (planes, planes, 3, 3)
            planes_in = planes
    w = {k: rng.standard_normal(v) / np.sqrt(np.prod(v[1:])) for k, v in shapes.items()}
    for name in activation_names(depth):
        c = 16 if name == "act1" or name.startswith("layer1") else (32 if name.startswith("layer2") else 64)
        w[f"{name}.a"], w[f"{name}.b"], w[f"{name}.c"] = np.zeros(c), np.ones(c), np.zeros(c)
    w["linear.weight"] = rng.standard_normal((10, 64)) / 8
    w["linear.bias"] = rng.standard_normal(10) * 0.1
    from .executor import run_node  # noqa: PLC0415

    values = {"image": np.asarray(x, dtype=np.float64)}
    for node in graph(w, depth).nodes:
        ins = [values[i] for i in node.inputs]
        if node.op == "conv" and not node.name.endswith("shortcut"):
            out = run_node(node, ins)
            w[f"{node.name}.weight"] = w[f"{node.name}.weight"] / np.sqrt(np.mean(out ** 2))
        elif node.op == "poly":
            r = np.sqrt(np.mean(ins[0] ** 2, axis=(0, 2, 3))) + 1e-6
            w[f"{node.name}.a"], w[f"{node.name}.b"], w[f"{node.name}.c"] = 0.05 / r ** 2, 0.7 / r, np.zeros_like(r)
        node = next(m for m in graph(w, depth).nodes if m.name == node.name)
        values[node.output] = run_node(node, ins)
    return w
