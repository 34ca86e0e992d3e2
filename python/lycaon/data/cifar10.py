"""CIFAR-10 (Krizhevsky, 2009) test images in the official order, read at run time from the
copy in ../shared/data (``lycaon.frontend.zoo.data_dir``). Its README asks that the images never
ship in a release artefact, so unlike MNIST none are bundled: the ResNet-20 demo needs that
directory (or ``LYCAON_DATA``)."""

from __future__ import annotations

import numpy as np

#: Class names, index = label.
CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


def cifar10_test_subset(count: int = 500) -> tuple[np.ndarray, np.ndarray]:
    """The first ``count`` (at most 500) official CIFAR-10 test images: uint8 (count, 32, 32, 3)
    RGB and labels. Raises OSError naming the directory when the data set is not at hand."""
    from lycaon.frontend.zoo import data_dir  # noqa: PLC0415

    path = data_dir() / "cifar10" / "test.npz"
    try:
        d = np.load(path)
    except OSError as e:
        raise OSError(f"CIFAR-10 test images not found at {path} (set LYCAON_DATA to the shared data directory); the MNIST demo (--model lenet5) needs no download") from e
    with d:
        order = d["official_first500"][: max(0, min(count, 500))]
        return d["x"][order], d["y"][order]
