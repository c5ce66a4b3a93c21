"""Where a user's own Hub token may write, as the Hub says (`whoami-v2`), cached on this host.

A user's token (`<hf_token_dir>/user/<name>`) serves that user's jobs for the destinations it can
write (`worker.people.destinations`). The Hub answers `whoami-v2` with the token's account, its
orgs (each with the user's `roleInOrg`) and the token's own `auth.accessToken`:

- role `write` (or `admin`): the account's namespace, and every org where the user is `admin`,
  `write` or `contributor` (a `read` member writes nothing there);
- role `fineGrained`: the user and org entities, and the single repos, that its `scoped`
  permissions grant `repo.write`;
- role `read`, or an answer without a role: nothing.

The answer is read as data from another party: a name that is not a Hub name, or a field of
the wrong shape, is ignored rather than trusted. The Hub rate-limits whoami, so a scope is kept
in `<state_dir>/hub-scopes/<sha256 of the token>.json` (0600; names only, never the token) for
`COLABQ_HF_SCOPE_CACHE_S`: a token taken out of an org keeps its old scope at most that long.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from worker.settings import Settings

_NAME = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}$")
_REPO = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}$")
WRITING_ORG_ROLES = frozenset({"admin", "write", "contributor"})
REPO_KINDS = frozenset({"model", "dataset", "space"})


@dataclass(frozen=True)
class TokenScope:
    """What one token may write: whole namespaces, and single repos (`type:owner/name`)."""

    account: str
    namespaces: tuple[str, ...] = ()
    repos: tuple[str, ...] = ()

    def can_write(self, repo: str, repo_type: str) -> bool:
        owner = repo.partition("/")[0]
        return owner in self.namespaces or f"{repo_type}:{repo}" in self.repos

    def describe(self) -> str:
        """For a refusal: where it writes ("alice, alice-lab"), or "nothing"."""
        places = [*self.namespaces, *(r.partition(":")[2] for r in self.repos)]
        return ", ".join(places) if places else "nothing (a read token)"


def scope_of(whoami: Mapping[str, Any]) -> TokenScope:
    """The scope of a token from its `whoami-v2` answer (see the module's docstring)."""
    account = _name(whoami.get("name"))
    auth = whoami.get("auth")
    token = auth.get("accessToken") if isinstance(auth, Mapping) else None
    role = token.get("role") if isinstance(token, Mapping) else None
    if account is None or not isinstance(token, Mapping):
        return TokenScope(account or "")
    if role in ("write", "admin"):
        orgs = whoami.get("orgs")
        writing = [
            name for org in (orgs if isinstance(orgs, list) else []) if isinstance(org, Mapping)
            and org.get("roleInOrg") in WRITING_ORG_ROLES and (name := _name(org.get("name")))
        ]  # fmt: skip
        return TokenScope(account, (account, *writing))
    if role == "fineGrained":
        return _fine_grained(account, token.get("fineGrained"))
    return TokenScope(account)


def _fine_grained(account: str, grants: object) -> TokenScope:
    scoped = grants.get("scoped") if isinstance(grants, Mapping) else None
    namespaces: list[str] = []
    repos: list[str] = []
    for grant in scoped if isinstance(scoped, list) else []:
        if not isinstance(grant, Mapping) or "repo.write" not in (grant.get("permissions") or []):
            continue
        entity = grant.get("entity")
        kind = entity.get("type") if isinstance(entity, Mapping) else None
        name = entity.get("name") if isinstance(entity, Mapping) else None
        if kind in ("user", "org") and (ns := _name(name)):
            namespaces.append(ns)
        elif kind in REPO_KINDS and isinstance(name, str) and _REPO.fullmatch(name):
            repos.append(f"{kind}:{name}")
    return TokenScope(account, tuple(dict.fromkeys(namespaces)), tuple(dict.fromkeys(repos)))


def _name(value: object) -> str | None:
    return value if isinstance(value, str) and _NAME.fullmatch(value) else None


Whoami = Callable[[str], Mapping[str, Any]]  # a token -> its whoami-v2 answer


def hub_whoami(settings: Settings) -> Whoami:
    """Ask the Hub of `settings` (COLABQ_HF_ENDPOINT, else HF_ENDPOINT, else huggingface.co)."""
    from worker.store.hub import HubStore

    return lambda token: HubStore(settings.hub_endpoint(), token).whoami()


def token_scope(
    token_file: Path, settings: Settings, now: float, whoami: Whoami | None = None
) -> TokenScope:
    """The scope of the token in `token_file` (checked by the caller), from this host's cache
    while it is fresh, else from the Hub (`StoreError` when the Hub cannot say)."""
    token = token_file.read_text().strip()
    cache = settings.state_dir / "hub-scopes" / f"{hashlib.sha256(token.encode()).hexdigest()}.json"
    if (kept := _cached(cache, now, settings.hf_scope_cache_s)) is not None:
        return kept
    scope = scope_of((whoami or hub_whoami(settings))(token))
    with contextlib.suppress(OSError):  # a cache that cannot be written: ask again next time
        _keep(cache, scope, now)
    return scope


def _cached(path: Path, now: float, max_age_s: float) -> TokenScope | None:
    try:
        data = json.loads(path.read_text())
        at, scope = float(data["at"]), data["scope"]
        if not 0 <= now - at < max_age_s:
            return None
        return TokenScope(
            str(scope["account"]),
            tuple(n for n in scope["namespaces"] if _name(n)),
            tuple(r for r in scope["repos"] if isinstance(r, str) and ":" in r),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _keep(path: Path, scope: TokenScope, now: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(fd, "w") as fh:
        json.dump({"at": now, "scope": asdict(scope)}, fh)
    os.replace(tmp, path)
