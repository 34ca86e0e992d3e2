"""`lycaon bench gpu` without a GPU: one line saying why, exit status 0, and a JSON file with
{"gpu": null, "reason": ...}. The default build has no CUDA backend, so this is what CI sees."""

import json
import subprocess
import sys

import pytest

import lycaon
from lycaon.bench import gpu as bench


def _no_gpu() -> bool:
    return not lycaon.gpu_status()["available"]


def test_status_reports_the_build_and_a_reason():
    status = lycaon.gpu_status()
    assert set(status) == {"built_with_cuda", "available", "reason", "device"}
    if not status["built_with_cuda"]:
        assert status["available"] is False and status["device"] is None
        assert "built without the `cuda` feature" in status["reason"]
    if not status["available"]:
        assert status["reason"]


@pytest.mark.skipif(not _no_gpu(), reason="a CUDA device is present: the no-GPU path does not apply")
def test_cli_without_gpu_says_why_in_one_line_and_exits_cleanly(tmp_path):
    path = tmp_path / "gpu.json"
    out = subprocess.run([sys.executable, "-m", "lycaon.cli", "bench", "gpu", "--json", str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("no GPU: "), out.stdout
    assert out.stderr == ""
    payload = json.loads(path.read_text())
    assert payload == {"gpu": None, "reason": lycaon.gpu_status()["reason"]}
    assert payload["reason"] in lines[0]


@pytest.mark.skipif(not _no_gpu(), reason="a CUDA device is present: the no-GPU path does not apply")
def test_run_without_json_returns_the_payload():
    lines = []
    payload = bench.run(out=lines.append)
    assert payload["gpu"] is None and lines == [f"no GPU: {payload['reason']}"]


@pytest.mark.skipif(not _no_gpu(), reason="a CUDA device is present: the no-GPU path does not apply")
def test_gpu_bench_raises_without_gpu():
    with pytest.raises(lycaon.LycaonError, match="CUDA|cuda"):
        lycaon.gpu_bench(log_n=10, limbs=2, reps=1)
