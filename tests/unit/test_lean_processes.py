"""The two processes a held session keeps on the worker host, the attach client and the watchdog,
import only what they use (never the contract, pydantic, the settings object nor Celery), and the
light twins they use instead stay equal to what they stand for: the attach cell to plan's, the
observers' settings to `Settings`, their Redis client to `worker.deps`', their writes to the
ledger's. Also the attach client's fast path: chunks parsed at once, runs checked for gaps,
batches forwarded exactly once."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import fakeredis
import pytest
import redis
from pydantic import SecretStr

from worker.clock import FakeClock
from worker.records.forward import (
    ENV_PREFIX,
    Feed,
    FeedSettings,
    ForwardItem,
    Lines,
    feed_settings,
)
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.session import attach, procs
from worker.session.jobfiles import JobFiles, WatchSpec
from worker.settings import Settings, load_settings
from worker.settingsfiles import ENV_FILE_VAR

# What neither process may load: the contract and its pydantic, the settings object, the worker.
HEAVY = (
    "pydantic",
    "pydantic_core",
    "pydantic_settings",
    "celery",
    "kombu",
    "huggingface_hub",
    "worker.spec",
    "worker.settings",
    "worker.deps",
    "worker.records.ledger",
    "worker.session.plan",
)
NONCE = "n0nce"


def imported(stderr: str) -> set[str]:
    """The modules `python -X importtime` reported loading."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(f"{h}.") for h in HEAVY))


@pytest.fixture
def observer_env(redis_url: str, key_prefix: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment an owner gives its observers (`_child_env`), nothing else COLABQ_, and
    no settings file of the developer's."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(ENV_PREFIX)}
    env.update(COLABQ_REDIS_URL=redis_url, COLABQ_KEY_PREFIX=key_prefix)
    env["XDG_CONFIG_HOME"] = str(tmp_path / "no-config")
    yield env
    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(f"{key_prefix}*"):
        client.delete(key)


def fake_colab(path: Path, lines: list[str], last: str = "\n") -> Path:
    """A `colab` whose `exec` prints `lines` (the attach cell's framed output) and exits."""
    (path.parent / "cell-output").write_text("\n".join(lines) + last)
    path.write_text(f"#!/bin/sh\nexec cat {path.parent / 'cell-output'}\n")
    path.chmod(0o755)
    return path


def framed(texts: list[str], start: int = 0) -> list[str]:
    out, pos = [], start
    for text in texts:
        end = pos + len(text.encode()) + 1
        out.append(f"@{NONCE}:{pos}:{end}:l:{text}")
        pos = end
    return [*out, f"@{NONCE}:{pos}:{pos}:s:DONE=0", f"@{NONCE}:{pos}:{pos}:e:END={pos}"]


# --- the real entry points ------------------------------------------------------------------


def test_the_attach_client_forwards_without_importing_the_contract(
    tmp_path: Path, observer_env: dict[str, str], key_prefix: str, redis_url: str
) -> None:
    job = tmp_path / "job"
    job.mkdir()
    hello, *rest = framed(["hello", "world"])
    colab = fake_colab(tmp_path / "colab", [hello, "some chatter", *rest])
    attach.AttachSpec("job1", "s", NONCE, 0, str(colab), str(job / "cfg.json"), 60.0).dump(
        job / "attach.json"
    )
    res = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", procs.ATTACH_MODULE, str(job)],
        env=observer_env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    modules = imported(res.stderr)
    assert "redis" in modules and "worker.records.forward" in modules  # the report is real
    assert heavy_in(modules) == []
    assert "dotenv" not in modules  # no settings file: nothing to read it with
    r = redis.Redis.from_url(redis_url)
    keys = Keys(key_prefix)
    assert [f[b"line"] for _, f in r.xrange(keys.log("job1"))] == [b"hello", b"world"]
    watch = r.hgetall(keys.watch("job1"))
    assert watch[b"log_offset"] == b"12" and watch[b"exec_end"] == b"12"
    result = attach.AttachResult.load(job / "attach-result.json")
    assert result is not None and result.end_recorded and result.chatter == ["some chatter"]


def test_the_watchdog_reports_without_importing_the_contract(
    tmp_path: Path, observer_env: dict[str, str], key_prefix: str, redis_url: str
) -> None:
    files = JobFiles(tmp_path / "job").ensure()
    # No endpoint, no owner, no `colab new` running: its first poll decides to exit.
    files.write_watch(
        WatchSpec(
            job_id="job1",
            session="colabq-x",
            colab_bin=str(tmp_path / "colab"),
            config_path=str(files.cli_config),
            wall_deadline_at=time.time() + 600,
            idle_timeout_s=60,
            poll_s=0.2,
            remote_job_dir="/content/colab-jobs/job1",
        )
    )
    res = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", procs.WATCHDOG_MODULE, str(files.root)],
        env=observer_env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    modules = imported(res.stderr)
    assert "redis" in modules and "worker.colab.driver" in modules
    assert heavy_in(modules) == []
    r = redis.Redis.from_url(redis_url)
    keys = Keys(key_prefix)
    assert r.hget(keys.watch("job1"), "heartbeat_at") is not None
    lines = [f[b"line"].decode() for _, f in r.xrange(keys.log("job1"))]
    assert lines[-1] == "[watchdog] watchdog exits: no session was ever assigned"


# --- the light twins stay equal to what they stand for --------------------------------------


FIELDS = (
    "redis_url", "key_prefix", "log_stream_maxlen", "retention_s", "redis_retry_s",
    "redis_master_name", "redis_sentinel_username", "redis_sentinel_password",
)  # fmt: skip


def _plain(value: object) -> object:
    """A setting's value as the observers hold it (a SecretStr's secret)."""
    return value.get_secret_value() if isinstance(value, SecretStr) else value


@pytest.mark.parametrize(
    ("environ", "dotenv", "named"),
    [
        ({}, "", ""),  # the defaults
        ({"COLABQ_REDIS_URL": "redis://h:1/2", "COLABQ_LOG_STREAM_MAXLEN": "500"}, "", ""),
        ({}, "COLABQ_RETENTION_S=3600\nCOLABQ_KEY_PREFIX=fromfile\n", ""),
        ({"colabq_key_prefix": "lower", "COLABQ_REDIS_RETRY_S": "0"}, "COLABQ_KEY_PREFIX=file\n",
         ""),
        ({"COLABQ_RETENTION_S": "7.5"}, "export COLABQ_RETENTION_S='99'\nOTHER=1\n", ""),
        ({"COLABQ_REDIS_URL": "sentinel://a:1;sentinel://b:2/0"}, "COLABQ_REDIS_MASTER_NAME=m\n",
         ""),
        ({"COLABQ_REDIS_MASTER_NAME": ""}, "", ""),
        # --env-file's over the user's file, the environment over both.
        ({"COLABQ_RETENTION_S": "5"}, "COLABQ_KEY_PREFIX=user\nCOLABQ_RETENTION_S=9\n",
         "COLABQ_KEY_PREFIX=named\nCOLABQ_LOG_STREAM_MAXLEN=300\n"),
        ({"COLABQ_REDIS_SENTINEL_PASSWORD": "s3cret"}, "COLABQ_REDIS_SENTINEL_USERNAME=watch\n",
         ""),
        ({"COLABQ_REDIS_SENTINEL_PASSWORD": ""}, "", ""),
    ],
)  # fmt: skip
def test_observers_read_their_settings_as_settings_does(
    environ: dict[str, str],
    dotenv: str,
    named: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in list(os.environ):
        if name.upper().startswith(ENV_PREFIX):
            monkeypatch.delenv(name)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    for path, text in ((tmp_path / "config" / "colabq" / "settings.env", dotenv),
                       (tmp_path / "named.env", named)):  # fmt: skip
        if text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            path.chmod(0o600)
    if named:
        monkeypatch.setenv(ENV_FILE_VAR, str(tmp_path / "named.env"))
    want = load_settings()
    got = feed_settings()
    assert [getattr(got, f) for f in FIELDS] == [_plain(getattr(want, f)) for f in FIELDS]


def test_the_observers_settings_names_are_settings() -> None:
    import worker.settings

    assert ENV_PREFIX == worker.settings.ENV_PREFIX
    assert set(FIELDS) == set(FeedSettings.__dataclass_fields__) <= set(Settings.model_fields)


def test_the_feed_writes_what_the_ledger_writes() -> None:
    client = fakeredis.FakeRedis()
    ledger = Ledger(client, FakeClock(), Keys("l"), log_maxlen=100, retention_s=3600)
    feed = Feed(client, Keys("f"), log_maxlen=100, retention_s=3600)
    for writer in (ledger, feed):
        writer.record_watch("j", {"heartbeat_at": "1.5"})
        writer.record_watch("j", {"endpoint": "gpu-1", "stop_verified": "true"})
        writer.append_log("j", "[watchdog] hello", "watchdog")
    for prefix in ("l", "f"):
        k = Keys(prefix)
        assert client.hgetall(k.watch("j")) == {
            b"heartbeat_at": b"1.5",
            b"endpoint": b"gpu-1",
            b"stop_verified": b"true",
        }
        assert client.hgetall(k.endpoints()) == {b"gpu-1": b"j"}
        assert [f for _, f in client.xrange(k.log("j"))] == [
            {b"line": b"[watchdog] hello", b"stream": b"watchdog"}
        ]
        assert 0 < client.ttl(k.log("j")) <= 3600
    assert ledger.cancel_requested("j") is None and feed.cancel_requested("j") is None
    client.set(Keys("f").cancel("j"), "by me")
    assert feed.cancel_requested("j") == "by me"
    client.hset(Keys("f").watch("j"), "log_offset", "42")
    assert feed.log_offset("j") == 42 and feed.log_offset("other") == 0


def test_a_batch_is_refused_when_its_columns_disagree() -> None:
    feed = Feed(fakeredis.FakeRedis(), Keys("f"), log_maxlen=100, retention_s=60)
    with pytest.raises(ValueError, match="no newline"):
        feed.forward("j", 0, [ForwardItem(4, "l", "a\nb")])
    with pytest.raises(ValueError, match="one kind letter"):
        feed.forward("j", 0, [ForwardItem(4, "line", "abc")])
    assert feed.forward_lines("j", 0, Lines("3 5", "ll", "ab\nc")) == 5
    assert feed.forward_lines("j", 0, Lines("", "", "")) == 5  # nothing: the offset stays


# --- the attach client's fast path ----------------------------------------------------------


def test_a_chunk_parses_as_its_lines_do_one_by_one() -> None:
    lines = [
        f"@{NONCE}:0:6:l:hello",
        f"@{NONCE}:6:20:l:a:b:c with colons\r",
        f"@{NONCE}:20:20:s:EXIT=0",
        "",
        "[colab] some chatter",
        f"@{NONCE}:+20:25:l:signed",  # int() reads it; the pattern does not: the slow path
        f"@{NONCE}:007:9:l:zeros",
        f"@{NONCE}:1:2:x:bad kind",
        "@other:1:2:l:another nonce",
        f"@{NONCE}:25:25:e:END=25",
    ]
    pattern = attach.framed_pattern(NONCE)
    one_by_one = [attach.parse_framed(line, NONCE) for line in lines]
    rows, other = attach.parse_chunk("\n".join(lines), NONCE, pattern)
    assert rows == [r for r in one_by_one if r is not None]
    assert other == [line for line, r in zip(lines, one_by_one, strict=True) if r is None]
    assert ("20", "25", "l", "signed") in rows and ("7", "9", "l", "zeros") in rows
    clean = [line for line in lines if re.fullmatch(pattern, line)]
    assert attach.parse_chunk("\n".join(clean), NONCE, pattern) == (
        [attach.parse_framed(line, NONCE) for line in clean],
        [],
    )


def test_a_run_stops_at_the_first_gap_and_nothing_follows_it() -> None:
    chain = attach.Chain(10)
    run = chain.take([("10", "14", "l", "a"), ("14", "20", "s", "X=1")])
    assert run == attach.Run(Lines("14 20", "ls", "a\nX=1"), "")
    run = chain.take([("20", "25", "l", "b"), ("26", "30", "l", "lost one")])
    assert run == attach.Run(Lines("25", "l", "b"), "expected offset 25, got 26")
    assert chain.take([("25", "30", "l", "c")]) is None
    broken_at_once = attach.Chain(0).take([("5", "9", "l", "x")])
    assert broken_at_once == attach.Run(Lines("", "", ""), "expected offset 0, got 5")


def run_follow(
    tmp_path: Path, lines: list[str], offset: int = 0, last: str = "\n"
) -> tuple[Feed, attach.AttachResult]:
    feed = Feed(fakeredis.FakeRedis(), Keys("t"), log_maxlen=100_000, retention_s=60)
    feed.r.hset(feed.keys.watch("job1"), "log_offset", offset)
    colab = fake_colab(tmp_path / "colab", lines, last)
    spec = attach.AttachSpec("job1", "s", NONCE, 0, str(colab), str(tmp_path / "c.json"), 60.0)
    return feed, attach.follow(spec, feed, tmp_path, dict(os.environ), retry_s=1.0)


def test_a_long_console_reaches_the_stream_once_in_order(tmp_path: Path) -> None:
    texts = [f"line {i} " + "x" * (i % 97) for i in range(20_000)]  # many reads, many batches
    feed, result = run_follow(tmp_path, framed(texts))
    got = [f[b"line"].decode() for _, f in feed.r.xrange(feed.keys.log("job1"))]
    assert got == texts
    end = sum(len(t) + 1 for t in texts)
    assert result.end_recorded and result.offset == end and not result.gap
    assert feed.r.hget(feed.keys.watch("job1"), "exec_done") == b"0"
    progress = attach.read_progress(tmp_path / attach.PROGRESS_FILE)
    assert progress is not None and progress[1] == end


def test_lines_before_a_gap_are_forwarded_and_the_gap_ends_the_client(tmp_path: Path) -> None:
    lines = [*framed(["one", "two"])[:2], f"@{NONCE}:99:103:l:far", *framed(["x"], 103)]
    feed, result = run_follow(tmp_path, lines)
    got = [f[b"line"] for _, f in feed.r.xrange(feed.keys.log("job1"))]
    assert got == [b"one", b"two"]
    assert result.gap == "expected offset 8, got 99" and not result.end_recorded
    assert result.offset == 8


def test_a_client_that_reattaches_forwards_only_what_is_new(tmp_path: Path) -> None:
    lines = framed(["old", "new"])
    feed, result = run_follow(tmp_path, lines[1:], offset=4)  # "old" was forwarded before
    assert [f[b"line"] for _, f in feed.r.xrange(feed.keys.log("job1"))] == [b"new"]
    assert result.end_recorded and result.offset == 8


def test_a_line_longer_than_a_read_and_a_last_item_cut_before_its_newline(
    tmp_path: Path,
) -> None:
    long = "y" * (5 * attach.READ_CHUNK + 7)
    feed, result = run_follow(tmp_path, framed(["short", long]), last="")  # no last newline
    assert [f[b"line"].decode() for _, f in feed.r.xrange(feed.keys.log("job1"))] == [
        "short",
        long,
    ]
    # The cell ends every item with a newline: one without is cut (its connection died), never
    # taken as whole. The end it would have said is left for the next attach to read.
    assert not result.end_recorded and result.chatter == [
        f"cut off: @{NONCE}:{result.offset}:{result.offset}:e:END={result.offset}"
    ]
    assert feed.r.hget(feed.keys.watch("job1"), "exec_done") == b"0"


def test_a_line_cut_by_the_end_of_the_output_is_not_forwarded(tmp_path: Path) -> None:
    """The connection died in the middle of a framed line: never recorded as a whole line."""
    cut = [*framed(["line-1", "line-2"])[:2], f"@{NONCE}:14:21:l:lin"]
    feed, result = run_follow(tmp_path, cut, last="")
    assert [f[b"line"] for _, f in feed.r.xrange(feed.keys.log("job1"))] == [b"line-1", b"line-2"]
    assert result.offset == 14 and not result.end_recorded
    assert feed.r.hget(feed.keys.watch("job1"), "log_offset") == b"14"
