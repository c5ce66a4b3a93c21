"""`colabq gate`: the service that carries out the users' requests (submit, cancel, retry, a
sweep's cancel, clean's record) and does every shared write (`worker.gate`). Run it with the
service's Redis user, one or more anywhere (one serves at a time, behind a lease; the others
stand by); every GPU worker runs the same loop as a duty, so a deployment with a worker needs
nothing more.
"""

from __future__ import annotations

import signal

from producer.clictx import _connect, build_app, load_settings, out


def gate() -> None:
    """Carry out the users' requests until stopped (one gate serves at a time)."""
    from worker.gate.duty import build_gate_duty

    settings = load_settings()
    ledger = _connect(settings)

    def say(line: str) -> None:
        out.print(line, markup=False)

    duty = build_gate_duty(settings, ledger, build_app(settings), say)

    def stop(_signum: int, _frame: object) -> None:
        duty.stop.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    say(f"colabq gate {duty.gate.consumer}: requests of {settings.key_prefix!r}; it serves "
        "while it holds the lease, else stands by.")  # fmt: skip
    duty.run()
