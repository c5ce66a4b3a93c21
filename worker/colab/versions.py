"""The `colab` CLI releases colabq drives, each verified: what differs, how colabq handles it.

`RELEASES` is the table (the version, what differs from the release before, how colabq handles
it). 0.7.4 is the spec's reference. 0.7.5 (spec §9) retries the assignment POST of `new` on
HTTP 502/503/504 or a read timeout, asking the GET again before each retry, and reads three
variables of its own: colabq sets them for every call (`AssignPolicy.cli_env`) so that `new`'s
worst case is known, and its own timeout on `new` outlasts that (`AssignPolicy.new_timeout_s`);
the retries, which the CLI logs only in its colab.log, reach the job's log (the driver reads
them); a `new` colabq had to kill anyway is reconciled by its name (`worker.session.reconcile`).

Any other version is refused where a worker starts, before each allocation and in `colabq
doctor`, in one line naming the supported releases and the install command of the newest. An
operator may name one unlisted version (COLABQ_COLAB_UNLISTED_VERSION) to run it at their own
risk: colabq then drives it as the newest release and warns in every report. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from worker.errors import ColabVersionMismatch

PACKAGE = "google-colab-cli"
# google-auth's AuthorizedSession timeout: every backend request of a CLI that reads no variable.
GOOGLE_AUTH_TIMEOUT_S = 120.0
_VERSION = re.compile(r"\d+(\.\d+){1,3}([a-z]+\d*)?")


@dataclass(frozen=True)
class Release:
    version: str
    differs: str
    handled: str
    # `new` retries its assignment POST and reads the COLAB_CLI_* variables (0.7.5 on).
    retries_assignment: bool


RELEASES = (
    Release(
        "0.7.4",
        "the reference (the spec)",
        "as the spec says",
        retries_assignment=False,
    ),
    Release(
        "0.7.5",
        "new retries the assignment POST on 502/503/504 or a read timeout, with a GET first "
        "(COLAB_CLI_ASSIGN_RETRIES, COLAB_CLI_RETRY_BACKOFF); COLAB_CLI_REQUEST_TIMEOUT; "
        "Windows tolerance",
        "colabq sets the variables, outlasts new's worst case, logs its retries, and "
        "reconciles a killed new by name",
        retries_assignment=True,
    ),
)
SUPPORTED = tuple(r.version for r in RELEASES)
NEWEST = RELEASES[-1]


def install_command(version: str = NEWEST.version) -> str:
    return f"uv tool install {PACKAGE}=={version}"


def supported_text() -> str:
    return " and ".join(SUPPORTED) if len(SUPPORTED) == 2 else ", ".join(SUPPORTED)


@dataclass(frozen=True)
class CliRelease:
    """The CLI a host runs: its version, and the release whose behaviour colabq assumes."""

    version: str
    release: Release
    unlisted: bool = False

    def describe(self) -> str:
        if self.unlisted:
            return f"colab CLI {self.version} (UNLISTED)"
        return f"colab CLI {self.version} (supported: {supported_text()})"

    def warning(self) -> str | None:
        """The warning every report carries for an unlisted release, else None."""
        if not self.unlisted:
            return None
        return (
            f"colab CLI {self.version} is not a release colabq supports ({supported_text()}): "
            f"it runs at the operator's risk (COLABQ_COLAB_UNLISTED_VERSION={self.version}), "
            f"driven as {self.release.version}; `{install_command()}` installs a supported one"
        )


def check_release(found: str, unlisted_ok: str | None = None) -> CliRelease:
    """The release `found` (what `colab version` printed), or ColabVersionMismatch in one line:
    the supported releases and the install command of the newest."""
    for release in RELEASES:
        if release.version == found:
            return CliRelease(found, release)
    if unlisted_ok is not None and found == unlisted_ok:
        return CliRelease(found, NEWEST, unlisted=True)
    raise ColabVersionMismatch(
        f"colab CLI {found} is not supported: colabq drives {supported_text()}; install the "
        f"newest with `{install_command()}` (or set COLABQ_COLAB_UNLISTED_VERSION={found} to "
        "try this one at your own risk)"
    )


def version_problem(text: str) -> str | None:
    """Why `text` is not a version an operator may name (COLABQ_COLAB_UNLISTED_VERSION)."""
    if _VERSION.fullmatch(text):
        return None
    return "must be a version as `colab version` prints it, e.g. 0.8.0"


@dataclass(frozen=True)
class AssignPolicy:
    """What colabq sets for the CLI's assignment (the COLAB_CLI_* variables: the CLI's own, not
    secrets) and the longest a `colab new` can take under it."""

    request_timeout_s: float
    retries: int
    backoff_s: float

    def cli_env(self) -> dict[str, str]:
        return {
            "COLAB_CLI_REQUEST_TIMEOUT": f"{self.request_timeout_s:g}",
            "COLAB_CLI_ASSIGN_RETRIES": str(self.retries),
            "COLAB_CLI_RETRY_BACKOFF": f"{self.backoff_s:g}",
        }

    def new_worst_case_s(self, release: Release | None = None) -> float:
        """Every backend request of `new` at its full timeout, and the backoff slept between.

        0.7.5: a credential refresh, the GET, `retries + 1` POSTs and a GET after each retry's
        backoff (backoff x (2^retries - 1) in all). 0.7.4 reads no variable: a refresh, the
        GET and the POST at google-auth's 120 s each. No release (not known yet, or unlisted):
        the longest of the known ones.
        """
        if release is None:
            return max(self.new_worst_case_s(r) for r in RELEASES)
        if not release.retries_assignment:
            return 3 * GOOGLE_AUTH_TIMEOUT_S
        requests = 1 + 1 + (self.retries + 1) + self.retries
        backoff_s = sum(self.backoff_s * 2.0**k for k in range(self.retries))
        return requests * self.request_timeout_s + backoff_s

    def new_timeout_s(self, release: Release | None, margin_s: float) -> float:
        """colabq's own timeout on `new`: the CLI's worst case and `margin_s` more (its start,
        the state write), so that colabq kills a `new` only when the CLI hangs."""
        return self.new_worst_case_s(release) + margin_s


DEFAULT_POLICY = AssignPolicy(GOOGLE_AUTH_TIMEOUT_S, retries=3, backoff_s=10.0)


def recorded_version(value: object) -> str | None:
    """A version read back from a job's record, if it looks like one (trust nothing read back)."""
    if isinstance(value, str) and len(value) <= 32 and version_problem(value) is None:
        return value
    return None


def report_notes(version: str | None) -> list[str]:
    """What a job's final report says about the CLI it ran on: a warning for an unlisted one."""
    if version is None or version in SUPPORTED:
        return []
    return [
        f"WARNING: colab CLI {version} is not a release colabq supports ({supported_text()}); "
        "this job ran on it at the operator's risk (COLABQ_COLAB_UNLISTED_VERSION)"
    ]
