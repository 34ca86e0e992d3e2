"""A server whose work runs on Ray workers (lycaon.cluster): a local Ray instance with two
single-threaded worker processes on this machine. Hybrid: the logits over TCP equal the
fixed-point twin's (which one machine also gives, bit for bit: test_hybrid) on LeNet-5 and
ResNet-20. FHE: every op on the workers, the logits to the CKKS precision of the plaintext
network (bit for bit one machine's: crates/lycaon-runtime/tests/fhe_parts.rs). In both modes a
worker killed during an inference is restarted and the inference completes, and a second
session on the same server completes. Skipped where Ray is not installed (the optional extra
lycaon[ray])."""

import json
import os
import signal
import threading
import time

import numpy as np
import pytest

import lycaon
from hybrid_plans import coefficient_plan
from lycaon import hybrid
from lycaon.cluster import RayFanout, unit_ranges

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'lycaon[ray]')")


@pytest.fixture(scope="module")
def ray_local():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _images(dataset: str, count: int):
    from lycaon import data  # noqa: PLC0415
    from lycaon.plan import preprocessor  # noqa: PLC0415

    try:
        raw, _ = data.mnist_test_subset() if dataset == "mnist" else data.cifar10_test_subset()
    except OSError as e:  # CIFAR-10 lives in ../shared/data, which a checkout elsewhere lacks
        pytest.skip(str(e))
    return preprocessor(dataset)(raw[:count])


def _prepared(name: str, dataset: str):
    """(program, weights, quantised model): quantised on 8 test images, planned by hand."""
    from lycaon.frontend import simplify, zoo  # noqa: PLC0415
    from lycaon.frontend.quantize import QuantConfig, quantize  # noqa: PLC0415

    q = quantize(simplify(zoo.load_model(name)), _images(dataset, 8), QuantConfig())
    program, weights = hybrid.compile_program(q, coefficient_plan(q.graph))
    return program, weights, q


def _session_thread(address, x, results: dict, errors: list):
    """A thread target: one session on image i, its result into results[i] or its error into errors."""

    def infer(i):
        try:
            results[i] = lycaon.Client(address).infer(x[i:i + 1])
        except Exception as e:  # noqa: BLE001 - reported by the test
            errors.append(repr(e))

    return infer


def _concurrent_sessions(address, x) -> dict:
    """One session per image of x, all at once: {image index: result}; fails on any error."""
    results, errors = {}, []
    infer = _session_thread(address, x, results, errors)
    threads = [threading.Thread(target=infer, args=(i,)) for i in range(len(x))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    return results


def _serve(program, weights, fanout):
    options = {"max_sessions": 4, "timeout_s": 120, "flood_bits": 40}
    server = lycaon._native.HybridServer(json.dumps(program), weights, json.dumps(options), fanout)
    return server, server.start("127.0.0.1:0")


def test_units_split_into_contiguous_near_equal_ranges():
    for units in range(1, 40):
        for parts in range(1, 7):
            ranges = unit_ranges(units, parts)
            assert ranges[0][0] == 0 and ranges[-1][1] == units
            assert all(a < b for a, b in ranges) and all(r[1] == s[0] for r, s in zip(ranges, ranges[1:]))
            assert len(ranges) == min(units, parts)
            sizes = [b - a for a, b in ranges]
            assert max(sizes) - min(sizes) <= 1
            for block in range(2, 9):
                # Cut at multiples of the block where there are enough blocks, evenly otherwise.
                cut = unit_ranges(units, parts, block)
                assert cut[0][0] == 0 and cut[-1][1] == units and all(r[1] == s[0] for r, s in zip(cut, cut[1:]))
                blocks = -(-units // block)
                if blocks >= parts:
                    assert len(cut) == parts and all(a % block == 0 for a, _ in cut)
                    assert max(b - a for a, b in cut) <= block * -(-blocks // parts)
                else:
                    assert cut == ranges


@pytest.mark.parametrize("model, dataset, count", [("lenet5-mnist", "mnist", 2), ("resnet20-cifar10", "cifar10", 1)])
def test_logits_on_two_workers_are_the_fixed_point_twins(ray_local, model, dataset, count):
    from lycaon.frontend.quantize import run_integer  # noqa: PLC0415

    program, weights, q = _prepared(model, dataset)
    x = _images(dataset, 12)[8:8 + count]
    twin = run_integer(q, q.encode_input(x))
    fanout = RayFanout(json.dumps(program), weights, workers=2, threads=1, flood_bits=40.0)
    server, address = _serve(program, weights, fanout)
    try:
        result = lycaon.Client(address).infer(x)
        assert (np.round(result.logits * 2.0 ** program["fraction_bits"]).astype(np.int64) == twin).all()
        linear = [op["name"] for op in program["ops"] if op["op"] == "linear"]
        # Every linear layer of every image ran on the workers, split where it has several units.
        assert [r["layer"] for r in fanout.records] == linear * count
        assert any(r["ranges"] == 2 for r in fanout.records)
        assert all(r["retries"] == 0 for r in fanout.records)
    finally:
        server.stop()
        fanout.shutdown()


def test_a_killed_worker_is_replaced_and_the_sessions_complete(ray_local):
    from lycaon.frontend.quantize import run_integer  # noqa: PLC0415

    program, weights, q = _prepared("resnet20-cifar10", "cifar10")
    x = _images("cifar10", 10)[8:]
    twin = run_integer(q, q.encode_input(x))
    fanout = RayFanout(json.dumps(program), weights, workers=2, threads=1, flood_bits=40.0)
    server, address = _serve(program, weights, fanout)
    try:
        results, errors = {}, []
        infer = _session_thread(address, x, results, errors)

        first = threading.Thread(target=infer, args=(0,))
        first.start()
        deadline = time.time() + 120
        while len(fanout.records) < 3 and time.time() < deadline:  # a few layers in
            time.sleep(0.01)
        victim = fanout.pids[0]
        os.kill(victim, signal.SIGKILL)
        first.join(timeout=300)
        second = threading.Thread(target=infer, args=(1,))
        second.start()
        second.join(timeout=300)
        assert not errors, errors
        for i in (0, 1):
            assert (np.round(results[i].logits * 2.0 ** program["fraction_bits"]).astype(np.int64) == twin[i]).all()
        # Ray restarted the killed worker: a new process answers in its place.
        assert ray.get(fanout.workers[0].pid.remote()) != victim
    finally:
        server.stop()
        fanout.shutdown()


def _workers_forget(fanout, timeout_s: float = 30.0) -> bool:
    """Whether every worker of an FHE fanout drops its sessions' keys within ``timeout_s`` (the
    server tells them when a session ends, without waiting)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if sum(ray.get([w.sessions_held.remote() for w in fanout.workers])) == 0:
            return True
        time.sleep(0.1)
    return False


def test_fhe_ops_run_on_two_workers_and_the_server_keeps_no_keys(ray_local):
    from test_fhe import bits, small_cnn  # noqa: PLC0415

    from lycaon import fhe  # noqa: PLC0415

    rng = np.random.default_rng(8)
    g = small_cnn(rng, 1, 2, 5)
    server = lycaon.Server(g, mode="fhe", ray="local", workers=2, worker_threads=1, max_sessions=4)
    address = server.start(0)
    try:
        fanout = server.fanout
        x = rng.uniform(0, 1, (4, 1, 8, 8))
        results = _concurrent_sessions(address, x)
        # Each answer to the CKKS precision of one machine's (the plaintext network's logits).
        for i in range(4):
            assert bits(fhe.plaintext_reference(g, x[i]), results[i].logits[0]) >= 12
        # Every op of every query ran on the workers (a one-ciphertext network: one chain a
        # query), the sessions spread over both, and no worker keeps a session's keys after it.
        assert len(fanout.records) == 4 and all(r["ops"] == len(server.program["ops"]) and r["retries"] == 0 for r in fanout.records)
        assert set(fanout.dispatched) == {0, 1}, fanout.dispatched
        assert _workers_forget(fanout)
        # bench scale's model of N machines from one query's record: a single chain, so more
        # machines change nothing but the transfers.
        from lycaon.bench.scale import MACHINES, fhe_machines_model  # noqa: PLC0415

        rows = fhe_machines_model({"program": server.program, "steps": fanout.records[:1], "latency_s": fanout.records[0]["seconds"] + 0.5}, 10.0, 0.1)
        assert [r["machines"] for r in rows] == list(MACHINES)
        assert all(abs(r["steps_s"] - rows[0]["steps_s"]) < 1e-9 and r["steps_s"] >= fanout.records[0]["batch_seconds"][0] for r in rows)
    finally:
        server.stop()


def test_a_killed_fhe_worker_is_replaced_and_the_sessions_complete(ray_local):
    from test_fhe import bits, conv_net  # noqa: PLC0415

    from lycaon import fhe  # noqa: PLC0415

    g = conv_net(3, 32, 3, 16, 3, 1, 1)  # about 1.5 s an inference on one thread
    server = lycaon.Server(g, mode="fhe", ray="local", workers=2, worker_threads=1, max_sessions=2)
    address = server.start(0)
    try:
        fanout = server.fanout
        x = np.random.default_rng(3).uniform(0, 1, (2, 3, 32, 32))
        results, errors = {}, []
        infer = _session_thread(address, x, results, errors)
        first = threading.Thread(target=infer, args=(0,))
        first.start()
        deadline = time.time() + 120
        while not fanout.dispatched and time.time() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)  # into the inference
        victim = fanout.pids[fanout.dispatched[0]]
        os.kill(victim, signal.SIGKILL)
        first.join(timeout=300)
        second = threading.Thread(target=infer, args=(1,))
        second.start()
        second.join(timeout=300)
        assert not errors, errors
        for i in (0, 1):
            assert bits(fhe.plaintext_reference(g, x[i]), results[i].logits[0]) >= 12
        # The killed worker's batch ran again on the other one, and Ray restarted the killed one.
        assert fanout.records[0]["retries"] == 1, fanout.records
        assert ray.get(fanout.workers[fanout.dispatched[0]].pid.remote()) != victim
        assert _workers_forget(fanout)
    finally:
        server.stop()


def test_a_worker_restarted_between_queries_takes_no_more_of_the_sessions_batches(ray_local):
    """Keys pass through the store one message at a time and are not kept there, so a worker
    restarted after a session's keys arrived has none of them: the session's batches go to the
    workers that do, and when none is left the session fails with a clear error while a new
    session completes."""
    from test_fhe import bits, small_cnn  # noqa: PLC0415

    from lycaon import fhe  # noqa: PLC0415

    rng = np.random.default_rng(9)
    g = small_cnn(rng, 1, 2, 5)
    server = lycaon.Server(g, mode="fhe", ray="local", workers=2, worker_threads=1, max_sessions=2)
    address = server.start(0)

    def restart(i):
        victim = fanout.pids[i]
        os.kill(victim, signal.SIGKILL)
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                fanout.pids[i] = ray.get(fanout.workers[i].pid.remote())
                return
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
                time.sleep(0.2)
        raise AssertionError(f"worker {i} did not restart")

    try:
        fanout = server.fanout
        x = rng.uniform(0, 1, (3, 1, 8, 8))
        client = lycaon.Client(address)
        first = client.infer(x[0:1])
        holder = fanout.dispatched[-1]
        restart(holder)
        # The restarted worker holds no keys of the session: its batch runs on the other worker.
        second = client.infer(x[1:2])
        assert fanout.records[-1]["retries"] == 1 and fanout.dispatched[-1] == holder, fanout.records[-1]
        third = client.infer(x[1:2])
        assert fanout.records[-1]["retries"] == 0 and fanout.dispatched[-1] == 1 - holder
        for r, i in ((first, 0), (second, 1), (third, 1)):
            assert bits(fhe.plaintext_reference(g, x[i]), r.logits[0]) >= 12
        restart(1 - holder)
        with pytest.raises(lycaon.LycaonError, match="every worker holding its keys was lost; start a new session"):
            client.infer(x[2:3])
        # A new session's keys reach both restarted workers.
        fresh = lycaon.Client(address).infer(x[2:3])
        assert bits(fhe.plaintext_reference(g, x[2]), fresh.logits[0]) >= 12
        assert fanout.records[-1]["retries"] == 0
    finally:
        server.stop()


def test_a_worker_failing_on_key_messages_drops_out_of_the_session(ray_local):
    from test_fhe import small_cnn  # noqa: PLC0415

    from lycaon import fhe  # noqa: PLC0415
    from lycaon.cluster import RayFheFanout  # noqa: PLC0415

    program, _ = fhe.compile_model(small_cnn(np.random.default_rng(2), 1, 2, 5))
    fanout = RayFheFanout(json.dumps(program), workers=2, threads=1)
    try:
        # Not a key header: each worker's parse fails on it (said when the keys complete), and
        # the session has no holder left.
        fanout.key_message(5, b"not a key header")
        with pytest.raises(RuntimeError, match=r"session 5: no worker took its keys \(worker 0: .*; worker 1: "):
            fanout.keys_complete(5)
        assert fanout._holders[5] == set()
        fanout.session_ended(5)
        assert ray.get([w.sessions_held.remote() for w in fanout.workers]) == [0, 0]
    finally:
        fanout.shutdown()


def test_fhe_sessions_spread_over_replicas(ray_local):
    from test_fhe import bits, small_cnn  # noqa: PLC0415

    from lycaon import fhe  # noqa: PLC0415

    rng = np.random.default_rng(8)
    g = small_cnn(rng, 1, 2, 5)
    server = lycaon.Server(g, mode="fhe", ray="local", replicas=2, workers=0, max_sessions=4)
    address = server.start(0)
    try:
        x = rng.uniform(0, 1, (4, 1, 8, 8))
        results = _concurrent_sessions(address, x)
        # Each answer to the CKKS precision of one machine's (the plaintext network's logits).
        for i in range(4):
            assert bits(fhe.plaintext_reference(g, x[i]), results[i].logits[0]) >= 12
        assert all(n >= 2 for n in server._server.served), server._server.served
    finally:
        server.stop()


def test_sessions_spread_over_replicas_behind_one_address(ray_local):
    from lycaon.frontend.quantize import run_integer  # noqa: PLC0415
    from lycaon.replicas import ReplicaSet  # noqa: PLC0415

    program, weights, q = _prepared("lenet5-mnist", "mnist")
    x = _images("mnist", 12)[8:12]
    twin = run_integer(q, q.encode_input(x))
    replicas = ReplicaSet(program, weights, {"max_sessions": 4, "timeout_s": 120, "flood_bits": 40}, replicas=2)
    address = replicas.start("127.0.0.1:0")
    try:
        results = _concurrent_sessions(address, x)
        for i in range(4):
            assert (np.round(results[i].logits * 2.0 ** program["fraction_bits"]).astype(np.int64) == twin[i]).all()
        # Both replicas served sessions (the public-program fetches are connections too), and
        # each session ran whole on one replica: its start and end in one replica's log.
        assert all(n >= 2 for n in replicas.served), replicas.served
        logs = [json.loads(line) for line in replicas.logs()]
        ends = [r for r in logs if r["event"] == "session_end" and r.get("layers")]
        assert len(ends) == 4 and {r["replica"] for r in ends} == {0, 1}
    finally:
        replicas.stop()
