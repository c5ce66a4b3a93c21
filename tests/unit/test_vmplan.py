"""What goes to the VM: one bundle (the token inside it once, as a file), cells and argv that
carry names and paths, never a token's value; the job gets a copy only if it asks by name."""

from __future__ import annotations

import stat
import tarfile
from pathlib import Path

from tests.factories import make_spec
from worker.session import plan as vmplan
from worker.settings import Settings
from worker.spec import CodeSpec

TOKEN = "hf_do_not_leak_0123456789"


def test_the_bundle_holds_the_token_once_as_a_file_and_the_cells_never_name_it(
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
        vmplan.TREE,
        vmplan.SCRIPT,
        vmplan.CODE,
        vmplan.ENVCHECK,
        vmplan.JOBUSER,
        vmplan.GPUIDLE,
        vmplan.UPLOAD_TOKEN,
    ]
    argv = vmplan.wrapper_argv(spec, settings, "n1")
    assert argv[argv.index("--token-file") + 1] == "{content}/" + vmplan.UPLOAD_TOKEN
    assert "--job-secret" not in argv  # the job asked for no secret
    asks = vmplan.wrapper_argv(make_spec(secrets=("hf_token",)), settings, "n1")
    assert asks[asks.index("--job-secret") + 1] == "hf_token"
    launch = vmplan.launch_source(spec, settings, "n1")
    attach = vmplan.attach_source(spec.job_id, "n1", 123)
    for text in (" ".join(argv), launch, attach):
        assert TOKEN not in text
    assert argv[argv.index("--resume") + 1] == "hf://a/b/ckpt"
    assert argv[argv.index("--hf-endpoint") + 1] == "http://127.0.0.1:1"
    # The VM downloads each input; the job script still gets them as `--hub-input NAME=URI`.
    assert argv[argv.index("--input") + 1] == "DATA=hf://a/d"
    assert argv[-2:] == ["--hub-input", "DATA=hf://a/d"]
    compile(launch, "launch.py", "exec")
    compile(attach, "attach.py", "exec")
    assert "OFFSET = 123" in attach


def test_without_a_token_nothing_secret_is_bundled(tmp_path: Path) -> None:
    members = vmplan.bundle_members(tmp_path / "job.sh", None)
    assert [name for _, name in members] == [
        vmplan.WRAPPER, vmplan.SYNC, vmplan.TREE, vmplan.SCRIPT, vmplan.CODE, vmplan.ENVCHECK,
        vmplan.JOBUSER, vmplan.GPUIDLE,
    ]  # fmt: skip
    assert all(local.is_file() for local, name in members if name != vmplan.SCRIPT)
    argv = vmplan.wrapper_argv(make_spec(), Settings(), "n1")
    assert "--token-file" not in argv and "--resume" not in argv
    assert "--gpu-idle" not in argv  # off by default
    idle = vmplan.wrapper_argv(make_spec(gpu_idle_s=1200.0), Settings(), "n1")
    assert idle[idle.index("--gpu-idle") :][:4] == ["--gpu-idle", "1200", "--gpu-idle-below", "5"]
    # With per-user or per-destination tokens the wrapper looks for the one the host chose.
    argv = vmplan.wrapper_argv(make_spec(), Settings(hf_token_dir=tmp_path), "n1")
    assert "--token-file" in argv


def test_a_restart_segment_resumes_from_its_checkpoint_with_what_is_left(tmp_path: Path) -> None:
    spec = make_spec(sync_paths=("ckpt",))
    seg = vmplan.Segment(2, ttl_s=600.0, resume_uri="file:///store/run/ckpt")
    argv = vmplan.wrapper_argv(spec, Settings(), "n1", seg)
    assert argv[argv.index("--segment") + 1] == "2"
    assert argv[argv.index("--ttl") + 1] == "600"
    assert argv[argv.index("--resume") + 1] == "file:///store/run/ckpt"


SHA = "0123456789abcdef0123456789abcdef01234567"
GIT_SECRET = "ghp_do_not_leak_0123456789"


def test_a_git_job_gets_the_credential_as_a_file_and_its_code_by_name(tmp_path: Path) -> None:
    """The wrapper learns where the code comes from, the exact commit, the folder, uv and the
    repairs opted in; the host's git credential travels in the bundle, once, for a git job only,
    and no command line or cell names its value."""
    creds = tmp_path / "git-credentials"
    creds.write_text(f"https://colabq:{GIT_SECRET}@github.com\n")
    settings = Settings(git_credentials_file=creds)
    code = CodeSpec(mode="git", commit=SHA, remote="https://github.com/o/r.git", subdir="train",
                    uv=True, repairs=("torch-cuda", "pytest"))  # fmt: skip
    spec = make_spec(code=code, commit=SHA)
    route = vmplan.git_route_for(spec, settings)
    assert route is not None and route.credentials == creds and route.ssh_key is None
    members = vmplan.bundle_members(tmp_path / "job.sh", None, route)
    assert members[-1] == (creds, vmplan.GIT_CREDENTIALS)
    argv = vmplan.wrapper_argv(spec, settings, "n1")
    tail = argv[argv.index("--code-mode") : argv.index("--")]
    assert tail == [
        "--code-mode", "git", "--code-commit", SHA, "--code-remote", "https://github.com/o/r.git",
        "--code-subdir", "train", "--code-uv", "--code-repair", "torch-cuda",
        "--code-repair", "pytest", "--git-credentials-file", "{content}/.colabq-git-credentials",
    ]  # fmt: skip
    for text in (" ".join(argv), vmplan.launch_source(spec, settings, "n1")):
        assert GIT_SECRET not in text


def test_a_snapshot_job_or_a_job_without_code_gets_no_git_credential(tmp_path: Path) -> None:
    settings = Settings(git_credentials_file=tmp_path / "git-credentials")
    snap = CodeSpec(mode="snapshot", commit=SHA, snapshot=f"file:///store/code/{SHA}.tar.gz")
    spec = make_spec(code=snap, commit=SHA)
    assert vmplan.git_route_for(spec, settings) is None
    argv = vmplan.wrapper_argv(spec, settings, "n1")
    assert argv[argv.index("--code-snapshot") + 1] == snap.snapshot
    assert "--git-credentials-file" not in argv and "--code-uv" not in argv
    plain = make_spec()
    assert vmplan.git_route_for(plain, settings) is None
    assert not any(a.startswith("--code") for a in vmplan.wrapper_argv(plain, settings, "n1"))


def test_an_ssh_remote_goes_over_https_where_the_host_holds_a_credential_for_its_host(
    tmp_path: Path,
) -> None:
    """`git@github.com:o/r.git` with a github.com credential: the VM fetches the https URL with
    the credential; with a deploy key instead, the remote as it is, the key and the known hosts
    in the bundle (the key once, as a file), `--git-ssh-key-file` a path; never the key's text."""
    creds = tmp_path / "git-credentials"
    creds.write_text(f"https://colabq:{GIT_SECRET}@github.com\n")
    key = tmp_path / "deploy-key"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nsecret-key-text\n")
    ssh = CodeSpec(mode="git", commit=SHA, remote="git@github.com:o/r.git")
    spec = make_spec(code=ssh, commit=SHA)

    both = Settings(git_credentials_file=creds, git_ssh_key_file=key)
    argv = vmplan.wrapper_argv(spec, both, "n1")
    assert argv[argv.index("--code-remote") + 1] == "https://github.com/o/r.git"
    assert "--git-credentials-file" in argv and "--git-ssh-key-file" not in argv

    keyed = Settings(git_ssh_key_file=key)
    argv = vmplan.wrapper_argv(spec, keyed, "n1")
    assert argv[argv.index("--code-remote") + 1] == "git@github.com:o/r.git"
    assert argv[argv.index("--git-ssh-key-file") + 1] == "{content}/" + vmplan.GIT_SSH_KEY
    assert "--git-credentials-file" not in argv
    members = vmplan.bundle_members(
        tmp_path / "job.sh", None, vmplan.git_route_for(spec, keyed), inputs=True
    )
    names = [name for _, name in members]
    assert names[-3:] == [vmplan.INPUTS, vmplan.GIT_SSH_KEY, vmplan.KNOWN_HOSTS]
    assert dict((n, p) for p, n in members)[vmplan.GIT_SSH_KEY] == key
    assert all(p.is_file() for p, n in members if n in (vmplan.INPUTS, vmplan.KNOWN_HOSTS))
    for text in (" ".join(argv), vmplan.launch_source(spec, keyed, "n1")):
        assert "secret-key-text" not in text and GIT_SECRET not in text

    # Neither: the remote goes as it is, with nothing; the pre-allocation check refuses it.
    argv = vmplan.wrapper_argv(spec, Settings(), "n1")
    assert argv[argv.index("--code-remote") + 1] == "git@github.com:o/r.git"
    assert not any(a.startswith("--git-") for a in argv)
