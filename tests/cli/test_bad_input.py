"""The bad-input corpus: every case is refused with one line on stderr and exit 2, and nothing is
enqueued, recorded or written (Redis, the queues, the local store, the files given).

Each case is what a user could type: durations that are not finite, zero, negative, absurd or
bare numbers; paths escaping the job's folder; unusable local stores; malformed URIs, repo ids,
run names, environment variables, scripts, configs and job files; broken settings. A case names
a word the one line must contain, so the refusal is about the right thing.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis
from typer.testing import CliRunner

from producer.cli import app
from tests.cli.training_repo import GOOD_NAME, QUIET_ENV, make_repo
from tests.gatethread import running_gate, written
from worker.settings import load_settings

runner = CliRunner()


@dataclass(frozen=True)
class Case:
    id: str
    args: tuple[str, ...] = ()  # appended to a good submit command (the last value wins)
    expect: str = ""  # a word of the one line on stderr (case-insensitive)
    env: dict[str, str] = field(default_factory=dict)
    script: str | bytes | None = None  # replaces the good script's content
    job: str | None = None  # submit this job file instead of a script
    target: str | None = None  # submit this path instead of the script


def durations() -> list[Case]:
    bad = {
        "nan": "finite", "inf": "finite", "-inf": "negative", "0s": "zero", "0": "no unit",
        "-5s": "negative", "90": "no unit", "1.5": "no unit", "99999999h": "30 days",
        "forever": "not a duration", "": "empty", "4 h": "not a duration", "1e3s": "not a duration",
    }  # fmt: skip
    cases = [
        Case(f"{opt} {value!r}", (opt, value), why)
        for opt in ("--wall", "--idle", "--ttl", "--sync-interval")
        for value, why in bad.items()
    ]
    return [
        *cases,
        Case("--wall 1m: under the minimum", ("--wall", "1m"), "at least 5m"),
        Case("--wall 25h: over a session", ("--wall", "25h"), "over 24h"),
        Case("--wall 31d", ("--wall", "31d"), "30 days"),
        Case("--idle over --wall", ("--wall", "10m", "--idle", "1h"), "idle_timeout_s"),
        Case("--ttl over --wall", ("--wall", "10m", "--ttl", "1h"), "ttl_s"),
    ]


def numbers() -> list[Case]:
    cases = []
    for opt, values in {
        "--epochs": ("nan", "inf", "-1", "0", "abc"),
        "--seconds-per-epoch": ("nan", "inf", "-5", "0", "x"),
        "--budget": ("nan", "inf", "-1", "abc"),
        "--max-restarts": ("-1", "21", "abc", "1.5"),
    }.items():
        cases += [Case(f"{opt} {v}", (opt, v), opt.lstrip("-").split("-")[0]) for v in values]
    return cases


def paths() -> list[Case]:
    escaping = ["../../.colabq-secrets", "/etc/passwd", "~/x", "a/../../b", "..", "", "a\nb"]
    cases = [Case(f"--sync {p!r}", ("--sync", p), "path") for p in escaping]
    cases += [Case(f"--expect {p!r}", ("--expect", p), "path") for p in escaping]
    cases += [
        Case(f"--prefix {p!r}", ("--prefix", p), "prefix")
        for p in ("../x", "a/../../b", "a b", "..")
    ]
    cases += [
        Case(f"--local-store {p}", ("--local-store", p), "local-store")
        for p in ("/proc/x", "/sys/x", "/dev/null", "/proc", "{tmp}/a-file", "{tmp}/a-file/sub")
    ]
    return cases


def uris() -> list[Case]:
    inputs = {
        "data=hf://": "hf://", "data=hf://alice": "hf://", "data=hf://alice/../x": "hf",
        "data=hf://spaces/a/b": "spaces", "data=gs://": "bucket", "data=gs://bucket": "object",
        "data=https://": "host", "data=https://h:abc/x": "well-formed", "data=ftp://h/x": "hf://",
        "data=/local/path": "hf://", "data=./rel": "hf://", "data": "NAME=URI",
        "=hf://alice/data/x": "NAME=URI", "1x=hf://alice/data/x": "input name",
        "data=hf://a b/c": "whitespace", "data=https://h/x y": "whitespace",
    }  # fmt: skip
    cases = [Case(f"--hub-input {v!r}", ("--hub-input", v), why) for v, why in inputs.items()]
    cases.append(
        Case(
            "--hub-input twice",
            ("--hub-input", "d=hf://a/b/x", "--hub-input", "d=hf://a/b/y"),
            "twice",
        )
    )
    resumes = {
        "hf://": "resume",
        "hf://alice": "resume",
        "gs://b/x": "job id",
        "hf://a b/c": "resume",
    }
    cases += [Case(f"--resume-from {v!r}", ("--resume-from", v), w) for v, w in resumes.items()]
    return cases


def repo_ids() -> list[Case]:
    ids = ["alice", "alice/", "/runs", "a/b/c", "al ice/runs", "alice/runs--x", "alice/..",
           "alice/runs.git", "-alice/runs", "alice/" + "x" * 97]  # fmt: skip
    cases = [
        Case(f"--hub-repo {r!r}", ("--hub-repo", r, "--local-store", ""), "hub repo") for r in ids
    ]
    return [
        Case(c.id, tuple(a for a in c.args if a not in ("--local-store", "")), c.expect, no_store())
        for c in cases
    ] + [
        Case("--repo-type space", ("--repo-type", "space"), "repo-type"),
        Case("--hub-repo and --local-store", ("--hub-repo", "alice/runs"), "not both"),
    ]


def no_store() -> dict[str, str]:
    return {"_NO_STORE": "1"}


def names_and_choices() -> list[Case]:
    return [
        Case("empty name", ("--name", ""), "name the run"),
        Case("name with a space", ("--name", "bad name"), "run_name"),
        Case("name with a slash", ("--name", "a/b"), "run_name"),
        Case("name ..", ("--name", ".."), "run_name"),
        Case("name too long", ("--name", "x" * 97), "run_name"),
        Case("name leading dash", ("--name", "-coco"), "run_name"),
        Case("planning label in name", ("--name", "coco-detr-r50-wave-2"), "run-name"),
        Case("unknown gpu", ("--gpu", "V100"), "gpu"),
        Case("empty gpu", ("--gpu", ""), "gpu"),
        Case("unknown tracker", ("--tracker", "neptune"), "tracker"),
        Case("unknown waiver", ("--waive", "everything"), "waive"),
        Case("explain without =", ("--explain", "lr"), "KEY=REASON"),
    ]


def envs() -> list[Case]:
    bad = {
        "LR": "NAME=VALUE", "=1": "NAME=VALUE", "1X=2": "env name", "A-B=1": "env name",
        "HF_TOKEN=x": "reserved", "MY_SECRET=x": "secret", "WANDB_API_KEY=x": "secret",
        "COLABQ_X=1": "reserved", "PATH=/x": "reserved", "A=line\nbreak": "one line",
    }  # fmt: skip
    cases = [Case(f"--env {v!r}", ("--env", v), why) for v, why in bad.items()]
    return [*cases, Case("--env twice", ("--env", "A=1", "--env", "A=2"), "twice")]


def scripts() -> list[Case]:
    return [
        Case("missing script", target="{tmp}/missing.sh", expect="not found"),
        Case("script is a folder", target="{tmp}", expect="not found"),
        Case("binary script", script=b"\x7fELF\x00\x01\x02", expect="binary"),
        Case("empty script", script="", expect="empty"),
        Case("blank script", script="\n  \n", expect="empty"),
        Case("huge script", script="# " + "x" * (1024 * 1024) + "\n", expect="1 MiB"),
        Case("bash -n fails", script="if then (\n", expect="bash -n"),
        Case("not UTF-8", script=b"echo \xff\xfe\n", expect="UTF-8"),
    ]


def configs() -> list[Case]:
    return [
        Case("config missing", ("--config", "configs/nope.yaml"), "pre-flight failed"),
        Case("config malformed", ("--config", "configs/broken.yaml"), "pre-flight failed"),
        Case("reference missing", ("--reference", "configs/nope.yaml"), "pre-flight failed"),
        Case("repo-dir missing", ("--repo-dir", "{tmp}/nope"), "repo-dir"),
        Case("repo-dir is a file", ("--repo-dir", "{tmp}/a-file"), "repo-dir"),
    ]


def job_files() -> list[Case]:
    base = f"script: repo/train.sh\nname: {GOOD_NAME}\nrepo_dir: repo\nlocal_store: store\n"
    bad = {
        "not YAML": ("script: [unclosed\n", "not valid YAML"),
        "a list": ("- script: x\n", "mapping"),
        "a scalar": ("just text\n", "mapping"),
        "empty file": ("", "mapping"),
        "unknown key": (base + "hub-repo: alice/runs\n", "did you mean hub_repo"),
        "typo key": (base + "gpus: T4\n", "unknown key"),
        "non-text key": (base + "1: x\n", "not text"),
        "wall nan": (base + "wall: .nan\n", "wall"),
        "wall bare number": (base + "wall: 3600\n", "no unit"),
        "epochs inf": (base + "epochs: .inf\n", "finite"),
        "gpu list, a type unknown": (base + "gpu: [T4, V100]\n", "V100 is not a Colab GPU"),
        "gpu list, a type twice": (base + "gpu: [T4, T4]\n", "twice"),
        "env secret": (base + "env: {HF_TOKEN: x}\n", "reserved"),
        "sync escapes": (base + "sync: ../../.colabq-secrets\n", "path"),
        "no script": (f"name: {GOOD_NAME}\nlocal_store: store\n", "script"),
        "sweep not a mapping": (base + "sweep: [1, 2]\n", "sweep"),
        "sweep empty list": (base + "sweep: {env.LR: []}\n", "sweep"),
        "sweep scalar": (base + "sweep: {env.LR: 1}\n", "sweep"),
        "sweep name": (base + "sweep: {name: [a, b]}\n", "sweep key"),
        "sweep unknown key": (base + "sweep: {lr: [1, 2]}\n", "sweep key"),
        "sweep bad gpu": (base + "sweep: {gpu: [T4, V100]}\n", "gpu"),
        "sweep too big": (
            base
            + "sweep: {env.A: "
            + str(list(range(101)))
            + ", env.B: "
            + str(list(range(100)))
            + "}\n",
            "limit",
        ),
        "sweep same names": (base + "sweep: {env.X: [a/b, a_b]}\n", "twice"),
    }
    cases = [Case(f"job file: {k}", job=v, expect=w) for k, (v, w) in bad.items()]
    return [
        *cases,
        Case("job file missing", target="{tmp}/nope.yaml", expect="not found"),
        Case("job file binary", target="{tmp}/binary.yaml", expect="UTF-8"),
        Case("sweep flag malformed", ("--sweep", "env.LR"), "KEY=V1,V2"),
        Case("sweep flag twice", ("--sweep", "env.LR=1", "--sweep", "env.LR=2"), "twice"),
    ]


def settings() -> list[Case]:
    bad = {
        "COLABQ_REDIS_URL": ("http://nope", "COLABQ_REDIS_URL"),
        "COLABQ_WORKER_GPUS": ("[T4,", "COLABQ_WORKER_GPUS"),
        "COLABQ_QUEUE_PREFIX": ("../", "COLABQ_QUEUE_PREFIX"),
        "COLABQ_KEY_PREFIX": ("a b", "COLABQ_KEY_PREFIX"),
        "COLABQ_POLL_INTERVAL_S": ("nan", "COLABQ_POLL_INTERVAL_S"),
        "COLABQ_LEASE_TTL_S": ("-1", "COLABQ_LEASE_TTL_S"),
        "COLABQ_HF_ENDPOINT": ("ftp://hub", "COLABQ_HF_ENDPOINT"),
        "COLABQ_QUIET_WINDOWS": ("whenever", "COLABQ_QUIET_WINDOWS"),
    }
    cases = [Case(f"setting {k}={v!r}", env={k: v}, expect=w) for k, (v, w) in bad.items()]
    return [
        *cases,
        Case(
            "non-numeric Redis port",
            env={"COLABQ_REDIS_URL": "redis://127.0.0.1:abc/0"},
            expect="COLABQ_REDIS_URL",
        ),
        Case(
            "Redis port out of range",
            env={"COLABQ_REDIS_URL": "redis://127.0.0.1:99999/0"},
            expect="COLABQ_REDIS_URL",
        ),
    ]


def coverage() -> list[Case]:
    """An expected artifact no sync path uploads: refused before any GPU time is spent."""
    job = f"script: repo/train.sh\nname: {GOOD_NAME}\nrepo_dir: repo\nlocal_store: store\n"
    job += "commit: abc1234\n"
    return [
        Case("--expect without --sync", ("--expect", "results.json"), "no --sync path is given"),
        Case(
            "--expect not under a --sync",
            ("--sync", "checkpoints", "--expect", "results.json"),
            "--expect results.json: no --sync path puts it in the store",
        ),
        Case(
            "--expect where a nested --sync is not",
            ("--sync", "out/results.json", "--expect", "out/results.json"),
            "--sync out/results.json lands at results.json",
        ),
        Case(
            "--dry-run: --expect not under a --sync",
            ("--dry-run", "--sync", "ckpt", "--expect", "ckpt2/model.pt"),
            "--expect ckpt2/model.pt",
        ),
        Case(
            "job file: expect not under sync",
            job=job + "sync: [checkpoints]\nexpect: [checkpoints, results.json]\n",
            expect="--expect results.json",
        ),
    ]


def usage() -> list[Case]:
    return [
        Case("unknown option", ("--repo", "alice/runs"), "no such option"),
        Case("non-numeric budget", ("--budget", "lots"), "budget"),
        Case("flag given a value", ("--high-mem=yes",), "high-mem"),
    ]


CORPUS = (
    durations() + numbers() + paths() + uris() + repo_ids() + names_and_choices() + envs()
    + scripts() + configs() + job_files() + settings() + coverage() + usage()
)  # fmt: skip


def test_the_corpus_is_large_and_its_ids_unique() -> None:
    assert len(CORPUS) >= 150
    assert len({c.id for c in CORPUS}) == len(CORPUS)


@pytest.fixture(scope="module")
def prefix() -> str:
    return f"badinput-{secrets.token_hex(4)}"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    make_repo(tmp_path / "repo")
    broken = tmp_path / "repo" / "configs" / "broken.yaml"
    broken.write_text("model: [unclosed\n")
    long_ago = time.time() - 10 * 86400  # not the newest config: the good command passes
    os.utime(broken, (long_ago, long_ago))
    (tmp_path / "a-file").write_text("not a folder\n")
    (tmp_path / "binary.yaml").write_bytes(b"script: \xff\xfe\x00\n")
    return tmp_path


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file() and "home" not in p.relative_to(root).parts
    }


@pytest.fixture
def redis_state(redis_client: redis.Redis, prefix: str, redis_url: str) -> Iterator[redis.Redis]:
    settings = load_settings(redis_url=redis_url, key_prefix=prefix, queue_prefix=f"{prefix}.")
    with running_gate(settings):
        yield redis_client
    for key in redis_client.scan_iter(f"{prefix}*"):
        redis_client.delete(key)


def invoke(case: Case, workdir: Path, redis_url: str, prefix: str) -> Any:
    tmp = str(workdir)
    script = workdir / "repo" / "train.sh"
    if case.script is not None:
        script = workdir / "job.sh"
        data = case.script if isinstance(case.script, bytes) else case.script.encode()
        script.write_bytes(data)
    target = str(script)
    if case.job is not None:
        target = str(workdir / "job.yaml")
        Path(target).write_text(case.job)
    elif case.target is not None:
        target = case.target.replace("{tmp}", tmp)
    argv = ["submit", target]
    if case.job is None:
        argv += ["--name", GOOD_NAME, "--repo-dir", str(workdir / "repo"), "--commit", "abc1234"]
        if "_NO_STORE" not in case.env:
            argv += ["--local-store", str(workdir / "store")]
    argv += ["--seconds-per-epoch", "600"]
    argv += [a.replace("{tmp}", tmp) for a in case.args]
    env = {
        **QUIET_ENV,
        "COLABQ_REDIS_URL": redis_url,
        "COLABQ_KEY_PREFIX": prefix,
        "COLABQ_QUEUE_PREFIX": f"{prefix}.",
        "HOME": str(workdir / "home"),
        "COLUMNS": "200",
        **{k: v for k, v in case.env.items() if not k.startswith("_")},
    }
    cwd = os.getcwd()
    os.chdir(workdir)  # a job file's paths and the store are relative to here
    try:
        return runner.invoke(app, argv, env=env)
    finally:
        os.chdir(cwd)


def test_the_good_command_the_cases_spoil_is_accepted(
    workdir: Path, redis_url: str, prefix: str, redis_state: redis.Redis
) -> None:
    """The control: without a case's bad value, the same command enqueues its job."""
    result = invoke(Case("good"), workdir, redis_url, prefix)
    assert result.exit_code == 0, result.output
    assert int(redis_state.zcard(f"{prefix}:jobs")) == 1


@pytest.mark.parametrize("case", CORPUS, ids=[c.id for c in CORPUS])
def test_bad_input_is_one_line_exit_2_and_changes_nothing(
    case: Case, workdir: Path, redis_url: str, prefix: str, redis_state: redis.Redis
) -> None:
    before = snapshot(workdir)
    result = invoke(case, workdir, redis_url, prefix)
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("colabq: "), lines
    assert case.expect.lower() in lines[0].lower(), lines[0]
    assert "Traceback" not in result.output
    assert not written(redis_state, prefix), "something was recorded or enqueued"
    assert not (workdir / "store").exists(), "the local store was written"
    after = snapshot(workdir)
    changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    assert changed <= {str(workdir / "job.sh"), str(workdir / "job.yaml")}, changed
