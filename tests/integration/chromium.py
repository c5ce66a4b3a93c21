"""Headless Chromium (Debian's `chromium`) driven over the Chrome DevTools Protocol, with nothing
but the standard library: `--remote-debugging-pipe` (commands on the browser's fd 3, replies and
events on its fd 4, each message JSON ended by a NUL byte), so no port, no websocket client and
no new dependency.

It answers HTTP basic-auth challenges the way a person answers the browser's login prompt
(`Fetch.authRequired` -> `Fetch.continueWithAuth`), reads the rendered page with
`Runtime.evaluate` until a condition holds (bounded waits, never fixed sleeps), and takes
screenshots (`Page.captureScreenshot`).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import selectors
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser")


def find_chromium() -> str | None:
    """The Chromium on PATH (Debian's package installs `/usr/bin/chromium`), or None."""
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


class ChromiumError(AssertionError):
    """The browser died, answered a command with an error, or a wait ran out."""


class Chromium:
    """One headless browser with one page, logging in with `credentials` when a site asks."""

    def __init__(
        self,
        exe: str,
        profile: Path,
        *,
        credentials: tuple[str, str],
        size: tuple[int, int] = (1920, 1080),
        log: Path | None = None,
    ) -> None:
        self.credentials = credentials
        self.auth_challenges: list[str] = []  # URLs whose server asked for a login
        self._next_id = 0
        self._buf = b""
        profile.mkdir(parents=True, exist_ok=True)
        # fd 3: the browser reads commands; fd 4: it writes replies and events. The child's
        # ends are moved above 9 first, so that putting them at 3 and 4 overwrites neither.
        cmd_r, self._cmd_w = os.pipe()
        self._res_r, res_w = os.pipe()
        child_r, child_w = _high(cmd_r), _high(res_w)

        def wire() -> None:  # in the child, before exec
            os.dup2(child_r, 3)
            os.dup2(child_w, 4)

        argv = [
            exe,
            "--headless",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile}",
            f"--window-size={size[0]},{size[1]}",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--mute-audio",
            "--password-store=basic",
            "--use-mock-keychain",
            "about:blank",
        ]
        if os.geteuid() == 0:
            argv.insert(1, "--no-sandbox")  # Chromium's sandbox refuses to run as root
        out = open(log, "ab") if log else None  # noqa: SIM115 (the child keeps its own copy)
        try:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out or subprocess.DEVNULL,
                stderr=subprocess.STDOUT, pass_fds=(3, 4), preexec_fn=wire,
                start_new_session=True,
            )  # fmt: skip
        finally:
            if out:
                out.close()
            os.close(child_r)
            os.close(child_w)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._res_r, selectors.EVENT_READ)
        self.session = ""

    def open_page(self, timeout_s: float = 30) -> None:
        """A fresh page whose login prompts and requests this object answers."""
        target = self.send("Target.createTarget", {"url": "about:blank"}, timeout_s=timeout_s)
        attached = self.send(
            "Target.attachToTarget",
            {"targetId": target["targetId"], "flatten": True},
            timeout_s=timeout_s,
        )
        self.session = attached["sessionId"]
        self.send("Page.enable", timeout_s=timeout_s)
        # Every request pauses here; only a server's 401 challenge needs an answer beyond "go on".
        self.send(
            "Fetch.enable",
            {"handleAuthRequests": True, "patterns": [{"urlPattern": "*"}]},
            timeout_s=timeout_s,
        )

    # -- the protocol -------------------------------------------------------------------------

    def send(
        self, method: str, params: dict[str, Any] | None = None, *, timeout_s: float = 30
    ) -> dict[str, Any]:
        """Send a command and wait for its reply, answering the browser's events meanwhile."""
        self._next_id += 1
        msg_id = self._next_id
        msg: dict[str, Any] = {"id": msg_id, "method": method, "params": params or {}}
        if self.session and not method.startswith("Target."):
            msg["sessionId"] = self.session
        self._write(msg)
        deadline = time.monotonic() + timeout_s
        while True:
            reply = self._read(deadline)
            if reply is None:
                raise ChromiumError(f"no answer from Chromium to {method} in {timeout_s:.0f} s")
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise ChromiumError(f"{method}: {reply['error']}")
                return dict(reply.get("result") or {})
            self._on_event(reply)

    def _write(self, msg: dict[str, Any]) -> None:
        data = json.dumps(msg).encode() + b"\0"
        while data:
            data = data[os.write(self._cmd_w, data) :]

    def _read(self, deadline: float) -> dict[str, Any] | None:
        """The browser's next message, or None if none came by `deadline`."""
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if not self._sel.select(timeout=min(left, 1.0)):
                if self.proc.poll() is not None:
                    raise ChromiumError(f"Chromium exited ({self.proc.returncode})")
                continue
            chunk = os.read(self._res_r, 1 << 20)
            if not chunk:
                raise ChromiumError(f"Chromium closed its pipe ({self.proc.poll()})")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return dict(json.loads(raw))

    def _on_event(self, event: dict[str, Any]) -> None:
        method, params = event.get("method", ""), event.get("params", {})
        if method == "Fetch.authRequired":
            self.auth_challenges.append(str(params["request"]["url"]))
            user, password = self.credentials
            self._command_async(
                "Fetch.continueWithAuth",
                {
                    "requestId": params["requestId"],
                    "authChallengeResponse": {
                        "response": "ProvideCredentials",
                        "username": user,
                        "password": password,
                    },
                },
            )
        elif method == "Fetch.requestPaused":
            self._command_async("Fetch.continueRequest", {"requestId": params["requestId"]})
        # Anything else (the page's events, replies to _command_async) needs no answer.

    def _command_async(self, method: str, params: dict[str, Any]) -> None:
        """A command whose reply nobody waits for (it is skipped when it arrives)."""
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        msg["sessionId"] = self.session
        self._write(msg)

    # -- what a test does ---------------------------------------------------------------------

    def navigate(self, url: str, timeout_s: float = 30) -> None:
        result = self.send("Page.navigate", {"url": url}, timeout_s=timeout_s)
        if result.get("errorText"):
            raise ChromiumError(f"cannot open {url}: {result['errorText']}")

    def evaluate(self, expression: str, timeout_s: float = 30) -> Any:
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            timeout_s=timeout_s,
        )
        if "exceptionDetails" in result:
            raise ChromiumError(f"page script failed: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout_s: float, what: str) -> Any:
        """Evaluate `expression` in the page until it is truthy; its value. Polls on the
        browser's answers (each evaluation is a round trip), never on a fixed sleep's guess."""
        deadline = time.monotonic() + timeout_s
        last: Any = None
        while time.monotonic() < deadline:
            last = self.evaluate(expression, timeout_s=max(deadline - time.monotonic(), 1))
            if last:
                return last
            self._pump(min(0.25, max(deadline - time.monotonic(), 0)))
        raise ChromiumError(f"{what}: not seen in {timeout_s:.0f} s (last: {last!r})")

    def _pump(self, seconds: float) -> None:
        """Answer the browser's events (login prompts, paused requests) for `seconds`."""
        deadline = time.monotonic() + seconds
        while (event := self._read(deadline)) is not None:
            self._on_event(event)

    def screenshot(self, path: Path, timeout_s: float = 30) -> Path:
        shot = self.send("Page.captureScreenshot", {"format": "png"}, timeout_s=timeout_s)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def close(self) -> None:
        with contextlib.suppress(OSError, ChromiumError):
            self._write({"id": self._next_id + 1, "method": "Browser.close", "params": {}})
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._sel.close()
        for fd in (self._cmd_w, self._res_r):
            with contextlib.suppress(OSError):
                os.close(fd)


def _high(fd: int) -> int:
    """`fd` moved to a close-on-exec number above 9 (the original is closed)."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved
