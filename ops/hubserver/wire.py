"""JSON shapes of the Hub API, built from the store's records (pure functions).

Field names follow what `huggingface_hub` parses: `RepoFile`/`RepoFolder` (tree and paths-info
entries), `ModelInfo`/`DatasetInfo` (repo info, `siblings`), `GitCommitInfo`, `GitRefs`, and the
`whoami-v2` answer. No Xet fields (`xetHash`) are ever emitted: the client then uses plain HTTP.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from .auth import Principal
from .errors import entry_not_found
from .objects import lfs_pointer
from .repos import CommitRecord, FileEntry, RepoRecord


def file_json(path: str, entry: FileEntry) -> dict[str, Any]:
    data: dict[str, Any] = {"type": "file", "oid": entry.git_oid, "size": entry.size, "path": path}
    if entry.lfs:
        pointer_size = len(lfs_pointer(entry.sha256, entry.size))
        data["lfs"] = {"oid": entry.sha256, "size": entry.size, "pointerSize": pointer_size}
    return data


def folder_json(path: str, files: Mapping[str, FileEntry]) -> dict[str, Any]:
    prefix = path + "/"
    digest = hashlib.sha1(usedforsecurity=False)
    for name in sorted(p for p in files if p.startswith(prefix)):
        digest.update(f"{name} {files[name].git_oid}\n".encode())
    return {"type": "directory", "oid": digest.hexdigest(), "size": 0, "path": path}


def folders_of(files: Mapping[str, FileEntry]) -> set[str]:
    folders: set[str] = set()
    for path in files:
        parts = path.split("/")[:-1]
        folders.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return folders


def tree_listing(commit: CommitRecord, path: str, recursive: bool) -> list[dict[str, Any]]:
    """Entries under folder `path` ("" = root), as `GET .../tree/{rev}/{path}` lists them."""
    files = commit.files
    folders = folders_of(files)
    path = path.strip("/")
    if path and path not in folders:
        raise entry_not_found(f"{path} does not exist on this revision", commit_oid=commit.oid)
    prefix = f"{path}/" if path else ""

    def wanted(candidate: str) -> bool:
        return candidate.startswith(prefix) and (recursive or "/" not in candidate[len(prefix) :])

    entries = [folder_json(p, files) for p in folders if wanted(p)]
    entries += [file_json(p, entry) for p, entry in files.items() if wanted(p)]
    return sorted(entries, key=lambda e: str(e["path"]))


def paths_info(commit: CommitRecord, paths: list[str]) -> list[dict[str, Any]]:
    """Entries for the requested paths that exist; missing paths are left out, as on the Hub."""
    folders = folders_of(commit.files)
    result = []
    for raw in paths:
        path = raw.strip("/")
        if path in commit.files:
            result.append(file_json(path, commit.files[path]))
        elif path in folders:
            result.append(folder_json(path, commit.files))
    return result


def repo_info_json(record: RepoRecord, commit: CommitRecord, with_blobs: bool) -> dict[str, Any]:
    siblings = []
    for path, entry in sorted(commit.files.items()):
        sibling: dict[str, Any] = {"rfilename": path}
        if with_blobs:
            sibling.update(size=entry.size, blobId=entry.git_oid)
            if entry.lfs:
                pointer_size = len(lfs_pointer(entry.sha256, entry.size))
                sibling["lfs"] = {
                    "size": entry.size,
                    "sha256": entry.sha256,
                    "pointerSize": pointer_size,
                }
        siblings.append(sibling)
    key = record.key
    data: dict[str, Any] = {
        "_id": hashlib.sha1(str(key).encode(), usedforsecurity=False).hexdigest()[:24],
        "id": key.repo_id,
        "author": key.namespace,
        "sha": commit.oid,
        "lastModified": commit.date,
        "createdAt": record.created_at,
        "private": record.private,
        "gated": False,
        "disabled": False,
        "downloads": 0,
        "likes": 0,
        "tags": [],
        "siblings": siblings,
        "usedStorage": sum(entry.size for entry in commit.files.values()),
    }
    if key.repo_type.value == "model":
        data["modelId"] = key.repo_id
    return data


def commit_json(commit: CommitRecord) -> dict[str, Any]:
    return {
        "id": commit.oid,
        "title": commit.title,
        "message": commit.message,
        "authors": [{"user": commit.author, "avatar": ""}],
        "date": commit.date,
    }


def refs_json(record: RepoRecord) -> dict[str, Any]:
    branches = [
        {"name": name, "ref": f"refs/heads/{name}", "targetCommit": oid}
        for name, oid in sorted(record.refs.items())
    ]
    return {"branches": branches, "converts": [], "tags": [], "pullRequests": []}


def whoami_json(principal: Principal) -> dict[str, Any]:
    user = principal.user or ""
    return {
        "type": "user",
        "id": hashlib.sha1(user.encode(), usedforsecurity=False).hexdigest()[:24],
        "name": user,
        "fullname": user,
        "email": None,
        "emailVerified": False,
        "canPay": False,
        "isPro": False,
        "periodEnd": None,
        "avatarUrl": "",
        # As the Hub says it: the user's role in each org (this server's orgs are all written).
        "orgs": [
            {"type": "org", "name": org, "fullname": org, "roleInOrg": "write"}
            for org in principal.orgs
        ],
        "auth": {
            "type": "access_token",
            "accessToken": {
                "displayName": f"hubserver-{principal.role}",
                "role": str(principal.role),
            },
        },
    }
