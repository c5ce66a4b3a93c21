"""Where a snapshot is staged, and staging it: under the job's destination prefix, as
`<prefix>/code/<commit>[-<digest>].tar.gz`.

A Hub destination gets it through `producer.stage` (one commit, the byte count read back), a
local store (a rehearsal) by a copy into the store's folder, given to the VM as a `file:///`
URI. An archive already there with the same size is the same archive (its name says what it
holds), so it is not sent again.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from worker.spec import ArtifactDest
from worker.vm.colabq_sync import format_hf_uri

if TYPE_CHECKING:
    from worker.store.hub import HubStore

UPLOADED = "uploaded"
ALREADY_THERE = "already there"


def snapshot_uri(dest: ArtifactDest, name: str) -> str:
    """The URI the VM downloads the archive `name` (`code/...tar.gz`) from."""
    path = "/".join(p for p in (dest.prefix, name) if p)
    if dest.kind == "local":
        return f"file://{(Path(dest.repo) / path).resolve()}"  # as colabq_sync.py reads it
    return format_hf_uri(dest.repo_type, dest.repo, path)


def stage_archive(
    archive: Path, dest: ArtifactDest, uri: str, hub_store: Callable[[], HubStore]
) -> str:
    """Put `archive` at `uri` (see `snapshot_uri`); returns UPLOADED or ALREADY_THERE. A Hub
    destination's store is `hub_store()` (this machine's login: `build_hub_store`)."""
    size = archive.stat().st_size
    if dest.kind == "local":
        return _copy(archive, Path(uri.removeprefix("file://")), size)
    from producer.stage import stage
    from worker.errors import HubEmptyArtifact, HubNotFound

    store = hub_store()
    try:
        there = store.exists_nonempty(uri)
    except (HubNotFound, HubEmptyArtifact):
        there = 0
    if there == size:
        return ALREADY_THERE
    stage(archive, uri, store, overwrite=bool(there))
    return UPLOADED


def _copy(archive: Path, target: Path, size: int) -> str:
    if target.is_file() and target.stat().st_size == size:
        return ALREADY_THERE
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    shutil.copyfile(archive, partial)
    os.replace(partial, target)  # never a half-written archive under the real name
    return UPLOADED
