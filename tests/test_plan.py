"""The planner from Python and its command: the plan's JSON shape (issue 6), noise margins that
hold, the mode comparison, clean errors, and an HTML report that renders in a browser."""

import json
import os
import subprocess
import sys

import pytest

from html_render import ChromiumUnavailable, render_check

LAYER_KEYS = {"name", "shape", "algorithm", "params", "noise_margin_bits", "noise_worst_case_bits", "predicted_s", "server_s", "client_s",
              "comm_s", "bytes_up", "bytes_down", "key_bytes", "rotations", "galois_elements", "nonlinear_s", "nonlinear_bytes"}


@pytest.fixture(scope="module")
def cache_env(tmp_path_factory):
    """One per-operation cost cache for the module (the first plan calibrates it)."""
    env = dict(os.environ, LYCAON_CACHE=str(tmp_path_factory.mktemp("cache")))
    return env


def _cli(env, *args):
    return subprocess.run([sys.executable, "-m", "lycaon.cli", "plan", *map(str, args)], capture_output=True, text=True, timeout=1200, env=env)


def test_hybrid_plan_json_and_report(cache_env, tmp_path):
    out_json, out_html = tmp_path / "plan.json", tmp_path / "plan.html"
    res = _cli(cache_env, "lenet5-mnist", "--json", out_json, "--html", out_html)
    assert res.returncode == 0, res.stderr
    plan = json.loads(out_json.read_text())
    assert plan["mode"] == "hybrid" and plan["layers"]
    assert {"speedup_vs_single_set", "predicted_s", "total_s", "total_bytes", "rounds"} <= set(plan)
    for layer in plan["layers"]:
        assert LAYER_KEYS <= set(layer), LAYER_KEYS - set(layer)
        assert layer["noise_margin_bits"] >= 0.0, layer
        assert layer["noise_worst_case_bits"] <= layer["noise_margin_bits"] + 1e-9
        assert layer["params"]["n"] in (2048, 4096, 8192, 16384)
        assert layer["predicted_s"] > 0 and layer["predicted_s"] == pytest.approx(layer["server_s"] + layer["client_s"] + layer["comm_s"])
    # The tuned plan is never slower than the best single parameter set.
    assert plan["speedup_vs_single_set"] >= 1.0
    assert "total" in res.stdout and "per-layer tuning" in res.stdout
    try:
        seen = render_check(out_html)
    except ChromiumUnavailable as exc:
        pytest.skip(f"cannot render HTML: {exc}")
    assert seen["console_errors"] == [] and seen["exceptions"] == [] and seen["log_errors"] == [], seen
    # Latency breakdown, bytes, design space, single-set comparison: every one drawn.
    assert len(seen["charts"]) == 4, seen["charts"]
    assert not [c for c in seen["charts"] if c["blank"]]


def test_compare_mode_puts_both_modes_side_by_side(cache_env, tmp_path):
    out_json, out_html = tmp_path / "cmp.json", tmp_path / "cmp.html"
    res = _cli(cache_env, "resnet20-cifar10", "--mode", "compare", "--link", "wan", "--json", out_json, "--html", out_html)
    assert res.returncode == 0, res.stderr
    plan = json.loads(out_json.read_text())
    assert plan["link"]["name"] == "wan"
    strategies = {k["strategy"]: k for k in plan["fhe"]["keysets"]}
    assert set(strategies) == {"power_of_two", "all_required", "level_aware"}
    # 004: level-aware keys take less memory than all-required, and rotate faster than power-of-two.
    assert strategies["level_aware"]["memory_bytes"] < strategies["all_required"]["memory_bytes"]
    assert strategies["level_aware"]["rotation_s"] < strategies["power_of_two"]["rotation_s"]
    rows = {r["quantity"]: r for r in plan["comparison"]}
    assert rows["round trips"]["fhe"] == 1 and rows["round trips"]["hybrid"] > 1
    assert rows["bootstrappings"]["hybrid"] == 0 and rows["bootstrappings"]["fhe"] > 0
    try:
        seen = render_check(out_html)
    except ChromiumUnavailable as exc:
        pytest.skip(f"cannot render HTML: {exc}")
    assert seen["ok"], seen


@pytest.mark.parametrize(
    "args, message",
    [
        (["no-such-model"], "neither a model file nor a built-in model"),
        (["lenet5-mnist", "--mode", "fhe"], "FHE-mode planner covers ResNet-20"),
        (["lenet5-mnist", "--link", "fast"], "link 'fast'"),
        (["lenet5-mnist", "--algorithm", "quantum"], "unknown linear algorithm"),
    ],
)
def test_bad_input_is_a_clean_error(cache_env, args, message):
    res = _cli(cache_env, *args)
    assert res.returncode == 2, res.stdout
    assert "Traceback" not in res.stderr and message in res.stderr, res.stderr


def test_layers_whose_shares_meet_share_one_plaintext_modulus(cache_env, monkeypatch):
    """A residual block: the block input feeds conv b (3x3) and the add, the add's output conv d
    (1x1: a narrower accumulator); b and d read shares that meet, so the planner gives them one t (bits, and one prime across ring
    degrees via params["t_n"]); conv c, whose truncated output joins the add, keeps its own."""
    import numpy as np

    from lycaon import plan as planner
    from lycaon.frontend import Graph, Node
    from lycaon.frontend.quantize import quantize

    monkeypatch.setenv("LYCAON_CACHE", cache_env["LYCAON_CACHE"])
    rng = np.random.default_rng(0)

    def conv(name, src, c_in, c_out, scale, k=3):
        return Node("conv", name, [src], f"{name}:o", {"stride": (1, 1), "pads": (k // 2,) * 4, "groups": 1},
                    {"weight": rng.normal(size=(c_out, c_in, k, k)) * scale, "bias": np.zeros(c_out)})

    g = Graph("x", (2, 8, 8), name="residual")
    for node in [conv("a", "x", 2, 4, 0.3), Node("relu", "ra", ["a:o"], "ra:o"), conv("b", "ra:o", 4, 4, 3.0), Node("relu", "rb", ["b:o"], "rb:o"),
                 conv("c", "rb:o", 4, 4, 0.01), Node("add", "s", ["c:o", "ra:o"], "s:o"), Node("relu", "rs", ["s:o"], "rs:o"), conv("d", "rs:o", 4, 2, 0.3, k=1),
                 Node("flatten", "f", ["d:o"], "f:o"), Node("linear", "fc", ["f:o"], "fc:o", {}, {"weight": rng.normal(size=(3, 128)) * 0.1, "bias": np.zeros(3)})]:
        g.add(node)
    q = quantize(g, rng.normal(size=(4, 2, 8, 8)))
    assert planner._ring_groups(g, q) == [["b", "d"]]
    bits = planner._value_bits(planner.linear_layers(g), q)
    assert bits["b"][1] != bits["d"][1], "the test wants layers that would get different t on their own"
    result = planner.plan("residual", quantized=q, nonlinear=False)
    params = {l["name"]: l["params"] for l in result["layers"]}
    assert params["b"]["t_bits"] == params["d"]["t_bits"] == max(bits["b"][1], bits["d"][1])
    assert params["b"].get("t_n", params["b"]["n"]) == params["d"].get("t_n", params["d"]["n"])
    assert params["c"]["t_bits"] == bits["c"][1]
