"""Microsoft SEAL as the peer of the BFV benchmark, through the raw API TenSEAL exposes
(``tenseal.sealapi``).

TenSEAL is an optional extra (``pip install tenseal``), never a runtime dependency of Lycaon: it
is imported only inside the functions below, which raise :class:`ImportError` naming the package
when it is missing.

SEAL runs on exactly the primes it is given: ``Modulus`` objects built from the integers (not
``CoeffModulus.Create``), the last one SEAL's special key-switching prime, one prime per
key-switching digit as SEAL always does. Galois keys exist for exactly the rotation steps timed.
Every operation is checked once against numpy, through the very calls that are then timed, so the
figures are of real work.

What each key of :func:`seal_bfv_timings` times (one Python call to SEAL per operation unless
said otherwise; every input a fresh object built outside the timed region):

- ``encrypt`` / ``encrypt_symmetric``: ``Encryptor.encrypt`` / ``encrypt_symmetric`` of a
  batch-encoded plaintext of random slots into a fresh ``Ciphertext``.
- ``decrypt``: ``Decryptor.decrypt`` into a fresh ``Plaintext`` (no decoding).
- ``mul_plain``: ``Evaluator.multiply_plain_inplace(ct, pt)``, both in SEAL's default (non-NTT)
  BFV form, ``pt`` batch-encoded random slots.
- ``mul_scalar``: ``multiply_plain_inplace(ct, Plaintext("5"))``, the constant polynomial 5.
  SEAL takes its monomial fast path here (one nonzero coefficient: a scalar multiply of each
  limb, no NTT), which is the closest SEAL has to a BFV scalar multiplication.
- ``rotate_1``: ``rotate_rows_inplace(ct, 1, galois_keys)``.
- ``rotate_9_hoisted``: nine ``rotate_rows_inplace`` calls, steps 1..9, each on its own copy of
  the same ciphertext; total of the nine. SEAL has no hoisting: this is SEAL's way.
- ``mul_relin``: ``multiply_inplace(ct, ct2)`` then ``relinearize_inplace``, total.
- ``ntt_limb``: forward then inverse negacyclic NTT of one RNS limb of n coefficients. The raw
  NTT that ``tenseal.sealapi.util`` binds (``ntt_negacyclic_harvey``) takes and returns Python
  lists, so the list conversion would dominate its time. Instead a ciphertext is mod-switched down
  to the last data level (one prime, ``coeff_primes[0]``) and ``transform_to_ntt_inplace`` +
  ``transform_from_ntt_inplace`` are timed together on it; that transforms 2 polynomials x 1
  limb each way, so the time is divided by 2. Two Python calls (~0.1 us each) are included.

The in-place operations run on copies of the input made outside the timed region, one per rep
(the binding has no ``Ciphertext`` copy constructor; ``Evaluator.mod_switch_to`` to the
ciphertext's own level is SEAL's ``destination = encrypted`` followed by a no-op switch). SEAL's
out-of-place forms (``multiply_plain(ct, pt, dst)`` etc.) are that same copy plus the in-place
operation, so the figures here are of the operations alone.

SEAL (as built in TenSEAL's wheel) is single-threaded: it starts no threads, and none of the
operations timed use a thread pool.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from typing import Any, Callable, Optional, Sequence, TypeVar

import numpy as np

T = TypeVar("T")

#: Deterministic Miller-Rabin witnesses: correct for every integer below 3.3 * 10^24.
_MR_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)


def _sealapi() -> Any:
    """``tenseal.sealapi``, or an ImportError that says how to get it."""
    try:
        import tenseal.sealapi as sealapi  # noqa: PLC0415
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the SEAL peer of the benchmark needs TenSEAL, an optional extra: pip install tenseal (0.3.18)"
        ) from exc
    return sealapi


def is_prime(m: int) -> bool:
    """Deterministic Miller-Rabin primality test for m < 3.3 * 10^24 (all moduli used here)."""
    if m < 2:
        return False
    for p in _MR_BASES:
        if m % p == 0:
            return m == p
    d, r = m - 1, 0
    while d % 2 == 0:
        d //= 2
        r += 1
    for a in _MR_BASES:
        x = pow(a, d, m)
        if x in (1, m - 1):
            continue
        for _ in range(r - 1):
            x = x * x % m
            if x == m - 1:
                break
        else:
            return False
    return True


def ntt_primes(n: int, bit_sizes: Sequence[int]) -> list[int]:
    """Distinct primes p = 1 mod 2n, for each size b the largest below 2^b not already taken.

    This is the rule of SEAL's ``CoeffModulus.Create`` (which hands out equal-size primes in a
    different order, so its list is a permutation within each size).
    """
    if n < 2 or n & (n - 1):
        raise ValueError(f"n must be a power of two, not {n}")
    step = 2 * n
    taken: set[int] = set()
    out = []
    for bits in bit_sizes:
        candidate = (1 << bits) - step + 1  # largest value below 2^bits that is 1 mod 2n
        while candidate in taken or not is_prime(candidate):
            candidate -= step
            if candidate <= step:
                raise ValueError(f"no {bits}-bit prime = 1 mod {step} left")
        taken.add(candidate)
        out.append(candidate)
    return out


def seal_version() -> str:
    """TenSEAL's version, and the SEAL version written in SEAL's serialization header."""
    s = _sealapi()  # first, for its ImportError
    import tenseal  # noqa: PLC0415

    seal = "SEAL 4.x"
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "header")
        s.Plaintext("1").save(path)
        header = s.Serialization.SEALHeader()
        s.Serialization.LoadHeader(path, header, False)
        if s.Serialization.IsValidHeader(header):
            seal = f"SEAL {header.version_major}.{header.version_minor}"
    return f"{seal} via TenSEAL {tenseal.__version__}"


def seal_security_level(n: int, coeff_primes: Sequence[int]) -> str:
    """``"tc128"`` when the moduli fit SEAL's 128-bit classical bound at n, else ``"none"``."""
    s = _sealapi()
    total_bits = sum(int(q).bit_length() for q in coeff_primes)
    return "tc128" if total_bits <= s.CoeffModulus.MaxBitCount(n, s.SEC_LEVEL_TYPE.TC128) else "none"


def _median_us(op: Callable[[T], object], prepare: Callable[[], T], reps: int, warmup: int) -> float:
    """Median in microseconds of single calls ``op(prepare())``; ``prepare`` runs untimed."""
    for _ in range(warmup):
        op(prepare())
    samples = []
    for _ in range(reps):
        arg = prepare()
        start = time.perf_counter_ns()
        op(arg)
        samples.append((time.perf_counter_ns() - start) / 1e3)
    return statistics.median(samples)


def seal_bfv_timings(n: int, coeff_primes: list[int], plain_modulus: int, reps: int = 20, warmup: int = 3) -> dict[str, float]:
    """Median microseconds of each BFV operation in SEAL, keyed like Lycaon's benchmark.

    ``coeff_primes`` are the ciphertext primes followed by the special key-switching prime (SEAL's
    convention: the last prime of the list); ``plain_modulus`` is a batching prime (= 1 mod 2n).
    The context is built at 128-bit classical security when the moduli fit it
    (:func:`seal_security_level`), otherwise with SEAL's security check off. Each operation is
    checked once against numpy (AssertionError on a mismatch) before ``warmup`` untimed and
    ``reps`` timed runs (``ntt_limb``: at least 200). See the module docstring for what is timed.
    """
    s = _sealapi()
    if reps < 1 or warmup < 0:
        raise ValueError("reps must be at least 1 and warmup at least 0")
    coeff_primes = [int(q) for q in coeff_primes]
    t = int(plain_modulus)
    if len(coeff_primes) < 2:
        raise ValueError("give at least one ciphertext prime and the special prime")
    for q in coeff_primes + [t]:
        if not is_prime(q) or q % (2 * n) != 1:
            raise ValueError(f"{q} is not a prime = 1 mod 2n = {2 * n}")

    parms = s.EncryptionParameters(s.SCHEME_TYPE.BFV)
    parms.set_poly_modulus_degree(n)
    parms.set_coeff_modulus([s.Modulus(q) for q in coeff_primes])
    parms.set_plain_modulus(s.Modulus(t))
    level = s.SEC_LEVEL_TYPE.TC128 if seal_security_level(n, coeff_primes) == "tc128" else s.SEC_LEVEL_TYPE.NONE
    ctx = s.SEALContext(parms, True, level)
    if not ctx.parameters_set():
        raise ValueError(f"SEAL refused the parameters: {ctx.parameters_error_message()}")
    if not ctx.first_context_data().qualifiers().using_batching:
        raise ValueError("SEAL cannot batch with this plaintext modulus")

    keygen = s.KeyGenerator(ctx)
    secret_key = keygen.secret_key()
    public_key = s.PublicKey()
    keygen.create_public_key(public_key)
    relin_keys = s.RelinKeys()
    keygen.create_relin_keys(relin_keys)
    steps = list(range(1, 10))
    galois_keys = s.GaloisKeys()
    # A list of ints binds to the Galois-element overload (vector<uint32_t>) before the steps
    # one: pass the elements, 3^k mod 2n for a left rotation of the rows by k.
    keygen.create_galois_keys([pow(3, k, 2 * n) for k in steps], galois_keys)
    encryptor = s.Encryptor(ctx, public_key, secret_key)
    decryptor = s.Decryptor(ctx, secret_key)
    evaluator = s.Evaluator(ctx)
    encoder = s.BatchEncoder(ctx)

    def encode(values: np.ndarray) -> Any:
        pt = s.Plaintext()
        encoder.encode([int(v) for v in values], pt)
        return pt

    def decode(ct: Any) -> np.ndarray:
        pt = s.Plaintext()
        decryptor.decrypt(ct, pt)
        return np.array(encoder.decode_uint64(pt), dtype=object)

    def copy(ct: Any) -> Any:
        out = s.Ciphertext()
        evaluator.mod_switch_to(ct, ct.parms_id(), out)  # = SEAL's copy, see the module docstring
        return out

    rng = np.random.default_rng()
    x = rng.integers(0, t, n, dtype=np.uint64).astype(object)
    y = rng.integers(0, t, n, dtype=np.uint64).astype(object)
    pt_x, pt_y = encode(x), encode(y)
    ct_x, ct_y = s.Ciphertext(), s.Ciphertext()
    encryptor.encrypt(pt_x, ct_x)
    encryptor.encrypt(pt_y, ct_y)
    five = s.Plaintext("5")  # constant polynomial 5 (hex string notation of SEAL)
    if ct_x.is_ntt_form() or pt_y.is_ntt_form():
        raise AssertionError("SEAL's BFV default form is expected to be non-NTT")
    half = n // 2

    def rotated(v: np.ndarray, k: int) -> np.ndarray:
        # rotate_rows(ct, k): slot j of each row of n/2 takes slot j + k of that row
        return np.concatenate([np.roll(v[:half], -k), np.roll(v[half:], -k)])

    # Each op takes its prepared input (built untimed) and returns what is checked.
    def op_encrypt(out: Any) -> Any:
        encryptor.encrypt(pt_x, out)
        return out

    def op_encrypt_symmetric(out: Any) -> Any:
        encryptor.encrypt_symmetric(pt_x, out)
        return out

    def op_decrypt(out: Any) -> Any:
        decryptor.decrypt(ct_x, out)
        return out

    def op_mul_plain(ct: Any) -> Any:
        evaluator.multiply_plain_inplace(ct, pt_y)
        return ct

    def op_mul_scalar(ct: Any) -> Any:
        evaluator.multiply_plain_inplace(ct, five)
        return ct

    def op_rotate_1(ct: Any) -> Any:
        evaluator.rotate_rows_inplace(ct, 1, galois_keys)
        return ct

    def op_rotate_9(cts: list[Any]) -> list[Any]:
        for k, ct in zip(steps, cts):
            evaluator.rotate_rows_inplace(ct, k, galois_keys)
        return cts

    def op_mul_relin(ct: Any) -> Any:
        evaluator.multiply_inplace(ct, ct_y)
        evaluator.relinearize_inplace(ct, relin_keys)
        return ct

    # One limb: the ciphertext brought down to the last data level, which keeps coeff_primes[0].
    low = copy(ct_x)
    while low.coeff_modulus_size() > 1:
        evaluator.mod_switch_to_next_inplace(low)
    q0 = ctx.get_context_data(low.parms_id()).parms().coeff_modulus()[0].value()

    def op_ntt(_: None) -> None:
        evaluator.transform_to_ntt_inplace(low)
        evaluator.transform_from_ntt_inplace(low)

    def fresh_ct() -> Any:
        return s.Ciphertext()

    def fresh_pt() -> Any:
        return s.Plaintext()

    def copy_x() -> Any:
        return copy(ct_x)

    def nine_copies() -> list[Any]:
        return [copy(ct_x) for _ in steps]

    def nothing() -> None:
        return None

    # Correctness once, through the very calls that are timed.
    prod = (x * y) % t
    checks: list[tuple[str, np.ndarray, np.ndarray]] = [
        ("encrypt", decode(op_encrypt(fresh_ct())), x),
        ("encrypt_symmetric", decode(op_encrypt_symmetric(fresh_ct())), x),
        ("decrypt", np.array(encoder.decode_uint64(op_decrypt(fresh_pt())), dtype=object), x),
        ("mul_plain", decode(op_mul_plain(copy_x())), prod),
        ("mul_scalar", decode(op_mul_scalar(copy_x())), (x * 5) % t),
        ("rotate_1", decode(op_rotate_1(copy_x())), rotated(x, 1)),
    ]
    for k, ct in zip(steps, op_rotate_9(nine_copies())):
        checks.append((f"rotate_9_hoisted (step {k})", decode(ct), rotated(x, k)))
    relinearized = op_mul_relin(copy_x())
    if relinearized.size() != 2:
        raise AssertionError(f"SEAL mul_relin left a ciphertext of size {relinearized.size()}")
    checks.append(("mul_relin", decode(relinearized), prod))
    for name, got, want in checks:
        if not np.array_equal(got, want):
            raise AssertionError(f"SEAL {name} gave a wrong result; the timings would be meaningless")
    _check_ntt_limb(evaluator, low, n, q0)
    if not np.array_equal(decode(low), x):
        raise AssertionError("SEAL ntt_limb: the one-limb ciphertext no longer decrypts")

    return {
        "encrypt": _median_us(op_encrypt, fresh_ct, reps, warmup),
        "encrypt_symmetric": _median_us(op_encrypt_symmetric, fresh_ct, reps, warmup),
        "decrypt": _median_us(op_decrypt, fresh_pt, reps, warmup),
        "mul_plain": _median_us(op_mul_plain, copy_x, reps, warmup),
        "mul_scalar": _median_us(op_mul_scalar, copy_x, reps, warmup),
        "rotate_1": _median_us(op_rotate_1, copy_x, reps, warmup),
        "rotate_9_hoisted": _median_us(op_rotate_9, nine_copies, reps, warmup),
        "mul_relin": _median_us(op_mul_relin, copy_x, reps, warmup),
        # 2 polynomials x 1 limb, forward + inverse: half of the pair is one limb's round trip
        "ntt_limb": _median_us(op_ntt, nothing, max(reps, 200), warmup) / 2,
    }


def _check_ntt_limb(evaluator: Any, low: Any, n: int, q: int) -> None:
    """Checks that the timed transforms are a true negacyclic NTT of each polynomial and back.

    The negacyclic NTT evaluates a(X) at the n primitive 2n-th roots of unity mod q, in some
    order; their sum is n * a_0 mod q whatever the order (the roots' k-th powers sum to 0 for
    0 < k < n). The inverse must give back the coefficients exactly.
    """
    if low.coeff_modulus_size() != 1 or low.is_ntt_form():
        raise AssertionError("ntt_limb needs a one-limb ciphertext in coefficient form")
    size = low.size()
    before = [low[i] for i in range(size * n)]
    evaluator.transform_to_ntt_inplace(low)
    after = [low[i] for i in range(size * n)]
    evaluator.transform_from_ntt_inplace(low)
    back = [low[i] for i in range(size * n)]
    if low.is_ntt_form() or back != before:
        raise AssertionError("SEAL ntt_limb: the inverse NTT did not restore the coefficients")
    for poly in range(size):
        a0 = before[poly * n]
        values = after[poly * n:(poly + 1) * n]
        if values == before[poly * n:(poly + 1) * n] or sum(values) % q != n * a0 % q:
            raise AssertionError("SEAL ntt_limb: the forward transform is not a negacyclic NTT")


def _pin_to_one_core() -> Optional[int]:
    """Pins this process to one CPU (the last it may use); returns it, or None where unsupported."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpu = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


#: SEAL's BFVDefault split at each n (``CoeffModulus.Create`` bit sizes; the last is the special prime).
DEFAULT_BITS = {4096: [36, 36, 37], 8192: [43, 43, 44, 44, 44]}
#: Size of the batching plaintext prime.
PLAIN_BITS = 20


if __name__ == "__main__":
    import threading

    cpu = _pin_to_one_core()
    print(seal_version(), f"pinned to CPU {cpu}" if cpu is not None else "not pinned")
    results = {}
    for degree, bits in DEFAULT_BITS.items():
        primes = ntt_primes(degree, bits)
        plain = ntt_primes(degree, [PLAIN_BITS])[0]
        print(f"n={degree}: primes {primes} (bits {[p.bit_length() for p in primes]}), t={plain}, "
              f"security {seal_security_level(degree, primes)}")
        start = time.perf_counter()
        results[degree] = seal_bfv_timings(degree, primes, plain)
        print(f"  one call (keys, checks, timing): {time.perf_counter() - start:.2f} s")
    # Native threads of the process (Linux). SEAL starts none; numpy's OpenBLAS may hold idle workers.
    tasks = "/proc/self/task"
    count = len(os.listdir(tasks)) if os.path.isdir(tasks) else threading.active_count()
    print(f"threads in this process after the runs: {count} (SEAL starts none; any other is numpy's idle OpenBLAS pool)")
    print(f"{'op':<18} " + " ".join(f"{'n=' + str(d) + ' (us)':>14}" for d in results))
    for op in next(iter(results.values())):
        print(f"{op:<18} " + " ".join(f"{results[d][op]:>14.1f}" for d in results))
