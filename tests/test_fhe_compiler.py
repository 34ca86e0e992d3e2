"""The FHE compiler in Rust (lycaon-runtime's fhe::compile, through `lycaon._native.fhe_compile`)
against the Python compilers it replaces, as oracles: for the bundled cnn-square, the test graphs
of test_fhe.py, and ResNet-20 (AESPA quadratics with and without HyPHEN, the ReLU network; greedy
and fewest placement), the program the Rust compiler writes equals the one `FheModel.program` /
`FheResNet.program` writes: the same ops, kinds, names, inputs, outputs, levels, depths,
refreshes, rotation levels, relinearisation level, parameters, packings and output slots, and
every float to 1e-9 relative. Also: the graph JSON round trip, the automatic choice of path, and
errors that name the node."""

import json
import time

import numpy as np
import pytest
from test_fhe import conv_net, deep_mlp, linear, relu_mlp, small_cnn, square

from lycaon import LycaonError, fhe, fhe_compiler, fhe_resnet
from lycaon._native import fhe_compile, fhe_compile_path
from lycaon.frontend import zoo
from lycaon.frontend.graph_json import graph_from_json, graph_to_json
from lycaon.frontend.ir import Graph, Node

RTOL = 1e-9


def assert_same(got, want, where="program"):
    """`got` (Rust) equals `want` (Python): structure, integers and strings exactly, floats to
    RTOL relative."""
    if isinstance(want, dict):
        assert isinstance(got, dict), f"{where}: {type(got).__name__} instead of an object"
        assert sorted(got) == sorted(want), f"{where}: keys {sorted(got)} != {sorted(want)}"
        for k in want:
            assert_same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: length {len(got) if isinstance(got, list) else got!r} != {len(want)}"
        if want and all(isinstance(w, float) for w in want) and all(isinstance(g, (int, float)) for g in got):
            g, w = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
            bad = np.flatnonzero(np.abs(g - w) > RTOL * np.maximum(np.abs(g), np.abs(w)))
            assert bad.size == 0, f"{where}[{bad[0]}]: {g[bad[0]]!r} != {w[bad[0]]!r} ({bad.size} differ)"
            return
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}[{i}]")
    elif isinstance(want, float):
        assert isinstance(got, (int, float)) and abs(got - want) <= RTOL * max(abs(got), abs(want)), f"{where}: {got!r} != {want!r}"
    else:
        assert type(got) is type(want) and got == want, f"{where}: {got!r} != {want!r}"


def normalise(program: dict) -> dict:
    """A program as JSON reads it back; the leveled compiler writes no `refresh` (none)."""
    p = json.loads(json.dumps(program))
    for op in p["ops"]:
        op.setdefault("refresh", [])
    return p


def rust_program(graph: Graph, **options) -> dict:
    return normalise(json.loads(fhe_compile(graph_to_json(graph), json.dumps(options))))


def check_leveled(graph: Graph, name: str = "") -> fhe.FheModel:
    model = fhe.FheModel(graph)
    want = normalise(model.program(name or None))
    got = rust_program(model.graph, name=name or None, path="leveled")
    assert_same(got, want)
    assert json.loads(fhe_compile_path(graph_to_json(model.graph)))["path"] == "leveled"
    return model


# ---------------------------------------------------------------------------------------------
# Leveled path (FheModel)


def test_cnn_square_equals_the_python_compiler():
    graph = zoo.load_model("cnn-square-cifar10")
    t0 = time.perf_counter()
    model = fhe.FheModel(graph)
    want = normalise(model.program("cnn-square-cifar10"))
    python_s = time.perf_counter() - t0
    text = graph_to_json(model.graph)
    t0 = time.perf_counter()
    got_json = fhe_compile(text, json.dumps({"name": "cnn-square-cifar10"}))
    rust_s = time.perf_counter() - t0
    assert_same(normalise(json.loads(got_json)), want)
    print(f"\ncnn-square compile: Python {python_s:.2f} s (FheModel + program), Rust {rust_s:.2f} s (fhe_compile, graph JSON in, program JSON out)")
    # The automatic choice: leveled, and why.
    choice = fhe_compiler.compile_path(graph)
    assert choice["path"] == "leveled" and "fits" in choice["reason"], choice
    assert_same(normalise(fhe_compiler.compile_program(graph, name="cnn-square-cifar10")), want)
    # What the product serves (lycaon.Server(..., mode="fhe"), demo, plan) is the Rust program.
    served, net = fhe.compile_model("cnn-square")
    assert_same(normalise(served), want)
    assert isinstance(net, fhe_compiler.CompiledNetwork) and not net.bootstrapped and net.planned_bootstraps == 0


@pytest.mark.parametrize("seed,size,c1,c2,k,stride,pad", [(1, 12, 3, 5, 3, 2, 1), (2, 9, 2, 4, 5, 2, 2), (3, 8, 4, 4, 3, 1, 1), (4, 10, 1, 6, 3, 2, 0)])
def test_convolutional_test_networks_equal_the_python_compiler(seed, size, c1, c2, k, stride, pad):
    check_leveled(conv_net(seed, size, c1, c2, k, stride, pad))


def test_mlp_quadratics_and_small_cnns_equal_the_python_compiler():
    rng = np.random.default_rng(5)
    g = Graph("x", (100,), name="mlp")  # residual addition, replication, general quadratic
    h = linear(g, rng, "fc1", "x", 100, 48, 0.1)
    a = square(g, "act1", h, (0.1, 0.5, 1.0))
    h2 = linear(g, rng, "fc2", a, 48, 48, 0.1)
    g.add(Node("add", "res", [h2, a], "res:o"))
    linear(g, rng, "fc3", "res:o", 48, 10, 0.2, "logits")
    check_leveled(g, "mlp-named")
    rng = np.random.default_rng(9)
    g = Graph("x", (12,), name="output-quadratic")  # a quadratic that cannot be made monic: two levels
    h = linear(g, rng, "fc", "x", 12, 6, 0.3)
    square(g, "act", h, rng.normal(0, 0.2, (6, 3)) + [0, 0, 1])
    g.output = "act:o"
    model = check_leveled(g)
    assert any(s.a is not None for s in model.steps if s.kind == "quadratic")
    for seed, shape in ((6, (2, 4, 10)), (8, (1, 2, 5))):
        check_leveled(small_cnn(np.random.default_rng(seed), *shape))
    g = Graph("x", (16,), name="ok")
    linear(g, np.random.default_rng(7), "fc", "x", 16, 4, 0.1, "logits")
    check_leveled(g)
    # Other parameters: the given ring and special primes, another scale.
    g = small_cnn(np.random.default_rng(6), 2, 4, 10)
    for kw in ({"log_n": 14}, {"p_bits": [50, 50]}, {"log_scale": 30, "log_q0": 50}):
        model = fhe.FheModel(g, **kw)
        assert_same(rust_program(model.graph, path="leveled", **kw), normalise(model.program()))


def test_a_rust_compiled_program_runs_encrypted_in_a_local_session():
    from lycaon._native import FheSession

    rng = np.random.default_rng(6)
    g = small_cnn(rng, 2, 4, 10)
    program = fhe_compiler.compile_program_json(g, name="small")
    session = FheSession.local(program)
    try:
        for _ in range(2):
            x = rng.uniform(0, 1, (2, 8, 8))
            got = np.asarray(json.loads(session.infer(x.ravel()))["logits"])
            want = fhe.plaintext_reference(g, x)
            assert np.abs(got - want).max() <= 2.0**-12 * np.abs(want).max(), (got, want)
    finally:
        session.close()


def test_a_polynomial_without_square_term_is_one_level_as_the_level_plan_says():
    """The one place the Rust compiler departs from fhe.py on purpose: b x + c. fhe.py plans one
    level for it (`_node_depth`) but writes a quadratic with a = 0 of depth 2, so the next op's
    level is one too high for what the executor would spend; the Rust compiler writes a one-level
    scale_shift. Everything else of the program is the same."""
    rng = np.random.default_rng(1)
    g = Graph("x", (8,), name="lin-poly")
    h = linear(g, rng, "fc1", "x", 8, 8, 0.3)
    g.add(Node("poly", "p", [h], "p:o", {}, {"coefficients": np.array([0.1, 0.5])}))
    linear(g, rng, "fc2", "p:o", 8, 4, 0.3, "logits")
    model = fhe.FheModel(g)
    want = normalise(model.program())
    got = rust_program(model.graph, path="leveled")
    py_op, rust_op = want["ops"][1], got["ops"][1]
    assert (py_op["kind"], py_op["depth"], py_op["a"]) == ("quadratic", 2, {"slots": [], "values": []})
    assert (rust_op["kind"], rust_op["depth"], rust_op["level"] - got["ops"][2]["level"]) == ("scale_shift", 1, 1)
    assert_same(rust_op["b"], py_op["b"])
    assert_same(rust_op["c"], py_op["c"])
    want["ops"][1], got["ops"][1] = None, None
    want["relin_level"] = None  # fhe.py counted its a = 0 quadratic as a product
    assert_same(got, want)


def test_leveled_errors_name_the_node():
    rng = np.random.default_rng(7)
    g = relu_mlp(rng)
    with pytest.raises(LycaonError, match="relu node 'relu'.*ReLU"):
        fhe_compile(graph_to_json(g), json.dumps({"path": "leveled"}))
    choice = json.loads(fhe_compile_path(graph_to_json(g)))
    assert choice["path"] == "bootstrapped" and "relu node 'relu'" in choice["reason"]
    g = deep_mlp(rng)
    # Too deep for one ring: the automatic choice goes to bootstrapping, which needs bounds
    # (and, being no ResNet, would not take it anyway): the error says both.
    with pytest.raises(LycaonError, match="needs bootstrapping.*bootstrapped"):
        fhe_compile(graph_to_json(g))


def test_a_depthwise_convolution_runs_encrypted_as_the_dense_one():
    """A grouped (here depthwise) convolution compiles as the dense convolution that is zero
    across groups, and decrypts to the float model."""
    from test_fhe import encrypted

    rng = np.random.default_rng(7)
    g = Graph("x", (3, 8, 8), name="grouped")
    g.add(Node("conv", "dw", ["x"], "dw:o", {"groups": 3, "pads": (1, 1, 1, 1)}, {"weight": rng.normal(0, 1, (3, 1, 3, 3)), "bias": None}))
    g.add(Node("flatten", "f", ["dw:o"], "f:o"))
    program = json.loads(fhe_compile(graph_to_json(g)))
    x = rng.normal(0, 1, (3, 8, 8))
    got = np.asarray(encrypted(program, [x])[0]["logits"])
    want = fhe.plaintext_reference(g, x)
    assert np.abs(got - want).max() < 1e-3 * np.abs(want).max()


# ---------------------------------------------------------------------------------------------
# Graph JSON


def test_graph_json_round_trips_and_is_validated_in_rust():
    g = conv_net(1, 12, 3, 5, 3, 2, 1)
    text = graph_to_json(g)
    back = graph_from_json(text)
    assert [(n.op, n.name, n.inputs, n.output, n.shape) for n in back.nodes] == [(n.op, n.name, n.inputs, n.output, n.shape) for n in g.nodes]
    for a, b in zip(g.nodes, back.nodes):
        for k, v in a.params.items():
            assert (v is None and b.params[k] is None) or np.array_equal(np.asarray(v, dtype=np.float64), b.params[k])
    d = json.loads(text)
    d["nodes"][0]["shape"] = [5, 7, 7]
    with pytest.raises(LycaonError, match="conv node 'conv1'.*inferred"):
        fhe_compile(json.dumps(d))
    d = json.loads(text)
    d["nodes"][0]["params"]["weight"]["data"].pop()
    with pytest.raises(LycaonError, match="conv node 'conv1'.*'weight'"):
        fhe_compile(json.dumps(d))
    d = json.loads(text)
    d["nodes"][1]["inputs"] = ["nowhere"]
    with pytest.raises(LycaonError, match="'nowhere' is not produced"):
        fhe_compile(json.dumps(d))
    with pytest.raises(LycaonError, match="compile options"):
        fhe_compile(text, json.dumps({"placement": "best"}))


# ---------------------------------------------------------------------------------------------
# Bootstrapped path (FheResNet): the shipped ResNet-20s, calibrated on bundled images


@pytest.fixture(scope="module")
def calibration():
    from lycaon.data import demo_images

    try:
        images = demo_images("cifar10")[0]
    except OSError:
        pytest.skip("the CIFAR-10 images are not in ../shared/data")
    return images[:16]


def check_resnet(model: str, calibration, hyphen: bool, placement: str) -> tuple:
    t0 = time.perf_counter()
    net = fhe_resnet.load_resnet20(model, calibration, hyphen=hyphen, placement=placement)
    name = fhe_resnet.RESNET20_MODELS[model]
    want = normalise(net.program(name))
    python_s = time.perf_counter() - t0
    text = graph_to_json(net.graph)
    options = {"name": name, "path": "bootstrapped", "bounds": net.bounds, "hyphen": hyphen, "placement": placement}
    t0 = time.perf_counter()
    got = fhe_compile(text, json.dumps(options))
    rust_s = time.perf_counter() - t0
    assert_same(normalise(json.loads(got)), want)
    # Left to itself, the compiler takes the same path.
    del options["path"]
    assert json.loads(fhe_compile_path(text, json.dumps(options)))["path"] == "bootstrapped"
    return net, want, python_s, rust_s


@pytest.mark.parametrize("hyphen,placement", [(True, "greedy"), (False, "greedy"), (True, "fewest"), (False, "fewest")])
def test_aespa_resnet20_equals_the_python_compiler(calibration, hyphen, placement):
    net, want, python_s, rust_s = check_resnet("resnet20", calibration, hyphen, placement)
    kinds = [op["kind"] for op in want["ops"]]
    assert kinds.count("hyphen") == (3 if hyphen else 0) and kinds[-1] == "pool_fc"
    assert sum(len(op["refresh"]) for op in want["ops"]) == net.planned_bootstraps > 0
    # Stages 2 and 3 (multiplexed inputs, every copy busy) run by block diagonals, in both compilers.
    methods = {op["name"]: op.get("method", "mpconv") for op in want["ops"] if op["kind"] == "mp_conv"}
    assert all(m == "bsgs" for name, m in methods.items() if name.startswith(("layer2", "layer3"))), methods
    print(f"\nResNet-20 AESPA hyphen={hyphen} {placement}: Python {python_s:.2f} s (load_resnet20 with calibration + program), Rust {rust_s:.2f} s; "
          f"{net.planned_bootstraps} bootstraps")
    assert rust_s < 10.0


@pytest.mark.parametrize("placement", ["greedy", "fewest"])
def test_relu_resnet20_equals_the_python_compiler(calibration, placement):
    net, want, python_s, rust_s = check_resnet("resnet20-relu", calibration, True, placement)
    kinds = [op["kind"] for op in want["ops"]]
    assert kinds.count("composite_relu") == 19 and "quadratic" not in kinds
    print(f"\nResNet-20 ReLU {placement}: Python {python_s:.2f} s, Rust {rust_s:.2f} s")


def test_the_python_entry_point_compiles_resnet20_automatically(calibration):
    from lycaon.frontend import aespa, resnet
    from lycaon.models import load_weights

    net = fhe_resnet.load_resnet20("resnet20", calibration)
    graph = aespa.graph(load_weights("resnet20-aespa-cifar10"))
    graph.name = "resnet20-aespa-cifar10"
    choice = fhe_compiler.compile_path(graph)
    assert choice["path"] == "bootstrapped" and "global_avgpool" in choice["reason"], choice
    x = resnet.preprocess(calibration)
    assert fhe_compiler.value_bounds(net.graph, x) == net.bounds
    assert_same(normalise(fhe_compiler.compile_program(graph, x)), normalise(net.program()))
    # What the product serves, with the demo's checks: reference logits and range ratios as
    # the Python compiler computes them.
    served, compiled = fhe.compile_model("resnet20", calibration=calibration)
    assert_same(normalise(served), normalise(net.program(fhe_resnet.RESNET20_MODELS["resnet20"])))
    assert compiled.bootstrapped and compiled.planned_bootstraps == 7 and not compiled.relu and compiled.bounds == net.bounds
    np.testing.assert_allclose(compiled.range_ratio(x[:3]), net.range_ratio(x[:3]))
    np.testing.assert_allclose(compiled.reference(x[0]), net.reference(x[0]))
    with pytest.raises(Exception, match="calibration"):
        fhe_compiler.compile_program(graph)
