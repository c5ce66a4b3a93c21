"""HTTP plumbing shared by every route: the request and response values routes see, request-body
reading (Content-Length or chunked), error answers and byte ranges.

It knows nothing about repos, tokens or faults; `server` wires those around it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .errors import HubError, bad_request

READ_CHUNK_BYTES = 1024 * 1024
_RANGE_RE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$", re.IGNORECASE)


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...
    def readline(self, size: int = -1, /) -> bytes: ...


@dataclass(frozen=True)
class FileSlice:
    """Part of a stored file to send as the response body."""

    path: Path
    start: int
    length: int


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    file: FileSlice | None = None

    @property
    def content_length(self) -> int:
        return self.file.length if self.file is not None else len(self.body)


def json_response(
    data: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    return Response(
        status=status,
        body=json.dumps(data).encode(),
        headers=tuple((headers or {}).items()),
    )


def error_response(error: HubError) -> Response:
    headers = {"X-Error-Message": error.message, **error.headers}
    if error.error_code:
        headers["X-Error-Code"] = error.error_code
    return json_response({"error": error.message, **error.extra_body}, error.status, headers)


class BodyStream:
    """The request body, read at most once, chunk by chunk.

    Every chunk also goes to `on_chunk` (the request log's token-leak scan), and `drain()` reads
    whatever a route left unread so a kept-alive connection stays in sync.
    """

    def __init__(
        self, rfile: Readable, headers: Mapping[str, str], on_chunk: Callable[[bytes], None]
    ) -> None:
        self._rfile = rfile
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        self._remaining = int(headers.get("content-length") or 0)
        self._on_chunk = on_chunk
        self._started = False
        self._done = False

    def chunks(self) -> Iterator[bytes]:
        if self._started:
            raise RuntimeError("request body already consumed")
        self._started = True
        source = self._chunked_source() if self._chunked else self._sized_source()
        for chunk in source:
            self._on_chunk(chunk)
            yield chunk
        self._done = True

    def read_all(self) -> bytes:
        return b"".join(self.chunks())

    def read_json(self) -> Any:
        raw = self.read_all()
        try:
            return json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            raise bad_request(f"Invalid JSON body: {exc}") from exc

    def drain(self) -> None:
        if not self._started:
            for _ in self.chunks():
                pass
        elif not self._done:
            raise RuntimeError("request body partly consumed")

    def _sized_source(self) -> Iterator[bytes]:
        while self._remaining > 0:
            chunk = self._rfile.read(min(READ_CHUNK_BYTES, self._remaining))
            if not chunk:
                raise ConnectionError("client closed the connection mid-body")
            self._remaining -= len(chunk)
            yield chunk

    def _chunked_source(self) -> Iterator[bytes]:
        while True:
            size_line = self._rfile.readline(1024)
            if not size_line:
                raise ConnectionError("client closed the connection mid-body")
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self._rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return
            left = size
            while left > 0:
                chunk = self._rfile.read(min(READ_CHUNK_BYTES, left))
                if not chunk:
                    raise ConnectionError("client closed the connection mid-body")
                left -= len(chunk)
                yield chunk
            self._rfile.readline(1024)


@dataclass(frozen=True)
class Request:
    """What a route handler sees of one HTTP request."""

    method: str
    path: str  # still percent-encoded, without the query string
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]  # lower-cased names
    base_url: str
    body: BodyStream = field(repr=False)

    def query_flag(self, name: str) -> bool:
        values = self.query.get(name) or [""]
        return values[-1].lower() in ("1", "true", "yes")


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """(start, length) of one `bytes=` range; None if no range; HubError 416 if unsatisfiable."""
    if not header:
        return None
    match = _RANGE_RE.match(header)
    if match is None:
        return None  # multi-range or junk: serve the whole file, as many servers do
    first, last = match.groups()
    if not first and not last:
        return None
    if not first:
        length = min(int(last), size)
        start = size - length
    else:
        start = int(first)
        end = min(int(last), size - 1) if last else size - 1
        length = end - start + 1
    if start >= size or length <= 0:
        raise HubError(
            416, "Requested range not satisfiable", headers={"Content-Range": f"bytes */{size}"}
        )
    return start, length
