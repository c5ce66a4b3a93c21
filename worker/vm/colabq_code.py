"""colabq's code stage on the VM: the job's repository at exactly its commit, and its uv
environment, before the job runs. Started by the wrapper (colab-job.sh) with the VM's python3.

1. The code, into `--repo` (`$WORK/repo`):
   - git: `git init`, `git fetch --depth 1 REMOTE COMMIT` (a fetch by SHA), `git checkout
     --detach FETCH_HEAD`, and `git rev-parse HEAD` must be COMMIT. A private remote's read
     credential arrives as a file (`--credentials`, git-credential-store format) and is used
     only through `credential.helper=store --file=...`; an ssh remote's deploy key arrives the
     same way (`--ssh-key`) and is used alone (`IdentitiesOnly`, `BatchMode`) against the known
     hosts colabq ships (`--known-hosts`, `StrictHostKeyChecking=accept-new`). Either is deleted
     once the fetch is over, whatever its outcome. Git never prompts (no terminal,
     GIT_TERMINAL_PROMPT=0).
   - snapshot: the wrapper downloaded the archive (`--archive`, a .tar.gz of `git archive` plus
     `.colabq-commit`); it is unpacked (nothing may land outside the folder) and its recorded
     commit must be COMMIT.
   The job's folder is `--subdir` of the repository, which must exist.
2. With `--uv`: uv found on PATH, else installed (`python3 -m pip install uv`); Colab's presets
   are unset for uv commands; `uv sync --frozen` in the job's folder (uv finds the project and
   reads its own Python pin); then colabq_envcheck.py runs in the project's environment and
   names the known breakages, repairing those named by `--repair`.
3. With `--as-user UID:GID:HOME` (the wrapper runs as root and the job as that user): the
   checkout is handed to the job's user before uv runs, and uv runs as that user (its HOME, a uv
   cache of its own), so the .venv is the job's and its Python one the job can run (uv skips
   those it cannot, such as a Python under root's HOME). Git always runs as the wrapper's user:
   only it reads the credential.

Writes into `--out`: `code.json` and `environment.json` (one JSON object each, the wrapper's
CODE and ENVIRONMENT sentinels), `uv` (the uv to run the job with) and `jobdir`. Its own lines go
to stdout (the job's log). Exit 0 ready; 4 the code could not be had; 5 `uv sync --frozen`
failed; 64 bad command line.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EXIT_CODE, EXIT_ENV, EXIT_USAGE = 4, 5, 64
COMMIT_FILE = ".colabq-commit"
PRESETS = ("UV_SYSTEM_PYTHON", "PYTHONPATH", "MPLBACKEND", "VIRTUAL_ENV")


class StageError(Exception):
    """The one line saying why the job cannot run."""


@dataclass(frozen=True)
class JobUser:
    """The job's unprivileged user on the VM, whom uv runs as."""

    uid: int
    gid: int
    home: str

    @classmethod
    def parse(cls, text: str) -> JobUser | None:
        if not text:
            return None
        uid, gid, home = text.split(":", 2)
        return cls(int(uid), int(gid), home)

    def hand_over(self, repo: Path) -> None:
        """The checkout becomes the job user's: links themselves, never what they point to."""
        for path in [repo, *repo.rglob("*")]:
            os.chown(path, self.uid, self.gid, follow_symlinks=False)


def popen_as(user: JobUser | None) -> dict[str, Any]:
    return {} if user is None else {"user": user.uid, "group": user.gid, "extra_groups": []}


def say(text: str) -> None:
    print(f"colabq: {text}", flush=True)


class RunFailed(Exception):
    """A command failed; `line` is the first of its last lines that says what went wrong."""

    def __init__(self, code: int, lines: list[str]) -> None:
        super().__init__(code)
        self.code = code
        errors = [ln for ln in lines if ln.lower().startswith(("error", "fatal"))]
        self.line = (errors or lines or [f"exit {code}"])[0]


def run(
    argv: Sequence[str],
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    echo: bool = True,
    user: JobUser | None = None,
) -> str:
    """Run `argv` (as `user`, if given) with its output copied to ours (the job's log) unless
    not `echo`; its last line. RunFailed if it fails."""
    try:
        proc = subprocess.Popen(
            list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, errors="replace", **popen_as(user),
        )  # fmt: skip
    except OSError as exc:  # not there, or not for this user
        raise RunFailed(127, [f"error: cannot run {argv[0]}: {exc.strerror}"]) from None
    assert proc.stdout is not None
    lines: list[str] = []
    for line in proc.stdout:
        if echo:
            sys.stdout.write(line)
        if line.strip():
            lines.append(line.strip())
            del lines[:-20]
    sys.stdout.flush()
    if proc.wait() != 0:
        raise RunFailed(proc.returncode, lines)
    return lines[-1] if lines else ""


@dataclass(frozen=True)
class SshKey:
    """The deploy key (moved by the wrapper into its root-only secrets folder) and the known
    hosts colabq ships, copied beside it: `accept-new` writes a new host's key there."""

    key: Path
    known_hosts: Path

    def command(self) -> str:
        return shlex.join([
            "ssh", "-i", str(self.key), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=accept-new",
            "-o", f"UserKnownHostsFile={self.known_hosts}",
        ])  # fmt: skip

    def remove(self) -> None:
        self.key.unlink(missing_ok=True)
        self.known_hosts.unlink(missing_ok=True)


def git_env(ssh: SshKey | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in PRESETS}
    command = ssh.command() if ssh is not None else "ssh -o BatchMode=yes"
    env.update(GIT_TERMINAL_PROMPT="0", GIT_SSH_COMMAND=command)
    return env


def fetch_git(
    repo: Path, remote: str, commit: str, credentials: Path | None, ssh: SshKey | None = None
) -> None:
    helper = ["-c", "credential.helper="]
    if credentials is not None:
        helper += ["-c", f"credential.helper=store --file={shlex.quote(str(credentials))}"]
    env = git_env(ssh)
    try:
        run(["git", "-c", "init.defaultBranch=colabq", "init", "-q", str(repo)], env=env)
        say(f"fetching {commit} from {remote}")
        run(["git", *helper, "fetch", "-q", "--depth", "1", "--no-tags", remote, commit],
            cwd=repo, env=env)  # fmt: skip
        run(["git", "checkout", "-q", "--detach", "FETCH_HEAD"], cwd=repo, env=env)
        head = run(["git", "rev-parse", "HEAD"], cwd=repo, env=env, echo=False)
    except RunFailed as exc:
        raise StageError(
            f"commit {commit} could not be fetched from {remote}: {exc.line}"
        ) from None
    finally:
        if credentials is not None:
            credentials.unlink(missing_ok=True)
        if ssh is not None:
            ssh.remove()
    if head != commit:
        raise StageError(f"{remote} gave commit {head} for {commit}")


def unpack(repo: Path, archive: Path, commit: str) -> None:
    """Unpack the snapshot into `repo`: regular files, folders and links inside it only."""
    root = repo.resolve()
    try:
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                target = (root / member.name).resolve()
                link = (target.parent / member.linkname).resolve() if member.issym() else root
                if not (member.isfile() or member.isdir() or member.issym()) or not all(
                    p == root or root in p.parents for p in (target, link)
                ):
                    raise StageError(f"the snapshot {archive.name} holds {member.name!r}")
            safe: dict[str, Any] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(root, **safe)  # noqa: S202 - every member checked above
    except (OSError, tarfile.TarError) as exc:
        raise StageError(f"the snapshot {archive.name} could not be unpacked: {exc}") from None
    finally:
        archive.unlink(missing_ok=True)
    recorded = (repo / COMMIT_FILE).read_text().strip() if (repo / COMMIT_FILE).is_file() else ""
    if recorded != commit:
        raise StageError(
            f"the snapshot records commit {recorded or '(none)'}, not {commit}: stage it again"
        )


def find_uv() -> str:
    """uv on PATH (Colab's image has it), else installed with the VM's pip."""
    found = shutil.which("uv")
    if found:
        return found
    say("uv is not on PATH; installing it (python3 -m pip install uv)")
    try:
        run([sys.executable, "-m", "pip", "install", "--quiet", "uv"])
    except RunFailed as exc:
        raise StageError(f"uv is not on the VM and could not be installed: {exc.line}") from None
    importlib.invalidate_caches()
    try:
        uv_module = importlib.import_module("uv")
        return str(uv_module.find_uv_bin())
    except (ImportError, FileNotFoundError, AttributeError):
        found = shutil.which("uv")
    if not found:
        raise StageError("uv was installed but cannot be found on the VM")
    return found


def uv_env(user: JobUser | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in PRESETS}
    if user is not None:
        env.update(HOME=user.home, UV_CACHE_DIR=f"{user.home}/.cache/uv")
    return env


def setup_env(
    jobdir: Path, repairs: list[str], checker: Path, out: Path, user: JobUser | None = None
) -> dict[str, Any]:
    env = uv_env(user)
    try:
        uv = find_uv()
        version = run([uv, "--version"], env=env, echo=False, user=user)
    except RunFailed as exc:
        raise StageError(f"uv does not run on the VM: {exc.line}") from None
    (out / "uv").write_text(uv)
    say(f"{version}: uv sync --frozen")
    t0 = time.monotonic()
    try:
        run([uv, "sync", "--frozen"], cwd=jobdir, env=env, user=user)
    except RunFailed as exc:
        raise StageError(f"uv sync --frozen failed (exit {exc.code}): {exc.line}") from None
    report: dict[str, Any] = {"ok": True, "uv": version, "sync_s": round(time.monotonic() - t0, 3)}
    argv = [uv, "run", "--no-sync", "python", str(checker), "--uv", uv]
    for name in repairs:
        argv += ["--repair", name]
    done = subprocess.run(
        argv, cwd=jobdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        text=True, check=False, **popen_as(user),
    )  # fmt: skip
    try:
        report.update(json.loads(done.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        say(f"the environment check did not report (exit {done.returncode})")
        report["check"] = f"failed (exit {done.returncode})"
    return report


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="colabq_code.py")
    p.add_argument("--mode", choices=["git", "snapshot"], required=True)
    p.add_argument("--commit", required=True)
    p.add_argument("--repo", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--remote", default="")
    p.add_argument("--credentials", type=Path)
    p.add_argument("--ssh-key", type=Path, help="a deploy key, in a folder only git's user reads")
    p.add_argument("--known-hosts", type=Path, help="the known hosts to start from")
    p.add_argument("--archive", type=Path)
    p.add_argument("--archive-error", default="")
    p.add_argument("--subdir", default="")
    p.add_argument("--uv", action="store_true")
    p.add_argument("--repair", action="append", default=[])
    p.add_argument("--as-user", default="", help="UID:GID:HOME of the job's user")
    p.add_argument("--checker", type=Path, default=Path(__file__).with_name("colabq_envcheck.py"))
    return p.parse_args(argv)


def ssh_key(key: Path | None, known_hosts: Path | None) -> SshKey | None:
    """The deploy key, with a writable copy of the known hosts beside it (0600, the key's
    folder), or None."""
    if key is None:
        return None
    copy = key.with_name("known_hosts")
    copy.write_bytes(known_hosts.read_bytes() if known_hosts and known_hosts.is_file() else b"")
    copy.chmod(0o600)
    return SshKey(key, copy)


def write(out: Path, name: str, report: dict[str, Any]) -> None:
    (out / name).write_text(json.dumps(report, separators=(",", ":")) + "\n")


def main(argv: list[str]) -> int:
    a = parse(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    a.repo.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    ssh = ssh_key(a.ssh_key, a.known_hosts)
    try:
        if a.mode == "git":
            fetch_git(a.repo, a.remote, a.commit, a.credentials, ssh)
        elif a.archive is None:
            why = a.archive_error or "no archive was downloaded"
            raise StageError(f"the snapshot could not be downloaded: {why}")
        else:
            unpack(a.repo, a.archive, a.commit)
        jobdir = a.repo / a.subdir
        if not jobdir.is_dir():
            raise StageError(f"the folder {a.subdir!r} is not in commit {a.commit}")
    except StageError as exc:
        write(a.out, "code.json", {"ok": False, "mode": a.mode, "reason": str(exc)})
        say(str(exc))
        return EXIT_CODE
    finally:
        if a.credentials is not None:
            a.credentials.unlink(missing_ok=True)
        if ssh is not None:
            ssh.remove()
    user = JobUser.parse(a.as_user)
    if user is not None:
        user.hand_over(a.repo)
    fetch_s = round(time.monotonic() - t0, 3)
    code = {"ok": True, "mode": a.mode, "commit": a.commit, "fetch_s": fetch_s}
    write(a.out, "code.json", code)
    (a.out / "jobdir").write_text(str(jobdir))
    say(f"the repository is at commit {a.commit} ({a.mode}); the job runs in {jobdir}")
    if not a.uv:
        return 0
    try:
        report = setup_env(jobdir, a.repair, a.checker, a.out, user)
        write(a.out, "environment.json", report)
    except StageError as exc:
        write(a.out, "environment.json", {"ok": False, "reason": str(exc)})
        say(str(exc))
        return EXIT_ENV
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
