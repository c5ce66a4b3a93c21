"""Content-addressed blob store and the git/LFS hashes the Hub exposes.

Every file's bytes live once under `objects/<sha256[:2]>/<sha256>` in the data dir, whether it came
in base64 inside a commit ("regular") or through the LFS upload ("lfs"). Blobs are written to a
temp file and renamed into place only after their sha256 (and size) is checked, so a half-written
upload is never visible. Which files a repo contains is `repos`' business, not this module's.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from .errors import HubError

LFS_POINTER_TEMPLATE = "version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {size}\n"


def git_blob_oid(data: bytes) -> str:
    """The git object id of a blob (what the Hub returns as a regular file's `oid`/ETag)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    return LFS_POINTER_TEMPLATE.format(oid=sha256, size=size).encode()


class ObjectStore:
    def __init__(self, root: Path) -> None:
        self._root = root
        self._tmp = root / "tmp"
        self._tmp.mkdir(parents=True, exist_ok=True)

    def path(self, sha256: str) -> Path:
        return self._root / sha256[:2] / sha256

    def size_of(self, sha256: str) -> int | None:
        try:
            return self.path(sha256).stat().st_size
        except FileNotFoundError:
            return None

    def put_bytes(self, data: bytes) -> str:
        sha256 = hashlib.sha256(data).hexdigest()
        if self.size_of(sha256) is None:
            self.put_stream([data], sha256, len(data))
        return sha256

    def put_stream(self, chunks: Iterable[bytes], sha256: str, size: int) -> None:
        """Store a blob whose hash and size are announced up front; HubError 400 on mismatch."""
        digest = hashlib.sha256()
        written = 0
        fd, tmp_name = tempfile.mkstemp(dir=self._tmp)
        try:
            with os.fdopen(fd, "wb") as tmp:
                for chunk in chunks:
                    digest.update(chunk)
                    written += len(chunk)
                    tmp.write(chunk)
            if written != size or digest.hexdigest() != sha256:
                raise HubError(
                    400,
                    f"Uploaded content does not match the announced object: expected sha256 "
                    f"{sha256} and size {size}, got {digest.hexdigest()} and {written}",
                )
            target = self.path(sha256)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp_name, target)
        finally:
            if os.path.exists(tmp_name):
                os.unlink(tmp_name)
