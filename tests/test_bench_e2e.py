"""`lycaon bench e2e`: the Lycaon half on LeNet-5 with one real MNIST test image (server and
client over loopback TCP), the records' keys and ratios, the time breakdown adding up, and the SPU
half when the optional spu package is importable (skipped otherwise). The plan is written here,
as in test_hybrid.py, so the test needs no cost calibration."""

import json

import numpy as np
import pytest

import lycaon
from hybrid_plans import coefficient_plan
from lycaon.bench import e2e

native = pytest.mark.skipif(not hasattr(lycaon._native, "HybridServer"), reason="the native module has no hybrid runtime")
MODEL = "lenet5-mnist"


def _plan() -> dict:
    from lycaon.frontend import simplify, zoo  # noqa: PLC0415

    return coefficient_plan(simplify(zoo.load_model(MODEL)))


@pytest.fixture(scope="module")
def lenet_run():
    """One LeNet-5 image through Lycaon: (the run's summary, the preprocessed image)."""
    try:
        server = e2e.start_server(MODEL, plan=_plan())
    except lycaon.frontend.ir.ModelError as e:  # no MNIST training images to calibrate on
        pytest.skip(str(e))
    try:
        raw, labels = e2e.bundled_images(MODEL, 1)
        lyc = e2e.run_lycaon(server, raw, labels)
    finally:
        server.stop()
    return lyc, lyc.pop("x")


def test_link_time_is_bytes_over_bandwidth_plus_a_round_trip_per_round():
    assert e2e.link_seconds(2.5e8, 0, "lan") == pytest.approx(1.0)  # 2 Gbps
    assert e2e.link_seconds(0, 10, "wan") == pytest.approx(0.4)  # 20 ms one way
    assert e2e.link_seconds(5e7, 1, "wan") == pytest.approx(1.04)


@native
def test_lycaon_half_records_and_ratios(lenet_run):
    lyc, _ = lenet_run
    assert lyc["images"] == 1 and lyc["bytes"] > 0 and lyc["rounds"] > 0 and lyc["top1_equal_fixed_point"]
    for link in e2e.LINKS:
        assert lyc["links"][link]["total_s"] == pytest.approx(lyc["total_s"] + e2e.link_seconds(lyc["bytes"], lyc["rounds"], link))
    # Without a peer: the record keys all there, the peer's fields and the ratios empty.
    records, details = e2e.make_records({"lan": lyc, "wan": lyc}, {"peer": e2e.PEER, "error": "peer not installed"})
    assert [r["link"] for r in records] == list(e2e.LINKS)
    for r, d in zip(records, details):
        assert tuple(r) == e2e.RECORD_KEYS and r["model"] == MODEL and r["peer"] == e2e.PEER
        assert r["peer_s"] is None and r["time_ratio"] is None and r["bytes_ratio"] is None and d["peer_error"] == "peer not installed"
    # With a peer result (made up here): the ratios are Lycaon over the peer's cold run.
    fake = {"first_run_s": 2.0, "first_run_bytes": 4_000_000, "peer_s": 1.0, "peer_bytes": 1_000_000, "weights": "secret",
            "links": {link: {"cold_s": 2.0 + e2e.link_seconds(4e6, 0, link), "warm_s": 1.0 + e2e.link_seconds(1e6, 0, link)} for link in e2e.LINKS}}
    records, details = e2e.make_records({"lan": lyc, "wan": lyc}, fake)
    for r, d in zip(records, details):
        assert r["time_ratio"] == pytest.approx(r["lycaon_s"] / fake["links"][r["link"]]["cold_s"])
        assert r["bytes_ratio"] == pytest.approx(lyc["bytes"] / 4e6) and d["bytes_ratio_vs_warm"] == pytest.approx(lyc["bytes"] / 1e6)
    json.dumps(records + details)  # plain JSON


@native
def test_breakdown_adds_up_to_the_session(lenet_run):
    lyc, _ = lenet_run
    image = lyc["per_image"][0]
    b = e2e.breakdown(image)
    loopback = [row for row in b["rows"] if "link" not in row]
    assert sum(row["seconds"] for row in loopback) == pytest.approx(image["total_s"])
    assert sum(row.get("bytes", 0) for row in loopback) == image["bytes"] and sum(row.get("rounds", 0) for row in loopback) == image["rounds"]
    assert min(row["seconds"] for row in loopback) >= -1e-3


def test_the_peer_says_when_it_is_missing(monkeypatch):
    monkeypatch.setattr(e2e.importlib.util, "find_spec", lambda name: None)
    assert e2e.peer_missing().startswith("peer not installed")
    assert e2e.run_peer(MODEL, np.zeros((1, 1, 28, 28)))["error"].startswith("peer not installed")


@native
def test_spu_half_matches_the_float_model(lenet_run):
    if e2e.peer_missing():
        pytest.skip(e2e.peer_missing())
    lyc, x = lenet_run
    peer = e2e.run_peer(MODEL, x)
    assert "error" not in peer, peer.get("error")
    assert peer["top1_equal"] and peer["first_run_bytes"] > 0 and peer["peer_bytes"] > 0
    records, _ = e2e.make_records({"lan": lyc, "wan": lyc}, peer)
    for r in records:
        assert r["time_ratio"] > 0 and r["bytes_ratio"] == pytest.approx(lyc["bytes"] / peer["first_run_bytes"])


@native
def test_the_walsh_comparison_runs_both_packings_end_to_end(tmp_path):
    """``lycaon bench e2e --models resnet20 --algorithm walsh``, 001's comparison: the network once
    with the Walsh-Hadamard convolution on the layers where the planner finds it faster than the
    conventional packed one (001 applies it to the large feature maps), once with the
    conventional one throughout, the fully connected layer alike, each party in its own process,
    both decrypting to the fixed-point twin; the comparison record is the ratio of the two runs
    (the conventional run's keys cross one per message when its layers need them)."""
    from lycaon.bench import imagenet

    out = tmp_path / "r20.json"
    walsh, conventional = imagenet.run(["resnet20"], str(out), algorithms=["walsh"], compare_packed=True)
    assert walsh["algorithms"] == ["walsh", "gazelle", "cheetah-matvec"] and conventional["algorithms"] == ["gazelle", "cheetah-matvec"]
    assert walsh["equal_to_fixed_point_twin"] and conventional["equal_to_fixed_point_twin"]
    fc = [l["name"] == "linear" for l in walsh["layers"]]
    assert len(fc) >= 20 and fc.count(True) == 1
    assert [l["algorithm"] for l in conventional["layers"]] == ["cheetah-matvec" if f else "gazelle-IA" for f in fc]
    chosen = [l["algorithm"] for l in walsh["layers"]]
    assert [a == "cheetah-matvec" for a in chosen] == fc and "walsh" in chosen and set(chosen) <= {"walsh", "gazelle-IA", "cheetah-matvec"}
    assert walsh["layers_by_algorithm"]["walsh"] == chosen.count("walsh")
    c = conventional["compared_with_conventional"]
    assert c["latency"] == pytest.approx(conventional["total_s"] / walsh["total_s"])
    assert c["communication"] == pytest.approx(conventional["bytes"] / walsh["bytes"])
    assert json.loads(out.read_text())["records"][1]["compared_with_conventional"] == c
