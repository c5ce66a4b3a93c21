"""Staging: put a local data set or checkpoint on the Hub before submitting, so that the job
declares it as an `hf://` input (`--hub-input NAME=URI`) instead of carrying it.

Owns `stage()` — refuses to overwrite data already there unless asked, and proves the upload by
reading the byte count back — and `stage_command`, the `colabq stage` command function that
producer/cli.py registers. The token and endpoint are resolved here, at the command's entry;
every transfer is `worker.store.hub.HubStore`'s.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from worker.errors import (
    HubAuthError,
    HubDestinationExists,
    HubEmptyArtifact,
    HubNotFound,
    StoreError,
    UserInputError,
)
from worker.spec import ArtifactDest
from worker.store.hub import HubStore, RepoCheck, parse_hf_uri
from worker.vm.colabq_sync import format_hf_uri


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


def resolve_token(env: Mapping[str, str], home: Path) -> str | None:
    """HF_TOKEN, else the file huggingface_hub's login writes (HF_TOKEN_PATH, HF_HOME/token)."""
    if token := env.get("HF_TOKEN", "").strip():
        return token
    hf_home = Path(env.get("HF_HOME") or home / ".cache" / "huggingface")
    token_path = Path(env.get("HF_TOKEN_PATH") or hf_home / "token")
    if token_path.is_file():
        return token_path.read_text().strip() or None
    return None


def build_hub_store(env: Mapping[str, str], home: Path) -> HubStore:
    token = resolve_token(env, home)
    if token is None:
        raise HubAuthError("", None, "no Hub token found (HF_TOKEN, HF_TOKEN_PATH, HF_HOME/token)")
    return HubStore(env.get("HF_ENDPOINT") or None, token)


def stage_command(
    path: Annotated[Path, typer.Argument(help="Local file or folder (a data set, a checkpoint).")],
    to: Annotated[str, typer.Option("--to", help="hf://[datasets/]OWNER/REPO/PATH")],
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace data already at --to (mirror PATH).")
    ] = False,
) -> None:
    """Upload local data to a private Hub repo, to declare it later with --hub-input NAME=URI."""
    result = stage(path, to, build_hub_store(os.environ, Path.home()), overwrite=overwrite)
    replaced = f", replacing {result.replaced_bytes} bytes" if result.replaced_bytes else ""
    typer.echo(
        f"staged {result.uri}: {result.size_bytes} bytes in {result.files} file(s), "
        f"commit {result.commit[:12]}{replaced} ({result.repo.detail})"
    )
    typer.echo(f"declare it with: --hub-input NAME={result.uri}")
