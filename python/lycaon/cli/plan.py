"""``lycaon plan``: what private inference of a model will cost, per layer, in the hybrid and FHE modes."""

from __future__ import annotations

from typing import Optional, Sequence

from lycaon.cli.output import print_table, si, write_json


def _plan(model: str, mode: str, link: str, json_path: Optional[str], html_path: Optional[str], failure_probability: float, reserve_bits: float, algorithms: Sequence[str],
          flood_bits: float = 0.0) -> int:
    from lycaon import plan as planner  # noqa: PLC0415

    result: dict = {"model": model, "mode": mode}
    if mode in ("hybrid", "compare"):
        hybrid = planner.plan(model, link=link, failure_probability=failure_probability, reserve_bits=reserve_bits, algorithms=algorithms, design_space=bool(html_path),
                              flood_bits=flood_bits)
        layers = hybrid["layers"]
        print_table(
            f"{model}: hybrid plan (link {hybrid['link']['name']}, failure probability {failure_probability:.1e})",
            ["layer", "algorithm", "n", "log q", "t", "digits", "noise margin", "rotations", "predicted", "up", "down", "keys"],
            [[l["name"], l["algorithm"], l["params"]["n"], sum(l["params"]["q_bits"]), l["params"]["t_bits"], l["params"]["digits"], f"{l['noise_margin_bits']:.1f}",
              l["rotations"], si(l["predicted_s"], "s"), si(l["bytes_up"], "B"), si(l["bytes_down"], "B"), si(l["key_bytes"], "B")] for l in layers]
            + [["total", "", "", "", "", "", f"{min(l['noise_margin_bits'] for l in layers):.1f} (min)", sum(l["rotations"] for l in layers),
                si(hybrid["predicted_s"], "s"), si(sum(l["bytes_up"] for l in layers), "B"), si(sum(l["bytes_down"] for l in layers), "B"), si(sum(l["key_bytes"] for l in layers), "B")]],
        )
        print(f"per-layer tuning: {hybrid['speedup_vs_single_set']:.2f}x faster than the best single parameter set "
              f"({si(hybrid['single_set_predicted_s'], 's')}); nonlinear layers (ReLU, truncation) run as two-party protocols on top")
        result.update(hybrid)
    if mode in ("fhe", "compare"):
        fhe = planner.plan_fhe(model, link=link)
        rows = [[s["strategy"], s["keys"], si(s["memory_bytes"], "B"), si(s["wire_bytes"], "B"), s["key_switches"], si(s["rotation_s"], "s")] for s in fhe["keysets"]]
        print_table(f"{model}: FHE mode (CKKS logN {fhe['log_n']}, {fhe['bootstraps']} bootstraps, {fhe['rotations']} rotations): rotation keysets",
               ["keyset", "keys", "memory", "upload (seeded)", "key switches", "rotation time"], rows)
        result["fhe"] = fhe
    if mode == "compare":
        cmp = planner.compare(result, result["fhe"])
        print_table(f"{model}: hybrid against FHE on link {link}", ["quantity", "hybrid", "fhe"], [[r["quantity"], r["hybrid"], r["fhe"]] for r in cmp])
        result["comparison"] = cmp
    write_json(json_path, result)
    if html_path:
        planner.write_report(result, html_path)
        print(f"wrote {html_path}")
    return 0


def add_parser(sub) -> None:
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


def run(args) -> int:
    return _plan(args.model, args.mode, args.link, args.json, args.html, args.failure_probability, args.reserve_bits, args.algorithm, args.flood_bits)
