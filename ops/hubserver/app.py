"""The server's settings and the state every route shares, plus the access checks routes use.

`ServerConfig` is resolved once at start-up (command line or test fixture); `HubState` bundles the
stores built from it. `readable_repo`/`writable_repo` implement the Hub's visibility rules on top
of `auth.Principal`: a repo you may not see is a 404, a repo you may see but not write is a
401/403. LFS upload tickets (the self-authorising hrefs handed out by the LFS batch endpoint)
live here too because the batch and upload routes both need them.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

from .auth import Principal, TokenTable
from .errors import HubError, bad_request, repo_not_found
from .faults import FaultTable
from .objects import ObjectStore
from .repos import RepoKey, RepoRecord, RepoStore, RepoType, check_repo_name
from .reqlog import RequestLog

DEFAULT_LFS_THRESHOLD_BYTES = 10 * 1024 * 1024
DEFAULT_TREE_PAGE_SIZE = 1000  # the Hub's page size for tree listings without `expand`
_REPO_TYPES = {**{t.plural: t for t in RepoType}, **{t.value: t for t in RepoType}}


@dataclass(frozen=True)
class ServerConfig:
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 0
    tokens_path: Path | None = None
    lfs_threshold_bytes: int = DEFAULT_LFS_THRESHOLD_BYTES
    tree_page_size: int = DEFAULT_TREE_PAGE_SIZE
    upload_ticket_ttl_s: float = 3600.0


@dataclass(frozen=True)
class UploadTicket:
    sha256: str
    size: int
    expires_at: float


class UploadTickets:
    """Opaque one-shot upload URLs: the LFS PUT carries no Authorization header, like S3."""

    def __init__(self, ttl_s: float) -> None:
        self._ttl_s = ttl_s
        self._tickets: dict[str, UploadTicket] = {}
        self._lock = threading.Lock()

    def issue(self, sha256: str, size: int) -> str:
        ticket = secrets.token_urlsafe(24)
        with self._lock:
            self._tickets[ticket] = UploadTicket(sha256, size, time.monotonic() + self._ttl_s)
        return ticket

    def redeem(self, ticket: str) -> UploadTicket:
        with self._lock:
            found = self._tickets.pop(ticket, None)
        if found is None or found.expires_at < time.monotonic():
            raise HubError(403, "Upload URL is invalid, expired or already used")
        return found


@dataclass
class HubState:
    config: ServerConfig
    tokens: TokenTable
    objects: ObjectStore
    repos: RepoStore
    faults: FaultTable = field(default_factory=FaultTable)
    log: RequestLog = field(default_factory=lambda: RequestLog(None))
    tickets: UploadTickets = field(default_factory=lambda: UploadTickets(3600.0))


def build_state(config: ServerConfig) -> HubState:
    config.data_dir.mkdir(parents=True, exist_ok=True)
    objects = ObjectStore(config.data_dir / "objects")
    return HubState(
        config=config,
        tokens=TokenTable.from_file(config.tokens_path),
        objects=objects,
        repos=RepoStore(config.data_dir / "repos", objects),
        log=RequestLog(config.data_dir / "requests.jsonl"),
        tickets=UploadTickets(config.upload_ticket_ttl_s),
    )


def repo_key(repo_type: str, namespace: str, name: str) -> RepoKey:
    """Key from URL parts; `repo_type` is a plural ("models") or a singular ("model")."""
    kind = _REPO_TYPES.get(repo_type)
    if kind is None:
        raise bad_request(f"Unknown repo type {repo_type!r}")
    namespace, name = unquote(namespace), unquote(name)
    check_repo_name(namespace)
    check_repo_name(name)
    return RepoKey(kind, namespace, name)


def readable_repo(state: HubState, key: RepoKey, principal: Principal) -> RepoRecord:
    record = state.repos.get(key)
    if record is None or not principal.can_read(key.namespace, record.private):
        raise repo_not_found()
    return record


def writable_repo(state: HubState, key: RepoKey, principal: Principal) -> RepoRecord:
    record = readable_repo(state, key, principal)
    principal.check_write(key.namespace)
    return record


def repo_url(base_url: str, key: RepoKey) -> str:
    return f"{base_url}/{key.repo_type.url_prefix}{key.repo_id}"
