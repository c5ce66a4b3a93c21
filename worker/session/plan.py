"""What colabq sends to the VM for one job: the one bundle it uploads, the launch cell that starts
the wrapper detached, and the attach cell that follows its console.

Pure: built from the spec, the settings, the job's sentinel nonce and the segment; the runner
uploads and executes what this returns. Paths on the VM are under /content, the kernel's working
directory on Colab and in the emulator alike: colabq's own files are `VmFile`s in the wrapper's
argv, which the launch cell puts under its own cwd; every other item (a user's value among them)
reaches the wrapper exactly as it is, filled into the cell as a Python literal (`cells.fill`).
"""

from __future__ import annotations

import io
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path

from worker.errors import refuse
from worker.records import ids
from worker.session.cells import VM_DIR as VM_DIR  # the plan's callers read them here
from worker.session.cells import attach_source as attach_source
from worker.session.cells import fill
from worker.session.gitroute import GitRoute, NoGitRoute, route
from worker.settings import Settings
from worker.spec import JobSpec

WRAPPER = "colab-job.sh"
SYNC = "colabq_sync.py"
TREE = "colabq_tree.py"  # the uploader's reading of a sync path: no symbolic link followed
SCRIPT = "colab-user-job.sh"
CODE = "colabq_code.py"  # the code stage: the repository at its commit, its uv environment
ENVCHECK = "colabq_envcheck.py"  # the known breakages of that environment, and their repairs
JOBUSER = "colabq_jobuser.sh"  # the job's unprivileged user on the VM (sourced by the wrapper)
GPUIDLE = "colabq_gpuidle.py"  # the GPU idle watch (a job with gpu_idle_s only)
INPUTS = "colabq_inputs.py"  # the job's declared inputs, downloaded before it starts
KNOWN_HOSTS = "colabq_known_hosts"  # the common forges' ssh host keys, for a deploy-key fetch
# The name of the token's one copy on the VM (not a secret itself): the wrapper reads it into
# its memory and deletes it at once; only its uploader and downloader processes get the token,
# and the job a copy of its own only if its spec asks for `hf_token`.
UPLOAD_TOKEN = ".colabq-upload-token"  # noqa: S105
# The worker host's git read credential or deploy key, for a `code: git` job only (the one its
# route uses, `gitroute`): moved out of /content by the wrapper at once, read by git (and ssh)
# alone, deleted once the fetch is over.
GIT_CREDENTIALS = ".colabq-git-credentials"
GIT_SSH_KEY = ".colabq-git-ssh-key"
BUNDLE = "colabq-bundle.tar"


class VmFile(str):
    """One of colabq's files in /content, as the wrapper's argv names it: it reads (and
    compares) as `{content}/NAME`; the launch cell puts its own folder before NAME, and before
    no other item of the argv."""

    @property
    def name(self) -> str:
        return self.removeprefix("{content}/")


def on_vm(name: str) -> VmFile:
    return VmFile("{content}/" + name)


def remote_job_dir(job_id: str) -> str:
    """The job's folder on the VM (a command argument): only a job id makes one."""
    return f"/content/colab-jobs/{ids.job_id(job_id) or refuse('job id', 'a job', job_id)}"


def remote_heartbeat(job_id: str) -> str:
    """The wrapper's heartbeat file, read with `colab download` while no exec is attached."""
    return f"{remote_job_dir(job_id)}/run/heartbeat"


def bundle_members(
    script: Path, token_file: Path | None, git: GitRoute | None = None, *, inputs: bool = False
) -> list[tuple[Path, str]]:
    """(local file, name on the VM) of everything the job needs there. Data never travels this
    way: inputs are staged and declared (the VM downloads them, `inputs`: the job has some),
    the code is fetched or staged. The token (the job's, `worker.session.hubtoken`) goes once,
    for the wrapper. The git credential or deploy key of the job's route (`git_route_for`)
    goes once, for the fetch."""
    members = [(VM_DIR / WRAPPER, WRAPPER), (VM_DIR / SYNC, SYNC), (VM_DIR / TREE, TREE)]
    members.append((script, SCRIPT))
    members += [(VM_DIR / CODE, CODE), (VM_DIR / ENVCHECK, ENVCHECK), (VM_DIR / JOBUSER, JOBUSER)]
    members.append((VM_DIR / GPUIDLE, GPUIDLE))
    if inputs:
        members.append((VM_DIR / INPUTS, INPUTS))
    if token_file is not None:
        members.append((token_file, UPLOAD_TOKEN))
    if git is not None and git.credentials is not None:
        members.append((git.credentials, GIT_CREDENTIALS))
    if git is not None and git.ssh_key is not None:
        members += [(git.ssh_key, GIT_SSH_KEY), (VM_DIR / KNOWN_HOSTS, KNOWN_HOSTS)]
    return members


def git_route_for(spec: JobSpec, settings: Settings) -> GitRoute | None:
    """How this host's VM fetches the job's code, if it fetches it with git (`gitroute`). An
    ssh remote this host has no way to fetch goes as it is: the pre-allocation check refuses
    it before anything is allocated."""
    if spec.code is None or spec.code.mode != "git":
        return None
    try:
        return route(spec.code.remote, settings.git_credentials_file, settings.git_ssh_key_file)
    except NoGitRoute:
        return GitRoute(spec.code.remote)


def write_bundle(target: Path, members: list[tuple[Path, str]]) -> Path:
    """One uncompressed tar of `members`, created mode 0600 (it may hold the token): one upload
    instead of one per file. The caller deletes it once uploaded."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for local, name in members:
            data = local.read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o600
            tar.addfile(info, io.BytesIO(data))
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(fd, "wb") as f:
        f.write(buf.getvalue())
    return target


@dataclass(frozen=True)
class Segment:
    """One run of the job on one VM: the first (0), or a restart after a lost VM."""

    number: int = 0
    ttl_s: float | None = None  # None: the spec's own TTL
    resume_uri: str | None = None  # None: the spec's own resume_from
    # Added to the job's environment on the VM (its tracker run's id: names and URLs, never a
    # secret), through the launch cell rather than the wrapper's command line.
    env: tuple[tuple[str, str], ...] = ()
    # The GPU type allocated for this segment: the launch cell checks the VM has it ("" skips).
    gpu: str = ""


# What `nvidia-smi --query-gpu=name` says on a Colab VM of each type contains this.
GPU_NAMES = {"T4": "T4", "L4": "L4", "G4": "RTX PRO 6000", "A100": "A100", "H100": "H100"}


def wrapper_argv(
    spec: JobSpec, settings: Settings, nonce: str, seg: Segment = Segment()
) -> list[str]:
    """The wrapper's command line on the VM: names, paths and numbers; never a secret."""
    ttl = spec.ttl_s if seg.ttl_s is None else seg.ttl_s
    args = [
        "--job", spec.job_id, "--nonce", nonce, "--ttl", str(max(int(ttl), 1)),
        "--sync-interval", str(int(spec.sync_interval_s)),
        "--dest-kind", spec.artifact.kind, "--dest-repo", spec.artifact.repo,
        "--dest-type", spec.artifact.repo_type, "--prefix", spec.artifact.prefix,
        "--upload-attempts", str(settings.vm_upload_attempts),
        "--upload-backoff-s", str(settings.vm_upload_backoff_s),
        "--segment", str(seg.number), "--heartbeat-s", f"{settings.vm_heartbeat_s:g}",
        "--release-hold-s", f"{settings.release_hold_s:g}",
    ]  # fmt: skip
    if settings.hf_token_file is not None or settings.hf_token_dir is not None:
        args += ["--token-file", on_vm(UPLOAD_TOKEN)]  # if one applies, it is there
    for name in spec.secrets:
        args += ["--job-secret", name]
    if spec.gpu_idle_s is not None:
        args += [
            "--gpu-idle",
            f"{spec.gpu_idle_s:g}",
            "--gpu-idle-below",
            f"{spec.gpu_idle_below:g}",
        ]
    if endpoint := settings.hub_endpoint():
        args += ["--hf-endpoint", endpoint]
    resume = seg.resume_uri or spec.resume_from
    if resume:
        args += ["--resume", resume]
    for p in spec.sync_paths:
        args += ["--sync", p]
    args += code_args(spec, settings)
    # The VM downloads each input before the job starts (COLABQ_INPUT_<NAME>, its path); the
    # job's script still gets them as the seed gave them, `--hub-input NAME=URI`.
    declared = [f"{name}={uri}" for name, uri in spec.hub_inputs.items()]
    for item in declared:
        args += ["--input", item]
    job = ["bash", on_vm(SCRIPT), *[a for d in declared for a in ("--hub-input", d)]]
    return ["bash", on_vm(WRAPPER), *args, "--", *job]


def code_args(spec: JobSpec, settings: Settings) -> list[str]:
    """The wrapper's options for the job's code: where it comes from (the URL its route
    fetches), the exact commit, the folder the job starts in, uv and the repairs opted in; the
    credential or deploy key as a file's path."""
    code = spec.code
    if code is None:
        return []
    args = ["--code-mode", code.mode, "--code-commit", code.commit]
    git = git_route_for(spec, settings)
    if git is not None:
        args += ["--code-remote", git.url]
    else:
        args += ["--code-snapshot", code.snapshot]
    if code.subdir:
        args += ["--code-subdir", code.subdir]
    if code.uv:
        args.append("--code-uv")
    for name in code.repairs:
        args += ["--code-repair", name]
    if git is not None and git.credentials is not None:
        args += ["--git-credentials-file", on_vm(GIT_CREDENTIALS)]
    if git is not None and git.ssh_key is not None:
        args += ["--git-ssh-key-file", on_vm(GIT_SSH_KEY)]
    return args


def launch_source(spec: JobSpec, settings: Settings, nonce: str, seg: Segment = Segment()) -> str:
    """The launch cell: unpack the bundle, start the wrapper detached, once."""
    argv = wrapper_argv(spec, settings, nonce, seg)
    files = [i for i, item in enumerate(argv) if isinstance(item, VmFile)]
    items = [item.name if isinstance(item, VmFile) else str(item) for item in argv]
    values = {"JOB": spec.job_id, "NONCE": nonce, "ARGV": items, "ON_VM": files,
              "BUNDLE": BUNDLE, "GPU_NAME": GPU_NAMES.get(seg.gpu, "")}  # fmt: skip
    # The spec's own env (a sweep's values), then the segment's (colabq's names win).
    return fill("launch.py.tmpl", {**values, "ENV": {**spec.env, **dict(seg.env)}})
