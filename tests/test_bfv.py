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
        self.enc = lycaon.PublicEncryptor(self.params, self.pk)
        self.sym = lycaon.SecretEncryptor(self.params, self.keys.secret_key())
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
    cy = s.sym.encrypt(s.be.encode(y)).expand(s.params)
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
    seeded = s.sym.encrypt(s.be.encode(x))
    objects = [
        (lycaon.Ciphertext, ct),
        (lycaon.SeededCiphertext, seeded),
        (lycaon.PublicKey, s.pk),
        (lycaon.RelinKey, s.rk),
        (lycaon.GaloisKeys, s.gk),
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
    assert back.id == s.params.id and back == s.params and hash(back) == hash(s.params)
    assert pickle.loads(pickle.dumps(s.params)) == s.params
    assert lycaon.BfvParameters.from_bytes(bytearray(s.params.to_bytes())) == s.params
    pdata = s.params.to_bytes()
    with pytest.raises(lycaon.SerializationError, match="truncated"):
        lycaon.BfvParameters.from_bytes(pdata[:-3])
    flipped = bytearray(pdata)
    flipped[len(pdata) // 2] ^= 0x10
    with pytest.raises(lycaon.SerializationError, match="checksum"):
        lycaon.BfvParameters.from_bytes(bytes(flipped))
    with pytest.raises(lycaon.SerializationError, match="LYCN"):
        lycaon.BfvParameters.from_bytes(b"not a lycaon object at all, but long enough to hold a header........")
    with pytest.raises(lycaon.SerializationError, match="expected a parameters, found a ciphertext"):
        lycaon.BfvParameters.from_bytes(ct.to_bytes())
    with pytest.raises(lycaon.SerializationError, match="expected a public key, found a ciphertext"):
        lycaon.PublicKey.from_bytes(s.params, ct.to_bytes())
    # A seeded ciphertext expands under its own parameters; the full one is the same ciphertext.
    assert np.array_equal(s.dec_batch(seeded.expand()), x)
    assert seeded.expand().to_bytes() == seeded.expand(s.params).to_bytes()


def test_ntt_primes_match_seal():
    # The primes SEAL picks: PlainModulus::Batching(8192, 20) and CoeffModulus::Create(4096, {36, 36}).
    assert lycaon.ntt_primes(20, 8192) == [1032193]
    assert lycaon.ntt_primes(36, 4096, 2) == [68719403009, 68719230977]
    with pytest.raises(lycaon.ParameterError):
        lycaon.ntt_primes(10, 1024)


def test_secret_keys_do_not_pickle_and_export_only_on_purpose(s):
    sk = s.keys.secret_key()
    with pytest.raises(TypeError, match="secret key cannot be pickled.*export_secret_key_bytes"):
        pickle.dumps(sk)
    assert not hasattr(sk, "to_bytes") and not hasattr(lycaon.SecretKey, "from_bytes")
    data = sk.export_secret_key_bytes()
    back = lycaon.SecretKey.import_secret_key_bytes(s.params, data)
    assert back.export_secret_key_bytes() == data and back.params == s.params
    x = s.rand()
    assert np.array_equal(s.be.decode(lycaon.Decryptor(s.params, back).decrypt(s.enc.encrypt(s.be.encode(x)))), x)
    with pytest.raises(lycaon.SerializationError, match="checksum"):
        lycaon.SecretKey.import_secret_key_bytes(s.params, data[:-1] + bytes([data[-1] ^ 1]))
    assert "<secret>" in repr(sk)
    import copy

    assert copy.deepcopy(sk).export_secret_key_bytes() == data
    # A public encryptor re-randomises: same message, new ciphertext.
    ct = s.enc.encrypt(s.be.encode(x))
    fresh = s.enc.rerandomise(ct)
    assert fresh.to_bytes() != ct.to_bytes() and np.array_equal(s.dec_batch(fresh), x)


def test_one_security_table_and_power_of_two_ring_degrees():
    assert lycaon.security_table() == {1024: 27, 2048: 54, 4096: 109, 8192: 218, 16384: 438, 32768: 881, 65536: 1772}
    assert lycaon.max_log_qp(8192) == 218 and lycaon.max_log_qp(3000) is None
    with pytest.raises(lycaon.ParameterError, match="n = 3000 is not a power of two"):
        lycaon.BfvParameters.from_bits(3000, [36, 36], [37], 20)
    with pytest.raises(lycaon.ParameterError, match="n = 3000 is not a power of two"):
        lycaon.CkksParameters.from_bits(3000, [36, 36], [37], 30)
    with pytest.raises(lycaon.ParameterError, match="n = 3000 is not a power of two"):
        lycaon.CkksParameters.scale_stable(3000, 50, 40, 2, [50])


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
    # Each encryptor takes its one key: the wrong kind is a TypeError naming the argument.
    with pytest.raises(TypeError, match="public_key"):
        lycaon.PublicEncryptor(s.params, s.keys.secret_key())
    with pytest.raises(TypeError, match="secret_key"):
        lycaon.SecretEncryptor(s.params, s.pk)
    with pytest.raises(lycaon.LycaonError, match="different parameters"):
        lycaon.PublicEncryptor(s.params, lycaon.KeyGenerator(lycaon.BfvParameters.default(8192)).public_key())
    # Negative values are reduced modulo t.
    assert s.be.decode(s.be.encode([-1, 5]))[0] == s.t - 1
    with pytest.raises(lycaon.MissingKeyError, match="no special primes"):
        lycaon.KeyGenerator(lycaon.BfvParameters.default(1024)).relin_key()
    with pytest.raises(lycaon.LycaonError, match="different parameters"):
        lycaon.Decryptor(s.params, lycaon.KeyGenerator(lycaon.BfvParameters.default(8192)).secret_key())
    with pytest.raises(lycaon.LycaonError, match="only goes down"):
        s.ev.mod_switch_to(s.ev.mod_switch_to_next(cx), 1)
    with pytest.raises(lycaon.LycaonError, match="lowest level"):
        s.ev.mod_switch_to_next(s.ev.mod_switch_to(cx, 0))
    with pytest.raises(lycaon.LycaonError, match="3 parts"):
        s.ev.relinearize(cx, s.rk)
    # Every Lycaon error is a ValueError; parameter problems are ParameterErrors.
    assert issubclass(lycaon.SerializationError, ValueError) and issubclass(lycaon.ParameterError, ValueError)
    assert issubclass(lycaon.SecurityError, lycaon.ParameterError) and issubclass(lycaon.MissingKeyError, lycaon.LycaonError)
    with pytest.raises(lycaon.ParameterError, match="batching"):
        lycaon.BatchEncoder(lycaon.BfvParameters(4096, s.params.ciphertext_moduli, s.params.special_moduli, 65536))
    with pytest.raises(lycaon.ParameterError, match="key_switch_digits"):
        lycaon.BfvParameters(4096, s.params.ciphertext_moduli, s.params.special_moduli, s.t, key_switch_digits=3)


def test_encoder_inputs():
    s = _small()
    t, n = s.t, s.params.n
    for enc in (s.be, s.ce):
        # Any integer dtype, lists, numpy scalars inside lists, non-contiguous views.
        for values in ([1, 2, 3], np.array([1, 2, 3], dtype=np.int32), np.array([1, 2, 3], dtype=np.uint8),
                       [np.int64(1), 2, np.uint16(3)], np.array([1, 9, 2, 9, 3, 9])[::2], np.array([1, 2, 3], dtype=object)):
            assert list(enc.decode(enc.encode(values))[:4]) == [1, 2, 3, 0]
        # Non-negative values must be below t; any negative value switches to reduction mod t.
        with pytest.raises(lycaon.LycaonError, match=f"not below the plaintext modulus t = {t}"):
            enc.encode([t])
        with pytest.raises(lycaon.LycaonError, match="not below"):
            enc.encode(np.array([2**64 - 1], dtype=np.uint64))
        got = enc.decode(enc.encode([-(2**62), -1, t - 1, t + 5]))
        assert list(got[:4]) == [(-(2**62)) % t, t - 1, t - 1, 5]
        assert list(enc.decode(enc.encode([-3, 4]), signed=True)[:2]) == [-3, 4]
        assert enc.decode(enc.encode([1]), signed=True).dtype == np.int64
        assert enc.decode(enc.encode([1])).dtype == np.uint64
        with pytest.raises(lycaon.LycaonError, match="64 bits"):
            enc.encode([2**70])
        with pytest.raises(lycaon.LycaonError, match=f"at most {n}"):
            enc.encode([1] * (n + 1))
        # Wrong dtypes, shapes and types name what they got.
        for bad, what in ((np.zeros(4), "dtype float64"), (np.array([True]), "dtype bool"), ([1, 2.5], "element of type float"),
                          (["a"], "element of type str"), ("123", "type str"), (np.zeros((2, 2), dtype=np.int64), r"shape \(2, 2\)")):
            with pytest.raises(lycaon.LycaonError, match=what):
                enc.encode(bad)
        assert enc.slot_count == n


if given is not None:

    @settings(max_examples=15, deadline=None)
    @given(st.lists(st.integers(min_value=-(2**62), max_value=1032192), min_size=1, max_size=4096), st.integers(-2**80, 2**80), st.integers(-50, 50))
    def test_property_scalar_and_rotation(values, scalar, step):
        s = _small()
        t = s.t
        assert t == 1032193
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


def test_insecure_parameter_bytes_are_refused():
    blake3 = pytest.importorskip("blake3")
    import struct

    p = lycaon.BfvParameters.default(4096)
    data = bytearray(p.to_bytes())
    payload_len = struct.unpack_from("<Q", data, 40)[0]
    payload = data[48 : 48 + payload_len]
    payload[-1] = 0  # security byte: test-only
    body = bytes(data[:8]) + bytes(32) + bytes(data[40:48]) + bytes(payload)
    # Recompute the content id and the checksum as a forger would (neither is a MAC).
    h = blake3.blake3(b"lycaon-parameters-v1")
    h.update(struct.pack("<Q", p.n))
    for primes in (p.ciphertext_moduli, p.special_moduli):
        h.update(struct.pack("<Q", len(primes)))
        for q in primes:
            h.update(struct.pack("<Q", q))
    h.update(struct.pack("<Q", p.plaintext_modulus))
    h.update(struct.pack("<Q", p.key_switch_digits))
    h.update(b"\x00")
    body = body[:8] + h.digest() + body[40:]
    forged = body + blake3.blake3(body).digest()[:16]
    with pytest.raises(lycaon.SecurityError, match="test-only"):
        lycaon.BfvParameters.from_bytes(forged)


def test_bench_helpers():
    info = lycaon.bench_info()
    assert {"version", "backend", "ifma", "threads", "optimized"} <= set(info)
    assert info["version"] == lycaon.__version__ and isinstance(info["ifma"], bool)
    p = lycaon.BfvParameters.default(4096)
    limb = lycaon.NttLimb(4096, p.ciphertext_moduli[0])
    limb.roundtrip()
    assert isinstance(limb.uses_ifma, bool)
    with pytest.raises(lycaon.ParameterError):
        lycaon.NttLimb(4096, 65539)


def test_heavy_calls_release_the_gil():
    """While one thread is inside a long Rust call, another thread keeps running Python."""
    import threading
    import time

    p = lycaon.BfvParameters.default(8192)
    keys = lycaon.KeyGenerator(p)
    steps = list(range(1, 40))
    start = time.perf_counter()
    keys.galois_keys(steps)
    alone = time.perf_counter() - start
    worker = threading.Thread(target=keys.galois_keys, args=(steps,))
    last, max_gap = time.perf_counter(), 0.0
    worker.start()
    while worker.is_alive():
        now = time.perf_counter()
        max_gap, last = max(max_gap, now - last), now
    worker.join()
    assert max_gap < alone / 2, f"the main thread stalled {max_gap * 1e3:.1f} ms during a {alone * 1e3:.1f} ms call"


def test_stubs_cover_the_native_module():
    import ast
    from pathlib import Path

    import lycaon._native as native

    stub = ast.parse((Path(lycaon.__file__).parent / "_native.pyi").read_text())
    classes = {node.name: node for node in stub.body if isinstance(node, ast.ClassDef)}
    functions = {node.name for node in stub.body if isinstance(node, ast.FunctionDef)}
    public = {name for name in dir(native) if not name.startswith("_")}
    assert public == set(classes) | functions
    # The runtime's natives (both modes) are wrapped by lycaon.hybrid (Server and Client are
    # exported), lycaon.fhe_compiler, lycaon.plan, lycaon.bench and lycaon.cluster.
    hybrid_natives = {"HybridServer", "LinearWorker", "FheWorker", "hybrid_infer", "hybrid_fetch_program", "hybrid_local", "fetch_public_model", "FheSession", "fhe_program_facts", "fhe_rotation_plan", "fhe_schedule",
                      "fhe_compile", "fhe_compile_path", "ckks_bench_ops", "ckks_bench_bootstrap"}
    assert hybrid_natives <= public
    assert set(lycaon.__all__) == (public - hybrid_natives) | {"__version__", "Server", "Client"}
    for name, node in classes.items():
        runtime = getattr(native, name)
        assert ast.get_docstring(node), f"{name} has no docstring in the stub"
        for item in node.body:
            if isinstance(item, ast.FunctionDef):
                if not (item.name.startswith("__") and item.name != "__init__"):
                    assert ast.get_docstring(item), f"{name}.{item.name} has no docstring in the stub"
                assert hasattr(runtime, item.name), f"{name}.{item.name} is in the stub but not in the module"
        for attr in dir(runtime):
            if not attr.startswith("_") and not issubclass(runtime, BaseException):
                assert any(isinstance(i, ast.FunctionDef) and i.name == attr for i in node.body), f"{name}.{attr} is missing from the stub"


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
