"""Lattigo (Go) as the CKKS peer of ``lycaon bench ckks``, through the shared library that the
``orion-fhe`` wheel ships (``orion/backend/lattigo/lattigo-linux.so``).

orion-fhe is an optional extra and heavy (it pulls in torch); only its shared library is used
here, through ctypes bindings written for this benchmark, so ``pip install --no-deps orion-fhe``
is enough. The Python package ``orion`` is never imported (its ``__init__`` imports torch).

The library is a thin C facade over Lattigo v6: one global scheme (parameters, keys, encoder,
encryptor, decryptor, evaluator, polynomial and linear-transform evaluators, bootstrappers) whose
objects live in Go heaps and are referred to by integer ids. Two facts of that facade shape what
is timed:

- values cross the boundary as C ``float`` (32-bit), so Lattigo's measured precision here is
  capped near 24 bits by the input rounding, not by Lattigo;
- a Go panic aborts the whole process, so :func:`run` executes the peer in a child process and
  reads its JSON; a crash becomes an ``error`` entry instead of taking the benchmark down.

Timed (median of ``reps`` unless said otherwise; inputs made outside the timed region):
``mul_relin`` = ``MulRelinCiphertextNew``; ``rescale`` = the in-place ``Rescale`` of a fresh
product; ``rotate_1`` = ``RotateNew`` by 1 with its key present; ``rotate_hoisted_k`` = k
``RotateNew`` calls (steps 1..k; the facade exports no hoisted rotation); ``linear_transform`` =
Lattigo's ``lintrans`` evaluator (BSGS, hoisted) on the given diagonals at ``lt_level``, then
``Rescale`` (Lycaon's and SEAL's transforms include their rescale); ``poly_63`` = Chebyshev
polynomial of degree 63 on [-1, 1]; ``bootstrap`` = one full-slot ``Bootstrap`` (Lattigo's default
bootstrapping parameters on top of the residual chain, as Orion sets them up; its transforms'
diagonals are encoded in ``NewBootstrapper``, so the first call is timed). Ciphertexts made by a
timed call are freed after it, untimed. Threads: Go's GOMAXPROCS (set by :func:`run`); Lattigo's
evaluator itself runs each operation on one goroutine.
Memory is the process's resident set: after key generation for the operations, its growth in
``NewBootstrapper`` (bootstrapping keys and encoded diagonals), and its peak.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Callable, Optional, Sequence

import numpy as np


def library_path() -> str:
    """Path of Lattigo's shared library inside the installed orion-fhe wheel."""
    spec = importlib.util.find_spec("orion")  # finds the package without importing it (no torch)
    if spec is None or spec.origin is None:
        raise ImportError("the Lattigo peer needs orion-fhe, an optional extra: pip install --no-deps orion-fhe")
    path = os.path.join(os.path.dirname(spec.origin), "backend", "lattigo", "lattigo-linux.so")
    if not os.path.exists(path):
        raise ImportError(f"orion-fhe is installed but has no Lattigo library at {path} (only Linux x86-64 wheels ship it)")
    return path


class _CArray(ctypes.Structure):
    """The (pointer, length) pair the facade returns for arrays (Go multiple return values)."""

    _fields_ = [("data", ctypes.c_void_p), ("length", ctypes.c_ulong)]


def _ints(values: Sequence[int]):
    return (ctypes.c_int * len(values))(*values)


def _floats(values: Sequence[float]):
    return (ctypes.c_float * len(values))(*values)


class Lattigo:
    """One Lattigo scheme in this process (the facade holds a single global scheme)."""

    def __init__(self, log_n: int, log_q: Sequence[int], log_p: Sequence[int], log_scale: int, hamming_weight: int):
        lib = ctypes.CDLL(library_path())
        self.lib = lib
        int_fns = ["Encode", "Encrypt", "Decrypt", "RotateNew", "RescaleNew", "MulRelinCiphertextNew", "GenerateChebyshev",
                   "EvaluatePolynomial", "GenerateLinearTransform", "EvaluateLinearTransform", "Bootstrap", "GetCiphertextLevel"]
        for name in int_fns:
            getattr(lib, name).restype = ctypes.c_int
        lib.Encode.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.c_int, ctypes.c_int, ctypes.c_ulong]
        lib.EvaluatePolynomial.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_ulong]
        lib.GenerateLinearTransform.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.POINTER(ctypes.c_float), ctypes.c_int, ctypes.c_int, ctypes.c_float, ctypes.c_char_p]
        lib.Decode.restype = _CArray
        lib.GetLinearTransformRotationKeys.restype = _CArray
        lib.FreeCArray.argtypes = [ctypes.c_void_p]
        self.log_n = log_n
        self.slots = 1 << (log_n - 1)
        self.scale = 1 << log_scale
        self.max_level = len(log_q) - 1
        lib.NewScheme(log_n, _ints(log_q), len(log_q), _ints(log_p), len(log_p), log_scale, hamming_weight, b"standard", b"", b"none")
        lib.NewKeyGenerator()
        lib.GenerateSecretKey()
        lib.GeneratePublicKey()
        lib.GenerateRelinearizationKey()
        lib.GenerateEvaluationKeys()
        lib.NewEncoder()
        lib.NewEncryptor()
        lib.NewDecryptor()
        lib.NewEvaluator()  # also generates every power-of-two rotation key, as Orion always does
        lib.NewPolynomialEvaluator()
        lib.NewLinearTransformEvaluator()

    def encrypt(self, values: np.ndarray, level: Optional[int] = None) -> int:
        level = self.max_level if level is None else level
        pt = self.lib.Encode(_floats(values.tolist()), len(values), level, self.scale)
        return self.lib.Encrypt(pt)

    def decrypt(self, ct: int) -> np.ndarray:
        arr = self.lib.Decode(self.lib.Decrypt(ct))
        out = np.ctypeslib.as_array(ctypes.cast(arr.data, ctypes.POINTER(ctypes.c_float)), shape=(arr.length,)).astype(np.float64)
        self.lib.FreeCArray(arr.data)
        return out

    def level(self, ct: int) -> int:
        return self.lib.GetCiphertextLevel(ct)


def _median_s(op: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        op()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _rss_bytes(peak: bool = False) -> int:
    key = "VmHWM:" if peak else "VmRSS:"
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    return 0


def precision_bits(expected: np.ndarray, got: np.ndarray) -> float:
    """Mean bits of precision: -log2 of the mean absolute error."""
    err = float(np.mean(np.abs(np.asarray(expected) - np.asarray(got))))
    return float(-np.log2(max(err, 2.0 ** -60)))


def _float_buffer(values: np.ndarray):
    """A C float array over a float32 copy of ``values`` (no Python list: a dense 2^13 x 2^13
    matrix is 67 million values). Keep the returned array alive while the pointer is used."""
    arr = np.ascontiguousarray(np.asarray(values, dtype=np.float32).ravel())
    return arr, arr.ctypes.data_as(ctypes.POINTER(ctypes.c_float))


def measure(log_n: int, log_q: Sequence[int], log_p: Sequence[int], log_scale: int, hamming_weight: int, reps: int, bootstrap: bool, lt_diagonals: int,
            lt_level: Optional[int] = None, hoisted: int = 8, operations: bool = True, boot_log_p: Optional[Sequence[int]] = None) -> dict:
    """Runs the operations in this process and returns the figures (call through :func:`run`).
    ``operations=False`` skips everything but bootstrapping (whose keys alone take most of the
    machine's memory at logN = 16); ``boot_log_p`` are the bootstrapping keys' special primes
    (default: the scheme's ``log_p``)."""
    rss0 = _rss_bytes()
    t0 = time.perf_counter()
    lat = Lattigo(log_n, log_q, log_p, log_scale, hamming_weight)
    lib = lat.lib
    lib.AddRotationKey(1)
    out: dict = {"peer": "lattigo (orion-fhe)", "log_n": log_n, "keygen_s": time.perf_counter() - t0,
                 "threads": int(os.environ.get("GOMAXPROCS", os.cpu_count() or 1))}
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, lat.slots)
    y = rng.uniform(-1, 1, lat.slots)

    def timed_ids(op: Callable[[], object], count: int) -> float:
        """Median seconds of ``op`` (which returns new ciphertext ids, freed untimed after each run)."""
        times = []
        for _ in range(count):
            start = time.perf_counter()
            ids = op()
            times.append(time.perf_counter() - start)
            for i in ids if isinstance(ids, list) else [ids]:
                lib.DeleteCiphertext(i)
        return statistics.median(times)

    if operations:
        cx, cy = lat.encrypt(x), lat.encrypt(y)
        out["mul_relin_s"] = timed_ids(lambda: lib.MulRelinCiphertextNew(cx, cy), reps)
        times = []
        for _ in range(reps):
            fresh = lib.MulRelinCiphertextNew(cx, cy)
            start = time.perf_counter()
            lib.Rescale(fresh)  # in place, no copy
            times.append(time.perf_counter() - start)
            lib.DeleteCiphertext(fresh)
        out["rescale_s"] = statistics.median(times)
        prod = lib.MulRelinCiphertextNew(cx, cy)
        out["mul_precision_bits"] = precision_bits(x * y, lat.decrypt(lib.Rescale(prod)))
        out["rotate_1_s"] = timed_ids(lambda: lib.RotateNew(cx, 1), reps)
        out["rotate_precision_bits"] = precision_bits(np.roll(x, -1), lat.decrypt(lib.RotateNew(cx, 1)))
        for k in range(1, hoisted + 1):
            lib.AddRotationKey(k)
        # The facade has no hoisted rotation: k independent RotateNew calls (Lattigo's own
        # RotateHoistedNew is not exported).
        out[f"rotate_hoisted_{hoisted}_s"] = timed_ids(lambda: [lib.RotateNew(cx, k) for k in range(1, hoisted + 1)], reps)
        out[f"rotate_hoisted_{hoisted}_note"] = f"{hoisted} independent rotations: the orion-fhe facade exports no hoisted rotation"

        # Banded matrix with lt_diagonals consecutive diagonals (a dense slots x slots matrix when
        # lt_diagonals == slots), applied at lt_level (default: the top), rescaled as Lycaon's
        # and SEAL's transforms are.
        level = lat.max_level if lt_level is None else lt_level
        cl = lat.encrypt(x, level=level)
        idx = list(range(lt_diagonals))
        diags = rng.uniform(-1, 1, (lt_diagonals, lat.slots)) / lt_diagonals
        buf, ptr = _float_buffer(diags)
        lt = lib.GenerateLinearTransform(_ints(idx), len(idx), ptr, buf.size, level, ctypes.c_float(2.0), b"none")
        del buf
        gal = lib.GetLinearTransformRotationKeys(lt)
        galois = np.ctypeslib.as_array(ctypes.cast(gal.data, ctypes.POINTER(ctypes.c_int)), shape=(gal.length,)).tolist()
        for g in galois:
            lib.GenerateLinearTransformRotationKey(int(g))
        lib.FreeCArray(gal.data)
        out["linear_transform_s"] = timed_ids(lambda: lib.Rescale(lib.EvaluateLinearTransform(lt, cl)), max(1, reps // 2))
        want = np.zeros(lat.slots)
        for k in idx:
            want += diags[k] * np.roll(x, -k)
        out["linear_transform_precision_bits"] = precision_bits(want, lat.decrypt(lib.Rescale(lib.EvaluateLinearTransform(lt, cl))))
        out["linear_transform_diagonals"] = lt_diagonals
        out["linear_transform_level"] = level
        out["linear_transform_galois_keys"] = len(galois)
        lib.DeleteLinearTransform(lt)

        coeffs = rng.uniform(-1, 1, 64) / 64
        cbuf, cptr = _float_buffer(coeffs)
        poly = lib.GenerateChebyshev(cptr, len(coeffs))
        out["poly_63_s"] = timed_ids(lambda: lib.EvaluatePolynomial(cx, poly, lat.scale), max(1, reps // 2))
        res = lib.EvaluatePolynomial(cx, poly, lat.scale)
        out["poly_63_precision_bits"] = precision_bits(np.polynomial.chebyshev.chebval(x, coeffs.astype(np.float32)), lat.decrypt(res))
        out["poly_63_levels_used"] = lat.max_level - lat.level(res)
        out["rss_after_keys_bytes"] = _rss_bytes() - rss0

    if bootstrap:
        rss1 = _rss_bytes()
        t1 = time.perf_counter()
        boot_p = list(log_p if boot_log_p is None else boot_log_p)
        lib.NewBootstrapper(_ints(boot_p), len(boot_p), lat.slots)
        out["bootstrap_log_p"] = boot_p
        out["bootstrap_keygen_s"] = time.perf_counter() - t1
        out["bootstrap_rss_growth_bytes"] = _rss_bytes() - rss1  # keys and pre-encoded transform diagonals
        out["rss_with_bootstrap_keys_bytes"] = _rss_bytes() - rss0
        low = lat.encrypt(x, level=0)
        t2, c2 = time.perf_counter(), time.process_time()
        boot = lib.Bootstrap(low, lat.slots)
        out["bootstrap_s"] = time.perf_counter() - t2
        out["bootstrap_cpu_s"] = time.process_time() - c2  # all threads of the process
        out["bootstrap_precision_bits"] = precision_bits(x, lat.decrypt(boot))
        out["bootstrap_levels_left"] = lat.level(boot)
    out["peak_rss_bytes"] = _rss_bytes(peak=True)
    return out


def run(log_n: int, log_q: Sequence[int], log_p: Sequence[int], log_scale: int = 40, hamming_weight: int = 192, reps: int = 5, bootstrap: bool = False, lt_diagonals: int = 64,
        timeout_s: float = 1800.0, lt_level: Optional[int] = None, hoisted: int = 8, operations: bool = True, threads: Optional[int] = None,
        boot_log_p: Optional[Sequence[int]] = None) -> dict:
    """:func:`measure` in a child process (a Go panic aborts its process) with GOMAXPROCS =
    ``threads`` (default: the CPU count); returns its figures or ``{"error": ...}``."""
    library_path()  # fail here, with the install hint, when orion-fhe is missing
    args = json.dumps({"log_n": log_n, "log_q": list(log_q), "log_p": list(log_p), "log_scale": log_scale, "hamming_weight": hamming_weight, "reps": reps,
                       "bootstrap": bootstrap, "lt_diagonals": lt_diagonals, "lt_level": lt_level, "hoisted": hoisted, "operations": operations,
                       "boot_log_p": None if boot_log_p is None else list(boot_log_p)})
    env = dict(os.environ)
    if threads is not None:
        env["GOMAXPROCS"] = str(threads)
    try:
        proc = subprocess.run([sys.executable, "-m", "lycaon_benchmarks.lattigo_peer", args], capture_output=True, text=True, timeout=timeout_s, check=False, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"Lattigo peer did not finish in {timeout_s:.0f} s"}
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": f"Lattigo peer failed (exit {proc.returncode}): {' | '.join(tail)}"}
    return json.loads(lines[-1])


if __name__ == "__main__":
    print(json.dumps(measure(**json.loads(sys.argv[1]))))
