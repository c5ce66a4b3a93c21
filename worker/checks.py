"""Pre-allocation checks on the worker host (invariant 1): nothing billable happens before these.

The job script is written to the job's folder and must pass `bash -n`; the bundled wrapper must
too; the generated driver must compile; `colab version` must be the one colabq speaks; the balance
must cover the job's budget (colabq never buys units).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from worker.colab import ColabDriver
from worker.errors import BudgetExceeded, ColabVersionMismatch, SpecError
from worker.spec import MAX_SCRIPT_BYTES, JobSpec


def bash_syntax_error(path: Path) -> str | None:
    res = subprocess.run(
        ["bash", "-n", str(path)], capture_output=True, text=True, timeout=30, check=False
    )
    return None if res.returncode == 0 else (res.stderr.strip() or f"bash -n exit {res.returncode}")


def check_job_files(spec: JobSpec, workdir: Path, vm_dir: Path, driver_source: str) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    script = workdir / "colab-user-job.sh"
    script.write_text(spec.script)
    if script.stat().st_size > MAX_SCRIPT_BYTES:
        raise SpecError("script", "over 1 MiB")
    if err := bash_syntax_error(script):
        raise SpecError("script", f"bash -n failed: {err}")
    if err := bash_syntax_error(vm_dir / "colab-job.sh"):
        raise SpecError("wrapper", f"the bundled wrapper fails bash -n: {err}")
    try:
        compile(driver_source, "driver.py", "exec")
    except SyntaxError as exc:
        raise SpecError("driver", f"the generated driver does not compile: {exc}") from None
    (workdir / "driver.py").write_text(driver_source)


def check_cli_version(driver: ColabDriver, expected: str) -> None:
    got = driver.version()
    if got != expected:
        raise ColabVersionMismatch(f"colab version is {got!r}; colabq needs exactly {expected}.")


def check_budget(driver: ColabDriver, budget_units: float) -> float:
    usage = driver.usage()
    if usage.balance_units < budget_units:
        raise BudgetExceeded(usage.balance_units, budget_units)
    return usage.balance_units
