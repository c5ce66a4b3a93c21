"""The pre-flight as the commands use it: `colabq preflight` (`producer/commands/preflight.py`)
and the gate in front of `colabq submit`.

Owns turning command-line options into `PreflightOptions` (KEY=VALUE pairs, the wall cap, the
quiet windows of the `quiet_windows` setting, the intended config when none is named), the remote
checker the CLI uses, the copyable submit command, and `gate`, which refuses a submission while a
check fails that was not waived by name. The checks themselves are `producer.preflight`'s
(the code shipped and its environment: `producer.code`'s, loaded only when code is shipped).

Start-up matters here: nothing on this module's import path may import Celery, Redis or
huggingface_hub (the `hf://` checker, `hub_inputs.py`, builds the Hub store only when the
first `hf://` URI is checked), nor pydantic-settings: the command's one settings object is a
`LazySettings`, built only when a setting is needed (quiet windows named somewhere, an `hf://`
input, an ETA measured from the ledger). The checks library is imported inside the functions
that use it, and rich (the report's table) only when the report is drawn, not for `--json`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from producer.clictx import LazySettings
from worker.errors import UserInputError
from worker.utils import pairs, parse_duration_s

if TYPE_CHECKING:
    from rich.console import Console

    from producer.code.survey import CodeState
    from producer.preflight.remote import RemoteStatus
    from producer.preflight.report import Finding, Report

    HfChecker = Callable[[str], RemoteStatus]

# Stands in for the config when none is named or found, so the paths check says it is missing.
NO_CONFIG = Path("(no config: pass --config)")
JOB_SCRIPT_PLACEHOLDER = "JOB_SCRIPT.sh"


class PreflightFailed(UserInputError):
    """A check failed and was not waived: nothing was enqueued. `failed` names the checks (the
    names that waive them), `findings` what each blocking check saw and what to do next, and
    `report` the whole pre-flight report when one was run (a sweep's run-name check has none)."""

    def __init__(
        self,
        failed: Sequence[str],
        reasons: Sequence[str] = (),
        *,
        findings: Sequence[Finding] = (),
        report: Report | None = None,
    ) -> None:
        waive = " ".join(f"--waive {name}" for name in failed)
        names = ", ".join(failed)
        if reasons:  # what failed, said in the one line (the code and environment checks)
            message = (
                f"Pre-flight failed ({names}): {'; '.join(reasons)}. Nothing was enqueued; fix "
                f"it, or waive it by name ({waive}); a waiver is recorded on the job."
            )
        else:
            message = (
                f"Pre-flight failed ({names}): nothing was enqueued. Fix the failing checks, or "
                f"waive them by name ({waive}); a waiver is recorded on the job."
            )
        super().__init__(message)
        self.failed = tuple(failed)
        self.findings = tuple(findings) if findings else (report.blocking if report else ())
        self.report = report


@dataclass(frozen=True)
class PreflightInputs:
    """The pre-flight options as typed; relative paths are relative to `repo`."""

    run_name: str
    repo: Path = Path(".")
    config: Path | None = None
    reference: Path | None = None
    explain: Sequence[str] = ()  # KEY=REASON
    launch_script: Path | None = None
    hub_inputs: Sequence[str] = ()  # NAME=URI
    epochs: float | None = None
    seconds_per_epoch: float | None = None
    wall: str = "12h"
    waive: Sequence[str] = ()
    ttl: str | None = None  # the job's own time limit; None: what the wall cap leaves
    code: str | None = None  # git or snapshot: the repository's commit is shipped
    commit: str | None = None  # the commit to ship (with `code`; default: HEAD)
    include: Sequence[str] = ()  # untracked files added to a snapshot
    gpu_idle: str | None = None  # submit's --gpu-idle: the ETA check suggests none then


@dataclass(frozen=True)
class Checked:
    """A report and what it was run on: the config (picked when none was named) and the script."""

    report: Report
    config: Path | None  # as the user would type it: relative to the repo when inside it
    launch_script: Path | None


def quiet_windows_from(settings: LazySettings) -> tuple[str, ...]:
    """The `quiet_windows` setting (COLABQ_QUIET_WINDOWS in the environment or .env); the
    settings are built only when a source may set it, else there are none."""
    return settings().quiet_windows if settings.may_set("quiet_windows") else ()


def _ledger_measurer(settings: LazySettings) -> Callable[[str], float | None]:
    """`eta_history.ledger_measurer`, imported when the ETA check first asks for a measure."""

    def measure(reference: str) -> float | None:
        from producer.eta_history import ledger_measurer

        return ledger_measurer(settings)(reference)

    return measure


def wall_cap_s(text: str) -> float:
    try:
        return parse_duration_s(text)
    except ValueError as exc:
        raise UserInputError(f"--wall: {exc}.") from None


def positive_number(option: str, value: float | None) -> float | None:
    """A measured quantity as typed (Typer parses `nan`, `inf` and negatives as floats): None,
    or a finite number above 0."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UserInputError(
            f"{option} {value:g}: must be a finite number above 0 (or leave it out: the ETA "
            "check then says what it could not measure)."
        )
    return value


def time_limit_s(inputs: PreflightInputs) -> float:
    """The job's own time limit: `--ttl`, or what the wall cap leaves (as submit computes it)."""
    from worker.timelimit import default_ttl_s

    if inputs.ttl is None:
        return default_ttl_s(wall_cap_s(inputs.wall))
    try:
        return parse_duration_s(inputs.ttl)
    except ValueError as exc:
        raise UserInputError(f"--ttl: {exc}.") from None


def find_intended_config(repo: Path, now: datetime) -> Path | None:
    """The newest config under configs/, recipes/, experiments/: what was just edited."""
    from producer.preflight.discovery import find_config_candidates

    candidates = find_config_candidates(repo, now=now)
    return candidates[0].path if candidates else None


def _relative(path: Path, base: Path) -> Path:
    absolute = path if path.is_absolute() else base / path
    try:
        return Path(os.path.relpath(absolute, base)) if absolute.is_relative_to(base) else path
    except ValueError:
        return path


def build_hf_checker(settings: LazySettings, hub_inputs: Sequence[str] = ()) -> HfChecker:
    """The `hf://` checker; the Hub store behind it is built when the first URI is checked.
    An `hf://` input named on the command line (NAME=URI) will need the Hub's settings, so they
    are checked now: an invalid one stops the command in one line, not as a skipped check."""
    from producer.preflight.hub_inputs import hub_checker

    if any(item.partition("=")[2].strip().startswith("hf://") for item in hub_inputs):
        settings().hub_endpoint()
    return hub_checker(settings)


def run_checks(
    inputs: PreflightInputs,
    *,
    env: Mapping[str, str],
    now: datetime,
    hf: HfChecker | None = None,
    measure_epoch_s: Callable[[str], float | None] | None = None,
    quiet_windows: Sequence[str] = (),
    code: CodeState | None = None,
) -> Checked:
    """Run the seven checks; bad options raise `UserInputError`, a bad repository never does
    (but a repository that cannot ship the `code` asked for does). `env` is the environment the
    job's checks read (trackers, credentials), not settings. `code`: the repository already
    surveyed for `inputs.code` (a submit surveys it once), else it is surveyed here."""
    from producer.preflight.remote import build_remote_checker
    from producer.preflight.report import Report, validate_waivers
    from producer.preflight.run import PreflightOptions, find_launch_script, run_preflight

    positive_number("--epochs", inputs.epochs)
    positive_number("--seconds-per-epoch", inputs.seconds_per_epoch)
    repo = inputs.repo.resolve()
    if not repo.is_dir():
        raise UserInputError(f"--repo-dir {inputs.repo}: not a folder (the training repository).")
    config, picked = inputs.config, False
    if config is None:
        found = find_intended_config(repo, now)
        config, picked = (found, True) if found is not None else (NO_CONFIG, False)
    opts = PreflightOptions(
        repo=repo,
        config=config,
        run_name=inputs.run_name,
        reference=inputs.reference,
        explain=pairs("--explain", inputs.explain, "KEY=REASON"),
        launch_script=inputs.launch_script,
        hub_inputs=pairs("--hub-input", inputs.hub_inputs, "NAME=URI"),
        epochs=inputs.epochs,
        seconds_per_epoch=inputs.seconds_per_epoch,
        wall_cap_s=wall_cap_s(inputs.wall),
        time_limit_s=time_limit_s(inputs),
        gpu_idle=inputs.gpu_idle is not None,
        quiet_windows=tuple(quiet_windows),
        waive=validate_waivers(inputs.waive),
    )
    report = run_preflight(
        opts,
        now=now,
        env=env,
        remote_checker=build_remote_checker(hf=hf),
        measure_epoch_s=measure_epoch_s,
    )
    findings = [_explain_config(f, config, picked=picked) for f in report.findings]
    report = Report.build([*findings, *_code_findings(inputs, code)], report.waived)
    shown = None if config is NO_CONFIG else _relative(config, repo)
    return Checked(report, shown, find_launch_script(repo, inputs.launch_script))


def _code_findings(inputs: PreflightInputs, code: CodeState | None) -> list[Finding]:
    """The `code` and `environment` findings: of the survey given, else one made here."""
    from producer.code.checks import code_finding, environment_finding

    if code is None and inputs.code is not None:
        from producer.code.survey import CodeRequest, survey

        request = CodeRequest(inputs.code, inputs.repo, inputs.commit, tuple(inputs.include))
        code = survey(request)
    return [code_finding(code, inputs.config), environment_finding(code)]


def _explain_config(finding: Finding, config: Path, *, picked: bool) -> Finding:
    from producer.preflight.discovery import CONFIG_ROOTS
    from producer.preflight.report import CheckName, Finding, Verdict

    if finding.check is not CheckName.CONFIG_DIFF or (config is not NO_CONFIG and not picked):
        return finding
    if picked:
        return dataclasses.replace(
            finding, saw=f"no --config given; checked the newest config: {finding.saw}"
        )
    return Finding(
        CheckName.CONFIG_DIFF,
        Verdict.FAIL,
        "no --config given, and no config modified in the last 30 days under "
        + ", ".join(f"{r}/" for r in CONFIG_ROOTS),
        "name the run's config with --config PATH (a job with no config file can "
        "--waive config-diff --waive paths)",
    )


@dataclass(frozen=True)
class SubmitTarget:
    """The submit options pre-flight does not check but the copyable command needs."""

    gpu: str = "T4"
    hub_repo: str | None = None
    local_store: Path | None = None


def submit_command(inputs: PreflightInputs, checked: Checked, target: SubmitTarget) -> str:
    """The `colabq submit …` line that re-runs these checks and enqueues the job."""
    cwd, repo = Path.cwd(), inputs.repo.resolve()
    script = job_script(checked.launch_script)
    shown_script = str(_relative(script, cwd)) if script is not None else JOB_SCRIPT_PLACEHOLDER
    argv = ["colabq", "submit", shown_script, "--name", inputs.run_name]
    if target.gpu.upper() != "T4":
        argv += ["--gpu", target.gpu.upper()]
    if inputs.wall != "12h":
        argv += ["--wall", inputs.wall]
    if inputs.ttl is not None:
        argv += ["--ttl", inputs.ttl]
    if target.hub_repo:
        argv += ["--hub-repo", target.hub_repo]
    if target.local_store is not None:
        argv += ["--local-store", str(target.local_store)]
    if repo != cwd.resolve():
        argv += ["--repo-dir", str(inputs.repo)]
    if checked.config is not None and (inputs.config is not None or inputs.code is not None):
        # A picked config of a job that ships no code is left for submit to pick again: named,
        # it would have to reach the VM (the `code` check).
        argv += ["--config", str(checked.config)]
    if inputs.reference is not None:
        argv += ["--reference", str(inputs.reference)]
    if inputs.launch_script is not None and script is None:
        argv += ["--launch-script", str(inputs.launch_script)]
    if inputs.code is not None:
        argv += ["--code", inputs.code] + (["--commit", inputs.commit] if inputs.commit else [])
        argv += _repeated("--include", inputs.include)
    argv += _repeated("--explain", inputs.explain) + _repeated("--hub-input", inputs.hub_inputs)
    if inputs.epochs is not None:
        argv += ["--epochs", f"{inputs.epochs:g}"]
    if inputs.seconds_per_epoch is not None:
        argv += ["--seconds-per-epoch", f"{inputs.seconds_per_epoch:g}"]
    argv += _repeated("--waive", sorted(set(inputs.waive)))
    return shlex.join(argv)


def job_script(launch_script: Path | None) -> Path | None:
    """The launch script, if it can be the job's bash script (a Python file cannot)."""
    return launch_script if launch_script is not None and launch_script.suffix == ".sh" else None


def _repeated(option: str, values: Sequence[str]) -> list[str]:
    return [part for value in values for part in (option, value)]


def report_data(report: Report, command: str | None, config: Path | None) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(report.to_json())
    data["submit_command"] = command if report.ok else None
    data["config"] = None if config is None else str(config)
    return data


def gate(
    inputs: PreflightInputs,
    *,
    console: Console | None,
    as_json: bool,
    env: Mapping[str, str] | None = None,
    now: datetime | None = None,
    hf: HfChecker | None = None,
    measure_epoch_s: Callable[[str], float | None] | None = None,
    settings: LazySettings | None = None,
    code: CodeState | None = None,
) -> Checked:
    """Run the pre-flight for `colabq submit`; raise `PreflightFailed` unless it is clean.

    The report is printed on `console` (as JSON on stdout with `as_json`, where only a failed
    one is printed); with no console, nothing is printed (the Python API). `env` defaults to
    this process's environment, `now` to the clock, `hf` to the wired checker, `measure_epoch_s`
    to none (the ETA is then measured only from what the user gives), `settings` to the
    settings of this process (built when needed).
    """
    env = dict(os.environ) if env is None else env
    settings = LazySettings() if settings is None else settings
    hf = build_hf_checker(settings, inputs.hub_inputs) if hf is None else hf
    checked = run_checks(
        inputs,
        env=env,
        now=now or datetime.now(UTC),
        hf=hf,
        measure_epoch_s=measure_epoch_s,
        quiet_windows=quiet_windows_from(settings),
        code=code,
    )
    report = checked.report
    if console is not None:
        _show(checked, console, as_json=as_json)
    if not report.ok:
        raise PreflightFailed(report.failed_checks, failure_reasons(report), report=report)
    return checked


def _show(checked: Checked, console: Console, *, as_json: bool) -> None:
    report = checked.report
    if as_json:
        if not report.ok:
            print(json.dumps(report_data(report, None, checked.config)))
    elif report.ok:
        from rich.text import Text

        from producer.preflight.render import render_report

        console.print(render_report(report, show_details=False))
        console.print(Text(f"report digest {report.digest}", style="dim"), soft_wrap=True)
    else:
        from producer.preflight.render import print_report

        print_report(console, report)


def failure_reasons(report: Report) -> list[str]:
    """What the blocking `code` and `environment` findings saw, and what to do, for the one
    line that refuses the submission (the other checks' reasons are the report's table)."""
    from producer.preflight.report import CheckName

    shipped = (CheckName.CODE, CheckName.ENVIRONMENT)
    return [f"{f.saw}: {f.next_action}" for f in report.blocking if f.check in shipped]
