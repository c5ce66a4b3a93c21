"""One submission, from what was asked to the jobs recorded and sent, printing nothing itself.

`colabq submit` (`producer/commands/submit.py`) and the Python API (`colabq.Client.submit`) run
these same steps, so both validate, pre-flight and enqueue alike: `points_of` turns a job file
or a script and the options given (which win over the file's keys) into one `Point` per job,
`build_specs` validates and pre-flights every point (raising before anything is written),
`enqueue_points` records every job in one atomic step and sends them. What is said while it runs
(each pre-flight report, the output repo checked, a sweep point's failed run name) goes to a
`Voice`: the CLI's prints, the API's `QUIET` says nothing (it returns what it would have said).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from producer.clictx import _connect, queue_for
from worker.errors import UserInputError

if TYPE_CHECKING:
    from rich.console import Console

    from producer.code.ship import Shipping
    from producer.preflight.gate import Checked
    from producer.preflight.report import Report
    from producer.submit import Enqueued
    from producer.sweep import Point
    from worker.gate.wire import Dep
    from worker.records.ledger import Ledger
    from worker.settings import Settings
    from worker.spec import JobSpec


def _silent(_: str) -> None:
    pass


@dataclass(frozen=True)
class Voice:
    """What a submission says while it runs, in its order: each pre-flight report (on `console`;
    as JSON on stdout with `as_json`; none without a console), the first output repo checked
    (`output_repo`) and a sweep point's failed run name (`run_name_failed`, what the check saw)."""

    console: Console | None = None
    as_json: bool = False
    output_repo: Callable[[str], None] = _silent
    run_name_failed: Callable[[str], None] = _silent


QUIET = Voice()


@dataclass(frozen=True)
class Source:
    """Where the options came from, as an error names them: the command line names options
    (`--wall`), the API its arguments (`wall`)."""

    name: str = "command line"
    given: str = "flags"  # the job file's keys overridden: "Job file 'x' with flags"


def points_of(
    target: Path,
    typed: Mapping[str, Any],
    *,
    grid: Mapping[str, Sequence[Any]] | None = None,
    sweep_flags: Sequence[str] = (),
    source: Source = Source(),
) -> list[Point]:
    """The jobs asked: `target` is a job file (.yaml, .yml, .json) or the job's script; `typed`
    the options given (they win over a job file's keys); `grid` (KEY: values) and `sweep_flags`
    (KEY=V1,V2) a sweep added to the file's."""
    from producer.jobfile import is_job_file, merge_flags, read_job_file, validate
    from producer.pipeline import read_steps, step_points
    from producer.sweep import Point, expand, parse_sweep_flags

    steps = read_steps(target) if is_job_file(target) else None
    if is_job_file(target):
        fields, file_grid = read_job_file(target)
        where = f"Job file '{target}'" + (f" with {source.given}" if typed else "")
    else:
        fields, file_grid, where = {"script": str(target)}, {}, source.name
    if steps is not None:
        return step_points(fields, steps, typed, where, bool(file_grid or grid or sweep_flags))
    fields = merge_flags(fields, typed)
    swept = {**file_grid, **(grid or {}), **parse_sweep_flags(sweep_flags)}
    opts = validate(fields, where)
    if opts.script is None:
        raise UserInputError(f"{where}: name the job's script (script: train.sh).")
    if not opts.name:
        raise UserInputError("Name the run: --name (or name: in the job file).")
    if opts.max_parallel and not swept:
        raise UserInputError(
            f"{where}: max_parallel caps a sweep's points: add a sweep (--sweep KEY=V1,V2)."
        )
    return expand(opts.model_dump(), swept, where) if swept else [Point(opts, ())]


@dataclass(frozen=True)
class Built:
    """Every point's spec, pre-flighted, and what was checked on the way."""

    specs: list[JobSpec]
    reports: list[Report] = field(default_factory=list)  # one per distinct pre-flight run
    output_repos: list[str] = field(default_factory=list)  # what each destination's check saw


def build_specs(
    points: Sequence[Point], settings: Settings, shipping: Shipping, voice: Voice = QUIET
) -> Built:
    """Every point's spec, pre-flighted. Raises before anything is written."""
    import dataclasses
    import os

    from producer.clictx import LazySettings
    from producer.eta_history import epochs_of, ledger_measurer
    from producer.job_tracker import job_tracker
    from producer.preflight.gate import gate
    from producer.preflight.report import validate_waivers
    from producer.submit import build_spec, check_output_repo, destination_of
    from producer.submit_inputs import code_asked, preflight_group, preflight_inputs
    from producer.submit_inputs import submit_request as request_of

    specs: list[JobSpec] = []
    gates: dict[tuple[Any, ...], Checked] = {}
    repos_seen: dict[str, str] = {}
    trackers: dict[tuple[Any, ...], tuple[str | None, str | None]] = {}
    resumes: dict[str, Any] = {}
    lazy = LazySettings(settings)
    measurer = ledger_measurer(lazy)
    _one_commit(points)
    # Every point is validated before any is pre-flighted: a bad value is said at once.
    built = []
    for point in points:
        waivers = tuple(sorted(validate_waivers(point.options.waive)))
        request = request_of(point.options, waivers, resumes, lambda: _connect(settings))
        asked = code_asked(point.options)
        if (state := shipping.survey(asked)) is not None:
            code = shipping.code_spec(state, asked, destination_of(request))
            request = dataclasses.replace(request, code=code)
        built.append((point.options, waivers, build_spec(request), state))
    for o, waivers, spec, state in built:
        inputs = preflight_inputs(o, waivers)
        group = preflight_group(inputs)
        if group not in gates:
            gates[group] = gate(
                inputs,
                console=voice.console,
                as_json=voice.as_json,
                measure_epoch_s=measurer,
                settings=lazy,
                code=state,
            )
        else:
            _check_run_name(o.name or "", waivers, voice)
        checked = gates[group]
        dest = spec.artifact.model_dump_json()
        if dest not in repos_seen:
            repos_seen[dest] = check_output_repo(spec, settings)
            if len(repos_seen) == 1:
                voice.output_repo(repos_seen[dest])
        key = (o.tracker, o.repo_dir.resolve(), checked.launch_script)
        if key not in trackers:
            trackers[key] = job_tracker(o.tracker, key[1], checked.launch_script, os.environ)
        tracker_name, tracker_project = trackers[key]
        # The digest changes with the clock (the ETA's end time), so it must not enter the
        # idempotency key: it joins the spec after `build_spec` computed the key.
        spec = spec.model_copy(
            update={
                "preflight_digest": checked.report.digest,
                "config": checked.config.as_posix() if checked.config else None,
                "epochs": epochs_of(o.repo_dir.resolve(), checked.config, o.epochs),
                "tracker": tracker_name,
                "tracker_project": tracker_project,
            }
        )
        specs.append(spec)
    return Built(specs, [c.report for c in gates.values()], list(repos_seen.values()))


def _one_commit(points: Sequence[Point]) -> None:
    """A sweep ships one commit: with code, every point names the same repository and commit."""
    from producer.submit_inputs import code_asked

    asked = {code_asked(p.options) for p in points}
    if len(asked) > 1 and any(a.code for a in asked):
        raise UserInputError(
            "A sweep ships one commit: commit and repo_dir cannot be swept with code: (submit "
            "each commit on its own)."
        )


def _check_run_name(name: str, waivers: Sequence[str], voice: Voice) -> None:
    """The run-name check of a sweep point whose other checks already ran."""
    from producer.preflight.gate import PreflightFailed
    from producer.preflight.report import CheckName, Verdict
    from producer.preflight.run_name import check_run_name

    finding = check_run_name(name)
    if finding.verdict is Verdict.FAIL and CheckName.RUN_NAME.value not in waivers:
        voice.run_name_failed(finding.saw)
        raise PreflightFailed([CheckName.RUN_NAME.value], findings=[finding])


@dataclass(frozen=True)
class Sent:
    """Each job's outcome (new, or submitted before), live workers per queue, and warnings."""

    results: list[Enqueued]
    served: dict[str, int]
    warnings: list[str]
    sweep: str = ""  # the sweep's id (`colabq status --sweep`), '' for a single job


def enqueue_points(
    points: Sequence[Point],
    specs: Sequence[JobSpec],
    settings: Settings,
    ledger: Ledger,
    after: Sequence[Sequence[Dep]],
) -> Sent:
    """Have the gate record every job in one atomic step and send the new ones
    (`producer.submit.enqueue_many`: one request for the whole batch), each after its `after`
    (`resolve_points_after`)."""
    from producer.code.reach import check_reach, needs_reach
    from producer.submit import enqueue_many
    from worker.records.fleet import count_serving, live_workers

    if needs_reach(specs):  # an ssh remote: can a live worker fetch it on a VM?
        check_reach(specs, live_workers(ledger.r, ledger.keys), settings.queue_prefix)
    o = points[0].options
    batch = enqueue_many(
        specs, ledger, allow_same_run=o.allow_same_run, sweep=any(p.values for p in points),
        max_parallel=o.max_parallel or 0, after=after, wait_s=settings.gate_wait_s,
    )  # fmt: skip
    queues = sorted({queue_for(s.gpu, settings.queue_prefix) for s in specs})
    served = {q: count_serving(ledger.r, ledger.keys, q) for q in queues}
    warnings = [
        f"no live worker serves {q}: the job waits until one starts (`colabq workers`)"
        for q, n in served.items()
        if not n
    ]
    sweep = batch.sweep if any(p.values for p in points) else ""
    return Sent(batch.jobs, served, warnings, sweep)


def resolve_points_after(points: Sequence[Point], ledger: Ledger) -> list[tuple[Dep, ...]]:
    """Every point's dependencies (`resolve_after`), before anything is checked or written: a
    wrong one is said at once."""
    return [resolve_after(p.options.after, ledger) for p in points]


def resolve_after(values: Sequence[str], ledger: Ledger) -> tuple[Dep, ...]:
    """A point's dependencies, each job named by its whole id (a unique prefix is enough; an
    unknown one is refused in one line), `@N` kept. Under ACLs another user's job is refused in
    one line here (the gate refuses it too: what it checks is what counts)."""
    from worker.errors import ColabqError
    from worker.flow.deps import parse_after
    from worker.gate.wire import Dep
    from worker.people.guard import is_operator
    from worker.people.owners import after_refusal, is_mine

    deps = []
    for d in parse_after(list(values)):
        if d.job.startswith("@"):
            deps.append(Dep(job=d.job, cond=d.cond))
            continue
        try:
            job_id = ledger.find_by_prefix(d.job)
        except (ColabqError, LookupError):
            raise UserInputError(
                f"--after {d.job}: no such job (or several start so): name it by its id, "
                "as `colabq status` lists it."
            ) from None
        if not is_mine(ledger.identity, job_id) and not is_operator(ledger):
            raise UserInputError(after_refusal(job_id))
        deps.append(Dep(job=job_id, cond=d.cond))
    return tuple(deps)
