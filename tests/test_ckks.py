"""CKKS through the Python API, client side: encryption and decryption precision, pickling,
secret-key handling, errors. Homomorphic evaluation runs in the Rust runtime only; its precision
and errors are tested in crates/lycaon-ckks/tests (operations.rs, transforms.rs)."""

import pickle

import numpy as np
import pytest

import lycaon


@pytest.fixture(scope="module")
def suite():
    class S:
        pass

    s = S()
    s.params = lycaon.CkksParameters.scale_stable(1 << 13, 45, 40, 3, [50])
    keys = lycaon.CkksKeyGenerator(s.params)
    s.sk = keys.secret_key()
    s.pk = keys.public_key()
    s.enc = lycaon.CkksPublicEncryptor(s.params, s.pk)
    s.sym = lycaon.CkksSecretEncryptor(s.params, s.sk)
    s.dec = lycaon.CkksDecryptor(s.params, s.sk)
    s.cod = lycaon.CkksEncoder(s.params)
    s.rng = np.random.default_rng(1)
    s.encrypt = lambda v: s.enc.encrypt(s.cod.encode(v))
    s.decrypt = lambda c: s.cod.decode(s.dec.decrypt(c))
    return s


def bits(want, got):
    return lycaon.precision_stats(want, got)["min_bits"]


def test_encryption_keeps_precision(suite):
    s = suite
    slots = s.params.max_slots
    x = s.rng.uniform(-1, 1, slots) + 1j * s.rng.uniform(-1, 1, slots)
    y = s.rng.uniform(-1, 1, slots)
    cx = s.encrypt(x)
    assert cx.level == s.params.max_level and cx.slots == slots and cx.size == 2
    assert cx.scale == s.params.scale_at(cx.level)
    assert bits(x, s.decrypt(cx)) > 17
    # A fresh encryption at a lower level carries that level's canonical scale.
    low = s.enc.encrypt(s.cod.encode(y, level=1))
    assert low.level == 1 and low.scale == s.params.scale_at(1)
    assert bits(y, s.cod.decode_real(s.dec.decrypt(low))) > 17
    seeded = s.sym.encrypt(s.cod.encode(y))
    assert len(seeded.to_bytes()) < 0.6 * len(seeded.expand().to_bytes())
    assert bits(y, s.cod.decode_real(s.dec.decrypt(seeded.expand()))) > 17
    back = lycaon.CkksSeededCiphertext.from_bytes(s.params, seeded.to_bytes())
    assert bits(y, s.cod.decode_real(s.dec.decrypt(back.expand()))) > 17


def test_linear_transform_and_chebyshev_helpers_in_the_clear(suite):
    # What the FHE compiler reads from a transform: its rotation steps and its product.
    s = suite
    slots = 4
    m = s.rng.uniform(-1, 1, (slots, slots))
    v = s.rng.uniform(-1, 1, slots)
    diags = {k: np.array([m[t, (t + k) % slots] for t in range(slots)]) for k in range(slots)}
    lt = lycaon.CkksLinearTransform(s.params, diags)
    assert lt.slots == slots and lt.diagonal_count == slots
    steps = {r % slots for r in lt.rotations()} - {0}
    assert steps and steps <= {1, 2, 3}
    assert np.allclose(lt.apply_plain(v), m @ v)
    coeffs = lycaon.chebyshev_coefficients(np.tanh, -4.0, 4.0, 31)
    x = s.rng.uniform(-4, 4, 64)
    assert np.abs(np.polynomial.chebyshev.chebval(x / 4.0, coeffs) - np.tanh(x)).max() < 1e-3


def test_pickling_and_errors(suite):
    s = suite
    ct = s.encrypt([0.25, -0.5])
    back = pickle.loads(pickle.dumps(ct))
    assert back.level == ct.level and back.scale == ct.scale
    assert bits([0.25, -0.5], s.decrypt(back)[:2]) > 17
    assert pickle.loads(pickle.dumps(s.params)).id == s.params.id
    pk = pickle.loads(pickle.dumps(s.pk))
    assert bits([0.25, -0.5], s.decrypt(lycaon.CkksPublicEncryptor(s.params, pk).encrypt(s.cod.encode([0.25, -0.5])))[:2]) > 17
    odd = s.enc.encrypt(s.cod.encode([1.0], scale=1.37 * 2.0**30))
    assert odd.scale == 1.37 * 2.0**30 and bits([1.0], s.decrypt(odd)[:1]) > 17
    other = lycaon.CkksParameters.scale_stable(1 << 13, 45, 40, 2, [50])
    with pytest.raises(lycaon.LycaonError, match="different parameters"):
        lycaon.CkksDecryptor(other, s.sk)
    with pytest.raises(lycaon.SerializationError):
        lycaon.CkksCiphertext.from_bytes(s.params, b"junk")
    with pytest.raises(lycaon.SecurityError):
        lycaon.CkksParameters.from_bits(1 << 13, [60, 60, 60, 60], [60], 40)


def test_secret_key_does_not_pickle_and_encryptors_hold_one_key(suite):
    s = suite
    with pytest.raises(TypeError, match="secret key cannot be pickled.*export_secret_key_bytes"):
        pickle.dumps(s.sk)
    assert not hasattr(s.sk, "to_bytes") and not hasattr(lycaon.CkksSecretKey, "from_bytes")
    data = s.sk.export_secret_key_bytes()
    back = lycaon.CkksSecretKey.import_secret_key_bytes(s.params, data)
    assert back.export_secret_key_bytes() == data
    ct = s.encrypt([0.25, -0.5])
    assert bits([0.25, -0.5], s.cod.decode(lycaon.CkksDecryptor(s.params, back).decrypt(ct))[:2]) > 17
    with pytest.raises(lycaon.SerializationError):
        lycaon.CkksSecretKey.import_secret_key_bytes(s.params, data[:-5])
    # Each encryptor takes its one key; the wrong kind is a TypeError naming the argument.
    with pytest.raises(TypeError, match="public_key"):
        lycaon.CkksPublicEncryptor(s.params, s.sk)
    with pytest.raises(TypeError, match="secret_key"):
        lycaon.CkksSecretEncryptor(s.params, s.pk)
    # The public encryptor re-randomises: same message and scale, new ciphertext.
    fresh = s.enc.rerandomise(ct)
    assert fresh.scale == ct.scale and fresh.level == ct.level and fresh.to_bytes() != ct.to_bytes()
    assert bits([0.25, -0.5], s.decrypt(fresh)[:2]) > 17


def test_composite_relu_is_within_its_stated_error_on_the_unit_interval():
    from lycaon.frontend.approx import composite_relu

    relu = composite_relu()
    spec = relu.spec
    assert spec["depth"] == 14 and [len(c) for c in spec["stages"]] == [16, 16, 28]
    assert spec["relu_error"] < 2.0**-13
    x = np.concatenate([np.linspace(-1, 1, 20001), np.geomspace(1e-6, 1, 2000), -np.geomspace(1e-6, 1, 2000)])
    err = np.abs(relu(x) - np.maximum(x, 0)).max()
    assert err <= spec["relu_error"] * 1.01
    # Odd stages: even Chebyshev coefficients vanish.
    assert all(np.all(np.asarray(c)[0::2] == 0) for c in spec["stages"])
