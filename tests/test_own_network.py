"""Bring your own network: an ONNX model the project did not ship (odd input shape 3x48x40, a
grouped convolution, ReLU6, a concat, a residual add, average pooling, 7 classes), quantised on
data the test provides and served over TCP. The private logits equal the fixed-point twin's bit
for bit; the twin's top-1 equals onnxruntime's float top-1. And the errors a user meets first:
no calibration data, a corrupt or mismatched calibration file."""

import json
import os

import numpy as np
import pytest

import lycaon
from hybrid_plans import coefficient_plan
from lycaon import hybrid

onnx = pytest.importorskip("onnx")
native = pytest.mark.skipif(not hasattr(lycaon._native, "HybridServer"), reason="the native module has no hybrid runtime")

SHAPE = (3, 48, 40)
CLASSES = 7


def _own_model(path, seed: int = 7) -> None:
    """conv 3->8 (3x3) ReLU; branch a: grouped conv 8->8 (3x3, 4 groups) ReLU6; branch b: conv
    8->8 (1x1) ReLU; concat -> 16; conv 16->8 (1x1) + residual add with the stem; ReLU; average
    pool 2x2; conv 8->8 (3x3, stride 2) ReLU; global average pool; flatten; FC 8->7."""
    from onnx import TensorProto, helper, numpy_helper  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr, dtype=np.float32), name))
        return name

    def conv(name, x, c_in, c_out, k, stride=1, groups=1):
        w = rng.standard_normal((c_out, c_in // groups, k, k)) * np.sqrt(2.0 / (c_in // groups * k * k))
        nodes.append(helper.make_node("Conv", [x, const(f"{name}.w", w), const(f"{name}.b", rng.standard_normal(c_out) * 0.1)], [name],
                                      name=name, kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride, stride], group=groups))
        return name

    def op(kind, name, inputs, **attrs):
        nodes.append(helper.make_node(kind, list(inputs), [name], name=name, **attrs))
        return name

    stem = op("Relu", "stem_relu", [conv("stem", "image", 3, 8, 3)])
    a = op("Clip", "a_relu6", [conv("a", stem, 8, 8, 3, groups=4), const("zero", 0.0), const("six", 6.0)])
    b = op("Relu", "b_relu", [conv("b", stem, 8, 8, 1)])
    cat = op("Concat", "cat", [a, b], axis=1)
    mix = conv("mix", cat, 16, 8, 1)
    res = op("Relu", "res_relu", [op("Add", "res", [mix, stem])])
    pooled = op("AveragePool", "pool", [res], kernel_shape=[2, 2], strides=[2, 2])
    down = op("Relu", "down_relu", [conv("down", pooled, 8, 8, 3, stride=2)])
    flat = op("Flatten", "flat", [op("GlobalAveragePool", "gap", [down])])
    w = rng.standard_normal((CLASSES, 8)) * 0.5
    op("Gemm", "fc", [flat, const("fc.w", w), const("fc.b", rng.standard_normal(CLASSES) * 0.1)], transB=1)
    graph = helper.make_graph(nodes, "own-net", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, *SHAPE])],
                              [helper.make_tensor_value_info("fc", TensorProto.FLOAT, [1, CLASSES])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


@pytest.fixture(scope="module")
def own(tmp_path_factory):
    path = tmp_path_factory.mktemp("own") / "own-net.onnx"
    _own_model(path)
    rng = np.random.default_rng(1)
    calibration = rng.standard_normal((32, *SHAPE))
    inputs = rng.standard_normal((100, *SHAPE))
    return path, calibration, inputs


def _onnx_top1(path, x) -> np.ndarray:
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return np.array([session.run(None, {"image": x[i:i + 1].astype(np.float32)})[0][0] for i in range(len(x))]).argmax(1)


def test_the_twin_agrees_with_onnxruntime_on_100_inputs(own):
    from lycaon.frontend.quantize import QuantConfig, quantize, run_integer  # noqa: PLC0415

    path, calibration, inputs = own
    graph = hybrid.load_graph(path)
    assert tuple(graph.input_shape) == SHAPE and {"clip", "concat", "add", "avgpool"} <= {n.op for n in graph.nodes}
    q = quantize(graph, hybrid.calibration_for(graph, "own", calibration), QuantConfig())
    twin = run_integer(q, q.encode_input(inputs)).argmax(1)
    agree = int((twin == _onnx_top1(path, inputs)).sum())
    assert agree >= 95, f"the fixed-point twin's top-1 equals onnxruntime's on {agree} of 100 inputs"


@native
def test_own_network_served_over_tcp_equals_its_twin(own):
    from lycaon.frontend.quantize import run_integer  # noqa: PLC0415

    path, calibration, inputs = own
    names = [f"class-{i}" for i in range(CLASSES)]
    plan = coefficient_plan(hybrid.load_graph(path))
    with lycaon.Server(str(path), calibration=calibration, labels=names, plan=plan) as server:
        address = server.start(0)
        client = lycaon.Client(address)
        assert client.metadata["input_shape"] == list(SHAPE) and client.labels == names and client.metadata["classes"] == CLASSES
        q = server.quantized
        # Private inferences (about 4 s each): 4 here; LYCAON_OWN_NETWORK_INPUTS=100 runs them all.
        k = int(os.environ.get("LYCAON_OWN_NETWORK_INPUTS", "4"))
        res = client.infer(inputs[:k])
        twin = run_integer(q, q.encode_input(inputs[:k]))
        got = np.round(res.logits * 2.0 ** q.fraction_bits).astype(np.int64)
        np.testing.assert_array_equal(got, twin)  # exact truncation: bit for bit
        agree = int((np.array(res.labels) == _onnx_top1(path, inputs[:k])).sum())
        print(f"private top-1 equals onnxruntime's on {agree} of {k} inputs; logits equal the twin's bit for bit")
        assert agree >= 0.95 * k


@native
def test_infer_cli_reads_npy_and_writes_logits(own, tmp_path, capsys):
    from lycaon.cli import main  # noqa: PLC0415

    path, calibration, inputs = own
    np.save(tmp_path / "one.npy", inputs[0])
    np.save(tmp_path / "batch1.npy", inputs[1:2])
    with lycaon.Server(str(path), calibration=calibration, plan=coefficient_plan(hybrid.load_graph(path))) as server:
        address = server.start(0)
        out = tmp_path / "out.json"
        assert main(["infer", "--server", address, "--no-layers", "--json", str(out), str(tmp_path / "one.npy"), str(tmp_path / "batch1.npy")]) == 0
        records = json.loads(out.read_text())["results"]
        assert len(records) == 2 and all(len(r["logits"]) == CLASSES for r in records)
        twin = hybrid.Client(address).encode(inputs[:2])
        assert twin.shape == (2, int(np.prod(SHAPE)))


def test_serving_without_calibration_names_the_flag(own, capsys):
    from lycaon.cli import main  # noqa: PLC0415

    path, _, _ = own
    assert main(["serve", str(path), "--port", "0"]) == 2
    assert "--calibration" in capsys.readouterr().err
    with pytest.raises(lycaon.frontend.ir.ModelError, match="--calibration"):
        hybrid.prepare("squeezenet")


def test_bad_calibration_files_get_clear_errors(own, tmp_path):
    from lycaon.preprocessing import DataError  # noqa: PLC0415

    path, calibration, _ = own
    corrupt = tmp_path / "corrupt.npy"
    corrupt.write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(DataError, match="corrupt.npy: not a readable"):
        hybrid.prepare(str(path), calibration=corrupt)
    wrong = tmp_path / "wrong.npy"
    np.save(wrong, calibration[:, :, :40, :])
    with pytest.raises(DataError, match=r"wrong.npy: shape \(32, 3, 40, 40\) does not match the model's input \(N, 3, 48, 40\)"):
        hybrid.prepare(str(path), calibration=wrong)
    raw = tmp_path / "raw.npz"
    np.savez(raw, x=np.zeros((4, 48, 40, 3), dtype=np.uint8))
    with pytest.raises(DataError, match="uint8"):
        hybrid.prepare(str(path), calibration=raw)
    nan = calibration.copy()
    nan[0, 0, 0, 0] = np.nan
    with pytest.raises(DataError, match="NaN"):
        hybrid.prepare(str(path), calibration=nan)
    with pytest.raises(DataError, match="a folder of images needs a preprocessing spec"):
        folder = tmp_path / "imgs"
        folder.mkdir()
        pytest.importorskip("PIL.Image").new("RGB", (50, 60)).save(folder / "a.png")
        hybrid.prepare(str(path), calibration=folder)


def test_image_folder_calibration_and_png_inference_share_the_spec(tmp_path):
    from PIL import Image  # noqa: PLC0415

    from lycaon.preprocessing import Preprocess, load_calibration, read_image  # noqa: PLC0415

    rng = np.random.default_rng(3)
    for i in range(3):
        Image.fromarray(rng.integers(0, 256, (60, 70, 3), dtype=np.uint8)).save(tmp_path / f"{i}.png")
    spec = Preprocess.from_any({"resize": 50, "crop": [48, 40], "mean": [0.5, 0.4, 0.3], "std": [0.2, 0.2, 0.2]})
    x = load_calibration(tmp_path, SHAPE, spec)
    assert x.shape == (3, *SHAPE)
    np.testing.assert_allclose(x[0], read_image(tmp_path / "0.png", spec))
    # By hand: resize the shorter side (60) to 50 -> 50x58, centre crop 48x40 from (1, 9).
    img = Image.open(tmp_path / "0.png").convert("RGB").resize((58, 50), Image.BILINEAR)
    ref = (np.asarray(img, dtype=np.float64)[1:49, 9:49] / 255.0 - [0.5, 0.4, 0.3]) / 0.2
    np.testing.assert_allclose(x[0], ref.transpose(2, 0, 1))
    with pytest.raises(ValueError, match="gives 32x32 images, the model takes 48x40"):
        Preprocess.from_any({"crop": 32}).check_shape(SHAPE)
    assert Preprocess.from_any(json.dumps(spec.to_dict())) == spec


@pytest.mark.parametrize("kind", ["torchscript", "export"])
def test_saved_pytorch_modules_load_like_onnx(tmp_path, kind):
    """A TorchScript file (.pt, input shape from the calibration data) and a torch.export archive
    (.pt2, shape recorded) import to the same graph; batch-norm folded, ReLU6 a clip."""
    torch = pytest.importorskip("torch")
    from torch import nn  # noqa: PLC0415

    from lycaon.frontend import run_float  # noqa: PLC0415

    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU6(), nn.Conv2d(8, 8, 3, padding=1, groups=4), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5)).eval()
    x = torch.randn(4, 3, 20, 16)
    if kind == "torchscript":
        path = tmp_path / "m.pt"
        torch.jit.save(torch.jit.trace(m, x[:1]), str(path))
    else:
        path = tmp_path / "m.pt2"
        torch.export.save(torch.export.export(m, (x[:1],)), str(path))
    graph = hybrid.load_graph(path, (3, 20, 16) if kind == "torchscript" else None)
    assert [n.op for n in graph.nodes] == ["conv", "clip", "conv", "relu", "global_avgpool", "flatten", "linear"]
    np.testing.assert_allclose(run_float(graph, x.numpy().astype(np.float64)), m(x).detach().numpy(), atol=1e-5)
    program, _, q = hybrid.prepare(str(path), calibration=x.numpy().astype(np.float64), plan=coefficient_plan(graph))
    assert program["input_shape"] == [3, 20, 16] and any(op["op"] == "clip" for op in program["ops"])


def test_built_in_architectures_are_refused_without_weights(own):
    path, calibration, _ = own
    x = np.zeros((1, 3, 227, 227))
    with pytest.raises(lycaon.frontend.ir.ModelError, match="random-weights"):
        hybrid.prepare("squeezenet", calibration=x[:, :, :224, :224])
