"""The fleet's commands: `colabq workers` (each live worker's state: idle, busy or drained,
with the reason, since when and its host failures in a row), `colabq drain WORKER` (it takes no
more jobs; the one it holds goes on) and `colabq undrain WORKER`. Under Redis ACLs only an
operator (or a service) drains and undrains (`worker.people.guard`)."""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

import typer

from producer.clictx import JsonOpt, _connect, build_app, load_settings, out
from worker.errors import UserInputError

WorkerArg = Annotated[str, typer.Argument(help="The worker's name, as `colabq workers` lists it.")]


def _cards(name: str | None = None) -> tuple[Any, Any, list[Any], dict[str, Any]]:
    from worker.fleet import health
    from worker.records.fleet import live_workers

    settings = load_settings()
    ledger = _connect(settings)
    cards = live_workers(ledger.r, ledger.keys)
    if name is not None and name not in {c.name for c in cards}:
        known = ", ".join(c.name for c in cards) or "none"
        raise UserInputError(
            f"No live worker named {name!r} (live: {known}); `colabq workers` lists them."
        )
    return settings, ledger, cards, health.read_many(ledger.r, ledger.keys, [c.name for c in cards])


def worker_row(card: Any, h: Any) -> dict[str, object]:
    state = "drained" if h is not None else "busy" if card.busy else "idle"
    return {
        **card.to_json(), "busy": card.busy, "state": state,
        "drain_reason": h.reason if h else None, "drained_since": h.since if h else None,
        "drained_by_hand": h.manual if h else None, "failures_in_row": h.failures if h else 0,
    }  # fmt: skip


def workers(as_json: JsonOpt = False) -> None:
    """The live workers: host, GPU types, state (idle, busy, drained and why), the job each
    holds, host failures in a row, its last beat."""
    from producer import render

    _, _, cards, healths = _cards()
    rows = [worker_row(c, healths.get(c.name)) for c in cards]
    if as_json:
        print(json.dumps(rows))
    else:
        out.print(render.workers_table(rows, time.time()))


def drain(
    worker: WorkerArg,
    reason: Annotated[str, typer.Option(help="Why, shown by `colabq workers`.")] = "by hand",
    as_json: JsonOpt = False,
) -> None:
    """Stop a worker taking jobs (the job it holds goes on) until `colabq undrain`."""
    from worker.fleet import health
    from worker.fleet.dispatch import stop_consuming
    from worker.people.guard import check_operator
    from worker.records.events import note_action

    settings, ledger, cards, _ = _cards(worker)
    [card] = [c for c in cards if c.name == worker]
    check_operator(ledger, f"Draining worker {worker}")
    by = ledger.identity.submitter
    health.drain_by_hand(ledger.r, ledger.keys, worker, reason, time.time(), by)
    note_action(ledger, worker, "drain", reason)
    stop_consuming(build_app(settings), worker, card.queues)
    if as_json:
        print(json.dumps({"worker": worker, "state": "drained", "reason": reason}))
    else:
        out.print(f"Worker {worker} drained: it takes no more jobs (`colabq undrain {worker}`).")


def undrain(worker: WorkerArg, as_json: JsonOpt = False) -> None:
    """Let a drained worker take jobs again."""
    from worker.fleet import health
    from worker.fleet.dispatch import resume_consuming
    from worker.people.guard import check_operator
    from worker.records.events import note_action

    settings, ledger, cards, _ = _cards(worker)
    [card] = [c for c in cards if c.name == worker]
    check_operator(ledger, f"Undraining worker {worker}")
    lifted = health.undrain(ledger.r, ledger.keys, worker)
    if lifted:
        note_action(ledger, worker, "undrain", "undrained by hand")
    resume_consuming(build_app(settings), worker, card.queues)
    if as_json:
        print(json.dumps({"worker": worker, "state": "idle", "was_drained": lifted}))
    else:
        out.print(f"Worker {worker} " + ("takes jobs again." if lifted else "was not drained."))
