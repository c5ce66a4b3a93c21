"""Whether a remote input (`https://`, `hf://`, `gs://`) exists, checked many at once.

Owns the `RemoteChecker` protocol, the urllib checker for `https://`, routing by scheme to
injected checkers (the Hub store lives in `worker/`, so `hf://` is always delegated), and the
thread pool that checks every URI concurrently. "Could not check" is its own state, never a
pass. urllib.request and the thread pool are imported when a URI is checked (about 0.02 s of
start-up that a pre-flight without remote inputs does not pay).
"""

from __future__ import annotations

import functools
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import urllib.request

MAX_PARALLEL_CHECKS = 16


class RemoteState(StrEnum):
    EXISTS = "exists"
    MISSING = "missing"  # absent, or not readable with the job's credentials
    UNCHECKABLE = "uncheckable"


@dataclass(frozen=True)
class RemoteStatus:
    state: RemoteState
    detail: str


class RemoteChecker(Protocol):
    def check(self, uri: str) -> RemoteStatus: ...


def scheme_of(uri: str) -> str:
    return uri.split("://", 1)[0].lower() if "://" in uri else ""


@functools.cache
def _keep_method_redirect() -> type[urllib.request.HTTPRedirectHandler]:
    import urllib.request

    class KeepMethodRedirect(urllib.request.HTTPRedirectHandler):
        """Follow redirects without turning HEAD into a full GET or leaking auth to another
        host."""

        def redirect_request(
            self,
            req: urllib.request.Request,
            fp: object,
            code: int,
            msg: str,
            headers: object,
            newurl: str,
        ) -> urllib.request.Request | None:
            new = super().redirect_request(req, fp, code, msg, headers, newurl)  # type: ignore[arg-type]
            if new is not None:
                new.method = req.get_method()
                old_host = urllib.parse.urlsplit(req.full_url).netloc
                if urllib.parse.urlsplit(newurl).netloc != old_host:
                    new.remove_header("Authorization")
            return new

    return KeepMethodRedirect


# A HEAD some servers refuse (405/501) or sign only for GET (400/403 on presigned URLs).
_RETRY_WITH_GET = frozenset({400, 403, 405, 501})


@dataclass(frozen=True)
class HttpRemoteChecker:
    """HEAD, then a one-byte ranged GET if HEAD is refused; bounded by `timeout_s` per request.

    `headers` are the credentials the job will have (e.g. Authorization); `allow_http` admits
    plain `http://` (local mirrors and tests); `use_env_proxies=False` ignores *_proxy variables.
    """

    timeout_s: float = 10.0
    headers: Mapping[str, str] = field(default_factory=dict)
    allow_http: bool = False
    use_env_proxies: bool = True

    def check(self, uri: str) -> RemoteStatus:
        scheme = scheme_of(uri)
        if scheme != "https" and not (self.allow_http and scheme == "http"):
            return RemoteStatus(RemoteState.UNCHECKABLE, f"not an https URI: {uri}")
        import urllib.request

        handlers: list[urllib.request.BaseHandler] = [_keep_method_redirect()()]
        if not self.use_env_proxies:
            handlers.append(urllib.request.ProxyHandler({}))
        opener = urllib.request.build_opener(*handlers)
        code, detail = self._status(opener, uri, "HEAD")
        if code in _RETRY_WITH_GET:
            code, detail = self._status(opener, uri, "GET")
        if code is None:
            return RemoteStatus(RemoteState.UNCHECKABLE, detail)
        if 200 <= code < 300:
            return RemoteStatus(RemoteState.EXISTS, f"HTTP {code}")
        if code in (404, 410):
            return RemoteStatus(RemoteState.MISSING, f"HTTP {code}: not found")
        if code in (401, 403):
            return RemoteStatus(
                RemoteState.MISSING,
                f"HTTP {code}: not readable with the credentials the job will have",
            )
        return RemoteStatus(RemoteState.UNCHECKABLE, f"HTTP {code}: {detail}")

    def _status(
        self, opener: urllib.request.OpenerDirector, uri: str, method: str
    ) -> tuple[int | None, str]:
        import urllib.error
        import urllib.request

        # The scheme was checked in `check`: only http(s) reaches here, never file:.
        request = urllib.request.Request(uri, method=method, headers=dict(self.headers))  # noqa: S310
        if method == "GET":
            request.add_header("Range", "bytes=0-0")
        try:
            with opener.open(request, timeout=self.timeout_s) as response:
                return int(response.status), str(response.reason)
        except urllib.error.HTTPError as exc:
            return exc.code, str(exc.reason)
        except (urllib.error.URLError, TimeoutError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            return None, f"could not reach it: {reason}"


@dataclass(frozen=True)
class SchemeRemoteChecker:
    """Routes each URI to the checker for its scheme; a scheme without one is UNCHECKABLE."""

    routes: Mapping[str, Callable[[str], RemoteStatus]]

    def check(self, uri: str) -> RemoteStatus:
        scheme = scheme_of(uri)
        route = self.routes.get(scheme)
        if route is None:
            return RemoteStatus(
                RemoteState.UNCHECKABLE,
                f"no checker for {scheme or 'this'}:// URIs here; verify it by hand",
            )
        return route(uri)


def build_remote_checker(
    *,
    timeout_s: float = 10.0,
    hf: Callable[[str], RemoteStatus] | None = None,
    gs: Callable[[str], RemoteStatus] | None = None,
    headers: Mapping[str, str] | None = None,
) -> SchemeRemoteChecker:
    """The checker the CLI uses: urllib for https, and whatever it is given for hf:// and gs://."""
    http = HttpRemoteChecker(timeout_s=timeout_s, headers=dict(headers or {}))
    routes: dict[str, Callable[[str], RemoteStatus]] = {"https": http.check}
    if hf is not None:
        routes["hf"] = hf
    if gs is not None:
        routes["gs"] = gs
    return SchemeRemoteChecker(routes)


def check_all(
    uris: Iterable[str], checker: RemoteChecker, *, max_parallel: int = MAX_PARALLEL_CHECKS
) -> dict[str, RemoteStatus]:
    """Check every distinct URI at once (a thread each, up to `max_parallel`); never raises."""
    unique = list(dict.fromkeys(uris))
    if not unique:
        return {}
    from concurrent.futures import ThreadPoolExecutor

    def one(uri: str) -> RemoteStatus:
        try:
            return checker.check(uri)
        except Exception as exc:  # a checker bug must not hide the other results
            return RemoteStatus(RemoteState.UNCHECKABLE, f"checker failed: {exc!r}")

    with ThreadPoolExecutor(max_workers=min(max_parallel, len(unique))) as pool:
        return dict(zip(unique, pool.map(one, unique), strict=True))
