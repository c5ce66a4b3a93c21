"""Builders shared by tests: a valid JobSpec with overridable fields."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Any

from worker.spec import ArtifactDest, Gpu, JobSpec, default_ttl_s

# A session name as colabq gives one (its default prefix and 128 bits): what janitors and
# adopters accept as colabq's (`worker.records.ids.owned_session`).
SESSION = "colabq-" + "5e55" * 8


def make_spec(**overrides: Any) -> JobSpec:
    wall = float(overrides.pop("wall_cap_s", 3600.0))
    job_id = overrides.pop("job_id", secrets.token_hex(8))
    # Each job its own place in the store, unless a test names one: two live jobs at one
    # destination are refused (`RunNameInUse`).
    prefix = overrides.pop("prefix", f"runs/{job_id}")
    fields: dict[str, Any] = {
        "job_id": job_id,
        "idempotency_key": secrets.token_hex(8),
        "run_name": "mnist-mlp-bs64-lr1e-3-baseline",
        "commit": "abc1234",
        "script": "echo hello\n",
        "gpu": Gpu.T4,
        "wall_cap_s": wall,
        "idle_timeout_s": 60.0,
        "ttl_s": default_ttl_s(wall),
        "artifact": ArtifactDest(kind="local", repo="/tmp/colabq-test-store", prefix=prefix),
        "submitted_at": datetime(2026, 12, 2, tzinfo=UTC),
    }
    fields.update(overrides)
    return JobSpec(**fields)
