"""Microsoft SEAL as the CKKS peer of ``lycaon bench ckks``, through ``tenseal.sealapi`` (an
optional extra, imported only here).

SEAL runs on primes of the bit sizes it is given. It has exactly one special key-switching prime
(one data prime per digit, as SEAL always does): of several ``p_bits`` it keeps one of the
largest, capped at SEAL's 60 bits (a 61-bit P becomes 60 bits), so its ciphertexts have the same
Q as the other libraries' and its keys one special prime. Single-threaded (SEAL's evaluator has no threads). What each key times (median of ``reps``; inputs prepared
outside the timed region, in-place operations on copies made untimed):

- ``mul_relin``: ``multiply_inplace`` then ``relinearize_inplace``;
- ``rescale``: ``rescale_to_next_inplace`` of a fresh product;
- ``rotate_1``: ``rotate_vector_inplace`` by 1;
- ``rotate_hoisted_k``: k rotations (steps 1..k) of one ciphertext; SEAL has no hoisting, so
  this is k independent ``rotate_vector`` calls, which is SEAL's way;
- ``linear_transform``: the diagonal method with baby-step giant-step written over SEAL's
  calls (SEAL has no linear-transform API): sqrt(d) baby rotations of the input, for each giant
  step the plaintext products of the pre-rotated diagonals summed, rotated once and added. The
  diagonals are encoded beforehand at the input's level, untimed (Lattigo and Lycaon also encode
  them ahead). ``lt_level`` (default: the top) is the level the input is brought to first
  (untimed), so that a dense slot-size matrix fits in memory at a low level.

Key memory (``*_key_bytes``) is computed from SEAL's key shape (this tenseal build has no
``save_size``): one key-switching key is, per data prime of the key level, a ciphertext of two
polynomials over all data primes and the special prime, 8 bytes per residue.

SEAL has no bootstrapping and no polynomial evaluator; those rows have no SEAL figure.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any, Callable, Optional, Sequence

import numpy as np

from lycaon_benchmarks.seal_peer import _sealapi, ntt_primes, seal_security_level, seal_version


def _median_s(op: Callable[[Any], object], prepare: Callable[[], Any], reps: int) -> float:
    times = []
    for _ in range(reps):
        arg = prepare()
        start = time.perf_counter()
        op(arg)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _bits(expected: np.ndarray, got: np.ndarray) -> float:
    err = float(np.mean(np.abs(np.asarray(expected) - np.asarray(got))))
    return float(-np.log2(max(err, 2.0 ** -60)))


def seal_ckks_timings(log_n: int, q_bits: Sequence[int], p_bits: Sequence[int], log_scale: int, reps: int = 5, hoisted: int = 8, lt_diagonals: int = 64,
                      lt_level: Optional[int] = None) -> dict:
    """Seconds per CKKS operation in SEAL (see the module docstring), with precision in bits."""
    s = _sealapi()
    n = 1 << log_n
    if not p_bits:
        raise ValueError("SEAL needs one special prime for key switching")
    primes = ntt_primes(n, list(q_bits) + [min(60, max(p_bits))])  # SEAL's primes have at most 60 bits
    parms = s.EncryptionParameters(s.SCHEME_TYPE.CKKS)
    parms.set_poly_modulus_degree(n)
    parms.set_coeff_modulus([s.Modulus(q) for q in primes])
    level = s.SEC_LEVEL_TYPE.TC128 if seal_security_level(n, primes) == "tc128" else s.SEC_LEVEL_TYPE.NONE
    ctx = s.SEALContext(parms, True, level)
    if not ctx.parameters_set():
        raise ValueError(f"SEAL refused the parameters: {ctx.parameters_error_message()}")
    slots = n // 2
    scale = float(2 ** log_scale)
    t0 = time.perf_counter()
    keygen = s.KeyGenerator(ctx)
    sk = keygen.secret_key()
    pk = s.PublicKey()
    keygen.create_public_key(pk)
    rk = s.RelinKeys()
    keygen.create_relin_keys(rk)
    baby = max(1, math.isqrt(lt_diagonals - 1) + 1) if lt_diagonals > 1 else 1
    giant = -(-lt_diagonals // baby)
    steps = sorted(set(range(1, hoisted + 1)) | set(range(1, baby)) | {baby * j for j in range(1, giant)})
    gk = s.GaloisKeys()
    keygen.create_galois_keys([pow(3, k, 2 * n) for k in steps], gk)  # SEAL: rotate_vector by k uses 3^k
    out: dict = {"peer": f"SEAL {seal_version()}", "log_n": log_n, "keygen_s": time.perf_counter() - t0, "threads": 1}
    key_bytes = len(q_bits) * 2 * (len(q_bits) + 1) * n * 8  # one key-switching key (see the docstring)
    out["relin_key_bytes"] = key_bytes
    out["rotate_1_key_bytes"] = key_bytes
    out[f"rotate_hoisted_{hoisted}_key_bytes"] = hoisted * key_bytes
    enc = s.CKKSEncoder(ctx)
    encryptor = s.Encryptor(ctx, pk, sk)
    decryptor = s.Decryptor(ctx, sk)
    ev = s.Evaluator(ctx)

    def encrypt(v: np.ndarray) -> Any:
        pt = s.Plaintext()
        enc.encode(v.tolist(), scale, pt)
        ct = s.Ciphertext()
        encryptor.encrypt(pt, ct)
        return ct

    def decrypt(ct: Any) -> np.ndarray:
        pt = s.Plaintext()
        decryptor.decrypt(ct, pt)
        return np.array(enc.decode_double(pt))

    def copy(ct: Any) -> Any:
        dst = s.Ciphertext()
        ev.mod_switch_to(ct, ct.parms_id(), dst)  # SEAL's copy (see seal_peer)
        return dst

    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, slots)
    y = rng.uniform(-1, 1, slots)
    cx, cy = encrypt(x), encrypt(y)

    def mul_relin(ct: Any) -> Any:
        ev.multiply_inplace(ct, cy)
        ev.relinearize_inplace(ct, rk)
        return ct

    out["mul_relin_s"] = _median_s(mul_relin, lambda: copy(cx), reps)
    out["rescale_s"] = _median_s(ev.rescale_to_next_inplace, lambda: mul_relin(copy(cx)), reps)
    prod = mul_relin(copy(cx))
    ev.rescale_to_next_inplace(prod)
    out["mul_precision_bits"] = _bits(x * y, decrypt(prod))
    out["rotate_1_s"] = _median_s(lambda ct: ev.rotate_vector_inplace(ct, 1, gk), lambda: copy(cx), reps)
    r1 = copy(cx)
    ev.rotate_vector_inplace(r1, 1, gk)
    out["rotate_precision_bits"] = _bits(np.roll(x, -1), decrypt(r1))

    def rotations(cts: list) -> list:
        for k, ct in zip(range(1, hoisted + 1), cts):
            ev.rotate_vector_inplace(ct, k, gk)
        return cts

    out[f"rotate_hoisted_{hoisted}_s"] = _median_s(rotations, lambda: [copy(cx) for _ in range(hoisted)], reps)

    # Banded matrix: diagonals 0..d-1, y = sum_k diag_k * rot(x, k), by BSGS (dense when d = slots).
    diags = rng.uniform(-1, 1, (lt_diagonals, slots)) / lt_diagonals
    cx_full = cx
    max_level = len(q_bits) - 1
    cx = copy(cx_full)
    for _ in range(max_level - (max_level if lt_level is None else lt_level)):
        ev.mod_switch_to_next_inplace(cx)
    encoded = {}
    for j in range(giant):
        for i in range(baby):
            k = j * baby + i
            if k < lt_diagonals:
                pt = s.Plaintext()
                enc.encode(np.roll(diags[k], j * baby).tolist(), cx.parms_id(), scale, pt)  # pre-rotated by -jb
                encoded[(j, i)] = pt

    def linear_transform(ct: Any) -> Any:
        babies = [ct]
        for i in range(1, baby):
            r = s.Ciphertext()
            ev.rotate_vector(ct, i, gk, r)
            babies.append(r)
        total = None
        for j in range(giant):
            acc = None
            for i in range(baby):
                pt = encoded.get((j, i))
                if pt is None:
                    continue
                term = s.Ciphertext()
                ev.multiply_plain(babies[i], pt, term)
                if acc is None:
                    acc = term
                else:
                    ev.add_inplace(acc, term)
            if j:
                ev.rotate_vector_inplace(acc, j * baby, gk)
            if total is None:
                total = acc
            else:
                ev.add_inplace(total, acc)
        ev.rescale_to_next_inplace(total)
        return total

    out["linear_transform_s"] = _median_s(linear_transform, lambda: cx, max(1, reps // 2))
    want = np.zeros(slots)
    for k in range(lt_diagonals):
        want += diags[k] * np.roll(x, -k)
    out["linear_transform_precision_bits"] = _bits(want, decrypt(linear_transform(cx)))
    out["linear_transform_diagonals"] = lt_diagonals
    out["linear_transform_level"] = max_level if lt_level is None else lt_level
    out["linear_transform_key_bytes"] = len(set(range(1, baby)) | {baby * j for j in range(1, giant)}) * key_bytes
    return out
