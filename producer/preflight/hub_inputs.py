"""`hf://` inputs for the pre-flight's paths check, through `worker.store.hub.HubStore`.

Owns `HubInputChecker`: the `hf` route of the pre-flight's remote checker. The Hub store (and
with it pydantic and huggingface_hub) is built only when the first `hf://` URI is checked, so
`colabq preflight` on a repository without Hub inputs starts as fast as before (the settings
too are built then). Endpoint from `Settings.hub_endpoint()`, token from huggingface_hub's own
lookup (`producer.stage.find_hub_token`), as `colabq stage` has them. That is the submitting
machine's token: the job runs with the worker host's, so a pass here is the best check this side
can make. Few retries and a time bound: a Hub that keeps failing makes the input SKIP (not
checked), never PASS, and never stalls the pre-flight. The Hub settings of an `hf://` input
named on the command line are checked before (`producer.preflight.gate.build_hf_checker`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from producer.preflight.remote import RemoteState, RemoteStatus
from worker.errors import ColabqError, HubAuthError, HubEmptyArtifact, HubNotFound, HubUriError

if TYPE_CHECKING:
    from worker.settings import Settings


class SizedStore(Protocol):
    def exists_nonempty(self, uri: str) -> int: ...


def build_store(settings: Settings) -> SizedStore:
    """The Hub store for lookups: this machine's endpoint and token (None: anonymous reads)."""
    from producer.stage import find_hub_token
    from worker.store.hub import HubStore, RetryPolicy

    quick = RetryPolicy(attempts=2, base_s=0.5, cap_s=1.0)
    return HubStore(settings.hub_endpoint(), find_hub_token(), retry=quick)


class HubInputChecker:
    """Callable `hf://` URI → `RemoteStatus`; thread-safe (the paths check runs URIs at once).

    Each lookup is bounded by `timeout_s`: huggingface_hub retries a refused connection for
    about 23 s on its own, which a pre-flight must not wait through. A lookup past the bound is
    left to finish in a daemon thread and reported as not checked. The store is built in the
    calling thread (once, for every URI); a store that cannot be built makes the URI not
    checked, saying why (an invalid setting among them).
    """

    def __init__(self, build: Callable[[], SizedStore], *, timeout_s: float = 10.0) -> None:
        self._build = build
        self._timeout_s = timeout_s
        self._store: SizedStore | None = None
        self._lock = threading.Lock()

    def _get(self) -> SizedStore:
        with self._lock:
            if self._store is None:
                self._store = self._build()
            return self._store

    def __call__(self, uri: str) -> RemoteStatus:
        try:
            store = self._get()
        except (ColabqError, ImportError, OSError) as exc:
            return RemoteStatus(RemoteState.UNCHECKABLE, f"the Hub could not be asked: {exc}")
        answer: list[RemoteStatus] = []
        lookup = threading.Thread(
            target=lambda: answer.append(self._check(store, uri)), daemon=True
        )
        lookup.start()
        lookup.join(self._timeout_s)
        if not answer:
            return RemoteStatus(
                RemoteState.UNCHECKABLE, f"the Hub did not answer within {self._timeout_s:g} s"
            )
        return answer[0]

    def _check(self, store: SizedStore, uri: str) -> RemoteStatus:
        try:
            size_bytes = store.exists_nonempty(uri)
        except (HubNotFound, HubEmptyArtifact, HubUriError) as exc:
            return RemoteStatus(RemoteState.MISSING, str(exc))
        except HubAuthError as exc:
            return RemoteStatus(
                RemoteState.MISSING, f"not readable with this machine's Hub token: {exc}"
            )
        except (ColabqError, ImportError, OSError) as exc:
            return RemoteStatus(RemoteState.UNCHECKABLE, f"the Hub could not be asked: {exc}")
        return RemoteStatus(RemoteState.EXISTS, f"{size_bytes} bytes on the Hub")


def hub_checker(settings: Callable[[], Settings]) -> HubInputChecker:
    """The `hf://` checker on this machine's Hub; `settings` is called when the first URI is."""
    return HubInputChecker(lambda: build_store(settings()))
