"""Polynomial activations from ONNX and PyTorch: chains of Mul, Pow, Add, Sub, Div and Neg on one
activation (scalar or per-channel constants) import as one `poly` node whose float forward equals
onnxruntime's (or torch's); what is not a polynomial of one activation of degree <= 2 is refused
with the node and the reason; the hybrid mode refuses a poly node and points to the FHE mode; a
tiny ONNX CNN with an x*x activation runs encrypted in the FHE mode."""

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from lycaon.frontend import ModelError, load_onnx, run_float  # noqa: E402

C = 3


def _model(nodes, inits, in_shape=(2, 5, 5), out_shape=(C, 5, 5), dtypes=None) -> bytes:
    dtypes = dtypes or {}
    graph = helper.make_graph(
        nodes, "poly",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *in_shape])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", *out_shape])],
        [numpy_helper.from_array(np.asarray(v, dtype=dtypes.get(k, np.float32)), k) for k, v in inits.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _conv(rng, out="h", name="conv", src="x", c_in=2):
    """A 3x3 convolution (padding 1) to C channels and its weights."""
    node = helper.make_node("Conv", [src, f"{name}.w", f"{name}.b"], [out], name=name, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    return node, {f"{name}.w": rng.normal(0, 0.5, (C, c_in, 3, 3)), f"{name}.b": rng.normal(0, 0.5, C)}


def _matches_onnxruntime(model: bytes, rng, in_shape=(2, 5, 5)):
    """The imported graph, after checking its float forward against onnxruntime's on random inputs."""
    ort = pytest.importorskip("onnxruntime")
    g = load_onnx(model)
    x = rng.normal(size=(6, *in_shape)).astype(np.float32)
    theirs = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    ours = run_float(g, x)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4 * np.abs(theirs).max())
    return g


def _polys(g):
    return [n for n in g.nodes if n.op == "poly"]


def test_conv_then_x_times_x_is_one_square_node():
    rng = np.random.default_rng(1)
    conv, w = _conv(rng)
    g = _matches_onnxruntime(_model([conv, helper.make_node("Mul", ["h", "h"], ["y"], name="square")], w), rng)
    assert [n.op for n in g.nodes] == ["conv", "poly"]
    (p,) = _polys(g)
    assert p.name == "square" and p.inputs == ["h"] and g.output == "y"
    np.testing.assert_array_equal(p.params["coefficients"], [0.0, 0.0, 1.0])


@pytest.mark.parametrize("per_channel", [True, False])
def test_quadratic_with_per_channel_or_scalar_constants(per_channel):
    """0.5 x*x + 0.25 x + 1 (per channel: a, b, c drawn per channel, shapes (C,1,1) and (1,C,1,1)),
    then a second convolution reads it: one poly node, named after the Add that completes it."""
    rng = np.random.default_rng(2)
    conv, w = _conv(rng)
    conv2, w2 = _conv(rng, "y", "conv2", "act", c_in=C)
    if per_channel:
        a, b, c = rng.normal(size=(C, 1, 1)), rng.normal(size=(1, C, 1, 1)), rng.normal(size=(C, 1, 1))
    else:
        a, b, c = np.float32(0.5), np.float32(0.25), np.float32(1.0)
    nodes = [
        conv,
        helper.make_node("Mul", ["h", "h"], ["h2"], name="sq"),
        helper.make_node("Mul", ["a", "h2"], ["ah2"], name="scale2"),
        helper.make_node("Mul", ["h", "b"], ["bh"], name="scale1"),
        helper.make_node("Add", ["ah2", "bh"], ["s"], name="sum"),
        helper.make_node("Add", ["s", "c"], ["act"], name="act"),
        conv2,
    ]
    g = _matches_onnxruntime(_model(nodes, {**w, **w2, "a": a, "b": b, "c": c}), rng)
    assert [n.op for n in g.nodes] == ["conv", "poly", "conv"]
    (p,) = _polys(g)
    assert p.name == "act" and p.inputs == ["h"] and g.nodes[2].inputs == ["act"]
    want = np.stack([np.ravel(c), np.ravel(b), np.ravel(a)], axis=-1).astype(np.float32)
    if not per_channel:
        want = want.reshape(3)  # one polynomial for every value: 1-D coefficients
    np.testing.assert_allclose(p.params["coefficients"], want, rtol=1e-7)


@pytest.mark.parametrize("exponent, dtype", [(2.0, np.float32), (2, np.int64)])
def test_pow_two_is_a_square_and_pow_one_needs_no_node(exponent, dtype):
    rng = np.random.default_rng(3)
    conv, w = _conv(rng)
    nodes = [conv, helper.make_node("Pow", ["h", "e"], ["y"], name="pow")]
    g = _matches_onnxruntime(_model(nodes, {**w, "e": exponent}, dtypes={"e": dtype}), rng)
    assert [(n.op, n.name) for n in g.nodes] == [("conv", "conv"), ("poly", "pow")]
    np.testing.assert_array_equal(g.nodes[1].params["coefficients"], [0.0, 0.0, 1.0])
    # x^1 is x: the ReLU reads the convolution directly.
    nodes = [conv, helper.make_node("Pow", ["h", "e"], ["p"], name="pow"), helper.make_node("Relu", ["p"], ["y"], name="relu")]
    g = _matches_onnxruntime(_model(nodes, {**w, "e": np.float32(1.0)}), rng)
    assert [n.op for n in g.nodes] == ["conv", "relu"] and g.nodes[1].inputs == ["h"]


def test_sub_div_neg_chain_then_square():
    """((k - (-(x - m) / s)) ^ 2 with per-channel m and scalar s, k: a chain of constants and a square."""
    rng = np.random.default_rng(4)
    conv, w = _conv(rng)
    nodes = [
        conv,
        helper.make_node("Sub", ["h", "m"], ["centred"], name="centre"),
        helper.make_node("Div", ["centred", "s"], ["scaled"], name="scale"),
        helper.make_node("Neg", ["scaled"], ["negated"], name="negate"),
        helper.make_node("Sub", ["k", "negated"], ["shifted"], name="shift"),
        helper.make_node("Mul", ["shifted", "shifted"], ["y"], name="square"),
    ]
    m, s, k = rng.normal(size=(1, C, 1, 1)), np.float32(1.7), np.float32(0.3)
    g = _matches_onnxruntime(_model(nodes, {**w, "m": m, "s": s, "k": k}), rng)
    assert [n.op for n in g.nodes] == ["conv", "poly"]
    coeffs = _polys(g)[0].params["coefficients"]
    assert coeffs.shape == (C, 3)
    # (k + (x - m)/s)^2: leading coefficient 1/s^2 in every channel, constant term per channel.
    np.testing.assert_allclose(coeffs[:, 2], 1 / 1.7**2, rtol=1e-6)
    np.testing.assert_allclose(coeffs[:, 0], (0.3 - m.ravel().astype(np.float32) / 1.7) ** 2, rtol=1e-5)


def test_per_feature_constants_on_a_flat_activation():
    rng = np.random.default_rng(5)
    F = 7
    nodes = [
        helper.make_node("Flatten", ["x"], ["f"], name="flat", axis=1),
        helper.make_node("Gemm", ["f", "w", "b"], ["h"], name="fc", transB=1),
        helper.make_node("Mul", ["h", "a"], ["ah"], name="scale"),
        helper.make_node("Mul", ["ah", "h"], ["ah2"], name="sq"),
        helper.make_node("Add", ["ah2", "c"], ["y"], name="act"),
    ]
    inits = {"w": rng.normal(size=(F, 50)), "b": rng.normal(size=F), "a": rng.normal(size=F), "c": rng.normal(size=(1, F))}
    g = _matches_onnxruntime(_model(nodes, inits, out_shape=(F,)), rng)
    assert [n.op for n in g.nodes] == ["flatten", "linear", "poly"]
    np.testing.assert_allclose(_polys(g)[0].params["coefficients"][:, 2], inits["a"].astype(np.float32))


def test_residual_additions_and_matmul_biases_keep_their_meaning():
    rng = np.random.default_rng(6)
    conv, w = _conv(rng)
    conv2, w2 = _conv(rng, "k", "conv2", "h", c_in=C)
    nodes = [
        conv, conv2,
        helper.make_node("Mul", ["h", "h"], ["p"], name="sq"),
        helper.make_node("Add", ["p", "h"], ["q"], name="plus_x"),  # x^2 + x: still a polynomial of h
        helper.make_node("Add", ["q", "k"], ["y"], name="residual"),  # of two activations: an add node
    ]
    g = _matches_onnxruntime(_model(nodes, {**w, **w2}), rng)
    assert [(n.op, n.name) for n in g.nodes] == [("conv", "conv"), ("conv", "conv2"), ("poly", "plus_x"), ("add", "residual")]
    np.testing.assert_array_equal(g.nodes[2].params["coefficients"], [0.0, 1.0, 1.0])
    # MatMul + Add(constant): the constant is the linear layer's bias, as before.
    F = 4
    nodes = [
        helper.make_node("Flatten", ["x"], ["f"], name="flat", axis=1),
        helper.make_node("MatMul", ["f", "w"], ["m"], name="fc"),
        helper.make_node("Add", ["m", "b"], ["h"], name="bias"),
        helper.make_node("Mul", ["h", "h"], ["y"], name="sq"),
    ]
    inits = {"w": rng.normal(size=(50, F)), "b": rng.normal(size=F)}
    g = _matches_onnxruntime(_model(nodes, inits, out_shape=(F,)), rng)
    assert [n.op for n in g.nodes] == ["flatten", "linear", "poly"]
    np.testing.assert_allclose(g.nodes[1].params["bias"], inits["b"].astype(np.float32))
    # Read by something else too, the product keeps no bias: the Add is a polynomial of it.
    nodes[3] = helper.make_node("Add", ["h", "m"], ["y"], name="twice")
    g = _matches_onnxruntime(_model(nodes, inits, out_shape=(F,)), rng)
    assert [n.op for n in g.nodes] == ["flatten", "linear", "poly"] and g.nodes[1].params["bias"] is None


def test_shape_arithmetic_still_folds_around_a_pending_polynomial():
    """Flatten as exported by torch (Shape, Gather, Unsqueeze, Concat, Reshape) after x*x, and a
    coefficient computed from constants (Mul of two initializers): folded, one poly node."""
    rng = np.random.default_rng(7)
    conv, w = _conv(rng)
    n_out = 4
    nodes = [
        conv,
        helper.make_node("Mul", ["half", "two"], ["one"], name="const_product"),
        helper.make_node("Mul", ["h", "h"], ["h2"], name="sq"),
        helper.make_node("Mul", ["h2", "one"], ["p"], name="unit"),
        helper.make_node("Shape", ["p"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], name="gather", axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["batch1"], name="unsqueeze"),
        helper.make_node("Concat", ["batch1", "minus_one"], ["target"], name="concat", axis=0),
        helper.make_node("Reshape", ["p", "target"], ["f"], name="reshape"),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="fc", transB=1),
    ]
    inits = {**w, "half": np.float32(0.5), "two": np.float32(2.0), "zero": np.int64(0), "axes": np.array([0]), "minus_one": np.array([-1]),
             "fw": rng.normal(size=(n_out, C * 25)), "fb": rng.normal(size=n_out)}
    model = _model(nodes, inits, out_shape=(n_out,), dtypes={"zero": np.int64, "axes": np.int64, "minus_one": np.int64})
    g = _matches_onnxruntime(model, rng)
    assert [(n.op, n.name) for n in g.nodes] == [("conv", "conv"), ("poly", "unit"), ("flatten", "reshape"), ("linear", "fc")]


def _refusal_cases():
    """(nodes after conv 'h' (and conv2 'k'), extra initializers, message)."""
    return [
        ([helper.make_node("Mul", ["h", "h"], ["h2"], name="sq"), helper.make_node("Mul", ["h2", "h"], ["y"], name="cube")], {},
         r"^Mul node 'cube': the polynomial would have degree 3; the FHE mode evaluates polynomial activations up to degree 2"),
        ([helper.make_node("Pow", ["h", "three"], ["y"], name="pow3")], {"three": np.float32(3)},
         r"^Pow node 'pow3': the polynomial would have degree 3; the FHE mode evaluates .* up to degree 2"),
        ([helper.make_node("Mul", ["h", "k"], ["y"], name="xy")], {},
         r"^Mul node 'xy': the product of two different activations \('h' and 'k'\) is not supported"),
        ([helper.make_node("Div", ["h", "k"], ["y"], name="ratio")], {},
         r"^Div node 'ratio': dividing by an activation \('k'\) is not a polynomial; only division by a constant is supported"),
        ([helper.make_node("Div", ["one", "h"], ["y"], name="inverse")], {"one": np.float32(1)},
         r"^Div node 'inverse': dividing by an activation \('h'\)"),
        ([helper.make_node("Sub", ["h", "k"], ["y"], name="diff")], {},
         r"^Sub node 'diff': the difference of two different activations"),
        ([helper.make_node("Div", ["h", "zero"], ["y"], name="by_zero")], {"zero": np.zeros((C, 1, 1))}, r"^Div node 'by_zero': division by zero"),
        ([helper.make_node("Pow", ["h", "half"], ["y"], name="root")], {"half": np.float32(0.5)},
         r"^Pow node 'root': the exponent must be one non-negative integer"),
        ([helper.make_node("Pow", ["two", "h"], ["y"], name="exp")], {"two": np.float32(2)},
         r"^Pow node 'exp': a constant raised to the power of an activation is not a polynomial"),
        # Per position, not per channel.
        ([helper.make_node("Mul", ["h", "map"], ["y"], name="spatial")], {"map": np.ones((1, 1, 5, 5))},
         (r"^Mul node 'spatial': a constant of shape \(1, 1, 5, 5\) does not act per channel on the activation of shape \(N, 3, 5, 5\); "
          r"only a scalar or one value per channel, shape \(3, 1, 1\) or \(1, 3, 1, 1\)")),
        # A (C,) vector broadcasts along the width (5 here): refused with the reason.
        ([helper.make_node("Add", ["h", "vec"], ["y"], name="by_width")], {"vec": np.ones(5)},
         r"^Add node 'by_width': a constant of shape \(5,\) does not act per channel .*\(a vector aligns with the last axis, the width"),
        # One that would enlarge the activation (a batch of constants).
        ([helper.make_node("Mul", ["h", "batch"], ["y"], name="bigger")], {"batch": np.ones((2, C, 1, 1))},
         r"^Mul node 'bigger': a constant of shape \(2, 3, 1, 1\) does not act per channel"),
    ]


@pytest.mark.parametrize("tail, inits, message", _refusal_cases())
def test_what_is_not_a_quadratic_of_one_activation_is_refused(tail, inits, message):
    rng = np.random.default_rng(8)
    conv, w = _conv(rng)
    conv2, w2 = _conv(rng, "k", "conv2", "h", c_in=C)
    with pytest.raises(ModelError, match=message):
        load_onnx(_model([conv, conv2, *tail], {**w, **w2, **inits}))


# ---------------------------------------------------------------- the hybrid mode refuses them


def _square_cnn(rng, per_channel: bool = False) -> bytes:
    """x (1, 8, 8) -> conv 1->2 3x3 pad 1 -> x*x (or a x^2 + b x + c per channel) -> flatten ->
    fully connected (5 logits)."""
    inits = {"w": rng.normal(0, 0.3, (2, 1, 3, 3)), "b": rng.normal(0, 0.1, 2), "fw": rng.normal(0, 0.2, (5, 128)), "fb": rng.normal(0, 0.1, 5)}
    act = [helper.make_node("Mul", ["h", "h"], ["a"], name="square")]
    if per_channel:
        inits.update(qa=rng.uniform(0.5, 1.5, (2, 1, 1)), qb=rng.normal(0, 0.3, (2, 1, 1)), qc=rng.normal(0, 0.3, (2, 1, 1)))
        act = [
            helper.make_node("Mul", ["h", "h"], ["h2"], name="square"),
            helper.make_node("Mul", ["h2", "qa"], ["qa_h2"], name="qa_mul"),
            helper.make_node("Mul", ["h", "qb"], ["qb_h"], name="qb_mul"),
            helper.make_node("Add", ["qa_h2", "qb_h"], ["q1"], name="q_sum"),
            helper.make_node("Add", ["q1", "qc"], ["a"], name="quadratic"),
        ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["h"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        *act,
        helper.make_node("Flatten", ["a"], ["f"], name="flat", axis=1),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="fc", transB=1),
    ]
    return _model(nodes, inits, in_shape=(1, 8, 8), out_shape=(5,))


def test_the_hybrid_mode_names_the_poly_node_and_points_to_the_fhe_mode():
    import lycaon
    from lycaon import hybrid
    from lycaon.frontend.quantize import quantize

    rng = np.random.default_rng(9)
    g = load_onnx(_square_cnn(rng))
    x = rng.uniform(0, 1, (4, 1, 8, 8))
    message = r"^poly node 'square': a polynomial activation has no exact integer twin or two-party protocol, so the hybrid mode cannot run it; .*--mode fhe"
    with pytest.raises(ModelError, match=message):
        quantize(g, x)
    # Before the calibration data is asked for: the model could not use it.
    with pytest.raises(ModelError, match=message):
        hybrid.prepare(g)
    with pytest.raises(ModelError, match=message):
        lycaon.Server(g, calibration=x)


# ---------------------------------------------------------------- the FHE mode runs them


@pytest.mark.parametrize("per_channel", [False, True])
def test_an_onnx_cnn_with_a_square_activation_runs_encrypted(per_channel):
    from lycaon import _native, fhe

    rng = np.random.default_rng(10)
    model = _square_cnn(rng, per_channel)  # per channel: made monic, its factors moved into the fc layer
    g = _matches_onnxruntime(model, rng, in_shape=(1, 8, 8))
    assert [n.op for n in g.nodes] == ["conv", "poly", "flatten", "linear"]
    assert np.ndim(g.nodes[1].params["coefficients"]) == (2 if per_channel else 1)
    program, _ = fhe.compile_model(g)
    assert [op["kind"] for op in program["ops"] if op["kind"] == "quadratic"] == ["quadratic"]
    xs = rng.uniform(0, 1, (2, 1, 8, 8))
    session = _native.FheSession.local(json.dumps(program))
    try:
        got = np.array([json.loads(session.infer(np.ascontiguousarray(x.ravel(), dtype=np.float64)))["logits"] for x in xs])
    finally:
        session.close()
    want = run_float(g, xs)
    # CKKS at scale 2^36 keeps more than 12 bits of the logits' scale (tests/test_fhe.py's bar).
    assert np.abs(got - want).max() <= 2.0**-12 * np.abs(want).max(), (got, want)


# ---------------------------------------------------------------- PyTorch (torch.fx)


def test_pytorch_polynomial_activations_import_as_poly_nodes():
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch)")
    from lycaon.frontend.torch_import import load_torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = torch.nn.Conv2d(2, C, 3, padding=1)
            self.c2 = torch.nn.Conv2d(C, C, 3, padding=1)
            self.c3 = torch.nn.Conv2d(C, C, 3, padding=1)
            self.register_buffer("a", torch.rand(C, 1, 1) + 0.5)  # per-channel constants
            self.b = torch.nn.Parameter(torch.randn(C))
            self.fc = torch.nn.Linear(C * 25, 4)

        def forward(self, x):
            x = self.c1(x)
            x = x * x  # CryptoNets' square
            x = self.c2(x)
            x = self.a * x ** 2 + self.b.view(1, -1, 1, 1) * x + 0.5  # a trained per-channel quadratic (the view is folded)
            x = self.c3(x)
            x = (torch.square(x - 1.0) + torch.pow(x, 2) - x / 4.0) / 2  # scalar constants
            x = torch.flatten(-x, 1)
            return 2.0 * self.fc(x)

    torch.manual_seed(0)
    net = Net().eval()
    g = load_torch(net, (2, 5, 5))
    assert [n.op for n in g.nodes] == ["conv", "poly", "conv", "poly", "conv", "poly", "flatten", "linear", "poly"]
    polys = _polys(g)
    np.testing.assert_array_equal(polys[0].params["coefficients"], [0.0, 0.0, 1.0])
    coeffs = polys[1].params["coefficients"]
    assert coeffs.shape == (C, 3)
    np.testing.assert_allclose(coeffs[:, 2], net.a.numpy().ravel(), rtol=1e-6)
    np.testing.assert_allclose(coeffs[:, 1], net.b.detach().numpy().ravel(), rtol=1e-6)
    np.testing.assert_allclose(coeffs[:, 0], 0.5)
    # ((x - 1)^2 + x^2 - x/4) / 2 = x^2 - 1.125 x + 0.5, then negated by the flatten's input.
    np.testing.assert_allclose(polys[2].params["coefficients"], [-0.5, 1.125, -1.0])
    np.testing.assert_allclose(polys[3].params["coefficients"], [0.0, 2.0])
    x = np.random.default_rng(11).normal(size=(5, 2, 5, 5))
    want = net(torch.tensor(x, dtype=torch.float32)).detach().numpy()
    np.testing.assert_allclose(run_float(g, x), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    # torch.onnx's export of the same network (Pow, Mul, Add, Sub, Div, Neg nodes) imports alike.
    import io

    buf = io.BytesIO()
    torch.onnx.export(net, torch.randn(1, 2, 5, 5), buf, input_names=["image"], output_names=["logits"], dynamo=False, opset_version=17)
    via_onnx = load_onnx(buf.getvalue())
    assert [n.op for n in via_onnx.nodes] == [n.op for n in g.nodes]
    for a, b in zip(_polys(via_onnx), polys):
        np.testing.assert_allclose(a.params["coefficients"], b.params["coefficients"], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(run_float(via_onnx, x), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("body, message", [
    ("x * self.c2(x)", r"node 'mul' \(mul\): the product of two different activations"),
    ("x ** 3", r"node 'pow_1' \(pow\): the polynomial would have degree 3; the FHE mode evaluates .* up to degree 2"),
    ("x / self.c2(x)", r"node 'truediv' \(div\): dividing by an activation"),
    ("x * self.pos", r"node 'mul' \(mul\): a constant of shape \(1, 1, 5, 5\) does not act per channel"),
    ("torch.cat([x, self.pos], 1)", r"node 'pos': a parameter or buffer is read as an activation"),
])
def test_pytorch_refusals_name_the_node_and_the_reason(body, message):
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch)")
    from lycaon.frontend.torch_import import load_torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = torch.nn.Conv2d(2, C, 3, padding=1)
            self.c2 = torch.nn.Conv2d(C, C, 3, padding=1)
            self.register_buffer("pos", torch.ones(1, 1, 5, 5))

        def forward(self, x):
            x = self.c1(x)
            return eval(body, {"torch": torch}, {"self": self, "x": x})  # the test's own expressions

    with pytest.raises(ModelError, match=message):
        load_torch(Net(), (2, 5, 5))
