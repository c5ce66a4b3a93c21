"""W&B at its HTTP boundary: a local stand-in for its GraphQL API records every request. The job
gets a run id derived from its job id (no call at start); a janitor pass marks a run its dead job
left "running" (tag and note through `upsertBucket`), leaves closed runs alone, deletes only where
configured, and sends the API key only in the Authorization header."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.factories import make_spec
from tests.tracker.conftest import end_job, open_for, redis_dump, running_job, tracker_rows
from worker.janitor.run import JanitorDeps, janitor_pass
from worker.records.ledger import Ledger
from worker.settings import Settings
from worker.states import JobState as S
from worker.store.artifacts import Verification
from worker.tracker.clients import clients_from, open_run
from worker.tracker.runs import run_env

KEY = "wandb-canary-key-0c81d2e4"
ENTITY, PROJECT = "alice", "vision"


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: str


@dataclass
class FakeWandb:
    """The GraphQL operations colabq sends, answered from `runs` (name -> run)."""

    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    fail_status: int | None = None
    url: str = ""

    def add(self, name: str, state: str, tags: list[str] | None = None) -> None:
        self.runs[name] = {
            "id": f"UnVuOnYx{name}", "name": name, "state": state, "tags": tags or [],
            "description": "my notes",
        }  # fmt: skip

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        query, v = body["query"], body["variables"]
        if "ColabqRun" in query:
            if (v["entity"], v["project"]) != (ENTITY, PROJECT):
                return {"data": {"project": None}}
            return {"data": {"project": {"run": self.runs.get(v["name"])}}}
        run = next((r for r in self.runs.values() if r["id"] == v["id"]), None)
        if run is None:
            return {"errors": [{"message": "run not found"}], "data": None}
        if "ColabqMark" in query:
            run.update(tags=v["tags"], description=v["description"])
            return {"data": {"upsertBucket": {"bucket": {"id": run["id"]}}}}
        if "ColabqDelete" in query:
            del self.runs[run["name"]]
            return {"data": {"deleteRun": {"clientMutationId": None}}}
        return {"errors": [{"message": "unknown operation"}], "data": None}

    def ops(self) -> list[str]:
        return [json.loads(r.body)["query"].split()[1].split("(")[0] for r in self.requests]


@pytest.fixture
def wandb() -> Iterator[FakeWandb]:
    fake = FakeWandb()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            fake.requests.append(Request(self.path, dict(self.headers), body))
            if fake.fail_status is not None:
                self.send_response(fake.fail_status)
                self.end_headers()
                return
            data = json.dumps(fake.answer(json.loads(body))).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield fake
    server.shutdown()
    server.server_close()


@pytest.fixture
def settings(wandb: FakeWandb, tmp_path: Path) -> Settings:
    key = tmp_path / "wandb-key"
    key.write_text(KEY + "\n")
    key.chmod(0o600)
    return Settings(
        wandb_api_key_file=key, wandb_entity=ENTITY, wandb_project=PROJECT,
        wandb_base_url=wandb.url, state_dir=tmp_path,
    )  # fmt: skip


def deps(ledger: Ledger, settings: Settings) -> JanitorDeps:
    def nothing(*_: object) -> str:
        raise AssertionError("nothing to adopt, resend or stop here")

    return JanitorDeps(
        ledger=ledger, verify=lambda spec: Verification(True, 0, (), (), ""),
        location=lambda spec: "store", account=lambda: [], stop_orphan=nothing, adopt=nothing,
        resend=nothing, queued_ids=set, trackers=clients_from(settings),
        delete_ghosts=settings.tracker_delete_ghosts,
    )  # fmt: skip


def ended(ledger: Ledger, settings: Settings, tmp_path: Path, state: S, reason: str) -> str:
    spec = running_job(ledger, make_spec(tracker="wandb"))
    assert open_for(spec, ledger, settings, tmp_path)["WANDB_RUN_ID"] == spec.job_id
    end_job(ledger, spec.job_id, state, reason)
    return spec.job_id


def test_the_job_gets_a_run_id_from_its_job_id_without_a_call(
    ledger: Ledger, settings: Settings, wandb: FakeWandb, tmp_path: Path
) -> None:
    spec = running_job(ledger, make_spec(tracker="wandb"))
    env = open_for(spec, ledger, settings, tmp_path)
    assert env == {
        "WANDB_RUN_ID": spec.job_id, "WANDB_RESUME": "allow", "WANDB_TAGS": f"colabq-{spec.job_id}",
        "WANDB_ENTITY": ENTITY, "WANDB_PROJECT": PROJECT,
    }  # fmt: skip
    assert ledger.get(spec.job_id).get("tracker_run") == f"wandb:{ENTITY}/{PROJECT}/{spec.job_id}"
    assert open_for(spec, ledger, settings, tmp_path) == env  # a restart resumes the same run
    assert wandb.requests == []
    # The project the job names wins over the settings'; no entity known: the bare id.
    named = make_spec(tracker="wandb", tracker_project="mine")
    opened = open_run(named, Settings(wandb_project="p", state_dir=tmp_path))
    assert opened is not None and str(opened.ref) == f"wandb:{named.job_id}"
    assert run_env(opened.ref, named.job_id, settings)["WANDB_RUN_ID"] == named.job_id


def test_a_pass_marks_runs_left_running_and_leaves_closed_ones(
    ledger: Ledger, settings: Settings, wandb: FakeWandb, tmp_path: Path
) -> None:
    failed = ended(ledger, settings, tmp_path, S.FAILED_LOST, "owner died; outcome unknown")
    cancelled = ended(ledger, settings, tmp_path, S.CANCELLED, "cancelled: stop")
    crashed = ended(ledger, settings, tmp_path, S.FAILED, "job exited 1")
    wandb.add(failed, "running", ["baseline"])
    wandb.add(cancelled, "running")
    wandb.add(crashed, "crashed")

    report = janitor_pass(deps(ledger, settings), dry_run=False)

    assert wandb.runs[failed]["tags"] == ["baseline", "colabq-failed"]
    assert wandb.runs[failed]["description"].startswith("my notes\ncolabq: job ")
    assert "FAILED_LOST: owner died" in wandb.runs[failed]["description"]
    assert wandb.runs[cancelled]["tags"] == ["colabq-killed"]
    assert wandb.runs[crashed]["tags"] == [] and wandb.runs[crashed]["description"] == "my notes"
    rows = tracker_rows(report)
    assert rows[f"wandb:{ENTITY}/{PROJECT}/{failed}"].did == "did: mark failed (tag colabq-failed)"
    assert rows[f"wandb:{ENTITY}/{PROJECT}/{crashed}"].did == "left alone"
    assert ledger.r.zcard(ledger.keys.tracker_check()) == 0
    assert "ColabqDelete" not in wandb.ops()
    # The key: only ever in the Authorization header, as basic auth "api:<key>".
    expected = "Basic " + base64.b64encode(f"api:{KEY}".encode()).decode()
    for req in wandb.requests:
        assert req.path == "/graphql" and req.headers["Authorization"] == expected
        assert KEY not in req.path and KEY not in req.body
        assert KEY not in repr({k: v for k, v in req.headers.items() if k != "Authorization"})
    for text in (redis_dump(ledger), repr(report.to_json())):
        assert KEY not in text and expected not in text


def test_ghosts_are_deleted_only_where_configured(
    ledger: Ledger, settings: Settings, wandb: FakeWandb, tmp_path: Path
) -> None:
    job = ended(ledger, settings, tmp_path, S.TIMED_OUT, "wall cap")
    wandb.add(job, "running")
    wanted = settings.model_copy(update={"tracker_delete_ghosts": True})
    report = janitor_pass(deps(ledger, wanted), dry_run=False)
    assert job not in wandb.runs and wandb.ops()[-1] == "ColabqDelete"
    [row] = tracker_rows(report).values()
    assert row.did == "did: mark failed (tag colabq-failed); delete"


def test_an_api_that_refuses_leaves_the_run_for_the_next_pass(
    ledger: Ledger, settings: Settings, wandb: FakeWandb, tmp_path: Path
) -> None:
    job = ended(ledger, settings, tmp_path, S.FAILED, "job exited 1")
    wandb.add(job, "running")
    wandb.fail_status = 401
    report = janitor_pass(deps(ledger, settings), dry_run=False)
    [row] = tracker_rows(report).values()
    assert row.did == "failed: check" and "HTTP 401" in row.why and KEY not in row.why
    assert ledger.r.zscore(ledger.keys.tracker_check(), job) is not None
    wandb.fail_status = None
    janitor_pass(deps(ledger, settings), dry_run=False)
    assert wandb.runs[job]["tags"] == ["colabq-failed"]
    assert ledger.r.zcard(ledger.keys.tracker_check()) == 0


def test_a_dry_run_calls_nothing_and_unknown_projects_are_reported(
    ledger: Ledger, settings: Settings, wandb: FakeWandb, tmp_path: Path
) -> None:
    job = ended(ledger, settings, tmp_path, S.FAILED, "job exited 1")
    wandb.add(job, "running")
    dry = janitor_pass(deps(ledger, settings), dry_run=True)
    assert wandb.requests == [] and next(iter(tracker_rows(dry).values())).did.startswith("would:")
    bare = running_job(ledger, make_spec(tracker="wandb"))
    ledger.set_fields(bare.job_id, owner="w1", tracker_run=f"wandb:{bare.job_id}")
    end_job(ledger, bare.job_id, S.FAILED, "job exited 1")
    rows = tracker_rows(janitor_pass(deps(ledger, settings), dry_run=False))
    assert rows[f"wandb:{bare.job_id}"].did == "failed: check"
    assert "COLABQ_WANDB_ENTITY" in rows[f"wandb:{bare.job_id}"].why
