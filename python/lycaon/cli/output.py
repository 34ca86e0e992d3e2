"""What the commands print and write: rich tables, quantities with SI prefixes, per-layer rows, JSON files."""

from __future__ import annotations

from typing import Optional, Sequence


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A rich table on the terminal (plain text when output is redirected)."""
    from rich.console import Console  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    table = Table(title=title, title_justify="left")
    for k, col in enumerate(columns):
        table.add_column(col, justify="left" if k == 0 else "right")
    for row in rows:
        table.add_row(*[f"{v:.4f}" if isinstance(v, float) else str(v) for v in row])
    Console(width=140).print(table)


def write_json(path: Optional[str], payload) -> None:
    if path:
        import json  # noqa: PLC0415

        with open(path, "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=2)
        print(f"wrote {path}")


def si(v: float, unit: str) -> str:
    """A value with an SI prefix and four significant digits (1.234 ms, 56.7 mJ)."""
    scales = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n"))
    if unit == "s":
        scales = scales[4:]  # 1234 s, not 1.234 ks
    for scale, prefix in scales:
        if abs(v) >= scale:
            return f"{v / scale:.4g} {prefix}{unit}"
    return f"{v / 1e-9:.4g} n{unit}" if v else f"0 {unit}"


def layer_rows(layers: Sequence[dict], per: int = 1) -> list[list]:
    return [[l.get("name", ""), l.get("op", ""), si(l.get("seconds", 0.0) / per, "s"), si(l.get("client_s", 0.0) / per, "s"), si(l.get("server_s", 0.0) / per, "s"),
             si(l.get("bytes_sent", 0) / per, "B"), si(l.get("bytes_received", 0) / per, "B"), f"{l.get('rounds', 0) / per:g}"] for l in layers]


LAYER_COLUMNS = ["layer", "op", "time", "client", "server", "sent", "received", "rounds"]
