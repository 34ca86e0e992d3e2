"""The images a command classifies: bundled test sets and the IMAGE arguments of ``lycaon infer``."""

from __future__ import annotations

from typing import Optional

import numpy as np

import lycaon


def bundled_test_images(dataset: Optional[str]) -> tuple[np.ndarray, np.ndarray]:
    """The test images of a data set (uint8, as the data set stores them) and labels."""
    from lycaon.data import demo_images  # noqa: PLC0415

    try:
        return demo_images(dataset)
    except ValueError as e:
        raise lycaon.LycaonError(str(e)) from None


def read_images(spec: str, client) -> list[tuple[str, np.ndarray, Optional[int]]]:
    """(name, model-ready float image (C, H, W), true label or None) for each image an IMAGE
    argument holds: bundled:K, a .npy/.npz array (one image or a batch; uint8 raw images or
    float model inputs), or a PNG/JPEG file (Pillow)."""
    from pathlib import Path  # noqa: PLC0415

    dataset = client.metadata.get("preprocess")
    labels = None
    if spec.startswith("bundled:"):
        if not isinstance(dataset, str):
            raise lycaon.LycaonError(f"{spec}: this server's model has no bundled test images; give .npy/.npz tensors or image files")
        try:
            k = int(spec.split(":", 1)[1])
        except ValueError:
            raise lycaon.LycaonError(f"{spec}: write bundled:K with K an image index") from None
        x, y = bundled_test_images(dataset)
        if not 0 <= k < len(x):
            raise lycaon.LycaonError(f"{spec}: the bundled {dataset} test set has images 0..{len(x) - 1}")
        return [(spec, client.preprocess(x[k])[0], int(y[k]))]
    from lycaon.preprocessing import IMAGE_SUFFIXES, read_array, read_image  # noqa: PLC0415

    path = Path(spec)
    if not path.is_file():
        raise FileNotFoundError(f"{spec}: no such file (give .npy, .npz, {', '.join(IMAGE_SUFFIXES)} or bundled:K)")
    suffix = path.suffix.lower()
    if suffix in (".npy", ".npz"):
        arr, labels = read_array(path)
    else:
        prep = client.preprocessing
        if prep is not None and not isinstance(prep, str):
            return [(spec, read_image(path, prep), None)]
        try:
            from PIL import Image  # noqa: PLC0415
        except ImportError:
            raise lycaon.LycaonError(f"{spec}: reading {suffix or 'this'} images needs Pillow (pip install pillow); .npy and .npz arrays need nothing") from None
        if prep is None:
            raise lycaon.LycaonError(f"{spec}: the server publishes no preprocessing for image files; give model-ready float tensors as .npy/.npz")
        with Image.open(path) as img:
            arr = np.asarray(img.convert("L" if prep == "mnist" else "RGB"), dtype=np.uint8)
    x = client.preprocess(arr)
    if labels is not None and np.size(labels) != len(x):
        labels = None
    if len(x) == 1:
        return [(spec, x[0], None if labels is None else int(np.ravel(labels)[0]))]
    return [(f"{spec}[{i}]", x[i], None if labels is None else int(np.ravel(labels)[i])) for i in range(len(x))]
