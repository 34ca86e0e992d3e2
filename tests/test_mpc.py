"""The two-party protocols through the Python binding: results against numpy, and clear errors."""

import numpy as np
import pytest

import lycaon

P = 1_032_193  # the hybrid mode's 20-bit plaintext prime


def share(x, modulus, rng):
    """Additive shares of the signed integers x modulo `modulus`."""
    v = np.array([int(a) % modulus for a in x], dtype=object)
    s0 = np.array([int(r) for r in rng.integers(0, min(modulus, 2**63), size=len(x))], dtype=object) % modulus
    return s0.astype(np.uint64), ((v - s0) % modulus).astype(np.uint64)


def opened(run, modulus):
    v = (run["out0"].astype(object) + run["out1"].astype(object)) % modulus
    return np.where(v > (modulus - 1) // 2, v - modulus, v)


@pytest.mark.parametrize("modulus", [2**64, 2**37, P])
@pytest.mark.parametrize("ot", ["iknp", "silent"])
def test_relu_matches_numpy(modulus, ot):
    rng = np.random.default_rng(1)
    half = (modulus - 1) // 2
    bound = min(2**30, half)
    x = [0, 1, -1, half, -half] + [int(v) for v in rng.integers(-bound, bound, size=500)]
    s0, s1 = share(x, modulus, rng)
    run = lycaon.run_two_party("relu", modulus, s0, s1, ot=ot)
    assert list(opened(run, modulus)) == [max(v, 0) for v in x]
    assert run["bytes"] > 0 and run["rounds"] > 0 and run["seconds"] > 0


def test_amortized_bytes_price_silent_ot_by_the_cots_used():
    rng = np.random.default_rng(4)
    small = rng.integers(0, P, size=2000, dtype=np.uint64)
    # IKNP pays per COT inside the run: nothing to amortise.
    iknp = lycaon.run_two_party("relu", P, small, small, ot="iknp")
    assert iknp["amortized_bytes"] == iknp["bytes"]
    # A short silent run expands the first segments of the iterations it touches (Ferret's per
    # direction, the vector OT's with its trees' COTs) for a few correlations; amortised, it
    # pays their share, so per element it costs what a run eight times longer costs.
    quiet = lycaon.run_two_party("relu", P, small, small, ot="silent")
    assert quiet["bytes"] - quiet["amortized_bytes"] > 2 * 16 * 162 * 14
    wide_input = rng.integers(0, P, size=16000, dtype=np.uint64)
    wide = lycaon.run_two_party("relu", P, wide_input, wide_input, ot="silent")
    per_quiet, per_wide = quiet["amortized_bytes"] / 2000, wide["amortized_bytes"] / 16000
    assert abs(per_quiet - per_wide) < 0.02 * per_wide, (per_quiet, per_wide)
    # 2^16 ReLUs use a few million COTs a direction: the segments made for them cost more than
    # the COTs used, but less than a whole iteration (10.6 million) a direction would.
    p37 = lycaon.ntt_primes(37, 4096, 1)[0]
    big = rng.integers(0, p37, size=1 << 16, dtype=np.uint64)
    loud = lycaon.run_two_party("relu_bounded", p37, big, big, ot="silent")
    iterations = 2 * (16 * 1295 * 14 + (1295 * 13 + 7) // 8) + 16 * 1295 * 27 + (1295 * 16 + 7) // 8
    assert 0 < loud["bytes"] - loud["amortized_bytes"] < iterations

@pytest.mark.parametrize("modulus,bits", [(2**64, 40), (2**37, 20)])
def test_relu_within_a_bound_and_truncate_relu_on_single_threaded_parties(modulus, bits):
    rng = np.random.default_rng(6)
    top = 2**bits - 1
    x = [0, 1, -1, top, -top] + [int(v) for v in rng.integers(-top, top, size=500)]
    s0, s1 = share(x, modulus, rng)
    run = lycaon.run_two_party("relu_within", modulus, s0, s1, bits=bits, threads=1)
    assert list(opened(run, modulus)) == [max(v, 0) for v in x]
    assert run["threads_per_party"] == 1
    full = lycaon.run_two_party("relu", modulus, s0, s1, threads=1)
    assert run["bytes"] < full["bytes"], "the bounded comparison must send less than the whole-ring one"
    got = opened(lycaon.run_two_party("truncate_relu", modulus, s0, s1, shift=12, bits=bits), modulus)
    assert all(g >= 0 and abs(g - max(v >> 12, 0)) <= 1 for g, v in zip(got, x))


def test_relu_within_a_bound_on_a_prime_ring_is_exact_and_leaner():
    """On a 35-bit plaintext prime (an ImageNet layer's), a ReLU of values within 2^20 compares 20
    bits: the same outputs as max(x, 0) and fewer bytes than the bounded ReLU's whole-ring one."""
    p = lycaon.ntt_primes(35, 8192, 1)[0]
    rng = np.random.default_rng(7)
    top = 2**20 - 1
    x = [0, 1, -1, top, -top] + [int(v) for v in rng.integers(-top, top, size=2000)]
    s0, s1 = share(x, p, rng)
    narrow = lycaon.run_two_party("relu_within", p, s0, s1, bits=20, threads=1)
    assert list(opened(narrow, p)) == [max(v, 0) for v in x]
    bounded = lycaon.run_two_party("relu_bounded", p, s0, s1, threads=1)
    assert list(opened(bounded, p)) == [max(v, 0) for v in x]
    assert narrow["amortized_bytes"] < 0.8 * bounded["amortized_bytes"], (narrow["amortized_bytes"], bounded["amortized_bytes"])


def test_bounded_ops_say_what_they_need():
    s = np.zeros(4, dtype=np.uint64)
    with pytest.raises(lycaon.LycaonError, match="needs bits"):
        lycaon.run_two_party("relu_within", 2**64, s, s)
    with pytest.raises(lycaon.LycaonError, match="at least 1 bit"):
        lycaon.run_two_party("relu_within", P, s, s, bits=0)
    with pytest.raises(lycaon.LycaonError, match="threads must be at least 1"):
        lycaon.run_two_party("relu", P, s, s, threads=0)


def test_truncation_error_is_at_most_one_unit():
    rng = np.random.default_rng(2)
    x = [int(v) for v in rng.integers(-P // 4, P // 4, size=500)]
    s0, s1 = share(x, P, rng)
    got = opened(lycaon.run_two_party("truncate", P, s0, s1, shift=5), P)
    assert all(abs(g - (v >> 5)) <= 1 for g, v in zip(got, x))


def test_max_pool_and_conversion():
    rng = np.random.default_rng(3)
    x = [int(v) for v in rng.integers(-1000, 1000, size=4 * 50)]
    s0, s1 = share(x, P, rng)
    got = opened(lycaon.run_two_party("maxpool", P, s0, s1, window=4), P)
    assert list(got) == [max(x[i:i + 4]) for i in range(0, len(x), 4)]
    conv = lycaon.run_two_party("convert", P, s0, s1, to_modulus=2**40)
    assert list(opened(conv, 2**40)) == x


def test_bad_input_gets_a_clear_error():
    s = np.zeros(3, dtype=np.uint64)
    with pytest.raises(lycaon.LycaonError, match="neither a power of two"):
        lycaon.run_two_party("relu", 2**70 + 1, s, s)
    with pytest.raises(lycaon.LycaonError, match="odd prime"):
        lycaon.run_two_party("relu", 1_000_000, s, s)
    with pytest.raises(lycaon.LycaonError, match="unknown op"):
        lycaon.run_two_party("softmax", P, s, s)
    with pytest.raises(lycaon.LycaonError, match="unknown OT"):
        lycaon.run_two_party("relu", P, s, s, ot="kos")
    with pytest.raises(lycaon.LycaonError, match="3 elements, share1 2"):
        lycaon.run_two_party("relu", P, s, s[:2])
    with pytest.raises(lycaon.LycaonError, match="not below the ring modulus"):
        lycaon.run_two_party("relu", P, np.array([P, 0, 0], dtype=np.uint64), s)
    with pytest.raises(lycaon.LycaonError, match="windows"):
        lycaon.run_two_party("maxpool", P, s, s, window=2)


def test_cli_threads_are_checked_and_sized_before_the_pool_starts():
    import subprocess
    import sys

    bad = subprocess.run([sys.executable, "-m", "lycaon.cli", "infer", "--threads", "0", "--server", "127.0.0.1:1", "x.npy"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--threads must be at least 1, not 0" in bad.stderr
    # A fresh process: the pool starts with the size asked for.
    sized = subprocess.run([sys.executable, "-c", "import lycaon, lycaon.cli.threads as t; print(t.set_threads(1), lycaon.ckks_threads())"],
                           capture_output=True, text=True, timeout=120)
    assert sized.stdout.split() == ["None", "1"], sized.stderr
