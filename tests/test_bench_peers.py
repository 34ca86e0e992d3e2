"""The benchmarks without lycaon-benchmarks (the peer adapters live in benchmarks/, outside the
installed package): Lycaon's side still runs and one sentence says how to get the comparison."""

import io
import json
import subprocess
import sys

import pytest

from lycaon.bench import peers

# A child interpreter in which lycaon_benchmarks cannot be found, installed or not.
WITHOUT_BENCHMARKS = "import sys; sys.modules['lycaon_benchmarks'] = None; from lycaon.cli import main; sys.exit(main(sys.argv[1:]))"


def test_load_names_the_distribution_when_it_is_missing(monkeypatch):
    monkeypatch.setattr(peers.importlib.util, "find_spec", lambda name: None)
    assert not peers.installed()
    assert peers.load("seal_peer") == (None, peers.MISSING)
    assert "pip install -e benchmarks" in peers.MISSING


def test_load_finds_an_installed_adapter():
    if not peers.installed():
        pytest.skip(peers.MISSING)
    module, why = peers.load("seal_peer")
    assert why is None and module.__name__ == "lycaon_benchmarks.seal_peer"


def test_bench_bfv_without_benchmarks_runs_lycaon_alone_and_says_how(tmp_path):
    path = tmp_path / "bfv.json"
    out = subprocess.run([sys.executable, "-c", WITHOUT_BENCHMARKS, "bench", "bfv", "--n", "4096", "--reps", "1", "--json", str(path)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert f"SEAL peer unavailable ({peers.MISSING}): showing Lycaon only" in out.stdout
    rows = json.loads(path.read_text())
    assert rows and all(r["lycaon_us"] > 0 and r["peer"] is None and r["ratio"] is None for r in rows)


def test_bench_fhe_without_benchmarks_skips_orions_networks_and_says_how(monkeypatch):
    from lycaon.bench import fhe

    monkeypatch.setattr(peers, "installed", lambda: False)
    out = io.StringIO()
    assert fhe.run(["mlp"], images=1, peer=False, out=out) == []
    assert out.getvalue().strip() == f"mlp: not run (Orion's network, its weights drawn by the Orion adapter); {peers.MISSING}"


def test_bench_ckks_without_benchmarks_says_it_once(monkeypatch):
    from lycaon.bench import ckks

    for module, error in (("seal_ckks_peer", "_SEAL_IMPORT_ERROR"), ("lattigo_peer", "_LATTIGO_IMPORT_ERROR")):
        monkeypatch.setattr(ckks, module, None)
        monkeypatch.setattr(ckks, error, peers.MISSING)
    lines: list[str] = []
    records = ckks.run([14], reps=1, lt_diagonals=16, out=lines.append)
    assert f"peers unavailable: showing Lycaon only ({peers.MISSING})" in lines
    assert records and all(r["peer"] is None for r in records)
