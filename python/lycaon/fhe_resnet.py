"""CIFAR ResNets in the FHE mode: HyPHEN's changing packing in the stage-1 blocks (lycaon-nn's
CAConv to one ciphertext per channel and RAConv back, one level each) and multiplexed parallel
convolutions elsewhere (lycaon-nn's MPConv, Lee et al. 2022), per-channel quadratic activations
(AESPA: a x^2 + b x + c, one level when monic) or, for networks trained with ReLU, Lee et al.'s
composite minimax ReLU (degrees 15, 15, 27: 13 levels and one for the product, more than the 10
a bootstrap leaves, so the composite is split around bootstraps),
residual additions, global average pooling with the fully connected layer, and bootstrapping
placed by the level plan, all at logN = 16 (2^15 slots) on the bootstrappable parameter set.

Bootstrapping placement (002 Fig. 1): every tensor carries its level; `refresh_plan` names, before
each step, the inputs to refresh, chosen at compile time: on demand (an input with fewer than
d + 1 levels before a step of depth d, so that one level remains for a later refresh's own
scaling), or with `placement="fewest"` by a search for the fewest bootstraps over exact levels
(`FheResNet._fewest_refreshes`; on ResNet-20 both give 8 with MPConv, 7 with HyPHEN). A refresh
multiplies the tensor by 1/B (B a power of two above the largest |value| the calibration run saw
for it, so the bootstrapper sees messages in [-1, 1]: one level), bootstraps it back to the top
residual level and multiplies by the integer B (no level). A tensor that feeds two steps (a
block's input feeds its first convolution and its shortcut) is refreshed once, for both.

Composite ReLU (`composite_relu_schedule`): u = x / B (one level; B the calibrated bound of the
ReLU's input), then the sign stages p_1 .. p_k on u, the last one folded into the step
B (1 + p_k) / 2, and ReLU(x) = u * step (one level). Bootstraps go where the levels run out: on u
itself and/or on a stage's input (always in [-1, 1], so no scaling), placed to use the fewest
bootstraps and then to leave the most levels (two per ReLU in ResNet-20, where a ReLU's input
arrives with one or two levels).

`FheResNet` compiles (weights, layers, the plan) and writes the runtime's FHE program
(`FheResNet.program`); the runtime runs it (lycaon-runtime's `fhe` module: one bootstrapper that
every session shares, each session with one client's public keys; the client, from the public
program alone, holds the secret key and generates the level-aware rotation keys and the
bootstrapping keys).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import product
from typing import Callable, Optional, Sequence

import numpy as np

from ._native import (
    CkksBootstrapParams,
    FheAvgPoolFc,
    FheCaConv,
    FheMpConv,
    FheRaConv,
    LycaonError,
    composite_relu,
    multiplexed_pack,
)
from .frontend.executor import run_node
from .frontend.ir import Graph, ModelError
from .frontend.transforms import fold_batchnorm, monic_quadratics


def composite_relu_schedule(stage_depths: Sequence[int], level: int, top: int) -> tuple[tuple[bool, ...], int]:
    """Where a composite ReLU whose input is at `level` bootstraps: flags (bootstrap u = x / B,
    then one flag per stage after the first: bootstrap that stage's input) and the output level.
    Fewest bootstraps first, then the highest output level; the output keeps at least one level
    (a later refresh spends it on its own scaling). ModelError when no placement fits."""
    if level < 1:
        raise ModelError(f"a composite ReLU needs its input at level 1 or above (for x / B), not {level}")
    best: Optional[tuple[int, int, tuple[bool, ...]]] = None
    for flags in product((False, True), repeat=len(stage_depths)):
        lu = top if flags[0] else level - 1
        lc, fits = lu, True
        for i, d in enumerate(stage_depths):
            if i and flags[i]:
                lc = top
            fits &= lc >= d
            lc -= d
        out = min(lu, lc) - 1
        if fits and out >= 1:
            key = (sum(flags), -out, flags)
            if best is None or key < best:
                best = key
    if best is None:
        raise ModelError(f"a composite ReLU of stage depths {list(stage_depths)} does not fit {top} levels between bootstraps")
    return best[2], -best[1]


#: Model names this path serves: the shipped AESPA ResNet-20 (quadratics) and the shipped ReLU
#: ResNet-20 (composite minimax ReLU), each under the name of its weights too.
RESNET20_MODELS = {"resnet20": "resnet20-aespa-cifar10", "resnet20-aespa-cifar10": "resnet20-aespa-cifar10",
                   "resnet20-relu": "resnet20-cifar10", "resnet20-cifar10": "resnet20-cifar10"}


@dataclass
class _Op:
    kind: str  # conv, hyphen (CAConv, quadratic, RAConv), quadratic, linear (per-channel b x + c), relu, add, pool_fc
    node: str
    inputs: list
    output: str
    depth: int
    layer: object = None
    layout: tuple = ()
    a: Optional[np.ndarray] = None
    b: Optional[np.ndarray] = None
    c: Optional[np.ndarray] = None
    bias: Optional[np.ndarray] = None
    fields: dict = field(default_factory=dict)  # the layer's own part of the program's op


def _layout(l: tuple) -> dict:
    return {"channels": int(l[0]), "height": int(l[1]), "width": int(l[2]), "gap": int(l[3])}


def _copy_len(l: tuple) -> int:
    """Slots of one copy of a multiplexed (C, h, w, gap) tensor: the blocks of gap^2 channels,
    rounded up to a power of two, times gap^2 h w; the ciphertext repeats with this period."""
    c, h, w, k = (int(v) for v in l[:4])
    blocks = -(-c // (k * k))
    return (1 << (blocks - 1).bit_length()) * k * k * h * w


def bootstrap_shape_for_period(period: int) -> str:
    """The sparsest bootstrapping shape for tensors repeating every `period` slots (the runtime
    measured 2^11 .. 2^14 at logN = 16; program::bootstrap_shape_for_period in Rust)."""
    log = max(11, (max(int(period), 1) - 1).bit_length())
    return f"logn16_slots{log}" if log <= 14 else "logn16_full_slots"


class FheResNet:
    """A CIFAR ResNet graph (as `aespa.graph` builds it) compiled for CKKS with bootstrapping."""

    def __init__(self, graph: Graph, calibration: np.ndarray, relu_degrees: Optional[Sequence[int]] = None, monic: bool = True,
                 hyphen: bool = True, placement: str = "greedy"):
        # Monic quadratics (002 Fig. 1: one level per AESPA activation instead of two): a x^2 +
        # b x + c as a (x^2 + (b/a) x + c/a), each factor a taken by the convolutions and the
        # linear layer reading the activation, and applied by a per-channel product on the
        # identity shortcuts (one level on a branch with levels to spare; carried along the
        # residual stream instead, it compounds until float64 overflows). Left as they are when
        # some channel has no square term (then two levels: a x first, then times x).
        self.graph = fold_batchnorm(graph)
        if monic and any(n.op == "poly" for n in self.graph.nodes):
            try:
                self.graph = monic_quadratics(self.graph, scale_at_adds=True)
            except ModelError:
                pass
        # HyPHEN (002 Sec. 4; the default): where a stride-1 convolution on the gap-1 packing
        # feeds a quadratic that feeds another stride-1 convolution (a basic block of stage 1),
        # the packing changes in between (CAConv to one ciphertext per channel, RAConv back), one
        # level per convolution instead of two and no placement rotations (lycaon-nn's
        # fhe::hyphen): ResNet-20 needs 7 bootstraps instead of 8, 0.90-0.95x the latency.
        # hyphen=False keeps MPConv everywhere.
        self.hyphen = hyphen
        # Every logn16 shape shares this ring and level plan; `program` names the bootstrapping
        # shape its tensors' copy lengths allow.
        self.shape = CkksBootstrapParams.logn16_full_slots()
        self.params = self.shape.parameters()
        self.slots = self.params.max_slots
        self.top = self.shape.residual_levels
        self.bounds = self._calibrate(calibration)
        # ReLU nodes (a network trained with ReLU) run as Lee et al.'s composite minimax ReLU.
        self.relu = None
        if any(n.op == "relu" for n in self.graph.nodes):
            spec = composite_relu(list(relu_degrees) if relu_degrees is not None else None)
            stages = [np.asarray(c, dtype=np.float64) for c in spec["stages"]]
            self.relu = {"stages": stages, "depths": [math.ceil(math.log2(len(c))) for c in stages]}
        self.ops, self.input_layout = self._compile()
        # Where bootstraps go (002 Fig. 1): "greedy" (refresh on demand, the default) or "fewest"
        # (a search for the fewest bootstraps; on ResNet-20 it finds as many as the greedy rule,
        # 8 with MPConv and 7 with HyPHEN, so the rule is optimal there); `refresh_plan[i]` names
        # the tensors refreshed before op i.
        if placement not in ("fewest", "greedy"):
            raise ModelError(f"bootstrap placement {placement!r}: fewest or greedy")
        self.refresh_plan = self._fewest_refreshes() if placement == "fewest" else self._greedy_refreshes()
        self._rotation_levels = self._rotation_plan()

    def _maxima(self, x: np.ndarray):
        """Per chunk of images, the largest |value| of every tensor of each image (float64)."""
        for k in range(0, len(x), 8):  # in chunks: the server's peak memory is the keys', not this
            values = {self.graph.input_name: np.asarray(x[k:k + 8], dtype=np.float64)}
            for node in self.graph.nodes:
                values[node.output] = run_node(node, [values[i] for i in node.inputs])
            yield {name: np.abs(v).reshape(len(v), -1).max(1) for name, v in values.items()}

    def _calibrate(self, x: np.ndarray) -> dict:
        """Largest |value| of every tensor over the calibration images, as a power of two."""
        largest: dict = {}
        for chunk in self._maxima(x):
            for name, m in chunk.items():
                largest[name] = max(largest.get(name, 0.0), float(m.max()))
        # Twice the calibration maximum: images beyond it still land inside [-1, 1].
        return {name: float(2.0 ** math.ceil(math.log2(max(2.0 * m, 1e-3)))) for name, m in largest.items()}

    def _compile(self) -> tuple[list[_Op], tuple]:
        g, S = self.graph, self.slots
        c, h, w = g.input_shape
        layouts = {g.input_name: (c, h, w, 1, S)}
        ops: list[_Op] = []
        nodes = list(g.nodes)
        readers: dict = {g.output: 1}
        for n in nodes:
            for name in n.inputs:
                readers[name] = readers.get(name, 0) + 1
        i = 0
        while i < len(nodes):
            node = nodes[i]
            src = layouts[node.inputs[0]]
            pair = self._hyphen_pair(nodes, i, src, readers) if self.hyphen else None
            if pair is not None:
                ops.append(pair)
                out = pair.layout
                node = nodes[i + 2]
                i += 2
            elif node.op == "conv":
                attrs = self._conv_attrs(node)
                if attrs is None:
                    raise ModelError(f"{node.describe()}: MPConv takes square odd kernels padded by f/2, no groups")
                wgt, k, stride = attrs
                layer = FheMpConv(src, wgt.shape[0], k, stride, wgt.ravel())
                out = layer.output_layout
                bias = node.params.get("bias")
                bias_vec = None if bias is None else multiplexed_pack(*out, np.repeat(np.asarray(bias, dtype=np.float64), out[1] * out[2]))
                fields = {"input": _layout(src), "out_channels": int(wgt.shape[0]), "kernel": int(k), "stride": int(stride),
                          "weights": wgt.ravel().tolist()}
                if layer.method != "mpconv":
                    fields["method"] = layer.method
                ops.append(_Op("conv", node.name, list(node.inputs), node.output, 2, layer, out, bias=bias_vec, fields=fields))
            elif node.op == "poly":
                coeffs = np.asarray(node.params["coefficients"], dtype=np.float64)
                if coeffs.ndim != 2 or coeffs.shape[1] != 3:
                    raise ModelError(f"{node.describe()}: expected a per-channel quadratic (C, 3)")
                area = src[1] * src[2]

                def packed(j: int) -> Optional[np.ndarray]:  # None for a coefficient that is 0 in every channel
                    return None if not coeffs[:, j].any() else multiplexed_pack(*src, np.repeat(coeffs[:, j], area))
                out = src
                if not coeffs[:, 2].any():  # b x + c (a per-channel scale): one level
                    ops.append(_Op("linear", node.name, list(node.inputs), node.output, 1, layout=out, b=packed(1), c=packed(0)))
                else:  # monic (x times x): one level; else a x first, then times x: two
                    monic = bool(np.all(coeffs[:, 2] == 1.0))
                    ops.append(_Op("quadratic", node.name, list(node.inputs), node.output, 1 if monic else 2, layout=out,
                                   a=None if monic else packed(2), b=packed(1), c=packed(0)))
            elif node.op == "relu":
                out = src
                ops.append(_Op("relu", node.name, list(node.inputs), node.output, 0, layout=out))
            elif node.op == "add":
                if layouts[node.inputs[1]] != src:
                    raise ModelError(f"{node.describe()}: the two inputs are packed differently")
                out = src
                ops.append(_Op("add", node.name, list(node.inputs), node.output, 0, layout=out))
            elif node.op == "global_avgpool":
                flat, lin = nodes[i + 1], nodes[i + 2] if i + 2 < len(nodes) else None
                if flat.op != "flatten" or lin is None or lin.op != "linear":
                    raise ModelError(f"{node.describe()}: expected global average pooling, flatten, linear")
                wgt = np.asarray(lin.params["weight"], dtype=np.float64)
                bias = np.asarray(lin.params.get("bias") if lin.params.get("bias") is not None else np.zeros(wgt.shape[0]), dtype=np.float64)
                layer = FheAvgPoolFc(self.params, src, wgt.shape[0], wgt.ravel(), bias)
                out = (wgt.shape[0],)
                ops.append(_Op("pool_fc", node.name, list(node.inputs), lin.output, 1, layer, out,
                               fields={"input": _layout(src), "n_out": int(wgt.shape[0]), "weights": wgt.ravel().tolist(), "bias": bias.tolist()}))
                layouts[flat.output] = out
                i += 2
                node = lin
            else:
                raise ModelError(f"{node.describe()}: the FHE ResNet compiler does not take '{node.op}'")
            layouts[node.output] = out
            i += 1
        if not ops or ops[-1].kind != "pool_fc":
            raise ModelError(f"{g.name}: the FHE ResNet compiler expects the network to end in global average pooling and a linear layer")
        return ops, layouts[g.input_name]

    @staticmethod
    def _conv_attrs(node) -> Optional[tuple]:
        """(weights, kernel, stride) of a convolution with a square kernel padded by f/2 and no
        groups, the shape MPConv and HyPHEN's convolutions take (each refuses an even kernel
        itself), else None."""
        if node.op != "conv":
            return None
        wgt = np.asarray(node.params["weight"], dtype=np.float64)
        k = wgt.shape[2]
        if wgt.shape[2] != wgt.shape[3] or any(p != k // 2 for p in node.attrs.get("pads", (0, 0, 0, 0))) or node.attrs.get("groups", 1) != 1:
            return None
        return wgt, k, node.attrs.get("stride", (1, 1))[0]

    def _hyphen_pair(self, nodes, i: int, src: tuple, readers: dict) -> Optional[_Op]:
        """The HyPHEN op for conv -> quadratic -> conv at `i` (both stride 1, the input on the
        gap-1 packing, the intermediate tensors read by the next node only, fewer rotations than
        two MPConvs), else None. The first convolution's bias is folded into the quadratic:
        a (x + β)^2 + b (x + β) + c."""
        if i + 2 >= len(nodes) or src[3] != 1:
            return None
        conv1, act, conv2 = nodes[i:i + 3]
        first, second = self._conv_attrs(conv1), self._conv_attrs(conv2)
        if first is None or second is None or first[2] != 1 or second[2] != 1 or first[1] % 2 == 0 or second[1] % 2 == 0 or act.op != "poly":
            return None
        if act.inputs != [conv1.output] or conv2.inputs != [act.output] or readers.get(conv1.output) != 1 or readers.get(act.output) != 1:
            return None
        coeffs = np.asarray(act.params["coefficients"], dtype=np.float64)
        if coeffs.ndim != 2 or coeffs.shape[1] != 3 or not np.all(coeffs[:, 2] != 0):
            return None
        (w1, k1, _), (w2, k2, _) = first, second
        c_mid, (_, h, w, _, slots) = w1.shape[0], src
        beta = np.asarray(conv1.params["bias"], dtype=np.float64) if conv1.params.get("bias") is not None else np.zeros(c_mid)
        a, b, c0 = coeffs[:, 2], coeffs[:, 1], coeffs[:, 0]
        b, c0 = 2 * a * beta + b, a * beta ** 2 + b * beta + c0
        monic = bool(np.all(a == 1.0))
        ca = FheCaConv(src, c_mid, k1, w1.ravel())
        ra = FheRaConv(c_mid, h, w, slots, w2.shape[0], k2, w2.ravel())
        # Only where the change of packing saves rotations against the two MPConvs it replaces.
        mp1 = FheMpConv(src, c_mid, k1, 1, w1.ravel(), method="mpconv")
        mp2 = FheMpConv(mp1.output_layout, w2.shape[0], k2, 1, w2.ravel(), method="mpconv")
        if ca.counts()[0] + ra.counts()[0] >= mp1.counts()[0] + mp2.counts()[0]:
            return None
        out = ra.output_layout
        bias = conv2.params.get("bias")
        bias_vec = None if bias is None else multiplexed_pack(*out, np.repeat(np.asarray(bias, dtype=np.float64), out[1] * out[2]))
        act_depth = 1 if monic else 2
        return _Op("hyphen", conv1.name, [conv1.inputs[0]], conv2.output, 2 + act_depth, (ca, ra), out,
                   a=None if monic else a, b=b, c=c0, bias=bias_vec,
                   fields={"input": _layout(src), "mid_channels": int(c_mid), "kernel1": int(k1), "weights1": w1.ravel().tolist(),
                           "out_channels": int(w2.shape[0]), "kernel2": int(k2), "weights2": w2.ravel().tolist()})

    def _layer_levels(self, op: _Op, level: int) -> list:
        """(layer, level it runs at) for each layer of `op` that rotates."""
        if op.kind == "hyphen":
            return [(op.layer[0], level), (op.layer[1], level - op.depth + 1)]
        return [] if op.layer is None else [(op.layer, level)]

    def rotation_levels(self) -> dict:
        """Every rotation step with the highest level it is used at, from a dry run of the
        refresh plan `infer` follows."""
        return dict(self._rotation_levels)

    @property
    def planned_bootstraps(self) -> int:
        """Refreshes an image costs (those inside composite ReLUs not counted)."""
        return sum(len(r) for r in self.refresh_plan)

    def _refreshed_level(self, name: str) -> int:
        # A bound under 1 is put back by a product with it after the bootstrap (one level).
        return self.top if self.bounds[name] >= 1 else self.top - 1

    def _greedy_refreshes(self) -> list:
        """Refresh on demand: before a step of depth d, each input with fewer than d + 1 levels
        (one kept for a later refresh's own scaling)."""
        levels = {self.graph.input_name: self.top}
        plan = []
        for op in self.ops:
            low = tuple(dict.fromkeys(n for n in op.inputs if levels[n] < op.depth + 1))
            for name in low:
                levels[name] = self._refreshed_level(name)
            plan.append(low)
            levels[op.output] = self.output_level(op, min(levels[n] for n in op.inputs))
        return plan

    def _fewest_refreshes(self) -> list:
        """The fewest bootstraps (a composite ReLU's own included), by a dynamic program over the
        levels of the tensors still to be read (a residual network keeps two or three alive):
        before each step, which of its inputs to refresh. Exact levels: a step needs its inputs
        at its depth or above, a refresh needs one level (its scaling). Among plans with as few
        bootstraps, the highest output level. Unlike refresh-on-demand, it may refresh a block's
        input (read by both branches) early rather than a tensor inside the block that the
        shortcut would drag down again at the addition."""
        last_read = {self.graph.output: len(self.ops)}
        for i, op in enumerate(self.ops):
            for name in op.inputs:
                last_read[name] = max(last_read.get(name, -1), i)
        states = {((self.graph.input_name, self.top),): (0, ())}
        for i, op in enumerate(self.ops):
            inputs = tuple(dict.fromkeys(op.inputs))
            following: dict = {}
            for state, (cost, plan) in states.items():
                for mask in range(1 << len(inputs)):
                    chosen = tuple(n for j, n in enumerate(inputs) if mask >> j & 1)
                    levels = dict(state)
                    if any(levels[n] < 1 for n in chosen):
                        continue
                    for n in chosen:
                        levels[n] = self._refreshed_level(n)
                    lvl = min(levels[n] for n in inputs)
                    if lvl < op.depth:
                        continue
                    extra = 0
                    try:
                        levels[op.output] = self.output_level(op, lvl)
                        if op.kind == "relu":
                            extra = sum(composite_relu_schedule(self.relu["depths"], lvl, self.top)[0])
                    except ModelError:
                        continue
                    key = tuple(sorted((n, v) for n, v in levels.items() if last_read.get(n, -1) > i))
                    value = (cost + len(chosen) + extra, plan + (chosen,))
                    if key not in following or value[0] < following[key][0]:
                        following[key] = value
            if not following:
                raise ModelError(f"{op.node}: no refresh plan gives this step its {op.depth} levels")
            states = following
        best = min(states.items(), key=lambda kv: (kv[1][0], -dict(kv[0])[self.graph.output]))
        return list(best[1][1])

    def _rotation_plan(self) -> dict:
        """Rotation step -> the highest level it is used at, under `refresh_plan`."""
        levels = {self.graph.input_name: self.top}
        need: dict = {}
        for op, refresh in zip(self.ops, self.refresh_plan):
            for name in refresh:
                levels[name] = self._refreshed_level(name)
            lvl = min(levels[n] for n in op.inputs)
            for layer, at in self._layer_levels(op, lvl):
                for s in layer.rotation_steps():
                    s = int(s) % self.slots
                    if s:
                        need[s] = max(need.get(s, 0), at)
            levels[op.output] = self.output_level(op, lvl)
        return need

    def op_levels(self) -> list:
        """The level each op reads its inputs at, under `refresh_plan` (after its refreshes)."""
        levels = {self.graph.input_name: self.top}
        out = []
        for op, refresh in zip(self.ops, self.refresh_plan):
            for name in refresh:
                levels[name] = self._refreshed_level(name)
            lvl = min(levels[n] for n in op.inputs)
            out.append(lvl)
            levels[op.output] = self.output_level(op, lvl)
        return out

    def program(self, name: Optional[str] = None, metadata: Optional[dict] = None) -> dict:
        """The compiled network as the runtime's FHE program (JSON-ready; carries the weights):
        the bootstrappable parameters by shape name, the multiplexed input, every op with its
        level and the tensors refreshed before it, the level-aware keys."""
        from .fhe import slot_values  # noqa: PLC0415

        ops = []
        for op, refresh, level in zip(self.ops, self.refresh_plan, self.op_levels()):
            d = {"name": op.node, "inputs": list(op.inputs), "output": op.output, "level": int(level), "depth": int(op.depth),
                 "refresh": [{"tensor": n, "bound": float(self.bounds[n])} for n in refresh]}
            if op.kind == "conv":
                d.update(kind="mp_conv", bias=slot_values(op.bias), **op.fields)
            elif op.kind == "hyphen":
                d.update(kind="hyphen", a=None if op.a is None else np.asarray(op.a, dtype=np.float64).tolist(), b=np.asarray(op.b, dtype=np.float64).tolist(),
                         c=np.asarray(op.c, dtype=np.float64).tolist(), bias=slot_values(op.bias), **op.fields)
            elif op.kind == "quadratic":
                d.update(kind="quadratic", a=slot_values(op.a), b=slot_values(op.b), c=slot_values(op.c))
            elif op.kind == "linear":
                d.update(kind="scale_shift", b=slot_values(op.b if op.b is not None else np.zeros(self.slots)), c=slot_values(op.c))
            elif op.kind == "relu":
                d.update(kind="composite_relu", bound=float(self.bounds[op.inputs[0]]), stages=[np.asarray(c, dtype=np.float64).tolist() for c in self.relu_step(op.inputs[0])],
                         depths=[int(x) for x in self.relu["depths"]])
            elif op.kind == "add":
                d.update(kind="add")
            elif op.kind == "pool_fc":
                d.update(kind="pool_fc", **op.fields)
            else:
                raise ModelError(f"{op.node}: op kind {op.kind} has no program form")
            ops.append(d)
        c, h, w = self.graph.input_shape
        period = max(_copy_len(l) for l in [self.input_layout] + [op.layout for op in self.ops if len(op.layout) >= 4])
        return {"format": 1, "name": name or self.graph.name, "parameters": {"kind": "bootstrappable", "shape": bootstrap_shape_for_period(period)},
                "input": self.graph.input_name, "input_shape": [int(c), int(h), int(w)],
                "input_packing": {"kind": "multiplexed", **_layout(self.input_layout)}, "input_level": int(self.top), "output": self.ops[-1].output,
                "output_slots": list(range(int(self.ops[-1].layout[0]))), "ops": ops,
                "rotation_levels": {str(int(k)): int(v) for k, v in self.rotation_levels().items()},
                "relin_level": int(self.top), "metadata": metadata or {}}

    def output_level(self, op: _Op, level: int) -> int:
        """The level `op` leaves its output at, from its input's."""
        if op.kind == "relu":
            return composite_relu_schedule(self.relu["depths"], level, self.top)[1]
        return level - op.depth

    def _float_relu(self, name: str) -> Callable[[np.ndarray], np.ndarray]:
        stages = self.relu_step(name)

        def relu(v: np.ndarray) -> np.ndarray:
            u = p = v / self.bounds[name]
            for c in stages:
                p = np.polynomial.chebyshev.chebval(p, c)
            return u * p
        return relu

    def relu_step(self, name: str) -> list[np.ndarray]:
        """The composite's stages for the ReLU whose input is `name`, the last folded into the
        step B (1 + p_k) / 2 (B the input's bound, so that u * step = ReLU(x) for u = x / B)."""
        stages = list(self.relu["stages"])
        b = self.bounds[name]
        last = stages[-1] * (b / 2.0)
        last[0] += b / 2.0
        return stages[:-1] + [last]

    def range_ratio(self, x: np.ndarray) -> np.ndarray:
        """Per image of the batch `x`, the largest |value| / calibrated bound over all tensors
        (float64). Above 1 the image leaves the range the bootstraps were planned for (a refreshed
        tensor divided by its bound falls outside [-1, 1]), and its encrypted result is undefined;
        conservative, since not every tensor is refreshed."""
        with np.errstate(over="ignore", invalid="ignore"):  # quadratics can overflow far outside the range
            ratios = [np.max([m / self.bounds[name] for name, m in chunk.items()], axis=0) for chunk in self._maxima(x)]
        return np.nan_to_num(np.concatenate(ratios), nan=np.inf) if ratios else np.zeros(0)

    def reference(self, x: np.ndarray, approximate: bool = False) -> np.ndarray:
        """The float64 logits of the graph (batch-norm folded), with exact ReLU (the plaintext
        twin) or, `approximate`, with the composite ReLU the encrypted run evaluates (each
        ReLU's input divided by its bound first, as there)."""
        values = {self.graph.input_name: np.asarray(x, dtype=np.float64)[None]}
        for node in self.graph.nodes:
            relu = self._float_relu(node.inputs[0]) if approximate and node.op == "relu" else None
            values[node.output] = run_node(node, [values[i] for i in node.inputs], relu=relu)
        return values[self.graph.output][0]


def load_resnet20(model: str, calibration: Optional[np.ndarray] = None, hyphen: bool = True, placement: str = "greedy") -> FheResNet:
    """The shipped ResNet-20 of `model` (a `RESNET20_MODELS` name) compiled for CKKS by the
    Python compiler (the Rust compiler's oracle; the product uses `fhe.compile_model`).
    `hyphen`: HyPHEN's changing packing in the blocks where it applies; `placement`: where
    bootstraps go (`FheResNet`); `calibration` as `resnet20_graph` takes it."""
    graph, x = resnet20_graph(model, calibration)
    return FheResNet(graph, x, hyphen=hyphen, placement=placement)


def resnet20_graph(model: str, calibration: Optional[np.ndarray] = None) -> tuple[Graph, np.ndarray]:
    """(the graph of the shipped ResNet-20 of `model`, a `RESNET20_MODELS` name; model-ready
    calibration inputs). `calibration`: raw uint8 CIFAR-10 images for the value bounds; default
    64 training images from ../shared/data, else the last 64 bundled test images."""
    from .frontend import aespa, resnet, zoo  # noqa: PLC0415
    from .models import load_weights  # noqa: PLC0415

    if model not in RESNET20_MODELS:
        raise LycaonError(f"unknown FHE ResNet-20 model '{model}' (one of {', '.join(RESNET20_MODELS)})")
    name = RESNET20_MODELS[model]
    if calibration is None:
        try:
            calibration = zoo.cifar10("train")[0][:64].copy()  # a copy: the view would keep the whole set alive
        except OSError:
            from .data import demo_images  # noqa: PLC0415

            calibration = demo_images("cifar10")[0][-64:]
    graph = aespa.graph(load_weights(name)) if name == "resnet20-aespa-cifar10" else resnet.resnet_cifar(load_weights(name), 20)
    graph.name = name
    return graph, resnet.preprocess(calibration)
