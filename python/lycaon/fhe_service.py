"""FHE mode over TCP: `lycaon serve MODEL --mode fhe` and `lycaon infer --mode fhe`.

One session: the client says hello and receives the public program (CKKS parameters, input
packing, where the logits come out, the rotation steps with their levels); it generates the
level-aware keyset and uploads it once, seeded; then each query is one ciphertext up and one
ciphertext (re-randomised with the client's public key) down. The server holds the weights and
the session's public keys only.

Frames: 4-byte big-endian length, one kind byte, payload. A payload of several binary parts is a
4-byte count, then each part as 4-byte length and bytes. Kinds: H hello (JSON), S spec (JSON,
parameter bytes), K keys (relinearisation, Galois, public), k keys accepted (JSON), Q query
(ciphertext), R result (JSON, ciphertext), E error (UTF-8 message). A malformed frame or object
gets an E and closes that connection; the server goes on serving the others.
"""

from __future__ import annotations

import json
import socket
import socketserver
import struct
import threading
import time
from typing import Callable, Optional, Sequence

import numpy as np

from ._native import CkksCiphertext, CkksGaloisKeys, CkksParameters, CkksPublicKey, CkksRelinKey, LycaonError
from .fhe import FheClient, FheModel, FheSpec

PROTOCOL = "lycaon-fhe/1"
DEFAULT_PORT = 7452
#: Largest frame accepted (key uploads of the networks this mode runs take a few hundred MB).
MAX_FRAME = 8 << 30


def _send(sock: socket.socket, kind: bytes, *parts: bytes) -> int:
    body = struct.pack(">I", len(parts)) + b"".join(struct.pack(">Q", len(p)) + p for p in parts)
    sock.sendall(struct.pack(">Q", len(body) + 1) + kind + body)
    return len(body) + 9


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], min(n - got, 1 << 24))
        if k == 0:
            raise ConnectionError("the connection closed in the middle of a message")
        got += k
    return bytes(buf)


def _recv(sock: socket.socket) -> tuple[bytes, list[bytes]]:
    (length,) = struct.unpack(">Q", _recv_exact(sock, 8))
    if not 1 <= length <= MAX_FRAME:
        raise LycaonError(f"frame of {length} bytes (the limit is {MAX_FRAME})")
    frame = _recv_exact(sock, length)
    kind, body = frame[:1], frame[1:]
    if len(body) < 4:
        raise LycaonError("a frame without its part count")
    (count,) = struct.unpack(">I", body[:4])
    parts, at = [], 4
    for _ in range(count):
        if at + 8 > len(body):
            raise LycaonError("a frame cut short")
        (n,) = struct.unpack(">Q", body[at:at + 8])
        at += 8
        if at + n > len(body):
            raise LycaonError("a frame part runs past the frame")
        parts.append(body[at:at + n])
        at += n
    return kind, parts


def spec_to_json(spec: FheSpec, model: str, metadata: dict, steps: Sequence[dict]) -> dict:
    return {"protocol": PROTOCOL, "model": model, "metadata": metadata, "input_shape": list(spec.input_shape), "input_index": spec.input_index.ravel().tolist(),
            "input_period": spec.input_period, "output_slots": spec.output_slots.tolist(), "relin_level": spec.relin_level,
            "rotation_levels": {str(k): v for k, v in spec.rotation_levels.items()}, "steps": list(steps)}


def spec_from_json(d: dict, params: CkksParameters) -> FheSpec:
    shape = tuple(d["input_shape"])
    return FheSpec(params, shape, np.asarray(d["input_index"], dtype=np.int64).reshape(shape), int(d["input_period"]),
                   np.asarray(d["output_slots"], dtype=np.int64), {int(k): int(v) for k, v in d["rotation_levels"].items()},
                   None if d["relin_level"] is None else int(d["relin_level"]))


class FheServer:
    """Serves one compiled network in the FHE mode; `start` listens, `stop` ends."""

    def __init__(self, model, max_sessions: int = 4, log: Optional[Callable[[dict], None]] = None, **compile_options):
        """`model`: a zoo name, a model file, or a model-front Graph; `compile_options` go to FheModel."""
        from lycaon.frontend import zoo  # noqa: PLC0415
        from lycaon.frontend.ir import Graph  # noqa: PLC0415
        from lycaon.hybrid import LABELS  # noqa: PLC0415
        from lycaon.plan import dataset_of  # noqa: PLC0415

        graph = model if isinstance(model, Graph) else zoo.load_model(model)
        model = graph.name if isinstance(model, Graph) else model
        self.model = FheModel(graph, **compile_options)
        dataset = dataset_of(self.model.graph)
        self.metadata = {"model": str(model), "preprocess": dataset, "labels": LABELS.get(dataset)}
        self.spec_json = spec_to_json(self.model.spec, str(model), self.metadata, self.model.summary())
        self._params_bytes = self.model.params.to_bytes()
        self._slots = threading.BoundedSemaphore(max_sessions)
        self._log = log or (lambda record: None)
        self._server: Optional[socketserver.ThreadingTCPServer] = None
        self._thread: Optional[threading.Thread] = None

    def _handle(self, sock: socket.socket, peer: str) -> None:
        if not self._slots.acquire(blocking=False):
            _send(sock, b"E", b"the server is serving its maximum of sessions; try again later")
            return
        session = None
        try:
            while True:
                try:
                    kind, parts = _recv(sock)
                except ConnectionError:
                    return
                t0 = time.perf_counter()
                if kind == b"H":
                    _send(sock, b"S", json.dumps(self.spec_json).encode(), self._params_bytes)
                elif kind == b"K":
                    if len(parts) != 3:
                        raise LycaonError(f"a key upload has 3 parts (relinearisation, Galois, public key), got {len(parts)}")
                    p = self.model.params
                    relin = CkksRelinKey.from_bytes(p, parts[0]) if parts[0] else None
                    galois = CkksGaloisKeys.from_bytes(p, parts[1]) if parts[1] else None
                    session = self.model.session(relin, galois, CkksPublicKey.from_bytes(p, parts[2]))
                    key_bytes = (relin.memory_bytes if relin else 0) + (galois.memory_bytes if galois else 0)
                    _send(sock, b"k", json.dumps({"key_bytes": key_bytes}).encode())
                    self._log({"peer": peer, "event": "keys", "bytes": sum(map(len, parts)), "seconds": time.perf_counter() - t0})
                elif kind == b"Q":
                    if session is None:
                        raise LycaonError("a query before the keys: upload the evaluation keys first")
                    if len(parts) != 1:
                        raise LycaonError("a query holds one ciphertext")
                    out = session.infer(CkksCiphertext.from_bytes(self.model.params, parts[0]))
                    server_s = time.perf_counter() - t0
                    down = out.to_bytes()
                    _send(sock, b"R", json.dumps({"server_s": server_s}).encode(), down)
                    self._log({"peer": peer, "event": "query", "up": len(parts[0]), "down": len(down), "seconds": server_s})
                else:
                    raise LycaonError(f"unknown message kind {kind!r}")
        except Exception as e:  # noqa: BLE001  a bad client must not take the server down
            self._log({"peer": peer, "error": str(e)})
            try:
                _send(sock, b"E", str(e).encode())
            except OSError:
                pass
        finally:
            self._slots.release()

    def start(self, port: int = DEFAULT_PORT, host: str = "127.0.0.1") -> str:
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                outer._handle(self.request, f"{self.client_address[0]}:{self.client_address[1]}")

        class Server(socketserver.ThreadingTCPServer):
            allow_reuse_address = True
            daemon_threads = True

        self._server = Server((host, port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        h, p = self._server.server_address[:2]
        return f"{h}:{p}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class FheRemoteClient:
    """Client of an FheServer: the secret key stays here. `infer(x)` returns the logits."""

    def __init__(self, address: str, strategy: str = "level-aware", timeout_s: float = 600.0,
                 on_keys: Optional[Callable[[str], None]] = None):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise LycaonError(f"server address '{address}': write HOST:PORT")
        self._sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.bytes_sent = _send(self._sock, b"H", json.dumps({"protocol": PROTOCOL}).encode())
        kind, parts = self._expect(b"S")
        d = json.loads(parts[0])
        if d.get("protocol") != PROTOCOL:
            raise LycaonError(f"the server speaks {d.get('protocol')!r}, this client {PROTOCOL}")
        self.params = CkksParameters.from_bytes(parts[1])
        self.spec = spec_from_json(d, self.params)
        self.program = {"name": d["model"], "input_shape": d["input_shape"], "metadata": d["metadata"], "steps": d["steps"]}
        self._client = FheClient(self.spec)
        t0 = time.perf_counter()
        if on_keys:
            on_keys("generating the level-aware keyset" if strategy == "level-aware" else f"generating the {strategy} keyset")
        relin, galois = self._client.evaluation_keys(strategy)
        self.keygen_s = time.perf_counter() - t0
        if on_keys:
            on_keys("uploading the keys (seeded)")
        up = [relin.to_bytes() if relin else b"", galois.to_bytes() if galois else b"", self._client.public_key.to_bytes()]
        self.key_upload_bytes = _send(self._sock, b"K", *up)
        self.bytes_sent += self.key_upload_bytes
        _, parts = self._expect(b"k")
        self.key_bytes = json.loads(parts[0])["key_bytes"]

    def _expect(self, kind: bytes) -> tuple[bytes, list[bytes]]:
        got, parts = _recv(self._sock)
        if got == b"E":
            raise LycaonError(f"server: {parts[0].decode(errors='replace') if parts else 'error'}")
        if got != kind:
            raise LycaonError(f"expected a {kind!r} message from the server, got {got!r}")
        return got, parts

    @property
    def metadata(self) -> dict:
        return self.program["metadata"]

    @property
    def labels(self) -> Optional[list]:
        return self.metadata.get("labels")

    def preprocess(self, x) -> np.ndarray:
        from lycaon.hybrid import Client  # noqa: PLC0415

        return Client.preprocess(self, x)

    def infer(self, x: np.ndarray) -> dict:
        """Encrypts one model-ready input, sends it, decrypts the answer: logits, label, timings, bytes."""
        t0 = time.perf_counter()
        up = self._client.encrypt(np.asarray(x, dtype=np.float64).reshape(self.spec.input_shape)).to_bytes()
        t1 = time.perf_counter()
        sent = _send(self._sock, b"Q", up)
        _, parts = self._expect(b"R")
        t2 = time.perf_counter()
        logits = self._client.decrypt(CkksCiphertext.from_bytes(self.params, parts[1]))
        t3 = time.perf_counter()
        server_s = json.loads(parts[0])["server_s"]
        return {"logits": logits, "label": int(np.argmax(logits)), "total_s": t3 - t0, "client_s": (t1 - t0) + (t3 - t2), "server_s": server_s,
                "comm_s": max(0.0, (t2 - t1) - server_s), "up_bytes": sent, "down_bytes": sum(map(len, parts)) + 9}

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass
