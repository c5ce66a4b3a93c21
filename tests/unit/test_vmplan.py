"""What goes to the VM: files and argv carry names and paths, never a token's value."""

from __future__ import annotations

from pathlib import Path

from tests.factories import make_spec
from worker.session import plan as vmplan
from worker.settings import Settings

TOKEN = "hf_do_not_leak_0123456789"


def test_token_is_uploaded_twice_as_a_file_and_never_named_by_value(tmp_path: Path) -> None:
    token = tmp_path / "tok"
    token.write_text(TOKEN)
    settings = Settings(hf_token_file=token, hf_endpoint="http://127.0.0.1:1")
    spec = make_spec(
        resume_from="hf://a/b/ckpt", hub_inputs={"DATA": "hf://a/d"}, sync_paths=("ckpt",)
    )
    ups = vmplan.uploads(tmp_path / "job.sh", settings.hf_token_file)
    assert [r for local, r in ups if local == token] == [
        vmplan.REMOTE_UPLOAD_TOKEN, vmplan.REMOTE_JOB_TOKEN,
    ]  # fmt: skip
    argv = vmplan.wrapper_argv(spec, settings, "n1")
    src = vmplan.driver_source(spec, settings, "n1")
    assert TOKEN not in " ".join(argv) and TOKEN not in src
    assert argv[argv.index("--resume") + 1] == "hf://a/b/ckpt"
    assert argv[argv.index("--hf-endpoint") + 1] == "http://127.0.0.1:1"
    assert argv[-1] == "hf://a/d"  # inputs reach the job script as its own arguments
    compile(src, "driver.py", "exec")


def test_without_a_token_nothing_secret_is_uploaded(tmp_path: Path) -> None:
    ups = vmplan.uploads(tmp_path / "job.sh", None)
    assert [r for _, r in ups] == [vmplan.REMOTE_WRAPPER, vmplan.REMOTE_SYNC, vmplan.REMOTE_SCRIPT]
    argv = vmplan.wrapper_argv(make_spec(), Settings(), "n1")
    assert "--token-file" not in argv and "--resume" not in argv
