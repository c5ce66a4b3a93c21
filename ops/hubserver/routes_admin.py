"""Admin endpoints under `/_admin/` (not part of the Hub API): fault rules, the request log, token
grants and forced repo visibility. Tests and the offline demo drive them, usually through
`admin_client.AdminClient`.

They take no credentials (the server binds to loopback by default), are never subject to faults
and are not written to the request log.

    GET    /_admin/health                 -> {"ok": true}
    GET    /_admin/faults                 -> [rule, ...]
    POST   /_admin/faults                 {"kind": "status|close|delay|down", "method": regex,
                                           "path": regex, "status": 503, "count": 1, "delay_s": 0}
    DELETE /_admin/faults                 clear all rules
    DELETE /_admin/faults/{id}            remove one rule
    GET    /_admin/requests               -> [record, ...]
    DELETE /_admin/requests               clear the in-memory log
    POST   /_admin/tokens             {"token": ..., "user": ..., "role": "read|write", "orgs": []}
    POST   /_admin/repos/visibility   {"repo_id": "ns/name", "repo_type": "model", "private": false}
"""

from __future__ import annotations

import re

from .app import HubState, repo_key
from .auth import Principal, parse_grant
from .errors import HubError, bad_request
from .http_io import Request, Response, json_response
from .routing import Route, route


def build_routes(state: HubState) -> list[Route]:
    def health(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        return json_response({"ok": True})

    def list_faults(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        return json_response([rule.to_json() for rule in state.faults.rules()])

    def add_fault(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        try:
            rule = state.faults.add(request.body.read_json())
        except ValueError as exc:
            raise bad_request(f"Invalid fault rule: {exc}") from exc
        return json_response(rule.to_json(), status=201)

    def clear_faults(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        state.faults.clear()
        return json_response({"cleared": True})

    def remove_fault(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        if not state.faults.remove(int(match.group("id"))):
            raise HubError(404, f"No fault rule {match.group('id')}")
        return json_response({"removed": int(match.group("id"))})

    def list_requests(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        return json_response(state.log.entries())

    def clear_requests(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        state.log.clear()
        return json_response({"cleared": True})

    def set_token(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        body = request.body.read_json()
        token = body.pop("token", None)
        if not isinstance(token, str) or not token:
            raise bad_request("Missing token")
        grant = parse_grant(body)
        state.tokens.set(token, grant)
        return json_response(
            {"user": grant.user, "role": str(grant.role), "orgs": list(grant.orgs)}
        )

    def set_visibility(request: Request, principal: Principal, match: re.Match[str]) -> Response:
        body = request.body.read_json()
        namespace, _, name = str(body.get("repo_id", "")).partition("/")
        key = repo_key(str(body.get("repo_type") or "model"), namespace, name)
        state.repos.set_private(key, bool(body.get("private", False)))
        return json_response({"repo_id": key.repo_id, "private": bool(body.get("private", False))})

    return [
        route("GET", "/_admin/health", health),
        route("GET", "/_admin/faults", list_faults),
        route("POST", "/_admin/faults", add_fault),
        route("DELETE", "/_admin/faults", clear_faults),
        route("DELETE", r"/_admin/faults/(?P<id>\d+)", remove_fault),
        route("GET", "/_admin/requests", list_requests),
        route("DELETE", "/_admin/requests", clear_requests),
        route("POST", "/_admin/tokens", set_token),
        route("POST", "/_admin/repos/visibility", set_visibility),
    ]
