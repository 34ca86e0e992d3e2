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


def test_resident_operations_on_host_memory_match_the_host_evaluator():
    # The operations table's path, run with resident memory on the host (the reference the CUDA
    # backend must equal): every operation bit for bit, printed as the GPU table is.
    lines = []
    ops = bench.operations(log_n=6, levels=3, reps=1, device="cpu", out=lines.append)
    assert ops["backend"] == "cpu" and ops["n"] == 64 and ops["key_bytes"] > 0
    names = [o["op"] for o in ops["ops"]]
    assert {"mul_relin_rescale", "rotate_hoisted_8", "rescale", "linear_transform_16", "upload", "download"} <= set(names)
    assert all(o["matches_cpu"] for o in ops["ops"]), ops
    assert lines[0].startswith("resident operations (cpu): n = 64, 3 levels") and len(lines) == 2 + len(names)


@pytest.mark.skipif(not _no_gpu(), reason="a CUDA device is present: the no-GPU path does not apply")
def test_resident_operations_on_a_missing_gpu_say_why():
    with pytest.raises(lycaon.LycaonError, match="cuda:0 is not available"):
        lycaon.gpu_ops_bench(log_n=6, levels=2, reps=1, device="cuda:0")
    with pytest.raises(lycaon.ParameterError, match="unknown device"):
        lycaon.gpu_ops_bench(log_n=6, levels=2, reps=1, device="gpu7")
