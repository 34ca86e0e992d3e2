"""`lycaon bench gpu`: the CUDA backend's kernels (NTT, INTT, point-wise product, automorphism,
base conversion, key-switching inner product) timed against the CPU reference on the same inputs,
with a bit-for-bit comparison of every output.

The default build has no CUDA backend (the ``cuda`` feature of the native module is off, so the
wheel carries no CUDA code), and a CUDA build may find no driver or device. In either case the
benchmark prints one line saying why and, with ``--json``, writes ``{"gpu": null, "reason": ...}``;
that is a normal outcome, not an error.

GPU times include the per-call host-device transfers of this first version of the backend (only
constant tables stay on the device), so they are not yet kernel times.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Optional

import lycaon


def run(json_path: Optional[str] = None, log_n: int = 16, limbs: int = 24, reps: int = 5, device: int = 0,
        out: Callable[[str], Any] = print) -> dict:
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
        payload = {"gpu": status["device"], "reason": None, "result": result}
    if json_path:
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=2)
    return payload
