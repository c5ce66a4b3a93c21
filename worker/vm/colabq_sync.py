"""VM-side Hub transfers: uploads one file or folder to the job's artifact destination (one commit,
retried on transient errors), and downloads an `hf://` file or folder for a resumed job.

Runs on the Colab VM with the system python3: the standard library plus `huggingface_hub`, which
Colab images have (0.x on `requests` or 2.x on `httpx2`: only calls both share are used). The
token comes only from the `HF_TOKEN` environment variable, which the wrapper gives to this process
alone; it is never an argument, and never printed. `local` destinations exist for rehearsals on
the emulator, where the "VM" shares the worker's disk.

    colabq_sync.py --kind local|hf --repo R --repo-type T [--root DIR] --src PATH
                   --dst PATH_IN_REPO [--endpoint URL] [--attempts N] [--backoff-base-s S]
    colabq_sync.py download --uri hf://[datasets/]OWNER/REPO[@REV]/PATH --dest DIR [--endpoint URL]
    colabq_sync.py download --uri file:///PATH --dest DIR      (rehearsals on the emulator)

An upload reads `--src` under `--root` (the job's folder) and follows no symbolic link: a link is
left out and named (colabq_tree.py, beside it, says why and how).

Exit codes: 0 done (download prints the local path on stdout); 1 failed, with one line on stderr;
2 bad command line; 3 (download) the path is missing or holds no data.

The pure parts (URI grammar, retry policy, what counts as transient) and the transfer primitives
are also what `worker.store.hub` builds on, so the worker and the VM share one definition of each.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Literal, TypeVar
from urllib.parse import quote, unquote

if TYPE_CHECKING:
    from huggingface_hub import HfApi

T = TypeVar("T")
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_MISSING = 0, 1, 2, 3
# What the Hub answers while it is overloaded or restarting; anything else will not get better.
TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
REPO_TYPES: tuple[str, ...] = ("model", "dataset")
_URI_RE = re.compile(
    r"^hf://(?:(?P<plural>models|datasets|spaces)/)?(?P<ns>[^/@]+)/(?P<name>[^/@]+)"
    r"(?:@(?P<rev>[^/]+))?(?:/(?P<path>.*))?$"
)
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


# --- pure helpers -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` tries in all; before try n+1 wait min(cap_s, base_s * 2**(n-1))."""

    attempts: int = 6
    base_s: float = 4.0
    cap_s: float = 120.0


def backoff_delays_s(policy: RetryPolicy) -> tuple[float, ...]:
    """The waits between attempts (one fewer than the attempts)."""
    return tuple(
        min(policy.cap_s, policy.base_s * 2**i) for i in range(max(policy.attempts, 1) - 1)
    )


@dataclass(frozen=True)
class HubRef:
    """One `hf://` location: a repo, an optional revision (None = main) and a path ("" = root)."""

    repo_type: str
    repo_id: str
    revision: str | None
    path: str

    @property
    def uri(self) -> str:
        return format_hf_uri(self.repo_type, self.repo_id, self.path, self.revision)


def split_hf_uri(uri: str) -> HubRef:
    """Parse `hf://[models/|datasets/]OWNER/REPO[@REV][/PATH]`; ValueError says what is wrong."""
    if any(c.isspace() for c in uri):
        raise ValueError("an hf:// URI has no whitespace")
    m = _URI_RE.match(uri)
    if m is None:
        raise ValueError("expected hf://[datasets/]OWNER/REPO[@REVISION][/PATH]")
    if m["plural"] == "spaces":
        raise ValueError("Spaces are not artifact stores: use a model or dataset repo")
    for part in (m["ns"], m["name"]):
        if not _NAME_RE.match(part) or ".." in part:
            raise ValueError(f"{part!r} is not a valid Hub owner or repo name")
    parts = [p for p in (m["path"] or "").split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise ValueError("the path must not contain '.' or '..' segments")
    revision = unquote(m["rev"]) if m["rev"] else None
    repo_type = "dataset" if m["plural"] == "datasets" else "model"
    return HubRef(repo_type, f"{m['ns']}/{m['name']}", revision, "/".join(parts))


def format_hf_uri(repo_type: str, repo_id: str, path: str = "", revision: str | None = None) -> str:
    kind = "datasets/" if repo_type == "dataset" else ""
    rev = f"@{quote(revision, safe='')}" if revision else ""
    path = path.strip("/")
    return f"hf://{kind}{repo_id}{rev}" + (f"/{path}" if path else "")


def http_status(exc: BaseException) -> int | None:
    """The HTTP status behind a client error (HfHubHTTPError and its subclasses), if any."""
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def transport_errors() -> tuple[type[BaseException], ...]:
    """Connection-level failure types of whichever HTTP stack huggingface_hub uses here."""
    found: list[type[BaseException]] = []
    try:
        import httpx2

        found.append(httpx2.TransportError)
    except ImportError:
        pass
    try:
        import requests

        found += [requests.ConnectionError, requests.Timeout]
    except ImportError:
        pass
    return tuple(found)


def is_transient(exc: BaseException) -> bool:
    """Worth another attempt: an overloaded Hub (5xx, 408, 429) or a dropped connection."""
    status = http_status(exc)
    if status is not None:
        return status in TRANSIENT_STATUS
    return isinstance(exc, transport_errors())


def is_not_found(exc: BaseException) -> bool:
    return http_status(exc) == 404


def call_with_retries(
    fn: Callable[[], T],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[int, BaseException, float], None] | None = None,
) -> T:
    """Call `fn` until it succeeds, a non-transient error, or the attempts run out (re-raised)."""
    delays = backoff_delays_s(policy)
    for attempt, delay_s in enumerate((*delays, None), start=1):
        try:
            return fn()
        except Exception as exc:
            if delay_s is None or not is_transient(exc):
                raise
            if on_retry is not None:
                on_retry(attempt, exc, delay_s)
            sleep(delay_s)
    raise AssertionError("unreachable: the last attempt returns or raises")


def describe(exc: BaseException, secret: str | None = None) -> str:
    """One line about a failure, with `secret` (the token) blanked should any layer echo it."""
    status = http_status(exc)
    if status is not None:
        server = getattr(exc, "server_message", None) or ""
        text = f"HTTP {status}" + (f": {server}" if server else "")
    else:
        text = f"{type(exc).__name__}: {exc}"
    text = " ".join(text.split())[:300]
    return text.replace(secret, "<token>") if secret else text


# --- transfers --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Inspection:
    """What a Hub path holds: `kind` "file", "folder" or "missing", and its bytes and files."""

    kind: Literal["file", "folder", "missing"]
    size_bytes: int
    files: int


def inspect_path(api: HfApi, ref: HubRef) -> Inspection:
    """Look a path up; 404 for the repo or revision raises (the caller decides it is missing)."""
    from huggingface_hub import RepoFile

    repo_type, revision = ref.repo_type, ref.revision
    if ref.path:
        entries = list(
            api.get_paths_info(ref.repo_id, [ref.path], repo_type=repo_type, revision=revision)
        )
        if not entries:
            return Inspection("missing", 0, 0)
        if isinstance(entries[0], RepoFile):
            return Inspection("file", entries[0].size, 1)
    tree = api.list_repo_tree(
        ref.repo_id, ref.path or None, recursive=True, repo_type=repo_type, revision=revision
    )
    # A new repo holds only the Hub's own .gitattributes: the root counts as empty then.
    sizes = [e.size for e in tree if isinstance(e, RepoFile) and e.path != ".gitattributes"]
    return Inspection("folder", sum(sizes), len(sizes))


def download_path(api: HfApi, ref: HubRef, dest_dir: Path, kind: str) -> Path:
    repo_type, revision = ref.repo_type, ref.revision
    if kind == "file":
        local = api.hf_hub_download(
            ref.repo_id, ref.path, repo_type=repo_type, revision=revision, local_dir=dest_dir
        )
        return Path(local)
    patterns = [f"{ref.path}/*"] if ref.path else None
    api.snapshot_download(
        ref.repo_id,
        repo_type=repo_type,
        revision=revision,
        local_dir=dest_dir,
        allow_patterns=patterns,
    )
    return dest_dir / ref.path if ref.path else dest_dir


# --- command line -----------------------------------------------------------------------------


def make_api(endpoint: str | None, token: str | None) -> HfApi:
    """Configure the client's environment, then import it: both are read at import time."""
    os.environ["HF_HUB_DISABLE_XET"] = "1"  # the LFS/HTTP path: one commit, any Hub server
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    if endpoint:
        os.environ["HF_ENDPOINT"] = endpoint
    from huggingface_hub import HfApi
    from huggingface_hub.utils import logging as hf_logging

    # Retries are reported by us, on stdout: stderr stays one line on failure.
    hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    # token=False: anonymous, never a token file left on the machine.
    return HfApi(endpoint=endpoint or None, token=token or False)


def _common_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--endpoint", help="Hub URL (default: HF_ENDPOINT or huggingface.co)")
    p.add_argument("--attempts", type=int, default=RetryPolicy.attempts)
    p.add_argument("--backoff-base-s", type=float, default=RetryPolicy.base_s)


def _fail(message: str, token: str | None, code: int = EXIT_FAILED) -> int:
    line = " ".join(message.split())
    print(f"colabq_sync: {line.replace(token, '<token>') if token else line}", file=sys.stderr)
    return code


def run_upload(a: argparse.Namespace, token: str | None) -> int:
    if TYPE_CHECKING:
        from worker.vm import colabq_tree as tree
    else:  # beside this script, which the wrapper runs as one
        import colabq_tree as tree
    if a.kind == "hf" and not token:
        return _fail("HF_TOKEN is not set: the wrapper passes the token in it", None)
    try:
        found = tree.open_tree(a.root, a.src)
    except ValueError as exc:
        return _fail(str(exc), token, EXIT_USAGE)
    except FileNotFoundError:
        return _fail(f"{a.src} does not exist", token)
    except (OSError, tree.TreeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else str(exc)
        return _fail(f"cannot read {a.src}: {why}", token)
    try:
        if (line := found.left_out_line(a.src)) is not None:
            print(f"colabq_sync: {line}", flush=True)
        if not found.files:
            return EXIT_OK
        if a.kind == "local":
            tree.copy_opened(found.files, a.repo, a.dst)
            return EXIT_OK
        files = found.files
        return _commit(
            a, lambda api: tree.commit_opened(api, a.repo, a.repo_type, files, a.dst), token
        )
    except OSError as exc:  # a rehearsal's store could not be written
        return _fail(f"upload failed: {exc}", token)
    finally:
        found.close()


def _commit(a: argparse.Namespace, commit: Callable[[HfApi], str], token: str | None) -> int:
    """One commit (`commit`), retried on transient errors; each retry said on stdout."""
    policy = RetryPolicy(max(a.attempts, 1), a.backoff_base_s)

    def note(attempt: int, exc: BaseException, delay_s: float) -> None:
        print(f"colabq_sync: attempt {attempt}/{policy.attempts} of {a.dst} failed "
              f"({describe(exc, token)}); retrying in {delay_s:g}s", flush=True)  # fmt: skip

    try:
        api = make_api(a.endpoint, token)
        oid = call_with_retries(lambda: commit(api), policy, on_retry=note)
    except Exception as exc:
        tries = f" after {policy.attempts} attempt(s)" if is_transient(exc) else ""
        name = PurePosixPath(a.src).name
        return _fail(
            f"upload of {name} to {a.repo}:{a.dst} failed{tries}: {describe(exc, token)}", token
        )
    print(f"colabq_sync: {a.repo}:{a.dst} committed {oid}", flush=True)
    return EXIT_OK


def download_local(src: Path, dest_dir: Path) -> Path | None:
    """A rehearsal's checkpoint (`file://` on the emulator's shared disk), copied like a Hub
    download; None if it is missing or holds no data."""
    files = [src] if src.is_file() else [p for p in src.rglob("*") if p.is_file()]
    if not src.exists() or sum(p.stat().st_size for p in files) == 0:
        return None
    target = dest_dir / src.name
    if src.is_dir():
        shutil.copytree(src, target, dirs_exist_ok=True)
    else:
        dest_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    return target


def run_download(a: argparse.Namespace, token: str | None) -> int:
    if a.uri.startswith("file://"):
        local = download_local(Path(a.uri.removeprefix("file://")), Path(a.dest))
        if local is None:
            return _fail(f"{a.uri} is missing or holds no data", token, EXIT_MISSING)
        print(local, flush=True)
        return EXIT_OK
    try:
        ref = split_hf_uri(a.uri)
    except ValueError as exc:
        return _fail(f"bad URI {a.uri!r}: {exc}", token, EXIT_USAGE)
    policy = RetryPolicy(max(a.attempts, 1), a.backoff_base_s)
    try:
        api = make_api(a.endpoint, token)
        found = call_with_retries(lambda: inspect_path(api, ref), policy)
        if found.kind == "missing" or found.size_bytes == 0:
            what = "is missing" if found.kind == "missing" else "holds no data"
            return _fail(f"{ref.uri} {what}", token, EXIT_MISSING)
        dest = Path(a.dest)
        local = call_with_retries(lambda: download_path(api, ref, dest, found.kind), policy)
    except Exception as exc:
        if is_not_found(exc):
            return _fail(f"{ref.uri} is missing ({describe(exc, token)})", token, EXIT_MISSING)
        return _fail(f"download of {ref.uri} failed: {describe(exc, token)}", token)
    print(local, flush=True)
    return EXIT_OK


def main(argv: list[str]) -> int:
    token = os.environ.get("HF_TOKEN") or None
    if argv[:1] == ["download"]:
        p = argparse.ArgumentParser(prog="colabq_sync.py download")
        p.add_argument("--uri", required=True)
        p.add_argument("--dest", required=True)
        _common_options(p)
        return run_download(p.parse_args(argv[1:]), token)
    p = argparse.ArgumentParser(prog="colabq_sync.py")
    p.add_argument("--kind", choices=["local", "hf"], required=True)
    p.add_argument("--repo", required=True)
    p.add_argument("--repo-type", choices=REPO_TYPES, default="model")
    p.add_argument("--root", default="", help="the job's folder: --src stays under it")
    p.add_argument("--src", required=True)
    p.add_argument("--dst", required=True)
    _common_options(p)
    return run_upload(p.parse_args(argv), token)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
