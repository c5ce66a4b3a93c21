"""A small stdlib client for the `/_admin/` API, for tests and the offline demo.

admin = AdminClient("http://127.0.0.1:54321")
admin.fail_next("POST", r"/commit/", status=503)     # next commit answers 503
admin.close_next("POST", r"/preupload/")             # next preupload: connection dropped
admin.delay(".*", r"/resolve/", delay_s=0.5)          # every download is slow
admin.down()                                          # everything 503 until clear_faults()
admin.set_token("hf_x", user="alice", role="read")   # make a token read-only
admin.set_private("alice/run", private=False)        # force a repo public
admin.requests()                                      # the request log records
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any


class AdminClient:
    def __init__(self, url: str, timeout_s: float = 10.0) -> None:
        self._url = url.rstrip("/")
        self._timeout_s = timeout_s

    def _call(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(
            f"{self._url}/_admin/{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=self._timeout_s) as response:
            return json.loads(response.read() or b"null")

    def health(self) -> bool:
        return bool(self._call("GET", "health").get("ok"))

    def add_fault(self, **rule: Any) -> int:
        """Add a raw rule (see `faults`); returns its id."""
        return int(self._call("POST", "faults", rule)["id"])

    def fail_next(
        self, method: str = ".*", path: str = ".*", *, status: int = 503, count: int = 1
    ) -> int:
        return self.add_fault(kind="status", method=method, path=path, status=status, count=count)

    def close_next(self, method: str = ".*", path: str = ".*", *, count: int = 1) -> int:
        return self.add_fault(kind="close", method=method, path=path, count=count)

    def delay(
        self, method: str = ".*", path: str = ".*", *, delay_s: float, count: int | None = None
    ) -> int:
        return self.add_fault(kind="delay", method=method, path=path, delay_s=delay_s, count=count)

    def down(self, method: str = ".*", path: str = ".*") -> int:
        return self.add_fault(kind="down", method=method, path=path)

    def faults(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "faults"))

    def remove_fault(self, rule_id: int) -> None:
        self._call("DELETE", f"faults/{rule_id}")

    def clear_faults(self) -> None:
        self._call("DELETE", "faults")

    def requests(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "requests"))

    def clear_requests(self) -> None:
        self._call("DELETE", "requests")

    def set_token(
        self, token: str, *, user: str, role: str = "write", orgs: list[str] | None = None
    ) -> None:
        self._call(
            "POST", "tokens", {"token": token, "user": user, "role": role, "orgs": orgs or []}
        )

    def set_private(self, repo_id: str, *, private: bool, repo_type: str = "model") -> None:
        payload = {"repo_id": repo_id, "repo_type": repo_type, "private": private}
        self._call("POST", "repos/visibility", payload)
