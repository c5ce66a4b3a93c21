"""The scripting surface of `colabq`: exit codes of `logs -f`, `--json` on every command that is
not a long-running service, `--version`, shell completion, and ambiguous job-id prefixes.

In-process through `typer.testing.CliRunner` on the real Redis of tests/conftest.py; the version
and completion checks also run the installed `colabq` entry point, as a shell does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import deque
from importlib.metadata import version
from pathlib import Path

import pytest
import redis
import typer.main
from typer.testing import CliRunner

from producer import exitcodes
from producer.cli import app
from tests.cli.training_repo import QUIET_ENV
from tests.factories import make_spec
from tests.hub import conftest as hub_conftest
from tests.hub.conftest import Hub
from worker.errors import AmbiguousJob, JobNotFound
from worker.records.ledger import Ledger
from worker.states import ALLOWED, TERMINAL, JobState

_client_env = hub_conftest._client_env
make_hub = hub_conftest.make_hub
hub = hub_conftest.hub

runner = CliRunner()
OWNER = "owner-token"
ENTRY_POINT = Path(sys.executable).parent / "colabq"

# What each way of ending gives `logs -f`, in the names of the exit-code table
# (docs/reference/exit-codes.md; not read back from exitcodes._BY_STATE: the test states the
# contract).
OUTCOME_CODES = {
    JobState.SUCCEEDED: exitcodes.OK,
    JobState.FAILED: exitcodes.FAILED,
    JobState.TIMED_OUT: exitcodes.TIMED_OUT,
    JobState.CANCELLED: exitcodes.CANCELLED,
    JobState.FAILED_NO_GPU: exitcodes.NO_CAPACITY,
    JobState.FAILED_BUDGET: exitcodes.NO_CAPACITY,
    JobState.FAILED_LOST: exitcodes.LOST,
    JobState.VM_LOST: exitcodes.LOST,
}


def path_to(target: JobState) -> list[JobState]:
    """The shortest walk from QUEUED to `target` along `states.ALLOWED`."""
    seen = {JobState.QUEUED: [JobState.QUEUED]}
    todo = deque([JobState.QUEUED])
    while todo:
        state = todo.popleft()
        for nxt in sorted(ALLOWED[state]):
            if nxt not in seen:
                seen[nxt] = [*seen[state], nxt]
                todo.append(nxt)
    return seen[target][1:]


def walk(ledger: Ledger, job_id: str, states: list[JobState]) -> None:
    for state in states:
        ledger.transition(job_id, state, owner=OWNER, reason=f"test: to {state.value}")


def claimed_job(ledger: Ledger, **spec: object) -> str:
    job_id, _ = ledger.create(make_spec(**spec))
    assert ledger.claim(job_id, OWNER, ttl_s=60)
    return job_id


# --- logs -------------------------------------------------------------------------------------


def test_every_terminal_state_has_its_code() -> None:
    assert set(OUTCOME_CODES) == set(TERMINAL)


@pytest.mark.parametrize("state", sorted(TERMINAL))
def test_logs_follow_exits_with_the_jobs_outcome(
    state: JobState, ledger: Ledger, env: dict[str, str | None]
) -> None:
    job_id = claimed_job(ledger)
    ledger.append_log(job_id, "epoch 1/2 loss=0.9")
    walk(ledger, job_id, path_to(state))
    ledger.append_log(job_id, "epoch 2/2 loss=0.4")  # a late line is drained too

    followed = runner.invoke(app, ["logs", "-f", job_id[:8]], env=env)
    assert followed.exit_code == OUTCOME_CODES[state], followed.output
    assert followed.stdout.splitlines() == ["epoch 1/2 loss=0.9", "epoch 2/2 loss=0.4"]

    once = runner.invoke(app, ["logs", job_id[:8]], env=env)
    assert once.exit_code == exitcodes.OK, once.output
    assert once.stdout == followed.stdout


def test_logs_follow_waits_for_the_end_of_a_running_job(
    ledger: Ledger, env: dict[str, str | None]
) -> None:
    job_id = claimed_job(ledger)
    walk(ledger, job_id, path_to(JobState.RUNNING))

    def job_goes_on() -> None:
        time.sleep(0.5)
        ledger.append_log(job_id, "step 100")
        time.sleep(0.5)
        ledger.append_log(job_id, "step 200")
        walk(ledger, job_id, [JobState.RELEASING, JobState.TIMED_OUT])

    thread = threading.Thread(target=job_goes_on)
    thread.start()
    started = time.monotonic()
    followed = runner.invoke(app, ["logs", "--follow", job_id], env=env)
    thread.join()
    assert time.monotonic() - started >= 1.0  # it waited for the job, it did not return at once
    assert followed.exit_code == exitcodes.TIMED_OUT, followed.output
    assert followed.stdout.splitlines() == ["step 100", "step 200"]


def test_logs_json_prints_one_object_per_line(ledger: Ledger, env: dict[str, str | None]) -> None:
    job_id = claimed_job(ledger)
    ledger.append_log(job_id, 'loss="0.5" {not json}')
    ledger.append_log(job_id, "[colabq] session started", stream="colabq")
    walk(ledger, job_id, path_to(JobState.FAILED))

    result = runner.invoke(app, ["logs", job_id, "--json", "-f"], env=env)
    assert result.exit_code == exitcodes.FAILED, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    stored = ledger.read_log(job_id)
    assert rows == [{"id": ln.id, "line": ln.text, "stream": ln.stream} for ln in stored]
    assert [r["stream"] for r in rows] == ["out", "colabq"]
    assert rows[0]["line"] == 'loss="0.5" {not json}'


# --- cancel --json ----------------------------------------------------------------------------


def test_cancel_json_says_what_happened(ledger: Ledger, env: dict[str, str | None]) -> None:
    queued, _ = ledger.create(make_spec())
    running = claimed_job(ledger)
    walk(ledger, running, path_to(JobState.RUNNING))
    over = claimed_job(ledger)
    walk(ledger, over, path_to(JobState.SUCCEEDED))

    def cancel(job_id: str) -> dict[str, object]:
        result = runner.invoke(app, ["cancel", job_id, "--json"], env=env)
        assert result.exit_code == exitcodes.OK, result.output
        (data,) = json.loads(result.stdout)["jobs"]
        assert isinstance(data, dict)
        return data

    assert cancel(queued) == {"job_id": queued, "state_before": "queued", "result": "cancelled"}
    assert ledger.get(queued).state is JobState.CANCELLED
    assert cancel(running) == {"job_id": running, "state_before": "running", "result": "requested"}
    assert ledger.get(running).state is JobState.RUNNING
    assert ledger.cancel_requested(running) == "cancelled by user"
    assert cancel(over) == {"job_id": over, "state_before": "succeeded", "result": "already_over"}
    assert ledger.cancel_requested(over) is None


def test_adopt_json_when_there_is_nothing_to_adopt(
    ledger: Ledger, env: dict[str, str | None], tmp_path: Path
) -> None:
    env = {**env, "COLABQ_STATE_DIR": str(tmp_path / "state")}
    queued, _ = ledger.create(make_spec())
    over = claimed_job(ledger)
    walk(ledger, over, path_to(JobState.VM_LOST))

    waiting = runner.invoke(app, ["adopt", queued, "--json"], env=env)
    assert waiting.exit_code == exitcodes.FAILED, waiting.output
    assert json.loads(waiting.stdout) == {
        "job_id": queued, "adopted": False, "state": "queued",
        "reason": "it is queued: a worker takes it",
    }  # fmt: skip
    done = runner.invoke(app, ["adopt", over, "--json"], env=env)
    assert done.exit_code == exitcodes.OK, done.output
    assert json.loads(done.stdout)["state"] == "vm_lost"
    assert ledger.get(queued).owner == ""


# --- clean --json -----------------------------------------------------------------------------


def test_clean_json_reports_each_step(
    ledger: Ledger, env: dict[str, str | None], tmp_path: Path
) -> None:
    run = "mnist-mlp-bs64-lr1e-3-baseline"
    repo = tmp_path / "repo"
    (repo / "runs" / run).mkdir(parents=True)
    (repo / "runs" / run / "last.pt").write_text("w")
    job_id, _ = ledger.create(make_spec(run_name=run))

    dry = runner.invoke(app, ["clean", run, "--repo-dir", str(repo), "--json"], env=env)
    assert dry.exit_code == 0, dry.output
    data = json.loads(dry.stdout)
    assert data["run"] == run and data["dry_run"] is True
    outcomes = {s["title"]: s["outcome"] for s in data["steps"]}
    assert outcomes["local checkpoint folder"] == "planned"
    assert outcomes["Colab session and queued retries"] == "planned"
    assert any(f"request cancel of job {job_id}" in line for line in data["lines"])
    assert "Dry run" in data["summary"]
    assert (repo / "runs" / run / "last.pt").exists()
    assert ledger.get(job_id).state is JobState.QUEUED

    done = runner.invoke(app, ["clean", run, "--repo-dir", str(repo), "--yes", "--json"], env=env)
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    assert data["dry_run"] is False
    assert {s["outcome"] for s in data["steps"]} <= {"done", "nothing", "skipped"}
    assert not (repo / "runs" / run).exists()
    assert ledger.get(job_id).state is JobState.CANCELLED


# --- stage --json -----------------------------------------------------------------------------


def test_stage_json_reports_the_upload(hub: Hub, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.csv").write_text("x,y\n1,2\n")
    (data / "test.csv").write_text("x,y\n3,4\n")
    env = {**QUIET_ENV, "HF_TOKEN": hub.tokens["alice_write"], "HF_ENDPOINT": hub.url,
           "HOME": str(tmp_path / "home")}  # fmt: skip
    to = "hf://datasets/alice/d/v1"
    result = runner.invoke(app, ["stage", str(data), "--to", to, "--json"], env=env)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["uri"] == to
    assert (out["size_bytes"], out["files"], out["replaced_bytes"]) == (16, 2, 0)
    assert (out["repo"], out["repo_type"], out["repo_created"]) == ("alice/d", "dataset", True)
    head = hub.api().list_repo_commits("alice/d", repo_type="dataset")[0].commit_id
    assert out["commit"] == head
    assert hub.tokens["alice_write"] not in result.output


# --- every command ----------------------------------------------------------------------------

# Long-running: no data to print.
SERVICES = {"worker", "beat", "flower", "notifier", "metrics", "gate"}


def test_every_command_but_the_services_has_json() -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    commands = group.commands
    assert set(commands) >= SERVICES
    assert {"logs", "cancel", "clean", "stage", "adopt", "demo", "doctor"} <= set(commands)
    for name, cmd in commands.items():
        options = {opt for param in cmd.params for opt in param.opts}
        if name in SERVICES:
            assert "--json" not in options, name
        else:
            assert "--json" in options, f"`colabq {name}` has no --json"


# --- version and completion -------------------------------------------------------------------


def test_version_prints_the_installed_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"colabq {version('colabq')}\n"


def test_version_imports_nothing_heavy() -> None:
    probe = (
        "import sys\n"
        "from producer.cli import app\n"
        "try:\n"
        "    app(['--version'], prog_name='colabq')\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
        "heavy = ['celery', 'redis', 'pydantic', 'huggingface_hub', 'kombu']\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [f"colabq {version('colabq')}", "[]"]


def _complete(words: str, cword: int) -> list[str]:
    env = {**os.environ, "_COLABQ_COMPLETE": "complete_bash", "COMP_WORDS": words,
           "COMP_CWORD": str(cword)}  # fmt: skip
    res = subprocess.run(
        [str(ENTRY_POINT)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert res.returncode == 0, res.stderr
    return res.stdout.split()


def test_shell_completion_completes_commands_and_options() -> None:
    assert ENTRY_POINT.is_file(), "colabq is not installed in this environment"
    assert "doctor" in _complete("colabq do", 1)
    assert {"--follow", "--json"} <= set(_complete("colabq logs --", 2))
    script = subprocess.run(
        [str(ENTRY_POINT)], env={**os.environ, "_COLABQ_COMPLETE": "source_bash"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert "complete -o default -F _colabq_completion colabq" in script.stdout


def test_completion_options_are_offered() -> None:
    result = runner.invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert "--install-completion" in result.stdout
    assert "--show-completion" in result.stdout


# --- ambiguous prefixes -----------------------------------------------------------------------


def test_an_ambiguous_prefix_lists_the_candidates(
    ledger: Ledger, env: dict[str, str | None]
) -> None:
    ids = [f"abc{i}{'0' * 12}" for i in range(7)]
    for i, job_id in enumerate(ids):
        ledger.create(make_spec(job_id=job_id, run_name=f"sweep-lr-{i}"))
    other = make_spec(job_id="abd" + "0" * 13)
    ledger.create(other)

    result = runner.invoke(app, ["logs", "abc"], env=env)
    assert result.exit_code == exitcodes.NO_SUCH_JOB
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    line = lines[0]
    assert line.startswith("colabq: Job id prefix 'abc' matches 7 jobs: ")
    listed = [job_id for job_id in ids if job_id in line]
    assert len(listed) == 5
    for job_id in listed:
        assert f"{job_id} (sweep-lr-{ids.index(job_id)})" in line
    assert "and 2 more" in line
    assert line.endswith("Type more characters of the id.")
    assert other.job_id not in line

    unique = runner.invoke(app, ["logs", "abc3"], env=env)
    assert unique.exit_code == exitcodes.OK, unique.output


def test_find_by_prefix(ledger: Ledger, redis_client: redis.Redis) -> None:
    a = make_spec(job_id="feed" + "0" * 12, run_name="run-a")
    b = make_spec(job_id="feed" + "1" * 12, run_name="run-b")
    for spec in (a, b):
        ledger.create(spec)
    assert ledger.find_by_prefix(a.job_id) == a.job_id
    assert ledger.find_by_prefix("feed1") == b.job_id
    with pytest.raises(AmbiguousJob) as caught:
        ledger.find_by_prefix("fee")
    assert caught.value.total == 2
    assert set(caught.value.candidates) == {(a.job_id, "run-a"), (b.job_id, "run-b")}
    assert isinstance(caught.value, JobNotFound)  # exit 4, as an unknown id
    for missing in ("", "feed2", "f" * 40):
        with pytest.raises(JobNotFound) as nothing:
            ledger.find_by_prefix(missing)
        assert not isinstance(nothing.value, AmbiguousJob)
    # A job whose record expired (its id still in the index) is no candidate.
    redis_client.delete(ledger.keys.job(b.job_id))
    assert ledger.find_by_prefix("fee") == a.job_id
