"""``lycaon infer``: private inference of images on a Lycaon server, in the hybrid or the FHE mode."""

from __future__ import annotations

import json
from typing import Optional, Sequence

import numpy as np

from lycaon.cli.images import read_images
from lycaon.cli.output import LAYER_COLUMNS, layer_rows, print_table, si, write_json


def _server_mode(server: str) -> str:
    """The mode the server at `server` serves (it says so in its first answer)."""
    from lycaon.hybrid import Client  # noqa: PLC0415

    return Client(server).mode


def _infer_fhe(server: str, images: Sequence[str], json_path: Optional[str]) -> int:
    from rich.console import Console  # noqa: PLC0415
    from rich.progress import Progress  # noqa: PLC0415

    from lycaon.hybrid import Client  # noqa: PLC0415

    shown: dict = {}  # the inference bar, once it exists (the key generation shows a spinner first)

    def on_progress(done: int, total: int, name: str) -> None:
        if shown:
            shown["bar"].update(shown["step"], completed=done, total=total, description=f"server: {name}", visible=True)

    client = Client(server, mode="fhe")
    program = client.program
    names = client.labels or []
    inputs = [item for spec in images for item in read_images(spec, client)]
    with Console(stderr=True).status(f"{server}: making and sending the keys") as status:
        client.on_keys = lambda what: status.update(f"{server}: {what}")
        keys = json.loads(client.fhe_session.keys)
    boot = program["parameters"]["kind"] == "bootstrappable"
    print(f"{server}: {program['name']} in the FHE mode{' with bootstrapping' if boot else ''}; keys made and sent in {si(keys['keys_s'], 's')}: "
          f"{si(keys['upload_bytes'], 'B')} uploaded (seeded), {si(keys['key_bytes'], 'B')} in memory on the server (or on each of its Ray workers)")
    records = []
    with Progress(transient=True) as bar:
        task = bar.add_task("encrypted inference", total=len(inputs))
        shown.update(bar=bar, step=bar.add_task("", total=None, visible=False))
        for name, x, truth in inputs:
            bar.update(task, description=f"{name}: encrypted inference")
            bar.reset(shown["step"], visible=False)
            res = client.infer(x, progress=on_progress)
            one = res.images[0]
            label = res.labels[0]
            title = f"{name}: label {label}" + (f" ({names[label]})" if label < len(names) and names[label] != str(label) else "")
            if truth is not None:
                title += f"; true label {truth} ({'correct' if truth == label else 'wrong'})"
            bar.console.print(f"{title}; {si(one['total_s'], 's')} (client {si(one['client_s'], 's')}, server {si(one['report']['server_s'], 's')}), "
                              f"{si(one['up_bytes'], 'B')} up, {si(one['down_bytes'], 'B')} down")
            records.append({"image": name, "label": label, "true_label": truth, "logits": res.logits[0].tolist(), "total_s": one["total_s"],
                            "client_s": one["client_s"], "server_s": one["report"]["server_s"], "comm_s": one["comm_s"], "up_bytes": one["up_bytes"],
                            "down_bytes": one["down_bytes"], "server": one["report"]})
            bar.advance(task)
    client.close()
    write_json(json_path, {"server": server, "mode": "fhe", "program": program["name"], "bootstrapping": boot, "keys_s": keys["keys_s"],
                            "key_upload_bytes": keys["upload_bytes"], "server_key_bytes": keys["key_bytes"], "results": records})
    return 0


def _infer_one(client, x: np.ndarray, name: str):
    """One private inference with a progress bar over the program's ops."""
    from rich.progress import Progress  # noqa: PLC0415

    with Progress(transient=True) as bar:
        task = bar.add_task(f"{name}: connecting", total=len(client.program["ops"]))

        def progress(done, total, op_name):
            bar.update(task, completed=done, total=total, description=f"{name}: {op_name}")

        return client.infer(x[None], progress=progress)


def _infer(server: str, images: Sequence[str], json_path: Optional[str], show_layers: bool, link: str = "none") -> int:
    from lycaon.hybrid import Client  # noqa: PLC0415

    client = Client(server, link=link)
    program = client.program
    names = client.labels or []
    inputs = [item for spec in images for item in read_images(spec, client)]
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
            print_table("top 5", ["rank", "class", "name", "logit"], [[r + 1, c, names[c] if c < len(names) else "", float(res.logits[0][c])] for r, c in enumerate(res.top5[0])])
        if show_layers:
            print_table(f"{name}: per layer", LAYER_COLUMNS, layer_rows(res.layers))
        print(f"{name}: {si(res.total_s, 's')} (client {si(res.client_s, 's')}, server {si(res.server_s, 's')}, network {si(res.comm_s, 's')}), "
              f"{si(res.bytes, 'B')}, {res.rounds} rounds")
        records.append({"image": name, "label": label, "true_label": truth, "logits": None if res.logits is None else res.logits[0].tolist(),
                        "top5": None if res.top5 is None else res.top5[0], "layers": res.layers, "client_s": res.client_s, "server_s": res.server_s,
                        "comm_s": res.comm_s, "total_s": res.total_s, "bytes": res.bytes, "rounds": res.rounds})
    write_json(json_path, {"server": server, "program": program["name"], "results": records})
    return 0


def add_parser(sub) -> None:
    infer = sub.add_parser("infer", help="private inference of images on a lycaon server")
    infer.add_argument("--server", required=True, metavar="HOST:PORT", help="the server's address (lycaon serve prints it)")
    infer.add_argument("--mode", choices=("hybrid", "fhe"), default=None, help="the mode the server must serve (default: whichever it serves)")
    infer.add_argument("images", nargs="+", metavar="IMAGE", help=".npy/.npz arrays (float model inputs (C, H, W) or (N, C, H, W), or uint8 raw images), PNG/JPEG files "
                       "(preprocessed as the server's metadata says), "
                       "or bundled:K for the K-th bundled test image of the server's data set")
    infer.add_argument("--no-layers", action="store_true", help="skip the per-layer tables")
    infer.add_argument("--link", default="none", metavar="none|lan|wan|BW,DELAY", help="emulate this link on what the client sends and price the network time (default none)")
    infer.add_argument("--json", metavar="FILE", help="write the results as JSON")
    infer.add_argument("--threads", type=int, metavar="N", help="worker threads of this client (default: the cores)")


def run(args) -> int:
    if (args.mode or _server_mode(args.server)) == "fhe":
        return _infer_fhe(args.server, args.images, args.json)
    return _infer(args.server, args.images, args.json, not args.no_layers, args.link)
