"""Account and repo-level endpoints: whoami, repo create, repo info, settings (visibility), refs,
commit history, README metadata validation, and the refusal of Xet tokens.

File contents (preupload, commit, tree, paths-info) are `routes_content`'s; downloads and LFS
transfers are `routes_files`'.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from .app import HubState, readable_repo, repo_key, repo_url, writable_repo
from .auth import Principal
from .errors import HubError, bad_request, unauthorized
from .http_io import Request, Response, json_response
from .repos import DEFAULT_BRANCH, RepoKey, RepoType
from .routing import API_REPO_RE, Route, route
from .wire import commit_json, refs_json, repo_info_json, whoami_json

XET_REFUSAL = (
    "This Hub server does not implement Xet storage. Set HF_HUB_DISABLE_XET=1 in the client's "
    "environment so huggingface_hub uploads through the LFS/HTTP path."
)


def build_routes(state: HubState) -> list[Route]:
    def whoami(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        if principal.user is None:
            raise unauthorized("You must be authenticated to call whoami")
        return json_response(whoami_json(principal))

    def create_repo(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        body = request.body.read_json()
        name = body.get("name")
        if not isinstance(name, str):
            raise bad_request("Missing repo name")
        if principal.user is None:
            raise unauthorized("You must be authenticated to create a repo")
        namespace = body.get("organization") or principal.user
        key = repo_key(str(body.get("type") or RepoType.MODEL), namespace, name)
        principal.check_write(key.namespace)
        private = _requested_private(body)
        _, created = state.repos.create(key, private=bool(private), author=principal.user)
        url = repo_url(request.base_url, key)
        if not created:
            raise HubError(
                409, f"You already created this {key.repo_type} repo", extra_body={"url": url}
            )
        return json_response({"url": url, "name": key.repo_id, "id": key.repo_id})

    def repo_info(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        key = _key(match)
        record = readable_repo(state, key, principal)
        revision = unquote(match.group("rev") or DEFAULT_BRANCH)
        commit = state.repos.resolve(key, revision)
        return json_response(repo_info_json(record, commit, request.query_flag("blobs")))

    def settings(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        key = _key(match)
        record = writable_repo(state, key, principal)
        private = _requested_private(request.body.read_json())
        if private is not None:
            state.repos.set_private(key, private)
        return json_response({"private": record.private if private is None else private})

    def refs(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        return json_response(refs_json(readable_repo(state, _key(match), principal)))

    def commits(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        key = _key(match)
        readable_repo(state, key, principal)
        history = state.repos.history(key, unquote(match.group("rev")))
        return json_response([commit_json(commit) for commit in history])

    def validate_yaml(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        request.body.drain()
        return json_response({"errors": [], "warnings": []})

    def xet_token(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        raise HubError(501, XET_REFUSAL)

    return [
        route("GET", "/api/whoami-v2", whoami),
        route("POST", "/api/repos/create", create_repo),
        route("POST", "/api/validate-yaml", validate_yaml),
        route("GET", f"{API_REPO_RE}(?:/revision/(?P<rev>[^/]+))?", repo_info),
        route("PUT", f"{API_REPO_RE}/settings", settings),
        route("GET", f"{API_REPO_RE}/refs", refs),
        route("GET", f"{API_REPO_RE}/commits/(?P<rev>[^/]+)", commits),
        route("GET", f"{API_REPO_RE}/xet-(?:read|write)-token(?:/.*)?", xet_token),
    ]


def _key(match: re.Match[str]) -> RepoKey:
    return repo_key(match.group("type"), match.group("ns"), match.group("name"))


def _requested_private(body: dict[str, object]) -> bool | None:
    """`visibility` (current clients) or `private` (older ones); None when not asked."""
    visibility = body.get("visibility")
    if visibility is not None:
        if visibility not in ("public", "private"):
            raise bad_request(f"Unsupported visibility {visibility!r}")
        return visibility == "private"
    private = body.get("private")
    return None if private is None else bool(private)
