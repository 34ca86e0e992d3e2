"""Hybrid private inference end to end through the native runtime: LeNet-5 on real MNIST test
images against the fixed-point twin, and a TCP server that keeps serving concurrent clients while
another sends garbage. The plan is written here (coefficient encoding at n = 8192 with two 60-bit
primes and a 37-bit t: room for 40 bits of noise flooding) so the tests need no cost calibration."""

import json
import socket
import threading

import numpy as np
import pytest

import lycaon
from hybrid_plans import coefficient_plan
from lycaon import hybrid

native = pytest.mark.skipif(not hasattr(lycaon._native, "HybridServer"), reason="the native module has no hybrid runtime")


@pytest.fixture(scope="module")
def lenet():
    from lycaon.frontend import simplify, zoo  # noqa: PLC0415

    graph = simplify(zoo.load_model("lenet5-mnist"))
    try:
        program, weights, q = hybrid.prepare("lenet5-mnist", plan=coefficient_plan(graph), flood_bits=40.0)
    except lycaon.frontend.ir.ModelError as e:  # no MNIST training images to calibrate on
        pytest.skip(str(e))
    return program, weights, q


@native
def test_private_logits_match_the_fixed_point_twin(lenet):
    from lycaon.data import mnist_test_subset  # noqa: PLC0415
    from lycaon.frontend.quantize import run_integer  # noqa: PLC0415
    from lycaon.plan import preprocessor  # noqa: PLC0415

    program, weights, q = lenet
    raw, labels = mnist_test_subset()
    x = preprocessor("mnist")(raw[:3])
    twin = run_integer(q, q.encode_input(x))
    assert any(op["op"] == "truncate" for op in program["ops"])
    for i in range(3):
        r = hybrid.run_local(program, weights, q.encode_input(x[i:i + 1])[0], flood_bits=40.0)
        # The two-party truncations are exact: the logits are the twin's, bit for bit.
        assert r["logits"] == [int(v) for v in twin[i]]
        assert int(np.argmax(twin[i])) == r["label"]
        assert r["bytes"] > 0 and r["rounds"] > 0 and len(r["layers"]) == len(program["ops"])


@native
def test_server_keeps_serving_concurrent_clients_and_survives_garbage(lenet):
    from lycaon.data import mnist_test_subset  # noqa: PLC0415
    from lycaon.frontend.quantize import run_integer  # noqa: PLC0415
    from lycaon.plan import preprocessor  # noqa: PLC0415

    program, weights, q = lenet
    server = lycaon._native.HybridServer(json.dumps(program), weights, json.dumps({"max_sessions": 8, "timeout_s": 30, "flood_bits": 40,
                                                                                   "metadata": {"preprocess": "mnist"}}))
    address = server.start("127.0.0.1:0")
    host, port = address.rsplit(":", 1)
    try:
        raw, _ = mnist_test_subset()
        x = preprocessor("mnist")(raw[:2])
        twin = run_integer(q, q.encode_input(x)).argmax(1)
        results, errors = {}, []

        def client(i):
            try:
                results[i] = lycaon.Client(address).infer(x[i:i + 1]).labels[0]
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))

        def garbage():
            with socket.create_connection((host, int(port)), timeout=10) as s:
                s.sendall(b"\x05\x00\x00\x00hello")  # a well-framed message that is not a hello
                reply = s.recv(4096)
                assert b"hello" in reply, reply  # the server says what is wrong
            with socket.create_connection((host, int(port)), timeout=10) as s:
                s.sendall(b"\xff\xff\xff\x7f")  # announces a 2 GiB frame: refused before reading
                s.recv(4096)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(2)] + [threading.Thread(target=garbage)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert not errors, errors
        assert [results[0], results[1]] == list(twin)
        # Still up: the public program, then one more inference.
        assert lycaon.Client(address).program["name"] == program["name"]
        logs = [json.loads(line) for line in server.logs()]
        assert sum(r["event"] == "session_end" for r in logs) >= 2
        assert any(r["event"] == "session_error" for r in logs)
        assert not any("secret" in json.dumps(r).lower() for r in logs)
    finally:
        server.stop()


@native
def test_bad_inputs_get_clear_errors(lenet):
    program, weights, _ = lenet
    bad = dict(weights)
    first = next(iter(bad))
    bad[first] = {"weight": bad[first]["weight"][:-1]}
    with pytest.raises(lycaon.LycaonError, match=first):
        lycaon._native.HybridServer(json.dumps(program), bad, "{}")
    with pytest.raises(lycaon.LycaonError, match="program"):
        lycaon._native.HybridServer(json.dumps({**program, "version": 99}), weights, "{}")
    with pytest.raises(lycaon.LycaonError, match="unknown field"):
        lycaon._native.HybridServer(json.dumps(program), weights, json.dumps({"max_session": 3}))
    with pytest.raises(ValueError, match="input of shape"):
        hybrid.run_local(program, weights, np.zeros(5, dtype=np.int64))
    with pytest.raises(lycaon.LycaonError, match="input has 5 values"):
        lycaon._native.hybrid_local(json.dumps(program), weights, np.zeros(5, dtype=np.int64), "{}")
