"""Exceptions the emulated CLI raises, named like the real CLI's so tracebacks read the same.

The classes that stand for foreign libraries set `__module__`, so a standard traceback ends with
e.g. `colab_cli.client.ColabRequestError: ...` exactly like the real program's.
"""

from __future__ import annotations

COLAB_BASE = "https://colab.research.google.com"


class CliExit(Exception):
    """Leave the command with `code`; whatever had to be printed was printed already."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class AuthRefreshExit(CliExit):
    """The ADC refresh failure path, a `SystemExit(1)` in the real CLI (swallowed in places)."""


class UsageError(Exception):
    """A Click usage error: boxed `Error` on stderr, exit 2."""

    def __init__(self, message: str, command: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.command = command


class ColabRequestError(Exception):
    pass


ColabRequestError.__module__ = "colab_cli.client"


class RequestsConnectionError(Exception):
    pass


RequestsConnectionError.__module__ = "requests.exceptions"
RequestsConnectionError.__name__ = "ConnectionError"
RequestsConnectionError.__qualname__ = "ConnectionError"


class RequestsHTTPError(Exception):
    """`requests.exceptions.HTTPError` (raise_for_status), e.g. a runtime proxy answering 404."""


RequestsHTTPError.__module__ = "requests.exceptions"
RequestsHTTPError.__name__ = "HTTPError"
RequestsHTTPError.__qualname__ = "HTTPError"


class RequestsReadTimeout(Exception):
    """`requests.exceptions.ReadTimeout`: a backend request got no answer within its timeout."""


RequestsReadTimeout.__module__ = "requests.exceptions"
RequestsReadTimeout.__name__ = "ReadTimeout"
RequestsReadTimeout.__qualname__ = "ReadTimeout"


def read_timeout(timeout_s: float) -> RequestsReadTimeout:
    """What requests raises when the backend does not answer within `timeout_s` (shown as the
    caller gave it: google-auth's int 120, or the float of COLAB_CLI_REQUEST_TIMEOUT)."""
    return RequestsReadTimeout(
        "HTTPSConnectionPool(host='colab.research.google.com', port=443): Read timed out. "
        f"(read timeout={timeout_s})"
    )


class DefaultCredentialsError(Exception):
    pass


DefaultCredentialsError.__module__ = "google.auth.exceptions"

DEFAULT_CREDENTIALS_MESSAGE = (
    "Your default credentials were not found. To set up Application Default Credentials, see "
    "https://cloud.google.com/docs/authentication/external/set-up-adc for more information."
)


def http_error(method: str, url: str, status: int | str) -> Exception:
    """What the real client raises when a backend request fails with `status` (or "network")."""
    if status == "network":
        path = url.removeprefix(COLAB_BASE)
        return RequestsConnectionError(
            "HTTPSConnectionPool(host='colab.research.google.com', port=443): Max retries "
            f'exceeded with url: {path} (Caused by NameResolutionError("<urllib3.connection.'
            "HTTPSConnection object at 0x7f3a2c1d5e50>: Failed to resolve "
            "'colab.research.google.com' ([Errno -3] Temporary failure in name resolution)\"))"
        )
    code = int(status)
    kind = "Client Error" if code < 500 else "Server Error"
    return ColabRequestError(f"Failed to issue request {method} {url}: {code} {kind}")
