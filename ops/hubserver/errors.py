"""Errors that become Hub-style error answers.

The real Hub tells the client *why* a request failed through the status code, an `X-Error-Code`
header (`RepoNotFound`, `RevisionNotFound`, `EntryNotFound`, ...) and a JSON body `{"error": ...}`.
`huggingface_hub.utils.hf_raise_for_status` keys its exception classes on exactly those, so every
failure inside the server is raised as a `HubError` carrying them. Turning one into bytes on the
wire is left to `http_io`.
"""

from __future__ import annotations

from typing import Any


class HubError(Exception):
    """A request failure, as the Hub would answer it."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        error_code: str | None = None,
        headers: dict[str, str] | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.error_code = error_code
        self.headers = dict(headers or {})
        self.extra_body = dict(extra_body or {})


def repo_not_found() -> HubError:
    # The Hub answers the same for "missing" and "private and not yours": no existence leak.
    return HubError(404, "Repository not found", error_code="RepoNotFound")


def revision_not_found(revision: str) -> HubError:
    return HubError(404, f"Invalid rev id: {revision}", error_code="RevisionNotFound")


def entry_not_found(message: str, *, commit_oid: str | None = None) -> HubError:
    # X-Repo-Commit on a missing entry lets the client cache the miss for that commit.
    headers = {"X-Repo-Commit": commit_oid} if commit_oid else None
    return HubError(404, message, error_code="EntryNotFound", headers=headers)


def bad_request(message: str) -> HubError:
    return HubError(400, message)


def unauthorized(message: str = "Invalid credentials in Authorization header") -> HubError:
    # This exact message makes the client keep a 401 as a plain HfHubHTTPError.
    return HubError(401, message)


def forbidden(message: str) -> HubError:
    return HubError(403, message)
