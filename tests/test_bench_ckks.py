"""`lycaon bench ckks`: the JSON shape, ratios and precision, at logN = 14 with a small linear
transform (no bootstrapping: the logN = 16 bootstrap rows need ~10-19 GB and minutes)."""

import importlib.util
import json
import subprocess
import sys

import pytest

import lycaon
from lycaon.bench import ckks as bench

OPS_WITHOUT_BOOTSTRAP = {"mul_relin", "rescale", "rotate_1", "rotate_hoisted_8", "linear_transform", "poly_63"}


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def test_lycaon_only_records_have_the_bfv_shape_and_precision(tmp_path):
    path = tmp_path / "ckks.json"
    lines = []
    records = bench.run([14], reps=1, json_path=str(path), peer=False, lt_diagonals=16, out=lines.append)
    assert any("Lycaon only" in line for line in lines)
    assert {r["op"] for r in records} == OPS_WITHOUT_BOOTSTRAP
    for r in records:
        assert r["n"] == 1 << 14 and r["log_n"] == 14
        assert r["lycaon_us"] > 0
        assert r["peer"] is None and r["peer_us"] is None and r["ratio"] is None
        assert r["precision_bits"] > 15, r
        assert r["threads"] == lycaon.ckks_threads()
        if r["op"] != "rescale":
            assert r["key_bytes"] > 0
    lt = next(r for r in records if r["op"] == "linear_transform")
    assert lt["diagonals"] == 16 and lt["level"] == 1
    assert next(r for r in records if r["op"] == "poly_63")["levels_used"] == 6
    payload = json.loads(path.read_text())
    assert set(payload) == {"info", "records"}
    assert payload["records"] == records
    assert payload["info"]["threads"] == lycaon.ckks_threads()


def test_level_limited_keys_are_smaller():
    params = bench.parameters(14)
    kg = lycaon.CkksKeyGenerator(params)
    full = kg.galois_keys([1])
    low = kg.galois_keys([1], level=1)
    # 9 digits over 10 limbs against 2 digits over 3 limbs (one special prime).
    assert full.memory_bytes == 9 * 2 * 10 * params.n * 8
    assert low.memory_bytes == 2 * 2 * 3 * params.n * 8


def test_bootstrap_record_carries_precision_and_levels_left():
    ours = {"bootstrap_us": 2e7, "bootstrap_bits": 22.5, "bootstrap_min_bits": 19.0, "bootstrap_levels_left": 10, "bootstrap_first_s": 40.0, "bootstrap_cpu_s": 36.0,
            "bootstrap_key_bytes": 6 << 30, "bootstrap_key_bytes_seeded": 3 << 30, "bootstrap_rss_growth_bytes": 9 << 30,
            "bootstrap_params": "CkksParameters(...)", "bootstrap_log2_qp": 1725.0}
    theirs = {"bootstrap_s": 25.0, "bootstrap_precision_bits": 19.0, "bootstrap_levels_left": 10, "bootstrap_rss_growth_bytes": 17 << 30, "threads": 2}
    rec = bench._record("bootstrap", 16, ours, "lattigo", theirs, 2)
    assert rec["ratio"] == pytest.approx(20.0 / 25.0, abs=1e-3)
    assert rec["precision_bits"] == 22.5 and rec["peer_precision_bits"] == 19.0
    assert rec["levels_left"] == 10 and rec["peer_levels_left"] == 10
    assert rec["peer_rss_growth_bytes"] == 17 << 30
    # SEAL has no bootstrapping: the record says so instead of a time.
    seal = bench._record("bootstrap", 16, ours, "seal", {"mul_relin_s": 0.1}, 2)
    assert seal["peer_us"] is None and seal["ratio"] is None and "no bootstrap" in seal["peer_note"]


def test_unsupported_ring_degree_is_refused():
    with pytest.raises(lycaon.ParameterError):
        bench.run([13], reps=1, peer=False, out=lambda _: None)


@pytest.mark.skipif(not (_has("lycaon_benchmarks") and (_has("tenseal") or _has("orion"))),
                    reason="no CKKS peer installed (lycaon-benchmarks with tenseal or orion-fhe)")
def test_peers_in_the_same_run_give_ratios(tmp_path):
    path = tmp_path / "ckks.json"
    bench.run([14], reps=1, json_path=str(path), lt_diagonals=16, out=lambda _: None)
    records = json.loads(path.read_text())["records"]
    peers = {r["peer"] for r in records}
    assert peers <= {"seal", "lattigo"} and peers
    assert all(r.get("peer_note") is None or "failed" not in r["peer_note"] for r in records)
    for r in records:
        if r["peer_us"] is not None:
            assert r["ratio"] == pytest.approx(r["lycaon_us"] / r["peer_us"], rel=1e-2)
            assert r["peer_precision_bits"] is None or r["peer_precision_bits"] > 10
        assert r["precision_bits"] > 15
    seal = {r["op"]: r for r in records if r["peer"] == "seal"}
    if seal:
        assert seal["mul_relin"]["ratio"] is not None and seal["poly_63"]["ratio"] is None  # SEAL has no polynomial evaluator


def test_cli_refuses_an_unbenchmarked_ring_degree():
    out = subprocess.run([sys.executable, "-m", "lycaon.cli", "bench", "ckks", "--logn", "13", "--no-peer"], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "invalid choice" in out.stderr
