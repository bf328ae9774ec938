"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``):
no Python dependency, no port. Chromium reads commands from its fd 3 and writes replies and
events to its fd 4, each a JSON object ended by a NUL byte.

:class:`Browser` opens a page, collects every console message, uncaught exception and log
entry of level error, evaluates JavaScript, and takes full-page screenshots. A missing
Chromium is an error (the tests that use it fail, never skip): ``apt-get install chromium``.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("TOKPIPE_CHROMIUM", "/usr/bin/chromium")
#: Generous: only a hung browser should reach it.
TIMEOUT_S = 60.0


def chromium() -> str:
    found = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        raise AssertionError(f"Chromium is missing ({CHROMIUM}, or chromium on PATH): the report's browser tests need "
                             "it; install it with `apt-get install chromium` (Debian's package)")
    return found


class Browser:
    """One headless Chromium with one page; use as a context manager."""

    def __init__(self, width: int = 1280, height: int = 900) -> None:
        self.width, self.height = width, height
        self.profile = tempfile.mkdtemp(prefix="tokpipe-chromium-")
        commands_read, self.commands = os.pipe()
        self.replies, replies_write = os.pipe()

        def wire() -> None:
            # Copies first, so that neither end is overwritten by the other's dup2.
            read_copy, write_copy = os.dup(commands_read), os.dup(replies_write)
            os.dup2(read_copy, 3)
            os.dup2(write_copy, 4)

        self.process = subprocess.Popen(
            [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
             "--disable-background-networking", "--disable-sync", "--hide-scrollbars", "--mute-audio",
             f"--user-data-dir={self.profile}", "--remote-debugging-pipe", "about:blank"],
            pass_fds=(3, 4), preexec_fn=wire, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(commands_read)
        os.close(replies_write)
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                         "mobile": False}, session=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except Exception:  # noqa: BLE001 - closing a browser that already died
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self.commands)
        os.close(self.replies)
        shutil.rmtree(self.profile, ignore_errors=True)

    def _message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.replies], [], [], left)[0]:
                raise AssertionError(f"Chromium did not answer within {TIMEOUT_S} s")
            chunk = os.read(self.replies, 1 << 20)
            if not chunk:
                raise AssertionError("Chromium closed its DevTools pipe (it crashed or failed to start)")
            self.buffer += chunk
        raw, _, self.buffer = self.buffer.partition(b"\0")
        return json.loads(raw)

    def call(self, method: str, params: dict[str, Any] | None = None, session: bool = False) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self.commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise AssertionError(f"DevTools {method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, event: str) -> dict[str, Any]:
        for seen in self.events:
            if seen.get("method") == event:
                self.events.remove(seen)
                return seen
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            message = self._message(deadline)
            if message.get("method") == event:
                return message
            self.events.append(message)

    def open(self, path: Path) -> None:
        self.call("Page.navigate", {"url": path.resolve().as_uri()}, session=True)
        self.wait_for("Page.loadEventFired")

    def problems(self) -> list[str]:
        """Console messages of level warning or error, uncaught exceptions and error log
        entries seen so far."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
                found.append(f"console.{params['type']}: {[a.get('value') for a in params.get('args', [])]}")
            elif method == "Runtime.exceptionThrown":
                found.append(f"exception: {params.get('exceptionDetails', {}).get('text')}")
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in ("error", "warning"):
                entry = params["entry"]
                found.append(f"log {entry.get('level')}: {entry.get('text')} {entry.get('url', '')}")
        return found

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"JavaScript failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path, y: float = 0, height: float | None = None) -> Path:
        """A PNG of the page from ``y`` down ``height`` pixels (default: the whole page)."""
        full = self.evaluate("document.documentElement.scrollHeight")
        clip = {"x": 0, "y": y, "width": self.width, "height": height or full - y, "scale": 1}
        data = self.call("Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True},
                         session=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path
