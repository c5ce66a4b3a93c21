"""Tokens and who may do what.

Owns the token table (loaded from the `--tokens` JSON file, changeable at run time through the
admin API), turning an `Authorization` header into a `Principal`, and the Hub's permission rules:
anyone reads public repos, a user reads private repos of their own namespace (or of an org listed
for the token), and only a `write` token writes, and only in those namespaces.

Tokens file format: `{"<token>": {"user": "alice", "role": "write", "orgs": ["team"]}}`
(`orgs` optional, `role` is `read` or `write`).
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from .errors import HubError, forbidden, unauthorized


class TokenRole(StrEnum):
    READ = "read"
    WRITE = "write"


@dataclass(frozen=True)
class TokenGrant:
    user: str
    role: TokenRole
    orgs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Principal:
    """The caller of one request; `user is None` means anonymous."""

    user: str | None = None
    role: TokenRole | None = None
    orgs: tuple[str, ...] = ()
    token_fingerprint: str | None = None

    @property
    def namespaces(self) -> tuple[str, ...]:
        return () if self.user is None else (self.user, *self.orgs)

    def can_read(self, namespace: str, private: bool) -> bool:
        return not private or namespace in self.namespaces

    def check_write(self, namespace: str) -> None:
        """Raise the Hub's 401/403 unless this principal may write in `namespace`."""
        if self.user is None:
            raise unauthorized("You must be authenticated to perform this action")
        if self.role is not TokenRole.WRITE:
            raise forbidden(
                f"This token has the 'read' role: a write token is needed to modify "
                f"repos of '{namespace}'"
            )
        if namespace not in self.namespaces:
            raise forbidden(f"You don't have the rights to write to the namespace '{namespace}'")


def fingerprint(token: str) -> str:
    """Short, non-reversible id of a token, safe to write to logs."""
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()[:12]


def bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip() or None


class TokenTable:
    """Thread-safe token -> grant map."""

    def __init__(self, grants: dict[str, TokenGrant] | None = None) -> None:
        self._grants = dict(grants or {})
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path: Path | None) -> TokenTable:
        if path is None:
            return cls()
        raw = json.loads(path.read_text())
        return cls({token: parse_grant(entry) for token, entry in raw.items()})

    def set(self, token: str, grant: TokenGrant) -> None:
        with self._lock:
            self._grants[token] = grant

    def get(self, token: str) -> TokenGrant | None:
        with self._lock:
            return self._grants.get(token)

    def secrets(self) -> list[str]:
        with self._lock:
            return list(self._grants)

    def authenticate(self, authorization: str | None) -> Principal:
        """Principal for an Authorization header; HubError 401 for a token we don't know."""
        token = bearer_token(authorization)
        if token is None:
            if authorization:
                raise unauthorized()
            return Principal()
        grant = self.get(token)
        if grant is None:
            raise unauthorized()
        return Principal(grant.user, grant.role, grant.orgs, fingerprint(token))


def parse_grant(entry: dict[str, object]) -> TokenGrant:
    try:
        user = str(entry["user"])
        role = TokenRole(str(entry.get("role", TokenRole.READ)))
    except (KeyError, ValueError) as exc:
        raise HubError(400, f"Invalid token entry {entry!r}: {exc}") from exc
    orgs = entry.get("orgs") or []
    if not isinstance(orgs, list):
        raise HubError(400, f"Invalid token entry {entry!r}: orgs must be a list")
    return TokenGrant(user, role, tuple(str(org) for org in orgs))
