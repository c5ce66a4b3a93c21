"""`colabq submit` refuses malformed jobs with one clear line, exit != 0, and enqueues nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from producer.cli import app
from tests.gatethread import written

runner = CliRunner()


@pytest.fixture
def env(redis_url: str, key_prefix: str, tmp_path: Path) -> dict[str, str]:
    return {"COLABQ_REDIS_URL": redis_url, "COLABQ_KEY_PREFIX": key_prefix, "HOME": str(tmp_path)}


@pytest.fixture
def good_script(tmp_path: Path) -> Path:
    p = tmp_path / "train.sh"
    p.write_text("echo training\n")
    return p


def _queued_messages(client: redis.Redis) -> int:
    return sum(
        int(client.llen(q)) for q in (b"gpu.t4", b"gpu.l4", b"gpu.a100", b"gpu.h100", b"gpu.g4")
    )


CASES = [
    ("missing script", ["missing.sh"], "not found"),
    ("script fails bash -n", ["{bad_script}"], "bash -n"),
    ("unknown gpu", ["{script}", "--gpu", "V100"], "not a Colab GPU type"),
    ("bad wall", ["{script}", "--wall", "forever"], "--wall"),
    ("negative idle", ["{script}", "--idle", "-5"], "--idle"),
    ("idle over wall", ["{script}", "--wall", "10m", "--idle", "1h"], "idle_timeout_s"),
    ("local input", ["{script}", "--hub-input", "data=/home/me/data"], "hf://"),
    ("input without =", ["{script}", "--hub-input", "data"], "NAME=URI"),
    ("no destination", ["{script}", "--no-dest"], "--hub-repo"),
    ("bad run name", ["{script}", "--name", "bad name/with slash"], "run_name"),
]


@pytest.mark.parametrize(("case", "args", "expect"), CASES, ids=[c[0] for c in CASES])
def test_malformed_job_is_refused_and_nothing_is_enqueued(
    case: str,
    args: list[str],
    expect: str,
    env: dict[str, str],
    good_script: Path,
    redis_client: redis.Redis,
    key_prefix: str,
    tmp_path: Path,
) -> None:
    bad = tmp_path / "bad.sh"
    bad.write_text("if then (\n")
    args = [a.replace("{bad_script}", str(bad)) for a in args]
    argv = ["submit", *[a.replace("{script}", str(good_script)) for a in args]]
    if "--name" not in argv:
        argv += ["--name", "mnist-mlp-bs64-lr1e-3-baseline"]
    if "--no-dest" in argv:
        argv.remove("--no-dest")
    else:
        argv += ["--local-store", str(tmp_path / "store")]
    before = _queued_messages(redis_client)
    result = runner.invoke(app, argv, env=env)
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("colabq: "), result.output
    assert expect in lines[0]
    assert "Traceback" not in result.output
    assert not written(redis_client, key_prefix)
    assert _queued_messages(redis_client) == before


def test_script_over_one_mib_is_refused(
    env: dict[str, str], tmp_path: Path, redis_client: redis.Redis, key_prefix: str
) -> None:
    big = tmp_path / "big.sh"
    big.write_text("# " + "x" * (1024 * 1024) + "\n")
    result = runner.invoke(
        app, ["submit", str(big), "--name", "mnist-mlp-bs64-lr1e-3-baseline",
              "--local-store", str(tmp_path / "s")], env=env,
    )  # fmt: skip
    assert result.exit_code == 2
    assert "1 MiB" in result.output
    assert not written(redis_client, key_prefix)


def test_unreachable_redis_is_one_line_exit_3(good_script: Path, tmp_path: Path) -> None:
    env = {"COLABQ_REDIS_URL": "redis://127.0.0.1:1/0", "HOME": str(tmp_path)}
    result = runner.invoke(
        app, ["submit", str(good_script), "--name", "mnist-mlp-bs64-lr1e-3-baseline",
              "--local-store", str(tmp_path / "s")], env=env,
    )  # fmt: skip
    assert result.exit_code == 3
    assert result.output.strip().startswith("colabq: Cannot reach Redis")
    assert len(result.output.strip().splitlines()) == 1


def test_invalid_setting_names_the_variable(good_script: Path, tmp_path: Path) -> None:
    env = {"COLABQ_REDIS_URL": "http://nope", "HOME": str(tmp_path)}
    result = runner.invoke(app, ["status"], env=env)
    assert result.exit_code == 2
    assert "COLABQ_REDIS_URL" in result.output
