"""Driving headless Chromium from a test through the DevTools protocol: open a page, run
JavaScript in it, click, wait for a condition, list every URL the page requested.

The browser tests that only read a page use Chromium's ``--dump-dom``; a test that must
act as a reader does (follow a link, move a slider) uses this instead. It needs the
``websocket-client`` package (requirements-dev.txt) and a Chromium binary::

    with Browser(chromium_path) as page:
        page.goto("http://127.0.0.1:8000/index.html")
        page.wait_for("document.readyState === 'complete'")
        title = page.evaluate("document.title")
"""
from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-quic")


class BrowserError(RuntimeError):
    """The page raised, or a condition did not come true in time."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Browser:
    """One headless Chromium with one page, driven over the DevTools protocol."""

    def __init__(self, chromium: str, *, width: int = 1280, height: int = 1800):
        import websocket  # websocket-client

        self._profile = tempfile.mkdtemp(prefix="chromium-cdp-")
        port = _free_port()
        self._process = subprocess.Popen(
            [chromium, *FLAGS, f"--remote-debugging-port={port}", f"--user-data-dir={self._profile}",
             f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        target = self._page_target(port)
        self._socket = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=60,
                                                   suppress_origin=True)
        self._next_id = 0
        self.requests: list[str] = []                     # every URL the page asked for
        self.console_errors: list[str] = []
        for domain in ("Page", "Runtime", "Network"):
            self.send(f"{domain}.enable")

    def _page_target(self, port: int, seconds: float = 30) -> dict:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=2) as response:
                    pages = [t for t in json.load(response) if t.get("type") == "page"]
                if pages:
                    return pages[0]
            except OSError:
                pass
            time.sleep(0.2)
        self.close()
        raise BrowserError(f"Chromium did not open its DevTools port {port} within {seconds:.0f} s")

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        sock = getattr(self, "_socket", None)
        if sock is not None:
            sock.close()
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
        shutil.rmtree(self._profile, ignore_errors=True)

    def _event(self, message: dict) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.console_errors.append(details.get("exception", {}).get("description")
                                       or details.get("text", "exception"))

    def send(self, method: str, **params) -> dict:
        """Send one DevTools command and return its result (events met meanwhile are kept)."""
        self._next_id += 1
        self._socket.send(json.dumps({"id": self._next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self._socket.recv())
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._event(message)

    def goto(self, url: str, *, ready: str = "document.readyState === 'complete'", seconds: float = 60):
        """Open ``url`` and wait until the JavaScript condition ``ready`` is true."""
        self.send("Page.navigate", url=url)
        self.wait_for(ready, seconds=seconds)

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise BrowserError(f"{expression[:80]!r} raised: "
                               f"{details.get('exception', {}).get('description') or details.get('text')}")
        return result["result"].get("value")

    def wait_for(self, condition: str, *, seconds: float = 30, step: float = 0.25):
        """Poll the JavaScript ``condition`` until it is truthy; return its value."""
        deadline = time.monotonic() + seconds
        while True:
            value = self.evaluate(condition)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"not true within {seconds:.0f} s: {condition}")
            time.sleep(step)

    def pump(self, seconds: float) -> None:
        """Let the page run for ``seconds`` while its events (requests, errors) are recorded."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.evaluate("1")
            time.sleep(0.1)

    def screenshot(self, path: Path) -> None:
        data = self.send("Page.captureScreenshot", format="png")["data"]
        Path(path).write_bytes(base64.b64decode(data))
