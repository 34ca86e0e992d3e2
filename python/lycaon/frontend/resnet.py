"""The CIFAR ResNets of He et al. (2016) with option-A shortcuts, as the reference weights in
../shared/data/models store them (akamaster/pytorch_resnet_cifar10, BSD-2-Clause; read at run
time, never copied into the package), plus a numpy-only reader of legacy torch.save files."""

from __future__ import annotations

import collections
import pickle
import struct
from pathlib import Path

import numpy as np

from .ir import Graph, Node

_MAGIC = 0x1950A86A20F9469CFC6C
_DTYPES = {"FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16, "LongStorage": np.int64, "IntStorage": np.int32, "ByteStorage": np.uint8}
#: ImageNet statistics, which the reference training normalised CIFAR-10 with.
MEAN = np.array([0.485, 0.456, 0.406])
STD = np.array([0.229, 0.224, 0.225])


class _Storage:
    def __init__(self, dtype):
        self.dtype, self.data = np.dtype(dtype), None


class _Tensor:
    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, tuple(size), tuple(stride)

    def array(self) -> np.ndarray:
        item = self.storage.dtype.itemsize
        buf = self.storage.data[self.offset:]
        return np.lib.stride_tricks.as_strided(buf, shape=self.size, strides=[s * item for s in self.stride]).copy()


class _Unpickler(pickle.Unpickler):
    """Refuses every global except the few a plain checkpoint needs."""

    def __init__(self, f, storages):
        super().__init__(f, encoding="latin1")
        self.storages = storages

    def find_class(self, module, name):
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if module == "torch._utils" and name in ("_rebuild_tensor", "_rebuild_tensor_v2"):
            return lambda storage, offset, size, stride, *_: _Tensor(storage, offset, size, stride)
        if module == "torch" and name in _DTYPES:
            return _DTYPES[name]
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a checkpoint")

    def persistent_load(self, pid):
        _kind, dtype, key, _location, _numel, _view = pid
        if key not in self.storages:
            self.storages[key] = _Storage(dtype)
        return self.storages[key]


def load_legacy_checkpoint(path) -> dict:
    """Reads a legacy (pre-1.6, non-zip) torch.save file into numpy arrays, without torch."""
    with open(path, "rb") as f:
        if f.read(2) == b"PK":
            raise ValueError(f"{path}: a zip-format (torch >= 1.6) checkpoint; this reader takes legacy files")
        f.seek(0)
        if pickle.load(f) != _MAGIC:
            raise ValueError(f"{path}: not a torch checkpoint (bad magic number)")
        pickle.load(f)  # protocol version
        pickle.load(f)  # sys info
        storages: dict = {}
        obj = _Unpickler(f, storages).load()
        keys = pickle.load(f)
        for key in keys:
            (count,) = struct.unpack("<q", f.read(8))
            st = storages[key]
            st.data = np.frombuffer(f.read(count * st.dtype.itemsize), dtype=st.dtype)

    def walk(o):
        if isinstance(o, _Tensor):
            return o.array()
        if isinstance(o, dict):
            return type(o)((k, walk(v)) for k, v in o.items())
        return o

    return walk(obj)


def reference_state_dict(depth: int = 20, models_dir=None) -> dict:
    """The reference weights for ResNet-`depth` from ../shared/data/models (keys without `module.`)."""
    if models_dir is None:
        from .zoo import data_dir  # noqa: PLC0415

        models_dir = data_dir() / "models"
    root = Path(models_dir)
    files = sorted(root.glob(f"resnet{depth}-*.th"))
    if not files:
        raise FileNotFoundError(f"no resnet{depth}-*.th under {root}")
    sd = load_legacy_checkpoint(files[0])["state_dict"]
    return {k.removeprefix("module."): np.asarray(v, dtype=np.float64) for k, v in sd.items()}


def _shortcut_weight(c_in: int, c_out: int) -> np.ndarray:
    """Option A as a 1x1 convolution: identity on the input channels, planes//4 zeros each side."""
    w = np.zeros((c_out, c_in, 1, 1))
    pad = (c_out - c_in) // 2
    w[pad:pad + c_in, :, 0, 0] = np.eye(c_in)
    return w


def resnet_cifar(sd: dict, depth: int = 20) -> Graph:
    """The IR of a CIFAR ResNet (batch-norm kept as separate nodes; see transforms.simplify)."""
    blocks = (depth - 2) // 6
    g = Graph("image", (3, 32, 32), name=f"resnet{depth}")

    def conv_bn(prefix_conv, prefix_bn, x, stride, relu):
        w = sd[f"{prefix_conv}.weight"]
        g.add(Node("conv", prefix_conv, [x], f"{prefix_conv}:out", {"stride": (stride, stride), "pads": (1, 1, 1, 1), "groups": 1}, {"weight": w, "bias": None}))
        bn = {k: sd[f"{prefix_bn}.{src}"] for k, src in (("scale", "weight"), ("bias", "bias"), ("mean", "running_mean"), ("var", "running_var"))}
        g.add(Node("batchnorm", prefix_bn, [f"{prefix_conv}:out"], f"{prefix_bn}:out", {"eps": 1e-5}, bn))
        if relu:
            g.add(Node("relu", f"{prefix_bn}.relu", [f"{prefix_bn}:out"], f"{prefix_bn}:relu"))
            return f"{prefix_bn}:relu"
        return f"{prefix_bn}:out"

    x = conv_bn("conv1", "bn1", "image", 1, True)
    channels = 16
    for stage, planes in enumerate((16, 32, 64), start=1):
        for b in range(blocks):
            p = f"layer{stage}.{b}"
            stride = 2 if stage > 1 and b == 0 else 1
            h = conv_bn(f"{p}.conv1", f"{p}.bn1", x, stride, True)
            h = conv_bn(f"{p}.conv2", f"{p}.bn2", h, 1, False)
            shortcut = x
            if stride != 1 or channels != planes:
                g.add(Node("conv", f"{p}.shortcut", [x], f"{p}.shortcut:out", {"stride": (stride, stride), "pads": (0, 0, 0, 0), "groups": 1}, {"weight": _shortcut_weight(channels, planes), "bias": None}))
                shortcut = f"{p}.shortcut:out"
            g.add(Node("add", f"{p}.add", [h, shortcut], f"{p}.add:out"))
            g.add(Node("relu", f"{p}.relu", [f"{p}.add:out"], f"{p}:out"))
            x, channels = f"{p}:out", planes
    g.add(Node("global_avgpool", "avgpool", [x], "avgpool:out"))
    g.add(Node("flatten", "flatten", ["avgpool:out"], "flatten:out"))
    g.add(Node("linear", "linear", ["flatten:out"], "logits", {}, {"weight": sd["linear.weight"], "bias": sd["linear.bias"]}))
    return g


def resnet_cifar_onnx(sd: dict, depth: int = 20):
    """The same network as an ONNX model (shortcuts as Slice + Pad, as torch.onnx writes them)."""
    from .onnx_export import to_onnx  # noqa: PLC0415

    return to_onnx(resnet_cifar(sd, depth))


def preprocess(images_nhwc_uint8: np.ndarray) -> np.ndarray:
    """uint8 NHWC RGB -> normalised float NCHW, as the reference weights were trained."""
    x = images_nhwc_uint8.astype(np.float64) / 255.0
    x = (x - MEAN) / STD
    return x.transpose(0, 3, 1, 2)
