"""The crates keep DESIGN.md's layering: each uses only crates of earlier levels, siblings never
use each other, and nothing depends on the Python crate or the fuzzer."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

LEVELS = {
    "lycaon-math": 1,
    "lycaon-backend": 2,
    # Beside the backend: it implements the backend's trait, so it sits just above it (and below
    # everything that uses a backend).
    "lycaon-cuda": 2.5,
    "lycaon-rlwe": 3,
    "lycaon-bfv": 4,
    "lycaon-ckks": 4,
    "lycaon-nn": 5,
    "lycaon-mpc": 5,
    "lycaon-plan": 6,
    "lycaon-runtime": 7,
    "lycaon-py": 8,
    "lycaon-fuzz": 8,
}
LEAVES = {"lycaon-py", "lycaon-fuzz"}


@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed")
def test_dependency_direction():
    root = Path(__file__).resolve().parent.parent
    meta = json.loads(subprocess.run(["cargo", "metadata", "--format-version", "1", "--no-deps"], cwd=root, capture_output=True, text=True, check=True).stdout)
    crates = {p["name"]: p for p in meta["packages"]}
    for name, pkg in crates.items():
        assert name in LEVELS, f"{name} has no level in DESIGN.md's layering; add it here and to the design"
        for dep in pkg["dependencies"]:
            other = dep["name"]
            if other not in LEVELS or dep.get("kind") == "dev":
                continue
            assert other not in LEAVES, f"{name} depends on {other}, which nothing may depend on"
            assert LEVELS[other] < LEVELS[name], f"{name} (level {LEVELS[name]}) depends on {other} (level {LEVELS[other]})"
