"""Where the peer adapters come from: the lycaon-benchmarks distribution (``benchmarks/`` of a
Lycaon checkout), which the installed package does not carry. Each benchmark runs Lycaon's side
without it and says, in :data:`MISSING`, how to get the comparison."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import Optional

#: What a benchmark says when lycaon-benchmarks is not installed.
MISSING = "the peer comparison needs lycaon-benchmarks: pip install -e benchmarks from a Lycaon checkout"


def installed() -> bool:
    """Whether lycaon-benchmarks can be imported here."""
    try:
        return importlib.util.find_spec("lycaon_benchmarks") is not None
    except (ImportError, ValueError):  # a broken or blocked package
        return False


def load(name: str) -> tuple[Optional[ModuleType], Optional[str]]:
    """(the adapter ``lycaon_benchmarks.<name>``, None), or (None, why it cannot be imported):
    :data:`MISSING` without lycaon-benchmarks, else the import error."""
    if not installed():
        return None, MISSING
    try:
        return importlib.import_module(f"lycaon_benchmarks.{name}"), None
    except Exception as exc:  # noqa: BLE001 - any failure to import a peer only disables it
        return None, f"{type(exc).__name__}: {exc}"
