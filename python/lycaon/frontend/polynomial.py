"""Element-wise polynomials of one activation as the importers meet them (x * x, a * x^2 + b * x
+ c, scalar or per-channel constants), gathered into one IR `poly` node.

An importer keeps, per tensor of the source graph, either a real IR tensor or a pending
`Polynomial` of one (`ir.py`'s poly semantics: ascending coefficients, one row for every value
or one per channel). Mul, Pow, Add, Sub, Div by a constant and Neg combine pendings
(`combine`); the first other operator that reads one materialises it (`Polynomial.node`). Only
constants that act per channel are taken: an IR polynomial cannot mix spatial positions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np

from .ir import ModelError, Node

#: Highest degree imported: the FHE mode evaluates quadratics (one ciphertext product).
MAX_DEGREE = 2

#: The operations `combine` takes, with their arity.
OPERATIONS = {"add": 2, "sub": 2, "mul": 2, "div": 2, "pow": 2, "neg": 1}


@dataclass
class Polynomial:
    """p(t) for the IR tensor `tensor` of shape `shape` ((C, H, W) or (F,)): `coefficients`
    (K, degree + 1) ascending, K = 1 (one polynomial for every value) or C (one per channel, per
    feature on a flat tensor)."""

    tensor: str
    shape: tuple
    coefficients: np.ndarray

    @classmethod
    def of(cls, tensor: str, shape: tuple) -> Polynomial:
        """The identity p(t) = t."""
        return cls(tensor, tuple(shape), np.array([[0.0, 1.0]]))

    @property
    def degree(self) -> int:
        return self.coefficients.shape[1] - 1

    def is_identity(self) -> bool:
        return self.coefficients.shape[1] == 2 and bool(np.all(self.coefficients == [0.0, 1.0]))

    def node(self, name: str, output: str) -> Node | None:
        """The `poly` node computing it (named `name`, writing `output`); None for the identity,
        which needs no node. 1-D coefficients when every channel has the same polynomial."""
        if self.is_identity():
            return None
        c = self.coefficients
        coeffs = c[0].copy() if np.all(c == c[0]) else c.copy()
        return Node("poly", name, [self.tensor], output, {}, {"coefficients": coeffs})


Operand = Union[Polynomial, np.ndarray]


def channel_constant(value, shape: tuple, what: str) -> np.ndarray:
    """A constant that broadcasts against an activation of shape (N, *shape) (numpy/ONNX rules:
    aligned on the right) without mixing channels or positions, as a (K,) vector: K = 1 for a
    scalar, C for one value per channel ((C, 1, 1) or (1, C, 1, 1); (C,) or (1, C) on a flat
    (C,) tensor). Anything else (per position, a (C,) vector that would align with the width,
    one that would enlarge the activation) raises ModelError."""
    v = np.asarray(value, dtype=np.float64)
    full = (1, *shape)
    aligned = (1,) * (len(full) - v.ndim) + v.shape
    ok = v.ndim <= len(full) and all(d == 1 or (axis == 1 and d == full[1]) for axis, d in enumerate(aligned))
    if not ok:
        want = f"({shape[0]},) or (1, {shape[0]})" if len(shape) == 1 else f"({shape[0]}, 1, 1) or (1, {shape[0]}, 1, 1)"
        why = " (a vector aligns with the last axis, the width, under broadcasting)" if len(shape) == 3 and v.ndim == 1 and v.size > 1 else ""
        raise ModelError(f"{what}: a constant of shape {v.shape} does not act per channel on the activation of shape (N, {', '.join(map(str, shape))}){why}; "
                         f"only a scalar or one value per channel, shape {want}, is supported")
    return v.reshape(-1)


def _grow(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two coefficient arrays padded to one degree and broadcast to one row count."""
    width = max(a.shape[1], b.shape[1])
    a = np.pad(a, ((0, 0), (0, width - a.shape[1])))
    b = np.pad(b, ((0, 0), (0, width - b.shape[1])))
    rows = max(a.shape[0], b.shape[0])
    return np.broadcast_to(a, (rows, width)), np.broadcast_to(b, (rows, width))


def _trim(c: np.ndarray) -> np.ndarray:
    """Drops leading terms that are zero in every row (x*x - x*x has degree 0)."""
    width = c.shape[1]
    while width > 1 and not np.any(c[:, width - 1]):
        width -= 1
    return np.ascontiguousarray(c[:, :width])


def _times(p: Polynomial, q: Polynomial, what: str) -> Polynomial:
    if p.tensor != q.tensor:
        raise ModelError(f"{what}: the product of two different activations ('{p.tensor}' and '{q.tensor}') is not supported; "
                         "only polynomials of one activation (x * x, a * x^2 + b * x + c) are")
    degree = p.degree + q.degree
    if degree > MAX_DEGREE:
        raise ModelError(f"{what}: the polynomial would have degree {degree}; the FHE mode evaluates polynomial activations up to degree {MAX_DEGREE} "
                         "(quadratics such as x * x or a * x^2 + b * x + c)")
    rows = max(len(p.coefficients), len(q.coefficients))
    out = np.zeros((rows, degree + 1))
    for i in range(p.degree + 1):
        for j in range(q.degree + 1):
            out[:, i + j] += p.coefficients[:, i] * q.coefficients[:, j]
    return Polynomial(p.tensor, p.shape, _trim(out))


def _plus(p: Polynomial, q: Polynomial) -> Polynomial:
    a, b = _grow(p.coefficients, q.coefficients)
    return Polynomial(p.tensor, p.shape, _trim(a + b))


def _scaled(p: Polynomial, k: np.ndarray) -> Polynomial:
    return Polynomial(p.tensor, p.shape, _trim(p.coefficients * k.reshape(-1, 1)))


def _constant(p: Polynomial, k: np.ndarray) -> Polynomial:
    """The constant polynomial k (K,) on p's tensor."""
    return Polynomial(p.tensor, p.shape, k.reshape(-1, 1).astype(np.float64))


def _exponent(value, what: str) -> int:
    e = np.asarray(value, dtype=np.float64)
    if e.size != 1 or not np.isfinite(e.reshape(-1)[0]) or e.reshape(-1)[0] != np.round(e.reshape(-1)[0]) or e.reshape(-1)[0] < 0:
        raise ModelError(f"{what}: the exponent must be one non-negative integer (x^1, x^2), not {e.tolist()}")
    return int(e.reshape(-1)[0])


def combine(op: str, operands: list, what: str) -> Polynomial:
    """The polynomial `op` ("add", "sub", "mul", "div", "pow", "neg") of `operands`, each a
    `Polynomial` or a raw constant (array or number; checked with `channel_constant` against the
    polynomial's tensor). At least one operand must be a polynomial; `what` names the source
    node in errors (e.g. "Mul node 'sq'"). Raises ModelError for what is not a polynomial of one
    activation of degree <= MAX_DEGREE with per-channel constants: products of two activations,
    division by an activation, an exponent that is not a small integer or not a constant."""
    if OPERATIONS.get(op) != len(operands):
        raise ValueError(f"combine: {op!r} with {len(operands)} operands")
    polys = [o for o in operands if isinstance(o, Polynomial)]
    if not polys:
        raise ValueError("combine: no polynomial operand (constants are folded by the importer)")
    base = polys[0]
    if op == "neg":
        return _scaled(base, np.array([-1.0]))
    a, b = operands
    if op == "pow":
        if not isinstance(a, Polynomial):
            raise ModelError(f"{what}: a constant raised to the power of an activation is not a polynomial")
        if isinstance(b, Polynomial):
            raise ModelError(f"{what}: the exponent must be a constant, not the activation '{b.tensor}'")
        out = _constant(a, np.array([1.0]))
        for _ in range(_exponent(b, what)):
            out = _times(out, a, what)
        return out
    if op == "div":
        if isinstance(b, Polynomial):
            raise ModelError(f"{what}: dividing by an activation ('{b.tensor}') is not a polynomial; only division by a constant is supported")
        k = channel_constant(b, a.shape, what)
        if np.any(k == 0):
            raise ModelError(f"{what}: division by zero")
        return _scaled(a, 1.0 / k)

    def poly(o: Operand) -> Polynomial:
        return o if isinstance(o, Polynomial) else _constant(base, channel_constant(o, base.shape, what))

    if op == "mul":
        if isinstance(a, Polynomial) and isinstance(b, Polynomial):
            return _times(a, b, what)
        p, k = (a, b) if isinstance(a, Polynomial) else (b, a)
        return _scaled(p, channel_constant(k, p.shape, what))
    pa, pb = poly(a), poly(b)
    if pa.tensor != pb.tensor:
        verb = "the difference of" if op == "sub" else "a sum of"
        raise ModelError(f"{what}: {verb} two different activations ('{pa.tensor}' and '{pb.tensor}') is not a polynomial of one activation")
    return _plus(pa, _scaled(pb, np.array([-1.0])) if op == "sub" else pb)


def tensor_operand(pending: dict, graph, name: str, what: str, shown: str = "") -> Polynomial:
    """A tensor operand of `combine`: the pending polynomial of the importer's tensor `name`
    (already resolved through the aliases), or the identity of the IR tensor `name`. `shown` is
    the name the error gives (the source graph's, when it differs)."""
    if name in pending:
        return pending[name][0]
    shapes = graph.shapes()
    if name not in shapes:
        raise ModelError(f"{what}: input '{shown or name}' is not produced by any earlier node")
    return Polynomial.of(name, shapes[name])


def write_pending(pending: dict, alias: dict, graph, name: str) -> str:
    """The IR tensor of the importer's tensor `name` (already resolved through `alias`): its
    pending polynomial, if any, written into `graph` as one node first (the identity needs none:
    `name` then aliases the polynomial's tensor)."""
    if name in pending:
        poly, origin = pending.pop(name)
        written = poly.node(origin, name)
        if written is None:
            alias[name] = poly.tensor
            return poly.tensor
        graph.add(written)
    return name
