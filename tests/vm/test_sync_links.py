"""The wrapper's syncs, run as the VM runs them, follow no link the job made: a job (run as an
unprivileged user under a root wrapper) fills its sync path with links to /etc/passwd, to the
uploader's own /proc/self/environ (which holds the token), to the token's place in /content and
to a folder outside, under a sync path and a prefix named with quotes and `$()`; a `code:` job
whose subdir is a link in its repository (to /etc) syncs `passwd` from there. Only the job's
real files reach the store, each link is named as left out, and no name ran as code."""

from __future__ import annotations

import secrets
from pathlib import Path

from tests.gitremote import pushed_repo
from tests.vm.conftest import Vm

TOKEN = "hf_wrapper_canary_" + secrets.token_hex(8)
SYNC = "out $(touch pwned) `touch pwned` '\""
PREFIX = "p$(touch${IFS}pwned)'\""
PLANT = """\
mkdir -p "$SYNC_PATH/sub"
echo real > "$SYNC_PATH/real.txt"
echo deep > "$SYNC_PATH/sub/deep.txt"
ln -s /etc/passwd "$SYNC_PATH/passwd"
ln -s /proc/self/environ "$SYNC_PATH/environ"
ln -s "$CONTENT/.colabq-upload-token" "$SYNC_PATH/token"
ln -s "$CONTENT/colab-jobs/j1/logs" "$SYNC_PATH/logs"
ln -s real.txt "$SYNC_PATH/inner"
"""


def token_file(vm: Vm) -> Path:
    path = vm.content / ".colabq-upload-token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    return path


def store_files(store: Path) -> list[str]:
    return sorted(p.relative_to(store).as_posix() for p in store.rglob("*") if not p.is_dir())


def leaked(root: Path) -> list[str]:
    return [
        str(p) for p in root.rglob("*")
        if p.is_file() and not p.is_symlink()
        and (TOKEN.encode() in p.read_bytes() or b"root:x:0:0" in p.read_bytes())
    ]  # fmt: skip


def test_the_links_a_job_plants_in_its_sync_path_are_never_followed(vm: Vm) -> None:
    vm.env.update(SYNC_PATH=SYNC, CONTENT=str(vm.content))
    run = vm.run(PLANT, "--sync", SYNC, "--prefix", PREFIX, "--token-file", str(token_file(vm)))
    assert run.rc == 0, run.console
    # Named with quotes and $(): the store keeps both names byte for byte.
    files = [f for f in store_files(vm.store) if not f.startswith(f"{PREFIX}/logs/")]
    assert files == [f"{PREFIX}/{SYNC}/real.txt", f"{PREFIX}/{SYNC}/sub/deep.txt"]
    said = [line for line in run.console.splitlines() if "not uploaded from" in line]
    assert said and all(
        f"{name} (a symbolic link: never followed)" in said[-1]
        for name in ("passwd", "environ", "token", "logs", "inner")
    ), said
    assert not [p for p in vm.store.rglob("*") if p.is_symlink()]
    assert leaked(vm.store) == []
    assert not list(vm.root.rglob("pwned")) and not list(vm.store.rglob("pwned"))


def test_a_subdir_that_is_a_link_in_the_repository_syncs_nothing_from_outside(
    vm: Vm, tmp_path: Path
) -> None:
    bare, _, commit = pushed_repo(tmp_path, "r.git", lambda work: (work / "etc").symlink_to("/etc"))
    run = vm.run(
        "echo cwd: $PWD\n", "--code-mode", "git", "--code-commit", commit,
        "--code-remote", str(bare), "--code-subdir", "etc", "--sync", "passwd",
        "--token-file", str(token_file(vm)),
    )  # fmt: skip
    assert run.rc == 0, run.console
    assert "from repo/etc/passwd: repo/etc (a symbolic link: never followed)" in run.console
    assert [f for f in store_files(vm.store) if not f.startswith("p/logs/")] == []
    assert leaked(vm.store) == []
