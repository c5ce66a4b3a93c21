"""The artifact store for a destination's kind: the one module that knows every kind.

It sits above both stores (the local folder in `artifacts.py`, the Hub in `hub.py`, which builds
on `artifacts.py`), so neither imports the other's caller. The Hub store, and with it
`huggingface_hub`, is imported only when a destination is on the Hub.
"""

from __future__ import annotations

from worker.spec import ArtifactDest
from worker.store.artifacts import ArtifactStore, LocalStore


def build_store(
    dest: ArtifactDest, *, endpoint: str | None = None, token: str | None = None
) -> ArtifactStore:
    if dest.kind == "local":
        return LocalStore()
    from worker.store.hub import HubStore

    return HubStore(endpoint, token)
