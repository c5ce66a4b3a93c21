"""What goes to the VM: one bundle (the token inside it twice, as files), cells and argv that
carry names and paths, never a token's value."""

from __future__ import annotations

import stat
import tarfile
from pathlib import Path

from tests.factories import make_spec
from worker.session import plan as vmplan
from worker.settings import Settings

TOKEN = "hf_do_not_leak_0123456789"


def test_the_bundle_holds_the_token_twice_as_files_and_the_cells_never_name_it(
    tmp_path: Path,
) -> None:
    token = tmp_path / "tok"
    token.write_text(TOKEN)
    script = tmp_path / "job.sh"
    script.write_text("echo hi\n")
    settings = Settings(hf_token_file=token, hf_endpoint="http://127.0.0.1:1")
    spec = make_spec(
        resume_from="hf://a/b/ckpt", hub_inputs={"DATA": "hf://a/d"}, sync_paths=("ckpt",)
    )
    bundle = vmplan.write_bundle(
        tmp_path / vmplan.BUNDLE, vmplan.bundle_members(script, settings.hf_token_file)
    )
    assert stat.S_IMODE(bundle.stat().st_mode) == 0o600  # it holds the token
    with tarfile.open(bundle) as tar:
        names = tar.getnames()
        assert tar.extractfile(vmplan.UPLOAD_TOKEN).read().decode() == TOKEN  # type: ignore[union-attr]
    assert names == [
        vmplan.WRAPPER,
        vmplan.SYNC,
        vmplan.SCRIPT,
        vmplan.UPLOAD_TOKEN,
        vmplan.JOB_TOKEN,
    ]
    argv = vmplan.wrapper_argv(spec, settings, "n1")
    launch = vmplan.launch_source(spec, settings, "n1")
    attach = vmplan.attach_source(spec.job_id, "n1", 123)
    for text in (" ".join(argv), launch, attach):
        assert TOKEN not in text
    assert argv[argv.index("--resume") + 1] == "hf://a/b/ckpt"
    assert argv[argv.index("--hf-endpoint") + 1] == "http://127.0.0.1:1"
    assert argv[-1] == "hf://a/d"  # inputs reach the job script as its own arguments
    compile(launch, "launch.py", "exec")
    compile(attach, "attach.py", "exec")
    assert "OFFSET = 123" in attach


def test_without_a_token_nothing_secret_is_bundled(tmp_path: Path) -> None:
    members = vmplan.bundle_members(tmp_path / "job.sh", None)
    assert [name for _, name in members] == [vmplan.WRAPPER, vmplan.SYNC, vmplan.SCRIPT]
    argv = vmplan.wrapper_argv(make_spec(), Settings(), "n1")
    assert "--token-file" not in argv and "--resume" not in argv


def test_a_restart_segment_resumes_from_its_checkpoint_with_what_is_left(tmp_path: Path) -> None:
    spec = make_spec(sync_paths=("ckpt",))
    seg = vmplan.Segment(2, ttl_s=600.0, resume_uri="file:///store/run/ckpt")
    argv = vmplan.wrapper_argv(spec, Settings(), "n1", seg)
    assert argv[argv.index("--segment") + 1] == "2"
    assert argv[argv.index("--ttl") + 1] == "600"
    assert argv[argv.index("--resume") + 1] == "file:///store/run/ckpt"
