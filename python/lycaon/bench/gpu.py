"""`lycaon bench gpu`: the CUDA backend's kernels (NTT, INTT, point-wise product, automorphism,
base conversion, key-switching inner product) timed against the CPU reference on the same inputs,
with a bit-for-bit comparison of every output.

The default build has no CUDA backend (the ``cuda`` feature of the native module is off, so the
wheel carries no CUDA code), and a CUDA build may find no driver or device. In either case the
benchmark prints one line saying why and, with ``--json``, writes ``{"gpu": null, "reason": ...}``;
that is a normal outcome, not an error.

The kernel table's GPU times include per-call host-device transfers (that path serves the
``Backend`` trait, whose operands live on the host). The operations table runs CKKS operations on
resident operands (ciphertexts, plaintexts and keys uploaded once and kept in device memory,
``ResidentEvaluator``), synchronised after each run, against the host evaluator on every core;
every result is downloaded and compared bit for bit.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Optional

import lycaon


def run(json_path: Optional[str] = None, log_n: int = 16, limbs: int = 24, reps: int = 5, device: int = 0,
        out: Callable[[str], Any] = print, levels: Optional[int] = None) -> dict:
    """Benchmarks device ``device`` if it can; returns the JSON payload (also written to ``json_path``)."""
    status = lycaon.gpu_status(device)
    if not status["available"]:
        reason = status["reason"]
        out(f"no GPU: {reason}")
        payload: dict = {"gpu": None, "reason": reason}
    else:
        result = lycaon.gpu_bench(log_n, limbs, reps, device)
        out(f"{status['device']['name']}: n = {result['n']}, {result['limbs']} limbs, median of {result['reps']}")
        out(f"{'kernel':<24}{'gpu ms':>10}{'cpu ms':>10}{'gpu/cpu':>9}  bit-exact")
        for k in result["kernels"]:
            k["gpu_over_cpu"] = k["gpu_ms"] / k["cpu_ms"] if k["cpu_ms"] > 0 else None
            ratio = f"{k['gpu_over_cpu']:>9.3f}" if k["gpu_over_cpu"] is not None else f"{'-':>9}"
            out(f"{k['kernel']:<24}{k['gpu_ms']:>10.3f}{k['cpu_ms']:>10.3f}{ratio}  {'yes' if k['matches_cpu'] else 'NO'}")
        ops = operations(log_n, levels if levels is not None else limbs, reps, f"cuda:{device}", out)
        payload = {"gpu": status["device"], "reason": None, "result": result, "operations": ops}
    if json_path:
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=2)
    return payload


def operations(log_n: int, levels: int, reps: int, device: str, out: Callable[[str], Any] = print) -> dict:
    """The operations table: resident CKKS operations on ``device`` against the host evaluator."""
    ops = lycaon.gpu_ops_bench(log_n, levels, reps, device)
    out(f"resident operations ({ops['backend']}): n = {ops['n']}, {ops['levels']} levels, "
        f"{ops['key_bytes'] / 2**20:.0f} MiB of keys on the device, "
        f"{ops['allocations_after_warmup']} allocations after warm-up")
    out(f"{'operation':<24}{'device ms':>10}{'cpu ms':>10}{'dev/cpu':>9}  bit-exact")
    for o in ops["ops"]:
        o["device_over_cpu"] = o["device_ms"] / o["cpu_ms"] if o["cpu_ms"] > 0 else None
        ratio = f"{o['device_over_cpu']:>9.3f}" if o["device_over_cpu"] is not None else f"{'-':>9}"
        out(f"{o['op']:<24}{o['device_ms']:>10.3f}{o['cpu_ms']:>10.3f}{ratio}  {'yes' if o['matches_cpu'] else 'NO'}")
    return ops
