"""The user's data in: how images become model-ready tensors (a preprocessing spec the server
publishes), calibration data for quantisation, class names, and the files a client classifies.

A model's input is a float tensor (C, H, W). Data reaches it either as model-ready tensors
(.npy/.npz of float (N, C, H, W), or one (C, H, W)) or as images (PNG/JPEG, or a folder of them)
that a ``Preprocess`` spec turns into tensors: resize, centre crop, scale to [0, 1], per-channel
mean and standard deviation, channel order. The server holds the spec and sends it to clients in
its public metadata, so a client preprocesses its images exactly as the calibration data was.
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Optional, Sequence, Union

import numpy as np

__all__ = ["IMAGE_SUFFIXES", "Preprocess", "load_calibration", "load_labels", "read_array", "read_image"]

#: File endings read as images (Pillow).
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp")
#: Channel orders a spec may name.
CHANNEL_ORDERS = ("rgb", "bgr", "gray")

DataLike = Union[np.ndarray, str, os.PathLike]


class DataError(ValueError):
    """Data that cannot be used as it is: the message names the file and what is wrong."""


def _json(text: str, where: str, kind: type, what: str):
    """``text`` parsed as JSON, which must be a ``kind`` (``what`` says so in the error)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}: not JSON ({exc})") from None
    if not isinstance(value, kind):
        raise DataError(f"{where}: expected {what}, got {type(value).__name__}")
    return value


def _pair(value, what: str) -> Optional[tuple[int, int]]:
    if value is None:
        return None
    v = [value] * 2 if isinstance(value, (int, np.integer)) else list(value)
    if len(v) != 2 or any(int(s) != s or s <= 0 for s in v):
        raise DataError(f"preprocessing: {what} must be a positive size or [height, width], not {value!r}")
    return int(v[0]), int(v[1])


@dataclass
class Preprocess:
    """How an image (H, W, channels, uint8) becomes a model input (C, H, W, float): resize
    (an int resizes the shorter side to it, keeping the aspect ratio; [h, w] resizes to exactly
    that), then centre crop to ``crop``, divide by ``scale`` (255: to [0, 1]), subtract ``mean`` and
    divide by ``std`` per channel, in ``channel_order`` ("rgb", "bgr" or "gray")."""

    resize: Any = None
    crop: Any = None
    mean: list = field(default_factory=lambda: [0.0])
    std: list = field(default_factory=lambda: [1.0])
    scale: float = 255.0
    channel_order: str = "rgb"

    def __post_init__(self) -> None:
        if self.channel_order not in CHANNEL_ORDERS:
            raise DataError(f"preprocessing: channel_order must be one of {', '.join(CHANNEL_ORDERS)}, not {self.channel_order!r}")
        if self.resize is not None and not isinstance(self.resize, (int, np.integer)):
            self.resize = list(_pair(self.resize, "resize"))
        elif self.resize is not None:
            _pair(self.resize, "resize")
        if self.crop is not None:
            self.crop = list(_pair(self.crop, "crop"))
        self.mean = [float(v) for v in np.atleast_1d(self.mean)]
        self.std = [float(v) for v in np.atleast_1d(self.std)]
        channels = self.channels
        for name, v in (("mean", self.mean), ("std", self.std)):
            if len(v) not in (1, channels):
                raise DataError(f"preprocessing: {name} has {len(v)} values for {channels} channels")
        if any(s <= 0 for s in self.std) or float(self.scale) <= 0:
            raise DataError("preprocessing: std and scale must be positive")
        self.scale = float(self.scale)

    @property
    def channels(self) -> int:
        return 1 if self.channel_order == "gray" else 3

    @classmethod
    def from_any(cls, spec: Any) -> Optional["Preprocess"]:
        """A spec from a ``Preprocess``, a dict, a JSON string or the path of a JSON file."""
        if spec is None or isinstance(spec, Preprocess):
            return spec
        if isinstance(spec, (str, os.PathLike)):
            text = str(spec)
            path = Path(text)
            if not text.lstrip().startswith("{"):
                if not path.is_file():
                    raise DataError(f"preprocessing: {text} is neither a JSON object nor a JSON file")
                text = path.read_text(encoding="utf-8")
            spec = _json(text, "preprocessing", dict, "a JSON object")
        if not isinstance(spec, dict):
            raise DataError(f"preprocessing: expected a JSON object, got {type(spec).__name__}")
        known = [f.name for f in fields(cls)]
        unknown = set(spec) - set(known)
        if unknown:
            raise DataError(f"preprocessing: unknown keys {', '.join(sorted(unknown))} (known: {', '.join(known)})")
        return cls(**spec)

    def to_dict(self) -> dict:
        return asdict(self)

    def check_shape(self, input_shape: Sequence[int]) -> None:
        """Raises ``DataError`` unless the spec produces tensors of ``input_shape`` (C, H, W)."""
        c = int(input_shape[0])
        if c != self.channels:
            raise DataError(f"preprocessing: channel_order {self.channel_order!r} gives {self.channels} channels, the model takes {c}")
        size = self.crop or (self.resize if isinstance(self.resize, list) else None)
        if size is not None and tuple(size) != tuple(input_shape[1:]):
            raise DataError(f"preprocessing gives {size[0]}x{size[1]} images, the model takes {input_shape[1]}x{input_shape[2]} (set crop to that)")

    def apply_image(self, image) -> np.ndarray:
        """One PIL image -> float (C, H, W)."""
        from PIL import Image  # noqa: PLC0415

        img = image.convert("L" if self.channel_order == "gray" else "RGB")
        if self.resize is not None:
            if isinstance(self.resize, list):
                h, w = self.resize
            else:
                short = int(self.resize)
                w0, h0 = img.size
                h, w = (short, max(1, round(w0 * short / h0))) if h0 <= w0 else (max(1, round(h0 * short / w0)), short)
            img = img.resize((w, h), Image.BILINEAR)
        if self.crop is not None:
            ch, cw = self.crop
            w0, h0 = img.size
            if ch > h0 or cw > w0:
                raise DataError(f"preprocessing: crop {ch}x{cw} is larger than the {h0}x{w0} image (resize first)")
            top, left = (h0 - ch) // 2, (w0 - cw) // 2
            img = img.crop((left, top, left + cw, top + ch))
        x = np.asarray(img, dtype=np.float64) / self.scale
        x = x[..., None] if x.ndim == 2 else x
        if self.channel_order == "bgr":
            x = x[..., ::-1]
        x = (x - np.asarray(self.mean)) / np.asarray(self.std)
        return np.ascontiguousarray(x.transpose(2, 0, 1))

    def apply_uint8(self, images: np.ndarray) -> np.ndarray:
        """uint8 images (H, W[, C]) or (N, H, W[, C]) -> float (N, C, H, W)."""
        from PIL import Image  # noqa: PLC0415

        a = np.asarray(images)
        if a.ndim == 2 or (a.ndim == 3 and a.shape[-1] in (1, 3, 4)):
            a = a[None]
        if a.ndim == 4 and a.shape[-1] == 1:
            a = a[..., 0]
        return np.stack([self.apply_image(Image.fromarray(im)) for im in a])


def read_image(path: Union[str, os.PathLike], spec: Preprocess) -> np.ndarray:
    """A PNG/JPEG file -> float (C, H, W) by ``spec``."""
    try:
        from PIL import Image, UnidentifiedImageError  # noqa: PLC0415
    except ImportError:
        raise DataError(f"{path}: reading images needs Pillow (pip install pillow)") from None
    try:
        with Image.open(path) as img:
            return spec.apply_image(img)
    except (UnidentifiedImageError, OSError) as exc:
        raise DataError(f"{path}: not a readable image ({exc})") from None


def read_array(path: Union[str, os.PathLike]) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """The array in a .npy file, or in a .npz archive (key "x", else its only or first array) with
    its labels (key "y") when present. No pickles."""
    path = Path(path)
    try:
        if path.suffix.lower() == ".npz":
            with np.load(path, allow_pickle=False) as d:
                if not d.files:
                    raise DataError(f"{path}: the archive holds no array")
                x = d["x"] if "x" in d.files else d[d.files[0]]
                return x, (d["y"] if "y" in d.files else None)
        return np.load(path, allow_pickle=False), None
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        if isinstance(exc, DataError):
            raise
        raise DataError(f"{path}: not a readable .npy/.npz array ({exc})") from None


def _model_ready(x: np.ndarray, input_shape: tuple, where: str) -> np.ndarray:
    if x.dtype.kind not in "fiu" or x.dtype == np.uint8:
        kind = "uint8 (raw images)" if x.dtype == np.uint8 else str(x.dtype)
        raise DataError(f"{where}: calibration data must be model-ready float tensors (N, {', '.join(map(str, input_shape))}), not {kind}; "
                        "for raw images give a folder of image files and a preprocessing spec")
    if x.shape == input_shape:
        x = x[None]
    if x.ndim != 1 + len(input_shape) or x.shape[1:] != input_shape:
        raise DataError(f"{where}: shape {x.shape} does not match the model's input (N, {', '.join(map(str, input_shape))})")
    if len(x) == 0:
        raise DataError(f"{where}: no samples")
    x = x.astype(np.float64)
    if not np.isfinite(x).all():
        raise DataError(f"{where}: holds NaN or infinite values")
    return x


def load_calibration(data: DataLike, input_shape: Sequence[int], preprocess: Optional[Preprocess] = None, limit: Optional[int] = None) -> np.ndarray:
    """Model-ready float calibration inputs (N, *input_shape) from an array, a .npy/.npz file, or a
    folder of images (preprocessed by ``preprocess``, which is then required). ``limit`` takes that
    many samples, spread evenly, so quantisation sees a varied subset of a large file. Raises
    ``DataError`` naming the file and what is wrong."""
    input_shape = tuple(int(d) for d in input_shape)
    if isinstance(data, np.ndarray):
        x = _model_ready(data, input_shape, "the calibration array")
    else:
        path = Path(data)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
            if not files:
                raise DataError(f"{path}: no images ({', '.join(IMAGE_SUFFIXES)}) in this folder")
            if preprocess is None:
                raise DataError(f"{path}: a folder of images needs a preprocessing spec (--preprocess JSON, or --resize/--crop/--mean/--std)")
            preprocess.check_shape(input_shape)
            if limit is not None and len(files) > limit:
                files = [files[i] for i in np.linspace(0, len(files) - 1, limit).round().astype(int)]
            x = _model_ready(np.stack([read_image(f, preprocess) for f in files]), input_shape, str(path))
        elif path.is_file():
            if path.suffix.lower() not in (".npy", ".npz"):
                raise DataError(f"{path}: calibration data is a .npy/.npz of model-ready float tensors or a folder of images, not a {path.suffix or 'suffix-less'} file")
            x = _model_ready(read_array(path)[0], input_shape, str(path))
        else:
            raise DataError(f"{path}: no such file or folder")
    if limit is not None and len(x) > limit:
        x = x[np.linspace(0, len(x) - 1, limit).round().astype(int)]
    return x


def load_labels(source: Union[str, os.PathLike, Sequence[str], None], classes: Optional[int] = None) -> Optional[list[str]]:
    """Class names from a list, a text file (one per line) or a JSON list; checked against the
    model's number of ``classes`` when given."""
    if source is None:
        return None
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise DataError(f"{path}: no such labels file")
        text = path.read_text(encoding="utf-8")
        if path.suffix.lower() == ".json":
            names = _json(text, str(path), list, "a list of class names")
        else:
            names = [line.strip() for line in text.splitlines() if line.strip()]
    else:
        names = list(source)
    names = [str(n) for n in names]
    if classes is not None and len(names) != classes:
        raise DataError(f"{len(names)} class names for a model with {classes} outputs")
    return names
