"""The simulator's Python API, its command and its HTML report: the JSON shape issue 7 specifies,
the reproduction rows with their verdicts, clean errors, and a report that renders in a browser."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import lycaon
from lycaon import simulate as sim

from html_render import ChromiumUnavailable, render_check

#: Keys every per-packing result carries (issue 7: {"packing", "latency_s", "energy_j", "rotations", ...}).
RESULT_KEYS = {"model", "packing", "arch", "batch", "latency_s", "energy_j", "rotations", "mults", "ntts", "keyswitches", "bytes",
               "component_latency_s", "component_energy_j", "layers"}


def _cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "lycaon.cli", "simulate", *map(str, args)], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def resnet20():
    return sim.simulate("resnet20")


def test_api_gives_the_issue_json_shape_for_every_packing(resnet20):
    assert [r["packing"] for r in resnet20] == list(sim.PACKINGS)
    for r in resnet20:
        assert RESULT_KEYS <= set(r), r["packing"]
        assert (r["model"], r["arch"], r["batch"]) == ("resnet20", "hyena", 1)
        assert r["latency_s"] > 0 and r["energy_j"] > 0
        assert set(r["bytes"]) == {"input", "weights", "psum", "keys"}
        assert set(r["component_latency_s"]) == set(sim.COMPONENTS) == set(r["component_energy_j"])
        # The network's totals are the sums over its layers.
        assert len(r["layers"]) == 20
        for key in ("latency_s", "energy_j"):
            assert sum(layer[key] for layer in r["layers"]) == pytest.approx(r[key], rel=1e-9)
        for key in ("rotations", "mults", "ntts", "keyswitches"):
            assert isinstance(r[key], int) and sum(layer[key] for layer in r["layers"]) == r[key]
    json.dumps(resnet20)  # plain data
    by = {r["packing"]: r for r in resnet20}
    # BatchWise never rotates (000 Sec. 7.3); Hyena needs far fewer rotations than Channel (Gazelle).
    assert by["batchwise"]["rotations"] == 0
    assert by["hyena"]["rotations"] * 10 < by["channel"]["rotations"]


def test_api_one_packing_f1_inline_layers_and_no_layers():
    one = sim.simulate("resnet20", "Hyena", arch="f1", layers=False)
    assert len(one) == 1 and one[0]["packing"] == "hyena" and one[0]["arch"] == "f1" and "layers" not in one[0]
    layers = [{"name": "c", "kind": "conv", "h": 8, "w": 8, "c_in": 4, "c_out": 8, "k": 3}]
    inline = sim.simulate(layers, "channel")
    assert inline[0]["rotations"] > 0 and len(inline[0]["layers"]) == 1


def test_custom_architecture_from_a_toml_file(tmp_path):
    toml = sim.arch_toml("hyena").replace("clock_mhz = 200.0", "clock_mhz = 400.0").replace('name = "hyena"', 'name = "fast"')
    path = tmp_path / "fast.toml"
    path.write_text(toml)
    base = sim.simulate("gnmt", "hyena", layers=False)[0]
    fast = sim.simulate("gnmt", "hyena", arch=str(path), layers=False)[0]
    assert fast["arch"] == "fast"
    assert fast["latency_s"] <= base["latency_s"]


def test_model_files_json_and_maestro(tmp_path):
    spec = tmp_path / "tiny.json"
    spec.write_text(json.dumps([{"name": "c1", "kind": "conv", "h": 16, "w": 16, "c_in": 8, "c_out": 8, "k": 3, "pad": 1}]))
    r = sim.simulate(str(spec), "hyena")
    assert r[0]["model"] == "tiny"
    m = tmp_path / "tiny.m"
    m.write_text("Network tiny {\nLayer CONV1 {\nType: CONV\nStride { X: 1, Y: 1 }\nDimensions { K: 8, C: 8, R: 3, S: 3, Y: 16, X: 16 }\n}\n}\n")
    r = sim.simulate(m, "hyena")
    assert r[0]["model"] == "tiny" and len(r[0]["layers"]) == 1


def test_api_errors_are_lycaon_errors(tmp_path):
    cases = [
        (lambda: sim.simulate("nope"), "unknown model"),
        (lambda: sim.simulate("resnet20", "zip"), "unknown packing"),
        (lambda: sim.simulate("resnet20", arch="tpu"), "unknown architecture"),
        (lambda: sim.simulate("resnet20", arch=str(tmp_path / "missing.toml")), "architecture file not found"),
        (lambda: sim.simulate("resnet20", arch="clock_mhz = ["), "invalid architecture"),
        (lambda: sim.simulate("resnet20", batch=0), "batch"),
        (lambda: sim.simulate(str(tmp_path / "missing.json")), "model file not found"),
        (lambda: sim.accelerator_sweep("resnet50", pes=[0]), "positive"),
        (lambda: sim.accelerator_sweep("resnet50", schedule="diagonal"), "unknown schedule"),
    ]
    for call, message in cases:
        with pytest.raises(lycaon.LycaonError, match=message):
            call()


def test_reproduction_rows_are_all_present_with_verdicts():
    rows = sim.reproduction()
    by_paper = {"000": [r for r in rows if r["paper_id"] == "000"], "003": [r for r in rows if r["paper_id"] == "003"]}
    # Issue 7's figures of 000, each present once.
    wanted_000 = ["Ch-Pack speedup", "Ch-Pack energy", "A+W-Pack speedup", "A+W-Pack energy", "C2PC-Pack speedup",
                  "ResNet-50 server latency", "MobileNetV2 server latency", "GNMT server latency", "ResNet-20 HE time"]
    for what in wanted_000:
        assert sum(what in r["figure"] for r in by_paper["000"]) == 1, what
    # 003: the ResNet-50 design (latency, area, power), the Pareto points near 30 W / 545 mm^2, Table VI.
    for what in ["latency on 8 PEs x 512", "area on 8 PEs", "power on 8 PEs", "nearest 30 W", "nearest 545", "vgg16 latency", "alexnet latency"]:
        assert any(what in r["figure"] for r in by_paper["003"]), what
    for r in rows:
        assert r["paper"] > 0 and r["ours"] > 0
        assert r["deviation"] == pytest.approx(r["ours"] / r["paper"] - 1, rel=1e-9, abs=1e-12)
        assert r["within_tolerance"] == (abs(r["deviation"]) <= r["tolerance"] + 1e-12)
        if r["within_tolerance"]:
            assert r["verdict"] == "within 25%"
        else:
            # Outside the tolerance only with a precise explanation of the deviation.
            assert r["verdict"] == "explained deviation" and len(r["explanation"]) > 80, r["figure"]
    # GNMT's server latency is exact (000 Sec. 7.2).
    gnmt = next(r for r in by_paper["000"] if r["figure"].startswith("GNMT"))
    assert abs(gnmt["deviation"]) < 0.01


def test_accelerator_sweep_and_batch_study():
    dse = sim.accelerator_sweep("resnet50", pes=[4, 8, 16], lanes=[256, 512, 1024], table_vi=False)
    assert len(dse["points"]) == 9 and "table_vi" not in dse
    assert (dse["chosen"]["pes"], dse["chosen"]["lanes"]) == (8, 512)
    for key, cost in (("pareto_area", "area_mm2"), ("pareto_power", "power_w")):
        front = dse[key]
        assert front
        for p in front:  # nothing in the sweep beats a front point in both
            assert not any(q["latency_s"] < p["latency_s"] and q[cost] < p[cost] for q in dse["points"])
    full = sim.accelerator_sweep("resnet50")
    assert len(full["points"]) == 10 * 12 and [t["model"] for t in full["table_vi"]] == ["resnet50", "vgg16", "alexnet"]
    study = sim.batch_study()
    assert {(r["packing"], r["batch"]) for r in study} == {(p, b) for p in sim.BATCH_STUDY_PACKINGS for b in sim.BATCH_STUDY_SIZES}
    lat = {(r["packing"], r["batch"]): r["latency_s"] for r in study}
    # 000 Fig. 9: Hyena's batch latency grows linearly, BatchWise's stays flat up to 512 and wins there.
    assert lat[("hyena", 512)] == pytest.approx(512 * lat[("hyena", 1)], rel=1e-9)
    assert lat[("batchwise", 512)] == pytest.approx(lat[("batchwise", 1)], rel=1e-12)
    assert lat[("batchwise", 512)] < lat[("hyena", 512)]


def test_cli_writes_json_and_html(tmp_path):
    js, page = tmp_path / "r20.json", tmp_path / "r20.html"
    out = _cli("--model", "resnet20", "--json", js, "--html", page)
    assert out.returncode == 0, out.stderr
    for word in ("resnet20 on hyena", "hyena+", "batchwise", "key switches", "Totals per model"):
        assert word in out.stdout, word
    rows = json.loads(js.read_text())
    assert isinstance(rows, list) and [r["packing"] for r in rows] == list(sim.PACKINGS)
    assert all(RESULT_KEYS <= set(r) for r in rows)
    # The same numbers as the API.
    api = {r["packing"]: r["latency_s"] for r in sim.simulate("resnet20", layers=False)}
    assert all(r["latency_s"] == pytest.approx(api[r["packing"]], rel=1e-12) for r in rows)
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and text.count('<figure class="chart"') >= 7  # 5 per model + 2 of the batch study
    assert "Reproduction of the papers" in text and "<script" not in text


def test_cli_reproduce_and_sweep(tmp_path):
    page = tmp_path / "sweep.html"
    out = _cli("--model", "resnet50", "--packing", "hyena", "--reproduce", "--sweep", "--html", page)
    assert out.returncode == 0, out.stderr
    for word in ("Reproduction of 000", "GNMT server latency", "Pareto front of latency against area", "Table VI", "chosen: 8 PEs x 512 lanes"):
        assert word in out.stdout, word
    text = page.read_text()
    assert "Accelerator design space" in text and "Generality study" in text
    # Reproduction alone, as JSON rows.
    rep = tmp_path / "rep.json"
    out = _cli("--reproduce", "--json", rep)
    assert out.returncode == 0, out.stderr
    assert len(json.loads(rep.read_text())) == len(sim.reproduction())


@pytest.mark.parametrize("args, message", [
    (["--model", "nope"], "unknown model"),
    (["--model", "resnet20", "--packing", "zip"], "unknown packing"),
    (["--model", "resnet20", "--arch", "missing/custom.toml"], "architecture file not found"),
    (["--model", "resnet20", "--arch", "tpu"], "unknown architecture"),
    (["--model", "missing.json"], "model file not found"),
    (["--model", "resnet20", "--batch", "0"], "batch"),
    ([], "give --model"),
    (["--sweep"], "--sweep"),
])
def test_cli_errors_are_clean(args, message, tmp_path):
    out = _cli(*args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr and message in out.stderr, out.stderr


def test_cli_bad_toml_file_is_clean(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("clock_mhz = [\n")
    out = _cli("--model", "resnet20", "--arch", bad)
    assert out.returncode == 2 and "Traceback" not in out.stderr and "invalid architecture" in out.stderr


def test_report_renders_in_a_browser(tmp_path):
    page = tmp_path / "report.html"
    results = sim.simulate("resnet20") + sim.simulate("hepack-resnet50")
    sim.write_report(results, page, sweep=sim.accelerator_sweep("resnet50"))
    try:
        seen = render_check(page)
    except ChromiumUnavailable as exc:
        pytest.skip(f"cannot render HTML: {exc}")
    assert seen["console_errors"] == [] and seen["exceptions"] == [] and seen["log_errors"] == [], seen
    # 5 charts per model, 2 of the batch study, 2 Pareto fronts; every one drawn.
    assert len(seen["charts"]) == 2 * 5 + 2 + 2
    blank = [c for c in seen["charts"] if c["blank"]]
    assert not blank, blank
    assert seen["ok"]


def test_render_check_finds_a_blank_chart(tmp_path):
    page = tmp_path / "blank.html"
    page.write_text('<!DOCTYPE html><html><head><meta charset="utf-8"><title>t</title></head><body>'
                    '<figure class="chart" id="empty"><svg width="300" height="200"></svg><figcaption>nothing drawn</figcaption></figure>'
                    '<script>console.error("boom")</script></body></html>')
    try:
        seen = render_check(page)
    except ChromiumUnavailable as exc:
        pytest.skip(f"cannot render HTML: {exc}")
    assert not seen["ok"] and seen["charts"][0]["blank"] and any("boom" in e for e in seen["console_errors"])
