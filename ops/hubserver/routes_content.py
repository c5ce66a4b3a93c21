"""Repo content endpoints: preupload (regular vs LFS), commit (NDJSON), tree listing (paginated)
and paths-info.

The upload-mode answer is only ever "regular" or "lfs": this server has no Xet storage. Whether a
file goes to LFS follows the Hub's rule of thumb: at least the LFS threshold (10 MiB by default)
or binary-looking (a NUL byte in its first 512 bytes).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode

from .app import HubState, readable_repo, repo_key, repo_url, writable_repo
from .auth import Principal
from .errors import bad_request
from .http_io import Request, Response, json_response
from .objects import git_blob_oid, lfs_pointer
from .repos import (
    AddFile,
    DeleteFile,
    DeleteFolder,
    FileEntry,
    Operation,
    RepoKey,
    check_path_in_repo,
)
from .routing import API_REPO_RE, Route, route
from .wire import paths_info, tree_listing


def upload_mode(size: int, sample: bytes, threshold_bytes: int) -> str:
    return "lfs" if size >= threshold_bytes or b"\x00" in sample else "regular"


def build_routes(state: HubState) -> list[Route]:
    threshold = state.config.lfs_threshold_bytes

    def preupload(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        key = _key(match)
        writable_repo(state, key, principal)
        _refuse_pull_requests(request)
        head = state.repos.resolve(key, unquote(match.group("rev")))
        files = request.body.read_json().get("files")
        if not isinstance(files, list):
            raise bad_request("Expected a `files` list")
        answers = []
        for item in files:
            path = check_path_in_repo(str(item.get("path", "")))
            sample = base64.b64decode(item.get("sample") or "")
            mode = upload_mode(int(item.get("size", 0)), sample, threshold)
            existing = head.files.get(path)
            answers.append(
                {
                    "path": path,
                    "uploadMode": mode,
                    "shouldIgnore": False,
                    # The client skips unchanged files by comparing this with its own oid:
                    # sha256 for LFS files, git blob oid for regular ones.
                    "oid": _remote_oid(existing, mode) if existing else None,
                }
            )
        return json_response({"files": answers, "commitOid": head.oid})

    def commit(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        key = _key(match)
        writable_repo(state, key, principal)
        _refuse_pull_requests(request)
        header, operations = _parse_commit(request.body.read_all(), state, threshold)
        assert principal.user is not None  # writable_repo rejects anonymous callers
        record = state.repos.commit(
            key,
            unquote(match.group("rev")),
            operations,
            title=str(header.get("summary") or ""),
            message=str(header.get("description") or ""),
            author=principal.user,
            parent_commit=header.get("parentCommit"),
        )
        url = f"{repo_url(request.base_url, key)}/commit/{record.oid}"
        return json_response(
            {"success": True, "commitOid": record.oid, "commitUrl": url, "pullRequestUrl": None}
        )

    def tree(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        key = _key(match)
        readable_repo(state, key, principal)
        head = state.repos.resolve(key, unquote(match.group("rev")))
        recursive = request.query_flag("recursive")
        entries = tree_listing(head, unquote(match.group("path") or ""), recursive)
        cursor = int((request.query.get("cursor") or ["0"])[-1] or 0)
        page_size = state.config.tree_page_size
        page = entries[cursor : cursor + page_size]
        headers = {}
        if cursor + page_size < len(entries):
            query = {k: v[-1] for k, v in request.query.items() if k != "cursor"}
            query["cursor"] = str(cursor + page_size)
            headers["Link"] = f'<{request.base_url}{request.path}?{urlencode(query)}>; rel="next"'
        return json_response(page, headers=headers)

    def get_paths_info(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        key = _key(match)
        readable_repo(state, key, principal)
        head = state.repos.resolve(key, unquote(match.group("rev")))
        return json_response(paths_info(head, _requested_paths(request)))

    return [
        route("POST", f"{API_REPO_RE}/preupload/(?P<rev>[^/]+)", preupload),
        route("POST", f"{API_REPO_RE}/commit/(?P<rev>[^/]+)", commit),
        route("GET", f"{API_REPO_RE}/tree/(?P<rev>[^/]+)(?:/(?P<path>.*))?", tree),
        route("POST", f"{API_REPO_RE}/paths-info/(?P<rev>[^/]+)", get_paths_info),
    ]


def _key(match: re.Match[str]) -> RepoKey:
    return repo_key(match.group("type"), match.group("ns"), match.group("name"))


def _refuse_pull_requests(request: Request) -> None:
    if request.query_flag("create_pr"):
        raise bad_request("Pull requests (create_pr=1) are not supported by this server")


def _remote_oid(entry: FileEntry, mode: str) -> str:
    return entry.sha256 if mode == "lfs" else entry.git_oid


def _requested_paths(request: Request) -> list[str]:
    raw = request.body.read_all()
    if "json" in request.headers.get("content-type", ""):
        paths = json.loads(raw or b"{}").get("paths", [])
    else:
        paths = parse_qs(raw.decode()).get("paths", [])
    return [str(p) for p in (paths if isinstance(paths, list) else [paths])]


def _parse_commit(
    raw: bytes, state: HubState, threshold_bytes: int
) -> tuple[dict[str, Any], list[Operation]]:
    header: dict[str, Any] | None = None
    operations: list[Operation] = []
    for line in raw.splitlines():
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            kind, value = item["key"], item["value"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise bad_request(f"Malformed commit line: {exc}") from exc
        if kind == "header":
            header = value
        elif kind == "file":
            operations.append(_regular_file(value, state, threshold_bytes))
        elif kind == "lfsFile":
            operations.append(_lfs_file(value, state))
        elif kind == "deletedFile":
            operations.append(DeleteFile(check_path_in_repo(str(value["path"]))))
        elif kind == "deletedFolder":
            operations.append(DeleteFolder(check_path_in_repo(str(value["path"]).rstrip("/"))))
        else:
            raise bad_request(f"Unsupported commit operation {kind!r}")
    if header is None:
        raise bad_request("Commit payload has no header line")
    return header, operations


def _regular_file(value: dict[str, Any], state: HubState, threshold_bytes: int) -> AddFile:
    path = check_path_in_repo(str(value.get("path", "")))
    if value.get("encoding", "base64") != "base64":
        raise bad_request(f"Unsupported encoding for {path}")
    try:
        data = base64.b64decode(value.get("content", ""), validate=True)
    except binascii.Error as exc:
        raise bad_request(f"Invalid base64 content for {path}") from exc
    if len(data) >= threshold_bytes:
        raise bad_request(
            f"Your push was rejected because it contains files larger than "
            f"{threshold_bytes} bytes ({path}). Please use LFS to store large files."
        )
    sha256 = state.objects.put_bytes(data)
    return AddFile(path, FileEntry(len(data), git_blob_oid(data), sha256, lfs=False))


def _lfs_file(value: dict[str, Any], state: HubState) -> AddFile:
    path = check_path_in_repo(str(value.get("path", "")))
    sha256 = str(value.get("oid", ""))
    stored_size = state.objects.size_of(sha256) if re.fullmatch(r"[0-9a-f]{64}", sha256) else None
    if stored_size is None or ("size" in value and int(value["size"]) != stored_size):
        raise bad_request(
            f"Your push was rejected because an LFS pointer pointed to a file that does not "
            f"exist ({path}, sha256 {sha256})"
        )
    pointer = lfs_pointer(sha256, stored_size)
    return AddFile(path, FileEntry(stored_size, git_blob_oid(pointer), sha256, lfs=True))
