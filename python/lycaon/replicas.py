"""Many sessions over several replicas behind one address (``lycaon serve MODEL --ray ADDRESS
--replicas R``; DESIGN.md: a server is stateless apart from its sessions' keys).

Each replica is a Ray actor running a whole server on the node Ray places it on, from the
program (and, in the hybrid mode, the weights) this process compiled once, so every replica
serves the same program bit for bit: a hybrid server (the native runtime, with its own Ray
workers for the linear layers when ``workers`` is set) or an FHE server (weights None: the FHE
program carries them; each replica builds its own bootstrapper and holds its own sessions'
keys, or has its own Ray workers hold them and run the ops when ``workers`` is set). A front in this process listens on the public address and pipes each connection to the
replica with the fewest open connections. A session is one connection, so it stays on the
replica that holds its keys for its whole life; a replica that cannot be reached is skipped for
the next one, and one that dies ends only its own sessions.
"""

from __future__ import annotations

import json
import socket
import threading
from typing import Optional

from lycaon.cluster import _ray

#: Bytes copied per read between a client and its replica.
CHUNK = 1 << 20


class _Replica:
    """The body of a replica actor (wrapped by ``ray.remote`` when a replica set starts)."""

    def __init__(self, program_json: str, weights: Optional[dict], options_json: str, workers: int, threads: int):
        from lycaon._native import HybridServer  # noqa: PLC0415

        ray = _ray()
        self.fanout = None
        if weights is None:  # the FHE mode: the program holds its encoded weights
            if workers:
                from lycaon.cluster import RayFheFanout  # noqa: PLC0415

                self.fanout = RayFheFanout(program_json, workers=workers, threads=threads)
            self.server = HybridServer.fhe(program_json, options_json, self.fanout)
        else:
            if workers:
                from lycaon.cluster import RayFanout  # noqa: PLC0415

                self.fanout = RayFanout(program_json, weights, workers=workers, threads=threads, flood_bits=json.loads(options_json).get("flood_bits"))
            self.server = HybridServer(program_json, weights, options_json, self.fanout)
        self.bound = self.server.start(f"{ray.util.get_node_ip_address()}:0")

    def address(self) -> str:
        return self.bound

    def logs(self) -> list:
        return list(self.server.logs())

    def stop(self) -> None:
        self.server.stop()
        if self.fanout is not None:
            self.fanout.shutdown()


class ReplicaSet:
    """``replicas`` replica actors serving ``program`` with ``weights`` (None: an FHE program)
    and the native server ``options``; ``workers`` Ray workers of ``threads`` threads each per
    replica (0: the replica's work runs in the replica).
    Duck-types the native server (``start``, ``serve``, ``stop``, ``logs``). ``address``: a running Ray cluster's, "auto", or None/"local"
    to start a local instance when Ray is not initialised yet."""

    def __init__(self, program: dict, weights: Optional[dict], options: dict, *, replicas: int = 2, workers: int = 0, threads: int = 1,
                 address: Optional[str] = None):
        if replicas < 1:
            raise ValueError(f"replicas must be at least 1, not {replicas}")
        ray = _ray()
        self._started_ray = False
        if not ray.is_initialized():
            ray.init(address=None if address in (None, "local") else address, include_dashboard=False, log_to_driver=False)
            self._started_ray = True
        actor = ray.remote(_Replica).options(num_cpus=0, max_restarts=0)
        weights_ref = None if weights is None else ray.put(weights)
        self.actors = [actor.remote(json.dumps(program), weights_ref, json.dumps(options), workers, threads) for _ in range(replicas)]
        self.addresses = ray.get([a.address.remote() for a in self.actors])
        #: Per replica: connections open now, and connections served in all.
        self.open = [0] * replicas
        self.served = [0] * replicas
        self._logs: list[str] = []
        self._seen = [0] * replicas
        self._lock = threading.Lock()
        self._listener: Optional[socket.socket] = None
        self._stop = threading.Event()

    def start(self, address: str = "127.0.0.1:0") -> str:
        """Listens on "host:port" (port 0: any free port) in a background thread; returns the
        bound "host:port"."""
        host, port = address.rsplit(":", 1)
        listener = socket.create_server((host.strip("[]"), int(port)))
        listener.settimeout(0.2)
        self._listener = listener
        threading.Thread(target=self._accept, name="lycaon-front", daemon=True).start()
        bound_host, bound_port = listener.getsockname()[:2]
        return f"{bound_host}:{bound_port}"

    def serve(self, address: str) -> None:
        """Listens on "host:port" and serves until interrupted (Ctrl-C)."""
        self.start(address)
        try:
            while not self._stop.wait(0.5):
                pass
        finally:
            self.stop()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._session, args=(conn,), daemon=True).start()

    def _connect(self) -> tuple[int, socket.socket]:
        """The least busy reachable replica and a connection to it."""
        with self._lock:
            order = sorted(range(len(self.addresses)), key=lambda k: (self.open[k], self.served[k]))
        errors = []
        for k in order:
            host, port = self.addresses[k].rsplit(":", 1)
            try:
                upstream = socket.create_connection((host, int(port)), timeout=10)
            except OSError as e:
                errors.append(f"replica {k} at {self.addresses[k]}: {e}")
                continue
            upstream.settimeout(None)
            with self._lock:
                self.open[k] += 1
                self.served[k] += 1
            return k, upstream
        raise ConnectionError("no replica reachable: " + "; ".join(errors))

    def _session(self, conn: socket.socket) -> None:
        try:
            k, upstream = self._connect()
        except ConnectionError:
            conn.close()
            return
        try:
            back = threading.Thread(target=_pipe, args=(upstream, conn), daemon=True)
            back.start()
            _pipe(conn, upstream)
            back.join()
        finally:
            with self._lock:
                self.open[k] -= 1
            for s in (conn, upstream):
                s.close()

    def logs(self) -> list[str]:
        """Every replica's log lines (JSON) with the replica's index added, in the order this set
        first saw them (the list only grows, as the native server's does)."""
        ray = _ray()
        per_replica = ray.get([a.logs.remote() for a in self.actors]) if self.actors else []
        with self._lock:
            for k, lines in enumerate(per_replica):
                self._logs.extend(json.dumps({**json.loads(line), "replica": k}) for line in lines[self._seen[k]:])
                self._seen[k] = max(self._seen[k], len(lines))
            return list(self._logs)

    def stop(self) -> None:
        self._stop.set()
        if self._listener is not None:
            self._listener.close()
        ray = _ray()
        for a in self.actors:
            try:
                ray.get(a.stop.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - a dead replica has nothing to stop
                pass
            ray.kill(a)
        self.actors = []
        if self._started_ray:
            ray.shutdown()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    """Copies src to dst until src ends, then ends dst's sending side."""
    try:
        while True:
            data = src.recv(CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
