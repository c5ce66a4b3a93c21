"""The VM's uploader (`colabq_sync.py`, root on the VM) never follows a symbolic link out of a sync
path. A job's sync path holds links to /etc/passwd, to the bundle's token copy, to the
uploader's own /proc/self/environ (its HF_TOKEN), to a folder outside, and links inside the
path (to a file and to a folder), a FIFO, and real files; one sync path is itself a link, another
lies under one. Uploaded by the real script to the local Hub and to a local store: only the real
files arrive, each link is named as left out, no byte of a target is anywhere in the result."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from .conftest import Hub, SyncRun

OUTSIDE_CANARY = "outside_canary_" + secrets.token_hex(8)
TOKEN_CANARY = "hf_bundle_copy_" + secrets.token_hex(8)
LINKS = ("passwd", "token", "environ", "outside", "inner", "innerdir")


@pytest.fixture
def work(tmp_path: Path) -> Path:
    content = tmp_path / "content"
    (content / ".colabq-upload-token").parent.mkdir(parents=True)
    (content / ".colabq-upload-token").write_text(TOKEN_CANARY)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(OUTSIDE_CANARY)
    work = content / "colab-jobs" / "j1"
    out = work / "out"
    (out / "sub").mkdir(parents=True)
    (out / "real.txt").write_text("real\n")
    (out / "sub" / "deep.txt").write_text("deep\n")
    (out / "passwd").symlink_to("/etc/passwd")
    (out / "token").symlink_to("../../../.colabq-upload-token")
    (out / "environ").symlink_to("/proc/self/environ")
    (out / "outside").symlink_to(outside)
    (out / "inner").symlink_to("real.txt")
    (out / "innerdir").symlink_to("sub")
    os.mkfifo(out / "fifo")
    (work / "linked").symlink_to(outside)
    (work / "repo").mkdir()
    (work / "repo" / "sub").symlink_to(outside)
    return work


def leaks(data: bytes, token: str) -> list[str]:
    needles = {"outside": OUTSIDE_CANARY, "token copy": TOKEN_CANARY, "HF_TOKEN": token}
    found = [name for name, text in needles.items() if text.encode() in data]
    return found + (["/etc/passwd"] if b"root:x:0:0" in data else [])


def test_the_hub_gets_the_real_files_and_no_target_of_a_link(
    hub: Hub, run_sync: SyncRun, work: Path, tmp_path: Path
) -> None:
    token = hub.tokens["alice_write"]
    hub.api().create_repo("alice/runs", private=True)
    commits = len(hub.api().list_repo_commits("alice/runs"))

    done = run_sync("--kind", "hf", "--repo", "alice/runs", "--root", str(work), "--src", "out",
                    "--dst", "exp/out", token=token)  # fmt: skip

    assert done.returncode == 0, done.stderr
    files = set(hub.api().list_repo_files("alice/runs")) - {".gitattributes"}
    assert files == {"exp/out/real.txt", "exp/out/sub/deep.txt"}
    [said] = [line for line in done.stdout.splitlines() if "not uploaded from out" in line]
    for name in LINKS:
        assert f"{name} (a symbolic link: never followed)" in said, said
    assert "fifo (not a regular file or folder)" in said
    for path in files:
        local = hub.api().hf_hub_download("alice/runs", path, local_dir=tmp_path / "got")
        assert leaks(Path(local).read_bytes(), token) == [], path
    # A sync path that is a link, or lies under one, is left out whole: nothing is committed.
    for src in ("linked", "repo/sub/secret.txt"):
        done = run_sync("--kind", "hf", "--repo", "alice/runs", "--root", str(work), "--src",
                        src, "--dst", "exp/x", token=token)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "a symbolic link: never followed" in done.stdout, done.stdout
    assert len(hub.api().list_repo_commits("alice/runs")) == commits + 1


def test_a_local_store_gets_the_real_files_and_no_target_of_a_link(
    run_sync: SyncRun, work: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    for src in ("out", "linked", "repo/sub/secret.txt"):
        done = run_sync("--kind", "local", "--repo", str(store), "--root", str(work), "--src",
                        src, "--dst", f"exp/{Path(src).name}", token=None)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "a symbolic link: never followed" in done.stdout, done.stdout
    got = sorted(p.relative_to(store).as_posix() for p in store.rglob("*") if not p.is_dir())
    assert got == ["exp/out/real.txt", "exp/out/sub/deep.txt"]
    assert not [p for p in store.rglob("*") if p.is_symlink()]
    assert all(leaks(p.read_bytes(), "-") == [] for p in store.rglob("*") if p.is_file())
    assert (store / "exp" / "out" / "real.txt").read_text() == "real\n"


def test_a_path_outside_the_root_or_missing_is_refused_in_one_line(
    run_sync: SyncRun, work: Path, tmp_path: Path
) -> None:
    store = str(tmp_path / "store")
    climbs = run_sync("--kind", "local", "--repo", store, "--root", str(work), "--src", "../..",
                      "--dst", "x", token=None)  # fmt: skip
    assert climbs.returncode == 2 and climbs.stderr.count("\n") == 1, climbs.stderr
    gone = run_sync("--kind", "local", "--repo", store, "--root", str(work), "--src", "nothing",
                    "--dst", "x", token=None)  # fmt: skip
    assert gone.returncode == 1 and gone.stderr == "colabq_sync: nothing does not exist\n"
