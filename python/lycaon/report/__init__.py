"""Self-contained HTML reports: tables and matplotlib charts inlined as SVG, so one file opens
anywhere (no network, no JavaScript). ``lycaon simulate --html`` and ``lycaon plan --html``
write them."""

from __future__ import annotations

import html
import io
from typing import Iterable, Mapping, Optional, Sequence

__all__ = ["HtmlReport", "bar_chart", "scatter_chart"]

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1100px;
       color: #222; line-height: 1.45; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; }
p.lead { color: #555; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; }
figcaption { color: #555; font-size: 0.9em; }
"""


class HtmlReport:
    """An HTML document built section by section; :meth:`write` saves it as one file."""

    def __init__(self, title: str, lead: Optional[str] = None):
        self.title = title
        self._parts: list[str] = [f"<h1>{html.escape(title)}</h1>"]
        if lead:
            self._parts.append(f'<p class="lead">{html.escape(lead)}</p>')
        self.chart_count = 0

    def heading(self, text: str) -> None:
        self._parts.append(f"<h2>{html.escape(text)}</h2>")

    def paragraph(self, text: str) -> None:
        self._parts.append(f"<p>{html.escape(text)}</p>")

    def table(self, columns: Sequence[str], rows: Iterable[Sequence[object]], caption: Optional[str] = None) -> None:
        def cell(v: object) -> str:
            if isinstance(v, float):
                return f"{v:.4g}"
            return html.escape(str(v))

        head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
        body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>" for row in rows)
        cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
        self._parts.append(f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")

    def chart(self, figure, caption: str) -> None:
        """Inlines a matplotlib figure as SVG (and closes it)."""
        import matplotlib.pyplot as plt  # noqa: PLC0415

        buf = io.StringIO()
        figure.savefig(buf, format="svg", bbox_inches="tight")
        plt.close(figure)
        svg = buf.getvalue()
        svg = svg[svg.index("<svg"):]  # drop the XML prologue and doctype: not allowed inline
        self.chart_count += 1
        self._parts.append(f'<figure class="chart" id="chart-{self.chart_count}">{svg}<figcaption>{html.escape(caption)}</figcaption></figure>')

    def to_html(self) -> str:
        body = "\n".join(self._parts)
        return f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(self.title)}</title><style>{_STYLE}</style></head><body>\n{body}\n</body></html>\n'

    def write(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_html())


def _pyplot():
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")  # no display needed; SVG output only
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def bar_chart(labels: Sequence[str], series: Mapping[str, Sequence[float]], *, ylabel: str, title: str, stacked: bool = False, log: bool = False):
    """Grouped (or stacked) bars: one group per label, one bar (or segment) per series."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(labels) * (1 if stacked else max(1, len(series) / 2))), 3.8))
    names = list(series)
    width = 0.8 if stacked else 0.8 / max(1, len(names))
    bottom = [0.0] * len(labels)
    for k, name in enumerate(names):
        values = [float(v) for v in series[name]]
        if stacked:
            xs = list(range(len(labels)))
            ax.bar(xs, values, width, bottom=bottom, label=name)
            bottom = [b + v for b, v in zip(bottom, values)]
        else:
            xs = [i - 0.4 + width * (k + 0.5) for i in range(len(labels))]
            ax.bar(xs, values, width, label=name)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=60 if len(labels) > 8 else 0, ha="right" if len(labels) > 8 else "center", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if log:
        ax.set_yscale("log")
    if len(names) > 1:
        ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return fig


def scatter_chart(points: Mapping[str, Sequence[tuple[float, float]]], *, xlabel: str, ylabel: str, title: str, highlight: Optional[tuple[float, float, str]] = None, lines: bool = False, logx: bool = False, logy: bool = False):
    """Scatter of named point sets (a line through each when ``lines``), one point optionally marked."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for name, pts in points.items():
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        if lines:
            ax.plot(xs, ys, marker="o", markersize=3, label=name)
        else:
            ax.scatter(xs, ys, s=10, alpha=0.6, label=name)
    if highlight is not None:
        ax.scatter([highlight[0]], [highlight[1]], s=120, marker="*", color="crimson", zorder=5, label=highlight[2])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig
