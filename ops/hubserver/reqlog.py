"""The request log: one record per request (method, path, status, headers, fault, caller), kept
in memory for `GET /_admin/requests` and appended to `<data>/requests.jsonl`.

The log never stores a token: the `authorization` header is replaced by the token's fingerprint
(`auth.fingerprint`). Instead the server scans each request for every known token (and the one it
was sent) outside that header (path, query, other headers, body) and records where it found one
in `token_leaks`, so a test can assert a client only ever sends its token in `authorization`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from .auth import bearer_token, fingerprint


class LeakScanner:
    """Finds any of `secrets` in a byte stream fed chunk by chunk (matches may span chunks)."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = [s.encode() for s in secrets if s]
        self._keep = max((len(s) for s in self._secrets), default=1) - 1
        self._tail = b""
        self.found = False

    def feed(self, chunk: bytes) -> None:
        if self.found or not self._secrets:
            return
        window = self._tail + chunk
        self.found = any(secret in window for secret in self._secrets)
        self._tail = window[-self._keep :] if self._keep else b""


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    redacted = {}
    for name, value in headers.items():
        if name.lower() == "authorization":
            token = bearer_token(value)
            value = f"Bearer <{fingerprint(token)}>" if token else "<redacted>"
        redacted[name.lower()] = value
    return redacted


def find_leaks(
    secrets: Iterable[str], raw_path: str, query: str, headers: Mapping[str, str]
) -> list[str]:
    """Places outside `authorization` where one of `secrets` appears (body scanned separately)."""
    places = []
    secrets = [s for s in secrets if s]
    for place, text in (("path", raw_path), ("query", query)):
        if any(s in text or s in unquote(text) for s in secrets):
            places.append(place)
    for name, value in headers.items():
        if name.lower() != "authorization" and any(s in value for s in secrets):
            places.append(f"header:{name.lower()}")
    return places


class RequestLog:
    def __init__(self, jsonl_path: Path | None) -> None:
        self._path = jsonl_path
        self._records: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def record(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry)
        with self._lock:
            self._records.append(entry)
            if self._path is not None:
                with self._path.open("a") as out:
                    out.write(line + "\n")

    def entries(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._records)

    def clear(self) -> None:
        with self._lock:
            self._records = []
