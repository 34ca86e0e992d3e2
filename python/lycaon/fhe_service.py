"""FHE mode over TCP: `lycaon serve MODEL --mode fhe` and `lycaon infer --mode fhe`.

One session: the client says hello and receives the public program (CKKS parameters, input
packing, where the logits come out, the rotation steps with their levels; for ResNet-20 also the
bootstrapping shape); it generates the level-aware keyset (and the bootstrapping keys) and
uploads it once, seeded; then each query is one ciphertext up and one ciphertext (re-randomised
with the client's public key) down. The server holds the weights and the session's public keys
only.

Frames: 8-byte big-endian length, one kind byte, payload. A payload of several binary parts is a
4-byte count, then each part as 8-byte length and bytes; parts are written and read one at a
time (a ResNet-20 key upload is about 5 GB: no copy of the whole frame is made). Kinds: H hello
(JSON), S spec (JSON, parameter bytes), K keys (relinearisation, Galois, public; ResNet-20 adds
the bootstrapping keys), k keys accepted (JSON), Q query (ciphertext), P progress (JSON: steps
done, of how many, which; sent during a query when the hello asked for it), R result (JSON,
ciphertext), E error (UTF-8 message). A malformed frame or object gets an E and closes that
connection; the server goes on serving the others.
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

from ._native import CkksBootstrapKeys, CkksCiphertext, CkksGaloisKeys, CkksParameters, CkksPublicKey, CkksRelinKey, LycaonError
from .fhe import FheClient, FheModel, FheSpec
from .fhe_resnet import RESNET20_MODELS, FheResNetClient, FheResNetSession, ResNetSpec, load_resnet20

PROTOCOL = "lycaon-fhe/1"
DEFAULT_PORT = 7452
#: Largest frame accepted (a ResNet-20 key upload with bootstrapping keys is about 5 GB).
MAX_FRAME = 8 << 30


def _send(sock: socket.socket, kind: bytes, *parts: bytes) -> int:
    """Sends one frame; returns its bytes. Small parts go out together in one write (no
    small-packet delays), parts of a megabyte or more on their own (never copied)."""
    body = 4 + sum(8 + len(p) for p in parts)
    pending = struct.pack(">Q", body + 1) + kind + struct.pack(">I", len(parts))
    for p in parts:
        pending += struct.pack(">Q", len(p))
        if len(p) < 1 << 20:
            pending += p
        else:
            sock.sendall(pending)
            sock.sendall(p)
            pending = b""
    if pending:
        sock.sendall(pending)
    return body + 9


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
    kind = _recv_exact(sock, 1)
    left = length - 1
    if left < 4:
        raise LycaonError("a frame without its part count")
    (count,) = struct.unpack(">I", _recv_exact(sock, 4))
    left -= 4
    parts = []
    for _ in range(count):
        if left < 8:
            raise LycaonError("a frame cut short")
        (n,) = struct.unpack(">Q", _recv_exact(sock, 8))
        left -= 8
        if n > left:
            raise LycaonError("a frame part runs past the frame")
        parts.append(_recv_exact(sock, n))
        left -= n
    if left:
        raise LycaonError(f"a frame with {left} bytes after its last part")
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
    """Serves one compiled network in the FHE mode; `start` listens, `stop` ends. The ResNet-20
    models (`fhe_resnet.RESNET20_MODELS`) run with bootstrapping: each session then holds about
    10 GB of the client's keys, beside one bootstrapper all sessions share."""

    def __init__(self, model, max_sessions: Optional[int] = None, log: Optional[Callable[[dict], None]] = None, **compile_options):
        """`model`: a zoo name, a model file, a model-front Graph, or a ResNet-20 name;
        `compile_options` go to FheModel. `max_sessions`: default 4, or 1 with bootstrapping."""
        from lycaon.frontend import zoo  # noqa: PLC0415
        from lycaon.frontend.ir import Graph  # noqa: PLC0415
        from lycaon.hybrid import LABELS  # noqa: PLC0415

        self.resnet = None
        if isinstance(model, str) and model in RESNET20_MODELS:
            self.resnet = load_resnet20(model)
            self.model = None
            spec = self.resnet.spec
            self.params = spec.params
            metadata = {"model": model, "preprocess": "cifar10", "labels": LABELS.get("cifar10")}
            steps = [{"step": op.node, "kind": op.kind} for op in self.resnet.ops]
            self.spec_json = {"protocol": PROTOCOL, "model": model, "metadata": metadata, "steps": steps, **spec.to_json()}
        else:
            from lycaon.plan import dataset_of  # noqa: PLC0415

            graph = model if isinstance(model, Graph) else zoo.load_model(model)
            model = graph.name if isinstance(model, Graph) else model
            self.model = FheModel(graph, **compile_options)
            self.params = self.model.params
            dataset = dataset_of(self.model.graph)
            metadata = {"model": str(model), "preprocess": dataset, "labels": LABELS.get(dataset)}
            self.spec_json = spec_to_json(self.model.spec, str(model), metadata, self.model.summary())
        self.metadata = metadata
        self._params_bytes = self.params.to_bytes()
        self.max_sessions = max_sessions if max_sessions is not None else (1 if self.resnet is not None else 4)
        if self.max_sessions < 1:
            raise LycaonError(f"max_sessions must be at least 1, not {self.max_sessions}")
        self._slots = threading.BoundedSemaphore(self.max_sessions)
        self._log = log or (lambda record: None)
        self._server: Optional[socketserver.ThreadingTCPServer] = None
        self._thread: Optional[threading.Thread] = None

    def _session(self, parts: list[bytes]):
        """A session from an upload: (session, bytes of the keys in memory)."""
        p, boots = self.params, self.resnet is not None
        want = 4 if boots else 3
        if len(parts) != want:
            names = "relinearisation, Galois, public key" + (", bootstrapping keys" if boots else "")
            raise LycaonError(f"a key upload for this model has {want} parts ({names}), got {len(parts)}")
        relin = CkksRelinKey.from_bytes(p, parts[0]) if parts[0] else None
        galois = CkksGaloisKeys.from_bytes(p, parts[1]) if parts[1] else None
        public = CkksPublicKey.from_bytes(p, parts[2])
        key_bytes = (relin.memory_bytes if relin else 0) + (galois.memory_bytes if galois else 0)
        if not boots:
            return self.model.session(relin, galois, public), key_bytes
        parts[:3] = [b"", b"", b""]  # parsed: free their bytes before the largest key is read
        boot_keys = CkksBootstrapKeys.from_bytes(p, parts[3])
        parts[3] = b""
        if relin is None or galois is None:
            raise LycaonError("ResNet-20 needs the relinearisation and Galois keys")
        return FheResNetSession(self.resnet, relin, galois, boot_keys, public), key_bytes + boot_keys.memory_bytes

    def _handle(self, sock: socket.socket, peer: str) -> None:
        if not self._slots.acquire(blocking=False):
            _send(sock, b"E", b"the server is serving its maximum of sessions; try again later")
            return
        session, progress, released = None, False, False
        try:
            while True:
                try:
                    kind, parts = _recv(sock)
                except ConnectionError:
                    return
                t0 = time.perf_counter()
                if kind == b"H":
                    try:
                        hello = json.loads(parts[0]) if parts else {}
                    except ValueError:
                        raise LycaonError("the hello is not JSON") from None
                    progress = bool(hello.get("progress")) if isinstance(hello, dict) else False
                    _send(sock, b"S", json.dumps(self.spec_json).encode(), self._params_bytes)
                elif kind == b"K":
                    up = sum(map(len, parts))
                    session, key_bytes = self._session(parts)
                    del parts
                    _send(sock, b"k", json.dumps({"key_bytes": key_bytes}).encode())
                    self._log({"peer": peer, "event": "keys", "bytes": up, "seconds": time.perf_counter() - t0})
                elif kind == b"Q":
                    if session is None:
                        raise LycaonError("a query before the keys: upload the evaluation keys first")
                    if len(parts) != 1:
                        raise LycaonError("a query holds one ciphertext")
                    ct = CkksCiphertext.from_bytes(self.params, parts[0])

                    def report(done, total, step):
                        _send(sock, b"P", json.dumps({"done": done, "total": total, "step": step}).encode())

                    out, stats = session.answer(ct, report if progress else None)
                    server_s = time.perf_counter() - t0
                    down = out.to_bytes()
                    _send(sock, b"R", json.dumps({"server_s": server_s, **stats}).encode(), down)
                    self._log({"peer": peer, "event": "query", "up": len(parts[0]), "down": len(down), "seconds": server_s})
                else:
                    raise LycaonError(f"unknown message kind {kind!r}")
        except Exception as e:  # noqa: BLE001  a bad client must not take the server down
            self._log({"peer": peer, "error": str(e)})
            session = None  # its keys go before the error does, and so does its slot:
            self._slots.release()  # a client told of its error may reconnect at once
            released = True
            try:
                _send(sock, b"E", str(e).encode())
            except OSError:
                pass
        finally:
            if not released:
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
    """Client of an FheServer: the secret key stays here. `infer(x)` returns the logits.
    `on_keys(what)` hears the key-generation stages, `on_progress(done, total, step)` the
    server's progress through a query."""

    def __init__(self, address: str, strategy: str = "level-aware", timeout_s: float = 3600.0,
                 on_keys: Optional[Callable[[str], None]] = None, on_progress: Optional[Callable[[int, int, str], None]] = None):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise LycaonError(f"server address '{address}': write HOST:PORT")
        self._on_progress = on_progress
        self._sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.bytes_sent = _send(self._sock, b"H", json.dumps({"protocol": PROTOCOL, "progress": on_progress is not None}).encode())
        kind, parts = self._expect(b"S")
        d = json.loads(parts[0])
        if d.get("protocol") != PROTOCOL:
            raise LycaonError(f"the server speaks {d.get('protocol')!r}, this client {PROTOCOL}")
        self.params = CkksParameters.from_bytes(parts[1])
        self.program = {"name": d["model"], "input_shape": d["input_shape"], "metadata": d["metadata"], "steps": d["steps"],
                        "bootstrapping": d.get("kind") == "resnet-bootstrapped"}
        t0 = time.perf_counter()
        if d.get("kind") == "resnet-bootstrapped":
            if strategy != "level-aware":
                raise LycaonError(f"ResNet-20 takes the level-aware keyset only, not '{strategy}' (the others do not fit beside the bootstrapping keys)")
            self.spec = ResNetSpec.from_json(d, self.params)
            self._client = FheResNetClient(self.spec)
            up = self._resnet_keys(on_keys)
        else:
            self.spec = spec_from_json(d, self.params)
            self._client = FheClient(self.spec)
            if on_keys:
                on_keys("generating the level-aware keyset" if strategy == "level-aware" else f"generating the {strategy} keyset")
            relin, galois = self._client.evaluation_keys(strategy)
            up = [relin.to_bytes() if relin else b"", galois.to_bytes() if galois else b"", self._client.public_key.to_bytes()]
        self.keygen_s = time.perf_counter() - t0
        if on_keys:
            on_keys(f"uploading the keys (seeded, {sum(map(len, up)) / 1e9:.2f} GB)")
        t0 = time.perf_counter()
        self.key_upload_bytes = _send(self._sock, b"K", *up)
        del up
        self.bytes_sent += self.key_upload_bytes
        _, parts = self._expect(b"k")
        self.upload_s = time.perf_counter() - t0
        self.key_bytes = json.loads(parts[0])["key_bytes"]

    def _resnet_keys(self, on_keys: Optional[Callable[[str], None]]) -> list[bytes]:
        """The ResNet-20 upload: the network's keys serialised and their objects freed, then the
        bootstrapping keys serialised as they are made (the client never holds them as keys)."""
        client = self._client
        if on_keys:
            on_keys(f"generating {len(self.spec.rotation_levels)} rotation keys by level and the relinearisation key")
        relin, galois = client.network_keys()
        up = [relin.to_bytes(), galois.to_bytes(), client.public_key.to_bytes()]
        del relin, galois
        if on_keys:
            on_keys("generating the bootstrapping keys")
        up.append(client.bootstrap_key_bytes())
        return up

    def _expect(self, kind: bytes) -> tuple[bytes, list[bytes]]:
        while True:
            got, parts = _recv(self._sock)
            if got != b"P":
                break
            if self._on_progress is not None and parts:
                p = json.loads(parts[0])
                self._on_progress(int(p["done"]), int(p["total"]), str(p["step"]))
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
        """Encrypts one model-ready input, sends it, decrypts the answer: logits, label, timings,
        bytes (and, with bootstrapping, the server's bootstraps and seconds per kind)."""
        t0 = time.perf_counter()
        up = self._client.encrypt(np.asarray(x, dtype=np.float64).reshape(self.spec.input_shape)).to_bytes()
        t1 = time.perf_counter()
        sent = _send(self._sock, b"Q", up)
        _, parts = self._expect(b"R")
        t2 = time.perf_counter()
        logits = self._client.decrypt(CkksCiphertext.from_bytes(self.params, parts[1]))
        t3 = time.perf_counter()
        info = json.loads(parts[0])
        server_s = info.pop("server_s")
        return {"logits": logits, "label": int(np.argmax(logits)), "total_s": t3 - t0, "client_s": (t1 - t0) + (t3 - t2), "server_s": server_s,
                "comm_s": max(0.0, (t2 - t1) - server_s), "up_bytes": sent, "down_bytes": sum(map(len, parts)) + 9, "server": info}

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass
