"""The ``lycaon`` command."""

from __future__ import annotations

import argparse
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
        encryptor = lycaon.Encryptor(params, public_key=pk, secret_key=keys.secret_key())
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
        ct_y = step("encrypt (secret key, seeded)", lambda: encryptor.encrypt_symmetric(encoder.encode(y)).expand(), y, dec)
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


NOT_BUILT = {
    "serve": "hybrid private inference (client/server protocol) is issue 9; FHE mode is issue 10",
    "infer": "hybrid private inference (client/server protocol) is issue 9; FHE mode is issue 10",
    "demo": "the end-to-end demo needs the protocol of issue 9",
}


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


def _plan(model: str, mode: str, link: str, json_path: Optional[str], html_path: Optional[str], failure_probability: float, reserve_bits: float, algorithms: Sequence[str]) -> int:
    from lycaon import plan as planner  # noqa: PLC0415

    result: dict = {"model": model, "mode": mode}
    if mode in ("hybrid", "compare"):
        hybrid = planner.plan(model, link=link, failure_probability=failure_probability, reserve_bits=reserve_bits, algorithms=algorithms, design_space=bool(html_path))
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
    mpc = bench_sub.add_parser("mpc", help="two-party ReLU and truncation with IKNP and silent OT, and SPU CHEETAH on the same")
    mpc.add_argument("--json", metavar="FILE", help="write the records as JSON")
    mpc.add_argument("--reps", type=int, default=3, help="runs per protocol in one session (mean; default 3)")
    mpc.add_argument("--large", action="store_true", help="also 2^20 elements")
    mpc.add_argument("--no-peer", action="store_true", help="skip SPU")
    mpc.add_argument("--bandwidth", type=float, metavar="MB_S", help="model Lycaon's link at this many MB/s (e.g. 9, 384); no SPU ratios then")
    mpc.add_argument("--latency-ms", type=float, default=0.0, help="one-way delay of the modelled link (e.g. 50, 0.3)")
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
    plan.add_argument("--json", metavar="FILE", help="write the plan as JSON (what lycaon serve executes)")
    plan.add_argument("--html", metavar="FILE", help="write a self-contained HTML report with charts")
    for command, reason in NOT_BUILT.items():
        later = sub.add_parser(command, help=f"not built yet ({reason})")
        later.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
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
            return _plan(args.model, args.mode, args.link, args.json, args.html, args.failure_probability, args.reserve_bits, args.algorithm)
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
        if args.command == "bench" and args.suite == "mpc":
            from lycaon.bench import mpc as bench_mpc  # noqa: PLC0415

            bench_mpc.run((2**16, 2**20) if args.large else (2**16,), args.reps, args.json, peer=not args.no_peer,
                          bandwidth_mb_s=args.bandwidth, latency_ms=args.latency_ms)
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
