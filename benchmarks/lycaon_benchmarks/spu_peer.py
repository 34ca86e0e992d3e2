"""SecretFlow SPU's CHEETAH 2PC protocol as a peer of the benchmark: two parties on loopback TCP.

Optional extra, imported lazily: ``pip install spu==0.9.5`` (cp311 x86_64 wheel). It pulls in
jax==0.4.34 + jaxlib==0.4.34 (SPU's frontend lowers jax functions to XLA HLO) and pins numpy<2
(1.26.4), ml-dtypes 0.5.4, scipy, multiprocess, cachetools, termcolor.

The parent compiles the jax function with ``spu.utils.frontend.compile`` and spawns two processes,
alice (rank 0) and bob (rank 1), linked by brpc on 127.0.0.1. Each is handed only the operands it
owns, encodes them itself and sends the peer its share over the link before anything is timed, so
no plaintext leaves its owner. Both run the executable once as a warm-up (it carries the one-time
Ferret OT / HE key setup: ``first_run_s``, ``first_run_bytes``), then ``reps`` times behind a
barrier each. ``peer_s`` is the median over reps of the slower party's wall time of ``Runtime.run``
(no link creation, compilation or input sharing). SPU lowers a convolution to im2col plus one
matrix product (HAL ``f_tensordot``), then a fixed-point truncation.

Convolutions run on 8-bit integer operands by default, so SPU computes the exact ring product with no
fixed-point truncation: the job Lycaon's linear layers do (truncation belongs to the 2PC layer).

Bytes: SPU 0.9.5's Python link binding does not expose yacl's link statistics, but with
``enable_pphlo_profile`` the runtime logs after every run "Link details: total send bytes N, recv
bytes M, send actions A, recv actions B" (the link counters over that run). Each party logs to its
own file; ``peer_bytes`` is the sum of both parties' sent bytes, averaged over the reps: protocol
payload, without brpc/TCP framing. Rounds are not logged: the send actions (messages, which a
large message may split into chunks and which a party may send several of without waiting) are
recorded as ``peer_send_actions`` (both parties), an upper bound on the one-way trips.

Whole networks (:func:`spu_network`): a jax twin of a simplified model graph (conv, relu, average
and max pools, fully connected, residual additions), its float weights shared by alice, the images
by bob, one image per run (run 0 is the cold one that carries the setup).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import re
import socket
import statistics
import tempfile
import time
from queue import Empty
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

_FIELD, _FRAC_BITS = "FM64", 18  # SPU's defaults for a 64-bit ring
_MISSING = "spu is not installed: pip install -e 'benchmarks[peers]' from a Lycaon checkout"
_NOTE = ("peer_s: median, peer_bytes: mean over warm runs of Runtime.run; one-time OT/HE setup excluded "
         "(see first_run_*); bytes: SPU link payload sent by both parties (no brpc/TCP framing)")


def _spu() -> Any:
    """The ``spu`` package, or a RuntimeError that says how to get it."""
    try:
        import spu  # noqa: PLC0415
    except ImportError as exc:
        raise RuntimeError(_MISSING) from exc
    return spu


def _config(spu: Any) -> Any:
    lib = spu.libspu
    cfg = lib.RuntimeConfig(protocol=lib.ProtocolKind.CHEETAH, field=getattr(lib.FieldType, _FIELD),
                            fxp_fraction_bits=_FRAC_BITS)
    cfg.enable_pphlo_profile = True  # the only way 0.9.5 reports link bytes (see module doc)
    return cfg


#: RuntimeConfig fields recorded beside the ones ``_config`` sets (SPU's defaults otherwise).
_RECORDED = ("trunc_allow_msb_error", "max_concurrency", "experimental_disable_mmul_split",
             "experimental_enable_intra_op_par", "experimental_enable_inter_op_par", "share_max_chunk_size", "public_random_seed")


def spu_info() -> Dict[str, Any]:
    """What SPU runs as the peer: version, protocol, the ring it computes in and every
    RuntimeConfig field that is set (``runtime_config``) or that shapes its cost."""
    spu = _spu()
    import jax  # noqa: PLC0415

    cfg = _config(spu)
    defaults = {name: str(getattr(cfg, name)).strip() for name in _RECORDED if hasattr(cfg, name)}
    cheetah = cfg.cheetah_2pc_config
    for name in ("disable_matmul_pack", "enable_mul_lsb_error"):
        defaults[f"cheetah_2pc_config.{name}"] = str(getattr(cheetah, name, "?"))
    defaults["cheetah_2pc_config.ot_kind"] = "default (0.9.5's binding cannot read it; SPU's default is YACL_Ferret)"
    return {"spu_version": spu.__version__, "jax_version": jax.__version__, "protocol": "CHEETAH",
            "field": _FIELD, "fxp_fraction_bits": _FRAC_BITS, "ot_kind": "YACL_Ferret (SPU default)",
            "parties": 2, "link": "brpc, 127.0.0.1, one process per party", "cpu_count": os.cpu_count(),
            "runtime_config": str(cfg).replace("\n", "; "), "runtime_config_defaults": defaults}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _shares(spu: Any, cfg: Any, arr: np.ndarray, vis: str, owner: int) -> List[Any]:
    """Both parties' shares of ``arr``, made by its owner. ``secret``: additive shares.
    ``private``: SPU's Priv2k value (plaintext at the owner, an all-zero placeholder of the same
    shape at the peer). Cheetah's Io refuses VIS_PRIVATE ("unsupported vis type V") although its
    kernels take Priv2k operands (mmul_av: the HE product with one plaintext side), so the share is
    built by hand from the public encoding of the array."""
    lib = spu.libspu
    io = spu.Io(2, cfg)
    if vis == "secret":
        return io.make_shares(arr, lib.Visibility.VIS_SECRET, owner)

    def blank(raw: bytes) -> bytes:  # the same chunk with its content zeroed
        chunk = lib.ValueChunk()
        chunk.ParseFromString(raw)
        chunk.content = bytes(len(chunk.content))
        return chunk.SerializeToString()

    out = []
    for rank, pub in enumerate(io.make_shares(arr, lib.Visibility.VIS_PUBLIC)):
        meta, share = lib.ValueMeta(), lib.Share()
        meta.ParseFromString(pub.meta)
        meta.visibility, meta.storage_type = lib.Visibility.VIS_PRIVATE, f"Priv2k<{_FIELD},{owner}>"
        share.meta = meta.SerializeToString()
        share.share_chunks = list(pub.share_chunks) if rank == owner else [blank(c) for c in pub.share_chunks]
        out.append(share)
    return out


def _party(rank: int, queue: Any, *args: Any) -> None:
    """Process entry: :func:`_party_run`, its result or its error sent to the parent."""
    try:
        queue.put((rank, _party_run(rank, *args)))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which stops the peer
        queue.put((rank, RuntimeError(f"party {rank}: {exc!r}")))


def _party_run(rank: int, ports: List[int], exe_bytes: bytes, owned: Dict[str, Tuple[np.ndarray, str]],
               names: List[str], reps: int, log_path: str, per_run: Sequence[str] = ()) -> Tuple[List[float], List[bytes]]:
    """One party: link, take in the inputs, warm-up run, ``reps`` timed runs; (times, output
    shares: the last run's, or every run's when some input changes per run)."""
    spu = _spu()
    lib = spu.libspu
    opts, cfg = lib.logging.LogOptions(), _config(spu)
    opts.enable_console_logger, opts.system_log_path = False, log_path  # the link byte counts land here
    lib.logging.setup_logging(opts)
    exe, desc = lib.Executable(), lib.link.Desc()
    exe.ParseFromString(exe_bytes)
    for r, port in enumerate(ports):
        desc.add_party(f"party{r}", f"127.0.0.1:{port}")
    link = lib.link.create_brpc(desc, rank)
    rt = spu.Runtime(link, cfg)

    def take_in(name: str, run: Optional[int]) -> None:
        if name in owned:
            arr, vis = owned[name]
            shares = _shares(spu, cfg, arr if run is None else arr[run], vis, rank)
            rt.set_var(name, shares[rank])
            link.send(1 - rank, pickle.dumps(shares[1 - rank]))
        else:
            rt.set_var(name, pickle.loads(link.recv(1 - rank)))

    for name in names:  # fixed order, so both sides agree on who sends what when
        if name not in per_run:
            take_in(name, None)
    times, outs = [], []
    for run in range(reps + 1):
        for name in per_run:  # before the barrier: sharing is not timed
            take_in(name, run)
        link.barrier()
        t0 = time.perf_counter()
        rt.run(exe)
        times.append(time.perf_counter() - t0)
        if per_run:
            outs.append(pickle.dumps(rt.get_var(exe.output_names[0])))
    if not per_run:
        outs.append(pickle.dumps(rt.get_var(exe.output_names[0])))
    link.barrier()
    link.stop_link()
    return times, outs


_LINK_RE = re.compile(r"Link details: total send bytes (\d+)(?:, recv bytes \d+, send actions (\d+))?")


def _run_2pc(fn: Callable, inputs: List[Tuple[str, np.ndarray, int, str]], reps: int, per_run: Sequence[str] = ()) -> Dict[str, Any]:
    """Compile ``fn`` and run it between alice and bob. ``inputs``: (name, array, owner, vis).
    The inputs named in ``per_run`` hold one value per run along their first axis (``reps + 1``
    of them, run 0 the cold one); they are shared afresh before each run (untimed) and every
    run's output comes back in "_outputs". Otherwise every run takes the same inputs and
    "_output" is the last run's."""
    for name, arr, _, _ in inputs:
        if name in per_run and len(arr) != reps + 1:
            raise ValueError(f"input {name!r} changes per run: it needs {reps + 1} values along its first axis, not {len(arr)}")
    spu = _spu()
    import spu.utils.frontend as fe  # noqa: PLC0415

    lib, cfg = spu.libspu, _config(spu)
    names = [name for name, *_ in inputs]
    # Every input compiles as secret; at run time a Priv2k value still dispatches to the private
    # kernels (pphlo convolution -> mpc mmul_sv -> Cheetah's mmul_av, with no v2s in the trace).
    exe, _ = fe.compile(fe.Kind.JAX, fn, [a[0] if n in per_run else a for n, a, _, _ in inputs], {}, names,
                        [lib.Visibility.VIS_SECRET] * len(inputs), lambda outs: [f"out{i}" for i in range(len(outs))])
    ports = [_free_port(), _free_port()]
    ctx = mp.get_context("spawn")  # fresh interpreters: no forked jax/brpc state
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        logs = [os.path.join(tmp, f"party{r}.log") for r in range(2)]
        procs = [ctx.Process(target=_party, daemon=True, args=(
            r, queue, ports, exe.SerializeToString(), {n: (a, v) for n, a, o, v in inputs if o == r},
            names, reps, logs[r], tuple(per_run))) for r in range(2)]
        for p in procs:
            p.start()
        results: Dict[int, Any] = {}
        try:  # a party that fails leaves its peer blocked on the link: stop both then
            while len(results) < 2:
                try:
                    rank, res = queue.get(timeout=1)
                except Empty:
                    if any(p.exitcode not in (None, 0) for p in procs):
                        raise RuntimeError(f"a party died: exit codes {[p.exitcode for p in procs]}") from None
                    continue
                if isinstance(res, BaseException):
                    raise res
                results[rank] = res
        finally:
            for p in procs:
                p.join(timeout=10)
                if p.is_alive():
                    p.terminate()
        sent, actions = [], []
        for path in logs:
            with open(path) as f:
                found = _LINK_RE.findall(f.read())
            sent.append([int(b) for b, _ in found])
            actions.append([int(a) if a else None for _, a in found])
    if any(len(s) != reps + 1 for s in sent):
        raise RuntimeError(f"expected {reps + 1} link reports per party, got {[len(s) for s in sent]}")
    wall = [max(a, b) for a, b in zip(results[0][0], results[1][0])]  # a 2PC step ends when both do
    total = [a + b for a, b in zip(*sent)]
    io = spu.Io(2, cfg)
    outputs = [io.reconstruct([pickle.loads(results[r][1][k]) for r in range(2)]) for k in range(len(results[0][1]))]
    # Bytes: mean over the warm runs, as Ferret OT refills its pool in batches (some runs carry an
    # OT-extension round, others none); the mean is the amortized cost.
    mean = lambda v: round(statistics.mean(v))  # noqa: E731
    res = {"peer": "spu-cheetah", "peer_s": statistics.median(wall[1:]), "peer_bytes": mean(total[1:]),
           "peer_bytes_by_party": {"alice": mean(sent[0][1:]), "bob": mean(sent[1][1:])}, "peer_s_runs": wall[1:],
           "peer_bytes_runs": total[1:], "first_run_s": wall[0], "first_run_bytes": total[0], "reps": reps,
           "field": _FIELD, "fxp_fraction_bits": _FRAC_BITS}
    if all(a is not None for party in actions for a in party):
        moves = [a + b for a, b in zip(*actions)]
        res.update(peer_send_actions=mean(moves[1:]), first_run_send_actions=moves[0], peer_send_actions_runs=moves[1:])
    if per_run:
        res["_outputs"] = outputs
    else:
        res["_output"] = outputs[-1]
    return res


def _conv_ref(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    """NCHW/OIHW cross-correlation (what jax.lax.conv computes), in float64 numpy."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    k = w.shape[-1]
    win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("ncijkl,ockl->noij", win, w.astype(np.float64))


def spu_conv2d(h: int, w: int, cin: int, cout: int, k: int, stride: int = 1, pad: Optional[int] = None,
               reps: int = 1, weights: str = "private", operands: str = "int", seed: int = 0) -> Dict[str, Any]:
    """Conv2d of alice's image (1,cin,h,w) by bob's kernel (cout,cin,k,k) under SPU CHEETAH.

    The image is secret-shared by alice. ``weights="private"`` (default) keeps the kernel in
    plaintext at bob (Cheetah's setting, SPU kernel mmul_av); ``"secret"`` secret-shares it too
    (mmul_aa). ``operands="int"`` (default): 8-bit integers, an exact convolution in SPU's ring with
    no truncation, the same job as Lycaon's linear layers (which leave truncation to the 2PC
    layer); ``"fixed"``: uniform in [-1, 1), fixed-point encoded, so SPU also truncates the product."""
    _spu()
    import jax  # noqa: PLC0415

    if operands not in ("int", "fixed"):
        raise ValueError(f"operands must be 'int' or 'fixed', not {operands!r}")
    pad = k // 2 if pad is None else pad
    rng = np.random.default_rng(seed)
    if operands == "int":
        x = rng.integers(-128, 128, (1, cin, h, w)).astype(np.int32)
        wt = rng.integers(-128, 128, (cout, cin, k, k)).astype(np.int32)
    else:
        x = rng.uniform(-1, 1, (1, cin, h, w)).astype(np.float32)
        wt = rng.uniform(-1, 1, (cout, cin, k, k)).astype(np.float32)

    def conv(a: Any, b: Any) -> Any:
        return jax.lax.conv_general_dilated(a, b, (stride, stride), [(pad, pad), (pad, pad)],
                                            dimension_numbers=("NCHW", "OIHW", "NCHW"))

    res = _run_2pc(conv, [("x", x, 0, "secret"), ("w", wt, 1, weights)], reps)
    res["max_abs_error"] = float(np.max(np.abs(res.pop("_output") - _conv_ref(x, wt, stride, pad))))
    res["operand_visibility"] = {"input": "secret (shared by alice)",
                                 "weights": "private to bob (Priv2k)" if weights == "private" else "secret (shared by bob)"}
    res["shape"] = {"h": h, "w": w, "cin": cin, "cout": cout, "k": k, "stride": stride, "pad": pad}
    res["operands"] = operands
    res["note"] = _NOTE + ("; exact integer convolution, no truncation" if operands == "int" else "; includes SPU's fixed-point truncation of the product")
    return res


def spu_relu(elements: int, reps: int = 1, seed: int = 0) -> Dict[str, Any]:
    """ReLU of ``elements`` secret-shared fixed-point values (shared by alice) under SPU CHEETAH."""
    _spu()
    import jax.numpy as jnp  # noqa: PLC0415

    x = np.random.default_rng(seed).uniform(-8, 8, elements).astype(np.float32)
    res = _run_2pc(lambda a: jnp.maximum(a, 0), [("x", x, 0, "secret")], reps)
    res["max_abs_error"] = float(np.max(np.abs(res.pop("_output") - np.maximum(x, 0))))
    res["operand_visibility"] = {"input": "secret (shared by alice)"}
    res["elements"] = elements
    res["note"] = _NOTE
    return res


def spu_truncate(elements: int, reps: int = 1, seed: int = 0) -> Dict[str, Any]:
    """Fixed-point product of ``elements`` secret-shared values (shared by alice) by the public
    constant 0.25: a local product in the ring and one truncation by SPU's 18 fraction bits, the
    nearest SPU analogue of a truncation protocol on its own."""
    _spu()
    x = np.random.default_rng(seed).uniform(-8, 8, elements).astype(np.float32)
    res = _run_2pc(lambda a: a * 0.25, [("x", x, 0, "secret")], reps)
    res["max_abs_error"] = float(np.max(np.abs(res.pop("_output") - x * 0.25)))
    res["operand_visibility"] = {"input": "secret (shared by alice)"}
    res["elements"] = elements
    res["note"] = _NOTE + "; x * 0.25 in fixed point: one truncation"
    return res


def spu_truncate_relu(elements: int, reps: int = 1, seed: int = 0) -> Dict[str, Any]:
    """``max(x * 0.25, 0)`` on ``elements`` secret-shared fixed-point values (shared by alice): one
    truncation then one ReLU, the peer of Lycaon's truncate+relu."""
    _spu()
    import jax.numpy as jnp  # noqa: PLC0415

    x = np.random.default_rng(seed).uniform(-8, 8, elements).astype(np.float32)
    res = _run_2pc(lambda a: jnp.maximum(a * 0.25, 0), [("x", x, 0, "secret")], reps)
    res["max_abs_error"] = float(np.max(np.abs(res.pop("_output") - np.maximum(x * 0.25, 0))))
    res["operand_visibility"] = {"input": "secret (shared by alice)"}
    res["elements"] = elements
    res["note"] = _NOTE + "; max(x * 0.25, 0) in fixed point: one truncation, one ReLU"
    return res


def _jax_forward(graph: Any, param_names: List[Tuple[str, str]]) -> Callable:
    """A jax function (image batch NCHW, *params) -> output that runs a simplified model graph
    (``lycaon.frontend.simplify``: batch-norm folded) as ``frontend.run_float`` does; the params
    come in the order of ``param_names`` ((node, "weight" | "bias")). Raises ``ValueError`` for
    an op it has no jax form for."""
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415

    supported = {"conv", "relu", "avgpool", "maxpool", "global_avgpool", "flatten", "linear", "add", "concat"}
    odd = sorted({n.op for n in graph.nodes} - supported)
    if odd:
        raise ValueError(f"{graph.name}: no jax form for op(s) {', '.join(odd)} (simplify the graph first)")

    def pool(v: Any, op: str, kernel: Sequence[int], stride: Sequence[int], pads: Sequence[int]) -> Any:
        (kh, kw), (sh, sw), (top, left, bottom, right) = kernel, stride, pads
        n, c, h, w = v.shape
        if op == "avgpool" and (kh, kw) == (sh, sw) and not any(pads) and h % kh == 0 and w % kw == 0:
            return v.reshape(n, c, h // kh, kh, w // kw, kw).mean(axis=(3, 5))  # local sums, no window gather
        fill, reducer = (-jnp.inf, jax.lax.max) if op == "maxpool" else (0.0, jax.lax.add)
        out = jax.lax.reduce_window(v, fill, reducer, (1, 1, kh, kw), (1, 1, sh, sw), ((0, 0), (0, 0), (top, bottom), (left, right)))
        return out if op == "maxpool" else out / (kh * kw)  # the executor's mean counts padding

    def forward(x: Any, *params: Any) -> Any:
        p = dict(zip(param_names, params))
        values = {graph.input_name: x}
        for node in graph.nodes:
            ins = [values[i] for i in node.inputs]
            v, a = ins[0], node.attrs
            if node.op == "conv":
                top, left, bottom, right = a.get("pads", (0, 0, 0, 0))
                y = jax.lax.conv_general_dilated(v, p[(node.name, "weight")], tuple(a.get("stride", (1, 1))), [(top, bottom), (left, right)],
                                                 dimension_numbers=("NCHW", "OIHW", "NCHW"), feature_group_count=int(a.get("groups", 1)))
                if (node.name, "bias") in p:
                    y = y + p[(node.name, "bias")].reshape(1, -1, 1, 1)
            elif node.op == "linear":
                y = v @ p[(node.name, "weight")].T
                if (node.name, "bias") in p:
                    y = y + p[(node.name, "bias")]
            elif node.op == "relu":
                y = jnp.maximum(v, 0)
            elif node.op in ("avgpool", "maxpool"):
                y = pool(v, node.op, a["kernel"], a.get("stride", a["kernel"]), a.get("pads", (0, 0, 0, 0)))
            elif node.op == "global_avgpool":
                y = v.mean(axis=(2, 3), keepdims=True)
            elif node.op == "flatten":
                y = v.reshape(v.shape[0], -1)
            elif node.op == "add":
                y = ins[0] + ins[1]
            else:  # concat
                y = jnp.concatenate(ins, axis=1)
            values[node.output] = y
        return values[graph.output]

    return forward


def spu_network(graph: Any, images: np.ndarray, weights: str = "secret", runs: Optional[int] = None) -> Dict[str, Any]:
    """Inference of a simplified model graph under SPU CHEETAH, one image per run: the float
    weights (node params "weight"/"bias") shared by alice (rank 0), each preprocessed image
    (``images``: (N, C, H, W) float) by bob (rank 1). ``runs`` (default max(N, 2)) cycles through
    the images; run 0 is the cold one (``first_run_*``: Ferret OT and HE key setup), the rest
    give ``peer_s`` (median) and ``peer_bytes`` (mean). ``weights="secret"`` (default)
    secret-shares the weights, so every convolution has both operands secret-shared (SPU kernel
    mmul_aa); ``"private"`` keeps them plaintext at alice (Priv2k, Cheetah's own setting, see
    ``_shares``). Returns the run record with "logits" (one row per image, from its first run),
    "float_logits" (``frontend.run_float``), "labels", "float_labels", "top1_equal" and
    "max_abs_logit_error"."""
    _spu()
    from lycaon.frontend import run_float  # noqa: PLC0415

    if weights not in ("secret", "private"):
        raise ValueError(f"weights must be 'secret' or 'private', not {weights!r}")
    x = np.asarray(images, dtype=np.float32)
    if x.ndim != 4 or x.shape[1:] != tuple(graph.input_shape):
        raise ValueError(f"images must be (N, {', '.join(map(str, graph.input_shape))}), not {x.shape}")
    n = len(x)
    runs = max(n, 2) if runs is None else runs
    if runs < 2:
        raise ValueError("runs must be at least 2 (a cold run and a warm one)")
    param_names = [(node.name, key) for node in graph.nodes for key in ("weight", "bias") if node.params.get(key) is not None]
    forward = _jax_forward(graph, param_names)
    per_image = x[np.arange(runs) % n][:, None]  # (runs, 1, C, H, W): one image per run
    inputs = [("image", per_image, 1, "secret")]
    params = {(node.name, key): node.params[key] for node in graph.nodes for key in ("weight", "bias") if node.params.get(key) is not None}
    inputs += [(f"p{i}", np.asarray(params[name], dtype=np.float32), 0, weights) for i, name in enumerate(param_names)]
    res = _run_2pc(forward, inputs, runs - 1, per_run=("image",))
    logits = np.stack([np.asarray(out, dtype=np.float64).reshape(-1) for out in res.pop("_outputs")[:n]])
    want = run_float(graph, x.astype(np.float64))
    res.update(logits=logits.tolist(), float_logits=want.tolist(), labels=logits.argmax(1).tolist(), float_labels=want.argmax(1).tolist(),
               top1_equal=bool(np.array_equal(logits.argmax(1), want.argmax(1))), max_abs_logit_error=float(np.max(np.abs(logits - want))),
               images=n, runs=runs, parameters=int(sum(np.size(a) for _, a, o, _ in inputs if o == 0)))
    res["operand_visibility"] = {"image": "secret (shared by bob, rank 1)",
                                 "weights": "secret (shared by alice, rank 0)" if weights == "secret" else "private to alice (Priv2k)"}
    res["note"] = _NOTE + ("; convolutions and FC layers with both operands secret-shared (mmul_aa), more work than Cheetah's "
                           "client-input x server-weight setting" if weights == "secret" else "; weights plaintext at alice (Cheetah's setting)")
    return res


if __name__ == "__main__":
    import json

    print(json.dumps({"info": spu_info(), "conv2d": spu_conv2d(32, 32, 16, 16, 3, reps=3),
                      "relu": spu_relu(2**16, reps=3)}, indent=2))
