"""Random weights for the built-in architectures (ResNet-50, SqueezeNet, MobileNetV2,
DenseNet-121, ...), which carry layer shapes only: benchmarks of private inference at ImageNet
scale need real numbers flowing through every layer, not predictions. Never used to serve a model
silently: ``lycaon serve --random-weights SEED`` and ``lycaon bench e2e`` say so.
"""

from __future__ import annotations

import copy

import numpy as np

from .ir import Graph

#: Gain of the last convolution of a residual branch, so sums of branches keep activations near
#: unit scale over 16 blocks (as zero-initialised residual branches do in training recipes).
RESIDUAL_GAIN = 0.2


def with_random_weights(graph: Graph, seed: int = 0) -> Graph:
    """A copy of ``graph`` whose convolutions and fully connected layers have He-normal weights
    (std sqrt(2 / fan_in)) and small biases drawn from ``seed``; layers whose output feeds a
    residual addition directly are scaled by ``RESIDUAL_GAIN``. Per-channel quadratic activations
    (``poly`` nodes of kind ``aespa-quadratic``) get random coefficients near ReLU's quadratic fit
    (a in [0.05, 0.15], b in [0.4, 0.6])."""
    rng = np.random.default_rng(seed)
    out = copy.copy(graph)
    out.nodes = [copy.copy(n) for n in graph.nodes]
    adds = {i for n in graph.nodes if n.op == "add" for i in n.inputs}
    for node in out.nodes:
        if node.op == "poly" and node.attrs.get("kind") == "aespa-quadratic":
            # a x^2 + b x + c per channel, near the quadratic fits of ReLU that AESPA starts from.
            c = np.shape(node.params["coefficients"])[0]
            coefficients = np.stack([rng.normal(0.0, 0.02, c), rng.uniform(0.4, 0.6, c), rng.uniform(0.05, 0.15, c)], axis=1)
            node.params = {**node.params, "coefficients": coefficients}
            continue
        if node.op not in ("conv", "linear"):
            continue
        shape = np.shape(node.params["weight"])
        fan_in = int(np.prod(shape[1:]))
        w = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
        if node.output in adds:
            w *= RESIDUAL_GAIN
        node.params = {**node.params, "weight": w, "bias": rng.standard_normal(shape[0]) * 0.01}
    return out
