"""`colabq notifier`: the service that tells people of state changes (`worker.notify`): it reads
the event log in the `notifier` consumer group and delivers each change to the webhooks and
command hooks of the targets file (`COLABQ_WEBHOOKS_FILE`, 0600) that the job (`--notify`) and
the deployment (`COLABQ_NOTIFY`, else `default`) name. It never holds a GPU; run one or more on
any host with the file (they share the work).
"""

from __future__ import annotations

import os
import signal

from producer.clictx import _connect, load_settings, out


def notifier() -> None:
    """Deliver notifications from the event log (webhooks and command hooks) until stopped."""
    from worker.notify.consumer import Notifier
    from worker.notify.targets import deployment_names, load_targets, targets_file

    path = targets_file()
    targets = load_targets(path)
    ledger = _connect(load_settings())
    deployment = deployment_names(os.environ, targets)
    stopping: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    names = ", ".join(sorted(targets)) or "none"
    out.print(f"colabq notifier: targets {names} from {path}; for every job: "
              f"{' '.join(deployment) or 'nothing'}.", markup=False)  # fmt: skip
    Notifier(ledger, targets, deployment).run(lambda: bool(stopping))
