"""The model front: IR validation, ONNX import (with batch-norm folding and option-A shortcuts),
the float executor against onnxruntime, and the reference ResNet-20 on real CIFAR-10 images."""

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from lycaon.frontend import Graph, ModelError, Node, load_onnx, run_float, simplify  # noqa: E402
from lycaon.frontend import resnet  # noqa: E402

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
HAVE_DATA = (SHARED / "models").is_dir() and (SHARED / "cifar10" / "test.npz").is_file()
needs_data = pytest.mark.skipif(not HAVE_DATA, reason="../shared/data (reference weights, CIFAR-10) is not present")


@pytest.fixture(scope="module")
def reference():
    sd = resnet.reference_state_dict(20, SHARED / "models")
    data = np.load(SHARED / "cifar10" / "test.npz")
    idx = np.arange(0, 10000, 10)  # 100 images of each class
    return sd, resnet.preprocess(data["x"][idx]), data["y"][idx]


@needs_data
def test_onnx_import_equals_the_direct_ir(reference):
    sd, x, _ = reference
    direct = simplify(resnet.resnet_cifar(sd))
    imported = simplify(load_onnx(resnet.resnet_cifar_onnx(sd).SerializeToString()))
    assert [n.op for n in direct.nodes] == [n.op for n in imported.nodes]
    for a, b in zip(direct.nodes, imported.nodes):
        assert a.shape == b.shape and a.attrs.get("stride") == b.attrs.get("stride")
        for key in a.params:
            if a.params[key] is not None:
                np.testing.assert_allclose(a.params[key], b.params[key], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(run_float(direct, x[:50]), run_float(imported, x[:50]), rtol=1e-6, atol=1e-6)


@needs_data
def test_float_executor_matches_onnxruntime(reference):
    ort = pytest.importorskip("onnxruntime")
    sd, x, _ = reference
    model = resnet.resnet_cifar_onnx(sd)
    ours = run_float(load_onnx(model.SerializeToString()), x[:100])
    theirs = ort.InferenceSession(model.SerializeToString()).run(None, {"image": x[:100].astype(np.float32)})[0]
    # onnxruntime computes in float32: agreement to 1e-5 of the logits' scale.
    assert np.abs(ours - theirs).max() <= 1e-5 * np.abs(theirs).max()


@needs_data
def test_reference_resnet20_accuracy_on_a_stratified_sample(reference):
    sd, x, y = reference
    logits = run_float(simplify(load_onnx(resnet.resnet_cifar_onnx(sd).SerializeToString())), x)
    accuracy = (logits.argmax(1) == y).mean()
    # 81.03 % on all 10,000 images (../shared/data/models/README.md); this is every 10th image.
    assert abs(accuracy - 0.8103) < 0.03, accuracy


def _tiny_model(nodes, inits, in_shape=(1, 2, 4, 4), out_shape=(1, 2, 4, 4)):
    graph = helper.make_graph(
        nodes, "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(in_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))],
        [numpy_helper.from_array(np.asarray(v, dtype=np.float32), k) for k, v in inits.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_unknown_operator_names_the_node_and_the_alternatives():
    model = _tiny_model([helper.make_node("Erf", ["x"], ["y"], name="weird")], {})
    with pytest.raises(ModelError, match=r"Erf node 'weird': unsupported operator \(a non-linear activation other than ReLU.*\); supported: Conv"):
        load_onnx(model)


def test_dynamic_shapes_and_corrupt_files_are_refused():
    model = _tiny_model([helper.make_node("Relu", ["x"], ["y"], name="r")], {}, in_shape=("N", 2, "H", 4), out_shape=("N", 2, "H", 4))
    with pytest.raises(ModelError, match="dynamic dimension 2"):
        load_onnx(model)
    with pytest.raises(ModelError, match="cannot read the ONNX model"):
        load_onnx(b"\x00\x01 definitely not protobuf \xff" * 10)


def test_unsupported_slices_and_shape_errors_name_the_node():
    sl = {"s": [1], "e": [4], "a": [2]}
    model = _tiny_model([helper.make_node("Slice", ["x", "s", "e", "a"], ["y"], name="crop")], sl, out_shape=(1, 2, 3, 4))
    with pytest.raises(ModelError, match="Slice node 'crop'"):
        load_onnx(model)
    g = Graph("x", (3, 8, 8))
    with pytest.raises(ModelError, match="conv node 'c1'.*does not fit 3 input channels"):
        g.add(Node("conv", "c1", ["x"], "y", {"stride": (1, 1)}, {"weight": np.zeros((4, 2, 3, 3))}))
    with pytest.raises(ModelError, match="input 'nope' is not produced"):
        g.add(Node("relu", "r", ["nope"], "z"))
    with pytest.raises(ModelError, match="linear node 'fc'.*flatten first"):
        g.add(Node("linear", "fc", ["x"], "z", {}, {"weight": np.zeros((10, 192))}))


def test_batchnorm_folding_and_pooling_match_the_unfolded_graph():
    rng = np.random.default_rng(1)
    g = Graph("x", (2, 6, 6))
    g.add(Node("conv", "c", ["x"], "c:o", {"stride": (1, 1), "pads": (1, 1, 1, 1)}, {"weight": rng.normal(size=(3, 2, 3, 3)), "bias": rng.normal(size=3)}))
    g.add(Node("batchnorm", "bn", ["c:o"], "bn:o", {"eps": 1e-5}, {"scale": rng.normal(size=3), "bias": rng.normal(size=3), "mean": rng.normal(size=3), "var": rng.uniform(0.5, 2, size=3)}))
    g.add(Node("maxpool", "mp", ["bn:o"], "mp:o", {"kernel": (2, 2)}))
    g.add(Node("avgpool", "ap", ["mp:o"], "ap:o", {"kernel": (3, 3)}))
    g.add(Node("flatten", "f", ["ap:o"], "f:o"))
    x = rng.normal(size=(4, 2, 6, 6))
    folded = simplify(g)
    assert [n.op for n in folded.nodes] == ["conv", "maxpool", "avgpool", "flatten"]
    np.testing.assert_allclose(run_float(folded, x), run_float(g, x), rtol=1e-12, atol=1e-12)


def test_max_pooling_moves_before_the_relu_that_feeds_it_alone():
    rng = np.random.default_rng(2)
    g = Graph("x", (2, 7, 7))
    g.add(Node("conv", "c", ["x"], "c:o", {"stride": (1, 1), "pads": (1, 1, 1, 1)}, {"weight": rng.normal(size=(3, 2, 3, 3)), "bias": rng.normal(size=3)}))
    g.add(Node("relu", "r", ["c:o"], "r:o"))
    g.add(Node("maxpool", "mp", ["r:o"], "mp:o", {"kernel": (3, 3), "stride": (2, 2), "pads": (1, 1, 1, 1)}))
    g.add(Node("relu", "r2", ["mp:o"], "r2:o"))  # read by the pool and the add: stays
    g.add(Node("maxpool", "mp2", ["r2:o"], "mp2:o", {"kernel": (1, 1)}))
    g.add(Node("add", "a", ["mp2:o", "r2:o"], "a:o"))
    x = rng.normal(size=(5, 2, 7, 7))
    out = simplify(g)
    assert [(n.op, n.name) for n in out.nodes] == [("conv", "c"), ("maxpool", "mp"), ("relu", "r"), ("relu", "r2"), ("maxpool", "mp2"), ("add", "a")]
    assert out.shapes()["r:o"] == (3, 4, 4) and out.output == g.output
    np.testing.assert_array_equal(run_float(out, x), run_float(g, x))


def test_relu_inputs_scaled_into_the_unit_interval_keep_the_function():
    from lycaon.frontend import relu_input_bound, scale_relu_inputs
    from lycaon.frontend.zoo import load_model

    g = simplify(load_model("resnet20-cifar10"))
    x = np.random.default_rng(3).normal(0, 1, (6, 3, 32, 32))
    bound = relu_input_bound(g, x)
    assert bound > 1.0
    scaled = scale_relu_inputs(g, bound)
    expected = run_float(g, x)
    np.testing.assert_allclose(run_float(scaled, x), expected, rtol=1e-10, atol=1e-10 * np.abs(expected).max())
    assert relu_input_bound(scaled, x) == pytest.approx(1.0, rel=1e-12)
    with pytest.raises(ModelError, match="positive number"):
        scale_relu_inputs(g, 0.0)
    with pytest.raises(ModelError, match="fold batch-norm first"):
        scale_relu_inputs(load_model("resnet20-cifar10"), bound)


@needs_data
def test_fixed_point_twin_agrees_with_the_float_model(reference):
    from lycaon.frontend.quantize import QuantConfig, quantize, run_integer

    sd, x, y = reference
    graph = simplify(resnet.resnet_cifar(sd))
    train = np.load(SHARED / "cifar10" / "train.npz")["x"][:128]
    q = quantize(graph, resnet.preprocess(train), QuantConfig(plaintext_bits=37))
    assert max(q.accumulator_bits.values()) < 37 - 1
    ints = run_integer(q, q.encode_input(x[:300]))
    assert ints.dtype == np.int64
    floats = run_float(graph, x[:300])
    assert (ints.argmax(1) == floats.argmax(1)).mean() >= 0.99
    assert np.abs(q.decode(ints) - floats).max() < 0.5


def test_integer_reference_is_exact_fixed_point_arithmetic():
    """On a tiny network the integer executor equals a hand computation: floor shifts, exact sums."""
    from lycaon.frontend.quantize import QuantConfig, QuantizedModel, run_integer

    g = Graph("x", (1, 2, 2))
    g.add(Node("conv", "c", ["x"], "c:o", {"stride": (1, 1)}, {"weight": np.ones((1, 1, 2, 2)), "bias": None}))
    g.add(Node("relu", "r", ["c:o"], "r:o"))
    g.add(Node("global_avgpool", "gap", ["r:o"], "gap:o"))
    g.add(Node("flatten", "f", ["gap:o"], "f:o"))
    g.add(Node("linear", "fc", ["f:o"], "y", {}, {"weight": np.array([[0.5], [-0.25]]), "bias": np.array([0.0, 1.0])}))
    q = QuantizedModel(g, fraction_bits=4, config=QuantConfig(plaintext_bits=20))
    q.layers = {"c": (np.full((1, 1, 2, 2), 3, dtype=np.int64), None, 1), "fc": (np.array([[2], [-1]]), np.array([0, 64]), 2)}
    q.pools = {"gap": (2**16, 16)}
    x = np.array([[[[5, -7], [2, 1]]]])
    # conv: 3 * (5 - 7 + 2 + 1) = 3, >> 1 = 1; relu 1; pool 1; fc: (2, -1 + 64) >> 2 = (0, 15).
    assert run_integer(q, x).tolist() == [[0, 15]]
    x2 = np.array([[[[-5, -7], [-2, -1]]]])
    # conv: 3 * -15 = -45, >> 1 = -23 (floor); relu 0; fc: (0, 64) >> 2 = (0, 16).
    assert run_integer(q, x2).tolist() == [[0, 16]]
    q.config = QuantConfig(plaintext_bits=6)
    with pytest.raises(OverflowError, match="fc"):
        run_integer(q, x)


def test_cli_inspect_and_errors(tmp_path):
    import subprocess
    import sys

    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"garbage" * 20)
    out = subprocess.run([sys.executable, "-m", "lycaon.cli", "inspect", str(bad)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "cannot read the ONNX model" in out.stderr and "Traceback" not in out.stderr
    if HAVE_DATA:
        out = subprocess.run([sys.executable, "-m", "lycaon.cli", "inspect", "resnet20-reference", "--json", str(tmp_path / "r.json")], capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[1])
        assert out.returncode == 0, out.stderr
        assert "40813184 multiply-accumulates" in out.stdout


def _lenet_or_skip():
    from lycaon.models import registry

    if "lenet5-mnist" not in registry():
        pytest.skip("lenet5-mnist weights are not shipped in this build (scripts/train_lenet5.py)")
    from lycaon.frontend import zoo

    return zoo.load_model("lenet5-mnist"), registry()["lenet5-mnist"]


def test_shipped_lenet5_accuracy_on_the_bundled_mnist_subset():
    from lycaon.data import mnist_test_subset
    from lycaon.frontend import lenet

    graph, entry = _lenet_or_skip()
    x, y = mnist_test_subset()
    accuracy = (run_float(graph, lenet.preprocess(x)).argmax(1) == y).mean()
    assert entry["accuracy"] >= 0.99 and entry["test_images"] == 10000
    # The first 1,000 test images are a little easier than the rest; the registry holds the full set.
    assert accuracy >= entry["accuracy"] - 0.01, accuracy


def test_lenet5_fixed_point_twin_agrees_on_1000_mnist_images():
    from lycaon.data import mnist_test_subset
    from lycaon.frontend import lenet
    from lycaon.frontend.quantize import quantize, run_integer

    graph, _ = _lenet_or_skip()
    graph = simplify(graph)
    x, _ = mnist_test_subset()
    xf = lenet.preprocess(x)
    q = quantize(graph, xf[:200])
    floats = run_float(graph, xf).argmax(1)
    ints = run_integer(q, q.encode_input(xf)).argmax(1)
    assert (floats == ints).mean() >= 0.99


def test_models_command_lists_measured_accuracy(tmp_path):
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "lycaon.cli", "models", "--json", str(tmp_path / "m.json")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = json.loads((tmp_path / "m.json").read_text())
    assert all({"name", "dataset", "accuracy"} <= set(r) and 0 < r["accuracy"] <= 1 for r in rows)
    assert any(r["name"] == "resnet20-reference" and r["accuracy"] == 0.8103 for r in rows)


def test_pytorch_resnet20_exported_to_onnx_gives_the_same_ir():
    """PyTorch -> ONNX (torch.onnx's exporter, which writes the shortcut's padding as shape
    arithmetic) -> IR equals the IR built directly from the same state dict."""
    torch = pytest.importorskip("torch")
    import io

    ResNetCifar = pytest.importorskip("lycaon_benchmarks.torch_models", reason="lycaon-benchmarks is not installed (pip install -e benchmarks)").ResNetCifar

    torch.manual_seed(0)
    net = ResNetCifar(20).eval()
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    buf = io.BytesIO()
    torch.onnx.export(net, torch.randn(1, 3, 32, 32), buf, input_names=["image"], output_names=["logits"], dynamo=False, opset_version=17)
    imported = simplify(load_onnx(buf.getvalue()))
    sd = {k: v.detach().numpy().astype(np.float64) for k, v in net.state_dict().items() if not k.endswith("num_batches_tracked")}
    direct = simplify(resnet.resnet_cifar(sd))
    assert [(n.op, n.shape, n.attrs.get("stride")) for n in imported.nodes] == [(n.op, n.shape, n.attrs.get("stride")) for n in direct.nodes]
    for a, b in zip(imported.nodes, direct.nodes):
        for key, value in b.params.items():
            if value is not None:
                np.testing.assert_allclose(a.params[key], value, rtol=1e-5, atol=1e-6)
    x = np.random.default_rng(0).normal(size=(4, 3, 32, 32))
    want = net(torch.tensor(x, dtype=torch.float32)).detach().numpy()
    np.testing.assert_allclose(run_float(imported, x), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "name, params_m, macs_g",
    [
        # Published figures (weights of conv and fc layers; MACs of one 224x224 image).
        ("resnet50", 25.5, 4.09),
        # torchvision's 11,689,512 less batch-norm's 9,600; 1.81 GMACs.
        ("resnet18", 11.68, 1.814),
        ("vgg16", 138.36, 15.47),
        ("mobilenet_v1", 4.21, 0.569),
        ("mobilenet_v2", 3.47, 0.300),
        ("alexnet", 62.38, 1.135),
        ("squeezenet", 1.24, 0.78),
        # Conv and fc weights only: torchvision's 7,978,856 less batch-norm's 83,648; 2.83 GMACs.
        ("densenet121", 7.895, 2.834),
    ],
)
def test_layer_shapes_of_the_studied_networks(name, params_m, macs_g):
    from lycaon.frontend.architectures import ARCHITECTURES

    rows = ARCHITECTURES[name]().summary()
    assert sum(r["params"] for r in rows) / 1e6 == pytest.approx(params_m, rel=0.01)
    assert sum(r["macs"] for r in rows) / 1e9 == pytest.approx(macs_g, rel=0.01)
    assert rows[-1]["shape"] == (1000,)


def test_resnet18_for_the_fhe_mode_has_quadratics_and_average_pooling():
    """002's ResNet-18: every ReLU a per-channel quadratic, the stem's max pooling a 3 x 3
    average pooling; random weights fill the quadratics near ReLU's fit and the float run is
    finite at 224 x 224."""
    from lycaon.frontend.architectures import resnet18
    from lycaon.frontend.random_weights import with_random_weights

    relu, quad = resnet18(), resnet18("quadratic")
    assert [n.op for n in quad.nodes].count("poly") == [n.op for n in relu.nodes].count("relu") == 17
    assert [n.op for n in quad.nodes if n.op in ("avgpool", "maxpool")] == ["avgpool"] and [n.op for n in relu.nodes if n.op in ("avgpool", "maxpool")] == ["maxpool"]
    g = with_random_weights(quad, seed=3)
    for n in g.nodes:
        if n.op == "poly":
            c = np.asarray(n.params["coefficients"])
            assert c.shape == (g.shapes()[n.output][0], 3) and (0.05 <= c[:, 2]).all() and (c[:, 2] <= 0.15).all()
    y = run_float(g, np.random.default_rng(0).standard_normal((1, 3, 224, 224)))
    assert y.shape == (1, 1000) and np.isfinite(y).all()
    with pytest.raises(ValueError, match="activation"):
        resnet18("gelu")


def test_concat_runs_in_both_executors():
    from lycaon.frontend.quantize import QuantConfig, quantize, run_integer

    g = Graph("x", (2, 4, 4))
    g.add(Node("conv", "a", ["x"], "a", {"stride": (1, 1)}, {"weight": np.ones((3, 2, 1, 1)), "bias": None}))
    g.add(Node("conv", "b", ["x"], "b", {"stride": (1, 1), "pads": (1, 1, 1, 1)}, {"weight": np.ones((1, 2, 3, 3)) / 9, "bias": None}))
    g.add(Node("concat", "cat", ["a", "b"], "cat"))
    assert g.shapes()["cat"] == (4, 4, 4)
    x = np.random.default_rng(2).normal(size=(3, 2, 4, 4))
    out = run_float(g, x)
    assert out.shape == (3, 4, 4, 4)
    q = quantize(g, x, QuantConfig(plaintext_bits=30))
    np.testing.assert_allclose(q.decode(run_integer(q, q.encode_input(x))), out, atol=0.01)
    g2 = Graph("x", (2, 4, 4))
    g2.add(Node("maxpool", "p", ["x"], "p", {"kernel": (2, 2)}))
    with pytest.raises(ModelError, match="one spatial size"):
        g2.add(Node("concat", "bad", ["x", "p"], "bad"))


def test_fhe_demo_runs_or_names_the_missing_data(tmp_path):
    import json
    import subprocess
    import sys

    from lycaon.frontend.zoo import data_dir

    path = tmp_path / "demo.json"
    out = subprocess.run([sys.executable, "-m", "lycaon.cli", "demo", "--mode", "fhe", "--images", "1", "--json", str(path)], capture_output=True, text=True, timeout=600)
    try:
        have_cifar = (data_dir() / "cifar10" / "test.npz").is_file()
    except Exception:  # noqa: BLE001  no data folder at all
        have_cifar = False
    if have_cifar:
        assert out.returncode == 0, out.stderr
        summary = json.loads(path.read_text())
        assert summary["mode"] == "fhe" and summary["fhe"]["top1_agreement_float"] == 1.0 and summary["fhe"]["min_bits"] > 12
    else:
        assert out.returncode != 0 and ("LYCAON_DATA" in out.stderr or "CIFAR-10" in out.stderr)


@pytest.mark.parametrize("name", ["squeezenet", "mobilenet_v2"])
def test_export_to_onnx_and_back_keeps_the_network(name):
    from lycaon.frontend import to_onnx
    from lycaon.frontend.architectures import ARCHITECTURES

    g = ARCHITECTURES[name]()
    back = load_onnx(to_onnx(g).SerializeToString())
    assert [(n.op, n.shape, n.attrs.get("groups", 1)) for n in back.nodes] == [(n.op, n.shape, n.attrs.get("groups", 1)) for n in g.nodes]


@needs_data
def test_shipped_resnet20_accuracy_matches_its_registry_entry(reference):
    from lycaon.models import load_weights, registry

    entry = registry().get("resnet20-cifar10")
    if entry is None:
        pytest.skip("resnet20-cifar10 weights are not shipped in this build (scripts/train_resnet20.py)")
    _, x, y = reference
    graph = simplify(resnet.resnet_cifar(load_weights("resnet20-cifar10"), 20))
    accuracy = (run_float(graph, x).argmax(1) == y).mean()
    # Every 10th test image against the full-set figure: within 3 points.
    assert abs(accuracy - entry["accuracy"]) < 0.03, (accuracy, entry["accuracy"])


def test_pytorch_imports_both_ways_give_the_same_ir():
    """torch.fx import and torch.onnx export + ONNX import of one ResNet-20 agree."""
    torch = pytest.importorskip("torch")
    import io

    from lycaon.frontend.torch_import import load_torch

    ResNetCifar = pytest.importorskip("lycaon_benchmarks.torch_models", reason="lycaon-benchmarks is not installed (pip install -e benchmarks)").ResNetCifar

    torch.manual_seed(1)
    net = ResNetCifar(20).eval()
    via_fx = simplify(load_torch(net, (3, 32, 32)))
    buf = io.BytesIO()
    torch.onnx.export(net, torch.randn(1, 3, 32, 32), buf, input_names=["image"], output_names=["logits"], dynamo=False, opset_version=17)
    via_onnx = simplify(load_onnx(buf.getvalue()))
    assert [(n.op, n.shape, n.attrs.get("stride")) for n in via_fx.nodes] == [(n.op, n.shape, n.attrs.get("stride")) for n in via_onnx.nodes]
    for a, b in zip(via_fx.nodes, via_onnx.nodes):
        for key, value in a.params.items():
            if value is not None:
                np.testing.assert_allclose(value, b.params[key], rtol=1e-5, atol=1e-6)
    x = np.random.default_rng(3).normal(size=(2, 3, 32, 32))
    np.testing.assert_allclose(run_float(via_fx, x), net(torch.tensor(x, dtype=torch.float32)).detach().numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(ModelError, match="unsupported"):
        load_torch(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.GELU()), (3, 8, 8))


# ---------------------------------------------------------------- clip (ReLU6), DenseNet-121, shapes


def _ort_session(model_bytes):
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    options.log_severity_level = 3  # opset 6 models run with a warning
    return ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])


def _clip_model(opset: int, rng, clip_attrs=None, clip_inputs=None, relu_clip=True):
    """x (N, 2, 6, 6) -> conv 3x3 -> Clip(0, 1.5) -> max-pool 2x2 -> conv 3x3 [-> Clip(0, no max)]:
    bounds as constant inputs (opset >= 11) or as attributes (older opsets)."""
    w1, b1 = rng.normal(size=(4, 2, 3, 3)), rng.normal(size=4)
    w2, b2 = rng.normal(size=(3, 4, 3, 3)) * 0.5, rng.normal(size=3)
    inits = {"w1": w1, "b1": b1, "w2": w2, "b2": b2}
    if opset >= 11:
        inits.update(lo=np.float32(0.0), hi=np.float32(1.5))
        clip = helper.make_node("Clip", clip_inputs or ["c1", "lo", "hi"], ["r1"], name="six")
        relu = helper.make_node("Clip", ["c2", "lo"], ["y"], name="plain")
    else:
        clip = helper.make_node("Clip", ["c1"], ["r1"], name="six", **(clip_attrs or {"min": 0.0, "max": 1.5}))
        relu = helper.make_node("Clip", ["c2"], ["y"], name="plain", min=0.0)  # max defaults to FLT_MAX
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        clip,
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2" if relu_clip else "y"], name="conv2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    ] + ([relu] if relu_clip else [])
    graph = helper.make_graph(
        nodes, "clip",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 3, 3])],
        [numpy_helper.from_array(np.asarray(v, dtype=np.float32), k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    return model.SerializeToString()


@pytest.mark.parametrize("opset", [13, 6])
def test_clip_import_matches_onnxruntime(opset):
    rng = np.random.default_rng(40 + opset)
    model = _clip_model(opset, rng)
    g = load_onnx(model)
    assert [n.op for n in g.nodes] == ["conv", "clip", "maxpool", "conv", "relu"]
    assert g.nodes[1].attrs == {"min": 0.0, "max": 1.5}
    x = rng.normal(size=(8, 2, 6, 6)).astype(np.float32)
    theirs = _ort_session(model).run(None, {"x": x})[0]
    ours = run_float(g, x)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
    # The clip bites: some values sit at the bound, and the simplified graph (pool before clip) agrees.
    assert np.any(run_float(_graph_until(g, "r1"), x) == 1.5)
    out = simplify(g)
    assert [n.op for n in out.nodes] == ["conv", "maxpool", "clip", "conv", "relu"]
    np.testing.assert_allclose(run_float(out, x), ours, rtol=1e-12, atol=1e-12)


def _graph_until(g, tensor):
    """The graph cut after the node writing `tensor`."""
    cut = Graph(g.input_name, g.input_shape, name=g.name)
    for n in g.nodes:
        cut.add(Node(n.op, n.name, list(n.inputs), n.output, dict(n.attrs), dict(n.params)))
        if n.output == tensor:
            break
    return cut


@pytest.mark.parametrize(
    "opset, kwargs, message",
    [
        (13, {"clip_inputs": ["c1", "", "hi"]}, r"Clip node 'six': clipping without a lower bound of 0 is not supported"),
        (13, {"clip_inputs": ["c1", "hi", "hi"]}, r"Clip node 'six': clipping from 1.5 is not supported"),
        (13, {"clip_inputs": ["c1", "lo", "lo"]}, r"Clip node 'six': clip\(x, 0, 0\) needs an upper bound above 0"),
        (13, {"clip_inputs": ["c1", "lo", "x"]}, r"Clip node 'six': its max must be a constant"),
        (6, {"clip_attrs": {"max": 6.0}}, r"Clip node 'six': clipping without a lower bound of 0"),
        (6, {"clip_attrs": {"min": -1.0, "max": 1.0}}, r"Clip node 'six': clipping from -1 is not supported"),
    ],
)
def test_clip_refusals_name_the_node_and_the_reason(opset, kwargs, message):
    model = _clip_model(opset, np.random.default_rng(0), relu_clip=False, **kwargs)
    with pytest.raises(ModelError, match=message):
        load_onnx(model)


def test_clip_nodes_are_validated_and_exported():
    from lycaon.frontend import to_onnx

    g = Graph("x", (2, 4, 4))
    for attrs, why in (({"min": -1.0, "max": 6.0}, "min=-1.0"), ({"min": 0.0}, "max=None"), ({"min": 0.0, "max": float("inf")}, "max=inf")):
        with pytest.raises(ModelError, match=rf"clip node 'bad': attrs must be .*{why}"):
            g.add(Node("clip", "bad", ["x"], "bad", attrs))
    rng = np.random.default_rng(5)
    g.add(Node("conv", "c", ["x"], "c", {"stride": (1, 1), "pads": (1, 1, 1, 1)}, {"weight": rng.normal(size=(3, 2, 3, 3)), "bias": rng.normal(size=3)}))
    g.add(Node("clip", "r6", ["c"], "r6", {"min": 0.0, "max": 0.75}))
    model = to_onnx(g).SerializeToString()
    back = load_onnx(model)
    assert [(n.op, n.attrs.get("max")) for n in back.nodes] == [("conv", None), ("clip", 0.75)]
    x = rng.normal(size=(4, 2, 4, 4))
    np.testing.assert_allclose(_ort_session(model).run(None, {"x": x.astype(np.float32)})[0], run_float(g, x), rtol=1e-5, atol=1e-5)


def test_unsupported_operators_name_the_first_one_and_why():
    w = np.random.default_rng(6).normal(size=(2, 2, 1, 1))
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
        helper.make_node("Sigmoid", ["c"], ["s"], name="gate"),
        helper.make_node("Tanh", ["s"], ["y"], name="squash"),
    ]
    with pytest.raises(ModelError, match=r"^Sigmoid node 'gate': unsupported operator \(a non-linear activation other than ReLU or clip"):
        load_onnx(_tiny_model(nodes, {"w": w}))
    # A trailing Softmax is refused too (not dropped silently), with the way out.
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]), helper.make_node("Softmax", ["c"], ["y"], name="prob", axis=1)]
    with pytest.raises(ModelError, match=r"Softmax node 'prob': unsupported operator \(.*export the model without it"):
        load_onnx(_tiny_model(nodes, {"w": w}))
    # A product of two different activations (x * x is a polynomial activation: tests/test_polynomial_import.py).
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Mul", ["x", "r"], ["y"], name="gated")]
    with pytest.raises(ModelError, match=r"Mul node 'gated': the product of two different activations \('x' and 'r'\) is not supported"):
        load_onnx(_tiny_model(nodes, {}))
    # An unnamed node gets its op type and position as its name.
    with pytest.raises(ModelError, match=r"HardSwish node 'hardswish_0': unsupported operator"):
        load_onnx(_tiny_model([helper.make_node("HardSwish", ["x"], ["y"])], {}))


def test_relu6_integer_twin_agrees_with_the_float_model():
    """A small CNN with ReLU6 activations (and a ReLU): the fixed-point twin clips at
    round(6 2^f) and its top-1 agrees with the float model's on random inputs."""
    from lycaon.frontend.quantize import QuantConfig, quantize, run_integer

    rng = np.random.default_rng(7)
    g = Graph("x", (3, 8, 8))
    g.add(Node("conv", "c1", ["x"], "c1", {"stride": (1, 1), "pads": (1, 1, 1, 1)}, {"weight": rng.normal(size=(8, 3, 3, 3)), "bias": rng.normal(size=8)}))
    g.add(Node("clip", "r1", ["c1"], "r1", {"min": 0.0, "max": 6.0}))
    g.add(Node("maxpool", "p1", ["r1"], "p1", {"kernel": (2, 2), "stride": (2, 2)}))
    g.add(Node("conv", "c2", ["p1"], "c2", {"stride": (1, 1), "pads": (1, 1, 1, 1)}, {"weight": rng.normal(size=(8, 8, 3, 3)) * 0.4, "bias": rng.normal(size=8)}))
    g.add(Node("clip", "r2", ["c2"], "r2", {"min": 0.0, "max": 6.0}))
    g.add(Node("conv", "c3", ["r2"], "c3", {"stride": (2, 2)}, {"weight": rng.normal(size=(8, 8, 1, 1)) * 0.4, "bias": None}))
    g.add(Node("relu", "r3", ["c3"], "r3"))
    g.add(Node("global_avgpool", "gap", ["r3"], "gap"))
    g.add(Node("flatten", "f", ["gap"], "f"))
    g.add(Node("linear", "fc", ["f"], "y", {}, {"weight": rng.normal(size=(10, 8)), "bias": rng.normal(size=10) * 0.1}))
    g = simplify(g)
    x = rng.normal(size=(300, 3, 8, 8)) * 2
    q = quantize(g, x[:32], QuantConfig(plaintext_bits=30))
    clip = next(n for n in q.graph.nodes if n.name == "r1")
    assert q.clip_limit(clip) == round(6.0 * 2**q.fraction_bits)
    # The clip bites in both models (simplify moved the pool before it: it writes 'p1' now).
    assert clip.output == "p1"
    floats_r1 = run_float(_graph_until(q.graph, clip.output), x[:16])
    ints_r1 = run_integer(_quantized_until(q, clip.output), q.encode_input(x[:16]))
    assert np.any(floats_r1 == 6.0) and ints_r1.max() == q.clip_limit(clip) and ints_r1.min() == 0
    floats = run_float(q.graph, x)
    ints = run_integer(q, q.encode_input(x))
    assert (ints.argmax(1) == floats.argmax(1)).mean() >= 0.95
    assert np.abs(q.decode(ints) - floats).max() < 0.05 * np.abs(floats).max()


def _quantized_until(q, tensor):
    """`q` cut after the node writing `tensor`."""
    from lycaon.frontend.quantize import QuantizedModel

    return QuantizedModel(_graph_until(q.graph, tensor), q.fraction_bits, q.config, q.layers, q.pools, q.accumulator_bits)


def test_clip_under_a_replaced_relu_and_scaled_inputs():
    """With `relu` replaced (the FHE mode's approximation), clip(x, 0, M) = relu(x) - relu(x - M);
    scaling the ReLU inputs divides the clip's bound too, keeping the function."""
    from lycaon.frontend import relu_input_bound, scale_relu_inputs

    rng = np.random.default_rng(8)
    g = Graph("x", (2, 6, 6))
    g.add(Node("conv", "c", ["x"], "c", {"stride": (1, 1), "pads": (1, 1, 1, 1)}, {"weight": rng.normal(size=(3, 2, 3, 3)), "bias": rng.normal(size=3)}))
    g.add(Node("clip", "r6", ["c"], "r6", {"min": 0.0, "max": 1.0}))
    g.add(Node("global_avgpool", "gap", ["r6"], "gap"))
    g.add(Node("flatten", "f", ["gap"], "f"))
    g.add(Node("linear", "fc", ["f"], "y", {}, {"weight": rng.normal(size=(4, 3)), "bias": rng.normal(size=4)}))
    x = rng.normal(size=(6, 2, 6, 6))
    expected = run_float(g, x)
    np.testing.assert_allclose(run_float(g, x, relu=lambda v: np.maximum(v, 0)), expected, rtol=1e-12, atol=1e-12)
    bound = relu_input_bound(g, x)
    scaled = scale_relu_inputs(g, bound)
    assert scaled.nodes[1].attrs["max"] == pytest.approx(1.0 / bound) and g.nodes[1].attrs["max"] == 1.0
    np.testing.assert_allclose(run_float(scaled, x), expected, rtol=1e-10, atol=1e-10)
    assert relu_input_bound(scaled, x) == pytest.approx(1.0, rel=1e-12)


def test_mobilenet_v2_uses_relu6_and_densenet121_has_its_shapes():
    from lycaon.frontend.architectures import ARCHITECTURES
    from lycaon.frontend.zoo import load_model

    mv2 = ARCHITECTURES["mobilenet_v2"]()
    ops = [n.op for n in mv2.nodes]
    # Stem, 17 blocks (16 with an expansion) x 2 ReLU6, the last 1x1 conv; no plain ReLU.
    assert ops.count("clip") == 1 + 16 * 2 + 1 + 1 and "relu" not in ops
    assert {n.attrs["max"] for n in mv2.nodes if n.op == "clip"} == {6.0}
    d = load_model("densenet121")
    assert d.name == "densenet121" and d.input_shape == (3, 224, 224)
    shapes = d.shapes()
    concats = [shapes[n.output] for n in d.nodes if n.op == "concat"]
    assert len(concats) == 6 + 12 + 24 + 16
    # The end of each dense block (channels 64 + 6 x 32, 128 + 12 x 32, ...) and the transitions.
    assert [concats[i] for i in (5, 17, 41, 57)] == [(256, 56, 56), (512, 28, 28), (1024, 14, 14), (1024, 7, 7)]
    assert [shapes[n.output] for n in d.nodes if n.op == "avgpool"] == [(128, 28, 28), (256, 14, 14), (512, 7, 7)]
    assert [n.op for n in d.nodes].count("relu") == 120 and d.shapes()[d.output] == (1000,)
    convs = [n for n in d.nodes if n.op == "conv"]
    assert len(convs) == 120 and sum(n.op == "linear" for n in d.nodes) == 1  # 121 weight layers
    # Every layer takes the planner's shape.
    from lycaon.plan import linear_layers

    assert len(linear_layers(simplify(d))) == 121


def test_layer_shape_takes_rectangular_inputs():
    from lycaon.plan import layer_shape

    conv = Node("conv", "c", ["x"], "c", {"stride": (2, 2), "pads": (1, 1, 1, 1), "groups": 1}, {"weight": np.zeros((4, 3, 3, 3)), "bias": None})
    assert layer_shape(conv, (3, 24, 40)) == {"h": 24, "w": 40, "c_in": 3, "c_out": 4, "k": 3, "stride": 2, "pad": 1, "groups": 1}
    g = Graph("x", (3, 24, 40))
    g.add(conv)
    assert g.shapes()["c"] == (4, 12, 20)
    cases = [
        (Node("conv", "k", ["x"], "k", {"stride": (1, 1)}, {"weight": np.zeros((4, 3, 3, 1))}), r"kernel 3x1"),
        (Node("conv", "s", ["x"], "s", {"stride": (1, 2)}, {"weight": np.zeros((4, 3, 3, 3))}), r"stride \(1, 2\)"),
        (Node("conv", "p", ["x"], "p", {"stride": (1, 1), "pads": (1, 0, 1, 0)}, {"weight": np.zeros((4, 3, 3, 3))}), r"pads \(1, 0, 1, 0\)"),
    ]
    for node, message in cases:
        with pytest.raises(ModelError, match=rf"conv node '{node.name}': the planner takes square kernels, equal strides and symmetric padding \(input 24x40, .*{message}"):
            layer_shape(node, (3, 24, 40))


def test_pytorch_relu6_hardtanh_and_clamp_import_as_clip():
    torch = pytest.importorskip("torch")
    from collections import OrderedDict

    from lycaon.frontend.torch_import import load_torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = torch.nn.Conv2d(2, 4, 3, padding=1)
            self.act = torch.nn.ReLU6()
            self.c2 = torch.nn.Conv2d(4, 4, 3, padding=1)
            self.tanh = torch.nn.Hardtanh(0.0, 2.0)

        def forward(self, x):
            x = self.act(self.c1(x))
            x = torch.nn.functional.relu6(self.c2(x))
            x = self.tanh(x)
            x = torch.clamp(x, 0, 1.5)
            return x.clamp(min=0.0)

    torch.manual_seed(0)
    net = Net().eval()
    g = load_torch(net, (2, 6, 6))
    assert [(n.op, n.attrs.get("max")) for n in g.nodes] == [("conv", None), ("clip", 6.0), ("conv", None), ("clip", 6.0), ("clip", 2.0), ("clip", 1.5), ("relu", None)]
    x = np.random.default_rng(9).normal(size=(3, 2, 6, 6)) * 4
    np.testing.assert_allclose(run_float(g, x), net(torch.tensor(x, dtype=torch.float32)).detach().numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ModelError, match=r"Hardtanh 'h': clipping from -1 is not supported"):
        load_torch(torch.nn.Sequential(OrderedDict(c=torch.nn.Conv2d(2, 2, 1), h=torch.nn.Hardtanh())), (2, 4, 4))
