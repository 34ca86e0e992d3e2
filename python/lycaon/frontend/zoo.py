"""Where models and data come from: ONNX files, and the reference CIFAR ResNets and CIFAR-10 in
../shared/data (read at run time, never copied into the package)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .ir import Graph, ModelError

REFERENCE_MODELS = {f"resnet{d}-reference": d for d in (20, 32, 44, 56)}


def data_dir() -> Path:
    """The shared data folder: $LYCAON_DATA, else shared/data next to or above the working directory."""
    candidates = []
    if os.environ.get("LYCAON_DATA"):
        candidates.append(Path(os.environ["LYCAON_DATA"]))
    cwd = Path.cwd()
    for base in [cwd, *cwd.parents]:
        candidates += [base / "shared" / "data", base / ".." / "shared" / "data"]
    candidates.append(Path(__file__).resolve().parents[3] / ".." / "shared" / "data")
    for c in candidates:
        if (c / "cifar10").is_dir() or (c / "models").is_dir():
            return c.resolve()
    raise FileNotFoundError("the shared data folder (models/, cifar10/) was not found; set LYCAON_DATA to it")


def load_model(name_or_path: str) -> Graph:
    """A built-in model by name (shipped weights, reference weights, or layer shapes only), or an
    ONNX file."""
    from lycaon.models import load_weights  # noqa: PLC0415

    from . import resnet  # noqa: PLC0415
    from .architectures import ARCHITECTURES  # noqa: PLC0415
    from .lenet import lenet5  # noqa: PLC0415
    from .onnx_import import load_onnx  # noqa: PLC0415

    if name_or_path == "resnet20-cifar10":
        return resnet.resnet_cifar(load_weights("resnet20-cifar10"), 20)
    if name_or_path == "lenet5-mnist":
        return lenet5(load_weights("lenet5-mnist"))
    if name_or_path == "cnn-square-cifar10":
        from .lenet import cnn_square  # noqa: PLC0415

        try:
            return cnn_square(load_weights(name_or_path))
        except KeyError as e:
            raise ModelError(f"{e.args[0]} (train it: scripts/train_cnn_square.py)") from None
    if name_or_path == "resnet20-aespa-cifar10":
        from . import aespa  # noqa: PLC0415

        try:
            return aespa.graph(load_weights(name_or_path), 20, name=name_or_path)
        except KeyError as e:
            raise ModelError(f"{e.args[0]} (train it: scripts/train_resnet20_aespa.py, then --ship)") from None

    if name_or_path in ARCHITECTURES:
        return ARCHITECTURES[name_or_path]()
    if name_or_path in REFERENCE_MODELS:
        depth = REFERENCE_MODELS[name_or_path]
        return resnet.resnet_cifar(resnet.reference_state_dict(depth, data_dir() / "models"), depth)
    path = Path(name_or_path)
    if not path.is_file():
        known = ", ".join(["lenet5-mnist", "resnet20-cifar10", "cnn-square-cifar10", "resnet20-aespa-cifar10", *REFERENCE_MODELS, *ARCHITECTURES])
        raise ModelError(f"'{name_or_path}' is neither a model file nor a built-in model ({known})")
    return load_onnx(str(path))


def cifar10(split: str = "test") -> tuple[np.ndarray, np.ndarray]:
    """CIFAR-10 (the lossy JPEG copy in ../shared/data): uint8 NHWC images and labels."""
    d = np.load(data_dir() / "cifar10" / f"{split}.npz")
    return d["x"], d["y"]
