"""Headless Debian Chromium driven over the DevTools protocol, for the HTML page tests
and the report benchmark. A minimal client on the standard library (a WebSocket over
loopback: handshake, masked client frames, unmasked server frames), so the tests need
no browser download and no extra package.

    with Browser() as b:
        page = b.open(Path("report.html"), wait_for="window.pyptoDoneAt !== undefined")
        page.errors, page.requests, page.eval("document.title")
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("PYPTO_CHROMIUM", "/usr/bin/chromium")


def chromium_available() -> bool:
    return Path(CHROMIUM).exists()


class WebSocket:
    def __init__(self, url: str, timeout: float = 600.0) -> None:
        m = re.match(r"ws://([^/:]+):(\d+)(/.*)", url)
        assert m, url
        host, port, path = m.group(1), int(m.group(2)), m.group(3)
        assert host in ("127.0.0.1", "localhost"), "loopback only"
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        assert b" 101 " in head.split(b"\r\n")[0], head

    def send(self, text: str) -> None:
        payload = text.encode()
        n = len(payload)
        header = bytes([0x81])
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def _exact(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("DevTools closed the connection")
            out += chunk
        return bytes(out)

    def recv(self) -> str:
        message = bytearray()
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._exact(8))[0]
            data = self._exact(n)
            opcode = b0 & 0x0F
            if opcode == 8:
                raise ConnectionError("DevTools closed the connection")
            if opcode in (0, 1, 2):
                message += data
                if b0 & 0x80:
                    return message.decode()

    def close(self) -> None:
        self.sock.close()


@dataclass
class Page:
    ws: WebSocket
    url: str = ""
    errors: list[str] = field(default_factory=list)     # console errors, exceptions
    requests: list[str] = field(default_factory=list)   # every URL the page asked for
    _id: int = 0

    def call(self, method: str, timeout: float = 60.0, **params: Any) -> dict:
        self._id += 1
        me = self._id
        self.ws.send(json.dumps({"id": me, "method": method, "params": params}))
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == me:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._event(msg)
        raise TimeoutError(method)

    def _event(self, msg: dict) -> None:
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Network.requestWillBeSent":
            self.requests.append(p["request"]["url"])
        elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.errors.append(" ".join(str(a.get("value", a.get("description", "")))
                                        for a in p.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            self.errors.append(d.get("exception", {}).get("description", d.get("text", "")))
        elif method == "Log.entryAdded" and p["entry"]["level"] == "error":
            self.errors.append(p["entry"]["text"])

    def eval(self, expression: str, timeout: float = 60.0) -> Any:
        r = self.call("Runtime.evaluate", timeout=timeout, expression=expression,
                      returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(r["exceptionDetails"])
        return r["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60.0) -> None:
        end = time.monotonic() + timeout
        while not self.eval(f"!!({expression})"):
            if time.monotonic() > end:
                raise TimeoutError(f"{expression} (page errors: {self.errors})")
            time.sleep(0.05)

    def drain(self, seconds: float = 0.3) -> None:
        """Read the events that arrived meanwhile (late console errors, requests)."""
        self.eval(f"new Promise(r => setTimeout(r, {int(seconds * 1000)}))")

    def screenshot(self, path: Path, width: int = 1400, height: int = 1800) -> Path:
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)
        self.drain(0.5)
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path


class Browser:
    """Headless Chromium with remote debugging on a loopback port it picks."""

    def __init__(self) -> None:
        self.profile = tempfile.mkdtemp(prefix="pypto-chromium-")
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--disable-extensions", "--remote-debugging-address=127.0.0.1",
             "--remote-debugging-port=0", f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.port = self._port()

    def _port(self) -> int:
        end = time.monotonic() + 60
        active = Path(self.profile) / "DevToolsActivePort"
        while time.monotonic() < end:
            if active.exists() and active.read_text().strip():
                return int(active.read_text().split()[0])
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited: {self.proc.stderr.read()[-2000:]}")
            time.sleep(0.05)
        raise TimeoutError("chromium did not open its DevTools port")

    def open(self, path: Path, wait_for: str | None = None, timeout: float = 60.0) -> Page:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/json/new?about:blank",
                                     method="PUT")
        with urllib.request.urlopen(req, timeout=30) as r:
            target = json.loads(r.read())
        page = Page(WebSocket(target["webSocketDebuggerUrl"]))
        for domain in ("Network", "Runtime", "Log", "Page"):
            page.call(f"{domain}.enable")
        page.url = path.resolve().as_uri()
        page.call("Page.navigate", url=page.url)
        page.wait_for("document.readyState === 'complete'", timeout)
        if wait_for:
            page.wait_for(wait_for, timeout)
        page.drain()
        return page

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
