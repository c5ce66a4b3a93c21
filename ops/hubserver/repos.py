"""Repos, their commit history and the `main` branch pointer, on disk.

Layout under `<data>/repos/<type>/<namespace>/<name>/`: `repo.json` (visibility, creation time,
branch -> commit oid) and `commits/<oid>.json` (parent, message, author, date and the full file
table of that commit). A commit is written in full before `repo.json` is atomically replaced to
point at it, under a per-repo lock, so a reader sees either all of a commit's files or none.
File bytes live in `objects.ObjectStore`; wire formats are `wire`'s business.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import threading
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from .errors import HubError, bad_request, entry_not_found, repo_not_found, revision_not_found
from .objects import ObjectStore, git_blob_oid

DEFAULT_BRANCH = "main"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_OID_PREFIX_RE = re.compile(r"^[0-9a-f]{5,40}$")
# The Hub seeds every new repo with this file in an "initial commit".
INITIAL_GITATTRIBUTES = b"""*.bin filter=lfs diff=lfs merge=lfs -text
*.ckpt filter=lfs diff=lfs merge=lfs -text
*.gz filter=lfs diff=lfs merge=lfs -text
*.h5 filter=lfs diff=lfs merge=lfs -text
*.onnx filter=lfs diff=lfs merge=lfs -text
*.parquet filter=lfs diff=lfs merge=lfs -text
*.pt filter=lfs diff=lfs merge=lfs -text
*.pth filter=lfs diff=lfs merge=lfs -text
*.safetensors filter=lfs diff=lfs merge=lfs -text
*.tar filter=lfs diff=lfs merge=lfs -text
*.zip filter=lfs diff=lfs merge=lfs -text
"""


class RepoType(StrEnum):
    MODEL = "model"
    DATASET = "dataset"
    SPACE = "space"

    @property
    def plural(self) -> str:
        return f"{self.value}s"

    @property
    def url_prefix(self) -> str:
        return "" if self is RepoType.MODEL else f"{self.value}s/"


@dataclass(frozen=True)
class RepoKey:
    repo_type: RepoType
    namespace: str
    name: str

    @property
    def repo_id(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class FileEntry:
    size: int
    git_oid: str  # for LFS files: the oid of the pointer file, as on the Hub
    sha256: str
    lfs: bool


@dataclass(frozen=True)
class CommitRecord:
    oid: str
    parent: str | None
    title: str
    message: str
    author: str
    date: str
    files: Mapping[str, FileEntry] = field(repr=False)


@dataclass(frozen=True)
class RepoRecord:
    key: RepoKey
    private: bool
    created_at: str
    refs: Mapping[str, str]


@dataclass(frozen=True)
class AddFile:
    path: str
    entry: FileEntry


@dataclass(frozen=True)
class DeleteFile:
    path: str


@dataclass(frozen=True)
class DeleteFolder:
    path: str


Operation = AddFile | DeleteFile | DeleteFolder


def check_repo_name(part: str) -> None:
    if not _NAME_RE.match(part) or "--" in part or ".." in part:
        raise bad_request(f"Invalid repo name or namespace: {part!r}")


def check_path_in_repo(path: str) -> str:
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..", ".git") for p in parts):
        raise bad_request(f"Invalid path in repo: {path!r}")
    return path


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w") as tmp:
        json.dump(data, tmp)
    os.replace(tmp_name, path)


class RepoStore:
    def __init__(self, root: Path, objects: ObjectStore) -> None:
        self._root = root
        self._objects = objects
        self._locks: dict[RepoKey, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def _dir(self, key: RepoKey) -> Path:
        return self._root / key.repo_type.value / key.namespace / key.name

    def _lock(self, key: RepoKey) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(key, threading.Lock())

    def get(self, key: RepoKey) -> RepoRecord | None:
        try:
            raw = json.loads((self._dir(key) / "repo.json").read_text())
        except FileNotFoundError:
            return None
        return RepoRecord(key, bool(raw["private"]), raw["createdAt"], dict(raw["refs"]))

    def create(self, key: RepoKey, *, private: bool, author: str) -> tuple[RepoRecord, bool]:
        """(record, created); an existing repo is returned untouched with created=False."""
        with self._lock(key):
            existing = self.get(key)
            if existing is not None:
                return existing, False
            created_at = now_iso()
            sha256 = self._objects.put_bytes(INITIAL_GITATTRIBUTES)
            files = {".gitattributes": _regular_entry(INITIAL_GITATTRIBUTES, sha256)}
            commit = self._new_commit(key, None, files, "initial commit", "", author)
            self._save_repo(key, private, created_at, {DEFAULT_BRANCH: commit.oid})
            return RepoRecord(key, private, created_at, {DEFAULT_BRANCH: commit.oid}), True

    def set_private(self, key: RepoKey, private: bool) -> None:
        with self._lock(key):
            record = self.get(key)
            if record is None:
                raise repo_not_found()
            self._save_repo(key, private, record.created_at, record.refs)

    def resolve(self, key: RepoKey, revision: str) -> CommitRecord:
        record = self.get(key)
        if record is None:
            raise repo_not_found()
        oid = record.refs.get(revision)
        if oid is None and _OID_PREFIX_RE.match(revision):
            matches = sorted(self._dir(key).joinpath("commits").glob(f"{revision}*.json"))
            oid = matches[0].stem if len(matches) == 1 else None
        if oid is None:
            raise revision_not_found(revision)
        return self._read_commit(key, oid)

    def history(self, key: RepoKey, revision: str) -> list[CommitRecord]:
        commit: CommitRecord | None = self.resolve(key, revision)
        commits = []
        while commit is not None:
            commits.append(commit)
            commit = self._read_commit(key, commit.parent) if commit.parent else None
        return commits

    def commit(
        self,
        key: RepoKey,
        branch: str,
        operations: Iterable[Operation],
        *,
        title: str,
        message: str,
        author: str,
        parent_commit: str | None = None,
    ) -> CommitRecord:
        with self._lock(key):
            record = self.get(key)
            if record is None:
                raise repo_not_found()
            head_oid = record.refs.get(branch)
            if head_oid is None:
                raise revision_not_found(branch)
            if parent_commit is not None and not head_oid.startswith(parent_commit):
                raise HubError(412, "A commit has happened since. Please refresh and try again.")
            head = self._read_commit(key, head_oid)
            files = apply_operations(head.files, operations, head_oid)
            commit = self._new_commit(key, head_oid, files, title, message, author)
            # The commit file exists before the branch moves: readers never see a partial commit.
            self._save_repo(
                key, record.private, record.created_at, {**record.refs, branch: commit.oid}
            )
            return commit

    def _new_commit(
        self,
        key: RepoKey,
        parent: str | None,
        files: Mapping[str, FileEntry],
        title: str,
        message: str,
        author: str,
    ) -> CommitRecord:
        date = now_iso()
        table = {path: asdict(entry) for path, entry in sorted(files.items())}
        seed = json.dumps([parent, table, title, message, author, date, os.urandom(8).hex()])
        oid = hashlib.sha1(seed.encode(), usedforsecurity=False).hexdigest()
        commit = CommitRecord(oid, parent, title, message, author, date, dict(files))
        self._save_commit(key, commit)
        return commit

    def _save_commit(self, key: RepoKey, commit: CommitRecord) -> None:
        data = {
            "oid": commit.oid,
            "parent": commit.parent,
            "title": commit.title,
            "message": commit.message,
            "author": commit.author,
            "date": commit.date,
            "files": {path: asdict(entry) for path, entry in sorted(commit.files.items())},
        }
        _write_json_atomic(self._dir(key) / "commits" / f"{commit.oid}.json", data)

    def _read_commit(self, key: RepoKey, oid: str) -> CommitRecord:
        raw = json.loads((self._dir(key) / "commits" / f"{oid}.json").read_text())
        files = {path: FileEntry(**entry) for path, entry in raw["files"].items()}
        return CommitRecord(
            raw["oid"],
            raw["parent"],
            raw["title"],
            raw["message"],
            raw["author"],
            raw["date"],
            files,
        )

    def _save_repo(
        self, key: RepoKey, private: bool, created_at: str, refs: Mapping[str, str]
    ) -> None:
        data = {"private": private, "createdAt": created_at, "refs": dict(refs)}
        _write_json_atomic(self._dir(key) / "repo.json", data)


def _regular_entry(data: bytes, sha256: str) -> FileEntry:
    return FileEntry(len(data), git_blob_oid(data), sha256, lfs=False)


def apply_operations(
    files: Mapping[str, FileEntry], operations: Iterable[Operation], commit_oid: str
) -> dict[str, FileEntry]:
    """The file table after `operations`, in order; HubError 404 when deleting what isn't there."""
    result = dict(files)
    for op in operations:
        if isinstance(op, AddFile):
            result[op.path] = op.entry
        elif isinstance(op, DeleteFile):
            if result.pop(op.path, None) is None:
                raise entry_not_found(
                    f"A file with this name doesn't exist: {op.path}", commit_oid=commit_oid
                )
        else:
            prefix = op.path.rstrip("/") + "/"
            doomed = [path for path in result if path.startswith(prefix)]
            if not doomed:
                raise entry_not_found(
                    f"A folder with this name doesn't exist: {op.path}", commit_oid=commit_oid
                )
            for path in doomed:
                del result[path]
    return result
