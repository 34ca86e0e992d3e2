"""The ``lycaon`` command."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Optional, Sequence

import numpy as np

import lycaon


def _selfcheck(n: int) -> int:
    """Keys, encryption, rotations, products and decryption, each checked against numpy."""
    t0 = time.perf_counter()
    params = lycaon.BfvParameters.default(n)  # a bad n is a usage error (exit 2), not a failed check
    if not params.special_moduli:
        raise lycaon.ParameterError(f"selfcheck exercises relinearisation and rotations, which the default parameters for n = {n} cannot do (no special primes); use --n 4096 or larger")
    t = params.plaintext_modulus
    print(f"{params!r}")
    timings: list[tuple[str, float, Optional[float]]] = []
    failures: list[str] = []
    current = ["setup"]

    def step(name: str, fn, want=None, decode=None):
        current[0] = name
        start = time.perf_counter()
        result = fn()
        elapsed = (time.perf_counter() - start) * 1e3
        budget = None
        if want is not None:
            ct = result[0] if isinstance(result, list) else result
            got = decode(ct)
            if not np.array_equal(np.asarray(got, dtype=object), np.asarray(want, dtype=object)):
                failures.append(f"{name} (result differs from numpy)")
            budget = decryptor.noise_budget(ct)
            if budget <= 0:
                failures.append(f"{name} (noise budget exhausted)")
        timings.append((name, elapsed, budget))
        return result

    try:
        keys = step("key generation (secret)", lambda: lycaon.KeyGenerator(params))
        pk = step("public key", keys.public_key)
        rk = step("relinearisation key", keys.relin_key)
        gk = step("Galois keys (1..9, row swap)", lambda: keys.galois_keys(list(range(1, 10)), row_swap=True))
        encoder = lycaon.BatchEncoder(params)
        encryptor = lycaon.PublicEncryptor(params, pk)
        secret_encryptor = lycaon.SecretEncryptor(params, keys.secret_key())
        decryptor = lycaon.Decryptor(params, keys.secret_key())
        evaluator = lycaon.Evaluator(params)
        rng = np.random.default_rng()
        x = rng.integers(0, t, n, dtype=np.uint64)
        y = rng.integers(0, t, n, dtype=np.uint64)
        xo, yo = x.astype(object), y.astype(object)
        half = n // 2

        def dec(ct):
            return encoder.decode(decryptor.decrypt(ct))

        def rot(v, k):
            return np.concatenate([np.roll(v[:half], -k), np.roll(v[half:], -k)])

        ct_x = step("encrypt (public key)", lambda: encryptor.encrypt(encoder.encode(x)), x, dec)
        ct_y = step("encrypt (secret key, seeded)", lambda: secret_encryptor.encrypt(encoder.encode(y)).expand(), y, dec)
        step("add", lambda: evaluator.add(ct_x, ct_y), (xo + yo) % t, dec)
        step("multiply by plaintext", lambda: evaluator.mul_plain(ct_x, encoder.encode(y)), (xo * yo) % t, dec)
        step("multiply by scalar 7", lambda: evaluator.mul_scalar(ct_x, 7), (xo * 7) % t, dec)
        step("rotate rows by 1", lambda: evaluator.rotate_rows(ct_x, 1, gk), rot(x, 1), dec)
        hoisted = step("9 hoisted rotations", lambda: evaluator.rotate_rows_hoisted(ct_x, list(range(1, 10)), gk), rot(x, 1), dec)
        for k, ct in enumerate(hoisted, start=1):
            if not np.array_equal(dec(ct).astype(object), rot(x, k).astype(object)):
                failures.append(f"hoisted rotation by {k} (result differs from numpy)")
        step("swap rows", lambda: evaluator.swap_rows(ct_x, gk), np.concatenate([x[half:], x[:half]]), dec)
        prod = step("multiply + relinearise", lambda: evaluator.multiply_relin(ct_x, ct_y, rk), (xo * yo) % t, dec)
        if params.max_level > 0:
            step("modulus switch down (product)", lambda: evaluator.mod_switch_to_next(prod), (xo * yo) % t, dec)
        step("serialise + parse", lambda: lycaon.Ciphertext.from_bytes(params, ct_x.to_bytes()), x, dec)
        step("decrypt", lambda: decryptor.decrypt(ct_x))
    except lycaon.LycaonError as exc:
        print(f"selfcheck FAILED at step '{current[0]}': {exc}", file=sys.stderr)
        return 1

    print(f"{'step':<32} {'ms':>9} {'noise budget (bits)':>20}")
    for name, ms, budget in timings:
        print(f"{name:<32} {ms:>9.2f} {'' if budget is None else f'{budget:.1f}':>20}")
    total = time.perf_counter() - t0
    if failures:
        print(f"selfcheck FAILED: {'; '.join(failures)}", file=sys.stderr)
        return 1
    print(f"selfcheck passed: {len(timings)} steps verified against numpy in {total:.2f} s")
    return 0


def _table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A rich table on the terminal (plain text when output is redirected)."""
    from rich.console import Console  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    table = Table(title=title, title_justify="left")
    for k, col in enumerate(columns):
        table.add_column(col, justify="left" if k == 0 else "right")
    for row in rows:
        table.add_row(*[f"{v:.4f}" if isinstance(v, float) else str(v) for v in row])
    Console(width=140).print(table)


NOT_BUILT: dict[str, str] = {}


def _write_json(path: Optional[str], payload) -> None:
    if path:
        import json  # noqa: PLC0415

        with open(path, "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=2)
        print(f"wrote {path}")


def _inspect(model: str, json_path: Optional[str]) -> int:
    from lycaon.frontend import simplify, zoo  # noqa: PLC0415

    graph = zoo.load_model(model)
    rows = simplify(graph).summary()
    title = f"{graph.name}: input {graph.input_shape}, {len(graph.nodes)} nodes ({len(rows)} after folding batch-norm)"
    _table(title, ["name", "op", "output shape", "params", "MACs"], [[r["name"], r["op"], r["shape"], r["params"], r["macs"]] for r in rows])
    print(f"total: {sum(r['params'] for r in rows)} parameters, {sum(r['macs'] for r in rows)} multiply-accumulates")
    _write_json(json_path, [dict(r, shape=list(r["shape"])) for r in rows])
    return 0


def _models(json_path: Optional[str]) -> int:
    from lycaon.models import list_models  # noqa: PLC0415

    rows = list_models()
    _table("Built-in models (accuracy on the full test set)", ["name", "dataset", "accuracy", "test images", "trained by"], [[r["name"], r["dataset"], r["accuracy"], r["test_images"], r["trained_by"]] for r in rows])
    _write_json(json_path, rows)
    return 0


def _quantize(model: str, calib: int, evaluate: int, plaintext_bits: int, json_path: Optional[str]) -> int:
    from lycaon.frontend import lenet, resnet, run_float, simplify, zoo  # noqa: PLC0415
    from lycaon.frontend.quantize import QuantConfig, quantize, run_integer  # noqa: PLC0415

    graph = simplify(zoo.load_model(model))
    if tuple(graph.input_shape) == (3, 32, 32):
        (train_x, _), (test_x, test_y), prep = zoo.cifar10("train"), zoo.cifar10("test"), resnet.preprocess
    elif tuple(graph.input_shape) == (1, 28, 28):
        from lycaon.data import load_mnist  # noqa: PLC0415

        (train_x, _), (test_x, test_y), prep = load_mnist("train"), load_mnist("test"), lenet.preprocess
    else:
        raise lycaon.LycaonError(f"quantize evaluates on CIFAR-10 (3x32x32) or MNIST (1x28x28); this model takes {graph.input_shape}")
    rng = np.random.default_rng(0)
    cal = prep(train_x[rng.choice(len(train_x), calib, replace=False)])
    q = quantize(graph, cal, QuantConfig(plaintext_bits=plaintext_bits))
    idx = np.linspace(0, len(test_x) - 1, min(evaluate, len(test_x))).astype(int)
    x, y = prep(test_x[idx]), test_y[idx]
    from rich.progress import Progress  # noqa: PLC0415

    with Progress(transient=True) as bar:
        task_f = bar.add_task("float model", total=len(x))
        fl = run_float(graph, x, progress=lambda done: bar.update(task_f, completed=done)).argmax(1)
        task_i = bar.add_task("fixed-point twin", total=len(x))
        it = run_integer(q, q.encode_input(x), progress=lambda done: bar.update(task_i, completed=done)).argmax(1)
    result = {
        "model": model,
        "images": len(idx),
        "float_accuracy": float((fl == y).mean()),
        "fixed_point_accuracy": float((it == y).mean()),
        "top1_agreement": float((fl == it).mean()),
        "fraction_bits": q.fraction_bits,
        "plaintext_bits": plaintext_bits,
        "max_accumulator_bits": max(q.accumulator_bits.values()),
    }
    _table(f"Fixed-point twin of {model}", ["quantity", "value"], [[k, v] for k, v in result.items()])
    _write_json(json_path, result)
    return 0


def _si(v: float, unit: str) -> str:
    """A value with an SI prefix and four significant digits (1.234 ms, 56.7 mJ)."""
    scales = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n"))
    if unit == "s":
        scales = scales[4:]  # 1234 s, not 1.234 ks
    for scale, prefix in scales:
        if abs(v) >= scale:
            return f"{v / scale:.4g} {prefix}{unit}"
    return f"{v / 1e-9:.4g} n{unit}" if v else f"0 {unit}"


def _plan(model: str, mode: str, link: str, json_path: Optional[str], html_path: Optional[str], failure_probability: float, reserve_bits: float, algorithms: Sequence[str],
          flood_bits: float = 0.0) -> int:
    from lycaon import plan as planner  # noqa: PLC0415

    result: dict = {"model": model, "mode": mode}
    if mode in ("hybrid", "compare"):
        hybrid = planner.plan(model, link=link, failure_probability=failure_probability, reserve_bits=reserve_bits, algorithms=algorithms, design_space=bool(html_path),
                              flood_bits=flood_bits)
        layers = hybrid["layers"]
        _table(
            f"{model}: hybrid plan (link {hybrid['link']['name']}, failure probability {failure_probability:.1e})",
            ["layer", "algorithm", "n", "log q", "t", "digits", "noise margin", "rotations", "predicted", "up", "down", "keys"],
            [[l["name"], l["algorithm"], l["params"]["n"], sum(l["params"]["q_bits"]), l["params"]["t_bits"], l["params"]["digits"], f"{l['noise_margin_bits']:.1f}",
              l["rotations"], _si(l["predicted_s"], "s"), _si(l["bytes_up"], "B"), _si(l["bytes_down"], "B"), _si(l["key_bytes"], "B")] for l in layers]
            + [["total", "", "", "", "", "", f"{min(l['noise_margin_bits'] for l in layers):.1f} (min)", sum(l["rotations"] for l in layers),
                _si(hybrid["predicted_s"], "s"), _si(sum(l["bytes_up"] for l in layers), "B"), _si(sum(l["bytes_down"] for l in layers), "B"), _si(sum(l["key_bytes"] for l in layers), "B")]],
        )
        print(f"per-layer tuning: {hybrid['speedup_vs_single_set']:.2f}x faster than the best single parameter set "
              f"({_si(hybrid['single_set_predicted_s'], 's')}); nonlinear layers (ReLU, truncation) run as two-party protocols on top")
        result.update(hybrid)
    if mode in ("fhe", "compare"):
        fhe = planner.plan_fhe(model, link=link)
        rows = [[s["strategy"], s["keys"], _si(s["memory_bytes"], "B"), _si(s["wire_bytes"], "B"), s["key_switches"], _si(s["rotation_s"], "s")] for s in fhe["keysets"]]
        _table(f"{model}: FHE mode (CKKS logN {fhe['log_n']}, {fhe['bootstraps']} bootstraps, {fhe['rotations']} rotations): rotation keysets",
               ["keyset", "keys", "memory", "upload (seeded)", "key switches", "rotation time"], rows)
        result["fhe"] = fhe
    if mode == "compare":
        cmp = planner.compare(result, result["fhe"])
        _table(f"{model}: hybrid against FHE on link {link}", ["quantity", "hybrid", "fhe"], [[r["quantity"], r["hybrid"], r["fhe"]] for r in cmp])
        result["comparison"] = cmp
    _write_json(json_path, result)
    if html_path:
        planner.write_report(result, html_path)
        print(f"wrote {html_path}")
    return 0


def _simulate(models: Sequence[str], packing: str, arch: str, batch: int, json_path: Optional[str], html_path: Optional[str], reproduce: bool, sweep: bool) -> int:
    from lycaon import simulate as sim  # noqa: PLC0415

    if sweep and not models:
        raise lycaon.LycaonError("--sweep explores accelerators for the --model given; give --model NAME (e.g. resnet50)")
    if not models and not reproduce:
        raise lycaon.LycaonError(f"give --model NAME|FILE (built-in: {', '.join(sim.MODELS)}) or --reproduce")
    results: list[dict] = []
    for model in models:
        rows = sim.simulate(model, packing, arch, batch)
        results.extend(rows)
        first = rows[0]
        _table(
            f"{first['model']} on {first['arch']}, batch {first['batch']}: linear layers ({len(first['layers'])}), server side",
            ["packing", "latency", "energy", "rotations", "mults", "NTTs", "key switches", "off-chip bytes"],
            [[r["packing"], _si(r["latency_s"], "s"), _si(r["energy_j"], "J"), r["rotations"], r["mults"], r["ntts"], r["keyswitches"], _si(sum(r["bytes"].values()), "B")] for r in rows],
        )
    if results:
        totals = []
        for model in dict.fromkeys(r["model"] for r in results):
            rows = [r for r in results if r["model"] == model]
            fast = min(rows, key=lambda r: r["latency_s"])
            lean = min(rows, key=lambda r: r["energy_j"])
            slow = max(rows, key=lambda r: r["latency_s"])
            totals.append([model, len(rows[0]["layers"]), len(rows), fast["packing"], _si(fast["latency_s"], "s"), lean["packing"], _si(lean["energy_j"], "J"),
                           f"{slow['latency_s'] / fast['latency_s']:.3g}x ({slow['packing']})" if len(rows) > 1 else "-"])
        _table("Totals per model (all linear layers)", ["model", "layers", "packings", "fastest", "latency", "least energy", "energy", "fastest vs slowest"], totals)
    table = None
    if reproduce:
        table = sim.reproduction()
        notes: list[str] = []
        shown = []
        for r in table:
            note = ""
            if not r["within_tolerance"]:
                if r["explanation"] not in notes:
                    notes.append(r["explanation"])
                note = f"[{notes.index(r['explanation']) + 1}]"
            shown.append([f"{r['paper_id']}: {r['figure']}", f"{r['paper']:.4g}", f"{r['ours']:.4g}", f"{100 * r['deviation']:+.1f}%", f"{r['verdict']} {note}".strip()])
        _table("Reproduction of 000 (Hyena) and 003 (Cheetah), tolerance 25%", ["paper: figure", "paper", "ours", "deviation", "verdict"], shown)
        for k, text in enumerate(notes, start=1):
            print(f"[{k}] {text}")
    sweeps = []
    for k, model in enumerate(models if sweep else []):
        dse = sim.accelerator_sweep(model, table_vi=(k == 0))
        sweeps.append(dse)
        chosen = dse["chosen"]
        for key, cost in (("pareto_area", "area"), ("pareto_power", "power")):
            _table(
                f"{dse['model']}: Pareto front of latency against {cost} (003 sweep, {len(dse['points'])} designs, 5 nm)",
                ["PEs x lanes", "latency", "area mm2", "power W", "energy", "lane use", ""],
                [[f"{p['pes']} x {p['lanes']}", _si(p["latency_s"], "s"), f"{p['area_mm2']:.1f}", f"{p['power_w']:.2f}", _si(p["energy_j"], "J"), f"{p['lane_utilisation']:.2f}",
                  "chosen" if chosen and (p["pes"], p["lanes"]) == (chosen["pes"], chosen["lanes"]) else ""] for p in dse[key]],
            )
        if chosen:
            print(f"chosen: {chosen['pes']} PEs x {chosen['lanes']} lanes ({chosen['why']}): {_si(chosen['latency_s'], 's')}, {chosen['area_mm2']:.0f} mm2, {chosen['power_w']:.1f} W")
        if dse.get("table_vi"):
            _table("003 Table VI: networks on the ResNet-50 design (8 PEs x 512 lanes)", ["network", "latency ms", "paper ms", "increase", "paper", "design", "out CTs/layer", "paper", "K partials/layer", "paper"],
                   [[t["model"], f"{t['latency_ms']:.1f}", f"{t['paper_latency_ms']:.0f}", f"{t['increase']:+.2f}", f"{t['paper_increase']:+.2f}", "x".join(map(str, t["paper_design"])),
                     f"{t['avg_output_cts']:.0f}", f"{t['paper_avg_output_cts']:.0f}", f"{t['avg_partials_k']:.1f}", f"{t['paper_avg_partials_k']:.1f}"] for t in dse["table_vi"]])
    _write_json(json_path, results if models else table)
    if html_path:
        batch_rows = sim.batch_study(models[0], arch=arch) if models else None
        sim.write_report(results, html_path, batch=batch_rows or False, sweep=sweeps[0] if sweeps else None, reproduction=table if table is not None else True)
        print(f"wrote {html_path}")
    return 0


DEMO_MODELS = {"lenet5": "lenet5-mnist", "resnet20": "resnet20-cifar10", "cnn-square": "cnn-square-cifar10"}


def _bundled(dataset: Optional[str]) -> tuple[np.ndarray, np.ndarray]:
    """The test images of a data set (uint8, as the data set stores them) and labels."""
    from lycaon.data import demo_images  # noqa: PLC0415

    try:
        return demo_images(dataset)
    except ValueError as e:
        raise lycaon.LycaonError(str(e)) from None


def _log_line(record: dict) -> str:
    """One server log record on one line: its scalar fields."""
    return " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in record.items() if not isinstance(v, (list, dict)))


def _preprocess_spec(args) -> Optional[dict]:
    """The preprocessing spec of ``lycaon serve``'s flags: --preprocess (JSON or a JSON file),
    overridden field by field by --resize, --crop, --mean, --std, --scale, --channel-order."""
    from lycaon.preprocessing import Preprocess  # noqa: PLC0415

    base = Preprocess.from_any(args.preprocess)
    spec = base.to_dict() if base is not None else {}
    for key in ("resize", "crop", "mean", "std", "scale", "channel_order"):
        value = getattr(args, key, None)
        if value is not None:
            spec[key] = value[0] if key in ("resize", "crop") and len(value) == 1 else value
    return Preprocess.from_any(spec).to_dict() if spec else None


def _serve(model: str, port: int, host: str, plan_path: Optional[str], reveal: str, max_sessions: int, link: str, flood_bits: float,
           exact_truncation: bool = True, calibration: Optional[str] = None, preprocess: Optional[dict] = None, labels: Optional[str] = None,
           calibration_images: int = 16, random_weights: Optional[int] = None) -> int:
    from rich.console import Console  # noqa: PLC0415

    from lycaon.hybrid import Server, load_graph  # noqa: PLC0415

    graph = None
    if random_weights is not None:
        from lycaon.frontend.random_weights import with_random_weights  # noqa: PLC0415

        graph = with_random_weights(load_graph(model), seed=random_weights)
        print(f"{model}: random weights (seed {random_weights}; for benchmarks, not predictions)", file=sys.stderr)
    with Console(stderr=True).status(f"{model}: quantising, {'reading the plan' if plan_path else f'planning for link {link}'} and compiling"):
        server = Server(graph if graph is not None else model, plan=plan_path, reveal=reveal, link=link, max_sessions=max_sessions, flood_bits=flood_bits,
                        exact_truncation=exact_truncation, calibration=calibration, preprocess=preprocess, labels=labels,
                        calibration_images=calibration_images)
    program = server.program
    linear = [op for op in program["ops"] if op["op"] == "linear"]
    _table(f"{model}: hybrid program ({len(program['ops'])} ops, {program['fraction_bits']} fraction bits, reveals {reveal})",
           ["layer", "algorithm", "n", "log q", "t bits", "c_in", "c_out", "k", "stride"],
           [[op["name"], op["algorithm"], op["params"]["n"], sum(op["params"]["q_bits"]), op["params"]["t_bits"],
             op["shape"]["c_in"], op["shape"]["c_out"], op["shape"]["k"], op["shape"]["stride"]] for op in linear])
    address = server.start(port, host)
    meta = server.metadata
    print(f"serving {model} on {address} (input {tuple(meta['input_shape'])}, {meta['classes']} classes, up to {max_sessions} sessions at once); Ctrl-C stops", flush=True)
    seen = 0
    try:
        while True:
            time.sleep(0.5)
            records = server.logs()
            for record in records[seen:]:
                print(_log_line(record), file=sys.stderr if "error" in record else sys.stdout, flush=True)
            seen = len(records)
    except KeyboardInterrupt:
        print("stopping", file=sys.stderr)
    finally:
        server.stop()
    return 0


def _serve_fhe(model: str, port: int, host: str, max_sessions: Optional[int]) -> int:
    from rich.console import Console  # noqa: PLC0415

    from lycaon.fhe_resnet import RESNET20_MODELS  # noqa: PLC0415
    from lycaon.fhe_service import FheServer  # noqa: PLC0415

    if model not in RESNET20_MODELS:
        model = DEMO_MODELS.get(model, model)
    with Console(stderr=True).status(f"{model}: compiling for CKKS (packings, diagonals, level plan)"):
        server = FheServer(model, max_sessions=max_sessions, log=lambda r: print(_log_line(r), file=sys.stderr if "error" in r else sys.stdout, flush=True))
    p = server.params
    if server.resnet is not None:
        net = server.resnet
        kinds = [op.kind for op in net.ops]
        print(f"{model}: FHE program with bootstrapping (CKKS logN {int(np.log2(p.n))}, 2^{int(np.log2(net.slots))} slots, {net.top} levels between bootstraps, "
              f"{kinds.count('conv')} multiplexed convolutions, {kinds.count('hyphen')} HyPHEN blocks (CAConv, a quadratic per channel, RAConv), "
              f"{kinds.count('quadratic')} other quadratic and {kinds.count('relu')} composite-ReLU activations, {net.planned_bootstraps} bootstraps an image, "
              f"{len(net.spec.rotation_levels)} rotation keys by level); a session holds about 10 GB of the client's keys")
    else:
        _table(f"{model}: FHE program (CKKS logN {int(np.log2(p.n))}, {p.max_level} levels, log QP {p.log2_qp:.0f}, {len(server.model.spec.rotation_levels)} rotation keys)",
               ["step", "kind", "level", "rotations", "diagonals"], [[r["step"], r["kind"], r["level"], r["rotations"], r.get("diagonals", "")] for r in server.model.summary()])
    address = server.start(port, host)
    sessions = f"{server.max_sessions} session{'s' if server.max_sessions != 1 else ''}"
    print(f"serving {model} in the FHE mode on {address} (up to {sessions} at once); Ctrl-C stops", flush=True)
    try:
        while True:
            time.sleep(0.5)
    except KeyboardInterrupt:
        print("stopping", file=sys.stderr)
    finally:
        server.stop()
    return 0


def _infer_fhe(server: str, images: Sequence[str], json_path: Optional[str]) -> int:
    from rich.console import Console  # noqa: PLC0415
    from rich.progress import Progress  # noqa: PLC0415

    from lycaon.fhe_service import FheRemoteClient  # noqa: PLC0415

    shown: dict = {}  # the inference bar, once it exists (the key generation shows a spinner first)

    def on_progress(done: int, total: int, name: str) -> None:
        if shown:
            shown["bar"].update(shown["step"], completed=done, total=total, description=f"server: {name}", visible=True)

    with Console(stderr=True).status(f"{server}: connecting") as status:
        client = FheRemoteClient(server, on_keys=lambda what: status.update(f"{server}: {what}"), on_progress=on_progress)
    names = client.labels or []
    inputs = [item for spec in images for item in _read_images(spec, client)]
    p = client.params
    boot = " with bootstrapping" if client.program["bootstrapping"] else ""
    print(f"{server}: {client.program['name']} in the FHE mode{boot} (CKKS logN {int(np.log2(p.n))}, {p.max_level} levels); keys generated in "
          f"{_si(client.keygen_s, 's')}, {_si(client.key_bytes, 'B')} in the server's memory, {_si(client.key_upload_bytes, 'B')} uploaded "
          f"in {_si(client.upload_s, 's')}")
    records = []
    with Progress(transient=True) as bar:
        task = bar.add_task("encrypted inference", total=len(inputs))
        shown.update(bar=bar, step=bar.add_task("", total=None, visible=False))
        for name, x, truth in inputs:
            bar.update(task, description=f"{name}: encrypted inference")
            bar.reset(shown["step"], visible=False)
            res = client.infer(x)
            label = res["label"]
            title = f"{name}: label {label}" + (f" ({names[label]})" if label < len(names) and names[label] != str(label) else "")
            if truth is not None:
                title += f"; true label {truth} ({'correct' if truth == label else 'wrong'})"
            bar.console.print(f"{title}; {_si(res['total_s'], 's')} (client {_si(res['client_s'], 's')}, server {_si(res['server_s'], 's')}), "
                              f"{_si(res['up_bytes'], 'B')} up, {_si(res['down_bytes'], 'B')} down")
            records.append({"image": name, "label": label, "true_label": truth, "logits": res["logits"].tolist(),
                            **{k: res[k] for k in ("total_s", "client_s", "server_s", "comm_s", "up_bytes", "down_bytes", "server")}})
            bar.advance(task)
    client.close()
    _write_json(json_path, {"server": server, "mode": "fhe", "program": client.program["name"], "bootstrapping": client.program["bootstrapping"],
                            "keygen_s": client.keygen_s, "key_upload_bytes": client.key_upload_bytes, "upload_s": client.upload_s,
                            "server_key_bytes": client.key_bytes, "results": records})
    return 0


def _read_images(spec: str, client) -> list[tuple[str, np.ndarray, Optional[int]]]:
    """(name, model-ready float image (C, H, W), true label or None) for each image an IMAGE
    argument holds: bundled:K, a .npy/.npz array (one image or a batch; uint8 raw images or
    float model inputs), or a PNG/JPEG file (Pillow)."""
    from pathlib import Path  # noqa: PLC0415

    dataset = client.metadata.get("preprocess")
    labels = None
    if spec.startswith("bundled:"):
        if not isinstance(dataset, str):
            raise lycaon.LycaonError(f"{spec}: this server's model has no bundled test images; give .npy/.npz tensors or image files")
        try:
            k = int(spec.split(":", 1)[1])
        except ValueError:
            raise lycaon.LycaonError(f"{spec}: write bundled:K with K an image index") from None
        x, y = _bundled(dataset)
        if not 0 <= k < len(x):
            raise lycaon.LycaonError(f"{spec}: the bundled {dataset} test set has images 0..{len(x) - 1}")
        return [(spec, client.preprocess(x[k])[0], int(y[k]))]
    from lycaon.preprocessing import IMAGE_SUFFIXES, read_array, read_image  # noqa: PLC0415

    path = Path(spec)
    if not path.is_file():
        raise FileNotFoundError(f"{spec}: no such file (give .npy, .npz, {', '.join(IMAGE_SUFFIXES)} or bundled:K)")
    suffix = path.suffix.lower()
    if suffix in (".npy", ".npz"):
        arr, labels = read_array(path)
    else:
        prep = client.preprocessing
        if prep is not None and not isinstance(prep, str):
            return [(spec, read_image(path, prep), None)]
        try:
            from PIL import Image  # noqa: PLC0415
        except ImportError:
            raise lycaon.LycaonError(f"{spec}: reading {suffix or 'this'} images needs Pillow (pip install pillow); .npy and .npz arrays need nothing") from None
        if prep is None:
            raise lycaon.LycaonError(f"{spec}: the server publishes no preprocessing for image files; give model-ready float tensors as .npy/.npz")
        with Image.open(path) as img:
            arr = np.asarray(img.convert("L" if prep == "mnist" else "RGB"), dtype=np.uint8)
    x = client.preprocess(arr)
    if labels is not None and np.size(labels) != len(x):
        labels = None
    if len(x) == 1:
        return [(spec, x[0], None if labels is None else int(np.ravel(labels)[0]))]
    return [(f"{spec}[{i}]", x[i], None if labels is None else int(np.ravel(labels)[i])) for i in range(len(x))]


def _infer_one(client, x: np.ndarray, name: str):
    """One private inference with a progress bar over the program's ops."""
    from rich.progress import Progress  # noqa: PLC0415

    with Progress(transient=True) as bar:
        task = bar.add_task(f"{name}: connecting", total=len(client.program["ops"]))

        def progress(done, total, op_name):
            bar.update(task, completed=done, total=total, description=f"{name}: {op_name}")

        return client.infer(x[None], progress=progress)


def _layer_rows(layers: Sequence[dict], per: int = 1) -> list[list]:
    return [[l.get("name", ""), l.get("op", ""), _si(l.get("seconds", 0.0) / per, "s"), _si(l.get("client_s", 0.0) / per, "s"), _si(l.get("server_s", 0.0) / per, "s"),
             _si(l.get("bytes_sent", 0) / per, "B"), _si(l.get("bytes_received", 0) / per, "B"), f"{l.get('rounds', 0) / per:g}"] for l in layers]


LAYER_COLUMNS = ["layer", "op", "time", "client", "server", "sent", "received", "rounds"]


def _infer(server: str, images: Sequence[str], json_path: Optional[str], show_layers: bool, link: str = "none") -> int:
    from lycaon.hybrid import Client  # noqa: PLC0415

    client = Client(server, link=link)
    program = client.program
    names = client.labels or []
    inputs = [item for spec in images for item in _read_images(spec, client)]
    print(f"{server}: {program['name']}, {len(program['ops'])} ops, input {tuple(program['input_shape'])}, reveals {program['reveal']}")
    records = []
    for name, x, truth in inputs:
        res = _infer_one(client, x, name)
        label = res.labels[0]
        title = f"{name}: label {label}" + (f" ({names[label]})" if label < len(names) and names[label] != str(label) else "")
        if truth is not None:
            title += f"; true label {truth} ({'correct' if truth == label else 'wrong'})"
        print(title if res.logits is not None else f"{title} (the server reveals only the label)")
        if res.logits is not None:
            _table("top 5", ["rank", "class", "name", "logit"], [[r + 1, c, names[c] if c < len(names) else "", float(res.logits[0][c])] for r, c in enumerate(res.top5[0])])
        if show_layers:
            _table(f"{name}: per layer", LAYER_COLUMNS, _layer_rows(res.layers))
        print(f"{name}: {_si(res.total_s, 's')} (client {_si(res.client_s, 's')}, server {_si(res.server_s, 's')}, network {_si(res.comm_s, 's')}), "
              f"{_si(res.bytes, 'B')}, {res.rounds} rounds")
        records.append({"image": name, "label": label, "true_label": truth, "logits": None if res.logits is None else res.logits[0].tolist(),
                        "top5": None if res.top5 is None else res.top5[0], "layers": res.layers, "client_s": res.client_s, "server_s": res.server_s,
                        "comm_s": res.comm_s, "total_s": res.total_s, "bytes": res.bytes, "rounds": res.rounds})
    _write_json(json_path, {"server": server, "program": program["name"], "results": records})
    return 0


def _demo_fhe(model: str, images: int, json_path: Optional[str]) -> int:
    """FHE mode on this machine: the server compiles the network, the client generates the
    level-aware keyset and uploads it (seeded), then each image goes up encrypted and its logits
    come back encrypted; printed next to the float model."""
    from rich.console import Console  # noqa: PLC0415
    from rich.progress import Progress  # noqa: PLC0415

    from lycaon import fhe  # noqa: PLC0415
    from lycaon.frontend import resnet, run_float, zoo  # noqa: PLC0415

    name = DEMO_MODELS.get(model, model)
    graph = zoo.load_model(name)
    if tuple(graph.input_shape) != (3, 32, 32):
        raise lycaon.LycaonError(f"demo --mode fhe classifies bundled CIFAR-10 images; {name} takes input of shape {graph.input_shape}")
    raw, y = _bundled("cifar10")
    if images < 1 or images > len(raw):
        raise lycaon.LycaonError(f"--images must be 1..{len(raw)} (the bundled CIFAR-10 test images)")
    x, y = resnet.preprocess(raw[:images]), y[:images].astype(np.int64)
    t0 = time.perf_counter()
    with Console(stderr=True).status(f"{name}: compiling for CKKS (packings, diagonals, level plan)"):
        server = fhe.FheModel(graph)
    compile_s = time.perf_counter() - t0
    client = fhe.FheClient(server.spec)
    with Progress(transient=True) as bar:
        task = bar.add_task("key generation (level-aware keyset)", total=None)
        t0 = time.perf_counter()
        relin, galois = client.evaluation_keys("level-aware")
        keygen_s = time.perf_counter() - t0
        bar.update(task, total=1, completed=1)
    upload = {"relin": relin.to_bytes(), "galois": galois.to_bytes(), "public": client.public_key.to_bytes()}
    params = server.params
    server.attach_keys(lycaon.CkksRelinKey.from_bytes(params, upload["relin"]), lycaon.CkksGaloisKeys.from_bytes(params, upload["galois"]),
                       lycaon.CkksPublicKey.from_bytes(params, upload["public"]))
    results = []
    with Progress(transient=True) as bar:
        task = bar.add_task("encrypted inference", total=images)
        layer_task = bar.add_task("", total=len(server.steps))
        for i in range(images):
            t0 = time.perf_counter()
            query = client.encrypt(x[i])
            up = query.to_bytes()
            t1 = time.perf_counter()

            def progress(done, total, step, i=i):
                bar.update(layer_task, completed=done, total=total, description=f"image {i + 1}: {step}")

            answer = server.infer(lycaon.CkksCiphertext.from_bytes(params, up), progress=progress)
            down = answer.to_bytes()
            t2 = time.perf_counter()
            logits = client.decrypt(lycaon.CkksCiphertext.from_bytes(params, down))
            t3 = time.perf_counter()
            results.append({"logits": logits, "client_s": (t1 - t0) + (t3 - t2), "server_s": t2 - t1, "up_bytes": len(up), "down_bytes": len(down)})
            bar.update(task, completed=i + 1)
    plain = run_float(graph, x)
    enc = np.array([r["logits"] for r in results])
    bits = [fhe.precision_bits(e, p) for e, p in zip(enc, plain)]
    fl, pr = plain.argmax(1), enc.argmax(1)
    key_bytes = relin.memory_bytes + galois.memory_bytes
    summary = {
        "model": name, "mode": "fhe", "images": images, "log_n": int(np.log2(params.n)), "levels": params.max_level, "log2_qp": params.log2_qp,
        "compile_s": compile_s, "keygen_s": keygen_s, "key_bytes": key_bytes, "key_upload_bytes": len(upload["relin"]) + len(upload["galois"]) + len(upload["public"]),
        "float": {"accuracy": float((fl == y).mean())},
        "fhe": {"accuracy": float((pr == y).mean()), "top1_agreement_float": float((pr == fl).mean()), "min_bits": min(bits),
                "server_s": float(np.mean([r["server_s"] for r in results])), "client_s": float(np.mean([r["client_s"] for r in results])),
                "up_bytes": results[0]["up_bytes"], "down_bytes": results[0]["down_bytes"]},
        "per_image": [{"label": int(p), "true_label": int(t), "bits": b, "server_s": r["server_s"]} for p, t, b, r in zip(pr, y, bits, results)],
        "layers": server.summary(),
    }
    h = summary["fhe"]
    _table(f"{name}: {images} bundled CIFAR-10 test images, FHE private inference (CKKS logN {summary['log_n']}, {params.max_level} levels, no bootstrapping)",
           ["", "accuracy", "top-1 = float", "precision", "server / image", "client / image", "up / image", "down / image"],
           [["plaintext float", summary["float"]["accuracy"], "-", "-", "", "", "", ""],
            ["FHE (private)", h["accuracy"], h["top1_agreement_float"], f"{h['min_bits']:.1f} bits", _si(h["server_s"], "s"), _si(h["client_s"], "s"),
             _si(h["up_bytes"], "B"), _si(h["down_bytes"], "B")]])
    print(f"once per session: compile {_si(compile_s, 's')} (server), key generation {_si(keygen_s, 's')} (client), "
          f"keys {_si(key_bytes, 'B')} in memory, {_si(summary['key_upload_bytes'], 'B')} uploaded (seeded)")
    _table("Program", ["step", "kind", "level", "rotations", "diagonals"], [[r["step"], r["kind"], r["level"], r["rotations"], r.get("diagonals", "")] for r in summary["layers"]])
    _write_json(json_path, summary)
    return 0


def _demo_fhe_resnet20(model: str, images: int, json_path: Optional[str]) -> int:
    """ResNet-20 in the FHE mode with bootstrapping (fhe_resnet): AESPA quadratics (the shipped
    trained weights) or, for the ReLU network, the composite minimax ReLU. The client generates
    the level-aware rotation keys and the bootstrapping keys; each image goes up encrypted and its
    logits come back encrypted; printed next to the float twin. About 16 GiB and, on 2 cores,
    8 minutes an image (AESPA) or 20 (ReLU)."""
    from rich.progress import Progress  # noqa: PLC0415

    from lycaon import fhe, fhe_resnet  # noqa: PLC0415
    from lycaon.frontend import resnet, zoo  # noqa: PLC0415

    name = fhe_resnet.RESNET20_MODELS[model]
    raw, y = _bundled("cifar10")
    try:  # value bounds for the bootstraps: training images, else the bundled images not classified
        calibration, spare = zoo.cifar10("train")[0][:64].copy(), len(raw)
    except OSError:
        calibration, spare = raw[-64:], len(raw) - 64
    if images < 1 or images > spare:
        raise lycaon.LycaonError(f"--images must be 1..{spare} (the bundled CIFAR-10 test images)")
    x, y = resnet.preprocess(raw[:images]), y[:images].astype(np.int64)
    t0 = time.perf_counter()
    net = fhe_resnet.load_resnet20(model, calibration)
    compile_s = time.perf_counter() - t0
    client = fhe_resnet.FheResNetClient(net.spec)
    with Progress(transient=True) as bar:
        task = bar.add_task("key generation", total=2)
        steps = iter(range(3))
        t0 = time.perf_counter()
        relin, galois, boot_keys = client.keys(progress=lambda what: bar.update(task, completed=next(steps), description=f"key generation: {what}"))
        keygen_s = time.perf_counter() - t0
    results = []
    with Progress(transient=True) as bar:
        task = bar.add_task("encrypted inference", total=images)
        op_task = bar.add_task("", total=len(net.ops))
        for i in range(images):
            ct = client.encrypt(x[i])

            def progress(done, total, step, i=i):
                bar.update(op_task, completed=done, total=total, description=f"image {i + 1}: {step}")

            t0 = time.perf_counter()
            out, stats = fhe_resnet.infer(net, relin, galois, boot_keys, ct, progress=progress)
            results.append({"logits": client.decrypt(out), "server_s": time.perf_counter() - t0, **stats})
            bar.update(task, completed=i + 1)
    plain = np.array([net.reference(v) for v in x])
    enc = np.array([r["logits"] for r in results])
    bits = [fhe.precision_bits(e, p) for e, p in zip(enc, plain)]
    fl, pr = plain.argmax(1), enc.argmax(1)
    ratio = net.range_ratio(x)
    summary = {
        "model": name, "mode": "fhe", "images": images, "log_n": int(np.log2(net.params.n)), "bootstrapping": True,
        "activation": "composite minimax ReLU" if net.relu is not None else "AESPA quadratics",
        "compile_s": compile_s, "keygen_s": keygen_s, "network_key_bytes": relin.memory_bytes + galois.memory_bytes,
        "bootstrap_key_bytes": boot_keys.memory_bytes, "rotation_keys": len(net.rotation_levels()),
        "float": {"accuracy": float((fl == y).mean())},
        "fhe": {"accuracy": float((pr == y).mean()), "top1_agreement_float": float((pr == fl).mean()), "min_bits": min(bits),
                "server_s": float(np.mean([r["server_s"] for r in results])), "bootstraps": results[0]["bootstraps"]},
        "per_image": [{"label": int(p), "true_label": int(t), "bits": b, "server_s": r["server_s"], "range_ratio": float(q)}
                      for p, t, b, r, q in zip(pr, y, bits, results, ratio)],
    }
    h = summary["fhe"]
    _table(f"{name}: {images} bundled CIFAR-10 test images, FHE private inference (CKKS logN {summary['log_n']}, {summary['activation']}, "
           f"{h['bootstraps']} bootstraps an image)",
           ["", "accuracy", "top-1 = float", "precision", "server / image"],
           [["plaintext float", summary["float"]["accuracy"], "-", "-", ""],
            ["FHE (private)", h["accuracy"], h["top1_agreement_float"], f"{h['min_bits']:.1f} bits", _si(h["server_s"], "s")]])
    print(f"once per session: compile {_si(compile_s, 's')} (server), key generation {_si(keygen_s, 's')} (client): "
          f"{summary['rotation_keys']} rotation keys by level and relinearisation {_si(summary['network_key_bytes'], 'B')}, bootstrapping {_si(summary['bootstrap_key_bytes'], 'B')}")
    outside = int((ratio > 1).sum())
    if outside:
        print(f"warning: {outside} image(s) left the value range the bootstraps were calibrated for; their encrypted logits are not meaningful")
    _write_json(json_path, summary)
    return 0


def _demo(mode: str, model: Optional[str], images: int, link: str, json_path: Optional[str], flood_bits: float, exact_truncation: bool = True) -> int:
    from lycaon.fhe_resnet import RESNET20_MODELS  # noqa: PLC0415

    if mode == "fhe" and model in RESNET20_MODELS:
        return _demo_fhe_resnet20(model, images, json_path)
    if mode == "fhe":
        return _demo_fhe(model or "cnn-square", images, json_path)
    model = model or "lenet5"
    from rich.console import Console  # noqa: PLC0415
    from rich.progress import Progress  # noqa: PLC0415

    from lycaon.frontend import run_float  # noqa: PLC0415
    from lycaon.frontend.quantize import run_integer  # noqa: PLC0415
    from lycaon.hybrid import Client, Server  # noqa: PLC0415

    name = DEMO_MODELS.get(model, model)
    with Console(stderr=True).status(f"{name}: quantising, planning for link {link} and compiling"):
        server = Server(name, link=link, emulate_link=True, flood_bits=flood_bits, exact_truncation=exact_truncation)
    q = server.quantized
    raw, y = _bundled(server.metadata["preprocess"])
    if images < 1 or images > len(raw):
        raise lycaon.LycaonError(f"--images must be 1..{len(raw)} (the bundled {server.metadata['preprocess']} test images)")
    raw, y = raw[:images], y[:images].astype(np.int64)
    address = server.start(0, "127.0.0.1")
    try:
        client = Client(address, link=link)
        x = client.preprocess(raw)
        results = []
        with Progress(transient=True) as bar:
            task = bar.add_task("private inference", total=images)
            layer_task = bar.add_task("", total=len(server.program["ops"]))
            for i in range(images):
                def progress(done, total, op_name, i=i):
                    bar.update(layer_task, completed=done, total=total, description=f"image {i + 1}: {op_name}")

                results.append(client.infer(x[i:i + 1], progress=progress))
                bar.update(task, completed=i + 1)
    finally:
        server.stop()
    t0 = time.perf_counter()
    float_logits = run_float(q.graph, x)
    float_s = (time.perf_counter() - t0) / images
    t0 = time.perf_counter()
    twin_int = run_integer(q, q.encode_input(x))
    twin_s = (time.perf_counter() - t0) / images
    f = q.fraction_bits
    private = np.array([r.labels[0] for r in results])
    fl, tw = float_logits.argmax(1), twin_int.argmax(1)
    revealed = all(r.logits is not None for r in results)
    logit_units = int(np.abs(np.array([r.logits[0] for r in results]) * 2.0**f - twin_int).max()) if revealed else None

    def mean(key):
        return float(np.mean([r[key] for r in results]))

    summary = {
        "model": name, "mode": "hybrid", "link": link, "images": images, "fraction_bits": f, "reveal": server.program["reveal"],
        "float": {"accuracy": float((fl == y).mean()), "seconds_per_image": float_s},
        "fixed_point": {"accuracy": float((tw == y).mean()), "top1_agreement_float": float((tw == fl).mean()), "seconds_per_image": twin_s},
        "hybrid": {"accuracy": float((private == y).mean()), "top1_agreement_float": float((private == fl).mean()), "top1_agreement_fixed_point": float((private == tw).mean()),
                   "max_logit_difference_units": logit_units, "client_s": mean("client_s"), "server_s": mean("server_s"), "comm_s": mean("comm_s"),
                   "two_party_s": mean("two_party_s"), "total_s": mean("total_s"), "bytes": mean("bytes"), "rounds": mean("rounds")},
    }
    h = summary["hybrid"]
    _table(f"{name}: {images} bundled test images, hybrid private inference over an emulated {link} link",
           ["", "accuracy", "top-1 = float", "top-1 = fixed point", "latency / image", "client HE", "server HE", "2PC compute", "network", "bytes / image", "rounds"],
           [["plaintext float", summary["float"]["accuracy"], "-", f"{(fl == tw).mean():.4f}", _si(float_s, "s"), "", "", "", "", "", ""],
            ["fixed-point twin", summary["fixed_point"]["accuracy"], summary["fixed_point"]["top1_agreement_float"], "-", _si(twin_s, "s"), "", "", "", "", "", ""],
            ["hybrid (private)", h["accuracy"], h["top1_agreement_float"], h["top1_agreement_fixed_point"], _si(h["total_s"], "s"), _si(h["client_s"], "s"),
             _si(h["server_s"], "s"), _si(h["two_party_s"], "s"), _si(h["comm_s"], "s"), _si(h["bytes"], "B"), f"{h['rounds']:g}"]])
    by_op: dict[str, dict] = {}
    for r in results:
        for layer in r.layers:
            row = by_op.setdefault(layer.get("op", "?"), {"name": layer.get("op", "?"), "op": 0})
            row["op"] += 1
            for key in ("seconds", "client_s", "server_s", "bytes_sent", "bytes_received", "rounds"):
                row[key] = row.get(key, 0) + layer.get(key, 0)
    for row in by_op.values():
        row["op"] = f"{row['op'] / images:g}"
    _table("Per image by op kind (mean)", ["op", "count", "time", "client", "server", "sent", "received", "rounds"], _layer_rows(list(by_op.values()), images))
    if logit_units is not None:
        print(f"private logits differ from the fixed-point twin's by at most {logit_units} unit(s) of 2^-{f} (0: bit for bit)")
    summary["by_op"] = by_op
    summary["per_image"] = [{"label": r.labels[0], "true_label": int(t), "layers": r.layers, "client_s": r.client_s, "server_s": r.server_s, "comm_s": r.comm_s,
                             "total_s": r.total_s, "bytes": r.bytes, "rounds": r.rounds} for r, t in zip(results, y)]
    _write_json(json_path, summary)
    return 0


def _set_threads(threads: Optional[int]) -> Optional[str]:
    """Sizes Lycaon's worker pool (rayon's, read when it first starts; party processes that a
    bench starts inherit it). Returns a problem to report, or None."""
    if threads is None:
        return None
    if threads < 1:
        return f"--threads must be at least 1, not {threads}"
    os.environ["RAYON_NUM_THREADS"] = str(threads)
    running = lycaon.ckks_threads()
    if running != threads:
        return f"the worker pool had already started with {running} threads; --threads {threads} came too late"
    return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="lycaon", description="Homomorphic encryption for private inference.")
    parser.add_argument("--version", action="version", version=f"lycaon {lycaon.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("selfcheck", help="generate keys, encrypt, rotate, multiply, decrypt and verify, with timings")
    check.add_argument("--n", type=int, default=8192, help="ring degree (default 8192)")
    bench = sub.add_parser("bench", help="benchmarks against peer libraries")
    bench_sub = bench.add_subparsers(dest="suite", required=True)
    bfv = bench_sub.add_parser("bfv", help="BFV operations, Lycaon and SEAL in one run")
    bfv.add_argument("--json", metavar="FILE", help="write the rows as JSON")
    bfv.add_argument("--reps", type=int, default=20, help="timed runs per operation (median; default 20)")
    bfv.add_argument("--n", type=int, nargs="+", default=[4096, 8192], help="ring degrees (4096 and/or 8192)")
    ckks = bench_sub.add_parser("ckks", help="CKKS operations and bootstrapping, Lycaon, SEAL and Lattigo in one run")
    ckks.add_argument("--json", metavar="FILE", help="write the records as JSON")
    ckks.add_argument("--reps", type=int, default=5, help="timed runs per operation (median; default 5)")
    ckks.add_argument("--logn", type=int, nargs="+", default=[14, 16], choices=[14, 16], help="ring degrees as log2 (default: 14 16)")
    ckks.add_argument("--no-peer", action="store_true", help="skip SEAL and Lattigo")
    ckks.add_argument("--bootstrap", action=argparse.BooleanOptionalAction, default=False,
                      help="also one logN = 16 bootstrapping per library (off by default: Lattigo's keys take ~17 GB, Lycaon's ~9 GB; run one at a time)")
    ckks.add_argument("--bootstrap-only", action="store_true", help="only the logN = 16 bootstrapping (implies --bootstrap)")
    ckks.add_argument("--threads", type=int, help="Lycaon's threads and Lattigo's GOMAXPROCS (default: the CPU count)")
    gpu = bench_sub.add_parser("gpu", help="the CUDA backend's kernels against the CPU, bit-exact check included (says why when there is no GPU)")
    gpu.add_argument("--json", metavar="FILE", help="write the result as JSON ({\"gpu\": null, \"reason\": ...} without a GPU)")
    gpu.add_argument("--logn", type=int, default=16, help="ring degree as log2 (default 16)")
    gpu.add_argument("--limbs", type=int, default=24, help="RNS limbs (default 24)")
    gpu.add_argument("--reps", type=int, default=5, help="timed runs per kernel (median; default 5)")
    gpu.add_argument("--device", type=int, default=0, help="CUDA device ordinal (default 0)")
    lin = bench_sub.add_parser("linear", help="encrypted convolutions: every algorithm, and SPU CHEETAH on ResNet-20's layers")
    lin.add_argument("--json", metavar="FILE", help="write the records as JSON")
    lin.add_argument("--reps", type=int, default=1, help="server evaluations per layer (median; default 1)")
    lin.add_argument("--layers", choices=["all", "paper", "resnet20"], default="all", help="001's Tables 2-4, ResNet-20's layers, or both")
    lin.add_argument("--no-peer", action="store_true", help="skip SPU")
    mpc = bench_sub.add_parser("mpc", help="two-party ReLU, truncation and truncate+ReLU on Z_2^64, Z_2^37 and Z_p with IKNP and silent OT, and SPU CHEETAH on the same")
    mpc.add_argument("--json", metavar="FILE", help="write the records as JSON")
    mpc.add_argument("--reps", type=int, default=3, help="runs per protocol in one session (mean; default 3)")
    mpc.add_argument("--large", action="store_true", help="also 2^20 elements")
    mpc.add_argument("--no-peer", action="store_true", help="skip SPU")
    mpc.add_argument("--bandwidth", type=float, metavar="MB_S", help="model Lycaon's link at this many MB/s (e.g. 9, 384); no SPU ratios then")
    mpc.add_argument("--latency-ms", type=float, default=0.0, help="one-way delay of the modelled link (e.g. 50, 0.3)")
    mpc.add_argument("--threads", type=int, metavar="N", help="worker threads per party, each party its own pool (1: single-threaded parties); default: both share the process's")
    fhe_b = bench_sub.add_parser("fhe", help="FHE-mode private inference: Orion's MLP and LeNet-5 through Lycaon and Orion in one run, key memory per keyset strategy, ResNet-20's status")
    fhe_b.add_argument("--json", metavar="FILE", help="write the records as JSON")
    fhe_b.add_argument("--images", type=int, default=2, help="bundled MNIST test images per network (default 2)")
    fhe_b.add_argument("--models", nargs="+", default=["mlp", "lenet5", "resnet20"], choices=["mlp", "lenet5", "resnet20", "resnet20-relu"],
                       help="resnet20: AESPA activations; resnet20-relu: the reference ReLU ResNet-20 through the composite minimax ReLU (~20 min an image)")
    fhe_b.add_argument("--resnet20-images", type=int, default=1, help="CIFAR-10 test images for ResNet-20 (default 1; AESPA: about 17 GB, keys in 1 minute, then 8 minutes an image; resnet20-relu: 19 minutes an image)")
    fhe_b.add_argument("--resnet20-first", type=int, default=0, metavar="K", help="skip the first K images of ResNet-20's seeded test sample (runs on several machines or sessions add up)")
    fhe_b.add_argument("--resnet20-log", metavar="FILE", help="append each ResNet-20 image's record to FILE as one JSON line as soon as it is decrypted")
    fhe_b.add_argument("--resnet20-packing", choices=["mpconv", "hyphen", "both"], default="hyphen",
                       help="ResNet-20's convolutions: HyPHEN's changing packing in stage 1 (default), one multiplexed packing throughout (mpconv), or both on each image (an A/B in one process)")
    fhe_b.add_argument("--no-peer", action="store_true", help="skip Orion (it needs the optional orion-fhe package)")
    fhe_b.add_argument("--peer-python", metavar="PATH", help="a Python interpreter that has orion-fhe (default: $LYCAON_ORION_PYTHON, else this one)")
    e2e = bench_sub.add_parser("e2e", help="private inference end to end: ResNet-20 and LeNet-5 against SPU CHEETAH on the lan and wan links, "
                               "where the time goes, concurrent sessions, ResNet-50's bytes")
    e2e.add_argument("--json", metavar="FILE", help="write the records, settings and every part as JSON")
    e2e.add_argument("--models", nargs="+", metavar="NAME", help="ImageNet-size networks end to end instead (resnet50 squeezenet mobilenet_v2 densenet121 vgg16 "
                     "mobilenet_v1): random weights and calibration, each party in its own process, peak RSS, the planner beside each layer")
    e2e.add_argument("--algorithm", action="append", default=[], metavar="NAME",
                     help="with --models: convolutions by this algorithm only (e.g. walsh), each model also run with the conventional packed one (gazelle)")
    e2e.add_argument("--resnet20-images", type=int, default=2, help="CIFAR-10 test images for ResNet-20 (default 2; 0 skips it)")
    e2e.add_argument("--lenet5-images", type=int, default=3, help="MNIST test images for LeNet-5 (default 3; 0 skips it)")
    e2e.add_argument("--no-peer", action="store_true", help="skip SPU (it needs the optional spu package: pip install 'lycaon[bench]')")
    e2e.add_argument("--peer-weights", choices=("secret", "private"), default="secret",
                     help="SPU's weights secret-shared by alice (default) or plaintext at alice (Priv2k, Cheetah's setting)")
    e2e.add_argument("--concurrency-model", choices=("auto", "resnet20", "lenet5", "none"), default="auto",
                     help="model for the 1/4/10-session latency study (auto: ResNet-20 if ten of its sessions take at most 3 minutes, else LeNet-5)")
    e2e.add_argument("--no-resnet50", action="store_true", help="skip ResNet-50's planned bytes")
    e2e.add_argument("--flood-bits", type=float, default=40.0, help="statistical security of the server's noise flooding (default 40)")
    e2e.add_argument("--faithful-truncation", action="store_true", help="Lycaon truncates with an error of up to one unit (fewer rounds) instead of exactly")
    e2e.add_argument("--threads", type=int, metavar="N", help="worker threads of each Lycaon process (each party's, in --models runs; 1: single-threaded parties; default: the cores)")
    models = sub.add_parser("models", help="built-in models and their measured accuracy")
    models.add_argument("--json", metavar="FILE")
    inspect = sub.add_parser("inspect", help="layers, shapes, parameters and MACs of a model")
    inspect.add_argument("model", help="an ONNX file or a built-in model (resnet20-reference, ...)")
    inspect.add_argument("--json", metavar="FILE")
    quant = sub.add_parser("quantize", help="fixed-point twin of a model: float vs fixed-point accuracy on CIFAR-10")
    quant.add_argument("model")
    quant.add_argument("--calib", type=int, default=256, help="calibration images from the training set")
    quant.add_argument("--eval", type=int, default=10000, help="test images to evaluate (spread over the set)")
    quant.add_argument("--plaintext-bits", type=int, default=37, help="bits of the plaintext modulus the accumulators must fit")
    quant.add_argument("--json", metavar="FILE")
    simulate = sub.add_parser("simulate", help="packings, dataflows and accelerators of 000 (Hyena) and 003 (Cheetah): latency, energy, operation counts")
    simulate.add_argument("--model", nargs="+", default=[], metavar="NAME|FILE",
                          help="built-in networks (resnet20, resnet50, mobilenetv2, mobilenetv1, vgg16, alexnet, gnmt, hepack-resnet50, ...) or layer files (JSON, MAESTRO .m)")
    simulate.add_argument("--packing", default="all", metavar="ALL|NAME", help="all (default) or one of lola, channel, gala, c2pc, a+w, hyena, batchwise, batchwise+, hyena+")
    simulate.add_argument("--arch", default="hyena", metavar="hyena|f1|FILE.toml", help="accelerator: hyena (000 Table 4, default), f1, or a TOML file (template: lycaon.simulate.arch_toml())")
    simulate.add_argument("--batch", type=int, default=1, help="images per inference (default 1)")
    simulate.add_argument("--json", metavar="FILE", help="write the results as JSON: a list of {model, packing, latency_s, energy_j, rotations, ...} (with --reproduce alone: the reproduction rows)")
    simulate.add_argument("--html", metavar="FILE", help="write an HTML report: comparison charts, the batch study of the first model, the reproduction table, and the sweep with --sweep")
    simulate.add_argument("--reproduce", action="store_true", help="the reproduction table against 000 and 003 (paper, ours, deviation, explanation)")
    simulate.add_argument("--sweep", action="store_true", help="003's accelerator sweep for each model: PEs x lanes, Pareto fronts of latency against area and power, Table VI")
    plan = sub.add_parser("plan", help="what private inference of a model will cost: per-layer parameters, algorithms, noise, latency, bytes, keys")
    plan.add_argument("model", help="built-in model (see lycaon models) or a model file")
    plan.add_argument("--mode", choices=("hybrid", "fhe", "compare"), default="hybrid", help="hybrid (HE + two-party, default), fhe (CKKS with bootstrapping), or both side by side")
    plan.add_argument("--link", default="lan", metavar="2gbps|lan|wan|BW,DELAY", help="network link, e.g. wan or 100mbps,10ms (default lan: 2 Gbps)")
    plan.add_argument("--failure-probability", type=float, default=2.0 ** -40, help="decryption-failure probability the noise margin is taken at (default 2^-40)")
    plan.add_argument("--reserve-bits", type=float, default=0.0, help="noise budget every layer must keep beyond zero (default 0)")
    plan.add_argument("--algorithm", action="append", default=[], metavar="NAME", help="restrict the hybrid search to these algorithms (repeatable)")
    plan.add_argument("--flood-bits", type=float, default=0.0,
                      help="leave room for noise flooding of this statistical security (0: bare layers; lycaon serve floods at 40, so plan with 40 for serve --plan)")
    plan.add_argument("--json", metavar="FILE", help="write the plan as JSON (what lycaon serve executes)")
    plan.add_argument("--html", metavar="FILE", help="write a self-contained HTML report with charts")
    serve = sub.add_parser("serve", help="serve private inference of a model (hybrid mode: HE linear layers, two-party ReLU and truncation)")
    serve.add_argument("model", help="built-in model (lenet5-mnist, resnet20-cifar10) or a model file; with --mode fhe also cnn-square, "
                       "resnet20 (trained AESPA quadratics, bootstrapping) or resnet20-relu (composite minimax ReLU)")
    serve.add_argument("--threads", type=int, metavar="N", help="worker threads of this server, for HE and two-party work alike (default: the cores)")
    serve.add_argument("--mode", choices=("hybrid", "fhe"), default="hybrid", help="hybrid (default) or fhe (the whole network under CKKS; quadratic activations)")
    serve.add_argument("--port", type=int, default=None, help="TCP port (default 7451 hybrid, 7452 fhe; 0: any free port)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)")
    serve.add_argument("--plan", metavar="PLAN.json", help="a plan from lycaon plan --json (default: plan here for --link)")
    serve.add_argument("--reveal", choices=("logits", "label"), default="logits", help="what clients learn: the logits (default) or only the label")
    serve.add_argument("--max-sessions", type=int, default=None, help="clients served at once (default 4; fhe ResNet-20: 1, ~10 GB of keys a session)")
    serve.add_argument("--link", default="lan", metavar="lan|wan|BW,DELAY", help="link the plan is tuned for (default lan)")
    serve.add_argument("--flood-bits", type=float, default=40.0, help="statistical security of the noise flooding the server's ciphertexts (default 40)")
    serve.add_argument("--faithful-truncation", action="store_true", help="truncate with an error of up to one unit (fewer rounds) instead of exactly")
    serve.add_argument("--calibration", metavar="DATA", help="data the quantiser takes its scales from: a .npy/.npz of model-ready float tensors (N, C, H, W) "
                       "or a folder of images (with --preprocess or --resize/--crop/--mean/--std); required unless the model is a bundled MNIST/CIFAR-10 one")
    serve.add_argument("--calibration-images", type=int, default=16, metavar="N", help="calibration samples used, spread over the data (default 16)")
    serve.add_argument("--labels", metavar="FILE", help="class names: a text file (one per line) or a JSON list; sent to clients")
    serve.add_argument("--preprocess", metavar="JSON|FILE", help='how images become model inputs, e.g. {"resize": 256, "crop": 224, "mean": [0.485, 0.456, 0.406], '
                       '"std": [0.229, 0.224, 0.225], "scale": 255, "channel_order": "rgb"}; published to clients')
    serve.add_argument("--resize", type=int, nargs="+", metavar="S", help="resize the shorter side to S, or to exactly H W")
    serve.add_argument("--crop", type=int, nargs="+", metavar="S", help="centre crop to S x S, or H W")
    serve.add_argument("--mean", type=float, nargs="+", help="per-channel mean (after dividing by --scale)")
    serve.add_argument("--std", type=float, nargs="+", help="per-channel standard deviation")
    serve.add_argument("--scale", type=float, help="divide pixel values by this first (default 255)")
    serve.add_argument("--channel-order", choices=("rgb", "bgr", "gray"), help="channel order of the model's input (default rgb)")
    serve.add_argument("--random-weights", type=int, metavar="SEED", help="benchmarks only: give a built-in architecture (resnet50, squeezenet, ...) random weights")
    infer = sub.add_parser("infer", help="private inference of images on a lycaon server")
    infer.add_argument("--server", required=True, metavar="HOST:PORT", help="the server's address (lycaon serve prints it)")
    infer.add_argument("--mode", choices=("hybrid", "fhe"), default="hybrid", help="the server's mode (default hybrid)")
    infer.add_argument("images", nargs="+", metavar="IMAGE", help=".npy/.npz arrays (float model inputs (C, H, W) or (N, C, H, W), or uint8 raw images), PNG/JPEG files "
                       "(preprocessed as the server's metadata says), "
                       "or bundled:K for the K-th bundled test image of the server's data set")
    infer.add_argument("--no-layers", action="store_true", help="skip the per-layer tables")
    infer.add_argument("--link", default="none", metavar="none|lan|wan|BW,DELAY", help="emulate this link on what the client sends and price the network time (default none)")
    infer.add_argument("--json", metavar="FILE", help="write the results as JSON")
    infer.add_argument("--threads", type=int, metavar="N", help="worker threads of this client (default: the cores)")
    demo = sub.add_parser("demo", help="private inference end to end on this machine: a server in-process, bundled test images, next to the plaintext model")
    demo.add_argument("--mode", choices=("hybrid", "fhe"), default="hybrid", help="hybrid (default: BFV + two-party ReLU) or fhe (the whole network under CKKS)")
    demo.add_argument("--model", default=None, metavar="NAME", help="hybrid: lenet5 (MNIST, default), resnet20 (CIFAR-10) or a model name; "
                      "fhe: cnn-square (CIFAR-10, default), resnet20 (trained AESPA quadratics, bootstrapping; ~16 GiB, ~8 min an image), "
                      "resnet20-relu (composite minimax ReLU; ~20 min an image) or a model with quadratic activations")
    demo.add_argument("--images", type=int, default=10, help="bundled test images to classify (default 10)")
    demo.add_argument("--link", choices=("lan", "wan"), default="lan", help="link to plan for and emulate (default lan)")
    demo.add_argument("--flood-bits", type=float, default=40.0, help="statistical security of the server's noise flooding (default 40)")
    demo.add_argument("--faithful-truncation", action="store_true", help="truncate with an error of up to one unit (fewer rounds) instead of exactly")
    demo.add_argument("--json", metavar="FILE", help="write the summary, per image and per layer, as JSON")
    for command, reason in NOT_BUILT.items():
        later = sub.add_parser(command, help=f"not built yet ({reason})")
        later.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.command in ("serve", "infer") or (args.command, getattr(args, "suite", None)) == ("bench", "e2e"):
        problem = _set_threads(getattr(args, "threads", None))
        if problem:
            print(f"lycaon {args.command}: {problem}", file=sys.stderr)
            return 2
    if args.command in NOT_BUILT:
        print(f"lycaon {args.command}: not built yet: {NOT_BUILT[args.command]}", file=sys.stderr)
        return 2
    try:
        if args.command == "selfcheck":
            return _selfcheck(args.n)
        if args.command == "models":
            return _models(args.json)
        if args.command == "inspect":
            return _inspect(args.model, args.json)
        if args.command == "quantize":
            return _quantize(args.model, args.calib, args.eval, args.plaintext_bits, args.json)
        if args.command == "plan":
            return _plan(args.model, args.mode, args.link, args.json, args.html, args.failure_probability, args.reserve_bits, args.algorithm, args.flood_bits)
        if args.command == "serve" and args.mode == "fhe":
            return _serve_fhe(args.model, 7452 if args.port is None else args.port, args.host, args.max_sessions)
        if args.command == "infer" and args.mode == "fhe":
            return _infer_fhe(args.server, args.images, args.json)
        if args.command == "serve":
            return _serve(args.model, 7451 if args.port is None else args.port, args.host, args.plan, args.reveal, 4 if args.max_sessions is None else args.max_sessions,
                          args.link, args.flood_bits, not args.faithful_truncation, calibration=args.calibration, preprocess=_preprocess_spec(args), labels=args.labels,
                          calibration_images=args.calibration_images, random_weights=args.random_weights)
        if args.command == "infer":
            return _infer(args.server, args.images, args.json, not args.no_layers, args.link)
        if args.command == "demo":
            return _demo(args.mode, args.model, args.images, args.link, args.json, args.flood_bits, not args.faithful_truncation)
        if args.command == "simulate":
            return _simulate(args.model, args.packing, args.arch, args.batch, args.json, args.html, args.reproduce, args.sweep)
        if args.command == "bench" and args.suite == "bfv":
            from lycaon.bench import bfv as bench_bfv  # noqa: PLC0415

            bench_bfv.run(args.n, args.reps, args.json)
            return 0
        if args.command == "bench" and args.suite == "ckks":
            from lycaon.bench import ckks as bench_ckks  # noqa: PLC0415

            bench_ckks.run(args.logn, args.reps, args.json, peer=not args.no_peer, bootstrap=args.bootstrap, threads=args.threads,
                           bootstrap_only=args.bootstrap_only)
            return 0
        if args.command == "bench" and args.suite == "gpu":
            from lycaon.bench import gpu as bench_gpu  # noqa: PLC0415

            bench_gpu.run(args.json, args.logn, args.limbs, args.reps, args.device)
            return 0
        if args.command == "bench" and args.suite == "linear":
            from lycaon.bench import linear as bench_linear  # noqa: PLC0415

            layers = {"all": None, "paper": bench_linear.PAPER_LAYERS, "resnet20": bench_linear.RESNET20_LAYERS}[args.layers]
            bench_linear.run(layers, args.reps, args.json, peer=not args.no_peer)
            return 0
        if args.command == "bench" and args.suite == "fhe":
            from lycaon.bench import fhe as bench_fhe  # noqa: PLC0415

            if args.images < 1:
                raise ValueError("--images must be at least 1")
            if args.resnet20_images < 1 or args.resnet20_first < 0:
                raise ValueError("--resnet20-images must be at least 1 and --resnet20-first at least 0")
            bench_fhe.run(args.models, args.images, args.json, peer=not args.no_peer, peer_python=args.peer_python, resnet20_images=args.resnet20_images,
                          resnet20_first=args.resnet20_first, resnet20_log=args.resnet20_log, resnet20_packing=args.resnet20_packing)
            return 0
        if args.command == "bench" and args.suite == "e2e" and args.models:
            from lycaon.bench import imagenet as bench_imagenet  # noqa: PLC0415

            unknown = sorted(set(args.models) - set(bench_imagenet.MODELS))
            if unknown:
                raise ValueError(f"--models: unknown {', '.join(unknown)} (known: {', '.join(bench_imagenet.MODELS)})")
            bench_imagenet.run(args.models, args.json, algorithms=args.algorithm, compare_packed=bool(args.algorithm))
            return 0
        if args.command == "bench" and args.suite == "e2e":
            from lycaon.bench import e2e as bench_e2e  # noqa: PLC0415

            counts = {"resnet20-cifar10": args.resnet20_images, "lenet5-mnist": args.lenet5_images}
            if any(n < 0 for n in counts.values()) or not any(counts.values()):
                raise ValueError("--resnet20-images and --lenet5-images must be >= 0, and one of them positive")
            concurrency = {"resnet20": "resnet20-cifar10", "lenet5": "lenet5-mnist"}.get(args.concurrency_model, args.concurrency_model)
            bench_e2e.run({m: n for m, n in counts.items() if n}, args.json, peer=not args.no_peer, peer_weights=args.peer_weights, exact_truncation=not args.faithful_truncation,
                          concurrency_model=concurrency, resnet50=not args.no_resnet50, flood_bits=args.flood_bits)
            return 0
        if args.command == "bench" and args.suite == "mpc":
            from lycaon.bench import mpc as bench_mpc  # noqa: PLC0415

            bench_mpc.run((2**16, 2**20) if args.large else (2**16,), args.reps, args.json, peer=not args.no_peer,
                          bandwidth_mb_s=args.bandwidth, latency_ms=args.latency_ms, threads=args.threads)
            return 0
    except BrokenPipeError:
        return 0
    except (lycaon.LycaonError, ValueError, OSError, OverflowError) as exc:
        print(f"lycaon: {exc}", file=sys.stderr)
        return 2
    parser.error("unknown command")
    return 2


if __name__ == "__main__":
    sys.exit(main())
