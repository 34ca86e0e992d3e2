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
