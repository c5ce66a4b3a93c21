"""Which Hub token a job's uploads use on this worker host: chosen before allocation.

A host may hold one token per destination and one per submitting user, 0600 files in
`COLABQ_HF_TOKEN_DIR`:

- `dest/<owner>__<repo>`: the destination repo's (`OWNER/NAME`, its `/` spelled `__`);
- `user/<name>`: the submitting user's (`submitted_by` up to any `@`, lowercased, every character
  but letters, digits, `.`, `_` and `-` spelled `_`).

The first of these that exists is the job's token, else `COLABQ_HF_TOKEN_FILE`, else none. A
chosen file that is bad (not a regular 0600 file, empty, too large) is this host's failure, named
in one line: colabq never falls back to a less specific token, which would upload as someone
else. A job that needs a token (a Hub destination, or `secrets: [hf_token]`) when none applies is
this host's failure too, naming the files it expected (another host may hold them).

Under Redis ACLs `submitted_by` is the authenticated user (a worker refuses a job whose
`submitted_by` is not its owner); without them it is what the submitting machine said, so a
per-user token then trusts everyone who has the Redis password.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from worker.errors import ColabqError, SecretFileError
from worker.session.checks import check_token_file
from worker.settings import Settings
from worker.spec import JobSpec

_UNSAFE = re.compile(r"[^a-z0-9._-]")


class NoHubToken(SecretFileError):
    """The job needs a Hub token and none applies on this host."""


def user_key(submitted_by: str) -> str | None:
    """The name of a submitting user's token file, or None (nobody to name)."""
    name = _UNSAFE.sub("_", submitted_by.partition("@")[0].strip().lower())
    return name if name.strip("._") else None


def dest_key(repo: str) -> str:
    """The name of a destination's token file: `OWNER/NAME` as `OWNER__NAME`."""
    return repo.replace("/", "__")


@dataclass(frozen=True)
class HubToken:
    """The token file a job's uploads use (None: no token applies), and whose it is."""

    path: Path | None
    whose: str  # "destination", "user", "host" or "none"
    expected: tuple[Path, ...] = ()  # every file looked for, most specific first

    def describe(self) -> str:
        """For the job's log: whose token, and its path (a path is never the secret)."""
        if self.path is None:
            return "no Hub token"
        return f"the {self.whose}'s Hub token ({self.path})"


def candidates(spec: JobSpec, settings: Settings) -> list[tuple[str, Path]]:
    """(whose, path) of every token file that would apply to `spec`, most specific first."""
    found: list[tuple[str, Path]] = []
    folder = settings.hf_token_dir
    if folder is not None:
        if spec.artifact.kind == "hf":
            found.append(("destination", folder / "dest" / dest_key(spec.artifact.repo)))
        if (user := user_key(spec.submitted_by)) is not None:
            found.append(("user", folder / "user" / user))
    if settings.hf_token_file is not None:
        found.append(("host", settings.hf_token_file))
    return found


def choose(spec: JobSpec, settings: Settings) -> HubToken:
    """The job's token file, checked; SecretFileError (this host's failure) in one line if the
    chosen file is bad, or if the job needs a token and none applies."""
    looked = candidates(spec, settings)
    expected = tuple(path for _, path in looked)
    for whose, path in looked:
        if whose == "host" or path.exists() or path.is_symlink():
            # As before for COLABQ_HF_TOKEN_FILE: "Token file X has mode 0644; run `chmod ...`".
            check_token_file(path, "Token file" if whose == "host" else f"The {whose}'s token file")
            return HubToken(path, whose, expected)
    if spec.artifact.kind == "hf" or "hf_token" in spec.secrets:
        raise NoHubToken(missing_advice(spec, settings, expected))
    return HubToken(None, "none", expected)


def missing_advice(spec: JobSpec, settings: Settings, expected: tuple[Path, ...]) -> str:
    why = "a Hub destination" if spec.artifact.kind == "hf" else "secrets: [hf_token]"
    if settings.hf_token_dir is None:
        return f"{why} needs COLABQ_HF_TOKEN_FILE on the worker host"
    files = " or ".join(str(p) for p in expected) or f"{settings.hf_token_dir}/dest/..."
    return f"{why} needs a Hub token on the worker host: none of {files} exists"


def token_path(spec: JobSpec, settings: Settings) -> Path | None:
    """The job's token file for this host's own Hub calls (its checks, its verification), or
    None; never raises (the pre-allocation check reports the problem)."""
    try:
        return choose(spec, settings).path
    except ColabqError:
        return None
