"""Drive Debian's headless Chromium over the DevTools pipe: load a local page, collect its console errors and
uncaught exceptions, read its rendered text, take a screenshot.

Used by the report tests and `make report-screenshots`; the reports themselves never need a browser.  The
DevTools protocol goes over `--remote-debugging-pipe` (the browser reads commands on fd 3 and writes replies on
fd 4, each a JSON object ended by a NUL byte), so no port is opened and nothing beyond the standard library is
needed.  The flags keep Chromium off the network (this machine's, and CI's, is closed: without
--disable-background-networking and --disable-component-update it keeps trying to reach Google's hosts).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
                  "--font-render-hinting=none")
CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")


def find_chromium() -> str | None:
    """The Chromium binary: $PLACEMENT_CHROMIUM, Debian's /usr/bin/chromium, or one on PATH; None if absent."""
    given = os.environ.get("PLACEMENT_CHROMIUM")
    if given:
        return given if os.access(given, os.X_OK) else None
    for path in CANDIDATES:
        if os.access(path, os.X_OK):
            return path
    return shutil.which("chromium")


@dataclass
class PageResult:
    text: str
    """document.body.innerText once the load event fired: what a reader sees, not the markup."""
    errors: list[str] = field(default_factory=list)
    """Uncaught exceptions, console.error/assert calls and browser log entries of level error (a failed load of
    a resource, a blocked request), each as one line."""
    screenshot_png: bytes | None = None
    value: object = None
    """What `load_page`'s `evaluate` expression returned (JSON-able), None without one."""


class ChromiumError(RuntimeError):
    pass


class _Pipe:
    def __init__(self, proc: subprocess.Popen, write_fd: int, read_fd: int) -> None:
        self.proc, self.write_fd, self.read_fd = proc, write_fd, read_fd
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout_s: float = 30.0) -> dict:
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session is not None:
            msg["sessionId"] = session
        os.write(self.write_fd, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout_s
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise ChromiumError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, timeout_s: float = 30.0) -> dict:
        for i, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(i)
        deadline = time.monotonic() + timeout_s
        while True:
            event = self._read(deadline)
            if event.get("method") == method:
                return event
            self.events.append(event)

    def drain(self, seconds: float) -> None:
        """Read the events that arrive within `seconds` (late errors: a timer's exception)."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                self.events.append(self._read(deadline))
            except TimeoutError:
                return

    def _read(self, deadline: float) -> dict:
        import select

        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no reply from Chromium")
            ready, _, _ = select.select([self.read_fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.read_fd, 1 << 20)
            if not chunk:
                raise ChromiumError(f"Chromium closed the DevTools pipe (exit {self.proc.poll()})")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(raw)


def _error_lines(events: list[dict]) -> list[str]:
    out = []
    for e in events:
        method, p = e.get("method"), e.get("params", {})
        if method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            desc = d.get("exception", {}).get("description") or d.get("text", "")
            out.append(f"uncaught exception: {desc.splitlines()[0] if desc else d}")
        elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            out.append(f"console.{p['type']}: {args}")
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            entry = p["entry"]
            out.append(f"log ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}".rstrip())
    return out


def load_page(path: Path, width: int = 1280, height: int = 900, screenshot: bool = False,
              full_page: bool = False, max_height: int | None = None, chromium: str | None = None,
              timeout_s: float = 60.0, media: str | None = None, evaluate: str | None = None) -> PageResult:
    """Open `path` (a local file) in headless Chromium, wait for its load event, and return its rendered text,
    its errors and, with `screenshot`, a PNG of the viewport (`full_page`: of the whole page, cut at
    `max_height` pixels if given).  `media`: the CSS media the page is laid out for ("print": its print
    stylesheet, at `width` pixels, the page's printable width); `evaluate`: a JavaScript expression whose value
    comes back as `PageResult.value`."""
    binary = chromium or find_chromium()
    if binary is None:
        raise ChromiumError("no Chromium found (apt-get install chromium, or set PLACEMENT_CHROMIUM)")
    url = Path(path).resolve().as_uri()
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()

    def child_fds() -> None:  # the pipe's ends at the numbers Chromium expects: it reads 3, writes 4
        import fcntl

        # copies above 4 first (a plain dup may return 3 or 4 itself, and dup2 onto the same number keeps its
        # close-on-exec flag), then onto 3 and 4, inheritable
        read_end, write_end = (fcntl.fcntl(fd, fcntl.F_DUPFD, 16) for fd in (to_child_r, from_child_w))
        os.dup2(read_end, 3)
        os.dup2(write_end, 4)

    with tempfile.TemporaryDirectory(prefix="placement-chromium-") as profile:
        proc = subprocess.Popen(
            [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe",
             f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            # close_fds=False: the fds Python opens are close-on-exec anyway (PEP 446); 3 and 4, made by dup2 in
            # the child, are the only ones Chromium inherits (pass_fds would need 3 and 4 open in this process)
            close_fds=False, preexec_fn=child_fds)
        os.close(to_child_r)
        os.close(from_child_w)
        pipe = _Pipe(proc, to_child_w, from_child_r)
        try:
            target = pipe.send("Target.createTarget", {"url": "about:blank"}, timeout_s=timeout_s)["targetId"]
            session = pipe.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Log"):
                pipe.send(f"{domain}.enable", session=session)
            pipe.send("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=session)
            if media is not None:
                pipe.send("Emulation.setEmulatedMedia", {"media": media}, session=session)
            pipe.events.clear()
            pipe.send("Page.navigate", {"url": url}, session=session)
            pipe.wait_for("Page.loadEventFired", timeout_s=timeout_s)
            pipe.drain(0.3)
            text = pipe.send("Runtime.evaluate", {"expression": "document.body ? document.body.innerText : ''",
                                                  "returnByValue": True}, session=session)["result"].get("value", "")
            value = None if evaluate is None else pipe.send(
                "Runtime.evaluate", {"expression": evaluate, "returnByValue": True},
                session=session)["result"].get("value")
            png = None
            if screenshot:
                params = {"format": "png"}
                if full_page:
                    params["captureBeyondViewport"] = True
                    size = pipe.send("Page.getLayoutMetrics", session=session)["cssContentSize"]
                    tall = size["height"] if max_height is None else min(size["height"], max_height)
                    params["clip"] = {"x": 0, "y": 0, "width": width, "height": tall, "scale": 1}
                png = base64.b64decode(pipe.send("Page.captureScreenshot", params, session=session)["data"])
            errors = _error_lines(pipe.events)
            try:
                pipe.send("Browser.close", timeout_s=5)
            except (ChromiumError, TimeoutError):
                pass
        finally:
            os.close(to_child_w)
            os.close(from_child_r)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return PageResult(text=text, errors=errors, screenshot_png=png, value=value)
