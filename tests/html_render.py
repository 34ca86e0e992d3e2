"""Renders an HTML report in headless Chromium and checks what a reader would see: no console
errors or uncaught exceptions, and every chart (``figure.chart``) drawn, not blank.

Any report test can use it (the simulator's, the planner's)::

    from html_render import ChromiumUnavailable, render_check
    try:
        result = render_check("report.html")
    except ChromiumUnavailable as exc:
        pytest.skip(str(exc))
    assert result["ok"], result

It launches ``chromium --headless=new --remote-debugging-port=0`` with a throw-away profile,
reads the DevTools port from the profile's ``DevToolsActivePort`` file, and speaks the Chrome
DevTools Protocol over a websocket (the ``websocket-client`` package, in the ``test`` extra):
it loads the file, records ``Runtime.consoleAPICalled`` (type error), ``Runtime.exceptionThrown``
and ``Log.entryAdded`` (level error), then screenshots each chart's drawing (its ``svg``, ``img``
or ``canvas``; the whole figure when it has none) with ``Page.captureScreenshot`` and a clip, and
counts the pixels that are not near-white (Pillow decodes the PNG; matplotlib depends on it).
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Optional

__all__ = ["ChromiumUnavailable", "find_chromium", "render_check"]

#: Browsers tried in order (Debian's package installs /usr/bin/chromium).
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

#: A channel value below this counts as ink (anti-aliased grey text and light bars included).
INK_THRESHOLD = 235

#: A chart is blank below this fraction of ink pixels (a matplotlib chart with axes, ticks,
#: labels and data has several percent) or below ``MIN_INK_PIXELS``.
MIN_INK_FRACTION = 0.01
MIN_INK_PIXELS = 500


class ChromiumUnavailable(RuntimeError):
    """No Chromium to render with, or it would not start; the message says why (tests skip)."""


def find_chromium() -> Optional[str]:
    """The path of a Chromium-family browser, or None. ``LYCAON_CHROMIUM`` overrides the search."""
    override = os.environ.get("LYCAON_CHROMIUM")
    if override:
        return override if os.path.isfile(override) else None
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


class _Cdp:
    """A minimal Chrome DevTools Protocol client over one websocket: commands with ids, events kept."""

    def __init__(self, url: str, timeout: float):
        import websocket  # noqa: PLC0415  (websocket-client)

        # No Origin header: Chromium refuses DevTools websockets from origins it was not told to allow.
        self.ws = websocket.create_connection(url, timeout=timeout, suppress_origin=True)
        self.timeout = timeout
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def _receive(self, deadline: float) -> Optional[dict[str, Any]]:
        import websocket  # noqa: PLC0415

        self.ws.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            return json.loads(self.ws.recv())
        except websocket.WebSocketTimeoutException:
            return None

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        ident = self.next_id
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            msg = self._receive(deadline)
            if msg is None:
                continue
            if msg.get("id") == ident:
                if "error" in msg:
                    raise RuntimeError(f"DevTools {method} failed: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)
        raise TimeoutError(f"DevTools {method}: no answer in {self.timeout} s")

    def wait_event(self, method: str, timeout: float) -> bool:
        if any(e["method"] == method for e in self.events):
            return True
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = self._receive(deadline)
            if msg is not None and "method" in msg:
                self.events.append(msg)
                if msg["method"] == method:
                    return True
        return False

    def drain(self, seconds: float) -> None:
        """Collects the events that arrive within ``seconds``."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            msg = self._receive(deadline)
            if msg is not None and "method" in msg:
                self.events.append(msg)

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:  # noqa: BLE001  (closing a socket the browser already dropped)
            pass


def _devtools_port(profile: Path, proc: subprocess.Popen, timeout: float) -> int:
    marker = profile / "DevToolsActivePort"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ChromiumUnavailable(f"chromium exited at start (status {proc.returncode})")
        if marker.is_file():
            lines = marker.read_text().split()
            if lines and lines[0].isdigit():
                return int(lines[0])
        time.sleep(0.1)
    raise ChromiumUnavailable(f"chromium did not open a DevTools port within {timeout} s")


def _page_websocket(port: int, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    last: Optional[Exception] = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as resp:
                targets = json.load(resp)
            for t in targets:
                if t.get("type") == "page" and t.get("webSocketDebuggerUrl"):
                    return t["webSocketDebuggerUrl"]
        except OSError as exc:
            last = exc
        time.sleep(0.1)
    raise ChromiumUnavailable(f"chromium opened no page target ({last})")


def _ink(png: bytes) -> tuple[int, int]:
    """(pixels that are not near-white, all pixels) of a PNG."""
    from PIL import Image  # noqa: PLC0415

    image = Image.open(io.BytesIO(png)).convert("RGB")
    # Per channel: 255 where the channel is below the threshold; a pixel is ink if any channel is.
    mask = image.point(lambda v: 255 if v < INK_THRESHOLD else 0)
    r, g, b = mask.split()
    from PIL import ImageChops  # noqa: PLC0415

    any_ink = ImageChops.lighter(ImageChops.lighter(r, g), b)
    ink = any_ink.histogram()[255]
    return ink, image.width * image.height


_CHART_BOXES = """
Array.from(document.querySelectorAll('figure.chart')).map((f, i) => {
  const art = f.querySelector('svg, img, canvas') || f;
  const r = art.getBoundingClientRect();
  return {id: f.id || ('chart ' + (i + 1)), tag: art.tagName.toLowerCase(),
          x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width, height: r.height};
})
"""


def render_check(html_path, *, timeout: float = 60.0, width: int = 1280, height: int = 900, screenshot_dir=None) -> dict[str, Any]:
    """Opens ``html_path`` in headless Chromium and reports what rendered.

    Returns ``{"ok", "charts", "console_errors", "exceptions", "log_errors", "title"}``: ``charts``
    holds one ``{"id", "tag", "width", "height", "ink_pixels", "ink_fraction", "blank"}`` per
    ``figure.chart``; ``ok`` is true when there is at least one chart, none is blank, and there
    were no console errors, exceptions or error log entries. ``screenshot_dir``, if given,
    receives each chart's PNG.

    Raises ``ChromiumUnavailable`` when no browser is installed or it cannot start, and
    ``FileNotFoundError`` when ``html_path`` does not exist.
    """
    path = Path(html_path).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no such report: {path}")
    browser = find_chromium()
    if browser is None:
        raise ChromiumUnavailable("no Chromium found (apt-get install chromium, or set LYCAON_CHROMIUM to a Chromium-family browser)")
    try:
        import websocket  # noqa: F401, PLC0415
    except ImportError:
        raise ChromiumUnavailable("the websocket-client package is missing (pip install websocket-client, or the test extra)") from None
    profile = Path(tempfile.mkdtemp(prefix="lycaon-chromium-"))
    stderr_log = open(profile.parent / f"{profile.name}.stderr", "w+b")  # noqa: SIM115  (closed in finally)
    args = [browser, "--headless=new", "--remote-debugging-port=0", "--no-sandbox", f"--user-data-dir={profile}",
            "--disable-gpu", "--hide-scrollbars", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
            f"--window-size={width},{height}", "about:blank"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=stderr_log)
    cdp: Optional[_Cdp] = None
    try:
        try:
            port = _devtools_port(profile, proc, timeout)
        except ChromiumUnavailable as exc:
            stderr_log.seek(0)
            tail = stderr_log.read().decode(errors="replace").strip().splitlines()[-3:]
            raise ChromiumUnavailable(f"{exc}: {' | '.join(tail)}") from None
        cdp = _Cdp(_page_websocket(port, timeout), timeout)
        for domain in ("Page", "Runtime", "Log"):
            cdp.call(f"{domain}.enable")
        cdp.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        cdp.events.clear()
        cdp.call("Page.navigate", url=path.as_uri())
        if not cdp.wait_event("Page.loadEventFired", timeout):
            raise TimeoutError(f"{path} did not finish loading in {timeout} s")
        cdp.drain(0.3)  # late console output and exceptions
        title = cdp.call("Runtime.evaluate", expression="document.title", returnByValue=True)["result"].get("value", "")
        boxes = cdp.call("Runtime.evaluate", expression=_CHART_BOXES, returnByValue=True)["result"].get("value", [])
        charts = []
        for k, box in enumerate(boxes):
            w, h = int(round(box["width"])), int(round(box["height"]))
            entry = {"id": box["id"], "tag": box["tag"], "width": w, "height": h, "ink_pixels": 0, "ink_fraction": 0.0, "blank": True}
            if w >= 2 and h >= 2:
                shot = cdp.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                                clip={"x": box["x"], "y": box["y"], "width": box["width"], "height": box["height"], "scale": 1})
                png = base64.b64decode(shot["data"])
                if screenshot_dir is not None:
                    Path(screenshot_dir).mkdir(parents=True, exist_ok=True)
                    (Path(screenshot_dir) / f"{k + 1:02d}-{box['id']}.png").write_bytes(png)
                ink, total = _ink(png)
                entry.update(ink_pixels=ink, ink_fraction=ink / max(1, total), blank=ink < MIN_INK_PIXELS or ink / max(1, total) < MIN_INK_FRACTION)
            charts.append(entry)
        cdp.drain(0.2)
        console_errors, exceptions, log_errors = [], [], []
        for e in cdp.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                console_errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
            elif e["method"] == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                exceptions.append(d.get("exception", {}).get("description") or d.get("text", "exception"))
            elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                entry = p["entry"]
                log_errors.append(f"{entry.get('source', '')}: {entry.get('text', '')} {entry.get('url', '')}".strip())
        ok = bool(charts) and not any(c["blank"] for c in charts) and not (console_errors or exceptions or log_errors)
        return {"ok": ok, "title": title, "charts": charts, "console_errors": console_errors, "exceptions": exceptions, "log_errors": log_errors}
    finally:
        if cdp is not None:
            cdp.close()
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        stderr_log.close()
        os.unlink(stderr_log.name)
        shutil.rmtree(profile, ignore_errors=True)
