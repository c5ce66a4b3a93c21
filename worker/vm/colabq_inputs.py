"""colabq's inputs on the VM: every `--hub-input NAME=URI` of the job downloaded before the job
starts, in parallel, each into `--dest`/NAME, verified non-empty. Started by the wrapper
(colab-job.sh) with the VM's python3, as the wrapper's user, beside the code stage (its time is
billed GPU time); only for a job that declared inputs.

- `hf://[datasets/]OWNER/REPO[@REV]/PATH`: a file or folder, through huggingface_hub with the
  job's Hub token (`HF_TOKEN`, which the wrapper gives this process alone), reusing
  colabq_sync.py's lookup, retries and download;
- `https://...`: one file, a plain GET (redirects followed, retried on transient errors), with
  no credential: the Hub token never goes to another host;
- `gs://...`: not fetched (the VM has no Google Cloud credential of colabq's): the job reads it
  itself from its `--hub-input NAME=URI` argument, as before, and the log says so.

Writes into `--out`: `inputs.json` (one JSON object: ok, each input's uri, path, bytes and
seconds, the whole `took_s`; or ok false and the one-line reason naming every input that failed)
and `paths` (`NAME<TAB>PATH` lines: the wrapper exports each as COLABQ_INPUT_<NAME>). Its own
lines go to stdout. Exit 0 every input is there; 6 an input is missing, empty or could not be
downloaded (the job does not run); 64 bad command line.

    colabq_inputs.py --dest DIR --out DIR [--endpoint URL] [--attempts N] [--backoff-base-s S]
                     NAME=URI...
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    from huggingface_hub import HfApi

    from worker.vm import colabq_sync as hub
else:  # beside this file on the VM (and wherever the wrapper runs)
    import colabq_sync as hub

EXIT_OK, EXIT_INPUT, EXIT_USAGE = 0, 6, 64
MAX_PARALLEL = 8
HTTP_TIMEOUT_S = 60.0
CHUNK_BYTES = 1 << 20
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class InputFailed(Exception):
    """Why one input is not there (one line, naming it)."""


@dataclass(frozen=True)
class Got:
    name: str
    uri: str
    path: Path | None  # None: not fetched (gs://)
    size_bytes: int
    took_s: float


def say(text: str) -> None:
    print(f"colabq: {text}", flush=True)


def with_retries(fn: Callable[[], Got], policy: hub.RetryPolicy, transient: type[Exception]) -> Got:
    """`fn` again after each `transient` failure, with the uploader's backoff."""
    for delay_s in (*hub.backoff_delays_s(policy), None):
        try:
            return fn()
        except transient:
            if delay_s is None:
                raise
            time.sleep(delay_s)
    raise AssertionError("unreachable")


class _Transient(Exception):
    pass


class _HttpsOnly(urllib.request.HTTPRedirectHandler):
    """Redirects are followed to https:// only (never down to http://)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        if not newurl.startswith("https://"):
            raise urllib.error.HTTPError(newurl, code, "a redirect away from https", headers, fp)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_HttpsOnly)


def fetch_https(name: str, uri: str, dest: Path, policy: hub.RetryPolicy) -> Got:
    """One file over https, no credential: `dest`/<its last path segment>."""
    leaf = unquote(urlsplit(uri).path.rstrip("/").rpartition("/")[2])
    target = dest / (leaf if leaf not in ("", ".", "..") else "download")
    t0 = time.monotonic()

    def once() -> Got:
        part = target.with_name(target.name + ".part")
        try:
            with _OPENER.open(uri, timeout=HTTP_TIMEOUT_S) as resp, open(part, "wb") as out:
                shutil.copyfileobj(resp, out, CHUNK_BYTES)
        except urllib.error.HTTPError as exc:
            if exc.code in hub.TRANSIENT_STATUS:
                raise _Transient(f"HTTP {exc.code}") from None
            what = "is missing" if exc.code in (404, 410) else "was refused"
            raise InputFailed(f"{name} ({uri}) {what} (HTTP {exc.code})") from None
        except (urllib.error.URLError, OSError) as exc:
            raise _Transient(str(getattr(exc, "reason", exc))) from None
        size = part.stat().st_size
        if size == 0:
            part.unlink()
            raise InputFailed(f"{name} ({uri}) holds no data")
        part.replace(target)
        return Got(name, uri, target, size, round(time.monotonic() - t0, 3))

    dest.mkdir(parents=True, exist_ok=True)
    try:
        return with_retries(once, policy, _Transient)
    except _Transient as exc:
        tries = f" after {policy.attempts} attempt(s)"
        raise InputFailed(f"{name} ({uri}) could not be downloaded{tries}: {exc}") from None


def fetch_hf(name: str, uri: str, dest: Path, api: HfApi, policy: hub.RetryPolicy) -> Got:
    """A file or folder of the Hub, as a resumed job's checkpoint is downloaded."""
    token = os.environ.get("HF_TOKEN") or None
    t0 = time.monotonic()
    try:
        ref = hub.split_hf_uri(uri)
        found = hub.call_with_retries(lambda: hub.inspect_path(api, ref), policy)
        if found.kind == "missing" or found.size_bytes == 0:
            what = "is missing" if found.kind == "missing" else "holds no data"
            raise InputFailed(f"{name} ({uri}) {what}")
        local = hub.call_with_retries(lambda: hub.download_path(api, ref, dest, found.kind), policy)
    except InputFailed:
        raise
    except ValueError as exc:
        raise InputFailed(f"{name} ({uri}) is not an hf:// URI: {exc}") from None
    except Exception as exc:
        what = "is missing" if hub.is_not_found(exc) else "could not be downloaded"
        raise InputFailed(f"{name} ({uri}) {what}: {hub.describe(exc, token)}") from None
    return Got(name, uri, local, found.size_bytes, round(time.monotonic() - t0, 3))


def fetch_all(
    declared: list[tuple[str, str]], dest: Path, endpoint: str | None, policy: hub.RetryPolicy
) -> tuple[list[Got], list[str]]:
    """Every input at once (at most MAX_PARALLEL together); what came, and why each other
    did not."""
    api = None
    if any(uri.startswith("hf://") for _, uri in declared):
        api = hub.make_api(endpoint, os.environ.get("HF_TOKEN") or None)

    def one(name: str, uri: str) -> Got:
        if uri.startswith("hf://") and api is not None:
            return fetch_hf(name, uri, dest / name, api, policy)
        if uri.startswith("https://"):
            return fetch_https(name, uri, dest / name, policy)
        say(f"input {name}: {uri} is not fetched by colabq; the job reads it from its arguments")
        return Got(name, uri, None, 0, 0.0)

    got: list[Got] = []
    failed: list[str] = []
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(declared))) as pool:
        futures = [pool.submit(one, name, uri) for name, uri in declared]
        for future in futures:
            try:
                got.append(future.result())
            except InputFailed as exc:
                failed.append(str(exc))
            except Exception as exc:  # a bug must still be one line
                failed.append(f"an input could not be downloaded: {type(exc).__name__}: {exc}")
    return got, failed


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[tuple[str, str]]]:
    p = argparse.ArgumentParser(prog="colabq_inputs.py")
    p.add_argument("--dest", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--endpoint")
    p.add_argument("--attempts", type=int, default=hub.RetryPolicy.attempts)
    p.add_argument("--backoff-base-s", type=float, default=hub.RetryPolicy.base_s)
    p.add_argument("inputs", nargs="+", metavar="NAME=URI")
    a = p.parse_args(argv)
    declared = [tuple(item.split("=", 1)) for item in a.inputs]
    names = [d[0] for d in declared]
    if any(len(d) != 2 or not _NAME.fullmatch(d[0]) or not d[1] for d in declared) or len(
        set(names)
    ) != len(names):
        p.error("each input is NAME=URI, NAME matching [A-Za-z_][A-Za-z0-9_]*, once each")
    return a, [(d[0], d[1]) for d in declared]


def main(argv: list[str]) -> int:
    try:
        a, declared = parse(argv)
    except SystemExit:
        return EXIT_USAGE
    a.out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    policy = hub.RetryPolicy(max(a.attempts, 1), a.backoff_base_s)
    got, failed = fetch_all(declared, a.dest, a.endpoint, policy)
    took_s = round(time.monotonic() - t0, 3)
    if failed:
        reason = "input " + "; ".join(failed)
        say(f"{reason}; the job does not run")
        report = {"ok": False, "reason": " ".join(reason.split())[:1000], "took_s": took_s}
        (a.out / "inputs.json").write_text(json.dumps(report, separators=(",", ":")) + "\n")
        return EXIT_INPUT
    fetched = [g for g in got if g.path is not None]
    for g in fetched:
        say(f"input {g.name}: {g.uri} -> {g.path} ({g.size_bytes} bytes, {g.took_s:g}s)")
    say(f"{len(fetched)} input(s) ready in {took_s:g}s")
    inputs = {g.name: {"uri": g.uri, "path": str(g.path), "bytes": g.size_bytes, "s": g.took_s}
              for g in fetched}  # fmt: skip
    report = {"ok": True, "inputs": inputs, "took_s": took_s}
    (a.out / "inputs.json").write_text(json.dumps(report, separators=(",", ":")) + "\n")
    lines = [f"{g.name}\t{g.path}\n" for g in fetched if "\n" not in str(g.path)]
    (a.out / "paths").write_text("".join(lines))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
