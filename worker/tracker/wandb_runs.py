"""W&B: what the janitor does to a run its job left "running", through W&B's public GraphQL API.

Plain HTTP (the standard library), not the `wandb` package: the janitor needs three calls, and a
beat host should not need W&B's SDK. The API key is read from its 0600 file for each call and
sent only in the Authorization header (basic auth, user "api"), never in a URL or a body.

W&B's own server marks a run "crashed" once its heartbeats stop, and its public API cannot set
a run's state; so "finishing" a ghost here means marking it: a `colabq-failed` /
`colabq-killed` / `colabq-finished` tag and a note in its description naming the job and why it
ended. Deletion (`deleteRun`) only where the user configured it.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from worker.errors import TrackerError
from worker.settings import Settings
from worker.tracker.runs import Ending, TrackerRef, bounded, read_credential, scrub

_RUNNING = frozenset({"running", "pending"})

RUN_QUERY = """
query ColabqRun($entity: String!, $project: String!, $name: String!) {
  project(name: $project, entityName: $entity) {
    run(name: $name) { id name state tags description }
  }
}
"""
UPSERT_MUTATION = """
mutation ColabqMark($id: String, $description: String, $tags: [String!]) {
  upsertBucket(input: {id: $id, description: $description, tags: $tags}) { bucket { id } }
}
"""
DELETE_MUTATION = """
mutation ColabqDelete($id: ID!) {
  deleteRun(input: {id: $id, deleteArtifacts: false}) { clientMutationId }
}
"""


class WandbRuns:
    def __init__(self, base_url: str, *, key_file: Path, timeout_s: float = 10.0) -> None:
        if not base_url.startswith(("https://", "http://")):
            raise TrackerError(f"W&B base URL {base_url!r} must be http:// or https://")
        self.base_url = base_url.rstrip("/")
        self.key_file = key_file
        self.timeout_s = timeout_s

    @classmethod
    def from_settings(cls, settings: Settings) -> WandbRuns:
        assert settings.wandb_api_key_file is not None
        return cls(
            settings.wandb_base_url,
            key_file=settings.wandb_api_key_file,
            timeout_s=settings.tracker_timeout_s,
        )

    def _call(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        key = read_credential(self.key_file)
        auth = base64.b64encode(f"api:{key}".encode()).decode()
        req = urllib.request.Request(  # noqa: S310 (http(s) only: checked in __init__)
            f"{self.base_url}/graphql",
            data=json.dumps({"query": query, "variables": variables}).encode(),
            method="POST",
            headers={
                "Authorization": f"Basic {auth}",
                "Content-Type": "application/json",
                "User-Agent": "colabq-janitor",
            },
        )
        where = scrub(self.base_url, [key])
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:  # noqa: S310
                data = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            hint = " (is the API key in COLABQ_WANDB_API_KEY_FILE valid?)" if exc.code in (
                401, 403,
            ) else ""  # fmt: skip
            raise TrackerError(f"W&B API at {where}: HTTP {exc.code}{hint}") from None
        except (OSError, ValueError) as exc:
            raise TrackerError(f"W&B API at {where}: {scrub(str(exc), [key])}") from None
        errors = data.get("errors") if isinstance(data, dict) else None
        if errors:
            first = errors[0].get("message", "error") if isinstance(errors[0], dict) else errors[0]
            raise TrackerError(f"W&B API at {where}: {scrub(str(first)[:300], [key])}")
        if not isinstance(data, dict) or not isinstance(data.get("data"), dict):
            raise TrackerError(f"W&B API at {where}: an answer without data")
        out: dict[str, Any] = data["data"]
        return out

    def _run(self, ref: TrackerRef) -> dict[str, Any] | None:
        if not (ref.entity and ref.project):
            raise TrackerError(
                f"W&B run {ref.run_id}: its entity and project are unknown; set "
                "COLABQ_WANDB_ENTITY and COLABQ_WANDB_PROJECT on the worker hosts"
            )
        variables = {"entity": ref.entity, "project": ref.project, "name": ref.run_id}
        project = self._call(RUN_QUERY, variables).get("project")
        run = project.get("run") if isinstance(project, dict) else None
        return run if isinstance(run, dict) else None

    def status(self, ref: TrackerRef) -> str | None:
        run = self._run(ref)
        return None if run is None else str(run.get("state") or "unknown")

    def is_running(self, status: str) -> bool:
        return status.lower() in _RUNNING

    def finish(
        self, ref: TrackerRef, ending: Ending, *, job_id: str, state: str, reason: str
    ) -> str:
        run = self._run(ref)
        if run is None:
            raise TrackerError(f"W&B run {ref} is gone")
        tag = f"colabq-{ending.value.lower()}"
        tags = [str(t) for t in run.get("tags") or []]
        note = f"colabq: job {job_id} ended {state}: {bounded(reason)}"
        description = str(run.get("description") or "")
        if note not in description:
            description = f"{description}\n{note}".strip()
        variables = {
            "id": run["id"],
            "description": description,
            "tags": tags if tag in tags else [*tags, tag],
        }
        self._call(UPSERT_MUTATION, variables)
        return f"mark {ending.value.lower()} (tag {tag})"

    def delete(self, ref: TrackerRef) -> str:
        run = self._run(ref)
        if run is None:
            return "already deleted"
        self._call(DELETE_MUTATION, {"id": run["id"]})
        return "delete"
