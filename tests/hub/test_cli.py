"""Command lines: the `hf` CLI (as colabq's VM-side wrapper may call it) against the server, and
the server's own entry points (`python ops/hubserver`, `python -m hubserver`)."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from .conftest import OPS, Hub

HF = Path(sys.executable).parent / "hf"


def _hf(hub: Hub, token: str, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HF_ENDPOINT": hub.url,
        "HF_TOKEN": token,
        "HF_HUB_DISABLE_XET": "1",
        "HF_HOME": str(home),
        "HF_HUB_DISABLE_UPDATE_CHECK": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    return subprocess.run(
        [str(HF), *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_hf_upload_folder_and_file(hub: Hub, tmp_path: Path) -> None:
    folder = tmp_path / "outputs"
    (folder / "ckpt").mkdir(parents=True)
    (folder / "ckpt" / "weights.bin").write_bytes(os.urandom(10 * 1024 * 1024 + 7))
    (folder / "train.log").write_text("done\n")
    (tmp_path / "exit_code").write_text("0\n")
    token = hub.tokens["alice_write"]

    folder_run = _hf(
        hub, token, "upload", "alice/cli-run", str(folder), "outputs", "--repo-type", "model",
        home=tmp_path / "home",
    )  # fmt: skip
    file_run = _hf(
        hub, token, "upload", "alice/cli-run", str(tmp_path / "exit_code"), "status/exit_code",
        "--repo-type", "model", home=tmp_path / "home",
    )  # fmt: skip

    assert folder_run.returncode == 0, folder_run.stderr
    assert file_run.returncode == 0, file_run.stderr
    files = set(hub.api().list_repo_files("alice/cli-run"))
    assert {"outputs/ckpt/weights.bin", "outputs/train.log", "status/exit_code"} <= files
    local = hub.api().hf_hub_download(
        "alice/cli-run", "outputs/ckpt/weights.bin", cache_dir=tmp_path
    )
    assert Path(local).read_bytes() == (folder / "ckpt" / "weights.bin").read_bytes()
    assert hub.requests("/_lfs/upload/") and not hub.requests("xet")
    assert all(r["token_leaks"] == [] for r in hub.admin.requests())


def test_hf_upload_with_read_token_fails(hub: Hub, tmp_path: Path) -> None:
    hub.api().create_repo("alice/cli-run")
    (tmp_path / "f.txt").write_text("x")

    run = _hf(
        hub, hub.tokens["alice_read"], "upload", "alice/cli-run", str(tmp_path / "f.txt"), "f.txt",
        home=tmp_path / "home",
    )  # fmt: skip

    assert run.returncode != 0
    assert "403" in run.stderr + run.stdout
    assert hub.api().list_repo_files("alice/cli-run") == [".gitattributes"]


@pytest.mark.parametrize(
    ("argv", "cwd"),
    [
        ([sys.executable, str(OPS / "hubserver")], None),
        ([sys.executable, "-m", "hubserver"], OPS),
    ],
    ids=["directory", "module"],
)
def test_server_entry_points_print_url_and_serve(
    tmp_path: Path, argv: list[str], cwd: Path | None
) -> None:
    proc = subprocess.Popen(
        [*argv, "--data", str(tmp_path / "data"), "--port", "0"],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first_line = proc.stdout.readline().strip()
        url = first_line.removeprefix("hubserver listening on ")
        with urllib.request.urlopen(f"{url}/_admin/health", timeout=5) as response:
            health = response.read()
    finally:
        proc.terminate()
        proc.wait(timeout=10)

    assert first_line.startswith("hubserver listening on http://127.0.0.1:")
    assert health == b'{"ok": true}'
    assert proc.returncode == 0
    assert (tmp_path / "data" / "objects").is_dir()
