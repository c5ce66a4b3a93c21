"""Which `colab` release one emulator process speaks: `COLAB_EMU_VERSION`, default the newest.

0.7.4 is the spec's reference. 0.7.5 (spec §9) retries the assignment POST of `new` on HTTP
502/503/504 or a read timeout (`COLAB_CLI_ASSIGN_RETRIES`, default 3; `COLAB_CLI_RETRY_BACKOFF`,
default 10 s, doubled each time) and reads `COLAB_CLI_REQUEST_TIMEOUT` (the backend requests'
timeout; google-auth's 120 s without it); 0.7.4 reads none of these. The rest of 0.7.5 (Windows
tolerance) changes nothing here. Any other `X.Y.Z` is accepted as what `colab version` prints, to
rehearse a release colabq does not list, and behaves as the newest known release at or below it.
The `COLAB_CLI_*` variables are the real CLI's; `COLAB_EMU_VERSION` is the emulator's own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from . import CLI_VERSION

KNOWN = ("0.7.4", "0.7.5")
_VERSION = re.compile(r"\d+\.\d+\.\d+")
# google-auth's AuthorizedSession timeout, which the CLI keeps unless told otherwise.
DEFAULT_REQUEST_TIMEOUT_S = 120


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


@dataclass(frozen=True)
class Release:
    version: str

    @property
    def retries_assignment(self) -> bool:
        """0.7.5 and later retry the assignment POST, with a GET before each retry."""
        return _key(self.version) >= _key("0.7.5")

    def request_timeout_s(self, environ: Mapping[str, str]) -> float:
        """The read timeout of one backend request (what a `timeout` fault waits): an int
        without the variable, as google-auth's default is one."""
        raw = environ.get("COLAB_CLI_REQUEST_TIMEOUT") if self.retries_assignment else None
        return float(raw) if raw else DEFAULT_REQUEST_TIMEOUT_S

    def assign_retries(self, environ: Mapping[str, str]) -> int:
        if not self.retries_assignment:
            return 0
        return max(0, int(environ.get("COLAB_CLI_ASSIGN_RETRIES", "3")))

    def retry_backoff_s(self, environ: Mapping[str, str]) -> float:
        return max(0.0, float(environ.get("COLAB_CLI_RETRY_BACKOFF", "10")))


class ReleaseError(ValueError):
    """COLAB_EMU_VERSION is not a version."""


def release_from(environ: Mapping[str, str]) -> Release:
    raw = environ.get("COLAB_EMU_VERSION", "").strip() or CLI_VERSION
    if not _VERSION.fullmatch(raw):
        raise ReleaseError(f"COLAB_EMU_VERSION={raw!r} is not a version (X.Y.Z, e.g. 0.7.4)")
    return Release(raw)
