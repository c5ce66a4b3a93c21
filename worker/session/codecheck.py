"""Before allocation (invariant 1): the job's code is where the VM will look for it.

`code: git`: the commit is fetched from the remote into a scratch repository on this host (depth
1, no blobs), with this host's read credential, as the VM will fetch it (an ssh remote over https
with the credential for its host, else with the deploy key: `gitroute`). `code: snapshot`: the
staged archive exists and holds data (hf:// through the runner's input check, file:// on this
host's file system). Each outcome has one cause (`worker.fleet.causes`):

- fetched, or the archive is there: the check passes (a line for the job's log);
- the remote has no such commit, refused this host's credential or wanted one, or the archive is
  missing: the job's (`CodeCheckFailed`), one line saying what to do (like a Hub 403, a refused
  credential is the repository's access, not the host's health);
- the remote cannot be reached (name resolution, a refused connection, a timeout), or this host
  has no git: this host's (`CodeHostFailure`: the job goes back to the queue).

The credential never reaches git's command line or environment: git reads it through a
credential helper that only answers `get` from the 0600 file (git-credential-store's `store`
and `erase` would rewrite the host's file after each fetch), and whatever git said is scrubbed of
it before it becomes a reason. The job's script, destination and budget are `checks`'s; the
fetch on the VM is the wrapper's.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

from worker.errors import ColabqError, HubEmptyArtifact, HubNotFound, SecretFileError
from worker.session.checks import check_git_credentials, check_ssh_key
from worker.session.gitroute import (
    CREDENTIALS_VARIABLE,
    KNOWN_HOSTS,
    SSH_KEY_VARIABLE,
    credential_urls,
    route,
    ssh_command,
)
from worker.spec import CodeSpec

FETCH_TIMEOUT_S = 60.0
# What git prints when the remote answers but has no such object.
_NOT_THERE = re.compile(
    r"not our ref|couldn't find remote ref|no such remote ref|unadvertised object"
)
# What git, curl and ssh print when the remote cannot be reached at all.
_UNREACHABLE = re.compile(
    r"could not resolve host|couldn't resolve host|temporary failure in name resolution"
    r"|name or service not known|failed to connect|couldn't connect|connection refused"
    r"|timed out|network is unreachable|no route to host|connection reset"
    r"|connection closed by|ssl connect|ssl certificate|certificate problem|gnutls_handshake"
    r"|returned error: 5\d\d|host key verification failed|early eof|rpc failed"
)
# What git prints when the remote wants a credential, refused this host's, or hides the
# repository from it (GitHub answers "Repository not found" to a private repository).
_REFUSED = re.compile(
    r"authentication failed|could not read username|could not read password"
    r"|terminal prompts disabled|permission denied|returned error: 40[13]|repository not found"
    r"|repository '.*' not found|does not appear to be a git repository"
    r"|could not read from remote repository|access denied|forbidden"
)
# ssh's advice after every failure: no reason of its own.
_BOILERPLATE = ("Please make sure you have the correct access rights", "and the repository exists.")
# Variables that would point git at another repository or configuration than the scratch one.
_GIT_LOCAL_ENV = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT", "GIT_ASKPASS", "SSH_ASKPASS",
)  # fmt: skip

InputChecker = Callable[[str], int]
Verdict = Literal["missing", "refused", "unreachable", "unknown", "timeout"]


class CodeCheckFailed(ColabqError):
    """The job's code cannot reach the VM as submitted: the job's own failure."""


class CodeHostFailure(ColabqError, ConnectionError):
    """This host could not check the job's code (the remote unreachable, git missing): the job
    goes back to the queue for another host."""


@dataclass(frozen=True)
class Fetched:
    returncode: int | None  # None: killed at the timeout
    stderr: str


def check_code(
    code: CodeSpec,
    *,
    job_id: str,
    host: str,
    credentials: Path | None,
    workdir: Path,
    check_input: InputChecker,
    timeout_s: float = FETCH_TIMEOUT_S,
    ssh_key: Path | None = None,
) -> str:
    """Raise unless the VM will find the job's code; a line for the job's log otherwise.
    `NoGitRoute` for an ssh remote this host has no credential or key for (`gitroute`)."""
    if code.mode == "git":
        return check_git(
            code, job_id=job_id, host=host, credentials=credentials, workdir=workdir,
            timeout_s=timeout_s, ssh_key=ssh_key,
        )  # fmt: skip
    return check_snapshot(code.snapshot, check_input)


def check_git(
    code: CodeSpec,
    *,
    job_id: str,
    host: str,
    credentials: Path | None,
    workdir: Path,
    timeout_s: float = FETCH_TIMEOUT_S,
    ssh_key: Path | None = None,
) -> str:
    _check_secret_files(credentials, ssh_key)
    way = route(code.remote, credentials, ssh_key)  # as the VM will fetch it
    short, remote = code.commit[:12], code.remote
    workdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="codecheck-", dir=workdir) as tmp:
        got = fetch_commit(
            Path(tmp), way.url, code.commit, way.credentials, timeout_s, ssh_key=way.ssh_key
        )
    if got.returncode == 0:
        return f"code: commit {short} is on {way.describe(remote)}"
    words = scrub(got.stderr, credential_secrets(credentials))
    said, retry = git_said(words), f"`colabq retry {job_id}`"
    verdict = "timeout" if got.returncode is None else judge(words, way.url)
    if verdict == "missing":
        raise CodeCheckFailed(f"commit {short} is not on {remote}: push it, then {retry}")
    if verdict == "refused" and way.ssh_key is not None:
        raise CodeCheckFailed(
            f"worker host {host} cannot read {remote} with its deploy key ({said}): add the "
            f"key of {SSH_KEY_VARIABLE} to the repository as a read-only deploy key, then {retry}"
        )
    if verdict == "refused":
        raise CodeCheckFailed(
            f"worker host {host} cannot read {way.url} ({said}): give worker hosts a read "
            f"credential in {CREDENTIALS_VARIABLE} (git-credential-store format), then {retry}"
        )
    if verdict == "timeout":
        raise CodeHostFailure(f"git fetch from {remote} did not finish in {timeout_s:.0f}s")
    if verdict == "unreachable":
        raise CodeHostFailure(f"cannot reach {remote} to check commit {short}: {said}")
    # Unknown words: another host may fare better (a job that fails everywhere is poison).
    raise CodeHostFailure(f"git fetch of commit {short} from {remote} failed: {said}")


def _check_secret_files(credentials: Path | None, ssh_key: Path | None) -> None:
    """The host's credential files as the worker's start-up checked them (this host's failure
    if they went bad since: `cause_of`)."""
    for path, check, variable in (
        (credentials, check_git_credentials, CREDENTIALS_VARIABLE),
        (ssh_key, check_ssh_key, SSH_KEY_VARIABLE),
    ):
        if path is not None:
            try:
                check(path)
            except SecretFileError as exc:
                raise SecretFileError(f"{exc} ({variable})") from None


def judge(stderr: str, remote: str) -> Verdict:
    """What a failed fetch's stderr means: the commit `missing` from the remote, the remote
    `refused` this host (no credential, a refused one, a repository hidden from it), the remote
    `unreachable`, or `unknown`. All of it is read (ssh's reason comes before git's), the
    remote's own name left out (a repository may be called anything)."""
    text = stderr.replace(remote, "REMOTE").lower()
    if _NOT_THERE.search(text):
        return "missing"
    if _UNREACHABLE.search(text):
        return "unreachable"
    if _REFUSED.search(text):
        return "refused"
    return "unknown"


def check_snapshot(uri: str, check_input: InputChecker) -> str:
    missing = CodeCheckFailed(f"the code snapshot {uri} is missing: submit again to stage it")
    if uri.startswith("hf://"):
        try:
            size = check_input(uri)
        except (HubNotFound, HubEmptyArtifact):
            raise missing from None
    else:
        path = Path(unquote(urlsplit(uri).path))
        try:
            st = path.stat()
        except (FileNotFoundError, NotADirectoryError):
            raise missing from None
        if not path.is_file() or st.st_size == 0:
            raise missing
        size = st.st_size
    return f"code: snapshot {uri} ({size} bytes)"


def fetch_commit(
    scratch: Path,
    remote: str,
    commit: str,
    credentials: Path | None,
    timeout_s: float,
    *,
    ssh_key: Path | None = None,
) -> Fetched:
    """`git fetch --depth 1 --filter=blob:none REMOTE COMMIT` in a new repository at `scratch`,
    with no prompt and no credential but the file's (or, over ssh, the deploy key alone, with
    the known hosts the VM gets); killed with its helpers at the timeout."""
    config = ["-c", "credential.helper=", "-c", "core.askPass=", "-c", "protocol.version=2"]
    if credentials is not None:
        # Only `get`: a refused credential is never erased from the host's file, a good one
        # never written back.
        quoted = shlex.quote(str(credentials))
        helper = f'!f() {{ test "$1" = get && exec git credential-store --file={quoted} get; }}; f'
        config += ["-c", f"credential.helper={helper}"]
    env = {k: v for k, v in os.environ.items() if k not in _GIT_LOCAL_ENV}
    env["GIT_TERMINAL_PROMPT"] = "0"
    if ssh_key is not None:
        known_hosts = scratch / "known_hosts"
        shutil.copyfile(KNOWN_HOSTS, known_hosts)  # accept-new writes a new host's key here
        env["GIT_SSH_COMMAND"] = ssh_command(ssh_key, known_hosts)
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes -o ConnectTimeout=20")
    repo = scratch / "repo"
    steps = [
        ["git", "-c", "init.defaultBranch=colabq", "init", "-q", str(repo)],
        ["git", "-C", str(repo), "remote", "add", "origin", remote],
        ["git", "-C", str(repo), *config, "fetch", "--quiet", "--no-tags", "--depth", "1",
         "--filter=blob:none", "origin", commit],
    ]  # fmt: skip
    got = Fetched(0, "")
    for argv in steps:
        got = _run(argv, env, scratch / "stderr", timeout_s)
        if got.returncode != 0:
            return got
    return got


def _run(argv: list[str], env: dict[str, str], err_path: Path, timeout_s: float) -> Fetched:
    """One git command, in a process group of its own: at the timeout the group is killed
    (git's remote helpers and ssh with it). stderr goes to a file, so no helper that outlives
    git can hold a pipe open."""
    try:
        with open(err_path, "wb") as err:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env,
                start_new_session=True,
            )  # fmt: skip
    except FileNotFoundError:
        raise CodeHostFailure(
            "git is not installed on this worker host (code: git jobs need it)"
        ) from None
    try:
        code: int | None = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        code = None
    return Fetched(code, err_path.read_text(errors="replace"))


def credential_secrets(path: Path | None) -> list[str]:
    """The secret parts of the credentials file's lines (as written and URL-decoded), longest
    first; none if there is no file or it cannot be read."""
    found: set[str] = set()
    for parts in credential_urls(path):
        userinfo = parts.netloc.rpartition("@")[0]
        for raw in (userinfo, userinfo.partition(":")[2], parts.password or ""):
            found.update(s for s in (raw, unquote(raw)) if s)
    return sorted(found, key=len, reverse=True)


def scrub(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def git_said(stderr: str, limit: int = 240) -> str:
    """git's reason in one line: its last two lines that say something (no warnings, hints or
    ssh's advice), without `fatal:`/`error:`, whitespace collapsed, at most `limit` characters."""
    lines = [" ".join(ln.split()) for ln in stderr.splitlines() if ln.strip()]
    lines = [
        ln.removeprefix("fatal: ").removeprefix("error: ")
        for ln in lines
        if not ln.startswith(("warning:", "hint:", *_BOILERPLATE))
    ]
    said = "; ".join(lines[-2:]) or "no output"
    return said if len(said) <= limit else said[: limit - 3] + "..."
