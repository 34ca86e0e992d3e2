"""The packing, dataflow and accelerator simulator from Python: sweeps over models, packings,
architectures and batch sizes, the reproduction tables against ../papers 000 (Hyena, IEEE S&P
2024) and 003 (Cheetah, HPCA 2021), the 003 accelerator design-space exploration, and the HTML
report with the comparison charts.

Every number comes from the Rust simulator (``lycaon-plan``) through JSON and is returned as plain
dicts and lists, so a sweep is a loop and a result is ready for ``json.dump``::

    from lycaon import simulate as sim
    rows = sim.simulate("resnet50")                      # all nine packings on the Hyena accelerator
    fast = min(rows, key=lambda r: r["latency_s"])
    sweep = sim.accelerator_sweep("resnet50")            # 003: PEs x lanes, Pareto fronts, Table VI
    sim.write_report(rows, "resnet50.html", batch=sim.batch_study(), sweep=sweep,
                     reproduction=sim.reproduction())

Models are built-in names (``MODELS``), a JSON file (``{"name", "layers"}`` or a layer list), a
MAESTRO ``.m`` layer file as HEPack-Sim ships them, or the layers themselves. Architectures are
``"hyena"``, ``"f1"`` or a TOML file or text (``arch_toml("hyena")`` is a template). User errors
raise :class:`lycaon.LycaonError` with a message that names the problem.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping, Optional, Sequence, Union

from . import _native
from ._native import LycaonError

__all__ = [
    "MODELS",
    "PACKINGS",
    "BATCH_STUDY_PACKINGS",
    "BATCH_STUDY_SIZES",
    "COMPONENTS",
    "accelerator_sweep",
    "arch_toml",
    "batch_study",
    "reproduction",
    "simulate",
    "write_report",
]

#: Built-in networks. The ``hepack-`` ones are the layer lists of the public HEPack-Sim files
#: (with their quirks), which the paper's figures were computed on; the others are the real networks.
MODELS = (
    "resnet20",
    "resnet50",
    "mobilenetv2",
    "mobilenetv1",
    "vgg16",
    "alexnet",
    "gnmt",
    "hepack-resnet20",
    "hepack-resnet50",
    "hepack-mobilenetv2",
    "hepack-gnmt",
)

#: The packings and dataflows of 000 (Secs. 4-5, Table 2), in the order of its figures.
PACKINGS = ("lola", "channel", "gala", "c2pc", "a+w", "hyena", "batchwise", "batchwise+", "hyena+")

#: Batch sizes of 000's Fig. 9.
BATCH_STUDY_SIZES = (1, 8, 64, 512)

#: The packings of 000's Fig. 9.
BATCH_STUDY_PACKINGS = ("hyena", "hyena+", "batchwise", "batchwise+")

#: Hardware components of the Hyena/F1 models (000 Figs. 7-8), in the JSON's order.
COMPONENTS = ("vmult", "ntt", "automorphism", "registers", "l2", "memory")

ModelLike = Union[str, "os.PathLike[str]", Sequence[Mapping[str, Any]], Mapping[str, Any]]

_MODEL_SUFFIXES = (".json", ".m")


def _looks_like_path(text: str) -> bool:
    return text.endswith(_MODEL_SUFFIXES) or os.sep in text or (os.altsep is not None and os.altsep in text)


def _read(path: str, what: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise LycaonError(f"{what} file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LycaonError(f"cannot read the {what} file {path}: {exc}") from None


def _model_request(model: ModelLike) -> Any:
    """What the JSON entry points take as "model": a name, a layer list, a model object, or the
    text of a MAESTRO file."""
    if isinstance(model, os.PathLike):
        model = os.fspath(model)
    if isinstance(model, str):
        if not os.path.isfile(model) and not _looks_like_path(model):
            return model  # a built-in name; the simulator lists the known ones if it is not
        text = _read(model, "model")
        stem = os.path.splitext(os.path.basename(model))[0]
        stripped = text.lstrip()
        if stripped.startswith(("{", "[")):
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError as exc:
                raise LycaonError(f"model file {model} is not valid JSON: {exc}") from None
            return {"name": stem, "layers": parsed} if isinstance(parsed, list) else parsed
        if "Dimensions" not in text:
            raise LycaonError(f"model file {model} is neither JSON ({{\"name\", \"layers\"}} or a layer list) nor a MAESTRO layer file (no 'Dimensions' line)")
        return text
    if isinstance(model, Mapping):
        return dict(model)
    if isinstance(model, Sequence):
        return [dict(layer) for layer in model]
    raise LycaonError(f"model must be a name, a file or a list of layers, not {type(model).__name__}")


def _arch_request(arch: Union[str, "os.PathLike[str]"]) -> str:
    """A built-in name, or TOML text (read from a file when ``arch`` names one)."""
    arch = os.fspath(arch)
    if arch.strip().lower() in ("hyena", "f1") or "=" in arch:
        return arch
    if os.path.isfile(arch) or arch.endswith(".toml") or _looks_like_path(arch):
        return _read(arch, "architecture")
    return arch  # an unknown name: the simulator says which are known


def _call(fn, *args) -> Any:
    return json.loads(fn(*args))


def simulate(model: ModelLike, packing: str = "all", arch: Union[str, "os.PathLike[str]"] = "hyena", batch: int = 1, *, layers: bool = True) -> list[dict[str, Any]]:
    """Simulates ``model`` under one packing (or ``"all"``) on an accelerator, for ``batch`` images.

    Returns one dict per packing with ``model``, ``packing``, ``arch``, ``batch``, ``latency_s``
    and ``energy_j`` (server side, linear layers, the whole batch), ``rotations``, ``mults``,
    ``shifts``, ``permutations``, ``plaintext_rotations``, ``ntts``, ``keyswitches``, ``bytes``
    (off-chip, per data structure: ``input``, ``weights``, ``psum``, ``keys``),
    ``component_latency_s`` and ``component_energy_j`` (per hardware component, see
    ``COMPONENTS``) and, unless ``layers=False``, ``layers`` with the same per layer.

    Raises ``LycaonError`` for an unknown model, packing or architecture, an unreadable or
    malformed model or TOML file, a batch outside 1..2^20, or a layer a packing cannot hold.
    """
    if isinstance(batch, bool) or not isinstance(batch, int):
        raise LycaonError(f"batch must be an integer, not {batch!r}")
    if batch < 1:
        raise LycaonError(f"invalid batch size {batch}: must be between 1 and 2^20")
    request = {"model": _model_request(model), "packing": packing, "arch": _arch_request(arch), "batch": batch}
    results = _call(_native.simulate_json, json.dumps(request))
    if not layers:
        for r in results:
            r.pop("layers", None)
    return results


def batch_study(model: ModelLike = "hepack-resnet50", batches: Sequence[int] = BATCH_STUDY_SIZES, packings: Sequence[str] = BATCH_STUDY_PACKINGS, arch: Union[str, "os.PathLike[str]"] = "hyena") -> list[dict[str, Any]]:
    """000's Fig. 9: latency and energy of the whole batch for each packing at each batch size
    (by default ResNet-50's HEPack-Sim list, Hyena, Hyena+, BatchWise and BatchWise+ at 1, 8, 64
    and 512 images). Returns the results of :func:`simulate` without per-layer details."""
    out = []
    for b in batches:
        for p in packings:
            out.extend(simulate(model, p, arch, b, layers=False))
    return out


def _unit_of(what: str) -> str:
    tail = what.rsplit(", ", 1)
    return tail[1] if len(tail) == 2 and len(tail[1]) <= 5 else ""


def reproduction() -> list[dict[str, Any]]:
    """Every figure of 000 and 003 the simulator reproduces, beside the paper's value.

    One dict per figure: ``paper_id`` ("000" or "003"), ``figure``, ``paper``, ``ours``,
    ``deviation`` (ours / paper - 1), ``unit``, ``tolerance`` (0.25), ``within_tolerance``,
    ``verdict`` ("within 25%" or "explained deviation") and ``explanation`` (for a deviation,
    the modelling assumption of the paper we cannot recover). 000 rows also give
    ``ours_real_networks`` (the same figure on the real networks rather than HEPack-Sim's layer
    lists); 003 rows give ``documented_deviation`` (the band a deviation is explained for).
    """
    return _reproduction_rows()


def _reproduction_rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for r in _call(_native.reproduction_json):
        rows.append({
            "paper_id": "000",
            "figure": r["figure"],
            "paper": r["paper"],
            "ours": r["ours"],
            "deviation": r["deviation"],
            "unit": r["unit"],
            "tolerance": r["tolerance"],
            "within_tolerance": r["within_tolerance"],
            "verdict": "within 25%" if r["within_tolerance"] else "explained deviation",
            "explanation": r["explanation"],
            "ours_real_networks": r["ours_real_networks"],
        })
    for r in _call(_native.reproduction_003_json):
        rows.append({
            "paper_id": "003",
            "figure": r["what"],
            "paper": r["paper"],
            "ours": r["ours"],
            "deviation": r["deviation"],
            "unit": _unit_of(r["what"]),
            "tolerance": 0.25,
            "within_tolerance": r["within_tolerance"],
            "verdict": "within 25%" if r["within_tolerance"] else "explained deviation",
            "explanation": r["explanation"],
            "documented_deviation": r["documented_deviation"],
        })
    return rows


def arch_toml(name: str = "hyena") -> str:
    """The TOML of a built-in accelerator (``"hyena"`` or ``"f1"``), a template for a custom one."""
    return _native.arch_toml(name)


def accelerator_sweep(model: ModelLike = "resnet50", pes: Optional[Sequence[int]] = None, lanes: Optional[Sequence[int]] = None, *, schedule: str = "partial_aligned", max_n: int = 4096, table_vi: bool = True) -> dict[str, Any]:
    """003's design-space exploration (Secs. VII-VIII): HE-PTune parameters per layer, then every
    accelerator of ``pes`` x ``lanes`` (default: 003's sweep, powers of two, PEs 2-1024, lanes
    4-8192) with latency, area and power in 5 nm.

    Returns ``{"model", "schedule", "layers", "points", "pareto_area", "pareto_power",
    "table_vi", "chosen"}``: the fronts are the designs no other beats in both latency and area
    (power); ``chosen`` is 003's design for the model (Table VI: ResNet-50 8x512, VGG-16 16x256,
    AlexNet 16x128) when the sweep holds it, otherwise the fastest design within 003's envelope
    (545 mm^2 and 30 W in 5 nm; None if no design fits); ``table_vi`` (when asked) is the generality study.

    Raises ``LycaonError`` for an unknown model, a MAESTRO file (give a name or a JSON model),
    zero or empty ranges, or a schedule other than partial_aligned / input_aligned.
    """
    m = _model_request(model)
    if isinstance(m, str) and "Dimensions" in m:
        raise LycaonError("the accelerator sweep takes a built-in model or a JSON model file, not a MAESTRO layer file")
    if schedule not in ("partial_aligned", "input_aligned"):
        raise LycaonError(f"unknown schedule {schedule!r}; known: partial_aligned (Sched-PA), input_aligned (Sched-IA)")
    request: dict[str, Any] = {"model": m, "schedule": schedule, "max_n": max_n, "table_vi": table_vi}
    for key, values in (("pes", pes), ("lanes", lanes)):
        if values is not None:
            values = [int(v) for v in values]
            if not values or min(values) < 1:
                raise LycaonError(f"{key} must be a non-empty list of positive integers, got {values}")
            request[key] = values
    out = _call(_native.dse_json, json.dumps(request))
    out["chosen"] = _chosen_design(out, model if isinstance(model, str) else None)
    return out


# 003's designs per network (Table VI's "PEs-Lanes" column).
_PAPER_DESIGNS = {"resnet50": (8, 512), "vgg16": (16, 256), "alexnet": (16, 128)}
# 003's ResNet-50 design in 5 nm (abstract, Sec. VIII-B3): the envelope other networks' designs are chosen in.
_BUDGET_MM2, _BUDGET_W = 545.0, 30.0


def _chosen_design(sweep: Mapping[str, Any], name: Optional[str]) -> Optional[dict[str, Any]]:
    points = sweep.get("points") or []
    key = "".join(c for c in (name or sweep.get("model", "")).lower() if c not in "-_ ")
    design = _PAPER_DESIGNS.get(key)
    if design is not None:
        for p in points:
            if (p["pes"], p["lanes"]) == design:
                return dict(p, why="003's design for this network (Table VI)")
    budget = [p for p in points if p["area_mm2"] <= _BUDGET_MM2 and p["power_w"] <= _BUDGET_W]
    if not budget:
        return None
    best = min(budget, key=lambda p: (p["latency_s"], p["area_mm2"]))
    return dict(best, why=f"the fastest design within 003's envelope of {_BUDGET_MM2:.0f} mm^2 and {_BUDGET_W:.0f} W")


# ---------------------------------------------------------------------------------------------
# The HTML report


def _fmt_seconds(s: float) -> str:
    return f"{s * 1e3:.4g} ms" if s < 1 else f"{s:.4g} s"


def _models_in(results: Sequence[Mapping[str, Any]]) -> list[str]:
    seen: list[str] = []
    for r in results:
        if r["model"] not in seen:
            seen.append(r["model"])
    return seen


def write_report(results: Sequence[Mapping[str, Any]], path: Union[str, "os.PathLike[str]"], *, batch: Union[bool, Sequence[Mapping[str, Any]], None] = True, sweep: Optional[Mapping[str, Any]] = None, reproduction: Union[bool, Sequence[Mapping[str, Any]], None] = True, title: Optional[str] = None) -> str:
    """Writes one self-contained HTML file comparing the packings of ``results`` (from
    :func:`simulate`, one or several models): latency and energy per packing (log scale), the
    per-component breakdown of busy time and energy per packing (stacked, like 000's Figs. 7-8),
    rotations, multiplications, NTTs and key switches per packing, and a table of it all. With
    ``batch`` (from :func:`batch_study`; ``True``, the default, runs 000's Fig. 9 study, False
    leaves it out) it adds the batch study; with ``sweep`` (from :func:`accelerator_sweep`) 003's
    Pareto fronts of latency against area and power with the chosen design marked, and Table VI;
    with ``reproduction`` (from :func:`reproduction`; ``True``, the default, computes it) the
    table of paper / ours / deviation / explanation. Returns the path written.
    """
    from .report import HtmlReport, bar_chart, scatter_chart  # noqa: PLC0415  (matplotlib is slow to import)

    if not results and not sweep and not reproduction:
        raise LycaonError("nothing to report: give simulation results, a sweep or the reproduction table")
    if batch is True:
        batch = batch_study()
    if reproduction is True:
        reproduction = _reproduction_rows()
    models = _models_in(results)
    archs = sorted({r["arch"] for r in results})
    report = HtmlReport(
        title or (f"Lycaon simulator: {', '.join(models)}" if models else "Lycaon simulator"),
        "Server-side latency and energy of the linear layers under the packings and dataflows of 000 (Hyena), "
        f"on the {', '.join(archs) or 'Hyena'} accelerator model; every number comes from lycaon's simulator (lycaon-plan).",
    )
    for model in models:
        rows = [r for r in results if r["model"] == model]
        packings = [r["packing"] for r in rows]
        arch, batch_size = rows[0]["arch"], rows[0]["batch"]
        report.heading(f"{model} on {arch}, batch {batch_size}")
        report.table(
            ["packing", "latency", "energy (J)", "rotations", "mults", "NTTs", "key switches", "off-chip MB"],
            [[r["packing"], _fmt_seconds(r["latency_s"]), r["energy_j"], r["rotations"], r["mults"], r["ntts"], r["keyswitches"], sum(r["bytes"].values()) / 1e6] for r in rows],
        )
        report.chart(
            bar_chart(packings, {"latency (ms)": [r["latency_s"] * 1e3 for r in rows]}, ylabel="latency (ms)", title=f"{model}: latency per packing", log=True),
            f"{model}: server latency of the linear layers per packing (log scale).",
        )
        report.chart(
            bar_chart(packings, {"energy (J)": [r["energy_j"] for r in rows]}, ylabel="energy (J)", title=f"{model}: energy per packing", log=True),
            f"{model}: server energy of the linear layers per packing (log scale).",
        )
        report.chart(
            bar_chart(packings, {c: [r["component_latency_s"][c] * 1e3 for r in rows] for c in COMPONENTS}, ylabel="busy time (ms)", title=f"{model}: busy time per component", stacked=True, log=True),
            f"{model}: time each hardware component is busy, per packing (stacked, log scale; components overlap in the pipeline, so the stack exceeds the latency), like 000's Fig. 7.",
        )
        report.chart(
            bar_chart(packings, {c: [r["component_energy_j"][c] for r in rows] for c in COMPONENTS}, ylabel="energy (J)", title=f"{model}: energy per component", stacked=True, log=True),
            f"{model}: energy per hardware component, per packing (stacked, log scale), like 000's Fig. 8.",
        )
        report.chart(
            bar_chart(packings, {"rotations": [r["rotations"] for r in rows], "mults": [r["mults"] for r in rows], "NTTs": [r["ntts"] for r in rows], "key switches": [r["keyswitches"] for r in rows]},
                      ylabel="operations", title=f"{model}: operations per packing", log=True),
            f"{model}: rotations, ciphertext-plaintext multiplications, NTTs and key switches per packing (log scale).",
        )
    if batch:
        sizes = sorted({r["batch"] for r in batch})
        packs = list(dict.fromkeys(r["packing"] for r in batch))
        get = {(r["packing"], r["batch"]): r for r in batch}
        label = [f"batch {b}" for b in sizes]
        report.heading(f"Batch study ({batch[0]['model']}, 000 Fig. 9)")
        report.paragraph("Latency and energy of the whole batch. Hyena runs the images one after another; BatchWise packs one value of many images per ciphertext; the + variants also pack output channels (BatchWise+) or batches first (Hyena+).")
        report.table(["batch"] + [f"{p} latency" for p in packs] + [f"{p} energy (J)" for p in packs],
                     [[b] + [_fmt_seconds(get[(p, b)]["latency_s"]) for p in packs] + [get[(p, b)]["energy_j"] for p in packs] for b in sizes])
        report.chart(bar_chart(label, {p: [get[(p, b)]["latency_s"] * 1e3 for b in sizes] for p in packs}, ylabel="latency of the batch (ms)", title="Batch study: latency", log=True),
                     "Latency of the whole batch per packing and batch size (log scale), like 000's Fig. 9.")
        report.chart(bar_chart(label, {p: [get[(p, b)]["energy_j"] for b in sizes] for p in packs}, ylabel="energy of the batch (J)", title="Batch study: energy", log=True),
                     "Energy of the whole batch per packing and batch size (log scale), like 000's Fig. 9.")
    if sweep:
        _sweep_section(report, sweep, scatter_chart)
    if reproduction:
        report.heading("Reproduction of the papers' figures")
        report.paragraph("Each figure of 000 and 003 beside ours: deviation = ours / paper - 1; a row outside 25% names the modelling assumption of the paper that we cannot recover.")
        report.table(
            ["paper", "figure", "paper value", "ours", "deviation", "verdict", "explanation"],
            [[r["paper_id"], r["figure"], r["paper"], r["ours"], f"{100 * r['deviation']:+.1f}%", r["verdict"], r["explanation"]] for r in reproduction],
        )
    path = os.fspath(path)
    try:
        report.write(path)
    except OSError as exc:
        raise LycaonError(f"cannot write the report {path}: {exc}") from None
    return path


def _sweep_section(report, sweep: Mapping[str, Any], scatter_chart) -> None:
    points, chosen = sweep["points"], sweep.get("chosen")
    report.heading(f"Accelerator design space ({sweep['model']}, 003 Secs. VII-VIII)")
    report.paragraph(f"{len(points)} designs of PEs x lanes (output-stationary, 5 nm scaling, schedule {sweep['schedule']}); "
                     "the Pareto fronts hold the designs no other beats in both latency and area (power)."
                     + (f" Marked: {chosen['pes']} PEs x {chosen['lanes']} lanes, {chosen['why']}." if chosen else ""))
    for key, cost, unit in (("pareto_area", "area_mm2", "area (mm², 5 nm)"), ("pareto_power", "power_w", "power (W, 5 nm)")):
        front = sweep[key]
        mark = (chosen[cost], chosen["latency_s"] * 1e3, f"{chosen['pes']} x {chosen['lanes']}") if chosen else None
        report.chart(
            scatter_chart(
                {"all designs": [(p[cost], p["latency_s"] * 1e3) for p in points]},
                xlabel=unit, ylabel="latency (ms)", title=f"{sweep['model']}: latency against {unit.split(' ')[0]}",
                highlight=mark, logx=True, logy=True, line_series={"Pareto front": [(p[cost], p["latency_s"] * 1e3) for p in front]},
            ),
            f"{sweep['model']}: latency against {unit} of every design, the Pareto front as a line, the chosen design starred (log-log), like 003's Fig. 11a.",
        )
        report.table(["PEs", "lanes", "latency (ms)", "area (mm²)", "power (W)", "energy (J)", "lane utilisation"],
                     [[p["pes"], p["lanes"], p["latency_s"] * 1e3, p["area_mm2"], p["power_w"], p["energy_j"], p["lane_utilisation"]] for p in front],
                     caption=f"Pareto front, latency against {unit}")
    if sweep.get("table_vi"):
        report.heading("Generality study (003 Table VI)")
        report.table(
            ["network", "latency on 8x512 (ms)", "paper (ms)", "increase over own design", "paper increase", "paper design", "our best split", "out CTs / layer", "paper", "K partials / layer", "paper"],
            [[t["model"], t["latency_ms"], t["paper_latency_ms"], t["increase"], t["paper_increase"], "x".join(map(str, t["paper_design"])), "x".join(map(str, t["our_best_split"])),
              t["avg_output_cts"], t["paper_avg_output_cts"], t["avg_partials_k"], t["paper_avg_partials_k"]] for t in sweep["table_vi"]],
        )

