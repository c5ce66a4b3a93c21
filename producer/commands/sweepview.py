"""`colabq status --sweep ID` and `colabq cancel --sweep ID`: a sweep's points as one unit.

Owns reading a sweep's points (`worker.flow.sweeps`) for both commands and drawing them: one row
per point (id, run, state, reason), and per state how many.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any

from producer.clictx import out
from worker.errors import UserInputError

if TYPE_CHECKING:
    from worker.records.ledger import Ledger


def sweep_points(ledger: Ledger, sweep_id: str) -> list[str]:
    """The sweep's job ids, oldest first; one line (UserInputError) for an unknown sweep."""
    from worker.flow.sweeps import no_sweep, points_of
    from worker.records.ids import sweep_id as a_sweep_id

    ids = points_of(ledger.r, ledger.keys, sweep_id) if a_sweep_id(sweep_id) else []
    if not ids:
        raise UserInputError(no_sweep(sweep_id))
    return ids


def sweep_rows(ledger: Ledger, sweep_id: str) -> list[dict[str, Any]]:
    rows = []
    for job_id in sweep_points(ledger, sweep_id):
        raw = ledger.r.hmget(ledger.keys.job(job_id), "state", "run_name", "reason")
        if raw[0] is None:
            continue  # the record expired; the index outlived it
        state, run, reason = (v.decode(errors="replace") if v else "" for v in raw)
        rows.append({"job_id": job_id, "run": run, "state": state.upper(), "reason": reason})
    return rows


def print_sweep_status(ledger: Ledger, sweep_id: str, *, as_json: bool) -> None:
    from worker.flow.sweeps import sweep_base, sweep_running

    rows = sweep_rows(ledger, sweep_id)
    cap = int(ledger.r.hget(sweep_base(ledger.keys, sweep_id), "max_parallel") or 0)
    running = int(ledger.r.scard(sweep_running(ledger.keys, sweep_id)))
    counts = Counter(r["state"] for r in rows)
    if as_json:
        doc = {"sweep": sweep_id, "max_parallel": cap or None, "running": running,
               "states": dict(counts), "jobs": rows, "count": len(rows)}  # fmt: skip
        print(json.dumps(doc))
        return
    from rich.table import Table

    table = Table(box=None)
    for col in ("id", "run", "state", "reason"):
        table.add_column(col, no_wrap=col != "reason", overflow="ellipsis")
    for r in rows:
        table.add_row(r["job_id"], r["run"], r["state"], r["reason"])
    out.print(table)
    tally = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    limit = f"; at most {cap} running at once ({running} now)" if cap else ""
    out.print(f"Sweep {sweep_id}: {len(rows)} point(s): {tally}{limit}.", markup=False)
