"""Whether the fleet can fetch a `code: git` job's ssh remote on a VM, asked before anything is
enqueued.

The submitting machine does not hold the workers' credentials, so it asks their cards: each live
worker publishes which hosts its https read credentials cover and whether it holds a deploy key
(`worker.session.gitroute`, names only). A job whose remote is an ssh remote that no live worker
serving its queues (its GPU type and fallbacks) can fetch is refused in one line, naming both
ways and `code: snapshot`. When no live worker serves those queues at all, nothing can be told:
the job is accepted (submit already warns that it waits for a worker), and the worker that takes
it checks again before it allocates anything. Other remotes are the remote's own business.
"""

from __future__ import annotations

from collections.abc import Sequence

from worker.errors import UserInputError
from worker.records.fleet import WorkerCard
from worker.session.gitroute import fetchers, no_route_advice, ssh_remote
from worker.spec import JobSpec, queue_for


def needs_reach(specs: Sequence[JobSpec]) -> bool:
    """Whether any job fetches its code from an ssh remote (only then are cards read)."""
    return any(s.code is not None and s.code.mode == "git" and ssh_remote(s.code.remote)
               for s in specs)  # fmt: skip


def check_reach(specs: Sequence[JobSpec], cards: Sequence[WorkerCard], queue_prefix: str) -> None:
    """UserInputError, one line, for the first job whose ssh remote no live worker serving its
    queues can fetch; nothing for a job no live worker serves (it waits, checked again)."""
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for spec in specs:
        code = spec.code
        if code is None or code.mode != "git" or ssh_remote(code.remote) is None:
            continue
        queues = tuple(queue_for(g, queue_prefix) for g in spec.gpus)
        if (code.remote, queues) in seen:
            continue  # a sweep's points share their commit and GPU types
        seen.add((code.remote, queues))
        serving = [c for c in cards if set(c.queues) & set(queues)]
        if serving and not fetchers(serving, queues, code.remote):
            names = ", ".join(sorted(c.name for c in serving))
            raise UserInputError(
                f"code: git fetches {code.remote} over ssh and no live worker serving "
                f"{', '.join(queues)} ({names}) can on a VM: {no_route_advice(code.remote)}."
            )
