"""A job's snapshot staged on the Hub (the local Hub server): under the destination's prefix as
`code/<commit>.tar.gz`, through `producer.stage`, and not sent again when it is there."""

from __future__ import annotations

import subprocess
from pathlib import Path

from producer.code.snapshot import archive_name, build_archive
from producer.code.staging import ALREADY_THERE, UPLOADED, snapshot_uri, stage_archive
from tests.cli.code_repo import commit_all, git
from worker.store.hub import HubStore

from .conftest import Hub, hf_dest


def test_a_snapshot_is_staged_once_under_the_prefix(
    hub: Hub, store: HubStore, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "train.sh").write_text("echo train\n")
    git(repo, "init", "-q", "-b", "main")
    commit = commit_all(repo, "first")
    archive = tmp_path / "code.tar.gz"
    build_archive(repo, commit, (), archive)
    dest = hf_dest(prefix="coco-detr")
    uri = snapshot_uri(dest, archive_name(commit, ""))
    assert uri == f"hf://alice/runs/coco-detr/code/{commit}.tar.gz"

    assert stage_archive(archive, dest, uri, lambda: store) == UPLOADED
    sha = hub.api().repo_info("alice/runs").sha
    assert stage_archive(archive, dest, uri, lambda: store) == ALREADY_THERE
    assert hub.api().repo_info("alice/runs").sha == sha  # nothing committed again
    assert store.exists_nonempty(uri) == archive.stat().st_size

    got = store.download(uri, tmp_path / "down")
    listed = subprocess.run(["tar", "-tzf", str(got)], capture_output=True, text=True, check=True)
    assert set(listed.stdout.split()) == {"train.sh", ".colabq-commit"}
