"""The canary: a token planted for this test travels only in the `authorization` header. It never
shows in the server's request log (`token_leaks`, the raw log file), in any exception colabq
raises (message, advice, repr, cause), nor in the sync script's stdout/stderr, through success,
retries, outages, a read-only role and missing paths."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from worker.errors import ColabqError, HubAuthError, HubNotFound, HubUnavailable
from worker.store.hub import HubStore

from .conftest import FAST, Hub, SyncRun, hf_dest


def _texts(exc: BaseException) -> list[str]:
    out = [str(exc), repr(exc)]
    if isinstance(exc, ColabqError):
        out.append(exc.advice())
    if exc.__cause__ is not None:
        out += [str(exc.__cause__), repr(exc.__cause__)]
    return out


def test_the_planted_token_never_leaks(hub: Hub, run_sync: SyncRun, tmp_path: Path) -> None:
    canary = f"hf_canary_{secrets.token_hex(16)}"
    hub.admin.set_token(canary, user="alice", role="write")
    store = HubStore(hub.url, canary, retry=FAST, sleep=lambda s: None)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "w.bin").write_bytes(b"\0" * 3000)
    seen: list[str] = []
    raised: list[BaseException] = []

    def sync(*args: str) -> None:
        run = run_sync(*args, token=canary)
        seen.extend([run.stdout, run.stderr])

    def expect(error: type[BaseException], fn: object, *args: object) -> None:
        with pytest.raises(error) as excinfo:
            fn(*args)  # type: ignore[operator]
        raised.append(excinfo.value)

    store.check_output_repo(hf_dest())
    sync("--kind", "hf", "--repo", "alice/runs", "--src", str(tmp_path / "out"), "--dst", "a")
    hub.admin.fail_next("POST", r"/commit/", status=503)
    sync("--kind", "hf", "--repo", "alice/runs", "--src", str(tmp_path / "out"), "--dst", "b")
    sync("download", "--uri", "hf://alice/runs/a", "--dest", str(tmp_path / "dl"))
    sync("download", "--uri", "hf://alice/runs/nope", "--dest", str(tmp_path / "dl"))
    expect(HubNotFound, store.exists_nonempty, "hf://alice/runs/nope")
    rule = hub.admin.down("POST", r"/commit/")
    sync("--kind", "hf", "--repo", "alice/runs", "--src", str(tmp_path / "out"), "--dst", "c")
    expect(HubUnavailable, store.upload_folder, tmp_path / "out", hf_dest(), "c")
    hub.admin.remove_fault(rule)
    hub.admin.set_token(canary, user="alice", role="read")
    sync("--kind", "hf", "--repo", "alice/runs", "--src", str(tmp_path / "out"), "--dst", "d")
    expect(HubAuthError, store.check_output_repo, hf_dest())
    expect(HubAuthError, store.upload_folder, tmp_path / "out", hf_dest(), "d")

    records = hub.admin.requests()
    assert len(records) > 20 and len(raised) == 4
    assert sum("HTTP 503" in s for s in seen) >= 2 and sum("HTTP 403" in s for s in seen) == 1
    assert [r["token_leaks"] for r in records if r["token_leaks"]] == []
    assert canary not in str(records)
    assert canary not in (hub.data_dir / "requests.jsonl").read_text()
    assert not [s for s in seen if canary in s]
    assert not [t for exc in raised for t in _texts(exc) if canary in t]
