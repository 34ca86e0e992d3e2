"""The hybrid program compiler (issue 9): a quantised model and a plan become the program the Rust
runtime executes; the plain integer executor of that program equals the fixed-point twin
(``run_integer``) exactly on real images; the client encodes as the twin does; bad models and
plans are refused with a ModelError. None of these tests needs the hybrid runtime's natives: plans
are built here from the model's layers (the planner's output format), not by the planner."""

import json

import numpy as np
import pytest

from lycaon import hybrid
from lycaon import plan as planner
from lycaon.data import cifar10_test_subset, mnist_test_subset
from lycaon.frontend import Graph, ModelError, Node, run_float, simplify, zoo
from lycaon.frontend.quantize import QuantConfig, QuantizedModel, quantize, run_integer

MODELS = {"lenet5-mnist": "mnist", "resnet20-cifar10": "cifar10"}


def _images(dataset: str, n: int):
    x, y = mnist_test_subset() if dataset == "mnist" else cifar10_test_subset()
    return planner.preprocessor(dataset)(x[:n]), y[:n]


def _plan_for(q, model="model", t_extra=3) -> dict:
    """A plan in the planner's format, every layer's plaintext modulus sized as the planner does."""
    layers = []
    for l in planner.linear_layers(q.graph):
        t_bits = int(np.ceil(q.accumulator_bits[l["name"]])) + t_extra
        layers.append({"name": l["name"], "algorithm": "cheetah", "shape": l["shape"],
                       "params": {"n": 4096, "q_bits": [60], "p_bits": [], "t_bits": t_bits, "digits": 1}})
    return {"model": model, "mode": "hybrid", "layers": layers}


@pytest.fixture(scope="module", params=sorted(MODELS))
def compiled(request):
    """(model, q, program, weights, test inputs, labels); calibrated on 8 bundled test images
    (the hybrid's own calibration uses training images; any calibration tests the compiler)."""
    model = request.param
    graph = simplify(zoo.load_model(model))
    try:
        cal, _ = _images(MODELS[model], 8)
    except OSError as e:  # CIFAR-10 lives in ../shared/data, which a checkout elsewhere lacks
        pytest.skip(str(e))
    q = quantize(graph, cal, QuantConfig())
    program, weights = hybrid.compile_program(q, _plan_for(q, model))
    x, y = _images(MODELS[model], 12)
    return model, q, program, weights, x[8:], y[8:]


def test_reference_run_equals_run_integer_exactly(compiled):
    _, q, program, weights, x, _ = compiled
    x_int = q.encode_input(x)
    want = run_integer(q, x_int)
    got = hybrid.reference_run(program, weights, x_int)
    assert got.dtype == np.int64 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    # One image, as (C, H, W) or flat as the client sends it.
    np.testing.assert_array_equal(hybrid.reference_run(program, weights, x_int[0]), want[0])
    np.testing.assert_array_equal(hybrid.reference_run(program, weights, x_int[1].reshape(-1)), want[1])


def test_program_follows_the_spec(compiled):
    model, q, program, weights, _, _ = compiled
    assert json.loads(json.dumps(program)) == program  # plain JSON
    assert program["version"] == hybrid.PROGRAM_VERSION == 2 and program["name"] == model and program["reveal"] == "logits"
    assert program["fraction_bits"] == q.fraction_bits and program["input_shape"] == list(q.graph.input_shape)
    names = [op["name"] for op in program["ops"]]
    assert len(set(names)) == len(names)
    written = {program["input"]}
    for op in program["ops"]:
        assert set(op["inputs"]) <= written, op
        assert op["output"] not in written, op
        written.add(op["output"])
    assert program["output"] in written
    by_name = {op["name"]: op for op in program["ops"]}
    linear = [n for n in q.graph.nodes if n.op in ("conv", "linear")]
    assert set(weights) == {n.name for n in linear}
    for node in linear:
        op = by_name[node.name]
        wq, bq, shift = q.layers[node.name]
        assert op["op"] == "linear" and op["has_bias"] == (bq is not None) and op["shape"] == planner.layer_shape(node, q.graph.shapes()[node.inputs[0]])
        w = weights[node.name]
        assert w["weight"].dtype == np.int64 and w["weight"].ndim == 1 and w["weight"].size == wq.size
        assert ("bias" in w) == (bq is not None)
        # The truncation by the layer's weight scale follows its accumulator, unless it is 0.
        trunc = by_name.get(f"{node.name}.truncate")
        assert (trunc is None) == (shift == 0)
        if trunc is not None:
            assert trunc["inputs"] == [op["output"]] and trunc["shift"] == shift and trunc["output"] == node.output
    if model == "resnet20-cifar10":
        # The option-A shortcuts carry no bias; the global average pool is a sum times 2^16/64 = 2^10,
        # its powers of two cancelled against the truncation: multiplier 1, shift 6.
        assert "bias" not in weights["layer2.0.shortcut"] and not by_name["layer2.0.shortcut"]["has_bias"]
        assert by_name["avgpool"]["op"] == "global_sumpool" and by_name["avgpool"]["multiplier"] == 1
        assert by_name["avgpool.truncate"]["shift"] == 6
        assert sum(op["op"] == "add" for op in program["ops"]) == 9
    else:
        assert by_name["pool1"]["op"] == "sumpool" and by_name["pool1"]["multiplier"] == 1 and by_name["pool1.truncate"]["shift"] == 2
        assert by_name["pool1"]["kernel"] == [2, 2] and by_name["pool1"]["pads"] == [0, 0, 0, 0]


def test_reveal_label_and_client_encoding(compiled):
    """The client's encoding (from the public program alone) is the fixed-point twin's; results
    decode by 2^-f with the top five classes best first."""
    model, q, program, weights, x, _ = compiled
    labelled, _ = hybrid.compile_program(q, _plan_for(q, model), reveal="label")
    assert labelled["reveal"] == "label" and labelled["ops"] == program["ops"]
    client = hybrid.Client("127.0.0.1:1")
    dataset = MODELS[model]
    client._public = {"mode": "hybrid", "program": dict(program, metadata={"preprocess": dataset, "labels": hybrid.LABELS[dataset]})}
    raw, _ = (mnist_test_subset() if dataset == "mnist" else cifar10_test_subset())
    np.testing.assert_array_equal(client.encode(raw[8:10]), q.encode_input(planner.preprocessor(dataset)(raw[8:10])).reshape(2, -1))
    np.testing.assert_array_equal(client.encode(x[0]), q.encode_input(x[:1]).reshape(1, -1))  # float: model-ready
    logits = hybrid.reference_run(program, weights, client.encode(raw[8:10]))
    fake = [{"label": int(row.argmax()), "logits": row.tolist(), "layers": [{"name": "a", "op": "linear", "seconds": 1.0, "bytes_sent": 3}],
             "client_s": 1.0, "server_s": 2.0, "comm_s": 0.5, "total_s": 3.5, "bytes": 10, "rounds": 4} for row in logits]
    res = hybrid._collect(fake, program)
    np.testing.assert_array_equal(res.logits, logits / 2.0**q.fraction_bits)
    assert res.labels == [int(r.argmax()) for r in logits] and res.top5[0][0] == res.labels[0] and len(res.top5[0]) == 5
    assert res.bytes == 20 and res.rounds == 8 and res["layers"] == [{"name": "a", "op": "linear", "seconds": 2.0, "bytes_sent": 6}]
    assert hybrid._collect([dict(fake[0], logits=None)], program).top5 is None


def test_prepare_with_a_given_plan(tmp_path):
    """prepare quantises on training images as the planner does and compiles a plan from a file."""
    graph = simplify(zoo.load_model("lenet5-mnist"))
    q = planner.quantize_calibrated(graph, 16)
    if q is None:
        pytest.skip("MNIST training images are not at hand (npm)")
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(_plan_for(q, "lenet5-mnist")))
    program, weights, q2 = hybrid.prepare("lenet5-mnist", plan=str(path), reveal="label")
    assert program["name"] == "lenet5-mnist" and program["reveal"] == "label" and q2.fraction_bits == q.fraction_bits
    for name, (wq, bq, shift) in q.layers.items():
        np.testing.assert_array_equal(weights[name]["weight"], wq.reshape(-1))


def test_plan_sends_flood_bits_only_when_asked(monkeypatch):
    seen = []

    def fake_plan_json(request):
        seen.append(json.loads(request))
        return json.dumps({"layers": [], "link": {"name": "lan"}, "predicted_s": 0.0})

    monkeypatch.setattr(planner._native, "plan_json", fake_plan_json)
    graph = simplify(zoo.load_model("lenet5-mnist"))
    cal, _ = _images("mnist", 4)
    q = quantize(graph, cal)
    planner.plan("lenet5-mnist", nonlinear=False, quantized=q)
    planner.plan("lenet5-mnist", nonlinear=False, quantized=q, flood_bits=40)
    assert "flood_bits" not in seen[0] and seen[1]["flood_bits"] == 40.0
    assert [l["name"] for l in seen[0]["layers"]] == ["conv1", "conv2", "fc1", "fc2", "fc3"]


# ----------------------------------------------------------------------------- refusals


def _tiny(nodes, input_shape=(1, 8, 8)):
    g = Graph("x", input_shape, name="tiny")
    for node in nodes:
        g.add(node)
    cal = np.random.default_rng(0).normal(size=(4, *input_shape))
    return g, cal


def _conv(name, src, c_in, c_out, k=3, pads=(1, 1, 1, 1), stride=(1, 1), groups=1, seed=0):
    w = np.random.default_rng(seed).normal(size=(c_out, c_in // groups, k, k)) * 0.3
    return Node("conv", name, [src], f"{name}:o", {"stride": stride, "pads": pads, "groups": groups}, {"weight": w, "bias": np.zeros(c_out)})


def _fc(name, src, f_in, f_out):
    return Node("linear", name, [src], f"{name}:o", {}, {"weight": np.random.default_rng(1).normal(size=(f_out, f_in)) * 0.3, "bias": np.zeros(f_out)})


def _head(src, c, h, w):
    return [Node("flatten", "flat", [src], "flat:o"), _fc("fc", "flat:o", c * h * w, 3)]


def test_refuses_models_the_runtime_does_not_run():
    g, cal = _tiny([_conv("c", "x", 1, 2), *_head("c:o", 2, 8, 8)])
    q = quantize(g, cal)
    plan = _plan_for(q)
    with pytest.raises(ModelError, match="reveal"):
        hybrid.compile_program(q, plan, reveal="everything")
    with pytest.raises(ModelError, match="'layers' list"):
        hybrid.compile_program(q, [])
    with pytest.raises(ModelError, match="not in the plan"):
        hybrid.compile_program(q, dict(plan, layers=plan["layers"][:1]))
    with pytest.raises(ModelError, match="another model"):
        hybrid.compile_program(q, dict(plan, layers=plan["layers"] + [dict(plan["layers"][0], name="other")]))
    moved = json.loads(json.dumps(plan))
    moved["layers"][0]["shape"]["c_out"] = 4
    with pytest.raises(ModelError, match="differs in c_out"):
        hybrid.compile_program(q, moved)
    with pytest.raises(ModelError, match="plaintext modulus"):
        hybrid.compile_program(q, _plan_for(q, t_extra=1))
    # Not 1-D at the output.
    g2, cal2 = _tiny([_conv("c", "x", 1, 2)])
    q2 = quantize(g2, cal2)
    with pytest.raises(ModelError, match="1-D"):
        hybrid.compile_program(q2, _plan_for(q2))
    # Batch-norm left unfolded (no quantisation takes it, so build the quantised model by hand).
    bn = Node("batchnorm", "bn", ["c:o"], "bn:o", {"eps": 1e-5}, {"scale": np.ones(2), "bias": np.zeros(2), "mean": np.zeros(2), "var": np.ones(2)})
    g3, _ = _tiny([_conv("c", "x", 1, 2), bn, *_head("bn:o", 2, 8, 8)])
    q3 = QuantizedModel(g3, q.fraction_bits, q.config, q.layers, {}, q.accumulator_bits)
    with pytest.raises(ModelError, match="fold batch-norm"):
        hybrid.compile_program(q3, plan)
    # A polynomial activation (x^2): the FHE mode's, named with the way there.
    square = Node("poly", "act", ["c:o"], "act:o", {}, {"coefficients": np.array([0.0, 0.0, 1.0])})
    g4, _ = _tiny([_conv("c", "x", 1, 2), square, *_head("act:o", 2, 8, 8)])
    q4 = QuantizedModel(g4, q.fraction_bits, q.config, q.layers, {}, q.accumulator_bits)
    with pytest.raises(ModelError, match=r"^poly node 'act': a polynomial activation .* the hybrid mode cannot run it; run this model in the FHE mode \(--mode fhe"):
        hybrid.compile_program(q4, plan)


def test_refuses_shapes_the_planner_does_not_take():
    # Rectangular inputs are planned; asymmetric padding is not.
    g, cal = _tiny([_conv("c", "x", 1, 2, pads=(1, 1, 0, 0)), *_head("c:o", 2, 5, 7)], input_shape=(1, 6, 8))
    q = quantize(g, cal)
    with pytest.raises(ModelError, match="symmetric padding"):
        hybrid.compile_program(q, {"layers": []})
    g, cal = _tiny([_conv("c", "x", 1, 2), *_head("c:o", 2, 6, 8)], input_shape=(1, 6, 8))
    q = quantize(g, cal)
    program, weights = hybrid.compile_program(q, _plan_for(q))
    x_int = q.encode_input(cal)
    np.testing.assert_array_equal(hybrid.reference_run(program, weights, x_int), run_integer(q, x_int))
    # A grouped convolution under a plan without groups.
    g2, cal2 = _tiny([_conv("c", "x", 2, 4, groups=2), *_head("c:o", 4, 8, 8)], input_shape=(2, 8, 8))
    q2 = quantize(g2, cal2)
    plan = _plan_for(q2)
    program, weights = hybrid.compile_program(q2, plan)  # with groups: compiled, and exact
    x_int = q2.encode_input(cal2)
    np.testing.assert_array_equal(hybrid.reference_run(program, weights, x_int), run_integer(q2, x_int))
    del plan["layers"][0]["shape"]["groups"]
    with pytest.raises(ModelError, match="grouped"):
        hybrid.compile_program(q2, plan)


def test_pools_keep_exact_semantics_or_are_refused():
    """A 3x3 average pool's multiplier round(2^16/9) is odd after cancelling one 2: exact in the
    reference, but its window sums outgrow the share ring at 16 fraction bits, so it is refused;
    with fewer fraction bits it fits and compiles; max pools are exact."""
    pool = Node("avgpool", "p", ["c:o"], "p:o", {"kernel": (3, 3), "stride": (3, 3)})
    g, cal = _tiny([_conv("c", "x", 1, 2, k=3), pool, *_head("p:o", 2, 3, 3)], input_shape=(1, 9, 9))
    q = quantize(g, cal)
    assert q.pools["p"][0] == round(2**16 / 9)
    with pytest.raises(ModelError, match="share ring"):
        hybrid.compile_program(q, _plan_for(q))
    # Wider rings leave room: exact against the twin.
    program, weights = hybrid.compile_program(q, _plan_for(q, t_extra=16))
    assert next(op for op in program["ops"] if op["name"] == "p")["multiplier"] == round(2**16 / 9) // 2
    x_int = q.encode_input(cal)
    np.testing.assert_array_equal(hybrid.reference_run(program, weights, x_int), run_integer(q, x_int))
    mp = Node("maxpool", "m", ["c:o"], "m:o", {"kernel": (2, 2), "stride": (2, 2), "pads": (1, 1, 1, 1)})
    g2, cal2 = _tiny([_conv("c", "x", 1, 2), mp, *_head("m:o", 2, 5, 5)])
    q2 = quantize(g2, cal2)
    program2, weights2 = hybrid.compile_program(q2, _plan_for(q2))
    x2 = q2.encode_input(cal2)
    np.testing.assert_array_equal(hybrid.reference_run(program2, weights2, x2), run_integer(q2, x2))


def test_reference_run_checks_its_input(compiled):
    _, q, program, weights, x, _ = compiled
    with pytest.raises(TypeError, match="integers"):
        hybrid.reference_run(program, weights, x)
    with pytest.raises(ValueError, match="fits neither"):
        hybrid.reference_run(program, weights, np.zeros((2, 5), dtype=np.int64))



def test_strided_pointwise_convolutions_read_a_subsample():
    """A 1x1 convolution of stride 2 (a ResNet downsampling shortcut) becomes a 1x1 average pool
    of stride 2 and the convolution at stride 1: the same float function on odd sizes, a local
    ``sumpool`` (multiplier 1, no truncation) in the program, private logits equal to the twin's,
    and the planner keeps the subsample in its reader's share ring."""
    from lycaon.frontend import subsample_before_pointwise

    stem = [_conv("c", "x", 1, 4), Node("relu", "r", ["c:o"], "r:o")]
    shortcut = _conv("sc", "r:o", 4, 6, k=1, pads=(0, 0, 0, 0), stride=(2, 2), seed=3)
    main = _conv("m", "r:o", 4, 6, stride=(2, 2), seed=4)
    g, cal = _tiny([*stem, shortcut, main, Node("add", "a", ["sc:o", "m:o"], "a:o"), *_head("a:o", 6, 6, 5)], input_shape=(1, 11, 9))
    s = subsample_before_pointwise(simplify(g))
    x = np.random.default_rng(5).normal(size=(6, 1, 11, 9))
    np.testing.assert_allclose(run_float(s, x), run_float(g, x), rtol=1e-12, atol=1e-12)
    sub = next(n for n in s.nodes if n.op == "avgpool")
    assert (sub.inputs, tuple(sub.attrs["kernel"]), tuple(sub.attrs["stride"])) == (["r:o"], (1, 1), (2, 2))
    assert next(n for n in s.nodes if n.name == "sc").inputs == [sub.output] and tuple(next(n for n in s.nodes if n.name == "sc").attrs["stride"]) == (1, 1)
    assert tuple(next(n for n in s.nodes if n.name == "m").attrs["stride"]) == (2, 2), "a 3x3 convolution keeps its stride"
    q = quantize(s, cal)
    program, weights = hybrid.compile_program(q, _plan_for(q))
    op = next(o for o in program["ops"] if o["name"] == sub.name)
    assert (op["op"], op["kernel"], op["stride"], op["multiplier"]) == ("sumpool", [1, 1], [2, 2], 1)
    assert not any(o["op"] == "truncate" and o["inputs"] == [op["output"]] for o in program["ops"])
    x_int = q.encode_input(x)
    np.testing.assert_array_equal(hybrid.reference_run(program, weights, x_int), run_integer(q, x_int))
    assert any({"m", "sc"} <= set(group) for group in planner._ring_groups(s, q))


def test_max_pools_move_ahead_of_activations_and_concats():
    """simplify moves a max-pool ahead of the ReLU before it and ahead of a concat of ReLU and
    ReLU6 (max commutes with both and with stacking channels): the float network is the same
    function, the program runs the activations on the pooled maps and equals the twin; an
    activation that something else also reads keeps its place."""
    relu = Node("relu", "r", ["c:o"], "r:o")
    pool = Node("maxpool", "m", ["r:o"], "m:o", {"kernel": (3, 3), "stride": (2, 2), "pads": (1, 1, 1, 1)})
    left, right = _conv("l", "m:o", 2, 2, seed=1), _conv("rr", "m:o", 2, 3, k=1, pads=(0, 0, 0, 0), seed=2)
    acts = [Node("relu", "la", ["l:o"], "la:o"), Node("clip", "ra", ["rr:o"], "ra:o", {"min": 0.0, "max": 6.0})]
    cat = Node("concat", "cat", ["la:o", "ra:o"], "cat:o", {"axis": 1})
    pool2 = Node("maxpool", "m2", ["cat:o"], "m2:o", {"kernel": (3, 3), "stride": (2, 2)})
    g, cal = _tiny([_conv("c", "x", 1, 2), relu, pool, left, right, *acts, cat, pool2, *_head("m2:o", 5, 2, 2)], input_shape=(1, 11, 9))
    s = simplify(g)
    x = np.random.default_rng(3).normal(size=(6, 1, 11, 9))
    np.testing.assert_allclose(run_float(s, x), run_float(g, x), rtol=1e-12, atol=1e-12)
    order = [(n.op, n.inputs[0]) for n in s.nodes]
    assert order.index(("maxpool", "c:o")) < order.index(("relu", "r:o"))
    assert order.index(("maxpool", "l:o")) < order.index(("relu", "la:o:pooled")) and order.index(("maxpool", "rr:o")) < order.index(("clip", "ra:o:pooled"))
    assert next(n for n in s.nodes if n.op == "concat").output == "m2:o" and not any(n.op == "maxpool" and n.inputs[0] == "cat:o" for n in s.nodes)
    q = quantize(s, cal)
    program, weights = hybrid.compile_program(q, _plan_for(q))
    x_int = q.encode_input(x)
    np.testing.assert_array_equal(hybrid.reference_run(program, weights, x_int), run_integer(q, x_int))
    # A ReLU output with a second reader (a residual add) keeps its place.
    add = Node("add", "a", ["m:o", "r:o"], "a:o")
    g3, _ = _tiny([_conv("c", "x", 1, 2), relu, Node("maxpool", "m", ["r:o"], "m:o", {"kernel": (3, 3), "stride": (1, 1), "pads": (1, 1, 1, 1)}), add,
                   *_head("a:o", 2, 8, 8)])
    assert [n.op for n in simplify(g3).nodes][:3] == ["conv", "relu", "maxpool"]
