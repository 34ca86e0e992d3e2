"""The size of Lycaon's worker pool, set from ``--threads`` before the pool starts."""

from __future__ import annotations

import os
from typing import Optional

import lycaon


def set_threads(threads: Optional[int]) -> Optional[str]:
    """Sizes Lycaon's worker pool (rayon's, read when it first starts; party processes that a
    bench starts inherit it). Returns a problem to report, or None."""
    if threads is None:
        return None
    if threads < 1:
        return f"--threads must be at least 1, not {threads}"
    os.environ["RAYON_NUM_THREADS"] = str(threads)
    running = lycaon.ckks_threads()
    if running != threads:
        return f"the worker pool had already started with {running} threads; --threads {threads} came too late"
    return None
