"""``lycaon models``: the built-in models and their measured accuracy; the short names the demo and serve take."""

from __future__ import annotations

from typing import Optional

from lycaon.cli.output import print_table, write_json

#: Short names of built-in models that ``lycaon demo`` and ``lycaon serve --mode fhe`` take.
DEMO_MODELS = {"lenet5": "lenet5-mnist", "resnet20": "resnet20-cifar10", "cnn-square": "cnn-square-cifar10"}


def _models(json_path: Optional[str]) -> int:
    from lycaon.models import list_models  # noqa: PLC0415

    rows = list_models()
    print_table("Built-in models (accuracy on the full test set)", ["name", "dataset", "accuracy", "test images", "trained by"], [[r["name"], r["dataset"], r["accuracy"], r["test_images"], r["trained_by"]] for r in rows])
    write_json(json_path, rows)
    return 0


def add_parser(sub) -> None:
    models = sub.add_parser("models", help="built-in models and their measured accuracy")
    models.add_argument("--json", metavar="FILE")


def run(args) -> int:
    return _models(args.json)
