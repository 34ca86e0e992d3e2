"""``lycaon simulate``: packings, dataflows and accelerators of 000 (Hyena) and 003 (Cheetah)."""

from __future__ import annotations

from typing import Optional, Sequence

import lycaon
from lycaon.cli.output import print_table, si, write_json


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
        print_table(
            f"{first['model']} on {first['arch']}, batch {first['batch']}: linear layers ({len(first['layers'])}), server side",
            ["packing", "latency", "energy", "rotations", "mults", "NTTs", "key switches", "off-chip bytes"],
            [[r["packing"], si(r["latency_s"], "s"), si(r["energy_j"], "J"), r["rotations"], r["mults"], r["ntts"], r["keyswitches"], si(sum(r["bytes"].values()), "B")] for r in rows],
        )
    if results:
        totals = []
        for model in dict.fromkeys(r["model"] for r in results):
            rows = [r for r in results if r["model"] == model]
            fast = min(rows, key=lambda r: r["latency_s"])
            lean = min(rows, key=lambda r: r["energy_j"])
            slow = max(rows, key=lambda r: r["latency_s"])
            totals.append([model, len(rows[0]["layers"]), len(rows), fast["packing"], si(fast["latency_s"], "s"), lean["packing"], si(lean["energy_j"], "J"),
                           f"{slow['latency_s'] / fast['latency_s']:.3g}x ({slow['packing']})" if len(rows) > 1 else "-"])
        print_table("Totals per model (all linear layers)", ["model", "layers", "packings", "fastest", "latency", "least energy", "energy", "fastest vs slowest"], totals)
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
        print_table("Reproduction of 000 (Hyena) and 003 (Cheetah), tolerance 25%", ["paper: figure", "paper", "ours", "deviation", "verdict"], shown)
        for k, text in enumerate(notes, start=1):
            print(f"[{k}] {text}")
    sweeps = []
    for k, model in enumerate(models if sweep else []):
        dse = sim.accelerator_sweep(model, table_vi=(k == 0))
        sweeps.append(dse)
        chosen = dse["chosen"]
        for key, cost in (("pareto_area", "area"), ("pareto_power", "power")):
            print_table(
                f"{dse['model']}: Pareto front of latency against {cost} (003 sweep, {len(dse['points'])} designs, 5 nm)",
                ["PEs x lanes", "latency", "area mm2", "power W", "energy", "lane use", ""],
                [[f"{p['pes']} x {p['lanes']}", si(p["latency_s"], "s"), f"{p['area_mm2']:.1f}", f"{p['power_w']:.2f}", si(p["energy_j"], "J"), f"{p['lane_utilisation']:.2f}",
                  "chosen" if chosen and (p["pes"], p["lanes"]) == (chosen["pes"], chosen["lanes"]) else ""] for p in dse[key]],
            )
        if chosen:
            print(f"chosen: {chosen['pes']} PEs x {chosen['lanes']} lanes ({chosen['why']}): {si(chosen['latency_s'], 's')}, {chosen['area_mm2']:.0f} mm2, {chosen['power_w']:.1f} W")
        if dse.get("table_vi"):
            print_table("003 Table VI: networks on the ResNet-50 design (8 PEs x 512 lanes)", ["network", "latency ms", "paper ms", "increase", "paper", "design", "out CTs/layer", "paper", "K partials/layer", "paper"],
                   [[t["model"], f"{t['latency_ms']:.1f}", f"{t['paper_latency_ms']:.0f}", f"{t['increase']:+.2f}", f"{t['paper_increase']:+.2f}", "x".join(map(str, t["paper_design"])),
                     f"{t['avg_output_cts']:.0f}", f"{t['paper_avg_output_cts']:.0f}", f"{t['avg_partials_k']:.1f}", f"{t['paper_avg_partials_k']:.1f}"] for t in dse["table_vi"]])
    write_json(json_path, results if models else table)
    if html_path:
        batch_rows = sim.batch_study(models[0], arch=arch) if models else None
        sim.write_report(results, html_path, batch=batch_rows or False, sweep=sweeps[0] if sweeps else None, reproduction=table if table is not None else True)
        print(f"wrote {html_path}")
    return 0


def add_parser(sub) -> None:
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


def run(args) -> int:
    return _simulate(args.model, args.packing, args.arch, args.batch, args.json, args.html, args.reproduce, args.sweep)
