"""LeNet-5 for MNIST with ReLU and average pooling (average pooling is linear, so it is free under
encryption), as scripts/train_lenet5.py trains it."""

from __future__ import annotations

import numpy as np

from .ir import Graph, Node

MEAN, STD = 0.1307, 0.3081


def lenet5(weights: dict) -> Graph:
    g = Graph("image", (1, 28, 28), name="lenet5")
    g.add(Node("conv", "conv1", ["image"], "conv1:o", {"stride": (1, 1), "pads": (2, 2, 2, 2)}, {"weight": weights["conv1.weight"], "bias": weights["conv1.bias"]}))
    g.add(Node("relu", "relu1", ["conv1:o"], "relu1:o"))
    g.add(Node("avgpool", "pool1", ["relu1:o"], "pool1:o", {"kernel": (2, 2), "stride": (2, 2)}))
    g.add(Node("conv", "conv2", ["pool1:o"], "conv2:o", {"stride": (1, 1)}, {"weight": weights["conv2.weight"], "bias": weights["conv2.bias"]}))
    g.add(Node("relu", "relu2", ["conv2:o"], "relu2:o"))
    g.add(Node("avgpool", "pool2", ["relu2:o"], "pool2:o", {"kernel": (2, 2), "stride": (2, 2)}))
    g.add(Node("flatten", "flatten", ["pool2:o"], "flatten:o"))
    for i, (name, last) in enumerate((("fc1", False), ("fc2", False), ("fc3", True))):
        src = "flatten:o" if i == 0 else f"relu_fc{i}:o"
        g.add(Node("linear", name, [src], f"{name}:o" if not last else "logits", {}, {"weight": weights[f"{name}.weight"], "bias": weights[f"{name}.bias"]}))
        if not last:
            g.add(Node("relu", f"relu_fc{i + 1}", [f"{name}:o"], f"relu_fc{i + 1}:o"))
    return g


def preprocess(images_uint8: np.ndarray) -> np.ndarray:
    """uint8 (N, 28, 28) -> normalised float (N, 1, 28, 28)."""
    return ((images_uint8.astype(np.float64) / 255.0 - MEAN) / STD)[:, None, :, :]


def _square(g: Graph, name: str, src: str) -> str:
    g.add(Node("poly", name, [src], f"{name}:o", {}, {"coefficients": np.array([0.0, 0.0, 1.0])}))
    return f"{name}:o"


def lenet5_square(weights: dict, input_shape: tuple = (1, 28, 28), name: str = "lenet5-square") -> Graph:
    """The LeNet-5 of Orion's benchmarks (and of the FHE literature since CryptoNets' successors):
    conv 5x5 stride 2 to 32 channels, x^2, conv 5x5 stride 2 to 64 channels, x^2, fully connected
    3136-512, x^2, 512-10; padding 2; batch-norm, where a trained model has it, folded. Weights
    under the torch names conv1, conv2, fc1, fc2 (.weight, .bias); other widths and input shapes
    follow from the weights and `input_shape`."""
    g = Graph("image", tuple(input_shape), name=name)
    src = "image"
    for i in (1, 2):
        g.add(Node("conv", f"conv{i}", [src], f"conv{i}:o", {"stride": (2, 2), "pads": (2, 2, 2, 2)},
                   {"weight": weights[f"conv{i}.weight"], "bias": weights[f"conv{i}.bias"]}))
        src = _square(g, f"square{i}", f"conv{i}:o")
    g.add(Node("flatten", "flatten", [src], "flatten:o"))
    g.add(Node("linear", "fc1", ["flatten:o"], "fc1:o", {}, {"weight": weights["fc1.weight"], "bias": weights["fc1.bias"]}))
    src = _square(g, "square3", "fc1:o")
    g.add(Node("linear", "fc2", [src], "logits", {}, {"weight": weights["fc2.weight"], "bias": weights["fc2.bias"]}))
    return g


def cnn_square(weights: dict) -> Graph:
    """The FHE demo network (scripts/train_cnn_square.py): LeNet-5's square shape on CIFAR-10."""
    return lenet5_square(weights, (3, 32, 32), "cnn-square-cifar10")


def mlp_square(weights: dict) -> Graph:
    """The MLP of Orion's benchmarks (SecureML, eprint 2017/396): 784-128, x^2, 128-128, x^2,
    128-10 on a flattened MNIST image. Weights under fc1, fc2, fc3 (.weight, .bias)."""
    g = Graph("image", (784,), name="mlp-square")
    src = "image"
    for i in (1, 2, 3):
        out = "logits" if i == 3 else f"fc{i}:o"
        g.add(Node("linear", f"fc{i}", [src], out, {}, {"weight": weights[f"fc{i}.weight"], "bias": weights[f"fc{i}.bias"]}))
        src = _square(g, f"square{i}", out) if i < 3 else out
    return g
