"""The Hugging Face Hub artifact store (`ArtifactDest.kind == "hf"`).

Owns `HubStore`: the `ArtifactStore` protocol for Hub destinations (`location`, `verify` and
`console_tail` with the same layout and semantics as `LocalStore`), the output-repo check (exists
or is created private, is private, this token can write), `exists_nonempty`/`download` for
declared inputs and resumes, and `upload_folder` with colabq's own commit-level retry. Every
client error leaves this module as a `StoreError` subclass with the client's exception kept as
its cause.

This is the only colabq module that imports `huggingface_hub`, and only inside functions. The URI
grammar, the retry policy and the transfer primitives live in the VM uploader
(`worker/vm/colabq_sync.py`, stdlib-only at import), so the worker and the VM share them; an
upload of this host's own files by path (`upload_path`) is here: the VM's uploader reads what it
opened without following links instead (`worker/vm/colabq_tree.py`). The wire format of results
is the wrapper's; whether a job succeeded is the runner's call.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from worker.errors import (
    HubAuthError,
    HubEmptyArtifact,
    HubNotFound,
    HubRepoNotPrivate,
    HubRequestError,
    HubUnavailable,
    HubUriError,
    StoreError,
)
from worker.spec import ArtifactDest, JobSpec
from worker.store.artifacts import (
    Verification,
    artifact_path,
    console_name,
    logs_path,
    parse_exit_code,
    read_from,
)
from worker.vm.colabq_sync import (
    HubRef,
    Inspection,
    RetryPolicy,
    call_with_retries,
    describe,
    download_path,
    http_status,
    inspect_path,
    is_transient,
    split_hf_uri,
    transport_errors,
)

if TYPE_CHECKING:
    from huggingface_hub import HfApi

T = TypeVar("T")
__all__ = ["HubRef", "HubStore", "RepoCheck", "RetryPolicy", "parse_hf_uri"]


def parse_hf_uri(uri: str) -> HubRef:
    """`hf://[datasets/]OWNER/REPO[@REV][/PATH]` -> `HubRef`; `HubUriError` if it does not parse."""
    try:
        return split_hf_uri(uri)
    except ValueError as exc:
        raise HubUriError(uri, str(exc)) from exc


def dest_ref(dest: ArtifactDest, path: str = "") -> HubRef:
    if dest.kind != "hf":
        raise StoreError(f"{dest.repo} is a {dest.kind!r} destination, not a Hub repo.")
    return HubRef(dest.repo_type, dest.repo, None, "/".join(p for p in (dest.prefix, path) if p))


@dataclass(frozen=True)
class RepoCheck:
    """A passed output-repo check (a failed one raises): what was found or done."""

    repo_id: str
    repo_type: str
    created: bool
    private: bool
    writable: bool
    detail: str


class HubStore:
    """Results on the Hub. `token=None` uses the machine's login (HF_TOKEN or the token file)."""

    def __init__(
        self,
        endpoint: str | None,
        token: str | None,
        *,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._endpoint = endpoint.rstrip("/") if endpoint else None
        self._token = token
        self._retry = retry or RetryPolicy(attempts=5, base_s=2.0, cap_s=60.0)
        self._sleep = sleep
        self._client: HfApi | None = None

    def __repr__(self) -> str:  # never the token
        return f"HubStore(endpoint={self._endpoint!r})"

    # --- the ArtifactStore protocol -----------------------------------------------------------

    def location(self, spec: JobSpec) -> str:
        return dest_ref(spec.artifact).uri

    def verify(self, spec: JobSpec) -> Verification:
        """Expected artifacts present and non-empty, and `exit_code` readable. A missing repo is
        "not verified"; a Hub that cannot answer raises (not measured is not found-none)."""
        root = dest_ref(spec.artifact)
        try:
            files = self._files_under(root)
        except HubNotFound as exc:
            names = (f"logs/{spec.job_id}/exit_code", *spec.expected_artifacts)
            return Verification(False, None, (), names, str(exc))
        present, missing = [], []
        for name in (f"logs/{spec.job_id}/exit_code", *spec.expected_artifacts):
            path = artifact_path(spec, name)
            under = f"{path}/"
            if files.get(path, 0) > 0 or any(
                p.startswith(under) and size > 0 for p, size in files.items()
            ):
                present.append(name)
            else:
                missing.append(name)
        exit_file = f"{logs_path(spec)}/exit_code"
        exit_code = None
        if files.get(exit_file, 0) > 0:
            exit_code = parse_exit_code(self._read_text(dest_ref(spec.artifact), exit_file))
        ok = not missing and exit_code is not None
        detail = "" if ok else f"missing: {', '.join(missing) or 'a readable exit_code'}"
        return Verification(ok, exit_code, tuple(present), tuple(missing), detail)

    def console_tail(self, spec: JobSpec, segment: int, offset: int) -> bytes | None:
        """The stored console copy from `offset` on (downloaded whole: the Hub serves no byte
        range through the client); None when the repo holds no such file."""
        repo = dest_ref(spec.artifact)
        path = f"{logs_path(spec)}/{console_name(segment)}"
        ref = HubRef(repo.repo_type, repo.repo_id, None, path)
        api = self._api()
        with tempfile.TemporaryDirectory(prefix="colabq-hub-") as tmp:
            try:
                local = self._call(
                    "download", ref, lambda: download_path(api, ref, Path(tmp), "file")
                )
            except HubNotFound:
                return None
            return read_from(local, offset)

    # --- repos and paths ----------------------------------------------------------------------

    def check_output_repo(self, dest: ArtifactDest) -> RepoCheck:
        """The repo exists (or is created, private), is private, and this token can write to it.
        Visibility is never changed: a public repo fails."""
        ref = dest_ref(dest)
        ref = HubRef(ref.repo_type, ref.repo_id, None, "")
        api = self._api()
        created = False
        try:
            info = self._call(
                "repo lookup", ref, lambda: api.repo_info(ref.repo_id, repo_type=ref.repo_type)
            )
        except HubNotFound:
            try:
                self._call("repo creation", ref, lambda: _create_private(api, ref))
                created = True
            except HubRequestError as exc:
                if exc.status != 409:  # 409: created meanwhile by someone else: look again
                    raise
            info = self._call(
                "repo lookup", ref, lambda: api.repo_info(ref.repo_id, repo_type=ref.repo_type)
            )
        if not info.private:
            raise HubRepoNotPrivate(ref.repo_id, ref.repo_type)
        self._call("write check", ref, lambda: self._probe_write(api, ref))
        what = "created private repo" if created else "existing private repo"
        return RepoCheck(
            ref.repo_id, ref.repo_type, created, True, True, f"{what}; token can write"
        )

    def check_destination(self, dest: ArtifactDest) -> str:
        return self.check_output_repo(dest).detail

    def whoami(self) -> dict[str, Any]:
        """The token's `whoami-v2` answer: its account, its orgs and its role
        (`worker.people.tokenscope` reads it)."""
        api = self._api()
        answer = self._call("whoami", HubRef("model", "", None, ""), api.whoami)
        return dict(answer) if isinstance(answer, dict) else {}

    def checkpoint_uri(self, spec: JobSpec) -> str | None:
        """The job's own synced checkpoint (its first sync path), if it holds data."""
        if not spec.sync_paths:
            return None
        uri = dest_ref(spec.artifact, Path(spec.sync_paths[0]).name).uri
        try:
            self.exists_nonempty(uri)
        except StoreError:
            return None
        return uri

    def exists_nonempty(self, uri: str) -> int:
        """Bytes held at `uri` (a file or a folder). `HubNotFound` if it is not there,
        `HubEmptyArtifact` if it holds only zero bytes."""
        ref = parse_hf_uri(uri)
        return self._inspect(ref).size_bytes

    def download(self, uri: str, dest_dir: Path) -> Path:
        """Download a file or folder below `dest_dir` (keeping its repo path); returns its path."""
        ref = parse_hf_uri(uri)
        found = self._inspect(ref)
        dest_dir.mkdir(parents=True, exist_ok=True)
        api = self._api()
        return self._call("download", ref, lambda: download_path(api, ref, dest_dir, found.kind))

    def upload_folder(
        self, local: Path, dest: ArtifactDest, path_in_repo: str, *, replace: bool = False
    ) -> str:
        """Upload a folder (or a file) to `path_in_repo` (from the repo root, not the prefix) as
        one commit, retried on transient errors; returns the commit id. `replace` also deletes
        remote files under `path_in_repo` that `local` lacks."""
        ref = dest_ref(dest)
        ref = HubRef(ref.repo_type, ref.repo_id, None, path_in_repo.strip("/"))
        if not local.exists():
            raise StoreError(f"Nothing to upload: {local} does not exist.")
        api = self._api()
        return self._call(
            "upload",
            ref,
            lambda: upload_path(api, ref.repo_id, ref.repo_type, local, ref.path, replace=replace),
        )

    def prefix_files(self, dest: ArtifactDest) -> dict[str, int]:
        """Every file under the destination's prefix (path -> bytes); empty if none."""
        return self._files_under(dest_ref(dest))

    def delete_prefix(self, dest: ArtifactDest) -> str:
        """Delete the destination's prefix folder in one commit (history keeps it; nothing is
        rewritten). Only ever called by an explicit, confirmed `colabq clean --delete-remote`."""
        ref = dest_ref(dest)
        if not ref.path.strip("/"):
            raise StoreError(f"Refusing to delete {ref.uri}: the destination has no prefix.")
        api = self._api()
        info = self._call(
            "delete",
            ref,
            lambda: api.delete_folder(
                ref.path, repo_id=ref.repo_id, repo_type=ref.repo_type,
                commit_message=f"colabq clean: delete {ref.path}",
            ),
        )  # fmt: skip
        return str(getattr(info, "oid", "") or "")

    # --- internals ----------------------------------------------------------------------------

    def _api(self) -> HfApi:
        if self._client is None:
            from huggingface_hub import HfApi

            self._client = HfApi(endpoint=self._endpoint, token=self._token, library_name="colabq")
        return self._client

    def _call(self, operation: str, ref: HubRef, fn: Callable[[], T]) -> T:
        try:
            return call_with_retries(fn, self._retry, sleep=self._sleep)
        except Exception as exc:
            if isinstance(exc, StoreError) or not isinstance(
                exc, (OSError, ValueError, *transport_errors())
            ):
                raise  # already ours, or a bug of ours: not a Hub failure
            raise self._translate(exc, operation, ref) from exc

    def _translate(self, exc: BaseException, operation: str, ref: HubRef) -> StoreError:
        from huggingface_hub.errors import (
            HFValidationError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )

        status = http_status(exc)
        server = getattr(exc, "server_message", None)
        reason = _redact(server, self._token) if server else describe(exc, self._token)
        if isinstance(exc, RepositoryNotFoundError):
            return HubNotFound(ref.uri, "repo")
        if isinstance(exc, RevisionNotFoundError):
            return HubNotFound(ref.uri, "revision")
        if status == 404:
            return HubNotFound(ref.uri, "path")
        if status in (401, 403):
            return HubAuthError(ref.repo_id, status, reason)
        if is_transient(exc):
            return HubUnavailable(operation, self._retry.attempts, status, reason)
        if status is not None:
            return HubRequestError(operation, status, reason)
        if isinstance(exc, HFValidationError):
            return HubUriError(ref.uri, reason)
        return StoreError(f"Hub {operation} failed for {ref.uri}: {reason}")

    def _inspect(self, ref: HubRef) -> Inspection:
        api = self._api()
        found = self._call("lookup", ref, lambda: inspect_path(api, ref))
        if found.kind == "missing":
            raise HubNotFound(ref.uri, "path")
        if found.size_bytes == 0:
            raise HubEmptyArtifact(ref.uri)
        return found

    def _files_under(self, root: HubRef) -> dict[str, int]:
        from huggingface_hub import RepoFile

        api = self._api()

        def listing() -> dict[str, int]:
            tree = api.list_repo_tree(
                root.repo_id, root.path or None, recursive=True, repo_type=root.repo_type
            )
            return {e.path: e.size for e in tree if isinstance(e, RepoFile)}

        try:
            return self._call("listing", root, listing)
        except HubNotFound as exc:
            if exc.what != "path":
                raise
            return {}  # the prefix folder does not exist yet: every artifact is missing

    def _read_text(self, repo: HubRef, path: str) -> str:
        api = self._api()
        ref = HubRef(repo.repo_type, repo.repo_id, None, path)
        with tempfile.TemporaryDirectory(prefix="colabq-hub-") as tmp:
            local = self._call("download", ref, lambda: download_path(api, ref, Path(tmp), "file"))
            return local.read_text(errors="replace")

    def _probe_write(self, api: HfApi, ref: HubRef) -> None:
        """Ask the preupload endpoint how it would store a one-byte file: it checks write access
        and stores nothing (regular files travel only inside a commit, and none is made). A
        token's whoami role cannot tell: fine-grained tokens carry per-repo permissions."""
        from huggingface_hub import CommitOperationAdd

        probe = CommitOperationAdd(path_in_repo=".colabq-write-probe", path_or_fileobj=b"x")
        api.preupload_lfs_files(ref.repo_id, [probe], repo_type=ref.repo_type)


def _redact(text: str, secret: str | None) -> str:
    text = " ".join(str(text).split())
    return text.replace(secret, "<token>") if secret else text


def _create_private(api: HfApi, ref: HubRef) -> None:
    api.create_repo(ref.repo_id, repo_type=ref.repo_type, private=True, exist_ok=False)


def upload_path(
    api: HfApi, repo_id: str, repo_type: str, src: Path, dst: str, *, replace: bool = False
) -> str:
    """Upload a file or folder to `dst` as one commit; returns the commit id. `replace` also
    deletes remote files under `dst` that `src` lacks (a folder mirror)."""
    message = f"colabq: upload {dst or '/'}"
    if src.is_dir():
        info = api.upload_folder(
            repo_id=repo_id,
            repo_type=repo_type,
            folder_path=src,
            path_in_repo=dst,
            commit_message=message,
            delete_patterns="*" if replace else None,
        )
    else:
        info = api.upload_file(
            path_or_fileobj=str(src),
            path_in_repo=dst,
            repo_id=repo_id,
            repo_type=repo_type,
            commit_message=message,
        )
    return str(info.oid)
