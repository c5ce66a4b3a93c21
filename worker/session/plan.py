"""What colabq sends to the VM for one job: the files, where they go, and the driver's code.

Pure: built from the spec, the settings and the job's sentinel nonce; the runner uploads and
executes what this returns. Paths on the VM are under /content, the kernel's working directory
on Colab and in the emulator alike; the driver expands `{content}` from its own cwd.
"""

from __future__ import annotations

import json
from pathlib import Path

from worker.settings import Settings
from worker.spec import JobSpec

VM_DIR = Path(__file__).parents[1] / "vm"
REMOTE_WRAPPER = "/content/colab-job.sh"
REMOTE_SYNC = "/content/colabq_sync.py"
REMOTE_SCRIPT = "/content/colab-user-job.sh"
# Paths of the token files on the VM (not secrets themselves).
REMOTE_UPLOAD_TOKEN = "/content/.colabq-upload-token"  # noqa: S105
REMOTE_JOB_TOKEN = "/content/.colabq-job-token"  # noqa: S105


def remote_job_dir(job_id: str) -> str:
    return f"/content/colab-jobs/{job_id}"


def uploads(script: Path, token_file: Path | None) -> list[tuple[Path, str]]:
    """(local file, VM path) for every upload, in order. Data never travels this way: inputs are
    staged on the Hub and declared. The token goes twice: one copy the wrapper's uploader
    consumes, one for the job's own downloads."""
    files = [
        (VM_DIR / "colab-job.sh", REMOTE_WRAPPER),
        (VM_DIR / "colabq_sync.py", REMOTE_SYNC),
        (script, REMOTE_SCRIPT),
    ]
    if token_file is not None:
        files += [(token_file, REMOTE_UPLOAD_TOKEN), (token_file, REMOTE_JOB_TOKEN)]
    return files


def wrapper_argv(spec: JobSpec, settings: Settings, nonce: str) -> list[str]:
    """The wrapper's command line on the VM: names, paths and numbers; never a secret."""
    args = [
        "--job", spec.job_id, "--nonce", nonce, "--ttl", str(int(spec.ttl_s)),
        "--sync-interval", str(int(spec.sync_interval_s)),
        "--dest-kind", spec.artifact.kind, "--dest-repo", spec.artifact.repo,
        "--dest-type", spec.artifact.repo_type, "--prefix", spec.artifact.prefix,
        "--upload-attempts", str(settings.vm_upload_attempts),
        "--upload-backoff-s", str(settings.vm_upload_backoff_s),
    ]  # fmt: skip
    if settings.hf_token_file is not None:
        args += ["--token-file", "{content}/" + Path(REMOTE_UPLOAD_TOKEN).name]
        args += ["--job-token-file", "{content}/" + Path(REMOTE_JOB_TOKEN).name]
    if settings.hf_endpoint:
        args += ["--hf-endpoint", settings.hf_endpoint]
    if spec.resume_from:
        args += ["--resume", spec.resume_from]
    for p in spec.sync_paths:
        args += ["--sync", p]
    job = ["bash", "{content}/" + Path(REMOTE_SCRIPT).name, *spec.hub_inputs.values()]
    return ["bash", Path(REMOTE_WRAPPER).name, *args, "--", *job]


def driver_source(spec: JobSpec, settings: Settings, nonce: str) -> str:
    """The Python the exec client sends with `colab exec -f`: it runs the wrapper."""
    template = (VM_DIR / "driver.py.tmpl").read_text()
    argv = json.dumps(wrapper_argv(spec, settings, nonce))
    return template.replace("__ARGV__", argv).replace("__NONCE__", nonce)
