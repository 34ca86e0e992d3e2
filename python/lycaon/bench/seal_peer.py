"""Microsoft SEAL as the peer of the BFV benchmark, through the raw API TenSEAL exposes
(``tenseal.sealapi``). TenSEAL is an optional extra (``pip install tenseal``), never a runtime
dependency: it is imported only inside these functions.

SEAL runs on exactly Lycaon's primes (``Modulus`` objects built from the integers, the last one
SEAL's special key-switching prime, one prime per key-switching digit as SEAL always does), with
Galois keys for exactly the rotation steps timed. Every operation is checked once against numpy
before it is timed, so the figures are of real work.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable, Optional

import numpy as np


def _sealapi():
    try:
        import tenseal.sealapi as sealapi  # noqa: PLC0415
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("the SEAL peer needs TenSEAL: pip install tenseal==0.3.18") from exc
    return sealapi


def seal_version() -> str:
    """TenSEAL's version (it bundles SEAL 4.x)."""
    import tenseal  # noqa: PLC0415

    return f"SEAL via TenSEAL {tenseal.__version__}"


def _median_us(op: Callable[[object], object], reps: int, warmup: int, prepare: Optional[Callable[[], object]] = None) -> float:
    """Median of single timed calls; `prepare` builds each call's input outside the timed region."""
    for _ in range(warmup):
        op(prepare() if prepare else None)
    samples = []
    for _ in range(reps):
        arg = prepare() if prepare else None
        start = time.perf_counter_ns()
        op(arg)
        samples.append((time.perf_counter_ns() - start) / 1e3)
    return statistics.median(samples)


def seal_bfv_timings(n: int, coeff_primes: list[int], plain_modulus: int, reps: int = 20, warmup: int = 3) -> dict[str, float]:
    """Median microseconds of each BFV operation in SEAL, keyed like Lycaon's benchmark."""
    s = _sealapi()
    parms = s.EncryptionParameters(s.SCHEME_TYPE.BFV)
    parms.set_poly_modulus_degree(n)
    parms.set_coeff_modulus([s.Modulus(q) for q in coeff_primes])
    parms.set_plain_modulus(s.Modulus(plain_modulus))
    ctx = s.SEALContext(parms, True, s.SEC_LEVEL_TYPE.TC128)
    if not ctx.parameters_set():
        raise ValueError(f"SEAL refused the parameters: {ctx.parameter_error_message()}")
    keygen = s.KeyGenerator(ctx)
    sk = keygen.secret_key()
    pk = s.PublicKey()
    keygen.create_public_key(pk)
    rk = s.RelinKeys()
    keygen.create_relin_keys(rk)
    steps = list(range(1, 10))
    galois = s.GaloisKeys()
    # The binding takes Galois elements (3^k mod 2n rotates rows left by k), not steps.
    keygen.create_galois_keys([pow(3, k, 2 * n) for k in steps], galois)
    encryptor = s.Encryptor(ctx, pk)
    encryptor.set_secret_key(sk)
    decryptor = s.Decryptor(ctx, sk)
    evaluator = s.Evaluator(ctx)
    encoder = s.BatchEncoder(ctx)
    rng = np.random.default_rng()
    t = plain_modulus

    def encode(values: np.ndarray):
        pt = s.Plaintext()
        encoder.encode([int(v) for v in values], pt)
        return pt

    def decode(ct) -> np.ndarray:
        pt = s.Plaintext()
        decryptor.decrypt(ct, pt)
        return np.array(encoder.decode_uint64(pt), dtype=np.uint64)

    x = rng.integers(0, t, n, dtype=np.uint64)
    y = rng.integers(0, t, n, dtype=np.uint64)
    pt_x, pt_y = encode(x), encode(y)
    ct_x, ct_y = s.Ciphertext(), s.Ciphertext()
    encryptor.encrypt(pt_x, ct_x)
    encryptor.encrypt(pt_y, ct_y)
    scalar = s.Plaintext("5")
    half = n // 2

    def rotated(v: np.ndarray, k: int) -> np.ndarray:
        return np.concatenate([np.roll(v[:half], -k), np.roll(v[half:], -k)])

    # Correctness once, before timing.
    out = s.Ciphertext()
    checks = {
        "decrypt": (lambda: ct_x, x),
        "mul_plain": (lambda: (evaluator.multiply_plain(ct_x, pt_y, out), out)[1], (x.astype(object) * y.astype(object)) % t),
        "mul_scalar": (lambda: (evaluator.multiply_plain(ct_x, scalar, out), out)[1], (x.astype(object) * 5) % t),
        "rotate_1": (lambda: (evaluator.rotate_rows(ct_x, 1, galois, out), out)[1], rotated(x, 1)),
        "mul_relin": (lambda: (evaluator.multiply(ct_x, ct_y, out), evaluator.relinearize_inplace(out, rk), out)[2], (x.astype(object) * y.astype(object)) % t),
    }
    for name, (run, want) in checks.items():
        got = decode(run())
        if not np.array_equal(got.astype(object), np.asarray(want, dtype=object)):
            raise AssertionError(f"SEAL {name} gave a wrong result; the timings would be meaningless")

    def rotate_nine(_):
        for k in steps:
            evaluator.rotate_rows(ct_x, k, galois, s.Ciphertext())

    # One limb's forward + inverse NTT: SEAL's Python API exposes no raw NTT, so transform a
    # ciphertext brought down to one prime (2 polynomials x 1 limb) and halve the time.
    low = s.Ciphertext()
    encryptor.encrypt(pt_x, low)
    while len(ctx.get_context_data(low.parms_id()).parms().coeff_modulus()) > 1:
        evaluator.mod_switch_to_next_inplace(low)

    def ntt_roundtrip(_):
        evaluator.transform_to_ntt_inplace(low)
        evaluator.transform_from_ntt_inplace(low)

    return {
        "encrypt": _median_us(lambda _: encryptor.encrypt(pt_x, s.Ciphertext()), reps, warmup),
        "encrypt_symmetric": _median_us(lambda _: encryptor.encrypt_symmetric(pt_x, s.Ciphertext()), reps, warmup),
        "decrypt": _median_us(lambda _: decryptor.decrypt(ct_x, s.Plaintext()), reps, warmup),
        "mul_plain": _median_us(lambda _: evaluator.multiply_plain(ct_x, pt_y, s.Ciphertext()), reps, warmup),
        "mul_scalar": _median_us(lambda _: evaluator.multiply_plain(ct_x, scalar, s.Ciphertext()), reps, warmup),
        "rotate_1": _median_us(lambda _: evaluator.rotate_rows(ct_x, 1, galois, s.Ciphertext()), reps, warmup),
        "rotate_9_hoisted": _median_us(rotate_nine, reps, warmup),
        "mul_relin": _median_us(lambda _: (evaluator.multiply(ct_x, ct_y, out), evaluator.relinearize_inplace(out, rk)), reps, warmup),
        "ntt_limb": _median_us(ntt_roundtrip, max(reps, 200), warmup) / 2,
    }
