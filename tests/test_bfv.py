"""BFV through the Python API: every operation against numpy modulo t, serialisation, errors."""

import json
import pickle
import subprocess
import sys

import numpy as np
import pytest

import lycaon

try:
    from hypothesis import given, settings, strategies as st
except ImportError:  # pragma: no cover
    given = None


class Suite:
    def __init__(self, n):
        self.params = lycaon.BfvParameters.default(n)
        self.t = self.params.plaintext_modulus
        self.keys = lycaon.KeyGenerator(self.params)
        self.pk = self.keys.public_key()
        self.rk = self.keys.relin_key()
        self.gk = self.keys.galois_keys([1, 2, 3, -1, 5], row_swap=True)
        self.be = lycaon.BatchEncoder(self.params)
        self.ce = lycaon.CoeffEncoder(self.params)
        self.enc = lycaon.Encryptor(self.params, public_key=self.pk, secret_key=self.keys.secret_key())
        self.dec = lycaon.Decryptor(self.params, self.keys.secret_key())
        self.ev = lycaon.Evaluator(self.params)
        self.rng = np.random.default_rng()

    def rand(self):
        return self.rng.integers(0, self.t, self.params.n, dtype=np.uint64)

    def dec_batch(self, ct):
        return self.be.decode(self.dec.decrypt(ct))


@pytest.fixture(scope="module", params=[4096, 8192])
def s(request):
    return Suite(request.param)


def rot(v, k):
    h = len(v) // 2
    return np.concatenate([np.roll(v[:h], -k), np.roll(v[h:], -k)])


def obj(v):
    return np.asarray(v).astype(object)


def test_every_operation_matches_numpy(s):
    t = s.t
    x, y = s.rand(), s.rand()
    X, Y = obj(x), obj(y)
    cx = s.enc.encrypt(s.be.encode(x))
    cy = s.enc.encrypt_symmetric(s.be.encode(y)).expand(s.params)
    assert np.array_equal(s.dec_batch(cx), x)
    assert np.array_equal(s.dec_batch(cy), y)
    cases = {
        "add": (s.ev.add(cx, cy), (X + Y) % t),
        "sub": (s.ev.sub(cx, cy), (X - Y) % t),
        "negate": (s.ev.negate(cx), (-X) % t),
        "add_plain": (s.ev.add_plain(cx, s.be.encode(y)), (X + Y) % t),
        "sub_plain": (s.ev.sub_plain(cx, s.be.encode(y)), (X - Y) % t),
        "mul_plain": (s.ev.mul_plain(cx, s.be.encode(y)), (X * Y) % t),
        "mul_scalar": (s.ev.mul_scalar(cx, -9), (X * -9) % t),
        "mul_plain_prepared": (s.ev.mul_plain_prepared(cx, s.ev.prepare_plain(s.be.encode(y))), (X * Y) % t),
        "multiply_relin": (s.ev.multiply_relin(cx, cy, s.rk), (X * Y) % t),
        "multiply+relinearize": (s.ev.relinearize(s.ev.multiply(cx, cy), s.rk), (X * Y) % t),
        "rotate 3": (s.ev.rotate_rows(cx, 3, s.gk), rot(x, 3)),
        "rotate -1": (s.ev.rotate_rows(cx, -1, s.gk), rot(x, -1)),
        "swap_rows": (s.ev.swap_rows(cx, s.gk), np.concatenate([x[len(x) // 2:], x[: len(x) // 2]])),
        "mod_switch": (s.ev.mod_switch_to_next(cx), x),
    }
    for name, (ct, want) in cases.items():
        assert np.array_equal(obj(s.dec_batch(ct)), obj(want)), name
        assert s.dec.noise_budget(ct) > 0, name
    assert s.ev.multiply(cx, cy).size == 3


def test_hoisted_rotations_equal_single_ones(s):
    x = s.rand()
    cx = s.enc.encrypt(s.be.encode(x))
    steps = [1, 2, 3, 5, -1]
    for k, ct in zip(steps, s.ev.rotate_rows_hoisted(cx, steps, s.gk)):
        assert np.array_equal(s.dec_batch(ct), s.dec_batch(s.ev.rotate_rows(cx, k, s.gk)))
        assert np.array_equal(s.dec_batch(ct), rot(x, k))


def test_coefficient_encoding_is_negacyclic(s):
    n = s.params.n
    a = np.zeros(n, dtype=np.int64)
    a[: 8] = [3, -1, 4, 1, -5, 9, 2, -6]
    b = np.zeros(n, dtype=np.int64)
    b[n - 1], b[1] = 2, 7  # 2 X^(n-1) + 7 X
    ca = s.enc.encrypt(s.ce.encode(a))
    prod = s.dec.decrypt(s.ev.mul_plain(ca, s.ce.encode(b)))
    want = np.zeros(n, dtype=object)
    for i in range(8):
        want[(i + 1) % n] += 7 * int(a[i]) * (1 if i + 1 < n else -1)
        k = i + n - 1
        want[k % n] += 2 * int(a[i]) * (1 if k < n else -1)
    assert np.array_equal(obj(s.ce.decode(prod, signed=True)), want)
    assert s.ce.decode(s.dec.decrypt(ca)).dtype == np.uint64


def test_serialisation_round_trips_and_refuses_corruption(s):
    x = s.rand()
    ct = s.enc.encrypt(s.be.encode(x))
    seeded = s.enc.encrypt_symmetric(s.be.encode(x))
    objects = [
        (lycaon.Ciphertext, ct),
        (lycaon.SeededCiphertext, seeded),
        (lycaon.PublicKey, s.pk),
        (lycaon.RelinKey, s.rk),
        (lycaon.GaloisKeys, s.gk),
        (lycaon.SecretKey, s.keys.secret_key()),
        (lycaon.Plaintext, s.be.encode(x)),
        (lycaon.PreparedPlaintext, s.ev.prepare_plain(s.be.encode(x), 0)),
    ]
    other = lycaon.BfvParameters.from_bits(s.params.n, [30], [30], 20)
    for cls, o in objects:
        data = o.to_bytes()
        assert cls.from_bytes(s.params, data).to_bytes() == data, cls.__name__
        assert pickle.loads(pickle.dumps(o)).to_bytes() == data, cls.__name__
        assert o.params.id == s.params.id
        with pytest.raises(lycaon.SerializationError, match="truncated"):
            cls.from_bytes(s.params, data[: len(data) // 2])
        flipped = bytearray(data)
        flipped[-20] ^= 0x01
        with pytest.raises(lycaon.SerializationError, match="checksum"):
            cls.from_bytes(s.params, bytes(flipped))
        with pytest.raises(lycaon.SerializationError, match="different parameters"):
            cls.from_bytes(other, data)
        versioned = bytearray(data)
        versioned[4] = 7
        with pytest.raises(lycaon.SerializationError, match="version 7"):
            cls.from_bytes(s.params, bytes(versioned))
    assert len(seeded.to_bytes()) < 0.6 * len(ct.to_bytes())
    assert np.array_equal(s.dec_batch(lycaon.Ciphertext.from_bytes(s.params, ct.to_bytes())), x)
    back = lycaon.BfvParameters.from_bytes(s.params.to_bytes())
    assert back.id == s.params.id
    assert pickle.loads(pickle.dumps(s.params)).id == s.params.id


def test_ntt_primes_match_seal():
    # The primes SEAL picks: PlainModulus::Batching(8192, 20) and CoeffModulus::Create(4096, {36, 36}).
    assert lycaon.ntt_primes(20, 8192) == [1032193]
    assert lycaon.ntt_primes(36, 4096, 2) == [68719403009, 68719230977]
    with pytest.raises(lycaon.ParameterError):
        lycaon.ntt_primes(10, 1024)


def test_errors_are_clear():
    with pytest.raises(lycaon.SecurityError, match="128-bit"):
        lycaon.BfvParameters.from_bits(4096, [50, 50], [50], 20)
    with pytest.raises(lycaon.ParameterError):
        lycaon.BfvParameters.default(1000)
    s = Suite(4096)
    cx = s.enc.encrypt(s.be.encode([1, 2, 3]))
    with pytest.raises(lycaon.MissingKeyError, match="Galois"):
        s.ev.rotate_rows(cx, 7, s.gk)
    with pytest.raises(lycaon.LycaonError, match="at most 4096"):
        s.be.encode(np.zeros(4097, dtype=np.int64))
    with pytest.raises(lycaon.LycaonError, match="integer"):
        s.be.encode(["a", "b"])
    with pytest.raises(lycaon.LycaonError, match="levels"):
        s.ev.add(cx, s.ev.mod_switch_to_next(cx))
    with pytest.raises(lycaon.LycaonError, match="public key"):
        lycaon.Encryptor(s.params, secret_key=s.keys.secret_key()).encrypt(s.be.encode([1]))
    # Negative values are reduced modulo t.
    assert s.be.decode(s.be.encode([-1, 5]))[0] == s.t - 1


if given is not None:

    @settings(max_examples=15, deadline=None)
    @given(st.lists(st.integers(min_value=-(2**40), max_value=2**40), min_size=1, max_size=4096), st.integers(-2**20, 2**20), st.integers(-50, 50))
    def test_property_scalar_and_rotation(values, scalar, step):
        s = _small()
        t = s.t
        v = np.zeros(s.params.n, dtype=object)
        v[: len(values)] = [x % t for x in values]
        ct = s.enc.encrypt(s.be.encode(np.array(values, dtype=np.int64)))
        assert np.array_equal(obj(s.dec_batch(s.ev.mul_scalar(ct, scalar))), (v * scalar) % t)
        if step in (1, 2, 3, -1, 5):
            assert np.array_equal(obj(s.dec_batch(s.ev.rotate_rows(ct, step, s.gk))), obj(rot(v, step)))


_SMALL = []


def _small():
    if not _SMALL:
        _SMALL.append(Suite(4096))
    return _SMALL[0]


def test_cli_selfcheck_runs():
    out = subprocess.run([sys.executable, "-m", "lycaon.cli", "selfcheck", "--n", "4096"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "selfcheck passed" in out.stdout


def test_cli_bench_writes_json(tmp_path):
    path = tmp_path / "bench.json"
    out = subprocess.run([sys.executable, "-m", "lycaon.cli", "bench", "bfv", "--n", "4096", "--reps", "3", "--json", str(path)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    rows = json.loads(path.read_text())
    assert {r["op"] for r in rows} >= {"encrypt", "decrypt", "mul_plain", "rotate_1", "rotate_9_hoisted", "mul_relin", "ntt_limb"}
    for r in rows:
        assert set(r) == {"op", "n", "lycaon_us", "peer", "peer_us", "ratio"}
        assert r["lycaon_us"] > 0
        if r["peer_us"] is not None:
            assert r["ratio"] == pytest.approx(r["lycaon_us"] / r["peer_us"], rel=1e-2)


def test_cli_reports_errors_without_traceback():
    out = subprocess.run([sys.executable, "-m", "lycaon.cli", "selfcheck", "--n", "1000"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and "lycaon:" in out.stderr
