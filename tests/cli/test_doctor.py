"""`colabq doctor` against the Colab emulator (`ops/colab`), the local Hub server and the real
Redis: every check PASSes on a ready host, and each broken part is one FAIL row (never a
traceback, never the token), with exit 1 (2 for a `colab` release colabq does not drive); WARN
rows alone exit 0; a hung call is cut short. The `exec` path of a real google-colab-cli install
is checked on a stand-in install (a venv holding a `colab_cli` and a `jupyter_kernel_client`):
the doctor's code path is the one a real install goes through.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from producer import exitcodes
from producer.broker import free_port
from producer.cli import app
from tests.cli.training_repo import QUIET_ENV
from tests.hub import conftest as hub_conftest
from tests.hub.conftest import Hub
from worker.records.fleet import WorkerCard, publish
from worker.records.keys import Keys
from worker.spec import Gpu, queue_for

_client_env = hub_conftest._client_env
make_hub = hub_conftest.make_hub
hub = hub_conftest.hub

OPS = Path(__file__).resolve().parents[2] / "ops"
EMULATOR = OPS / "colab"
if str(OPS) not in sys.path:
    sys.path.insert(0, str(OPS))

from colab_emulator import admin  # noqa: E402
from colab_emulator.faults import set_fault  # noqa: E402

runner = CliRunner()
CLI_CHECKS = ["colab CLI", "colab exec path", "colab login", "redis"]
GPU_CHECKS = [f"worker for {g.value}" for g in Gpu]
HUB_CHECKS = ["hub token file", "hub"]


@pytest.fixture
def token_file(tmp_path: Path, hub: Hub) -> Path:
    path = tmp_path / "secrets" / "hf_token"
    path.parent.mkdir()
    path.write_text(hub.tokens["alice_write"] + "\n")
    path.chmod(0o600)
    return path


@pytest.fixture
def emu_home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "emu"
    yield home
    assert admin.main(["--home", str(home), "kill-all"]) == 0


@pytest.fixture
def env(
    redis_url: str, key_prefix: str, tmp_path: Path, hub: Hub, token_file: Path, emu_home: Path
) -> dict[str, str | None]:
    (tmp_path / "home").mkdir()
    return {
        **QUIET_ENV,
        "COLABQ_REDIS_URL": redis_url,
        "COLABQ_KEY_PREFIX": key_prefix,
        "COLABQ_QUEUE_PREFIX": f"{key_prefix}.",
        "COLABQ_COLAB_BIN": str(EMULATOR),
        "COLABQ_HF_TOKEN_FILE": str(token_file),
        "COLABQ_HF_ENDPOINT": hub.url,
        "COLABQ_BUDGET_FLOOR_UNITS": None,
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": None,
        "COLABQ_ENV_FILE": None,
        "COLAB_EMU_HOME": str(emu_home),
        "COLUMNS": "200",
    }


@pytest.fixture
def workers(redis_client: redis.Redis, key_prefix: str) -> Iterator[list[str]]:
    """A live worker card per GPU type, as running workers keep them."""
    keys, now = Keys(key_prefix), time.time()
    names = []
    for gpu in Gpu:
        name = f"w-{gpu.value.lower()}@host1"
        queue = queue_for(gpu, f"{key_prefix}.")
        publish(
            redis_client, keys, WorkerCard(name, "host1", (gpu.value,), (queue,), None, now, now)
        )
        names.append(name)
    yield names
    for key in redis_client.scan_iter(f"{key_prefix}:*"):
        redis_client.delete(key)


def doctor(env: dict[str, str | None], *args: str) -> tuple[int, dict[str, dict[str, str]], str]:
    """(exit code, the rows by check name, all output) of `colabq doctor --json`."""
    result = runner.invoke(app, ["doctor", "--json", *args], env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    data = json.loads(result.stdout)
    rows = {row["check"]: row for row in data["checks"]}
    assert set(rows["colab CLI"]) == {"check", "status", "detail", "what_to_do"}
    assert data["ok"] is (result.exit_code == 0)
    return result.exit_code, rows, result.output


def statuses(rows: dict[str, dict[str, str]]) -> dict[str, str]:
    return {name: row["status"] for name, row in rows.items()}


def test_a_ready_host_passes_every_check(
    env: dict[str, str | None], workers: list[str], hub: Hub
) -> None:
    code, rows, output = doctor(env)
    assert code == exitcodes.OK
    assert list(rows) == ["settings", *CLI_CHECKS, *GPU_CHECKS, *HUB_CHECKS]
    assert set(statuses(rows).values()) == {"PASS"}, rows
    assert rows["colab CLI"]["detail"] == (
        f"{EMULATOR}: colab CLI 0.7.5 (supported: 0.7.4 and 0.7.5)"
    )
    # The emulator is no google-colab-cli: doctor says what it checked, without failing.
    assert "which has no colab_cli package" in rows["colab exec path"]["detail"]
    assert "balance 100.00 compute units" in rows["colab login"]["detail"]
    assert "the token of alice (write)" in rows["hub"]["detail"]
    for name, gpu in zip(workers, Gpu, strict=True):
        assert name in rows[f"worker for {gpu.value}"]["detail"]
    assert hub.tokens["alice_write"] not in output

    table = runner.invoke(app, ["doctor"], env=env)
    assert table.exit_code == exitcodes.OK, table.output
    assert "Ready: no check fails" in table.stdout
    assert "FAIL" not in table.stdout


def test_without_live_workers_it_warns_and_still_exits_0(env: dict[str, str | None]) -> None:
    code, rows, _ = doctor(env)
    assert code == exitcodes.OK
    for check in GPU_CHECKS:
        assert rows[check]["status"] == "WARN"
        gpu = check.removeprefix("worker for ")
        assert f"colabq worker --gpu {gpu}" in rows[check]["what_to_do"]


def test_a_missing_colab_cli_fails(env: dict[str, str | None], tmp_path: Path) -> None:
    env["COLABQ_COLAB_BIN"] = str(tmp_path / "no-such-colab")
    code, rows, _ = doctor(env)
    assert code == exitcodes.FAILED
    assert rows["colab CLI"]["status"] == "FAIL"
    assert "not found" in rows["colab CLI"]["detail"]
    assert "uv tool install google-colab-cli==0.7.5" in rows["colab CLI"]["what_to_do"]
    assert rows["colab login"]["status"] == "WARN"
    assert rows["redis"]["status"] == "PASS"


@pytest.mark.parametrize("version", ["0.7.3", "0.8.0"])
def test_a_release_colabq_does_not_drive_is_refused_exit_2(
    env: dict[str, str | None], version: str
) -> None:
    env["COLAB_EMU_VERSION"] = version  # what the emulator's `colab version` prints
    code, rows, _ = doctor(env)
    assert code == exitcodes.BAD_INPUT == 2
    row = rows["colab CLI"]
    assert row["status"] == "FAIL"
    assert row["detail"] == (
        f"{EMULATOR}: colab CLI {version} is not supported: colabq drives 0.7.4 and 0.7.5"
    )
    assert row["what_to_do"] == (
        "install the newest with `uv tool install google-colab-cli==0.7.5` (or set "
        f"COLABQ_COLAB_UNLISTED_VERSION={version} to try this one at your own risk)"
    )
    assert rows["colab login"]["status"] == "PASS"  # the account itself is fine
    table = runner.invoke(app, ["doctor"], env=env)
    assert table.exit_code == 2
    [verdict] = [ln for ln in table.stdout.splitlines() if ln.startswith("Refused:")]
    assert f"colab CLI {version} is not supported" in verdict


def test_an_unlisted_release_an_operator_accepts_warns(env: dict[str, str | None]) -> None:
    env["COLAB_EMU_VERSION"] = env["COLABQ_COLAB_UNLISTED_VERSION"] = "0.8.0"
    code, rows, _ = doctor(env)
    assert code == exitcodes.OK
    assert rows["colab CLI"]["status"] == "WARN"
    assert rows["colab CLI"]["detail"].endswith("colab CLI 0.8.0 (UNLISTED)")
    assert "at the operator's risk" in rows["colab CLI"]["what_to_do"]


# A google-colab-cli install as uv or pip makes one: a venv whose `bin/colab` runs
# `colab_cli.cli:main` on the venv's Python. This `colab_cli` hands every command to the
# emulator; its `runtime` imports jupyter_kernel_client at load, as the real one does.
CLI_MAIN = """import os, sys
def main():
    os.execv(sys.executable, [sys.executable, {emulator!r}, *sys.argv[1:]])
"""
LAUNCHER = """#!{python}
import sys
from colab_cli.cli import main
if __name__ == "__main__":
    sys.exit(main())
"""
PINS = (
    "Metadata-Version: 2.1\nName: google-colab-cli\nVersion: 0.7.5\n"
    "Requires-Dist: jupyter-kernel-client==0.9.0\nRequires-Dist: typer>=0.24.1\n"
)


def stand_in_install(root: Path, kernel_client: str, version: str) -> Path:
    """The venv's `colab`, with `kernel_client` as jupyter_kernel_client/__init__.py."""
    venv = root / "colab-venv"
    if not venv.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    [site] = venv.glob("lib/python*/site-packages")
    (site / "colab_cli").mkdir(exist_ok=True)
    (site / "colab_cli" / "__init__.py").write_text("")
    (site / "colab_cli" / "cli.py").write_text(CLI_MAIN.format(emulator=str(EMULATOR)))
    (site / "colab_cli" / "runtime.py").write_text("import jupyter_kernel_client\n")
    (site / "google_colab_cli-0.7.5.dist-info").mkdir(exist_ok=True)
    (site / "google_colab_cli-0.7.5.dist-info" / "METADATA").write_text(PINS)
    (site / "jupyter_kernel_client").mkdir(exist_ok=True)
    (site / "jupyter_kernel_client" / "__init__.py").write_text(kernel_client)
    for old in site.glob("jupyter_kernel_client-*.dist-info"):
        (old / "METADATA").unlink()
        old.rmdir()
    dist = site / f"jupyter_kernel_client-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: jupyter_kernel_client\nVersion: {version}\n"
    )
    launcher = venv / "bin" / "colab"
    launcher.write_text(LAUNCHER.format(python=venv / "bin" / "python"))
    launcher.chmod(0o755)
    return launcher


def test_a_cli_whose_exec_would_crash_on_its_dependency_is_named_with_the_repair(
    env: dict[str, str | None], tmp_path: Path
) -> None:
    # jupyter-kernel-client 0.8.0 has KernelClient but no JupyterSubprotocol, which the CLI's
    # runtime takes when it connects: version and usage answer, every `colab exec` crashes.
    env["COLABQ_COLAB_BIN"] = str(stand_in_install(tmp_path, "class KernelClient: ...\n", "0.8.0"))
    code, rows, _ = doctor(env)
    assert code == exitcodes.FAILED
    assert (rows["colab CLI"]["status"], rows["colab login"]["status"]) == ("PASS", "PASS")
    row = rows["colab exec path"]
    assert row["status"] == "FAIL"
    assert (
        "every `colab exec` would crash: jupyter-kernel-client 0.8.0 has no "
        "JupyterSubprotocol (the CLI pins jupyter-kernel-client==0.9.0)" in row["detail"]
    )
    assert row["what_to_do"] == (
        "reinstall it with the dependencies it pins: "
        "`uv tool install --reinstall google-colab-cli==0.7.5`"
    )
    # The pinned release's names (0.9.0: KernelClient and JupyterSubprotocol.DEFAULT): PASS.
    fixed = "class KernelClient: ...\nclass JupyterSubprotocol:\n    DEFAULT = 'default'\n"
    stand_in_install(tmp_path, fixed, "0.9.0")
    code, rows, _ = doctor(env)
    assert rows["colab exec path"]["status"] == "PASS", rows["colab exec path"]
    assert "imports resolve (jupyter-kernel-client 0.9.0)" in rows["colab exec path"]["detail"]
    # A dependency missing altogether is named as such.
    stand_in_install(tmp_path, "import websocket_client_missing\n", "0.9.0")
    code, rows, _ = doctor(env)
    assert rows["colab exec path"]["status"] == "FAIL"
    assert (
        "its dependency websocket_client_missing is missing or broken"
        in rows["colab exec path"]["detail"]
    )


def test_a_colab_cli_not_logged_in_fails(env: dict[str, str | None], emu_home: Path) -> None:
    set_fault(emu_home, "auth", fail=True)
    code, rows, _ = doctor(env)
    assert code == exitcodes.FAILED
    assert rows["colab CLI"]["status"] == "PASS"
    assert rows["colab login"]["status"] == "FAIL"
    assert "not logged in" in rows["colab login"]["detail"]
    assert "colab usage" in rows["colab login"]["what_to_do"]


def test_an_empty_account_warns(env: dict[str, str | None], emu_home: Path) -> None:
    assert admin.main(["--home", str(emu_home), "set-balance", "0"]) == 0
    code, rows, _ = doctor(env)
    assert rows["colab login"]["status"] == "WARN"
    assert "at or below the floor" in rows["colab login"]["detail"]
    assert code == exitcodes.OK


def test_a_hung_colab_call_is_cut_short(env: dict[str, str | None], emu_home: Path) -> None:
    set_fault(emu_home, "usage", hang=True)
    started = time.monotonic()
    code, rows, _ = doctor(env, "--timeout", "1")
    assert time.monotonic() - started < 15
    assert code == exitcodes.FAILED
    assert rows["colab login"]["status"] == "FAIL"
    assert "ran past 1 s" in rows["colab login"]["detail"]


def test_redis_down_is_a_fail_row(env: dict[str, str | None]) -> None:
    env["COLABQ_REDIS_URL"] = f"redis://:s3cret-pw@127.0.0.1:{free_port()}/0"
    code, rows, output = doctor(env)
    assert code == exitcodes.FAILED
    assert rows["redis"]["status"] == "FAIL"
    assert "cannot reach redis://:***@127.0.0.1:" in rows["redis"]["detail"]
    assert rows["workers"]["status"] == "WARN"
    assert "s3cret-pw" not in output
    assert rows["colab CLI"]["status"] == "PASS"


def test_a_token_file_readable_by_others_fails(
    env: dict[str, str | None], token_file: Path, hub: Hub
) -> None:
    token_file.chmod(0o644)
    code, rows, output = doctor(env)
    assert code == exitcodes.FAILED
    assert rows["hub token file"]["status"] == "FAIL"
    assert "mode 0644" in rows["hub token file"]["detail"]
    assert f"chmod 600 {token_file}" in rows["hub token file"]["what_to_do"]
    assert rows["hub"]["status"] == "WARN"
    assert hub.tokens["alice_write"] not in output


def test_a_token_the_hub_refuses_fails(env: dict[str, str | None], token_file: Path) -> None:
    token_file.write_text("hf_unknown_token_0123456789")
    code, rows, output = doctor(env)
    assert code == exitcodes.FAILED
    assert rows["hub token file"]["status"] == "PASS"
    assert rows["hub"]["status"] == "FAIL"
    assert "refused the token (HTTP 401)" in rows["hub"]["detail"]
    assert "hf_unknown_token_0123456789" not in output


def test_a_read_only_token_warns(env: dict[str, str | None], token_file: Path, hub: Hub) -> None:
    token_file.write_text(hub.tokens["alice_read"])
    _, rows, _ = doctor(env)
    assert rows["hub"]["status"] == "WARN"
    assert "read-only" in rows["hub"]["detail"]


# --- the settings files -----------------------------------------------------------------------


def settings_rows(env: dict[str, str | None]) -> tuple[list[dict[str, str]], str]:
    result = runner.invoke(app, ["doctor", "--json", "--timeout", "2"], env=env)
    assert "Traceback" not in result.output
    rows = [r for r in json.loads(result.stdout)["checks"] if r["check"] == "settings"]
    return rows, result.output


def git_repo(path: Path) -> Path:
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def test_a_dot_env_holding_a_password_in_a_git_repository_warns(
    env: dict[str, str | None], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = git_repo(tmp_path / "training-repo")
    dot_env = repo / ".env"
    dot_env.write_text("COLABQ_REDIS_URL=redis://:pa55word-x@redis.internal:6379/0\n")
    dot_env.chmod(0o600)
    monkeypatch.chdir(repo)
    rows, output = settings_rows(env)
    assert [r["status"] for r in rows] == ["PASS", "WARN"], rows
    assert rows[0]["detail"].startswith("the environment and no settings file (")
    assert rows[1]["detail"] == (
        f"{dot_env} holds COLABQ_REDIS_URL in the git repository {repo}; git does not ignore "
        "it: `git add` would commit it"
    )
    user_file = tmp_path / "home" / ".config" / "colabq" / "settings.env"
    assert rows[1]["what_to_do"].startswith(f"move its lines to {user_file} (chmod 600)")
    assert "pa55word-x" not in output

    (repo / ".gitignore").write_text(".env\n")
    rows, _ = settings_rows(env)
    assert "git ignores it, but every copy of the folder carries it" in rows[1]["detail"]


@pytest.mark.parametrize("case", ["no password", "not in a repository"])
def test_a_dot_env_that_leaks_nothing_does_not_warn(
    env: dict[str, str | None], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    if case == "no password":
        folder = git_repo(tmp_path / "training-repo")
        text = "COLABQ_REDIS_URL=redis://redis.internal:6379/0\nCOLABQ_KEY_PREFIX=team\n"
    else:
        folder = tmp_path / "plain"
        folder.mkdir()
        text = "COLABQ_REDIS_URL=redis://:pa55word-x@redis.internal:6379/0\n"
    (folder / ".env").write_text(text)
    monkeypatch.chdir(folder)
    rows, _ = settings_rows(env)
    assert [r["status"] for r in rows] == ["PASS"], rows


def test_the_settings_row_names_the_files_read(env: dict[str, str | None], tmp_path: Path) -> None:
    user_file = tmp_path / "home" / ".config" / "colabq" / "settings.env"
    user_file.parent.mkdir(parents=True)
    user_file.write_text("COLABQ_JANITOR_INTERVAL_S=30\n")
    user_file.chmod(0o600)
    rows, _ = settings_rows(env)
    assert rows == [{"check": "settings", "status": "PASS", "what_to_do": "",
                     "detail": f"the environment and {user_file} (0600)"}]  # fmt: skip
