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
