"""Encrypted linear layers through the Python bindings, checked against a plain numpy convolution
modulo t (independent of the Rust reference), at 128-bit secure parameters."""

import numpy as np
import pytest

import lycaon

T_BITS = 20


def conv_mod(x, w, shape, t):
    """Plain numpy convolution (NCHW, one image; weights [out][in/groups][kh][kw]) modulo t."""
    c_in, h, wd = shape["c_in"], shape["h"], shape["w"]
    k, s, p, g = shape["k"], shape.get("stride", 1), shape.get("pad", shape["k"] // 2), shape.get("groups", 1)
    x = np.pad(x.reshape(c_in, h, wd).astype(object), ((0, 0), (p, p), (p, p)))
    oh, ow = (h + 2 * p - k) // s + 1, (wd + 2 * p - k) // s + 1
    per_in, per_out = c_in // g, shape["c_out"] // g
    w = w.reshape(shape["c_out"], per_in, k, k).astype(object)
    out = np.zeros((shape["c_out"], oh, ow), dtype=object)
    for o in range(shape["c_out"]):
        grp = o // per_out
        for dy in range(k):
            for dx in range(k):
                patch = x[grp * per_in:(grp + 1) * per_in, dy:dy + s * oh:s, dx:dx + s * ow:s]
                out[o] += np.tensordot(w[o, :, dy, dx], patch, axes=1)
    return (out.reshape(-1) % t).astype(np.uint64)


@pytest.fixture(scope="module")
def params():
    return {
        "slots": lycaon.BfvParameters.from_bits(4096, [36, 36], [37], T_BITS),
        "coeff": lycaon.BfvParameters.from_bits(4096, [55, 54], [], T_BITS),
    }


SHAPES = [
    {"h": 9, "w": 9, "c_in": 3, "c_out": 5, "k": 3},
    {"h": 8, "w": 8, "c_in": 4, "c_out": 6, "k": 3, "stride": 2},
    {"h": 7, "w": 7, "c_in": 6, "c_out": 4, "k": 1, "pad": 0},
    {"h": 6, "w": 6, "c_in": 4, "c_out": 4, "k": 3, "groups": 4},
]
ALGORITHMS = [("gazelle", {"schedule": "IA"}), ("gazelle", {"schedule": "PA"}), ("walsh", {}), ("padded", {}), ("cheetah", {}), ("hyena", {})]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s['h']}x{s['c_in']}->{s['c_out']}k{s['k']}s{s.get('stride', 1)}g{s.get('groups', 1)}")
@pytest.mark.parametrize("algorithm,options", ALGORITHMS, ids=lambda a: a if isinstance(a, str) else "")
def test_layer_matches_numpy(params, shape, algorithm, options):
    if algorithm == "cheetah" and shape.get("groups", 1) > 1:
        with pytest.raises(lycaon.LycaonError, match="grouped"):
            lycaon.plan_linear(algorithm, shape, params["coeff"])
        return
    p = params["coeff" if algorithm == "cheetah" else "slots"]
    t = p.plaintext_modulus
    rng = np.random.default_rng(len(algorithm) + shape["h"])
    x = rng.integers(-128, 128, size=shape["c_in"] * shape["h"] * shape["w"], dtype=np.int64)
    w = rng.integers(-128, 128, size=shape["c_out"] * (shape["c_in"] // shape.get("groups", 1)) * shape["k"] ** 2, dtype=np.int64)
    run = lycaon.run_linear(algorithm, shape, p, x, w, 1, options)
    np.testing.assert_array_equal(run["output"], conv_mod(x, w, shape, t))
    assert run["exact"] and run["counts_match"]
    assert abs(run["up_bytes"] - run["up_bytes_measured"]) <= 8 * run["input_ciphertexts"]
    assert run["weight_bytes"] == run["weight_bytes_measured"]


def test_fully_connected_layers(params):
    shape = {"h": 1, "w": 1, "c_in": 100, "c_out": 10, "k": 1, "pad": 0}
    rng = np.random.default_rng(5)
    x = rng.integers(-128, 128, size=100, dtype=np.int64)
    w = rng.integers(-128, 128, size=1000, dtype=np.int64)
    want = (w.reshape(10, 100).astype(object) @ x.astype(object)) % params["slots"].plaintext_modulus
    for algorithm, p in [("diagonal", params["slots"]), ("cheetah-matvec", params["coeff"]), ("gazelle", params["slots"])]:
        run = lycaon.run_linear(algorithm, shape, p, x, w)
        np.testing.assert_array_equal(run["output"], want.astype(np.uint64))


def test_plans_state_costs_without_keys(params):
    plan = lycaon.plan_linear("walsh", {"h": 64, "w": 64, "c_in": 64, "c_out": 64, "k": 3}, params["slots"])
    gazelle = lycaon.plan_linear("gazelle", {"h": 64, "w": 64, "c_in": 64, "c_out": 64, "k": 3}, params["slots"])
    assert plan["weight_bytes"] * 1000 < gazelle["weight_bytes"]
    assert plan["counts"]["rotations"] < gazelle["counts"]["rotations"]


@pytest.mark.parametrize(
    "algorithm,shape,match",
    [
        ("nonsense", {"h": 4, "c_in": 1, "c_out": 1, "k": 3}, "unknown linear algorithm"),
        ("gazelle", {"h": 4, "c_in": 3, "c_out": 2, "k": 3, "groups": 2}, "groups"),
        ("walsh", {"h": 2, "c_in": 1, "c_out": 1, "k": 5, "pad": 0}, "kernel"),
        ("gazelle", {"h": 4, "c_out": 1, "k": 3}, "c_in"),
        ("diagonal", {"h": 4, "c_in": 1, "c_out": 1, "k": 3}, "fully connected"),
    ],
)
def test_bad_layers_are_refused_clearly(params, algorithm, shape, match):
    with pytest.raises(lycaon.LycaonError, match=match):
        lycaon.plan_linear(algorithm, shape, params["slots"])


def test_wrong_input_size_is_an_error(params):
    with pytest.raises(lycaon.LycaonError, match="input elements"):
        lycaon.run_linear("walsh", {"h": 4, "c_in": 1, "c_out": 1, "k": 3}, params["slots"], np.zeros(3, dtype=np.int64), np.zeros(9, dtype=np.int64))
