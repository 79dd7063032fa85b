"""A real headless browser for tests and screenshots: Chromium driven over the DevTools protocol.

Chromium (Debian's ``chromium``) starts headless with a throw-away profile and
a DevTools port on loopback; :class:`HeadlessBrowser` talks to its page over a
WebSocket (aiohttp's client, already a dependency) and offers the three things
the report tests need: open a page, evaluate JavaScript in it (to filter, click
and read the DOM as a user's actions would), and capture a screenshot::

    with HeadlessBrowser() as browser:
        browser.open(Path("report.html").resolve().as_uri())
        rows = browser.evaluate("document.querySelectorAll('#cb-rows tr').length")
        Path("summary.png").write_bytes(browser.screenshot(1280, 900))
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["BrowserError", "HeadlessBrowser"]


class BrowserError(RuntimeError):
    """The browser could not be started or a DevTools call failed (the message says which)."""


class HeadlessBrowser:
    """One headless Chromium and its first page, for the life of a ``with`` block."""

    def __init__(self, binary: str = "chromium", *, timeout_s: float = 30.0) -> None:
        found = shutil.which(binary)
        if found is None:
            raise BrowserError(f"{binary} is not installed (`make test` installs Debian's chromium)")
        self.binary, self.timeout_s = found, timeout_s
        self._loop = asyncio.new_event_loop()
        self._ids = itertools.count(1)
        self._profile: str | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._session: Any = None
        self._socket: Any = None

    def __enter__(self) -> HeadlessBrowser:
        self._profile = tempfile.mkdtemp(prefix="assay-chromium-")
        argv = [self.binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
        argv += ["--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0"]
        argv += [f"--user-data-dir={self._profile}", "about:blank"]
        self._process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            self._loop.run_until_complete(self._connect())
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self._socket is not None or self._session is not None:
            self._loop.run_until_complete(self._close())
        if self._process is not None:
            self._process.kill()
            self._process.wait(timeout=10)
        self._loop.close()
        if self._profile is not None:
            shutil.rmtree(self._profile, ignore_errors=True)

    async def _connect(self) -> None:
        import aiohttp

        assert self._profile is not None
        port_file = Path(self._profile) / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout_s
        while not port_file.exists() or not port_file.read_text().strip():
            if time.monotonic() > deadline or (self._process is not None and self._process.poll() is not None):
                raise BrowserError("chromium did not open its DevTools port")
            await asyncio.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        self._session = aiohttp.ClientSession()
        async with self._session.get(f"http://127.0.0.1:{port}/json/list") as response:
            targets = await response.json()
        page = next((t for t in targets if t.get("type") == "page"), None)
        if page is None:
            raise BrowserError("chromium has no page to drive")
        self._socket = await self._session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)

    async def _close(self) -> None:
        if self._socket is not None:
            await self._socket.close()
        if self._session is not None:
            await self._session.close()
        self._socket = self._session = None

    async def _call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        number = next(self._ids)
        await self._socket.send_str(json.dumps({"id": number, "method": method, "params": params or {}}))
        deadline = time.monotonic() + self.timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BrowserError(f"DevTools call {method} timed out")
            message = json.loads(await asyncio.wait_for(self._socket.receive_str(), remaining))
            if message.get("id") == number:
                if "error" in message:
                    raise BrowserError(f"DevTools call {method} failed: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """One DevTools protocol call on the page; its result."""
        return self._loop.run_until_complete(self._call(method, params))

    def evaluate(self, expression: str) -> Any:
        """Evaluate JavaScript in the page and return its (JSON-able) value; a thrown error is a BrowserError."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"the page threw: {result['exceptionDetails'].get('text')}: {expression[:80]}")
        return result.get("result", {}).get("value")

    def open(self, url: str) -> None:
        """Navigate to ``url`` and wait until the document has loaded (its scripts ran)."""
        self.call("Page.enable")
        self.call("Page.navigate", {"url": url})
        deadline = time.monotonic() + self.timeout_s
        while self.evaluate("document.readyState") != "complete" or self.evaluate("location.href") != url:
            if time.monotonic() > deadline:
                raise BrowserError(f"{url} did not finish loading")
            time.sleep(0.05)

    def screenshot(self, width: int, height: int) -> bytes:
        """A PNG of the page's top ``width`` x ``height`` CSS pixels."""
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        return base64.b64decode(data)
