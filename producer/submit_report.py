"""What `colabq submit` prints: the plan of a dry run, and the jobs it enqueued.

One `--json` shape for one job or a sweep, so that a script reads both the same way:
`{"jobs": [{"job_id", "run", "created", "state", "queue", "live_workers", "swept", "code",
"time_limit_s", "wall_cap_s", ...}, ...], "count": N, "warnings": [...]}` ("code": what the VM
fetches and runs, `producer.code.ship.Shipping.describe`, or null) (a dry run:
`{"dry_run": true, "jobs": [...], "count": N}`, without job ids: nothing was recorded). The
table names every job's id. Building and enqueueing the jobs is `producer/commands/submit.py`'s.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from producer.clictx import out, queue_for
from worker.timelimit import limits_json, limits_text

if TYPE_CHECKING:
    from producer.code.ship import Shipping
    from producer.submit import Enqueued
    from producer.sweep import Point
    from worker.records.ledger import Ledger
    from worker.spec import JobSpec


def _swept(point: Point) -> str:
    return " ".join(f"{k}={v}" for k, v in point.values)


def plan_rows(
    points: Sequence[Point], specs: Sequence[JobSpec], queue_prefix: str, shipping: Shipping
) -> list[dict[str, Any]]:
    """One row per job of a dry run, in the sweep's order: its `--json` objects."""
    return [
        {
            "run": s.run_name,
            "gpu": s.gpu.value,
            "queue": queue_for(s.gpu, queue_prefix),
            "swept": dict(p.values),
            "idempotency_key": s.idempotency_key,
            "code": shipping.describe(s),
            **limits_json(s),
        }
        for p, s in zip(points, specs, strict=True)
    ]


def print_plan(
    points: Sequence[Point],
    specs: Sequence[JobSpec],
    queue_prefix: str,
    shipping: Shipping,
    *,
    as_json: bool,
) -> None:
    from rich.table import Table

    rows = plan_rows(points, specs, queue_prefix, shipping)
    if as_json:
        print(json.dumps({"dry_run": True, "jobs": rows, "count": len(rows)}))
        return
    table = Table(title=f"plan: {len(rows)} job(s)", title_justify="left", box=None)
    for col in ("run", "gpu", "limits", "swept"):
        table.add_column(col, overflow="ellipsis", no_wrap=True)
    for p, s in zip(points, specs, strict=True):
        table.add_row(s.run_name, s.gpu.value, limits_text(s), _swept(p) or "-")
    out.print(table)
    for line in shipping.plan_lines(specs):
        out.print(line, markup=False, soft_wrap=True)
    out.print(f"Dry run: {len(rows)} job(s) checked; nothing was enqueued.")


def job_rows(
    points: Sequence[Point],
    specs: Sequence[JobSpec],
    results: Sequence[Enqueued],
    served: dict[str, int],
    queue_prefix: str,
    shipping: Shipping,
) -> list[dict[str, Any]]:
    """One row per job, in the sweep's order: the `--json` objects and the table's rows."""

    def one(point: Point, spec: JobSpec, res: Enqueued) -> dict[str, Any]:
        queue = queue_for(spec.gpu, queue_prefix)
        return {
            "job_id": res.job_id,
            "run": spec.run_name,
            "created": res.created,
            "state": res.state.value,
            "waivers": list(spec.waivers),
            "preflight_digest": spec.preflight_digest,
            "tracker": spec.tracker,
            "queue": queue,
            "live_workers": served.get(queue, 0),
            "swept": dict(point.values),
            "code": shipping.describe(spec),
            **limits_json(spec),
        }

    return [one(p, s, r) for p, s, r in zip(points, specs, results, strict=True)]


def print_enqueued(
    points: Sequence[Point],
    specs: Sequence[JobSpec],
    results: Sequence[Enqueued],
    served: dict[str, int],
    warnings: list[str],
    queue_prefix: str,
    ledger: Ledger,
    shipping: Shipping,
    *,
    as_json: bool,
) -> None:
    from producer.clictx import err

    rows = job_rows(points, specs, results, served, queue_prefix, shipping)
    sweep = sweep_of(results, ledger)
    if as_json:
        doc = {"jobs": rows, "count": len(rows), "warnings": warnings, "sweep": sweep or None}
        print(json.dumps(doc))
        return
    for w in warnings:
        err.print(f"colabq: warning: {w}", markup=False, highlight=False)
    for line in shipping.plan_lines(specs):
        out.print(line, markup=False, soft_wrap=True)
    if len(results) == 1:
        _print_one(results[0], specs[0], queue_prefix, ledger)
        return
    _print_sweep(points, specs, results, rows)
    if sweep:
        out.print(
            f"Sweep {sweep}: colabq status --sweep {sweep}; colabq cancel --sweep {sweep} "
            "cancels every point not over.",
            markup=False,
        )


def sweep_of(results: Sequence[Enqueued], ledger: Ledger) -> str:
    """The id of the sweep the new jobs were recorded in, '' for none."""
    new = [r.job_id for r in results if r.created]
    if len(results) < 2 or not new:
        return ""
    raw = ledger.r.hget(ledger.keys.job(new[0]), "sweep")
    return raw.decode() if raw else ""


def _print_one(res: Enqueued, spec: JobSpec, queue_prefix: str, ledger: Ledger) -> None:
    from worker.states import JobState

    queue = queue_for(spec.gpu, queue_prefix)
    if res.created:
        out.print(f"Enqueued job [bold]{res.job_id}[/] on {queue} ({spec.run_name}).")
        if earlier := ledger.get(res.job_id).get("retry_of"):
            out.print(f"Submitted again: job {earlier} of this spec ended without success.")
        out.print(
            f"The job may run for its {limits_text(spec)}; past that it ends TIMED_OUT.",
            markup=False,
        )
        out.print(f"Follow it with: colabq logs -f {res.job_id}")
    elif res.state is JobState.SUCCEEDED:
        out.print(
            f"Already submitted as job [bold]{res.job_id}[/], which SUCCEEDED; nothing "
            "enqueued. To run it again, pass --idempotency-key with a new value."
        )
    else:
        out.print(
            f"Already submitted as job [bold]{res.job_id}[/] ({res.state.name}, not over); "
            f"nothing enqueued. Follow it with: colabq logs -f {res.job_id}"
        )


def _print_sweep(
    points: Sequence[Point],
    specs: Sequence[JobSpec],
    results: Sequence[Enqueued],
    rows: list[dict[str, Any]],
) -> None:
    from rich.table import Table

    new = sum(r.created for r in results)
    again = len(results) - new
    queues = sorted({str(r["queue"]) for r in rows})
    table = Table(box=None)
    for col in ("id", "run", "state", "swept"):
        table.add_column(col, no_wrap=True, overflow="ellipsis" if col == "run" else "fold")
    for p, s, r in zip(points, specs, results, strict=True):
        state = "enqueued" if r.created else f"submitted before ({r.state.name})"
        table.add_row(r.job_id, s.run_name, state, _swept(p) or "-")
    out.print(table)
    tail = f"; {again} were submitted before (nothing sent for them)." if again else "."
    out.print(f"Enqueued {new} job(s) of a {len(results)}-job sweep on {', '.join(queues)}{tail}")
    if len({(s.ttl_s, s.wall_cap_s) for s in specs}) == 1:
        out.print(f"Each may run for its {limits_text(specs[0])}.", markup=False)
    out.print("Watch them with: colabq status --watch")
