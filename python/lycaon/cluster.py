"""Past one machine: a server whose work runs on Ray workers (DESIGN.md, "Growing past one
machine"; ``lycaon serve MODEL [--mode fhe] --ray ADDRESS|auto --workers N``).

The hybrid mode (``RayFanout``) is described first; the FHE mode (``RayFheFanout``) at the end.

The server keeps the session: the client's connection and the two-party protocols. Per linear
layer it hands the input ciphertexts (its share added) to a ``RayFanout``, which splits the
layer's output units (each one output ciphertext computed from all the inputs, or the whole
layer) into one contiguous range per worker and runs the ranges as Ray actor calls. A worker
answers its outputs as the server does alone (mask from a fresh seed, re-randomisation with the
session's public key, noise flooding, switch to level 0, cut for the wire) and returns the
responses and the masks' seed; the server gathers the responses in order and rebuilds its share
from the seeds. So the logits are bit for bit those of one machine, and what comes back is the
responses, not the larger output ciphertexts.

Each worker is a Ray actor holding the program and the integer weights (put in the object store
once and read by every worker once) and, per session, the public key and the Galois keys of the
layers in flight: each key goes into the object store once when the client sends it and each
worker reads it once, on its first call that needs it; keys go when the server drops them.
Workers are the server's side: they see the masks' seeds, never a secret key. A worker that dies
is restarted by Ray (its weights come back from the object store and its keys on its next call); the
units it was computing run again on another worker. A layer whose units fail on every worker
fails its session with an error that says so; other sessions go on.

The FHE mode: the server checks the client's keys as they arrive and puts the messages in the
object store once; every worker (a Ray actor holding the program, prepared once) parses them
when the keys are accepted, so the evaluation and bootstrapping keys live on the workers and the
server keeps only the public key that re-randomises answers. Per query the runtime cuts the
program into steps (``FheExecutable::schedule``): a wave of independent units (ops on the parts
of a tensor larger than one ciphertext, and the per-part terms of a convolution that reads
several; the server adds the terms) is split into one batch per worker, and a chain of dependent
ops runs whole on one worker, so ciphertexts cross processes only between steps. Each
op runs as on one machine, so the logits are bit for bit one machine's. A batch whose worker dies
runs again on the next one (a restarted worker fetches the session's keys from the object store).

Ray is an optional dependency: ``pip install 'lycaon[ray]'``.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Optional, Sequence

#: Whole-layer retries: each failed range runs again on the next worker, at most this many times.
RETRIES = 2


def _ray():
    try:
        import ray  # noqa: PLC0415
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("serving on a Ray cluster needs Ray: pip install 'lycaon[ray]'") from e
    return ray


class _LinearWorker:
    """The body of the Ray actor (wrapped by ``ray.remote`` when a fanout starts, so importing
    this module does not need Ray)."""

    def __init__(self, program_json: str, weights: dict, flood_bits: Optional[float], threads: int):
        from lycaon._native import LinearWorker  # noqa: PLC0415

        self.worker = LinearWorker(program_json, weights, flood_bits, threads)

    def pid(self) -> int:
        return os.getpid()

    def evaluate(self, session: int, layer: str, start: int, end: int, inputs: list, keys: dict) -> list:
        """Units start..end of ``layer``, answered: (mask seed, responses). ``keys`` maps (set,
        element) to the object reference of each key the session holds now (element 0: its public
        key): fetched here when this worker lacks it, dropped here when the session no longer
        holds it."""
        held = set(self.worker.held_keys(session))
        missing = [k for k in keys if k not in held]
        if missing:
            ray = _ray()
            for (set_, element), message in zip(missing, ray.get([keys[k] for k in missing])):
                self.worker.add_key(session, set_, element, message)
        for set_, element in held - set(keys):
            self.worker.drop_key(session, set_, element)
        return self.worker.evaluate(session, layer, start, end, inputs)

    def end_session(self, session: int) -> None:
        self.worker.end_session(session)


class KeysLost(RuntimeError):
    """A worker restarted since a session's keys arrived, and holds none of them."""


def _gather(count: int, send, worker_of, what, lost: tuple = ()) -> tuple[list, int]:
    """The results of calls 0..count-1 in order, all sent first (``send(k, tries)`` sends call k
    to its worker, or after ``tries`` failures to the next one, which ``worker_of(k, tries)``
    names), and how many were sent again. A call whose worker dies (or raises one of ``lost``)
    runs again on the next worker, at most ``RETRIES`` times; then the error names ``what(k)``
    and the workers that failed."""
    ray = _ray()
    calls = [send(k, 0) for k in range(count)]
    results: list = []
    retries = 0
    for k, call in enumerate(calls):
        failures: list[str] = []
        while True:
            try:
                results.append(ray.get(call))
                break
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError, *lost) as e:
                failures.append(f"worker {worker_of(k, len(failures))}: {type(e).__name__}")
                if len(failures) > RETRIES:
                    raise RuntimeError(f"{what(k)} failed on {len(failures)} workers ({'; '.join(failures)})") from None
                retries += 1
                call = send(k, len(failures))
    return results, retries


def unit_ranges(units: int, parts: int, block: int = 1) -> list[tuple[int, int]]:
    """``units`` split into at most ``parts`` contiguous non-empty ranges of near-equal size, cut
    at multiples of ``block`` (units that share prepared weights) when there are at least
    ``parts`` blocks."""
    block = max(1, block)
    blocks = -(-units // block)
    if blocks < parts:
        block, blocks = 1, units
    parts = max(1, min(parts, blocks))
    cuts = [min(units, block * (blocks * k // parts)) for k in range(parts + 1)]
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]


class _RayWorkers:
    """What both fanouts share: their worker actors and the local Ray instance they may have started."""

    workers: list
    _started_ray: bool

    def shutdown(self) -> None:
        """Stops the workers (and the local Ray instance this fanout started)."""
        ray = _ray()
        for w in self.workers:
            ray.kill(w)
        self.workers = []
        if self._started_ray:
            ray.shutdown()


class RayFanout(_RayWorkers):
    """Runs a hybrid server's linear layers on ``workers`` Ray actors of ``threads`` threads each
    (the native server calls ``key_arrived``, ``key_departed``, ``evaluate`` and
    ``session_ended`` from its session threads). ``address``: a running cluster's address, "auto"
    for the one this machine belongs to, or None to start a local instance (with at least
    ``workers * threads`` CPUs so that every worker is placed)."""

    def __init__(self, program_json: str, weights: dict, *, workers: int = 2, threads: int = 1, flood_bits: Optional[float] = None,
                 address: Optional[str] = None):
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers}")
        if threads < 0:
            raise ValueError(f"threads must be 0 (all cores) or more, not {threads}")
        ray = _ray()
        self._started_ray = _init_ray(ray, address, workers * max(threads, 1))
        actor = ray.remote(_LinearWorker).options(max_restarts=-1, max_task_retries=0, num_cpus=max(threads, 1))
        self._weights = ray.put(weights)  # kept referenced so that a restarted worker finds it
        self.workers = [actor.remote(program_json, self._weights, flood_bits, threads) for _ in range(workers)]
        self.threads = threads
        self.pids = ray.get([w.pid.remote() for w in self.workers])  # waits until each worker holds the model
        self._keys: dict[int, dict[tuple[int, int], object]] = {}
        self._lock = threading.Lock()
        #: Per call of ``evaluate``: layer, units, seconds per range and retries (for ``bench scale``).
        self.records: list[dict] = []

    def key_arrived(self, session: int, set_: int, element: int, message: bytes) -> None:
        ref = _ray().put(message)
        with self._lock:
            self._keys.setdefault(session, {})[(set_, element)] = ref

    def key_departed(self, session: int, set_: int, element: int) -> None:
        with self._lock:
            self._keys.get(session, {}).pop((set_, element), None)

    def session_ended(self, session: int) -> None:
        with self._lock:
            self._keys.pop(session, None)
        for w in self.workers:
            w.end_session.remote(session)

    def evaluate(self, session: int, layer: str, units: int, block: int, inputs: list) -> list:
        """The layer's answers, one (mask seed, responses) per range of units, in order; ranges
        are cut at multiples of ``block`` where they can be."""
        ray = _ray()
        import time  # noqa: PLC0415

        began = time.perf_counter()
        with self._lock:
            keys = dict(self._keys.get(session, {}))
        inputs_ref = ray.put(inputs)
        ranges = unit_ranges(units, len(self.workers), block)

        def send(k: int, tries: int):
            return self.workers[(k + tries) % len(self.workers)].evaluate.remote(session, layer, *ranges[k], inputs_ref, keys)

        outputs, retries = _gather(len(ranges), send, lambda k, tries: (k + tries) % len(self.workers),
                                   lambda k: f"linear '{layer}': units {ranges[k][0]}..{ranges[k][1]}")
        self.records.append({"layer": layer, "units": units, "ranges": len(ranges), "seconds": time.perf_counter() - began, "retries": retries,
                             "input_bytes": sum(len(x) for x in inputs), "output_bytes": sum(len(seed) + sum(map(len, responses)) for seed, responses in outputs)})
        return outputs


def start_fanout(program: dict, weights: dict, *, address: Optional[str], workers: int, threads: int, flood_bits: float) -> RayFanout:
    """A ``RayFanout`` for a server's program and weights (``address``: "local" or None starts a
    local Ray instance)."""
    return RayFanout(json.dumps(program), weights, workers=workers, threads=threads, flood_bits=flood_bits,
                     address=None if address in (None, "local") else address)


class _FheWorker:
    """The body of an FHE worker actor: the program prepared once, and each session's keys."""

    def __init__(self, program_json: str, threads: int):
        from lycaon._native import FheWorker  # noqa: PLC0415

        self.worker = FheWorker(program_json, threads)

    def pid(self) -> int:
        return os.getpid()

    def add_key_message(self, session: int, message: bytes) -> None:
        """The next of ``session``'s key messages (the key header first), parsed as it comes."""
        self.worker.add_key_message(session, message)

    def keys_complete(self, session: int) -> int:
        """Every key message of ``session`` has come: the keys' size in memory."""
        return self.worker.keys_complete(session)

    def run(self, session: int, batch_json: str, inputs: list) -> tuple:
        """One batch of ``session``: (its output ciphertexts, its statistics as JSON). A worker
        restarted since the session's keys arrived holds none of them: ``KeysLost``, and the
        fanout sends the batch to a worker that does."""
        if not self.worker.has_keys(session):
            raise KeysLost(f"this worker holds no keys of session {session} (it restarted since they arrived)")
        return self.worker.run(session, batch_json, inputs)

    def end_session(self, session: int) -> None:
        self.worker.end_session(session)

    def sessions_held(self) -> int:
        return self.worker.sessions_held()


class RayFheFanout(_RayWorkers):
    """Runs an FHE server's ops on ``workers`` Ray actors of ``threads`` threads each (the native
    server calls ``key_message``, ``keys_complete``, ``run`` and ``session_ended`` from its session threads; see the
    module's docs). ``address`` as for ``RayFanout``."""

    def __init__(self, program_json: str, *, workers: int = 2, threads: int = 1, address: Optional[str] = None):
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers}")
        if threads < 0:
            raise ValueError(f"threads must be 0 (all cores) or more, not {threads}")
        ray = _ray()
        self._started_ray = _init_ray(ray, address, workers * max(threads, 1))
        actor = ray.remote(_FheWorker).options(max_restarts=-1, max_task_retries=0, num_cpus=max(threads, 1))
        self._program = ray.put(program_json)  # kept referenced so that a restarted worker finds it
        self.workers = [actor.remote(self._program, threads) for _ in range(workers)]
        self.threads = threads
        self.pids = ray.get([w.pid.remote() for w in self.workers])  # waits until each worker holds the program
        #: Per session, the workers that took its keys, and why others did not.
        self._holders: dict[int, set] = {}
        self._key_failures: dict[int, list] = {}
        self._lock = threading.Lock()
        #: Per call of ``run``: whole ops and units (ops and terms), batches, each batch's seconds
        #: on its worker, the call's seconds, retries and bytes (for ``bench scale``).
        self.records: list[dict] = []
        #: The worker index of every batch sent, as it is sent.
        self.dispatched: list[int] = []

    @property
    def width(self) -> int:
        """Workers a step's independent ops are spread over."""
        return len(self.workers)

    def key_message(self, session: int, message: bytes) -> None:
        """Passes one key message of ``session`` to every worker taking its keys, and lets it go:
        the store holds one message at a time, not the session's gigabytes. A worker that is
        down, or fails on the message (one restarted mid-way sees a stream without its start),
        takes no further part in the session; the server's own check of each message decides
        whether the keys are valid."""
        ray = _ray()
        with self._lock:
            holders = self._holders.setdefault(session, set(range(len(self.workers))))
            targets = sorted(holders)
        ref = ray.put(message)
        del message
        calls = [(i, self.workers[i].add_key_message.remote(session, ref)) for i in targets]
        del ref
        for i, call in calls:
            self._drop_on_failure(session, i, call)

    def keys_complete(self, session: int) -> None:
        """Waits for every worker to finish taking ``session``'s keys; fails, saying why, when
        none did."""
        with self._lock:
            targets = sorted(self._holders.get(session, set()))
        for i in targets:
            self._drop_on_failure(session, i, self.workers[i].keys_complete.remote(session))
        with self._lock:
            if not self._holders.get(session):
                why = "; ".join(self._key_failures.pop(session, [])) or "no worker was up"
                raise RuntimeError(f"session {session}: no worker took its keys ({why})")
            self._key_failures.pop(session, None)

    def _drop_on_failure(self, session: int, worker: int, call) -> None:
        """Waits for a key call; a worker whose call failed no longer holds the session's keys."""
        ray = _ray()
        try:
            ray.get(call)
        except ray.exceptions.RayError as e:
            with self._lock:
                self._holders.get(session, set()).discard(worker)
                said = str(e).strip().splitlines()
                self._key_failures.setdefault(session, []).append(f"worker {worker}: {said[-1][:200] if said else type(e).__name__}")

    def session_ended(self, session: int) -> None:
        with self._lock:
            self._holders.pop(session, None)
            self._key_failures.pop(session, None)
        for w in self.workers:
            w.end_session.remote(session)

    def run(self, session: int, batches: list) -> list:
        """Each (batch JSON, input ciphertexts) on its own worker; answers in order."""
        import time  # noqa: PLC0415

        began = time.perf_counter()
        chosen: dict[int, int] = {}

        def worker_of(k: int, tries: int) -> int:
            # The session's batches go to the workers holding its keys, starting at a different
            # one per session so that one-ciphertext networks spread by session; one that failed
            # has restarted without them (or is gone) and takes no more of the session's batches.
            with self._lock:
                holders = self._holders.get(session, set())
                if tries > 0:
                    holders.discard(chosen[k])
                if not holders:
                    raise RuntimeError(f"session {session}: every worker holding its keys was lost; start a new session")
                order = sorted(holders)
                chosen[k] = order[(session + k) % len(order)]
            return chosen[k]

        def send(k: int, tries: int):
            i = worker_of(k, tries)
            if tries == 0:
                self.dispatched.append(i)
            return self.workers[i].run.remote(session, batches[k][0], batches[k][1])

        answers, retries = _gather(len(batches), send, lambda k, tries: chosen[k], lambda k: f"FHE batch {k} of a step", lost=(KeysLost,))
        units = [json.loads(b)["units"] for b, _ in batches]
        timed = [[tuple(op) for op in json.loads(stats)["ops"]] for _, stats in answers]
        self.records.append({"ops": sum(1 for u in units for unit in u if "op" in unit), "units": sum(map(len, units)), "batches": len(batches),
                             "batch_seconds": [sum(seconds for _, seconds in ops) for ops in timed],
                             "unit_seconds": [op for ops in timed for op in ops],
                             "seconds": time.perf_counter() - began, "retries": retries,
                             "input_bytes": sum(len(x) for _, inputs in batches for x in inputs),
                             "output_bytes": sum(len(x) for outputs, _ in answers for x in outputs)})
        return answers


def _init_ray(ray, address: Optional[str], cpus: int) -> bool:
    """Connects to ``address`` (None: starts a local instance with at least ``cpus`` CPUs, so
    that every worker is placed) unless Ray is up; True when this call started it."""
    if ray.is_initialized():
        return False
    if address is None:
        ray.init(num_cpus=max(cpus, os.cpu_count() or 1), include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    return True


def start_fhe_fanout(program: dict, *, address: Optional[str], workers: int, threads: int) -> RayFheFanout:
    """A ``RayFheFanout`` for an FHE server's program (``address`` as for ``start_fanout``)."""
    return RayFheFanout(json.dumps(program), workers=workers, threads=threads, address=None if address in (None, "local") else address)


__all__: Sequence[str] = ("RayFanout", "RayFheFanout", "start_fanout", "start_fhe_fanout", "unit_ranges")
