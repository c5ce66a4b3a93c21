"""The local Hub-compatible server for the `hub-down` group: the tests' server and tokens
(`tests/hub/conftest.py`), the worker settings that point at it, and the store check."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from ops.chaos.env import ROOT

if str(ROOT / "ops") not in sys.path:
    sys.path.insert(0, str(ROOT / "ops"))

from ops.chaos.checks import ArtifactCheck
from ops.chaos.fleet import Group, JobPlan
from tests.hub.conftest import GRANTS, TOKENS, Hub, worker_hub_env

REPO = "alice/runs"


@contextlib.contextmanager
def hub_env(root: Path) -> Iterator[tuple[dict[str, str], Hub, ArtifactCheck]]:
    """A running server, the worker's environment for it, and "is this artifact on the Hub"."""
    from hubserver import AdminClient, ServerConfig, start_server  # type: ignore[import-not-found]

    root.mkdir(parents=True, exist_ok=True)
    tokens = root / "tokens.json"
    tokens.write_text(json.dumps(GRANTS))
    server = start_server(ServerConfig(data_dir=root / "data", tokens_path=tokens))
    hub = Hub(server.url, AdminClient(server.url), root / "data", dict(TOKENS), server)
    token = root / "hf_token"
    token.write_text(TOKENS["alice_write"])
    token.chmod(0o600)
    env = worker_hub_env(hub.url, token)

    def has(group: Group, plan: JobPlan, path: str) -> bool:
        files = hub.api().list_repo_tree(REPO, recursive=True)
        return any(f.path == f"{plan.run_name}/{path}" for f in files)

    try:
        yield env, hub, has
    finally:
        server.stop()
