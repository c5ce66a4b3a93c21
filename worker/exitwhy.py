"""A job that exited 126 or 127, in words: what could not be run, and why.

126 and 127 are the shell's (and `timeout`'s, `setpriv`'s) "found but could not run" and "not
found". The wrapper on the VM says what it saw with an `EXIT_WHY` sentinel (`exec_exit_why` in
the job's watch record): "USER<TAB>LINE", the job's user (empty when the job runs as the
wrapper's) and the last line of the job's output in which a shell or a launcher said what it
could not run (`bash: /content/colab-user-job.sh: Permission denied`, `job.sh: line 3: uv:
command not found`, `timeout: failed to run command 'x': No such file or directory`). The
owner and the janitor end such a job FAILED with the reason below instead of a bare exit code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

CANNOT_RUN_CODES = (126, 127)
JOB_SCRIPT = "colab-user-job.sh"  # worker.session.plan.SCRIPT, the job's script on the VM
_NOT_FOUND = ("command not found", "not found", "No such file or directory")
# What `timeout` and `setpriv` put before the name of what they could not run.
# (GNU's quotes are \u2018 and \u2019 in a UTF-8 locale.)
_QUOTES = "'`\"\u2018\u2019"
_LAUNCHER = re.compile(
    rf"^(?:failed to run command|failed to execute)\s+[{_QUOTES}]?(.*?)[{_QUOTES}]?$"
)


MAX_SAID = 500  # the wrapper sends at most 400 characters of the line
_USER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")


def _printable(text: str) -> str:
    return "".join(c for c in text if c.isprintable() or c == "\t")


def _name(subject: str) -> str:
    found = _LAUNCHER.match(subject.strip())
    return (found[1] if found else subject).strip()


def parse_said(line: str) -> tuple[str, str] | None:
    """(what could not be run, why) from a shell's or a launcher's line, or None."""
    parts = [p for p in line.strip().split(": ") if p]
    for i, part in enumerate(parts):  # bash: `./x: cannot execute binary file: Exec format error`
        if i >= 1 and part.startswith("cannot execute"):
            return _name(parts[i - 1]), ": ".join(parts[i:])
    if len(parts) < 2:
        return None
    return _name(parts[-2]), parts[-1]


def exit_reason(exit_code: int | None, watch: Mapping[str, str]) -> str:
    """`job exited N`, or for 126 and 127 what could not be run and why, from what the wrapper
    saw (`the job script could not be run: Permission denied for the job's user nobody (exit
    126); ...`, `a command was not found: uv (exit 127); ...`)."""
    if exit_code not in CANNOT_RUN_CODES:
        return f"job exited {exit_code}"
    # Read back from Redis: printable text of a bounded length only.
    user, _, said = _printable(watch.get("exec_exit_why", "")[:MAX_SAID]).partition("\t")
    user = user if _USER.fullmatch(user) else ""
    found = parse_said(said) if said else None
    who = f" for the job's user {user}" if user else ""
    if found is None:
        if exit_code == 127:
            return "a command of the job was not found (exit 127): see the job's log"
        return (
            f"a command of the job could not be run{who} (exit 126: found, but not executable): "
            "see the job's log"
        )
    name, why = found
    denied = who if why == "Permission denied" else ""
    if name.rsplit("/", 1)[-1] == JOB_SCRIPT:
        reach = "; the job's user must reach the VM's /content" if denied else ""
        return f"the job script could not be run: {why}{denied} (exit {exit_code}){reach}"
    if exit_code == 127 and why in _NOT_FOUND:
        return (
            f"a command was not found: {name} (exit 127); install it in the job's script or its "
            "project's environment, or call it by its full path"
        )
    tail = f"; what the job runs must be readable and runnable by {user}" if denied else ""
    return f"a command could not be run: {name}: {why}{denied} (exit {exit_code}){tail}"
