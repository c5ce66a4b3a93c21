"""Route table: which handler serves which method + raw-path regex.

Patterns match the raw (still percent-encoded) path, so a `%2F` inside a revision or a tree path
stays inside its segment; handlers unquote the groups they use. The first matching route wins.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .auth import Principal
from .errors import HubError
from .http_io import Request, Response

Handler = Callable[[Request, Principal, re.Match[str]], Response]

REPO_TYPES_RE = r"(?P<type>models|datasets|spaces)"
REPO_RE = r"(?P<ns>[^/]+)/(?P<name>[^/]+)"
API_REPO_RE = rf"/api/{REPO_TYPES_RE}/{REPO_RE}"
# Model repos have no prefix in file URLs: /alice/repo/resolve/..., /datasets/alice/repo/...
URL_REPO_RE = rf"/(?:(?P<prefix>datasets|spaces)/)?{REPO_RE}"


@dataclass(frozen=True)
class Route:
    methods: frozenset[str]
    pattern: re.Pattern[str]
    handler: Handler


def route(methods: str, pattern: str, handler: Handler) -> Route:
    return Route(frozenset(methods.split()), re.compile(f"^{pattern}$"), handler)


def dispatch(routes: Sequence[Route], request: Request, principal: Principal) -> Response:
    path_matched = False
    for candidate in routes:
        match = candidate.pattern.match(request.path)
        if match is None:
            continue
        path_matched = True
        if request.method in candidate.methods:
            return candidate.handler(request, principal, match)
    if path_matched:
        raise HubError(405, f"Method {request.method} not allowed on {request.path}")
    raise HubError(404, f"Not found: {request.method} {request.path}")
