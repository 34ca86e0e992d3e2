"""``lycaon selfcheck``: keys, encryption, rotations, products and decryption, each checked against numpy."""

from __future__ import annotations

import sys
import time
from typing import Optional

import numpy as np

import lycaon


def _selfcheck(n: int) -> int:
    """Keys, encryption, rotations, products and decryption, each checked against numpy."""
    t0 = time.perf_counter()
    params = lycaon.BfvParameters.default(n)  # a bad n is a usage error (exit 2), not a failed check
    if not params.special_moduli:
        raise lycaon.ParameterError(f"selfcheck exercises relinearisation and rotations, which the default parameters for n = {n} cannot do (no special primes); use --n 4096 or larger")
    t = params.plaintext_modulus
    print(f"{params!r}")
    timings: list[tuple[str, float, Optional[float]]] = []
    failures: list[str] = []
    current = ["setup"]

    def step(name: str, fn, want=None, decode=None):
        current[0] = name
        start = time.perf_counter()
        result = fn()
        elapsed = (time.perf_counter() - start) * 1e3
        budget = None
        if want is not None:
            ct = result[0] if isinstance(result, list) else result
            got = decode(ct)
            if not np.array_equal(np.asarray(got, dtype=object), np.asarray(want, dtype=object)):
                failures.append(f"{name} (result differs from numpy)")
            budget = decryptor.noise_budget(ct)
            if budget <= 0:
                failures.append(f"{name} (noise budget exhausted)")
        timings.append((name, elapsed, budget))
        return result

    try:
        keys = step("key generation (secret)", lambda: lycaon.KeyGenerator(params))
        pk = step("public key", keys.public_key)
        rk = step("relinearisation key", keys.relin_key)
        gk = step("Galois keys (1..9, row swap)", lambda: keys.galois_keys(list(range(1, 10)), row_swap=True))
        encoder = lycaon.BatchEncoder(params)
        encryptor = lycaon.PublicEncryptor(params, pk)
        secret_encryptor = lycaon.SecretEncryptor(params, keys.secret_key())
        decryptor = lycaon.Decryptor(params, keys.secret_key())
        evaluator = lycaon.Evaluator(params)
        rng = np.random.default_rng()
        x = rng.integers(0, t, n, dtype=np.uint64)
        y = rng.integers(0, t, n, dtype=np.uint64)
        xo, yo = x.astype(object), y.astype(object)
        half = n // 2

        def dec(ct):
            return encoder.decode(decryptor.decrypt(ct))

        def rot(v, k):
            return np.concatenate([np.roll(v[:half], -k), np.roll(v[half:], -k)])

        ct_x = step("encrypt (public key)", lambda: encryptor.encrypt(encoder.encode(x)), x, dec)
        ct_y = step("encrypt (secret key, seeded)", lambda: secret_encryptor.encrypt(encoder.encode(y)).expand(), y, dec)
        step("add", lambda: evaluator.add(ct_x, ct_y), (xo + yo) % t, dec)
        step("multiply by plaintext", lambda: evaluator.mul_plain(ct_x, encoder.encode(y)), (xo * yo) % t, dec)
        step("multiply by scalar 7", lambda: evaluator.mul_scalar(ct_x, 7), (xo * 7) % t, dec)
        step("rotate rows by 1", lambda: evaluator.rotate_rows(ct_x, 1, gk), rot(x, 1), dec)
        hoisted = step("9 hoisted rotations", lambda: evaluator.rotate_rows_hoisted(ct_x, list(range(1, 10)), gk), rot(x, 1), dec)
        for k, ct in enumerate(hoisted, start=1):
            if not np.array_equal(dec(ct).astype(object), rot(x, k).astype(object)):
                failures.append(f"hoisted rotation by {k} (result differs from numpy)")
        step("swap rows", lambda: evaluator.swap_rows(ct_x, gk), np.concatenate([x[half:], x[:half]]), dec)
        prod = step("multiply + relinearise", lambda: evaluator.multiply_relin(ct_x, ct_y, rk), (xo * yo) % t, dec)
        if params.max_level > 0:
            step("modulus switch down (product)", lambda: evaluator.mod_switch_to_next(prod), (xo * yo) % t, dec)
        step("serialise + parse", lambda: lycaon.Ciphertext.from_bytes(params, ct_x.to_bytes()), x, dec)
        step("decrypt", lambda: decryptor.decrypt(ct_x))
    except lycaon.LycaonError as exc:
        print(f"selfcheck FAILED at step '{current[0]}': {exc}", file=sys.stderr)
        return 1

    print(f"{'step':<32} {'ms':>9} {'noise budget (bits)':>20}")
    for name, ms, budget in timings:
        print(f"{name:<32} {ms:>9.2f} {'' if budget is None else f'{budget:.1f}':>20}")
    total = time.perf_counter() - t0
    if failures:
        print(f"selfcheck FAILED: {'; '.join(failures)}", file=sys.stderr)
        return 1
    print(f"selfcheck passed: {len(timings)} steps verified against numpy in {total:.2f} s")
    return 0


def add_parser(sub) -> None:
    check = sub.add_parser("selfcheck", help="generate keys, encrypt, rotate, multiply, decrypt and verify, with timings")
    check.add_argument("--n", type=int, default=8192, help="ring degree (default 8192)")


def run(args) -> int:
    return _selfcheck(args.n)
