"""Polynomial stand-ins for ReLU in the clear, as the FHE mode evaluates them under CKKS: to
measure what a network trained with ReLU loses when its ReLUs become polynomials."""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np


def composite_relu(degrees: Optional[Sequence[int]] = None) -> Callable[[np.ndarray], np.ndarray]:
    """ReLU(x) = x (1 + p(x)) / 2 on [-1, 1] with p Lee et al.'s composite minimax sign
    (crates/lycaon-ckks/src/sign.rs; default degrees 15, 15, 27): the same stages the encrypted
    evaluation applies, in float64. The function carries the construction's figures in its
    attribute `spec` (low, sign_error, relu_error, depth)."""
    import lycaon  # noqa: PLC0415

    spec = lycaon.composite_relu(list(degrees) if degrees is not None else None)
    stages = [np.asarray(c, dtype=np.float64) for c in spec["stages"]]

    def relu(x: np.ndarray) -> np.ndarray:
        p = np.asarray(x, dtype=np.float64)
        for c in stages:
            p = np.polynomial.chebyshev.chebval(p, c)
        return x * (1.0 + p) / 2.0

    relu.spec = spec  # type: ignore[attr-defined]
    return relu
