"""Microsoft SEAL as the CKKS peer of ``lycaon bench ckks``, through ``tenseal.sealapi`` (an
optional extra, imported only here).

SEAL runs on the primes it is given (the last one is its special key-switching prime, one prime
per digit, as SEAL always does). What each key times (median of ``reps``; inputs prepared
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
  them ahead).

SEAL has no bootstrapping and no polynomial evaluator; those rows have no SEAL figure.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any, Callable, Sequence

import numpy as np

from lycaon.bench.seal_peer import _sealapi, ntt_primes, seal_security_level, seal_version


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


def seal_ckks_timings(log_n: int, q_bits: Sequence[int], p_bits: Sequence[int], log_scale: int, reps: int = 5, hoisted: int = 8, lt_diagonals: int = 64) -> dict:
    """Seconds per CKKS operation in SEAL (see the module docstring), with precision in bits."""
    s = _sealapi()
    n = 1 << log_n
    primes = ntt_primes(n, list(q_bits) + list(p_bits))
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
    out: dict = {"peer": f"SEAL {seal_version()}", "log_n": log_n, "keygen_s": time.perf_counter() - t0}
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

    # Banded matrix: diagonals 0..d-1, y = sum_k diag_k * rot(x, k), by BSGS.
    diags = rng.uniform(-1, 1, (lt_diagonals, slots)) / lt_diagonals
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
    want = sum(diags[k] * np.roll(x, -k) for k in range(lt_diagonals))
    out["linear_transform_precision_bits"] = _bits(want, decrypt(linear_transform(cx)))
    out["linear_transform_diagonals"] = lt_diagonals
    out["relin_key_bytes"] = rk.save_size(s.COMPR_MODE_TYPE.NONE) if hasattr(rk, "save_size") else None
    return out
