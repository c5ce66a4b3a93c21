"""File transfer endpoints: `HEAD`/`GET .../resolve/{rev}/{path}` (metadata and download, with
byte ranges) and the git-LFS batch API (batch, upload, verify).

Downloads are served directly (no CDN redirect) with the headers `hf_hub_download` requires:
`X-Repo-Commit`, `ETag` (git blob oid, or sha256 for LFS files) and `Content-Length`. No
`X-Xet-Hash` header is ever sent, so the client downloads over plain HTTP. The LFS batch answer
offers only the `basic` transfer; its upload hrefs point back at this server with a one-shot
ticket in place of credentials, the way a pre-signed storage URL works.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any
from urllib.parse import unquote

from .app import HubState, readable_repo, repo_key, writable_repo
from .auth import Principal
from .errors import HubError, entry_not_found
from .http_io import FileSlice, Request, Response, json_response, parse_range
from .repos import RepoKey
from .routing import URL_REPO_RE, Route, route

LFS_CONTENT_TYPE = "application/vnd.git-lfs+json"
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


def build_routes(state: HubState) -> list[Route]:
    def resolve(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        key = _key(match)
        readable_repo(state, key, principal)
        commit = state.repos.resolve(key, unquote(match.group("rev")))
        path = unquote(match.group("path"))
        entry = commit.files.get(path)
        if entry is None:
            raise entry_not_found(f"Entry not found: {path}", commit_oid=commit.oid)
        etag = entry.sha256 if entry.lfs else entry.git_oid
        headers = {
            "X-Repo-Commit": commit.oid,
            "ETag": f'"{etag}"',
            "Accept-Ranges": "bytes",
            "Content-Disposition": f'inline; filename="{path.rsplit("/", 1)[-1]}"',
        }
        if entry.lfs:
            headers |= {"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(entry.size)}
        status, start, length = 200, 0, entry.size
        wanted = parse_range(request.headers.get("range"), entry.size)
        if wanted is not None:
            status, (start, length) = 206, wanted
            headers["Content-Range"] = f"bytes {start}-{start + length - 1}/{entry.size}"
        return Response(
            status=status,
            content_type="application/octet-stream",
            headers=tuple(headers.items()),
            file=FileSlice(state.objects.path(entry.sha256), start, length),
        )

    def lfs_batch(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        key = _key(match)
        writable_repo(state, key, principal)
        body = request.body.read_json()
        if body.get("operation") != "upload":
            raise HubError(422, "Only the LFS 'upload' operation is supported")
        repo_path = f"{key.repo_type.url_prefix}{key.repo_id}"
        verify_href = f"{request.base_url}/{repo_path}.git/info/lfs/objects/verify"
        objects = [
            _batch_object(obj, request.base_url, verify_href) for obj in body.get("objects", [])
        ]
        response = json_response({"transfer": "basic", "objects": objects, "hash_algo": "sha256"})
        return replace(response, content_type=LFS_CONTENT_TYPE)

    def _batch_object(obj: dict[str, Any], base_url: str, verify_href: str) -> dict[str, Any]:
        oid, size = str(obj.get("oid", "")), int(obj.get("size", -1))
        if not _SHA256_RE.match(oid) or size < 0:
            return {
                "oid": oid,
                "size": size,
                "error": {"code": 422, "message": "Invalid oid or size"},
            }
        if state.objects.size_of(oid) == size:
            return {"oid": oid, "size": size}  # already stored: no actions, the client skips it
        ticket = state.tickets.issue(oid, size)
        return {
            "oid": oid,
            "size": size,
            "authenticated": True,
            "actions": {
                "upload": {"href": f"{base_url}/_lfs/upload/{ticket}", "header": {}},
                "verify": {"href": verify_href, "header": {}},
            },
        }

    def lfs_upload(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        ticket = state.tickets.redeem(match.group("ticket"))
        state.objects.put_stream(request.body.chunks(), ticket.sha256, ticket.size)
        return Response(status=200, content_type="text/plain")

    def lfs_verify(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        key = _key(match)
        writable_repo(state, key, principal)
        body = request.body.read_json()
        oid, size = str(body.get("oid", "")), body.get("size")
        if not _SHA256_RE.match(oid) or state.objects.size_of(oid) != size:
            raise HubError(404, f"LFS object {oid} of size {size} not found")
        return json_response({"message": "Object verified"})

    lfs_prefix = rf"{URL_REPO_RE}\.git/info/lfs/objects"
    return [
        route("HEAD GET", rf"{URL_REPO_RE}/resolve/(?P<rev>[^/]+)/(?P<path>.+)", resolve),
        route("POST", rf"{lfs_prefix}/batch", lfs_batch),
        route("POST", rf"{lfs_prefix}/verify", lfs_verify),
        route("PUT", r"/_lfs/upload/(?P<ticket>[A-Za-z0-9_-]+)", lfs_upload),
    ]


def _key(match: re.Match[str]) -> RepoKey:
    return repo_key(match.group("prefix") or "models", match.group("ns"), match.group("name"))
