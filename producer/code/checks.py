"""The pre-flight's `code` and `environment` checks, judged from a `CodeState`.

`code`: the commit the VM will run is the one shipped: not from a dirty tree (a failure waived
only by `--waive dirty-tree`), and for `code: git` on the remote the VM fetches from.
`environment`: the shipped uv project's lock is current (`uv lock --check`). A job that ships no
code passes both (the VM gets its script alone, as before), unless it names a config (--config):
the VM would not have it, and `code` fails saying how to ship it.
"""

from __future__ import annotations

from pathlib import Path

from producer.code.survey import CodeState
from producer.preflight.report import DIRTY_TREE, CheckName, Finding, Verdict

MAX_LISTED = 3


def size_text(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def code_finding(state: CodeState | None, config: Path | None = None) -> Finding:
    """`config`: the config the user named (--config), which must reach the VM with the code."""
    if state is None and config is not None:
        # Without code: the VM gets the job's script alone: not the config checked here.
        return Finding(
            CheckName.CODE,
            Verdict.FAIL,
            f"the VM would not have {config.as_posix()} (without code: it gets the job script "
            "alone)",
            "ship the repository with --code snapshot or --code git (code: in a job file), or "
            "drop --config; waive it only if the job's script fetches the repository itself",
        )
    if state is None:
        return Finding(
            CheckName.CODE,
            Verdict.PASS,
            "no code shipped: the VM gets the job script alone (code: git or snapshot runs "
            "the repository's commit)",
            "none",
        )
    where = f"{state.subdir}/ of the repository" if state.subdir else "the repository's top"
    details = [f"commit {state.commit}", f"the job starts in {where}"]
    problems: list[tuple[str, str, str]] = []  # (what, what to do, the waiver)
    if state.dirty:
        shown = ", ".join(state.dirty[:MAX_LISTED]) + (
            ", …" if len(state.dirty) > MAX_LISTED else ""
        )
        problems.append(
            (
                f"{len(state.dirty)} tracked file(s) changed since commit {state.short} ({shown})",
                f"commit them (the VM runs {state.short} without them), or --waive {DIRTY_TREE}",
                DIRTY_TREE,
            )
        )
        details += [f"changed: {p}" for p in state.dirty]
    if state.remote is not None and state.on_remote is not None:
        remote, found = state.remote, state.on_remote
        details.append(f"remote {remote.name}: {remote.url}")
        if found.found is None:
            problems.append(
                (
                    f"could not list {remote.name}'s refs ({found.problem})",
                    f"check the remote's URL and your access to it (git ls-remote {remote.name})",
                    CheckName.CODE.value,
                )
            )
        elif not found.found:
            problems.append(
                (
                    f"commit {state.short} is not known to be on {remote.name} ({remote.url})",
                    "git push (or git fetch, if it was pushed from elsewhere)",
                    CheckName.CODE.value,
                )
            )
    details += [f"include: {inc.arcname}" for inc in state.includes]
    if problems:
        waivers = tuple(dict.fromkeys(w for _, _, w in problems))
        return Finding(
            CheckName.CODE,
            Verdict.FAIL,
            "; ".join(p for p, _, _ in problems),
            "; ".join(a for _, a, _ in problems),
            tuple(details),
            waive_with=() if waivers == (CheckName.CODE.value,) else waivers,
        )
    return Finding(CheckName.CODE, Verdict.PASS, _shipped(state), "none", tuple(details))


def _shipped(state: CodeState) -> str:
    if state.remote is not None and state.on_remote is not None:
        ref = f" ({state.on_remote.ref})" if state.on_remote.ref else ""
        return f"commit {state.short} is on {state.remote.name}{ref}: the VM fetches it"
    extra = f" + {len(state.includes)} untracked file(s)" if state.includes else ""
    return (
        f"commit {state.short}{extra}: a snapshot of {state.files} files "
        f"({size_text(state.size_bytes)}), staged when submitted"
    )


def environment_finding(state: CodeState | None) -> Finding:
    def finding(verdict: Verdict, saw: str, action: str = "none") -> Finding:
        return Finding(CheckName.ENVIRONMENT, verdict, saw, action)

    if state is None:
        return finding(Verdict.PASS, "no code shipped: the VM builds no environment")
    env = state.env
    if not env.uv:
        if env.pyproject_only:
            return finding(
                Verdict.WARN,
                f"pyproject.toml without uv.lock in commit {state.short}: the VM builds no "
                "uv environment",
                "run `uv lock` and commit uv.lock to have the VM build the project's environment",
            )
        return finding(
            Verdict.PASS, "not a uv project (no pyproject.toml and uv.lock): Colab's own Python"
        )
    if env.unchecked == "no uv":
        return finding(
            Verdict.FAIL,
            "uv is not installed here (beside this Python or on PATH): uv.lock cannot be checked",
            "install uv (pip install uv), or --waive environment",
        )
    if env.unchecked:
        return finding(
            Verdict.SKIP,
            f"uv.lock not checked: {env.unchecked}",
            f"commit the changes, or check out {state.short} and run `uv lock --check`",
        )
    lock = env.lock
    if lock is not None and lock.stale:
        return finding(
            Verdict.FAIL,
            "uv.lock is out of date with pyproject.toml (uv lock --check)",
            "run `uv lock` and commit uv.lock",
        )
    if lock is not None and not lock.current:
        return finding(
            Verdict.FAIL,
            f"uv lock --check failed: {lock.problem}",
            "fix the project until `uv lock --check` passes, or --waive environment",
        )
    python = f"Python {env.python}" if env.python else "the Python uv picks"
    return finding(
        Verdict.PASS,
        f"uv.lock is current: the VM runs uv sync --frozen ({python}), then the job under "
        "uv run --no-sync",
    )
