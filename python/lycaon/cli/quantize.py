"""``lycaon quantize``: the fixed-point twin of a model, its accuracy beside the float model's."""

from __future__ import annotations

from typing import Optional

import numpy as np

import lycaon
from lycaon.cli.output import print_table, write_json


def _quantize(model: str, calib: int, evaluate: int, plaintext_bits: int, json_path: Optional[str]) -> int:
    from lycaon.frontend import lenet, resnet, run_float, simplify, zoo  # noqa: PLC0415
    from lycaon.frontend.quantize import QuantConfig, quantize, run_integer  # noqa: PLC0415

    graph = simplify(zoo.load_model(model))
    if tuple(graph.input_shape) == (3, 32, 32):
        (train_x, _), (test_x, test_y), prep = zoo.cifar10("train"), zoo.cifar10("test"), resnet.preprocess
    elif tuple(graph.input_shape) == (1, 28, 28):
        from lycaon.data import load_mnist  # noqa: PLC0415

        (train_x, _), (test_x, test_y), prep = load_mnist("train"), load_mnist("test"), lenet.preprocess
    else:
        raise lycaon.LycaonError(f"quantize evaluates on CIFAR-10 (3x32x32) or MNIST (1x28x28); this model takes {graph.input_shape}")
    rng = np.random.default_rng(0)
    cal = prep(train_x[rng.choice(len(train_x), calib, replace=False)])
    q = quantize(graph, cal, QuantConfig(plaintext_bits=plaintext_bits))
    idx = np.linspace(0, len(test_x) - 1, min(evaluate, len(test_x))).astype(int)
    x, y = prep(test_x[idx]), test_y[idx]
    from rich.progress import Progress  # noqa: PLC0415

    with Progress(transient=True) as bar:
        task_f = bar.add_task("float model", total=len(x))
        fl = run_float(graph, x, progress=lambda done: bar.update(task_f, completed=done)).argmax(1)
        task_i = bar.add_task("fixed-point twin", total=len(x))
        it = run_integer(q, q.encode_input(x), progress=lambda done: bar.update(task_i, completed=done)).argmax(1)
    result = {
        "model": model,
        "images": len(idx),
        "float_accuracy": float((fl == y).mean()),
        "fixed_point_accuracy": float((it == y).mean()),
        "top1_agreement": float((fl == it).mean()),
        "fraction_bits": q.fraction_bits,
        "plaintext_bits": plaintext_bits,
        "max_accumulator_bits": max(q.accumulator_bits.values()),
    }
    print_table(f"Fixed-point twin of {model}", ["quantity", "value"], [[k, v] for k, v in result.items()])
    write_json(json_path, result)
    return 0


def add_parser(sub) -> None:
    quant = sub.add_parser("quantize", help="fixed-point twin of a model: float vs fixed-point accuracy on CIFAR-10")
    quant.add_argument("model")
    quant.add_argument("--calib", type=int, default=256, help="calibration images from the training set")
    quant.add_argument("--eval", type=int, default=10000, help="test images to evaluate (spread over the set)")
    quant.add_argument("--plaintext-bits", type=int, default=37, help="bits of the plaintext modulus the accumulators must fit")
    quant.add_argument("--json", metavar="FILE")


def run(args) -> int:
    return _quantize(args.model, args.calib, args.eval, args.plaintext_bits, args.json)
