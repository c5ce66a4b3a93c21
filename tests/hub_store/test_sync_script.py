"""The VM-side `colabq_sync.py`, run as the wrapper runs it (a subprocess, the token only in
`HF_TOKEN`): a job's layout uploaded and verified by `HubStore.verify`, commit retries, a Hub
that stays down, the `download` mode for resumes, and the local (rehearsal) kind."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.factories import make_spec
from worker.spec import JobSpec
from worker.store.hub import HubStore

from .conftest import Hub, SyncRun, hf_dest

JOB = "a1b2c3d4e5f60718"


def _job_workdir(root: Path, exit_code: str = "3\n") -> Path:
    """What the wrapper leaves in /content/colab-jobs/<job>: logs, a checkpoint, a metrics file."""
    (root / "logs").mkdir(parents=True)
    (root / "logs" / "job.log").write_text("epoch 1 loss 0.5\n")
    (root / "logs" / "exit_code").write_text(exit_code)
    (root / "ckpt" / "step-10").mkdir(parents=True)
    (root / "ckpt" / "step-10" / "model.bin").write_bytes(b"\0" + os.urandom(50_000))
    (root / "ckpt" / "step-10" / "config.json").write_text('{"lr": 0.001}')
    (root / "metrics.json").write_text('{"acc": 0.9}')
    return root


def _sync_job(run_sync: SyncRun, token: str, work: Path, prefix: str = "exp1") -> list[int]:
    """The wrapper's sync_all: the logs folder, then each sync path, one process each."""
    uploads = [
        (work / "logs", f"{prefix}/logs/{JOB}"),
        (work / "ckpt", f"{prefix}/ckpt"),
        (work / "metrics.json", f"{prefix}/metrics.json"),
    ]
    return [
        run_sync("--kind", "hf", "--repo", "alice/runs", "--src", str(src), "--dst", dst,
                 token=token).returncode
        for src, dst in uploads
    ]  # fmt: skip


def _spec(expected: tuple[str, ...], job_id: str = JOB) -> JobSpec:
    return make_spec(job_id=job_id, artifact=hf_dest(), expected_artifacts=expected)


@pytest.fixture
def job_on_hub(hub: Hub, store: HubStore, run_sync: SyncRun, tmp_path: Path) -> Hub:
    store.check_output_repo(hf_dest())
    codes = _sync_job(run_sync, hub.tokens["alice_write"], _job_workdir(tmp_path / "work"))
    assert codes == [0, 0, 0]
    return hub


def test_a_job_layout_lands_under_the_prefix(job_on_hub: Hub) -> None:
    files = set(job_on_hub.api().list_repo_files("alice/runs"))

    assert files == {
        ".gitattributes",
        f"exp1/logs/{JOB}/job.log",
        f"exp1/logs/{JOB}/exit_code",
        "exp1/ckpt/step-10/model.bin",
        "exp1/ckpt/step-10/config.json",
        "exp1/metrics.json",
    }
    assert len(job_on_hub.requests("/commit/")) == 3  # one commit per upload
    assert job_on_hub.requests("/_lfs/upload/") and not job_on_hub.requests("xet")


@pytest.mark.parametrize(
    ("expected", "ok", "missing"),
    [
        (("ckpt", "metrics.json"), True, ()),
        (("ckpt/step-10", "ckpt/step-10/model.bin"), True, ()),
        (("ckpt", "eval"), False, ("eval",)),
        (("metrics.json", "ckpt/step-20"), False, ("ckpt/step-20",)),
    ],
)
def test_verify_reads_the_layout_back(
    job_on_hub: Hub, store: HubStore, expected: tuple[str, ...], ok: bool, missing: tuple[str, ...]
) -> None:
    v = store.verify(_spec(expected))

    assert (v.ok, v.missing) == (ok, missing)
    assert v.exit_code == 3  # parsed from the uploaded exit_code, whatever the artifacts
    assert f"logs/{JOB}/exit_code" in v.present
    assert ok or all(m in v.detail for m in missing)


def test_verify_without_exit_code_or_repo_is_not_ok(job_on_hub: Hub, store: HubStore) -> None:
    other_job = store.verify(_spec(("ckpt",), job_id="ffffffffffffffff"))
    no_repo = store.verify(make_spec(artifact=hf_dest("alice/nowhere"), expected_artifacts=()))

    assert (other_job.ok, other_job.exit_code) == (False, None)
    assert other_job.missing == ("logs/ffffffffffffffff/exit_code",)
    assert (no_repo.ok, no_repo.exit_code) == (False, None)
    assert "alice/nowhere" in no_repo.detail


def test_verify_refuses_zero_byte_artifacts(
    hub: Hub, store: HubStore, run_sync: SyncRun, tmp_path: Path
) -> None:
    store.check_output_repo(hf_dest())
    work = _job_workdir(tmp_path / "work", exit_code="0\n")
    (work / "ckpt" / "step-10" / "model.bin").write_bytes(b"")
    (work / "ckpt" / "step-10" / "config.json").write_bytes(b"")
    assert _sync_job(run_sync, hub.tokens["alice_write"], work) == [0, 0, 0]

    v = store.verify(_spec(("ckpt", "metrics.json")))

    assert (v.ok, v.exit_code, v.missing) == (False, 0, ("ckpt",))


def test_a_transient_commit_failure_is_retried_by_the_script(
    hub: Hub, store: HubStore, run_sync: SyncRun, tmp_path: Path
) -> None:
    store.check_output_repo(hf_dest())
    work = _job_workdir(tmp_path / "work")
    hub.admin.clear_requests()
    hub.admin.fail_next("POST", r"/commit/", status=503)

    run = run_sync("--kind", "hf", "--repo", "alice/runs", "--src", str(work / "logs"),
                   "--dst", f"exp1/logs/{JOB}", token=hub.tokens["alice_write"])  # fmt: skip

    assert run.returncode == 0, run.stderr
    assert [r["status"] for r in hub.requests("/commit/")] == [503, 200]
    assert "attempt 1/3" in run.stdout and "HTTP 503" in run.stdout
    assert run.stderr == ""
    assert f"exp1/logs/{JOB}/exit_code" in hub.api().list_repo_files("alice/runs")


def test_a_hub_that_stays_down_fails_with_one_line_in_bounded_time(
    hub: Hub, store: HubStore, run_sync: SyncRun, tmp_path: Path
) -> None:
    store.check_output_repo(hf_dest())
    work = _job_workdir(tmp_path / "work")
    hub.admin.clear_requests()
    hub.admin.down("POST", r"/commit/")

    started = time.monotonic()
    run = run_sync("--kind", "hf", "--repo", "alice/runs", "--src", str(work / "ckpt"),
                   "--dst", "exp1/ckpt", token=hub.tokens["alice_write"], attempts=4)  # fmt: skip
    elapsed_s = time.monotonic() - started

    assert run.returncode == 1
    assert [r["status"] for r in hub.requests("/commit/")] == [503] * 4
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and "after 4 attempt(s)" in lines[0] and "HTTP 503" in lines[0]
    assert elapsed_s < 20  # 0.05 + 0.1 + 0.2 s of backoff, plus process start-up
    assert hub.api().list_repo_files("alice/runs") == [".gitattributes"]


@pytest.mark.parametrize(
    ("token_name", "message"),
    [(None, "HF_TOKEN is not set"), ("alice_read", "HTTP 403")],
    ids=["no HF_TOKEN (a token file is not used)", "read token"],
)
def test_upload_failures_exit_1(
    hub: Hub, run_sync: SyncRun, tmp_path: Path, token_name: str | None, message: str
) -> None:
    hub.api().create_repo("alice/runs", private=True)
    (tmp_path / "vm_hf_home").mkdir()
    (tmp_path / "vm_hf_home" / "token").write_text(hub.tokens["alice_write"])  # must be ignored
    token = hub.tokens[token_name] if token_name else None

    run = run_sync("--kind", "hf", "--repo", "alice/runs", "--src", str(tmp_path),
                   "--dst", "x", token=token)  # fmt: skip

    assert run.returncode == 1
    assert message in run.stderr and len(run.stderr.splitlines()) == 1
    assert hub.api().list_repo_files("alice/runs") == [".gitattributes"]


def test_download_mode(hub: Hub, run_sync: SyncRun, job_on_hub: Hub, tmp_path: Path) -> None:
    token = hub.tokens["alice_write"]
    hub.api().upload_file(path_or_fileobj=b"", path_in_repo="exp1/empty.txt", repo_id="alice/runs")

    def download(uri: str) -> tuple[int, str]:
        run = run_sync("download", "--uri", uri, "--dest", str(tmp_path / "dl"), token=token)
        return run.returncode, run.stdout.strip() or run.stderr.strip()

    folder = download("hf://alice/runs/exp1/ckpt/step-10")
    file = download("hf://alice/runs/exp1/metrics.json")
    missing = download("hf://alice/runs/exp1/ckpt/step-20")
    empty = download("hf://alice/runs/exp1/empty.txt")
    no_repo = download("hf://alice/nowhere/ckpt")

    assert folder == (0, str(tmp_path / "dl" / "exp1/ckpt/step-10"))
    assert (Path(folder[1]) / "config.json").read_text() == '{"lr": 0.001}'
    assert file == (0, str(tmp_path / "dl" / "exp1/metrics.json"))
    assert missing[0] == 3 and "is missing" in missing[1]
    assert empty[0] == 3 and "holds no data" in empty[1]
    assert no_repo[0] == 3


def test_local_kind_still_copies(run_sync: SyncRun, tmp_path: Path) -> None:
    work = _job_workdir(tmp_path / "work")
    repo = tmp_path / "store"

    logs = run_sync("--kind", "local", "--repo", str(repo), "--src", str(work / "logs"),
                    "--dst", f"exp1/logs/{JOB}", token=None)  # fmt: skip
    metrics = run_sync("--kind", "local", "--repo", str(repo), "--src", str(work / "metrics.json"),
                       "--dst", "exp1/metrics.json", token=None)  # fmt: skip

    assert (logs.returncode, metrics.returncode) == (0, 0)
    assert (repo / f"exp1/logs/{JOB}/exit_code").read_text() == "3\n"
    assert (repo / "exp1/metrics.json").is_file()


def test_the_stored_console_is_read_back_from_an_offset(
    hub: Hub, store: HubStore, run_sync: SyncRun, tmp_path: Path
) -> None:
    store.check_output_repo(hf_dest())
    work = _job_workdir(tmp_path / "work", exit_code="0\n")
    console = b"".join(f"line-{i}\n".encode() for i in range(1, 2001)) + b"caf\xc3\xa9\n"
    (work / "logs" / "console.log").write_bytes(console)
    assert _sync_job(run_sync, hub.tokens["alice_write"], work) == [0, 0, 0]
    spec = _spec(())

    assert store.console_tail(spec, 0, 0) == console
    assert store.console_tail(spec, 0, 7 * 9) == console[63:]  # line-10 on
    assert store.console_tail(spec, 0, len(console) + 5) == b""
    assert store.console_tail(spec, 1, 0) is None  # segment 1 stored none
    assert store.console_tail(make_spec(artifact=hf_dest("alice/nowhere")), 0, 0) is None
