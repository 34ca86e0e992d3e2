"""The model front's graph (`ir.Graph`) as JSON, the input of the Rust FHE compiler
(lycaon-runtime's `fhe::graph::ModelGraph`, which validates it on load):

    {"format": "lycaon-graph", "version": 1, "name": ..., "input": ..., "input_shape": [C, H, W],
     "output": ...,
     "nodes": [{"op": "conv", "name": ..., "inputs": [...], "output": ..., "shape": [C, H, W],
                "attrs": {"stride": [1, 1], "pads": [1, 1, 1, 1], "groups": 1},
                "params": {"weight": {"shape": [16, 3, 3, 3], "data": [...]}, "bias": null}}, ...]}

Parameters are flat row-major float64 lists with their shape (every value finite; Python's
float repr, so the values read back exactly); attributes are the IR's (tuples as lists). Write
the graph after the rewrites the compiler expects (batch-norm folded, quadratics made monic).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from .ir import Graph, ModelError, Node

GRAPH_FORMAT = "lycaon-graph"
GRAPH_VERSION = 1


def _attr(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_attr(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _param(node: Node, key: str, value: Any) -> Any:
    if value is None:
        return None
    a = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(a)):
        raise ModelError(f"{node.describe()}: parameter '{key}' has a value that is not finite")
    return {"shape": [int(d) for d in a.shape], "data": a.ravel().tolist()}


def graph_to_dict(graph: Graph) -> dict:
    """The graph as a JSON-ready dict (module docs)."""
    if graph.output is None:
        raise ModelError(f"graph '{graph.name}' has no output")
    nodes = [{"op": n.op, "name": n.name, "inputs": list(n.inputs), "output": n.output, "shape": [int(d) for d in n.shape],
              "attrs": {k: _attr(v) for k, v in n.attrs.items()}, "params": {k: _param(n, k, v) for k, v in n.params.items()}}
             for n in graph.nodes]
    return {"format": GRAPH_FORMAT, "version": GRAPH_VERSION, "name": graph.name, "input": graph.input_name,
            "input_shape": [int(d) for d in graph.input_shape], "output": graph.output, "nodes": nodes}


def graph_to_json(graph: Graph) -> str:
    """The graph as JSON text (module docs)."""
    return json.dumps(graph_to_dict(graph), allow_nan=False)


def graph_from_json(text: str) -> Graph:
    """The graph back from its JSON (shapes inferred and checked again by `Graph.add`)."""
    d = json.loads(text)
    if d.get("format") != GRAPH_FORMAT or d.get("version") != GRAPH_VERSION:
        raise ModelError(f"not a {GRAPH_FORMAT} version {GRAPH_VERSION} graph")
    g = Graph(d["input"], tuple(d["input_shape"]), name=d["name"])
    for n in d["nodes"]:
        attrs = {k: tuple(v) if isinstance(v, list) else v for k, v in n["attrs"].items()}
        params = {k: None if v is None else np.asarray(v["data"], dtype=np.float64).reshape(v["shape"]) for k, v in n["params"].items()}
        g.add(Node(n["op"], n["name"], list(n["inputs"]), n["output"], attrs, params))
    g.output = d["output"]
    return g
