"""``lycaon inspect``: layers, shapes, parameters and multiply-accumulates of a model."""

from __future__ import annotations

from typing import Optional

from lycaon.cli.output import print_table, write_json


def _inspect(model: str, json_path: Optional[str]) -> int:
    from lycaon.frontend import simplify, zoo  # noqa: PLC0415

    graph = zoo.load_model(model)
    rows = simplify(graph).summary()
    title = f"{graph.name}: input {graph.input_shape}, {len(graph.nodes)} nodes ({len(rows)} after folding batch-norm)"
    print_table(title, ["name", "op", "output shape", "params", "MACs"], [[r["name"], r["op"], r["shape"], r["params"], r["macs"]] for r in rows])
    print(f"total: {sum(r['params'] for r in rows)} parameters, {sum(r['macs'] for r in rows)} multiply-accumulates")
    write_json(json_path, [dict(r, shape=list(r["shape"])) for r in rows])
    return 0


def add_parser(sub) -> None:
    inspect = sub.add_parser("inspect", help="layers, shapes, parameters and MACs of a model")
    inspect.add_argument("model", help="an ONNX file or a built-in model (resnet20-reference, ...)")
    inspect.add_argument("--json", metavar="FILE")


def run(args) -> int:
    return _inspect(args.model, args.json)
