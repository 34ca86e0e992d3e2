"""Fixed-point quantisation and the exact integer reference executor.

Activations carry one global fixed-point scale 2^f (f fractional bits); each linear layer
(convolution or fully connected) has weights scaled by its own 2^w_l, a bias scaled by 2^(f+w_l),
an exact integer accumulation, and a truncation by w_l bits (floor, an arithmetic shift) that
brings the result back to scale 2^f. Average pooling multiplies by round(2^s / window) and
truncates by s bits. ReLU, clip(x, 0, M) (ReLU6; its integer twin clips at round(M 2^f),
`QuantizedModel.clip_limit`), max-pooling and residual additions are exact on integers.

This is what the hybrid pipeline computes under encryption: the linear layers in BFV modulo t
(every accumulator must stay below t/2 in magnitude, which calibration checks with a margin),
the truncations and non-linear layers as two-party protocols on shares (whose truncation may be
off by one unit, the documented difference from this reference).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .executor import _pad, _windows, run_node
from .ir import Graph, ModelError

#: Fractional bits of the pooling multipliers.
POOL_SHIFT = 16
#: Largest integer a float64 represents exactly; beyond it the executor falls back to int64.
EXACT_FLOAT = 2**53


@dataclass
class QuantConfig:
    """How to quantise: the plaintext modulus bits the accumulators must fit in (signed, so values
    stay below 2^(plaintext_bits - 1)), the largest weight magnitude in bits, and a safety margin
    in bits between the calibrated maximum and that bound."""

    plaintext_bits: int = 37
    weight_bits: int = 12
    margin_bits: int = 2
    max_fraction_bits: int = 16
    min_weight_fraction_bits: int = 4


@dataclass
class QuantizedModel:
    graph: Graph
    fraction_bits: int
    config: QuantConfig
    #: Per linear layer: (integer weight, integer bias, truncation bits).
    layers: dict = field(default_factory=dict)
    #: Per pooling layer: (multiplier, shift).
    pools: dict = field(default_factory=dict)
    #: Per linear layer: the largest |accumulator| seen in calibration, in bits.
    accumulator_bits: dict = field(default_factory=dict)

    def encode_input(self, x: np.ndarray) -> np.ndarray:
        """Float input (N, C, H, W) to integers at scale 2^f (what the client secret-shares)."""
        return np.round(np.asarray(x, dtype=np.float64) * 2.0**self.fraction_bits).astype(np.int64)

    def decode(self, y: np.ndarray) -> np.ndarray:
        return np.asarray(y, dtype=np.float64) / 2.0**self.fraction_bits

    def clip_limit(self, node) -> int:
        """The integer upper bound of a `clip` node at scale 2^f: round(max 2^f), what the
        integer twin (and the hybrid runtime's clip) clips at."""
        return clip_limit(node, self.fraction_bits)


def clip_limit(node, fraction_bits: int) -> int:
    """round(max 2^f) of a `clip` node (attrs {"min": 0, "max": max}) at f fraction bits."""
    if node.op != "clip":
        raise ModelError(f"{node.describe()}: not a clip node")
    return int(round(float(node.attrs["max"]) * 2.0**fraction_bits))


def polynomial_refusal(node) -> ModelError:
    """Why the integer twin (and so the hybrid mode) cannot take a `poly` node, and what to use."""
    return ModelError(f"{node.describe()}: a polynomial activation has no exact integer twin or two-party protocol, so the hybrid mode cannot run it; "
                      "run this model in the FHE mode (--mode fhe; lycaon.Server(model, mode='fhe'))")


def _calibrate(graph: Graph, x: np.ndarray) -> dict:
    """Largest |value| of every tensor on the calibration batch."""
    values = {graph.input_name: x}
    peaks = {graph.input_name: float(np.abs(x).max())}
    for node, done in zip(graph.nodes, graph.release_schedule()):
        if node.op == "batchnorm":
            raise ModelError(f"{node.describe()}: fold batch-norm first (frontend.simplify)")
        if node.op == "poly":
            raise polynomial_refusal(node)
        values[node.output] = run_node(node, [values[i] for i in node.inputs])
        peaks[node.output] = float(np.abs(values[node.output]).max())
        for name in done:  # only live tensors stay: ImageNet-size calibration fits
            del values[name]
    return peaks


def quantize(graph: Graph, calibration: np.ndarray, config: QuantConfig = QuantConfig()) -> QuantizedModel:
    """Chooses the activation scale and per-layer weight scales from calibration inputs (float,
    model-ready) so that every accumulator fits the plaintext modulus with the margin."""
    peaks = _calibrate(graph, np.asarray(calibration, dtype=np.float64))
    limit = 2.0 ** (config.plaintext_bits - 1 - config.margin_bits)
    for f in range(config.max_fraction_bits, 0, -1):
        layers, acc_bits, ok = {}, {}, True
        for node in graph.nodes:
            if node.op not in ("conv", "linear"):
                continue
            w = node.params["weight"]
            w_max = float(np.abs(w).max()) or 1.0
            # Largest w_l with |w| 2^w_l < 2^(weight_bits - 1) and |acc| 2^(f + w_l) < limit.
            by_weight = int(np.floor(np.log2((2.0 ** (config.weight_bits - 1) - 1) / w_max)))
            acc_peak = max(peaks[node.output], 1e-12)
            by_acc = int(np.floor(np.log2(limit / acc_peak))) - f
            wl = min(by_weight, by_acc)
            if wl < config.min_weight_fraction_bits:
                ok = False
                break
            wq = np.round(w * 2.0**wl).astype(np.int64)
            b = node.params.get("bias")
            bq = np.round(b * 2.0 ** (f + wl)).astype(np.int64) if b is not None else None
            layers[node.name] = (wq, bq, wl)
            acc_bits[node.name] = float(np.log2(acc_peak) + f + wl)
        if ok and peaks[graph.input_name] * 2.0**f < limit:
            pools = {}
            shapes = graph.shapes()
            for node in graph.nodes:
                if node.op in ("avgpool", "global_avgpool"):
                    window = int(np.prod(node.attrs["kernel"])) if node.op == "avgpool" else int(np.prod(shapes[node.inputs[0]][1:]))
                    pools[node.name] = (int(round(2.0**POOL_SHIFT / window)), POOL_SHIFT)
            return QuantizedModel(graph, f, config, layers, pools, acc_bits)
    raise ModelError(f"no fixed-point scale fits {config.plaintext_bits}-bit accumulators with {config.margin_bits} bits of margin; use a larger plaintext modulus")


def _floor_shift(x: np.ndarray, bits: int) -> np.ndarray:
    return x >> bits if bits > 0 else x


def _int_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact integer product: BLAS in float64 when every partial sum stays below 2^53."""
    bound = float(np.abs(a).max(initial=0)) * float(np.abs(b).sum(axis=0).max(initial=0))
    if bound < EXACT_FLOAT:
        return np.rint(a.astype(np.float64) @ b.astype(np.float64)).astype(np.int64)
    return a.astype(np.int64) @ b.astype(np.int64)


def _conv_int(x, wq, stride, pads, groups):
    x = _pad(x, pads)
    out_c, in_pg, kh, kw = wq.shape
    cols = _windows(x, kh, kw, stride[0], stride[1])
    n, _, oh, ow = cols.shape[:4]
    opg = out_c // groups
    outs = []
    for g in range(groups):
        xg = cols[:, g * in_pg:(g + 1) * in_pg].transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, in_pg * kh * kw)
        outs.append(_int_matmul(xg, wq[g * opg:(g + 1) * opg].reshape(opg, -1).T).reshape(n, oh, ow, opg).transpose(0, 3, 1, 2))
    return np.concatenate(outs, axis=1)


def run_integer(q: QuantizedModel, x_int: np.ndarray, batch: int = 64, check_overflow: bool = True, progress=None) -> np.ndarray:
    """The exact integer reference: integer inputs at scale 2^f in, integer outputs at 2^f out.
    Raises OverflowError if an accumulator leaves the plaintext range."""
    bound = 2 ** (q.config.plaintext_bits - 1)
    schedule = q.graph.release_schedule()
    outs = []
    for start in range(0, len(x_int), batch):
        values = {q.graph.input_name: np.asarray(x_int[start:start + batch], dtype=np.int64)}
        for node, done in zip(q.graph.nodes, schedule):
            ins = [values[i] for i in node.inputs]
            x, a = ins[0], node.attrs
            if node.op in ("conv", "linear"):
                wq, bq, shift = q.layers[node.name]
                if node.op == "conv":
                    acc = _conv_int(x, wq, a.get("stride", (1, 1)), a.get("pads", (0, 0, 0, 0)), a.get("groups", 1))
                    if bq is not None:
                        acc = acc + bq.reshape(1, -1, 1, 1)
                else:
                    acc = _int_matmul(x, wq.T)
                    if bq is not None:
                        acc = acc + bq
                if check_overflow and np.abs(acc).max(initial=0) >= bound:
                    raise OverflowError(f"{node.describe()}: accumulator exceeds the {q.config.plaintext_bits}-bit plaintext range")
                y = _floor_shift(acc, shift)
            elif node.op == "relu":
                y = np.maximum(x, 0)
            elif node.op == "clip":
                y = np.clip(x, 0, q.clip_limit(node))
            elif node.op == "maxpool":
                k, s = a["kernel"], a.get("stride", a["kernel"])
                padded = _pad(x, a.get("pads", (0, 0, 0, 0)), np.iinfo(np.int64).min // 2)
                y = _windows(padded, k[0], k[1], s[0], s[1]).max(axis=(4, 5))
            elif node.op in ("avgpool", "global_avgpool"):
                mult, shift = q.pools[node.name]
                if node.op == "avgpool":
                    k, s = a["kernel"], a.get("stride", a["kernel"])
                    sums = _windows(_pad(x, a.get("pads", (0, 0, 0, 0))), k[0], k[1], s[0], s[1]).sum(axis=(4, 5))
                else:
                    sums = x.sum(axis=(2, 3), keepdims=True)
                y = _floor_shift(sums * mult, shift)
            elif node.op == "flatten":
                y = x.reshape(x.shape[0], -1)
            elif node.op == "add":
                y = ins[0] + ins[1]
            elif node.op == "concat":
                y = np.concatenate(ins, axis=1)
            else:
                raise ModelError(f"{node.describe()}: no integer kernel")
            values[node.output] = y
            for name in done:
                del values[name]
        outs.append(values[q.graph.output])
        if progress is not None:
            progress(min(start + batch, len(x_int)))
    return np.concatenate(outs)
