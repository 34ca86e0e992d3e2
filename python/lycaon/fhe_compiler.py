"""The FHE compiler in Rust (lycaon-runtime's `fhe::compile`) from Python: the graph rewrites
that stay in Python (batch-norm folding, monic quadratics), the value bounds of the
bootstrapped path from calibration inputs, then one native call that writes the runtime's FHE
program. It writes every program the product serves (`fhe.compile_model`: `lycaon.Server(...,
mode="fhe")`, `lycaon demo --mode fhe`, `lycaon.plan.plan_fhe`). The Python compilers
(`fhe.FheModel`, `fhe_resnet.FheResNet`) remain the reference it is tested against
(tests/test_fhe_compiler.py) and `lycaon bench fhe`'s packing comparisons.

Paths (the Rust compiler chooses and explains, `compile_path`): "leveled" (no bootstrapping:
the graph as `FheModel` rewrites it, monic quadratics folded into the next layer) when it has no
ReLU and its depth fits the largest ring at 128-bit security; else "bootstrapped" (the graph as
`FheResNet` rewrites it, monic quadratics with the scales applied at the additions, value
bounds from `calibration`).
"""

from __future__ import annotations

import json
import math
from typing import Optional, Sequence

import numpy as np

from ._native import fhe_compile, fhe_compile_path, fhe_program_facts
from .frontend.executor import run_float, run_node
from .frontend.graph_json import graph_to_json
from .frontend.ir import Graph, ModelError, Node
from .frontend.transforms import fold_batchnorm, monic_quadratics


def _tensor_maxima(graph: Graph, x: np.ndarray, chunk: int = 8):
    """Per chunk of the model-ready inputs `x` (N, ...), {tensor: the largest |value| of each
    input} (float64; in chunks, so memory stays small)."""
    for k in range(0, len(x), chunk):
        values = {graph.input_name: np.asarray(x[k:k + chunk], dtype=np.float64)}
        for node in graph.nodes:
            values[node.output] = run_node(node, [values[i] for i in node.inputs])
        yield {name: np.abs(v).reshape(len(v), -1).max(1) for name, v in values.items()}


def value_bounds(graph: Graph, x: np.ndarray, chunk: int = 8) -> dict:
    """Per tensor of `graph`, twice the largest |value| over the model-ready inputs `x` (N, ...),
    rounded up to a power of two (`FheResNet._calibrate`'s rule: inputs beyond the calibration
    maximum still land inside [-1, 1] after a refresh's division)."""
    largest: dict = {}
    for maxima in _tensor_maxima(graph, x, chunk):
        for name, m in maxima.items():
            largest[name] = max(largest.get(name, 0.0), float(m.max()))
    return {name: float(2.0 ** math.ceil(math.log2(max(2.0 * m, 1e-3)))) for name, m in largest.items()}


class CompiledNetwork:
    """A graph compiled by the runtime's compiler: the program (``program_json``, ``program``)
    and what a demo checks the encrypted run against. ``graph`` is the graph as the chosen path
    rewrote it (batch-norm folded, quadratics made monic), whose float64 run is the plaintext
    twin; ``bounds`` the calibrated value bounds of the bootstrapped path (None when leveled)."""

    def __init__(self, program_json: str, graph: Graph, bounds: Optional[dict]):
        self.program_json = program_json
        self.program = json.loads(program_json)
        self.graph = graph
        self.bounds = bounds
        self.bootstrapped = self.program["parameters"]["kind"] == "bootstrappable"
        #: Whether ReLUs run as the composite minimax ReLU.
        self.relu = any(n.op == "relu" for n in graph.nodes)

    @property
    def planned_bootstraps(self) -> int:
        """Bootstraps an input takes, as the runtime counts them (asked when needed: it parses
        the program again, 114 MB for cnn-square)."""
        return int(json.loads(fhe_program_facts(self.program_json))["bootstraps"])

    def reference(self, x: np.ndarray) -> np.ndarray:
        """The float64 logits of one model-ready input (exact ReLU): the plaintext twin."""
        return run_float(self.graph, np.asarray(x, dtype=np.float64)[None])[0]

    def range_ratio(self, x: np.ndarray) -> np.ndarray:
        """Per input of the batch `x`, the largest |value| / calibrated bound over all tensors.
        Above 1 the input leaves the range the bootstraps were planned for and its encrypted
        result is undefined (conservative: not every tensor is refreshed). Zeros when leveled."""
        if self.bounds is None:
            return np.zeros(len(x))
        with np.errstate(over="ignore", invalid="ignore"):  # quadratics can overflow far outside the range
            ratios = [np.max([m / self.bounds[name] for name, m in chunk.items()], axis=0) for chunk in _tensor_maxima(self.graph, x)]
        return np.nan_to_num(np.concatenate(ratios), nan=np.inf) if ratios else np.zeros(0)

    def summary(self) -> list[dict]:
        """One row per op of the program: name, kind, level, depth and the tensors refreshed
        before it."""
        return [{"step": op["name"], "kind": op["kind"], "level": op["level"], "depth": op["depth"], "refreshes": len(op.get("refresh") or [])}
                for op in self.program["ops"] if op["kind"] != "alias"]


def per_channel_quadratics(graph: Graph) -> Graph:
    """Every `poly` node of degree 2 or less with coefficients (C, 3), one row per channel (per
    feature on a flat tensor): an imported x * x or 0.5 x^2 + 1 shares one vector between all
    channels, and the compilers' quadratic rewrites (made monic, folded into the next layer)
    take rows. Higher degrees are left for the compiler to refuse by name."""
    shapes = graph.shapes()
    out = Graph(graph.input_name, graph.input_shape, name=graph.name)
    for node in graph.nodes:
        coeffs = np.asarray(node.params.get("coefficients")) if node.op == "poly" else None
        if coeffs is not None and coeffs.shape[-1] <= 3 and (coeffs.ndim == 1 or coeffs.shape[1] < 3):
            channels = shapes[node.inputs[0]][0]
            rows = np.zeros((channels, 3))
            rows[:, :coeffs.shape[-1]] = coeffs if coeffs.ndim == 2 else coeffs[None, :]
            node = Node(node.op, node.name, list(node.inputs), node.output, dict(node.attrs), {**node.params, "coefficients": rows})
        out.add(node)
    out.output = graph.output
    return out


def leveled_graph(graph: Graph) -> Graph:
    """The graph as the leveled path takes it (`FheModel`'s rewrites)."""
    from .fhe import _monic  # noqa: PLC0415

    return _monic(fold_batchnorm(per_channel_quadratics(graph)))


def bootstrapped_graph(graph: Graph, monic: bool = True) -> Graph:
    """The graph as the bootstrapped path takes it (`FheResNet`'s rewrites)."""
    g = fold_batchnorm(per_channel_quadratics(graph))
    if monic and any(n.op == "poly" for n in g.nodes):
        try:
            g = monic_quadratics(g, scale_at_adds=True)
        except ModelError:
            pass
    return g


def compile_path(graph: Graph, **options) -> dict:
    """{"path", "reason"}: where the Rust compiler sends `graph` (after the leveled rewrites)."""
    return json.loads(fhe_compile_path(graph_to_json(leveled_graph(graph)), json.dumps(options)))


def compile_program(graph: Graph, calibration: Optional[np.ndarray] = None, **options) -> dict:
    """The runtime's FHE program of `graph` as a dict (`compile_program_json`'s, parsed)."""
    return json.loads(compile_program_json(graph, calibration, **options))


def compile_program_json(graph: Graph, calibration: Optional[np.ndarray] = None, **options) -> str:
    """The runtime's FHE program (JSON text, what `FheSession.local` and the server take) of
    `graph`, compiled in Rust (`compile_network`'s options)."""
    return compile_network(graph, calibration, **options).program_json


def compile_network(graph: Graph, calibration: Optional[np.ndarray] = None, *, name: Optional[str] = None, metadata: Optional[dict] = None,
                    path: Optional[str] = None, monic: bool = True, hyphen: bool = True, placement: str = "greedy",
                    relu_degrees: Optional[Sequence[int]] = None, log_scale: int = 36, log_q0: int = 56,
                    p_bits: Optional[Sequence[int]] = None, log_n: Optional[int] = None) -> CompiledNetwork:
    """`graph` compiled in Rust. `calibration`: model-ready float inputs (N, ...) for the value
    bounds of the bootstrapped path. The other arguments are the Python compilers'
    (`FheModel`: log_scale, log_q0, p_bits, log_n; `FheResNet`: monic, hyphen, placement,
    relu_degrees)."""
    options = {"name": name or graph.name, "metadata": metadata or {}, "log_scale": log_scale, "log_q0": log_q0,
               "p_bits": None if p_bits is None else [int(b) for b in p_bits], "log_n": log_n}
    if path is None:
        path = compile_path(graph, **options)["path"]
    if path == "leveled":
        g = leveled_graph(graph)
        return CompiledNetwork(fhe_compile(graph_to_json(g), json.dumps({**options, "path": "leveled"})), g, None)
    if path != "bootstrapped":
        raise ModelError(f"compiler path {path!r}: leveled or bootstrapped")
    if calibration is None:
        raise ModelError(f"{graph.name}: the bootstrapped path needs calibration inputs for the value bounds of its tensors")
    g = bootstrapped_graph(graph, monic)
    bounds = value_bounds(g, calibration)
    options.update(path="bootstrapped", bounds=bounds, hyphen=hyphen, placement=placement,
                   relu_degrees=None if relu_degrees is None else [int(d) for d in relu_degrees])
    return CompiledNetwork(fhe_compile(graph_to_json(g), json.dumps(options)), g, bounds)
