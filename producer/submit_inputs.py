"""What one job's submit options (a sweep point's `SubmitOptions`) become for the layers that
check and build it: the `SubmitRequest` (`producer/submit.py`, with `--resume-from` resolved to
the checkpoint it names), the `PreflightInputs` (the gate) and the key of the jobs that share
one pre-flight, and the `CodeAsked` (`producer/code/`).

Pure translation: the checks are the layers' own. `colabq submit`
(`producer/commands/submit.py`) runs them in order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from producer.code.ship import CodeAsked
from worker.errors import UserInputError

if TYPE_CHECKING:
    from producer.jobfile import SubmitOptions
    from producer.preflight.gate import PreflightInputs
    from producer.submit import SubmitRequest
    from worker.records.ledger import Ledger


def submit_request(
    o: SubmitOptions,
    waivers: tuple[str, ...],
    resumes: dict[str, ResumePoint],
    connect: Callable[[], Ledger],
) -> SubmitRequest:
    """The request `build_spec` reads; `--resume-from JOB` resolved once per job id (in
    `resumes`), through the ledger `connect` gives."""
    from producer.jobfile import finite
    from producer.submit import SubmitRequest

    finite("--epochs", o.epochs)
    prefix, resume = o.prefix, None
    if o.resume_from:
        if o.resume_from not in resumes:
            # A job id resolves to its checkpoint and prefix: segments of one run share a prefix.
            ledger = None if o.resume_from.startswith("hf://") else connect()
            resumes[o.resume_from] = resolve_resume(o.resume_from, ledger)
        resume = resumes[o.resume_from]
        if prefix is None and resume.prefix is not None:
            prefix = resume.prefix
    return SubmitRequest(
        script=o.script or Path(),
        run_name=o.name or "",
        gpu=o.gpu,
        high_mem=o.high_mem,
        wall=o.wall,
        idle=o.idle,
        ttl=o.ttl,
        sync_interval=o.sync_interval,
        gpu_idle=o.gpu_idle,
        sync_paths=o.sync,
        hub_inputs=o.hub_input,
        hub_repo=o.hub_repo,
        repo_type=o.repo_type,
        prefix=prefix,
        local_store=o.local_store,
        expect=o.expect,
        budget=o.budget,
        commit=o.commit,
        idempotency_key=o.idempotency_key,
        waivers=waivers,
        resume_from=resume.uri if resume else None,
        max_restarts=o.max_restarts,
        env=o.env,
        notify=o.notify,
        capacity_wait=o.capacity_wait,
        secrets=o.secrets,
    )


def code_asked(o: SubmitOptions) -> CodeAsked:
    return CodeAsked(o.code, o.repo_dir, o.commit, tuple(o.include), tuple(o.repairs))


def preflight_inputs(o: SubmitOptions, waivers: tuple[str, ...]) -> PreflightInputs:
    from producer.preflight.gate import PreflightInputs

    script = o.script or Path()
    return PreflightInputs(
        run_name=o.name or "",
        repo=o.repo_dir,
        config=o.config,
        reference=o.reference,
        explain=o.explain,
        launch_script=o.launch_script or script.resolve(),
        hub_inputs=o.hub_input,
        epochs=o.epochs,
        seconds_per_epoch=o.seconds_per_epoch,
        wall=o.wall,
        waive=waivers,
        ttl=o.ttl,
        gpu_idle=o.gpu_idle,
        code=o.code,
        commit=o.commit if o.code else None,
        include=o.include,
    )


def preflight_group(inputs: PreflightInputs) -> tuple[Any, ...]:
    """What the pre-flight's verdicts depend on, apart from the run name (checked per job)."""
    d = dataclasses.asdict(inputs)
    d.pop("run_name")
    return tuple((k, repr(v)) for k, v in sorted(d.items()))


@dataclass(frozen=True)
class ResumePoint:
    uri: str
    prefix: str | None  # the resumed run's prefix: segments of one run share it


def resolve_resume(value: str, ledger: Ledger | None) -> ResumePoint:
    """`--resume-from`: an hf:// URI as given, or a job id -> that job's checkpoint on the Hub
    (its first sync path under its prefix). Never a guess: a job without one is an error."""
    if value.startswith("hf://"):
        return ResumePoint(value, None)
    if ledger is None or "://" in value or "/" in value:
        raise UserInputError(f"--resume-from {value!r}: give a job id or an hf:// URI.")
    rec = ledger.get(ledger.find_by_prefix(value))
    dest = rec.spec.artifact
    if dest.kind != "hf" or not rec.spec.sync_paths:
        raise UserInputError(
            f"Job {rec.job_id} kept no checkpoint on the Hub to resume from: pass "
            "--resume-from hf://OWNER/REPO/PATH naming the checkpoint."
        )
    kind = "datasets/" if dest.repo_type == "dataset" else ""
    name = Path(rec.spec.sync_paths[0]).name
    path = "/".join(p for p in (dest.prefix, name) if p)
    return ResumePoint(f"hf://{kind}{dest.repo}/{path}", dest.prefix)
