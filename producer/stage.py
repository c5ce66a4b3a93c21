"""Staging: put a local data set or checkpoint on the Hub before submitting, so that the job
declares it as an `hf://` input (`--hub-input NAME=URI`) instead of carrying it.

Owns `stage()` — refuses to overwrite data already there unless asked, and proves the upload by
reading the byte count back (the command is `producer/commands/stage.py`). Also what every
producer command that talks to the Hub uses: `find_hub_token()`, this machine's login as
huggingface_hub finds it, and `build_hub_store()`, the store on `Settings.hub_endpoint()` with
that token. Every transfer is
`worker.store.hub.HubStore`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from worker.errors import (
    HubAuthError,
    HubDestinationExists,
    HubEmptyArtifact,
    HubNotFound,
    StoreError,
    UserInputError,
)
from worker.spec import ArtifactDest
from worker.store.hub import HubStore, RepoCheck, RetryPolicy, parse_hf_uri
from worker.vm.colabq_sync import format_hf_uri

if TYPE_CHECKING:
    from worker.settings import Settings


@dataclass(frozen=True)
class StageResult:
    uri: str
    commit: str
    size_bytes: int
    files: int
    replaced_bytes: int  # what was there before (0: nothing, or only empty files)
    repo: RepoCheck


def local_size(path: Path) -> tuple[int, int]:
    """(bytes, files) of a file or of every file below a folder."""
    if path.is_file():
        return path.stat().st_size, 1
    files = [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files), len(files)


def stage(path: Path, to_uri: str, store: HubStore, *, overwrite: bool = False) -> StageResult:
    """Upload `path` (a file or folder) to `to_uri` in one commit, on a private repo (created if
    missing). Data already at `to_uri` is kept unless `overwrite`, which then mirrors `path`."""
    ref = parse_hf_uri(to_uri)
    if ref.revision is not None:
        raise UserInputError(f"{to_uri}: staging writes to main; drop the @revision.")
    if not path.exists():
        raise UserInputError(f"{path} does not exist.")
    size_bytes, files = local_size(path)
    if size_bytes == 0:
        raise UserInputError(f"{path} holds no data: nothing to stage.")
    repo_path = ref.path or (path.name if path.is_file() else "")
    uri = format_hf_uri(ref.repo_type, ref.repo_id, repo_path)
    dest = ArtifactDest(kind="hf", repo=ref.repo_id, repo_type=ref.repo_type)
    repo = store.check_output_repo(dest)
    try:
        existing = store.exists_nonempty(uri)
    except (HubNotFound, HubEmptyArtifact):
        existing = 0
    if existing and not overwrite:
        raise HubDestinationExists(uri, existing)
    commit = store.upload_folder(path, dest, repo_path, replace=overwrite)
    remote_bytes = store.exists_nonempty(uri)
    if remote_bytes != size_bytes:
        raise StoreError(
            f"{uri} holds {remote_bytes} bytes after commit {commit[:12]}, {size_bytes} expected."
        )
    return StageResult(uri, commit, size_bytes, files, existing, repo)


def find_hub_token() -> str | None:
    """This machine's Hub token, found as huggingface_hub finds it (`get_token()`): HF_TOKEN,
    else the token file of `hf auth login` (HF_TOKEN_PATH, else HF_HOME/token, HF_HOME defaulting
    to $XDG_CACHE_HOME/huggingface or ~/.cache/huggingface). None when not logged in."""
    from huggingface_hub import constants, get_token
    from huggingface_hub.errors import OIDCError

    try:
        return get_token()
    except OSError as exc:  # e.g. the token path is a folder, or not readable by this user
        raise UserInputError(
            f"Cannot read the Hub token file {constants.HF_TOKEN_PATH} "
            f"({exc.strerror or type(exc).__name__}): fix it, or log in again (`hf auth login`)."
        ) from None
    except OIDCError as exc:
        raise HubAuthError("", None, f"the OIDC token exchange failed ({exc})") from None


def build_hub_store(settings: Settings, *, retry: RetryPolicy | None = None) -> HubStore:
    """The store on this machine's Hub (`Settings.hub_endpoint()`) with its login, required."""
    endpoint = settings.hub_endpoint()
    token = find_hub_token()
    if token is None:
        raise HubAuthError(
            "", None, "no Hub token found: run `hf auth login`, or set HF_TOKEN (or HF_TOKEN_PATH)"
        )
    return HubStore(endpoint, token, retry=retry)
