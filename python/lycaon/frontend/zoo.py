"""Where models and data come from: ONNX files, and the reference CIFAR ResNets and CIFAR-10 in
../shared/data (read at run time, never copied into the package)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

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


def load_model(name_or_path: str, input_shape: Optional[tuple] = None) -> Graph:
    """A built-in model by name (shipped weights, reference weights, or layer shapes only), an
    ONNX file, or a saved PyTorch module (``load_torch_file``; ``input_shape`` (C, H, W) for
    TorchScript files, which do not record it)."""
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
    if path.suffix.lower() in TORCH_SUFFIXES:
        return load_torch_file(path, input_shape)
    return load_onnx(str(path))


#: Saved PyTorch modules: torch.export archives (.pt2) and TorchScript files (.pt, .pth).
TORCH_SUFFIXES = (".pt2", ".pt", ".pth")


def load_torch_file(path: Path, input_shape: Optional[tuple] = None) -> Graph:
    """A saved PyTorch module: a torch.export archive (``torch.export.save``; its input shape is
    in the archive) or a TorchScript file (``torch.jit.save``; give ``input_shape`` (C, H, W),
    which ``lycaon serve`` takes from the calibration data). The module is traced to ONNX
    (opset 13) in memory and read by the ONNX importer, so both kinds meet the same operator
    checks. Pickled whole modules (``torch.save(model)``) are refused: loading them runs
    arbitrary code."""
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        raise ModelError(f"{path}: reading PyTorch files needs torch (pip install 'lycaon[train]'), or export the model to ONNX") from None
    import io  # noqa: PLC0415

    from .onnx_import import load_onnx  # noqa: PLC0415

    module, shape = None, input_shape
    if path.suffix.lower() == ".pt2":
        try:
            exported = torch.export.load(str(path))
        except Exception as exc:  # noqa: BLE001 - torch raises many kinds
            raise ModelError(f"{path}: not a torch.export archive ({type(exc).__name__}: {exc})") from None
        args = exported.example_inputs[0] if exported.example_inputs else ()
        if len(args) != 1:
            raise ModelError(f"{path}: the exported program takes {len(args)} inputs; Lycaon serves models of one image input")
        shape = tuple(int(d) for d in args[0].shape[1:]) if args[0].dim() == 4 else tuple(int(d) for d in args[0].shape)
        try:  # the unlifted module cannot be switched to eval mode, which the ONNX tracer does
            module = torch.jit.trace(exported.module(), tuple(args), check_trace=False)
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f"{path}: tracing the exported program failed ({type(exc).__name__}: {exc})") from None
    else:
        try:
            module = torch.jit.load(str(path), map_location="cpu")
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f"{path}: not a TorchScript file ({type(exc).__name__}: {exc}); save with torch.jit.save or torch.export.save, "
                             "or export to ONNX") from None
        if shape is None:
            raise ModelError(f"{path}: a TorchScript file does not record its input shape; give calibration data (its shape is the model's) or export to ONNX")
    buffer = io.BytesIO()
    try:
        torch.onnx.export(module, (torch.zeros((1, *shape)),), buffer, opset_version=13, input_names=["image"], output_names=["logits"], dynamo=False)
    except Exception as exc:  # noqa: BLE001
        raise ModelError(f"{path}: tracing the module to ONNX failed ({type(exc).__name__}: {exc})") from None
    graph = load_onnx(buffer.getvalue())
    graph.name = path.stem
    return graph


def cifar10(split: str = "test") -> tuple[np.ndarray, np.ndarray]:
    """CIFAR-10 (the lossy JPEG copy in ../shared/data): uint8 NHWC images and labels."""
    d = np.load(data_dir() / "cifar10" / f"{split}.npz")
    return d["x"], d["y"]
