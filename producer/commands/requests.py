"""`colabq requests`: this Redis user's requests that no gate has handled yet (a submit that said
its request was kept), oldest first, and whether a gate serves now. The gate deletes a request
once it answered it, so whatever is in the user's stream still waits (`worker.gate`).
"""

from __future__ import annotations

import json
import time
from typing import Any

from pydantic import ValidationError

from producer.clictx import JsonOpt, _connect, load_settings, out


def requests(as_json: JsonOpt = False) -> None:
    """Your requests that wait for a gate (submit, cancel, retry...), and the gate serving now."""
    from worker.gate.wire import Request

    ledger = _connect(load_settings())
    me = ledger.identity
    pipe = ledger.r.pipeline(transaction=False)
    pipe.xrange(ledger.keys.requests(me.user), count=1000)
    pipe.get(ledger.keys.gate_lease())
    entries, lease = pipe.execute()
    gate = lease.decode(errors="replace") if lease else None
    now = time.time()
    rows: list[dict[str, Any]] = []
    for entry_id, fields in entries:
        eid = entry_id.decode()
        row: dict[str, Any] = {"id": eid, "age_s": round(now - int(eid.split("-")[0]) / 1000, 1)}
        try:
            req = Request.model_validate_json(fields.get(b"r", b""))
            row |= {"rid": req.rid, "op": req.body.op, "jobs": _jobs(req.body)}
        except ValidationError:
            row |= {"rid": None, "op": "unreadable", "jobs": 0}
        rows.append(row)
    if as_json:
        print(json.dumps({"user": me.user, "gate": gate, "requests": rows, "count": len(rows)}))
        return
    for row in rows:
        out.print(f"{row['rid'] or row['id']}  {row['op']}  {row['jobs']} job(s)  waiting "
                  f"{row['age_s']:.0f} s", markup=False)  # fmt: skip
    serving = (
        f"gate {gate} serves now" if gate else "no gate runs now (a GPU worker or `colabq gate`)"
    )
    out.print(f"{len(rows)} request(s) of {me.user} waiting; {serving}.", markup=False)


def _jobs(body: Any) -> int:
    for name in ("specs", "jobs"):
        if hasattr(body, name):
            return len(getattr(body, name))
    return 1
