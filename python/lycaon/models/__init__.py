"""Built-in models: weights shipped with Lycaon (trained by the scripts in the repository) and the
reference CIFAR ResNets read from ../shared/data at run time. `registry.json` records each shipped
model's accuracy as measured by Lycaon's float executor on the full test set."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

_HERE = Path(__file__).resolve().parent

#: Reference models that are read from ../shared/data/models, with their measured accuracy on the
#: full CIFAR-10 test set there (`lycaon quantize resnet20-reference` re-measures it).
REFERENCE = {
    f"resnet{depth}-reference": {
        "name": f"resnet{depth}-reference", "dataset": "cifar10", "accuracy": correct / 10000, "test_images": 10000,
        "file": f"../shared/data/models/resnet{depth}-*.th", "trained_by": "akamaster/pytorch_resnet_cifar10 (BSD-2-Clause)",
    }
    for depth, correct in ((20, 8103), (32, 8256), (44, 8267), (56, 8320))
}


def registry() -> dict:
    shipped = json.loads((_HERE / "registry.json").read_text()) if (_HERE / "registry.json").is_file() else {}
    return {**shipped, **REFERENCE}


def list_models() -> list[dict]:
    return list(registry().values())


def load_weights(name: str) -> dict:
    entry = registry().get(name)
    if entry is None or not (_HERE / entry["file"]).is_file():
        raise KeyError(f"no shipped weights for '{name}'; built-in models: {', '.join(registry())}")
    with np.load(_HERE / entry["file"]) as d:
        return {k: d[k].astype(np.float64) for k in d.files}


def ship(out_dir: Path, name: str, dataset: str, weights: dict, accuracy: float, test_images: int, trained_by: str, **extra) -> None:
    """Writes a trained model's weights (float32, compressed) and its registry entry into `out_dir`
    (the source tree's python/lycaon/models when a training script runs)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    file = f"{name.replace('-', '_')}.npz"
    np.savez_compressed(out_dir / file, **{k: np.asarray(v, dtype=np.float32) for k, v in weights.items()})
    path = out_dir / "registry.json"
    entries = json.loads(path.read_text()) if path.is_file() else {}
    entries[name] = {"name": name, "dataset": dataset, "accuracy": accuracy, "test_images": int(test_images), "file": file, "trained_by": trained_by, **extra}
    path.write_text(json.dumps(entries, indent=2) + "\n")
