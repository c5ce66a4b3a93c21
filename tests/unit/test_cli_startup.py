"""`colabq status` and `colabq preflight` start lean: each run in a fresh interpreter, then the
modules it loaded are read from `sys.modules`. Not timed: a module that should not load and does
fails the test, whatever the machine's speed.

What each path may not import: the other commands' modules, and the heavy libraries it does not
use (pydantic and pydantic-settings: Typer's value adapters and the settings object; rich for a
list with no row or `--json`; PyYAML for a JSON config; Celery, kombu, the Colab driver and the
session code, huggingface_hub, urllib.request). `status` reaches a stand-in Redis client (the
command's `_client`), so no server is needed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

NEVER = ["celery", "kombu", "huggingface_hub", "worker.colab.driver", "worker.session",
         "worker.deps", "worker.spec", "worker.records.ledger"]  # fmt: skip
NO_PYDANTIC = ["pydantic", "pydantic_settings", "worker.settings"]
# The helpers only some commands use (each command's own module is in producer/commands/).
HELPERS = ["producer.preflight", "producer.submit", "producer.clean", "producer.doctor",
           "producer.stage", "producer.demo"]  # fmt: skip

# Runs ARGV through the real entry point; `status` reads from a stand-in Redis client whose
# ledger holds PROBE_JOBS running jobs (none by default).
PROBE = """
import json, os, sys

JOBS = [b"%016x" % i for i in range(int(os.environ.get("PROBE_JOBS", "0")))]
ROW = [b"running", b"run-x", b"T4", b"me@host", b"celery@w", b"1.0", b"2.0", None, None, None]

class Pipe:
    def __init__(self): self.replies = []
    def zrevrange(self, *args): self.replies.append(JOBS)
    def hmget(self, *args): self.replies.append(ROW)
    def execute(self, raise_on_error=True): return self.replies

class Client:
    def pipeline(self, transaction=True): return Pipe()

argv = json.loads(sys.argv[1])
if argv[0] == "status":
    import producer.commands.status as status
    status._client = lambda where: Client()
from producer.cli import app
code = None
try:
    app(argv, prog_name="colabq")
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""

# Parses ARGV (the group's options, then the command's: each value coerced) without running it.
PARSE = """
import json, sys
import typer.main
from producer.cli import app
group = typer.main.get_command(app)
argv = json.loads(sys.argv[1])
ctx = group.make_context("colabq", list(argv))
name, command, rest = group.resolve_command(ctx, argv)
sub = command.make_context(name, rest, parent=ctx)
values = {k: [type(v).__name__, v if isinstance(v, (int, float, str, list, type(None))) else str(v)]
          for k, v in sub.params.items()}
print(json.dumps({"values": values, "modules": sorted(sys.modules)}))
"""


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("COLABQ_")}
    return {**env, "HOME": str(home), "COLUMNS": "80", "PYTHONPATH": str(ROOT)}


def run(code: str, argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(argv)], cwd=cwd, env=env or _env(cwd),
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def commands(modules: list[str]) -> list[str]:
    """The command modules loaded (`producer/commands/`, the package itself aside)."""
    return [m for m in modules if m.startswith("producer.commands.")]


def loaded(modules: list[str], names: list[str]) -> list[str]:
    """Those of `names` loaded, as modules or as packages of a loaded module."""
    return [n for n in names if any(m == n or m.startswith(n + ".") for m in modules)]


@pytest.mark.parametrize("argv", [["status"], ["status", "--json"], ["status", "--page", "3"]])
def test_the_job_list_imports_no_pydantic_rich_or_worker_code(
    tmp_path: Path, argv: list[str]
) -> None:
    got = run(PROBE, argv, tmp_path)
    assert got["code"] == 0
    mods = got["modules"]
    assert "producer.commands.status" in mods  # the probe saw the command run
    assert loaded(mods, NEVER + NO_PYDANTIC + ["rich", "yaml"]) == []
    assert commands(mods) == ["producer.commands.status"]
    assert loaded(mods, HELPERS) == []


def test_the_list_with_settings_in_the_environment_still_needs_no_pydantic(
    tmp_path: Path,
) -> None:
    env = {**_env(tmp_path), "COLABQ_REDIS_URL": "redis://127.0.0.1:1/3",
           "colabq_key_prefix": "team-a"}  # fmt: skip
    got = run(PROBE, ["status"], tmp_path, env)
    assert got["code"] == 0
    assert loaded(got["modules"], NO_PYDANTIC) == []


def test_any_other_setting_builds_the_settings_object(tmp_path: Path) -> None:
    # The other side: a setting the list does not read is still validated, so pydantic loads.
    env = {**_env(tmp_path), "COLABQ_LEASE_TTL_S": "45"}
    got = run(PROBE, ["status"], tmp_path, env)
    assert got["code"] == 0
    assert loaded(got["modules"], ["pydantic_settings", "worker.settings"]) == [
        "pydantic_settings", "worker.settings"
    ]  # fmt: skip


def test_a_table_of_jobs_is_drawn_with_rich(tmp_path: Path) -> None:
    # The other side of "no rich": a page with rows is a rich table.
    got = run(PROBE, ["status"], tmp_path, {**_env(tmp_path), "PROBE_JOBS": "3"})
    assert got["code"] == 0
    assert loaded(got["modules"], ["rich"]) == ["rich"]
    assert loaded(got["modules"], NEVER + NO_PYDANTIC) == []


def test_parsing_status_coerces_every_value_without_pydantic(tmp_path: Path) -> None:
    argv = ["status", "--state", "live", "-s", "FAILED", "--limit", "5", "--page", "2",
            "--every", "1.5", "--run", "coco-*", "--since", "2h", "--mine"]  # fmt: skip
    got = run(PARSE, argv, tmp_path)
    assert got["values"] == {
        "job": ["NoneType", None], "state": ["list", ["live", "FAILED"]],
        "run": ["str", "coco-*"], "since": ["str", "2h"], "mine": ["bool", True],
        "limit": ["int", 5], "page": ["int", 2], "watch": ["bool", False],
        "every": ["float", 1.5], "as_json": ["bool", False], "sweep": ["NoneType", None],
    }  # fmt: skip
    assert loaded(got["modules"], NEVER + NO_PYDANTIC + ["rich", "yaml"]) == []
    assert commands(got["modules"]) == ["producer.commands.status"]
    assert loaded(got["modules"], HELPERS) == []


def test_a_value_typed_otherwise_goes_to_typers_own_coercion(tmp_path: Path) -> None:
    # The other side: `--limit 1e1` is no plain integer: Typer's pydantic adapter judges it.
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(["status", "--limit", "1e1"])], cwd=tmp_path,
        env=_env(tmp_path), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    got = json.loads(done.stdout.splitlines()[-1])
    assert got["code"] == 2
    assert "pydantic" in got["modules"]
    assert done.stderr == (
        "colabq: Invalid value for '--limit': Input should be a valid integer, unable to parse "
        "string as an integer. See `colabq status --help`.\n"
    )


def test_preflight_on_a_json_config_imports_no_pydantic_rich_yaml_or_redis(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    (repo / "configs" / "mnist").mkdir(parents=True)
    config = repo / "configs" / "mnist" / "mlp.json"
    config.write_text(json.dumps({"epochs": 3, "optimizer": {"lr": 0.001}}))
    argv = ["preflight", "--repo-dir", str(repo), "--config", str(config), "--json",
            "--name", "mnist-mlp-lr1e-3", "--seconds-per-epoch", "60"]  # fmt: skip
    got = run(PROBE, argv, tmp_path)
    assert got["code"] in (0, 2)  # the checks' verdict is not what is tested here
    mods = got["modules"]
    assert "producer.preflight.run" in mods  # the checks ran
    heavy = NEVER + NO_PYDANTIC + ["rich", "yaml", "redis", "urllib.request", "statistics"]
    assert loaded(mods, heavy) == []
    assert commands(mods) == ["producer.commands.preflight"]
    assert loaded(mods, HELPERS) == ["producer.preflight"]


def test_a_yaml_config_loads_pyyaml_when_read(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "configs").mkdir(parents=True)
    config = repo / "configs" / "mlp.yaml"
    config.write_text("epochs: 3\n")
    argv = ["preflight", "--repo-dir", str(repo), "--config", str(config), "--json",
            "--name", "mnist-mlp", "--seconds-per-epoch", "60"]  # fmt: skip
    assert "yaml" in run(PROBE, argv, tmp_path)["modules"]


def test_help_lists_every_command_with_its_help_text(tmp_path: Path) -> None:
    from producer.cli import COMMANDS, _load

    done = subprocess.run(
        [sys.executable, "-m", "producer.cli", "--help"], cwd=tmp_path,
        env={**_env(tmp_path), "COLUMNS": "300"}, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = {line.strip("│ ").split(" ", 1)[0]: line for line in done.stdout.splitlines()}
    listed = [name for name in rows if name in COMMANDS]
    assert listed == list(COMMANDS)  # all of them, in their order
    for name in COMMANDS:
        first_line = (_load(name).__doc__ or "").strip().splitlines()[0]
        assert first_line.rstrip(".")[:60] in rows[name], name
