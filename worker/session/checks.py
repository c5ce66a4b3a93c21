"""Pre-allocation checks on the worker host (invariant 1): nothing billable happens before these.

The job script is written to the job's folder and must pass `bash -n`; the bundled wrapper must
too; the cells sent to the kernel must compile; `colab version` must be a release colabq drives
(`worker.colab.versions`); the balance must be above the floor and cover the job's budget
(colabq never buys units).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from worker.colab.driver import ColabCli, ColabDriver, Usage, check_cli
from worker.colab.versions import CliRelease, install_command
from worker.errors import BudgetExceeded, ColabVersionMismatch, SpecError
from worker.settings import Settings
from worker.spec import MAX_SCRIPT_BYTES, JobSpec


def bash_syntax_error(path: Path) -> str | None:
    res = subprocess.run(
        ["bash", "-n", str(path)], capture_output=True, text=True, timeout=30, check=False
    )
    return None if res.returncode == 0 else (res.stderr.strip() or f"bash -n exit {res.returncode}")


def check_job_files(spec: JobSpec, workdir: Path, vm_dir: Path, launch_source: str) -> None:
    """The script passes `bash -n`, the bundled wrapper too, and the cells sent to the kernel
    compile (the launch cell as built for this job, the attach cell's template)."""
    from worker.session.plan import attach_source

    workdir.mkdir(parents=True, exist_ok=True)
    script = workdir / "colab-user-job.sh"
    script.write_text(spec.script)
    if script.stat().st_size > MAX_SCRIPT_BYTES:
        raise SpecError("script", "over 1 MiB")
    if err := bash_syntax_error(script):
        raise SpecError("script", f"bash -n failed: {err}")
    if err := bash_syntax_error(vm_dir / "colab-job.sh"):
        raise SpecError("wrapper", f"the bundled wrapper fails bash -n: {err}")
    for name, source in (("launch", launch_source), ("attach", attach_source("j", "n", 0))):
        try:
            compile(source, f"{name}.py", "exec")
        except SyntaxError as exc:
            raise SpecError(name, f"the generated {name} cell does not compile: {exc}") from None


def check_cli_release(driver: ColabDriver, settings: Settings) -> CliRelease:
    """The CLI's release if colabq drives it (or it is the operator's unlisted one), else
    ColabVersionMismatch in one line."""
    return check_cli(driver, settings.colab_unlisted_version)


def check_budget(
    driver: ColabDriver,
    budget_units: float,
    floor_units: float = 0.0,
    on_usage: Callable[[Usage], None] | None = None,
) -> float:
    """The balance, if it is above the floor and covers the job's budget (a zero balance with the
    default budget refuses: colabq never allocates on an empty account). `on_usage` sees what
    `colab usage` said (the account's balance, as `colabq usage` shows it)."""
    usage = driver.usage()
    if on_usage is not None:
        on_usage(usage)
    if usage.balance_units <= floor_units or usage.balance_units < budget_units:
        raise BudgetExceeded(usage.balance_units, budget_units, floor_units)
    return usage.balance_units


MAX_TOKEN_BYTES = 16 * 1024


def check_token_file(path: Path, what: str = "Token file") -> None:
    """A token file must be a regular file of mode exactly 0600, non-empty, at most 16 KiB.
    The message names the path and the problem, never the content."""
    import stat as _stat

    from worker.errors import SecretFileError

    try:
        st = path.lstat()
    except OSError:
        raise SecretFileError(f"{what} {path} does not exist.") from None
    if not _stat.S_ISREG(st.st_mode):
        raise SecretFileError(f"{what} {path} is not a regular file.")
    mode = _stat.S_IMODE(st.st_mode)
    if mode != 0o600:
        raise SecretFileError(f"{what} {path} has mode {mode:04o}; run `chmod 600 {path}`.")
    if st.st_size == 0:
        raise SecretFileError(f"{what} {path} is empty.")
    if st.st_size > MAX_TOKEN_BYTES:
        raise SecretFileError(f"{what} {path} is over 16 KiB; is it really a token?")


def check_git_credentials(path: Path) -> None:
    """COLABQ_GIT_CREDENTIALS_FILE: a token file (0600, regular, non-empty, small) whose every
    line is git-credential-store's `https://USER:TOKEN@HOST` (git skips a line it cannot read,
    silently: the fetch would then fail for want of a credential). A bad line is named by its
    number, never its content."""
    from urllib.parse import urlsplit

    from worker.errors import SecretFileError

    check_token_file(path, "Git credentials file")
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        raise SecretFileError(f"Git credentials file {path} cannot be read as text.") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            parts = urlsplit(line.strip())
            ok = bool(parts.scheme and parts.hostname and parts.password)
        except ValueError:
            ok = False
        if not ok:
            raise SecretFileError(
                f"Git credentials file {path} line {number} is not https://USER:TOKEN@HOST "
                "(git-credential-store format)."
            )


def check_ssh_key(path: Path) -> None:
    """COLABQ_GIT_SSH_KEY_FILE: a token file (0600, regular, non-empty, small) holding one
    unencrypted ssh private key (a fetch never prompts for a passphrase). Named, never shown."""
    import base64
    import binascii

    from worker.errors import SecretFileError

    check_token_file(path, "Deploy key file")
    text = path.read_text(errors="replace")
    body = text.partition("-----BEGIN OPENSSH PRIVATE KEY-----")[2].partition("-----END")[0]
    if not body and not re.search(r"-----BEGIN (RSA |EC |DSA )?PRIVATE KEY-----", text):
        raise SecretFileError(f"Deploy key file {path} holds no ssh private key.")
    try:  # openssh-key-v1: the magic, then the cipher's name ("none": not encrypted)
        blob = base64.b64decode("".join(body.split())) if body else b""
    except (binascii.Error, ValueError):
        blob = b"?"
    magic = b"openssh-key-v1\x00"
    cipher = blob[len(magic) + 4 : len(magic) + 8] if blob.startswith(magic) else b""
    if "ENCRYPTED" in text or (body and cipher != b"none"):
        raise SecretFileError(
            f"Deploy key file {path} is encrypted or unreadable: give a key without a "
            "passphrase (ssh-keygen -t ed25519 -N '')."
        )


@dataclass(frozen=True)
class HostCheck:
    problem: str | None  # why this host cannot serve jobs (one line), or None
    account: str | None = None  # its Colab account (`colab whoami`), once the CLI answered
    cli: CliRelease | None = None  # the CLI's release, once `colab version` answered
    # What the worker says as it starts, each in one line: an unlisted CLI release, an account
    # `colab whoami` could not name.
    warnings: tuple[str, ...] = ()


def worker_host_problem(settings: Settings) -> str | None:
    """Why this host cannot serve jobs, in one line with what to do, or None (a drained
    worker's probe)."""
    return worker_host_check(settings).problem


def worker_host_check(settings: Settings) -> HostCheck:
    """Run when a worker starts, so a host that would fail every job it takes refuses to start
    instead: the `colab` CLI (its release), the account (`colab usage`, and `colab whoami`
    against COLABQ_ACCOUNT: a whoami that cannot name the login leaves COLABQ_ACCOUNT standing,
    with a warning), the state dir, the Hub token file, the git credentials file and deploy key,
    and with the emulator, that the job's user can reach its VMs."""
    problem, driver, cli = _host_problem(settings)
    if problem is not None or driver is None or cli is None:
        return HostCheck(problem)
    from worker.accounts.login import find_login
    from worker.errors import ColabqError

    try:
        login = find_login(settings, driver)
    except ColabqError as exc:
        return HostCheck(exc.advice(), cli=cli)
    warnings = tuple(w for w in (cli.warning(), login.warning) if w)
    return HostCheck(None, login.account, cli, warnings)


def _host_problem(settings: Settings) -> tuple[str | None, ColabCli | None, CliRelease | None]:
    from worker.colab.emulator import vm_reach_problem
    from worker.deps import driver_at
    from worker.errors import ColabqError

    state = settings.state_dir
    try:
        # Where every job's files go (what a claim sets up first), not only the dir itself.
        (state / "jobs").mkdir(parents=True, exist_ok=True)
        probe = state / "jobs" / f".write-probe-{os.getpid()}"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        why = f"state dir {state} is not writable ({exc.strerror}); set COLABQ_STATE_DIR to a "
        return why + "folder this user owns", None, None
    if settings.hf_token_file is not None:
        try:
            check_token_file(settings.hf_token_file)
        except ColabqError as exc:
            return f"{exc.advice()} (COLABQ_HF_TOKEN_FILE)", None, None
    if settings.git_credentials_file is not None:
        try:
            check_git_credentials(settings.git_credentials_file)
        except ColabqError as exc:
            return f"{exc.advice()} (COLABQ_GIT_CREDENTIALS_FILE)", None, None
    if settings.git_ssh_key_file is not None:
        try:
            check_ssh_key(settings.git_ssh_key_file)
        except ColabqError as exc:
            return f"{exc.advice()} (COLABQ_GIT_SSH_KEY_FILE)", None, None
    if problem := vm_reach_problem(settings.colab_bin, timeout_s=settings.colab_call_timeout_s):
        return problem, None, None  # the emulator's VMs out of the job's user's reach
    driver = driver_at(settings, state / "readiness" / "colab-sessions.json")
    try:
        cli = check_cli_release(driver, settings)
        driver.usage()
    except ColabVersionMismatch as exc:
        return f"{exc.advice()} (COLABQ_COLAB_BIN={settings.colab_bin})", None, None
    except ColabqError as exc:
        where = f"the `colab` CLI is COLABQ_COLAB_BIN={settings.colab_bin}"
        why = f"{exc.advice()} ({where}; install it, `{install_command()}`, and authenticate it)"
        return why, None, None
    return None, driver, cli
