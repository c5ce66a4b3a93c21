"""Where notifications go: the notifier host's file of named targets, and the names (with the
states each wants) that a job asks for. Pure but for reading the file.

The file (`COLABQ_WEBHOOKS_FILE`, mode 0600, the notifier's own): one `name = value` a line, `#`
comments; a value is a webhook URL (`https://...`, a secret: it never leaves this host but in
the POST itself) or `exec COMMAND ARGS...`, a local command hook (split as the shell would, from
this file alone: never a string built from job data). A job names targets by name
(`--notify team:SUCCEEDED,FAILED`); the deployment's names (`COLABQ_NOTIFY`, default `default`
when the file has one) apply to every job.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from worker.errors import UserInputError
from worker.states import TERMINAL, JobState

NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
DEFAULT_NAME = "default"


@dataclass(frozen=True)
class Target:
    name: str
    url: str = ""  # a webhook's (secret)
    argv: tuple[str, ...] = ()  # a command hook's

    def __repr__(self) -> str:  # never the URL
        return f"Target({self.name!r}, {'webhook' if self.url else 'command'})"


def parse_notify(text: str) -> tuple[str, frozenset[JobState]]:
    """`NAME[:STATE,STATE...]` -> (name, states); the terminal states when none are named."""
    name, _, states = text.strip().partition(":")
    if not NAME.fullmatch(name):
        raise UserInputError(
            f"--notify {text!r}: start with a target's name (lowercase letters, digits, _ -), "
            "then optionally :STATE,STATE (e.g. team:SUCCEEDED,FAILED)."
        )
    picked: set[JobState] = set()
    for raw in filter(None, (s.strip() for s in states.split(","))):
        try:
            picked.add(JobState(raw.lower()))
        except ValueError:
            names = ", ".join(s.name for s in JobState)
            raise UserInputError(f"--notify {text!r}: {raw!r} is not a state ({names}).") from None
    return name, frozenset(picked) or frozenset(TERMINAL)


def wanted(job_notify: Iterable[str], deployment: Iterable[str]) -> dict[str, frozenset[JobState]]:
    """Target name -> the states it is told of, for one job: the deployment's names, then the
    job's own (a job's entry for the same name replaces the deployment's)."""
    out: dict[str, frozenset[JobState]] = {}
    for text in [*deployment, *job_notify]:
        name, states = parse_notify(text)
        out[name] = states
    return out


def load_targets(path: Path) -> dict[str, Target]:
    """Read the targets file; one UserInputError line if it is readable by others or malformed."""
    try:
        mode = path.stat().st_mode
        text = path.read_text()
    except OSError as exc:
        raise UserInputError(
            f"Notification targets file {path}: {exc.strerror}. Create it (mode 0600) with "
            "`name = https://...` or `name = exec COMMAND` lines."
        ) from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise UserInputError(
            f"Notification targets file {path} is readable by others and holds secrets: "
            f"chmod 600 {path}."
        )
    out: dict[str, Target] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, eq, value = (p.strip() for p in line.partition("="))
        if not eq or not NAME.fullmatch(name) or not value:
            raise UserInputError(
                f"{path} line {n}: write `name = https://...` or `name = exec CMD`."
            )
        if value.startswith(("https://", "http://")):
            out[name] = Target(name, url=value)
        elif value.startswith("exec "):
            out[name] = Target(name, argv=tuple(shlex.split(value[5:])))
        else:
            raise UserInputError(
                f"{path} line {n} ({name}): the value is neither an http(s) URL nor `exec COMMAND`."
            )
    return out


def deployment_names(env: Mapping[str, str], targets: Mapping[str, Target]) -> list[str]:
    """The deployment's own notify entries: `COLABQ_NOTIFY` (space-separated
    `NAME[:STATES]`), else `default` (terminal states) when the file names one."""
    raw = env.get("COLABQ_NOTIFY")
    if raw is not None:
        return raw.split()
    return [DEFAULT_NAME] if DEFAULT_NAME in targets else []


def targets_file(env: Mapping[str, str] = os.environ) -> Path:
    return Path(env.get("COLABQ_WEBHOOKS_FILE") or Path.home() / ".config/colabq/webhooks")
