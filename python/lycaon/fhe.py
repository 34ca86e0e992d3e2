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

Roles: `FheModel` is the server (weights, prepared diagonals, the evaluation keys a client
uploads); `FheClient` holds the secret key, packs and encrypts the input, and decrypts.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from ._native import (
    CkksCiphertext,
    CkksDecryptor,
    CkksEncoder,
    CkksPublicEncryptor,
    CkksSecretEncryptor,
    CkksEvaluationKeys,
    CkksEvaluator,
    CkksGaloisKeys,
    CkksKeyGenerator,
    CkksLinearTransform,
    CkksParameters,
    CkksPublicKey,
    CkksRelinKey,
    LycaonError,
    SecurityError,
    security_table,
)
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


class FheClient:
    """Client side: secret key (never leaves), key generation, packing, encryption, decryption."""

    def __init__(self, spec: FheSpec):
        self.spec = spec
        self._keygen = CkksKeyGenerator(spec.params)
        self._sk = self._keygen.secret_key()
        self.public_key: CkksPublicKey = self._keygen.public_key()
        self._encoder = CkksEncoder(spec.params)
        self._encryptor = CkksSecretEncryptor(spec.params, self._sk)
        self._decryptor = CkksDecryptor(spec.params, self._sk)

    def evaluation_keys(self, strategy: str = "level-aware") -> tuple[Optional[CkksRelinKey], Optional[CkksGaloisKeys]]:
        """The relinearisation key and the Galois keys of a keyset strategy (the server needs
        only these; they serialise seeded, about half their memory)."""
        spec = self.spec
        relin = None
        if spec.relin_level is not None:
            relin = self._keygen.relin_key(level=spec.relin_level if strategy == "level-aware" else None)
        pairs = spec.keyset(strategy)
        galois = self._keygen.galois_keys([s for s, _ in pairs], levels=[lv for _, lv in pairs]) if pairs else None
        return relin, galois

    def encrypt(self, x: np.ndarray) -> CkksCiphertext:
        """The input packed (every copy) and encrypted at the top level, seeded on the wire."""
        pt = self._encoder.encode(self.spec.pack(x), level=self.spec.top_level)
        return self._encryptor.encrypt(pt).expand()

    def decrypt(self, ct: CkksCiphertext) -> np.ndarray:
        v = self._encoder.decode_real(self._decryptor.decrypt(ct))
        return np.asarray(v)[self.spec.output_slots]


class FheModel:
    """Server side of the FHE mode: the compiled program of a graph (weights stay here)."""

    def __init__(self, graph: Graph, log_scale: int = 36, log_q0: int = 56, p_bits: Optional[Sequence[int]] = None, log_n: Optional[int] = None, prepare: bool = True):
        """Compiles `graph` (batch-norm folded) with canonical scale 2^log_scale, q_0 of log_q0
        bits (the logits must stay below 2^(log_q0 - log_scale - 1)) and special primes of
        p_bits (default: `special_primes`), in the smallest ring from 2^13 that holds the depth (or 2^log_n); with
        `prepare`, encodes every diagonal now (the server's compile step), not at the first call."""
        self.graph = _monic(fold_batchnorm(graph))
        self.log_scale = log_scale
        t0 = time.perf_counter()
        depth = self._depth()
        self.params = _choose_parameters(depth, _slots_needed(self.graph), log_scale, log_q0, list(p_bits) if p_bits else None, log_n)
        self.slots = self.params.max_slots
        self.steps, self.spec = self._compile(depth)
        self.compile_seconds = time.perf_counter() - t0
        self.prepare_seconds = 0.0
        if prepare:
            t0 = time.perf_counter()
            for step in self.steps:
                if step.transform is not None:
                    step.transform.prepare_at(step.level)
            self.prepare_seconds = time.perf_counter() - t0
        self._session: Optional[FheSession] = None

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
                    steps.append(Step("replicate", f"{node.name}:replicate", lvl, 0, sum_steps=rep, inputs=[node.inputs[0]], output=node.inputs[0]))
                    src = Packing(src.index, t)
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
        bias_vec = None
        if bias is not None:
            bias_vec = np.zeros(S)
            bias_vec[out_index] = np.asarray(bias, dtype=np.float64)[:, None, None]
        out = Packing(out_index, S, (gap_out, row, block_out))
        return out, Step("linear", node.name, level, 1, transform=transform, bias=bias_vec, stats={"diagonals": count, "weights": int(w.size)})

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
        sums = [p_out << m for m in range(int(math.log2(p_in // p_out)))]
        out_index = np.arange(n_out, dtype=np.int64)
        bias_vec = None
        if node.params.get("bias") is not None:
            bias_vec = np.zeros(S)
            bias_vec[Packing(out_index, p_out).all_slots(S)] = np.asarray(node.params["bias"], dtype=np.float64)[None, :]
        return Packing(out_index, p_out), Step("linear", node.name, level, 1, transform=transform, sum_steps=sums, bias=bias_vec,
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

    # ------------------------------------------------------------------ run
    def session(self, relin: Optional[CkksRelinKey], galois: Optional[CkksGaloisKeys], public_key: Optional[CkksPublicKey] = None) -> "FheSession":
        """A client's session: its evaluation keys (and public key, to re-randomise responses)
        over this compiled program. Sessions share the program and are independent otherwise."""
        return FheSession(self, CkksEvaluator(self.params, CkksEvaluationKeys(relin, galois)), public_key)

    def attach_keys(self, relin: Optional[CkksRelinKey], galois: Optional[CkksGaloisKeys], public_key: Optional[CkksPublicKey] = None) -> None:
        """Makes `infer` use these keys (one session held by the model)."""
        self._session = self.session(relin, galois, public_key)

    def infer(self, ct: CkksCiphertext, progress: Optional[Callable[[int, int, str], None]] = None) -> CkksCiphertext:
        """`FheSession.infer` with the keys of `attach_keys`."""
        if self._session is None:
            raise LycaonError("no evaluation keys: call attach_keys with the client's keys first")
        return self._session.infer(ct, progress)

    def summary(self) -> list[dict]:
        return [{"step": st.name, "kind": st.kind, "level": st.level, "depth": st.depth, "rotations": len(st.rotations()), **st.stats} for st in self.steps if st.kind != "alias"]


class FheSession:
    """One client's keys over a compiled program (server side: public keys only)."""

    def __init__(self, model: FheModel, evaluator: CkksEvaluator, public_key: Optional[CkksPublicKey]):
        self.model = model
        self._ev = evaluator
        self._encoder = CkksEncoder(model.params)
        self._rerandomiser = CkksPublicEncryptor(model.params, public_key) if public_key is not None else None

    def infer(self, ct: CkksCiphertext, progress: Optional[Callable[[int, int, str], None]] = None) -> CkksCiphertext:
        """Runs the program on an encrypted input; the result holds the logits at
        `spec.output_slots`, re-randomised with a fresh encryption of zero when the client's
        public key is known."""
        m, ev = self.model, self._ev
        if ct.slots != m.slots or ct.level != m.spec.top_level:
            raise LycaonError(f"the input ciphertext has {ct.slots} slots at level {ct.level}; the model takes {m.slots} slots at level {m.spec.top_level}")
        values = {m.graph.input_name: ct}
        for n, st in enumerate(m.steps):
            x = values[st.inputs[0]]
            if st.kind == "replicate":
                for r in st.sum_steps:
                    x = ev.add(x, ev.rotate(x, r))
                values[st.output] = x
                continue
            if st.kind == "alias":
                y = x
            elif st.kind == "linear":
                y = ev.linear_transform(x, st.transform)
                for r in st.sum_steps:
                    y = ev.add(y, ev.rotate(y, r))
                if st.bias is not None:
                    y = ev.add_plain(y, self._encoder.encode(st.bias, level=y.level, scale=y.scale))
            elif st.kind == "quadratic":
                y = self._quadratic(x, st)
            elif st.kind == "add":
                y = ev.add(x, values[st.inputs[1]])
            else:
                raise LycaonError(f"unknown step kind {st.kind}")
            values[st.output] = y
            if progress is not None:
                progress(n + 1, len(m.steps), st.name)
        out = values[m.graph.output]
        return out if self._rerandomiser is None else rerandomised(ev, self._encoder, self._rerandomiser, out)

    def answer(self, ct: CkksCiphertext, progress: Optional[Callable[[int, int, str], None]] = None) -> tuple:
        """(`infer`'s ciphertext, {}): the shape every FHE session answers the server in."""
        return self.infer(ct, progress), {}

    def _quadratic(self, x: CkksCiphertext, st: Step) -> CkksCiphertext:
        return evaluate_quadratic(self._ev, self._encoder, x, st.a, st.b, st.c)


def rerandomised(ev: CkksEvaluator, encoder: CkksEncoder, encryptor: CkksPublicEncryptor, ct: CkksCiphertext) -> CkksCiphertext:
    """ct plus a fresh public-key encryption of zero at its level and scale: what leaves the
    server carries fresh randomness, not the computation's (the noise is not flooded)."""
    return ev.add(ct, encryptor.encrypt(encoder.encode(np.zeros(ct.slots), level=ct.level, scale=ct.scale)))


def evaluate_quadratic(ev: CkksEvaluator, encoder: CkksEncoder, x: CkksCiphertext, a: Optional[np.ndarray], b: Optional[np.ndarray],
                       c: Optional[np.ndarray]) -> CkksCiphertext:
    """a x^2 + b x + c slot-wise (per-slot coefficient vectors; None: a = 1, b = 0, c = 0): one
    level when a is None (x times x), two otherwise (a x first, then times x)."""
    if a is None:
        y = ev.rescale(ev.mul_relin(x, x))
    else:
        ax = ev.rescale(ev.mul_plain(x, encoder.encode(a, level=x.level, scale=ev.plaintext_scale_for(x))))
        y = ev.rescale(ev.mul_relin(ax, x))
    if b is not None:
        bx = ev.rescale(ev.mul_plain(x, encoder.encode(b, level=x.level, scale=ev.plaintext_scale_for(x))))
        y = ev.add(y, bx)
    if c is not None:
        y = ev.add_plain(y, encoder.encode(c, level=y.level, scale=y.scale))
    return y


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


def _choose_parameters(depth: int, slots_needed: int, log_scale: int, log_q0: int, p_bits: Optional[list], log_n: Optional[int]) -> CkksParameters:
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
                return CkksParameters.scale_stable(1 << ln, log_q0, log_scale, depth, p)
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
