"""FHE mode (DESIGN.md, Setup A): the whole network runs under CKKS on the server; the client
encrypts the image once and decrypts the logits. One round trip, no client computation between.

This module compiles a model-front graph into an FHE program and runs it:

* Packings. A (C, H, W) tensor lives in the gap ("multiplexed", Lee et al. 2022) packing of
  004's appendix generalised to any image size: channel c, pixel (y, x) at slot
  (c div g^2) B + (g y + (c mod g^2) div g) R + g x + (c mod g^2) mod g, with gap g, row length R
  and block length B. A stride-s convolution keeps the grid and multiplies the gap by s, so the
  k^2 channels multiplexed into one block refill the slots that the stride empties, and the
  offset from an input slot to an output slot depends only on the channels and the tap: few
  diagonals. A flat vector lives in slots 0..F and may repeat with a period P (a power of two).
* Linear layers (convolution with any stride and padding, average pooling, fully connected) are
  plaintext matrices on the slots, evaluated by the diagonal method with baby-step giant-step and
  double hoisting (`CkksLinearTransform`, one level). A convolution whose input repeats with
  period P reads, for each output block, the copy of the input in that block's period, so a
  first convolution on a replicated image needs taps x multiplexed offsets diagonals only. A
  fully connected layer uses the hybrid method (Juvekar et al., Gazelle): n_out padded to P_out
  generalised diagonals over the input period, then log2(P_in / P_out) rotate-and-adds, which
  leave the output repeated with period P_out, ready for the next layer.
* Activations: quadratics per channel a x^2 + b x + c (AESPA's folded HerPN, 002 Sec. 3; the
  x^2 of Orion's and CryptoNets' networks): one ciphertext product, one level when monic (a = 1),
  two otherwise.
* Levels: every layer's depth is known at compile time, so the parameters are chosen with
  exactly the network's depth (the smallest ring that holds it at 128-bit security) and every
  rotation key is generated at the highest level it is used at (004's level-aware keyset).
  Networks deeper than the largest ring holds need bootstrapping placement, which this compiler
  does not do yet (it says so).

Roles: `FheModel` compiles (weights stay with it) and writes the runtime's FHE program
(`FheModel.program`); the runtime (lycaon-runtime's `fhe` module, through `lycaon.Server(...,
mode="fhe")` and `lycaon.Client`) runs it: the server with the client's public keys only, the
client with the secret key.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from ._native import CkksLinearTransform, CkksParameters, LycaonError, SecurityError, security_table
from .frontend.ir import Graph, ModelError, Node
from .frontend.transforms import fold_batchnorm

# log2(QP) bound for 128-bit security with a ternary secret, by log2(n): lycaon-rlwe's table.
MAX_LOG_QP = {n.bit_length() - 1: bits for n, bits in security_table().items()}
KEYSETS = ("level-aware", "all-required", "power-of-two")


def _next_pow2(x: int) -> int:
    return 1 << max(0, int(x - 1).bit_length())


@dataclass
class Packing:
    """Where each tensor value sits in the slots: `index` has the tensor's shape; the data
    repeats every `period` slots (== slot count: no repetition); `grid` = (gap, row, block) for
    a (C, H, W) tensor in the gap packing."""

    index: np.ndarray
    period: int
    grid: Optional[tuple[int, int, int]] = None

    def extent(self) -> int:
        return int(self.index.max()) + 1

    def all_slots(self, slots: int) -> np.ndarray:
        """Every slot holding a value (all copies), shape (copies,) + tensor shape."""
        copies = slots // self.period
        return self.index[None, ...] + self.period * np.arange(copies).reshape((copies,) + (1,) * self.index.ndim)


@dataclass
class Step:
    """One operation of the FHE program: 'linear', 'replicate', 'quadratic' or 'add'."""

    kind: str
    name: str
    level: int  # level of the ciphertext the step reads
    depth: int
    transform: Optional[CkksLinearTransform] = None
    entries: Optional[tuple] = None  # (rows, cols, values, period) of the transform's matrix
    sum_steps: list = field(default_factory=list)  # left rotations added after the transform
    bias: Optional[np.ndarray] = None
    a: Optional[np.ndarray] = None  # quadratic coefficients per slot (None: a = 1)
    b: Optional[np.ndarray] = None
    c: Optional[np.ndarray] = None
    inputs: list = field(default_factory=list)
    output: str = ""
    stats: dict = field(default_factory=dict)

    def rotations(self) -> list[int]:
        r = list(self.transform.rotations()) if self.transform is not None else []
        return r + [int(s) for s in self.sum_steps]


@dataclass
class FheSpec:
    """What the client needs (public): parameters, input packing, where the logits come out, and
    the keys to generate (rotation steps with their levels, the relinearisation level)."""

    params: CkksParameters
    input_shape: tuple
    input_index: np.ndarray
    input_period: int
    output_slots: np.ndarray
    rotation_levels: dict  # step -> highest level it is used at
    relin_level: Optional[int]

    @property
    def slots(self) -> int:
        return self.params.max_slots

    @property
    def top_level(self) -> int:
        return self.params.max_level

    def pack(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.shape != tuple(self.input_shape):
            raise LycaonError(f"the model takes input of shape {tuple(self.input_shape)}, got {x.shape}")
        v = np.zeros(self.slots)
        for k in range(self.slots // self.input_period):
            v[self.input_index.ravel() + k * self.input_period] = x.ravel()
        return v

    def keyset(self, strategy: str) -> list[tuple[int, int]]:
        """(step, level) pairs of a keyset strategy (004 Table 3): 'level-aware' (each used step
        at its highest level), 'all-required' (each used step at the top level) or
        'power-of-two' (+-2^i at the top level; any rotation is a sum of those)."""
        top = self.top_level
        if strategy == "level-aware":
            return sorted(self.rotation_levels.items())
        if strategy == "all-required":
            return [(s, top) for s in sorted(self.rotation_levels)]
        if strategy == "power-of-two":
            logs = int(math.log2(self.slots))
            return [(sign * (1 << i), top) for i in range(logs) for sign in (1, -1)]
        raise LycaonError(f"unknown keyset strategy '{strategy}' (one of {', '.join(KEYSETS)})")


class FheModel:
    """Server side of the FHE mode: the compiled program of a graph (weights stay here)."""

    def __init__(self, graph: Graph, log_scale: int = 36, log_q0: int = 56, p_bits: Optional[Sequence[int]] = None, log_n: Optional[int] = None):
        """Compiles `graph` (batch-norm folded) with canonical scale 2^log_scale, q_0 of log_q0
        bits (the logits must stay below 2^(log_q0 - log_scale - 1)) and special primes of
        p_bits (default: `special_primes`), in the smallest ring from 2^13 that holds the depth (or 2^log_n)."""
        self.graph = _monic(fold_batchnorm(graph))
        self.log_scale = log_scale
        t0 = time.perf_counter()
        depth = self._depth()
        self.params, self.parameters_recipe = _choose_parameters(depth, _slots_needed(self.graph), log_scale, log_q0, list(p_bits) if p_bits else None, log_n)
        self.slots = self.params.max_slots
        self.steps, self.spec = self._compile(depth)
        self.compile_seconds = time.perf_counter() - t0

    # ------------------------------------------------------------------ compile
    def _node_depth(self, node: Node) -> int:
        if node.op in ("conv", "avgpool", "linear"):
            return 1
        if node.op == "poly":
            coeffs = np.asarray(node.params["coefficients"], dtype=np.float64)
            top = coeffs[..., -1] if coeffs.shape[-1] == 3 else None
            if coeffs.shape[-1] > 3:
                raise ModelError(f"{node.describe()}: the FHE mode evaluates polynomials up to degree 2 (trained quadratics); degree {coeffs.shape[-1] - 1} is not built yet")
            return 1 if top is None or np.all(top == 1.0) else 2
        if node.op in ("flatten", "add"):
            return 0
        if node.op == "relu":
            raise ModelError(f"{node.describe()}: ReLU under CKKS needs the composite minimax approximation and bootstrapping (lycaon.composite_relu), which the FHE compiler does not place yet; train with quadratic activations (poly nodes) or use --mode hybrid")
        raise ModelError(f"{node.describe()}: the FHE mode does not compile '{node.op}' yet")

    def _depth(self) -> int:
        level = {self.graph.input_name: 0}
        for node in self.graph.nodes:
            level[node.output] = max(level[i] for i in node.inputs) + self._node_depth(node)
        return level[self.graph.output]

    def _compile(self, depth: int) -> tuple[list[Step], FheSpec]:
        g, S = self.graph, self.slots
        shape = g.input_shape
        if len(shape) == 3:
            c, h, _ = shape
            row = _grid_row(g)
            index = (np.arange(c)[:, None, None] * h * row + np.arange(h)[None, :, None] * row + np.arange(shape[2])[None, None, :]).astype(np.int64)
            packing = Packing(index, _next_pow2(c * h * row), (1, row, h * row))
        else:
            packing = Packing(np.arange(shape[0], dtype=np.int64), _next_pow2(shape[0]))
        if packing.period > S:
            raise ModelError(f"the input ({int(np.prod(shape))} values) does not fit one ciphertext of {S} slots; several ciphertexts are not built yet")
        packings = {g.input_name: packing}
        levels = {g.input_name: depth}
        steps: list[Step] = []
        for node in g.nodes:
            src = packings[node.inputs[0]]
            lvl = min(levels[i] for i in node.inputs)
            if node.op in ("conv", "avgpool"):
                out, st = self._conv(node, src, lvl)
                steps.append(st)
            elif node.op == "linear":
                if src.period == S and src.extent() <= S // 2:
                    t = _next_pow2(src.extent())
                    rep = [-(t << m) for m in range(int(math.log2(S // t)))]
                    replicated = f"{node.inputs[0]}:replicated"
                    steps.append(Step("replicate", f"{node.name}:replicate", lvl, 0, sum_steps=rep, inputs=[node.inputs[0]], output=replicated))
                    src = Packing(src.index, t)
                    out, st = self._linear(node, src, lvl)
                    st.inputs = [replicated]
                else:
                    out, st = self._linear(node, src, lvl)
                steps.append(st)
            elif node.op == "poly":
                out = src
                steps.append(self._quadratic(node, src, lvl))
            elif node.op == "flatten":
                out = Packing(src.index.reshape(-1), src.period)
                steps.append(Step("alias", node.name, lvl, 0, inputs=[node.inputs[0]], output=node.output))
            elif node.op == "add":
                other = packings[node.inputs[1]]
                if other.period != src.period or not np.array_equal(other.index, src.index):
                    raise ModelError(f"{node.describe()}: its inputs are packed differently (a packing change before a residual addition is not built yet)")
                out = src
                steps.append(Step("add", node.name, lvl, 0, inputs=list(node.inputs), output=node.output))
            else:
                raise ModelError(f"{node.describe()}: the FHE mode does not compile '{node.op}' yet")
            steps[-1].output = steps[-1].output or node.output
            steps[-1].inputs = steps[-1].inputs or list(node.inputs)
            packings[node.output] = out
            levels[node.output] = lvl - self._node_depth(node)
        rotation_levels: dict[int, int] = {}
        relin_level = None
        for st in steps:
            for r in st.rotations():
                r = int(r) % S
                if r:
                    rotation_levels[r] = max(rotation_levels.get(r, 0), st.level)
            if st.kind == "quadratic":
                relin_level = max(relin_level or 0, st.level if st.a is None else st.level - 1)
        outp = packings[g.output]
        if outp.index.ndim != 1:
            raise ModelError("the network's output must be a flat vector (logits)")
        inp = packings[g.input_name]
        spec = FheSpec(self.params, tuple(shape), inp.index, inp.period, outp.index.copy(), rotation_levels, relin_level)
        return steps, spec

    def _conv(self, node: Node, src: Packing, level: int) -> tuple[Packing, Step]:
        S = self.slots
        c_in, h_in, w_in = self.graph.shapes()[node.inputs[0]]
        c_out, h_out, w_out = node.shape
        a = node.attrs
        if node.op == "conv":
            if a.get("groups", 1) != 1:
                raise ModelError(f"{node.describe()}: grouped convolutions are not built in the FHE mode yet")
            weight = np.asarray(node.params["weight"], dtype=np.float64)
            bias = node.params.get("bias")
            stride, pads = a.get("stride", (1, 1)), a.get("pads", (0, 0, 0, 0))
        else:
            k = a["kernel"]
            stride, pads = a.get("stride", k), a.get("pads", (0, 0, 0, 0))
            weight = np.zeros((c_out, c_in) + tuple(k))
            weight[np.arange(c_out), np.arange(c_in)] = 1.0 / (k[0] * k[1])
            bias = None
        if stride[0] != stride[1]:
            raise ModelError(f"{node.describe()}: different strides along rows and columns are not built in the FHE mode")
        if src.grid is None:
            raise ModelError(f"{node.describe()}: its input is not an image packing")
        s = stride[0]
        gap, row, block = src.grid
        gap_out = gap * s
        if gap_out * w_out > row:
            raise ModelError(f"{node.describe()}: the output grid ({gap_out} x {w_out}) is wider than the input's row of {row} slots")
        per_block = gap_out * gap_out
        blocks = -(-c_out // per_block)
        block_out = gap_out * h_out * row
        if src.period < S and block_out <= src.period and blocks * src.period <= S:
            block_out = src.period
        elif blocks * _next_pow2(block_out) <= S:
            block_out = _next_pow2(block_out)
        if blocks * block_out > S:
            raise ModelError(f"{node.describe()}: {c_out} x {h_out} x {w_out} at gap {gap_out} needs {blocks * block_out} slots, more than one ciphertext ({S}); several ciphertexts are not built yet")
        co = np.arange(c_out)
        m = co % per_block
        out_index = ((co // per_block) * block_out)[:, None, None] + ((gap_out * np.arange(h_out))[None, :, None] + (m // gap_out)[:, None, None]) * row \
            + (gap_out * np.arange(w_out))[None, None, :] + (m % gap_out)[:, None, None]
        out_index = out_index.astype(np.int64)
        kh, kw = weight.shape[2], weight.shape[3]
        oi, ii, ww = [], [], []
        ys, xs = np.arange(h_out), np.arange(w_out)
        for dy in range(kh):
            iy = s * ys + dy - pads[0]
            vy = (iy >= 0) & (iy < h_in)
            for dx in range(kw):
                ix = s * xs + dx - pads[1]
                vx = (ix >= 0) & (ix < w_in)
                if not vy.any() or not vx.any():
                    continue
                wt = weight[:, :, dy, dx]
                co_, ci_ = np.nonzero(wt)
                if co_.size == 0:
                    continue
                yy, xx = ys[vy], xs[vx]
                o = out_index[co_][:, yy][:, :, xx]  # (pairs, ny, nx)
                i = src.index[ci_][:, iy[vy]][:, :, ix[vx]]
                oi.append(o.ravel())
                ii.append(i.ravel())
                ww.append(np.broadcast_to(wt[co_, ci_][:, None, None], o.shape).ravel())
        o, i, w = np.concatenate(oi), np.concatenate(ii), np.concatenate(ww)
        if src.period < S:
            i = i + src.period * (o // src.period)
        transform, count = self._transform(o, i, w)
        entries = (o, i, w, None)
        bias_vec = None
        if bias is not None:
            bias_vec = np.zeros(S)
            bias_vec[out_index] = np.asarray(bias, dtype=np.float64)[:, None, None]
        out = Packing(out_index, S, (gap_out, row, block_out))
        return out, Step("linear", node.name, level, 1, transform=transform, entries=entries, bias=bias_vec, stats={"diagonals": count, "weights": int(w.size)})

    def _linear(self, node: Node, src: Packing, level: int) -> tuple[Packing, Step]:
        S = self.slots
        weight = np.asarray(node.params["weight"], dtype=np.float64)
        n_out, n_in = weight.shape
        p_out = _next_pow2(n_out)
        p_in = max(src.period, p_out)
        if p_in > S:
            raise ModelError(f"{node.describe()}: {n_out} outputs do not fit one ciphertext")
        o, i = np.nonzero(weight)
        s = src.index[i]
        d = (s - o) % p_out
        j = (s - d) % p_in
        transform, count = self._transform(j, j + d, weight[o, i], period=p_in)
        entries = (j, j + d, weight[o, i], p_in)
        sums = [p_out << m for m in range(int(math.log2(p_in // p_out)))]
        out_index = np.arange(n_out, dtype=np.int64)
        bias_vec = None
        if node.params.get("bias") is not None:
            bias_vec = np.zeros(S)
            bias_vec[Packing(out_index, p_out).all_slots(S)] = np.asarray(node.params["bias"], dtype=np.float64)[None, :]
        return Packing(out_index, p_out), Step("linear", node.name, level, 1, transform=transform, entries=entries, sum_steps=sums, bias=bias_vec,
                                               stats={"diagonals": count, "weights": int(o.size)})

    def _transform(self, rows: np.ndarray, cols: np.ndarray, values: np.ndarray, period: Optional[int] = None) -> tuple[CkksLinearTransform, int]:
        """The diagonals of the matrix with entries (rows, cols, values) on the slots
        (d_k[t] = M[t][t + k]); with `period`, each diagonal repeats with that period."""
        S = self.slots
        k = (cols - rows) % S
        keys, inverse = np.unique(k, return_inverse=True)
        dense = np.zeros((len(keys), period or S))
        np.add.at(dense, (inverse, rows % (period or S)), values)
        if period:
            dense = np.tile(dense, (1, S // period))
        diagonals = {int(key): dense[n] for n, key in enumerate(keys)}
        return CkksLinearTransform(self.params, diagonals, S), len(keys)

    def _quadratic(self, node: Node, src: Packing, level: int) -> Step:
        S = self.slots
        coeffs = np.asarray(node.params["coefficients"], dtype=np.float64)
        if coeffs.ndim == 1:
            coeffs = np.broadcast_to(np.pad(coeffs, (0, 3 - coeffs.size)), (src.index.shape[0], 3))
        elif coeffs.shape[1] < 3:
            coeffs = np.pad(coeffs, ((0, 0), (0, 3 - coeffs.shape[1])))
        slots = src.all_slots(S)  # (copies, C, ...) or (copies, F)

        def per_slot(col: np.ndarray) -> np.ndarray:
            v = np.zeros(S)
            v[slots] = col.reshape((1, -1) + (1,) * (slots.ndim - 2))
            return v

        c, b, a = coeffs[:, 0], coeffs[:, 1], coeffs[:, 2]
        monic = bool(np.all(a == 1.0))
        return Step("quadratic", node.name, level, 1 if monic else 2, a=None if monic else per_slot(a),
                    b=per_slot(b) if np.any(b) else None, c=per_slot(c) if np.any(c) else None)

    # ------------------------------------------------------------------ program
    def program(self, name: Optional[str] = None, metadata: Optional[dict] = None) -> dict:
        """The compiled network as the runtime's FHE program (JSON-ready): parameters, the
        input's packing, every step with its level, the keys a client makes. It carries the
        weights; the server sends clients its public part only."""
        S = self.slots
        ops = []
        for st in self.steps:
            op = {"name": st.name, "inputs": list(st.inputs), "output": st.output, "level": int(st.level), "depth": int(st.depth)}
            if st.kind == "linear":
                rows, cols, values, period = st.entries
                op.update(kind="linear", rows=np.asarray(rows, dtype=np.int64).tolist(), cols=(np.asarray(cols, dtype=np.int64) % S).tolist(),
                          values=np.asarray(values, dtype=np.float64).tolist(), period=None if period is None else int(period),
                          sum_steps=[int(r) for r in st.sum_steps], bias=slot_values(st.bias))
            elif st.kind == "replicate":
                op.update(kind="replicate", steps=[int(r) for r in st.sum_steps])
            elif st.kind == "quadratic":
                op.update(kind="quadratic", a=slot_values(st.a), b=slot_values(st.b), c=slot_values(st.c))
            elif st.kind in ("alias", "add"):
                op.update(kind=st.kind)
            else:
                raise ModelError(f"{st.name}: step kind {st.kind} has no program form")
            ops.append(op)
        spec = self.spec
        return {"format": 1, "name": name or self.graph.name, "parameters": dict(self.parameters_recipe), "input": self.graph.input_name,
                "input_shape": [int(d) for d in spec.input_shape],
                "input_packing": {"kind": "slots", "index": spec.input_index.ravel().astype(np.int64).tolist(), "period": int(spec.input_period)},
                "input_level": int(spec.top_level), "output": self.graph.output, "output_slots": spec.output_slots.astype(np.int64).tolist(), "ops": ops,
                "rotation_levels": {str(int(k)): int(v) for k, v in spec.rotation_levels.items()},
                "relin_level": None if spec.relin_level is None else int(spec.relin_level), "metadata": metadata or {}}

    def summary(self) -> list[dict]:
        return [{"step": st.name, "kind": st.kind, "level": st.level, "depth": st.depth, "rotations": len(st.rotations()), **st.stats} for st in self.steps if st.kind != "alias"]


def slot_values(v: Optional[np.ndarray]) -> Optional[dict]:
    """A per-slot vector as the program stores it: its non-zero slots and their values."""
    if v is None:
        return None
    v = np.asarray(v, dtype=np.float64)
    nz = np.flatnonzero(v)
    return {"slots": nz.astype(np.int64).tolist(), "values": v[nz].tolist()}


def _monic(graph: Graph) -> Graph:
    """The graph with every per-channel quadratic made monic (`monic_quadratics`: each factor a
    moved into the next linear layer), one level per activation instead of two; unchanged where
    a factor cannot be absorbed (the compiler then evaluates a x^2 in two levels)."""
    from .frontend.transforms import monic_quadratics  # noqa: PLC0415

    if not any(n.op == "poly" and np.ndim(n.params["coefficients"]) == 2 and np.shape(n.params["coefficients"])[1] == 3
               and not np.all(np.asarray(n.params["coefficients"])[:, 2] == 1.0) for n in graph.nodes):
        return graph
    try:
        return monic_quadratics(graph)
    except ModelError:
        return graph


def _grid_row(graph: Graph) -> int:
    """Row length of the gap packing's grid: the widest g w over the image tensors (the gap g
    grows with each stride, and an odd width leaves a stride-2 output one column wider)."""
    shapes = graph.shapes()
    gaps = {graph.input_name: 1}
    row = shapes[graph.input_name][2]
    for node in graph.nodes:
        gap = gaps.get(node.inputs[0], 1)
        if node.op == "conv":
            gap *= node.attrs.get("stride", (1, 1))[1]
        elif node.op == "avgpool":
            gap *= node.attrs.get("stride", node.attrs["kernel"])[1]
        gaps[node.output] = gap
        if len(node.shape) == 3:
            row = max(row, gap * node.shape[2])
    return row


def _slots_needed(graph: Graph) -> int:
    shapes = graph.shapes()
    return max(_next_pow2(int(np.prod(s))) for s in shapes.values())


def special_primes(log_q: Sequence[int], budget: int) -> Optional[list[int]]:
    """Special primes for hybrid key switching within `budget` bits: the count k and size
    (up to 60 bits) minimising dnum (L + 1 + k), the size of a key and the NTTs of a key
    switch, where dnum = ceil((L + 1) / alpha) digits of alpha = floor(log P / max log q_i)
    primes each (rlwe's rule; primes sit just below their bit size, hence the one-bit margin)."""
    best = None
    for k in range(1, 7):
        p = min(60, budget // k)
        if p < 20:
            break
        alpha = max(1, int((k * (p - 1)) // max(log_q)))
        dnum = -(-len(log_q) // alpha)
        cost = (dnum * (len(log_q) + k), k * p)
        if best is None or cost < best[0]:
            best = (cost, [p] * k)
    return None if best is None else best[1]


def _choose_parameters(depth: int, slots_needed: int, log_scale: int, log_q0: int, p_bits: Optional[list], log_n: Optional[int]) -> tuple[CkksParameters, dict]:
    """The smallest ring whose 128-bit bound holds q_0, `depth` scale primes and special primes
    (given, or chosen by `special_primes` for the fewest key-switching digits), with enough slots."""
    log_q = [log_q0] + [log_scale] * depth
    for ln in ([log_n] if log_n else (13, 14, 15, 16)):
        if (1 << (ln - 1)) < slots_needed:
            continue
        # The scale-stable primes may sit a little above 2^scale: retry with a margin.
        for margin in ([0] if p_bits else [0, 1, 2, 3]):
            p = list(p_bits) if p_bits else special_primes(log_q, MAX_LOG_QP.get(ln, 0) - sum(log_q) - margin)
            if not p or sum(log_q) + sum(p) > MAX_LOG_QP.get(ln, 0):
                break
            try:
                recipe = {"kind": "scale_stable", "n": 1 << ln, "log_q0": log_q0, "log_scale": log_scale, "levels": depth, "p_bits": [int(b) for b in p]}
                return CkksParameters.scale_stable(1 << ln, log_q0, log_scale, depth, p), recipe
            except SecurityError:
                if p_bits:
                    raise
    raise ModelError(f"depth {depth} at scale 2^{log_scale} needs more than log2(QP) = {MAX_LOG_QP[16]} bits, what 2^16 holds at 128-bit security: "
                     "bootstrapping placement is not built into the FHE compiler yet")


def precision_bits(got: np.ndarray, want: np.ndarray) -> float:
    """-log2 of the largest error relative to the largest |value| of `want` (CKKS precision)."""
    err = max(float(np.abs(np.asarray(got) - np.asarray(want)).max()), 1e-300)
    return float(-np.log2(err / np.abs(want).max()))


def plaintext_reference(graph: Graph, x: np.ndarray) -> np.ndarray:
    """The float64 logits the FHE program approximates (the model front's executor)."""
    from .frontend import run_float  # noqa: PLC0415

    return run_float(graph, np.asarray(x, dtype=np.float64)[None])[0]


#: Built-in names the FHE mode takes besides the ResNet-20 ones (`fhe_resnet.RESNET20_MODELS`).
FHE_MODELS = {"cnn-square": "cnn-square-cifar10"}


def compile_model(model, *, calibration=None, preprocess=None, calibration_images: int = 64) -> tuple[dict, object]:
    """(the runtime's FHE program, the `fhe_compiler.CompiledNetwork`) for `model`, compiled by
    the runtime's Rust compiler: a ResNet-20 name (`fhe_resnet.RESNET20_MODELS`: value bounds
    from `calibration`, raw uint8 CIFAR-10 images, default the bundled training images), a
    built-in name, a model file (ONNX, PyTorch) or a model-front `Graph`. The compiler chooses
    the path: leveled when the network has no ReLU and its depth fits one ring, else
    bootstrapped (composite ReLU, bootstraps placed from the value bounds of every tensor on
    `calibration`: model-ready tensors or images as the hybrid mode takes them, with
    `preprocess`; at most `calibration_images` samples; the bundled training set of an MNIST-
    or CIFAR-10-shaped model when not given)."""
    from .fhe_compiler import compile_network, compile_path  # noqa: PLC0415
    from .fhe_resnet import RESNET20_MODELS, resnet20_graph  # noqa: PLC0415
    from .frontend import zoo  # noqa: PLC0415
    from .hybrid import calibration_for  # noqa: PLC0415

    if isinstance(model, str) and model in RESNET20_MODELS:
        graph, x = resnet20_graph(model, calibration)
        net = compile_network(graph, x, name=RESNET20_MODELS[model], path="bootstrapped")
        return net.program, net
    if isinstance(model, Graph):
        graph, name = model, model.name
    else:
        name = FHE_MODELS.get(str(model), str(model))
        graph = zoo.load_model(name)
    if compile_path(graph)["path"] == "leveled":
        net = compile_network(graph, name=name, path="leveled")
    else:
        x = calibration_for(graph, name, calibration, preprocess, calibration_images)
        net = compile_network(graph, x, name=name, path="bootstrapped")
    return net.program, net
