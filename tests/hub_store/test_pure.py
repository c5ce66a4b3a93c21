"""Pure logic of the Hub store: the hf:// grammar, the backoff table, what counts as transient,
the retry loop (fake sleep), locations and the error tree (the token lookup is huggingface_hub's:
tests/hub_store/test_settings_hub.py)."""

from __future__ import annotations

from types import SimpleNamespace

import httpx2
import pytest

from tests.factories import make_spec
from worker.errors import (
    RETRYABLE,
    HubAuthError,
    HubDestinationExists,
    HubEmptyArtifact,
    HubNotFound,
    HubRepoNotPrivate,
    HubUnavailable,
    HubUriError,
    StoreError,
    UserInputError,
)
from worker.store.hub import HubRef, HubStore, RetryPolicy, parse_hf_uri
from worker.vm.colabq_sync import backoff_delays_s, call_with_retries, describe, is_transient

from .conftest import hf_dest


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("hf://alice/runs", HubRef("model", "alice/runs", None, "")),
        ("hf://alice/runs/ckpt/step-100", HubRef("model", "alice/runs", None, "ckpt/step-100")),
        ("hf://alice/runs/ckpt/", HubRef("model", "alice/runs", None, "ckpt")),
        ("hf://models/alice/m/w.bin", HubRef("model", "alice/m", None, "w.bin")),
        ("hf://datasets/alice/ds@v1/data/a.csv", HubRef("dataset", "alice/ds", "v1", "data/a.csv")),
        ("hf://alice/runs@refs%2Fpr%2F1/x", HubRef("model", "alice/runs", "refs/pr/1", "x")),
        ("hf://my-org/run.v2@0123abc", HubRef("model", "my-org/run.v2", "0123abc", "")),
    ],
)
def test_parse_hf_uri_accepts(uri: str, expected: HubRef) -> None:
    ref = parse_hf_uri(uri)

    assert ref == expected
    assert parse_hf_uri(ref.uri) == ref  # the printed form parses back to the same place


@pytest.mark.parametrize(
    ("uri", "why"),
    [
        ("gs://bucket/x", "expected hf://"),
        ("/content/ckpt", "expected hf://"),
        ("hf://gpt2", "expected hf://"),
        ("hf://spaces/alice/app/x", "Spaces"),
        ("hf://alice/runs/../secrets", "'..'"),
        ("hf://alice/runs/./x", "'..'"),
        ("hf://alice/ru ns/x", "whitespace"),
        ("hf://alice/runs@/x", "expected hf://"),
        ("hf://-alice/runs/x", "not a valid"),
    ],
)
def test_parse_hf_uri_rejects(uri: str, why: str) -> None:
    with pytest.raises(HubUriError, match=why) as excinfo:
        parse_hf_uri(uri)

    assert isinstance(excinfo.value, UserInputError) and isinstance(excinfo.value, StoreError)
    assert isinstance(excinfo.value.__cause__, ValueError)


@pytest.mark.parametrize(
    ("policy", "delays"),
    [
        (RetryPolicy(attempts=1, base_s=1, cap_s=10), ()),
        (RetryPolicy(attempts=3, base_s=1, cap_s=10), (1, 2)),
        (RetryPolicy(attempts=6, base_s=4, cap_s=120), (4, 8, 16, 32, 64)),
        (RetryPolicy(attempts=5, base_s=2, cap_s=5), (2, 4, 5, 5)),
        (RetryPolicy(attempts=0, base_s=2, cap_s=5), ()),
    ],
)
def test_backoff_delays(policy: RetryPolicy, delays: tuple[float, ...]) -> None:
    assert backoff_delays_s(policy) == delays


def _http_error(status: int) -> Exception:
    exc = OSError(f"HTTP {status}")
    exc.response = SimpleNamespace(status_code=status)  # type: ignore[attr-defined]
    return exc


_REQUEST = httpx2.Request("POST", "http://hub/api/models/a/b/commit/main")


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        *[(_http_error(s), True) for s in (408, 429, 500, 502, 503, 504)],
        *[(_http_error(s), False) for s in (400, 401, 403, 404, 409, 412, 413)],
        (httpx2.RemoteProtocolError("dropped", request=_REQUEST), True),
        (httpx2.ConnectError("refused", request=_REQUEST), True),
        (httpx2.ReadTimeout("slow", request=_REQUEST), True),
        (ConnectionError("xet-write-token refused"), False),  # hf_xet's refusal: configuration
        (ValueError("bad repo id"), False),
        (FileNotFoundError("gone"), False),
    ],
)
def test_is_transient(exc: Exception, transient: bool) -> None:
    assert is_transient(exc) is transient


def test_retry_loop_retries_transient_errors_then_succeeds() -> None:
    outcomes: list[Exception | str] = [_http_error(503), _http_error(429), "ok"]
    slept: list[float] = []

    def call() -> str:
        item = outcomes.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    assert call_with_retries(call, RetryPolicy(4, 0.5, 10), sleep=slept.append) == "ok"
    assert slept == [0.5, 1.0]


@pytest.mark.parametrize(
    ("status", "calls"),
    [(503, 3), (400, 1), (403, 1)],
    ids=["transient: every attempt", "permanent: once", "auth: once"],
)
def test_retry_loop_gives_up(status: int, calls: int) -> None:
    made: list[int] = []
    slept: list[float] = []

    def call() -> None:
        made.append(1)
        raise _http_error(status)

    with pytest.raises(OSError, match=str(status)):
        call_with_retries(call, RetryPolicy(3, 1, 10), sleep=slept.append)
    assert len(made) == calls
    assert slept == [1, 2][: calls - 1]


def test_describe_blanks_the_secret() -> None:
    secret = "hf_canary_secret_value"

    line = describe(RuntimeError(f"bad header Bearer {secret}\nsecond line"), secret)

    assert secret not in line and "<token>" in line
    assert "\n" not in line
    assert describe(RuntimeError("nothing to hide"), secret) == "RuntimeError: nothing to hide"


@pytest.mark.parametrize(
    ("dest", "location"),
    [
        (hf_dest("alice/runs", "exp1"), "hf://alice/runs/exp1"),
        (hf_dest("alice/runs", ""), "hf://alice/runs"),
        (hf_dest("alice/ds", "a/b", "dataset"), "hf://datasets/alice/ds/a/b"),
    ],
)
def test_location_is_an_hf_uri_of_the_prefix(dest: object, location: str) -> None:
    spec = make_spec(artifact=dest)
    store = HubStore("http://127.0.0.1:1", "hf_x")

    assert store.location(spec) == location
    assert parse_hf_uri(location).repo_id == spec.artifact.repo
    assert "hf_x" not in repr(store)


def test_a_local_destination_is_not_a_hub_store_location() -> None:
    with pytest.raises(StoreError, match="not a Hub repo"):
        HubStore(None, None).location(make_spec())


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (HubAuthError("alice/r", 403, "read token"), PermissionError),
        (HubNotFound("hf://alice/r/x"), LookupError),
        (HubEmptyArtifact("hf://alice/r/x"), ValueError),
        (HubUnavailable("upload", 3, 503, "down"), ConnectionError),
        (HubRepoNotPrivate("alice/r", "model"), PermissionError),
        (HubDestinationExists("hf://alice/r/x", 5), FileExistsError),
    ],
)
def test_hub_errors_are_store_errors_builtins_and_advise(error: StoreError, builtin: type) -> None:
    assert isinstance(error, StoreError) and isinstance(error, builtin)
    assert error.hint and error.advice().endswith(error.hint)
    assert (type(error) in RETRYABLE) is isinstance(error, HubUnavailable)
