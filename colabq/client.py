"""`colabq.Client`: the queue from Python (a notebook, a script), doing what the CLI does.

Each method runs the functions the matching command runs, never its printed output: `submit` is
`colabq submit` (the same validation, sweep, pre-flight and enqueue, `producer.submit_flow`),
`status` is `colabq status [JOB] --json`, `logs` is `colabq logs [-f]`, `cancel` is `colabq
cancel JOB` (the same refusals under Redis ACLs), and `wait` waits on the ledger until the job
ends. Nothing is printed and nothing exits: errors are colabq's own exceptions (`colabq.errors`).

The settings are the CLI's (`COLABQ_*` in the environment, the settings file, `worker/settings.py`),
built once when the client is; Redis is connected on first use and answers within a second or
two (otherwise `BrokerUnavailable`), as for a command.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Unpack, overload

from colabq.errors import BrokerUnavailable, DamagedJob, JobNotFound, LedgerError, WaitTimeout
from colabq.results import Cancelled, JobInfo, Submission, job_info
from colabq.submitting import SubmitOptions, as_options, run_submit, target_of
from worker.errors import UserInputError
from worker.states import TERMINAL

if TYPE_CHECKING:
    from producer.ask import Requests
    from worker.gate.wire import CancelOutcome as GateOutcome
    from worker.records.ledger import Ledger
    from worker.settings import Settings

# The longest a wait blocks on the job's log stream between two looks at its state (the
# client's socket timeout is 30 s).
_MAX_BLOCK_S = 5.0
_LIMIT = 30  # jobs a page of the list, as `colabq status`


class Client:
    """A connection to one colabq deployment (its Redis, key and queue prefixes).

    `Client()` reads the settings as `colabq` does (environment, settings file); `Client(redis_url)`
    overrides the Redis URL alone; `Client(settings=load_settings(...))` takes them as given.
    Usable as a context manager (`close()` at the end). Not shared between threads.
    """

    def __init__(self, redis_url: str | None = None, *, settings: Settings | None = None) -> None:
        if settings is not None and redis_url is not None:
            raise UserInputError("Give Client a redis_url or settings, not both.")
        if settings is None:
            from worker.settings import load_settings

            settings = load_settings(**({} if redis_url is None else {"redis_url": redis_url}))
        self.settings: Settings = settings
        self._ledger: Ledger | None = None

    # --- connections ------------------------------------------------------------------------

    @property
    def ledger(self) -> Ledger:
        """The job ledger, connected on first use (BrokerUnavailable if Redis does not answer)."""
        if self._ledger is None:
            from worker.deps import connect_ledger

            self._ledger = connect_ledger(self.settings)
        return self._ledger

    def close(self) -> None:
        """Close the connections (a later call connects again)."""
        if self._ledger is not None:
            self._ledger.r.close()
            self._ledger = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- submit -----------------------------------------------------------------------------

    def submit(
        self,
        script: str | Path | None = None,
        *,
        name: str | None = None,
        gpu: str | Sequence[str] | None = None,
        wall: str | float | None = None,
        repo_dir: str | Path | None = None,
        code: Literal["git", "snapshot"] | None = None,
        hub_repo: str | None = None,
        local_store: str | Path | None = None,
        env: Mapping[str, str] | Sequence[str] | None = None,
        waive: Sequence[str] = (),
        sweep: Mapping[str, Sequence[Any]] | None = None,
        dry_run: bool = False,
        job_file: str | Path | None = None,
        **options: Unpack[SubmitOptions],
    ) -> Submission:
        """Pre-flight, validate and enqueue a job, or a sweep of jobs: `colabq submit`.

        `script` is the bash script the job runs on the VM, or give `job_file` (a YAML or JSON
        job file, as `colabq submit FILE` takes; the arguments given here override its keys).
        `gpu` is a type or several in order of preference (default T4); `wall` the wall-clock
        cap ("6h", or seconds; default 12h); `repo_dir` the training repository (default the
        working folder), checked and, with `code` ("git" or "snapshot"), shipped at its commit;
        results go to `hub_repo` (OWNER/NAME) or, for a rehearsal, `local_store` (a folder);
        `env` the job's environment (never a secret); `waive` the pre-flight checks accepted
        by name; `sweep` one job per value (`{"env.LR": ["1e-4", "3e-4"]}`); `options` every
        other option of `colabq submit` by its key (`sync=["ckpt"]`, `max_restarts=2`, ...).

        Runs the same pre-flight as the CLI: when a check fails (and is not waived) it raises
        `PreflightFailed` (its `findings`, its one-line message) and nothing is enqueued. With
        `dry_run` it checks and returns the plan (no job ids), and needs no Redis. A job whose
        idempotency key names a live or succeeded job is not enqueued again: that job is
        returned (`created` False).
        """
        target, script_given = target_of(script, job_file)
        given: dict[str, Any] = {
            "script": str(script) if script_given else None, "name": name, "gpu": gpu,
            "wall": wall, "repo_dir": repo_dir, "code": code, "hub_repo": hub_repo,
            "local_store": local_store, "env": env, "waive": waive, **options,
        }  # fmt: skip
        return run_submit(
            self.settings,
            lambda: self.ledger,
            target,
            as_options(given),
            grid=sweep,
            dry_run=dry_run,
        )

    # --- reading ----------------------------------------------------------------------------

    @overload
    def status(self, job_id: str) -> JobInfo: ...

    @overload
    def status(
        self,
        job_id: None = None,
        *,
        state: str | Sequence[str] | None = None,
        run: str | None = None,
        since: str | float | None = None,
        mine: bool = False,
        limit: int = _LIMIT,
        page: int = 1,
    ) -> list[JobInfo]: ...

    def status(
        self,
        job_id: str | None = None,
        *,
        state: str | Sequence[str] | None = None,
        run: str | None = None,
        since: str | float | None = None,
        mine: bool = False,
        limit: int = _LIMIT,
        page: int = 1,
    ) -> JobInfo | list[JobInfo]:
        """One job (an id, or a unique prefix of one), or the jobs, newest first: `colabq
        status [JOB] --json`. The list's filters are the CLI's: `state` (a state, `live`,
        `ended`, `failed`; or several), `run` (a glob on the run name), `since` (`"2h"`, a date,
        or epoch seconds), `mine` (jobs this Redis user, or this user@host without ACLs,
        submitted), then `limit` jobs of page `page`. A record that cannot be read is left out
        of the list (`colabq status` shows it as DAMAGED); asked for by id, it raises
        `DamagedJob`."""
        if job_id is not None:
            if state or run or since is not None or mine or page != 1 or limit != _LIMIT:
                raise UserInputError("state, run, since, mine, limit and page filter the list.")
            with self._redis():
                return self._info(self.ledger.find_by_prefix(job_id))
        if limit < 1 or page < 1:
            raise UserInputError("limit and page are 1 or more.")
        from producer.joblist import Filters, parse_states, read_listing

        states = parse_states([state] if isinstance(state, str) else state or ())
        when = _since_epoch(since)
        with self._redis():
            ledger = self.ledger
            user = ledger.identity.submitter if mine else None
            filters = Filters(states, run, when, user)
            listing = read_listing(ledger.r, ledger.keys, filters, limit=limit, page=page)
            infos = []
            for row in listing.rows:
                if row.state is None:
                    continue
                with contextlib.suppress(DamagedJob, JobNotFound):  # damaged, or just expired
                    infos.append(self._info(row.job_id))
            return infos

    def _info(self, job_id: str) -> JobInfo:
        from producer.commands.status import _progress, _read_job

        rec, history = _read_job(self.settings, self.ledger, job_id)
        return job_info(rec, history, progress=_progress(self.settings, self.ledger, job_id))

    def wait(self, job_id: str, *, timeout: float | None = None, poll_s: float = 1.0) -> JobInfo:
        """Wait until the job is over and return it (its state, reason and final report).

        Waits on the ledger: blocks on the job's log stream for at most `poll_s` at a time
        between two looks at its state, so it returns within `poll_s` of the job's end. Raises
        `WaitTimeout` (a TimeoutError) after `timeout` seconds; the job goes on."""
        if poll_s <= 0 or (timeout is not None and timeout < 0):
            raise UserInputError("poll_s is above 0 and timeout 0 or more (seconds).")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._redis():
            ledger = self.ledger
            found = ledger.find_by_prefix(job_id)
            after = "$"  # only lines from now on wake the wait early
            while (state := ledger.state_of(found)) not in TERMINAL:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise WaitTimeout(found, state, timeout or 0.0)
                block_s = min(poll_s, _MAX_BLOCK_S, left if left is not None else poll_s)
                lines = ledger.read_log(found, after, block_ms=max(1, round(block_s * 1000)))
                after = lines[-1].id if lines else after
            return self._info(found)

    def logs(
        self, job_id: str, *, follow: bool = False, since: str | float | None = None
    ) -> Iterator[str]:
        """The job's output, a line at a time: `colabq logs`. With `follow`, until the job is
        over (the iterator blocks for the next line; stop iterating to stop following).
        `since` keeps only lines written since then (`"10m"`, a date, or epoch seconds)."""
        from producer.follow import iter_lines

        when = _since_epoch(since)
        with self._redis():
            found = self.ledger.find_by_prefix(job_id)
        after = "0-0" if when is None else _stream_id_before(when)
        lines = iter_lines(self.ledger, found, follow=follow, after=after)
        return self._texts(lines)

    def _texts(self, lines: Iterator[Any]) -> Iterator[str]:
        with self._redis():
            for line in lines:
                yield line.text

    # --- cancel -----------------------------------------------------------------------------

    def cancel(self, job_id: str, reason: str = "cancelled by user") -> Cancelled:
        """Cancel a job: `colabq cancel JOB`, with its rules. A job no live runner holds and
        that holds no session ends CANCELLED at once; otherwise its runner (or the adopter of a
        dead one) stops its session, verified, and ends it. Under Redis ACLs, a job of someone
        else is refused (UserInputError) unless this user is an operator."""
        with self._redis():
            found = self.ledger.find_by_prefix(job_id)
            [outcome] = self._requests().cancel([found], reason)
        return _cancelled(outcome)

    def sweep(self, sweep_id: str) -> list[JobInfo]:
        """A sweep's points in their order: `colabq status --sweep ID`."""
        from producer.commands.sweepview import sweep_points

        with self._redis():
            return [self._info(j) for j in sweep_points(self.ledger, sweep_id)]

    def cancel_sweep(self, sweep_id: str, reason: str = "cancelled by user") -> list[Cancelled]:
        """Cancel every point of a sweep not over yet: `colabq cancel --sweep ID`, with its
        rules (under Redis ACLs, another user's sweep is refused)."""
        with self._redis():
            return [_cancelled(o) for o in self._requests().cancel_sweep(sweep_id, reason)]

    def _requests(self) -> Requests:
        from producer.ask import Requests

        return Requests.of(self.ledger, self.settings)

    @contextlib.contextmanager
    def _redis(self) -> Iterator[None]:
        """Redis failing mid-way as colabq's one-line errors, never redis-py's."""
        import redis

        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise BrokerUnavailable(self.settings.redis_url, type(exc).__name__) from None
        except redis.RedisError as exc:  # e.g. an ACL that forbids a command
            raise LedgerError(f"Redis refused a call: {str(exc).splitlines()[0]}.") from None


def _cancelled(o: GateOutcome) -> Cancelled:
    from producer.commands.cancel import outcome_text

    return Cancelled(o.job_id, o.state_before, o.result, outcome_text(o))


def _since_epoch(since: str | float | None) -> float | None:
    """`since` as epoch seconds: a duration back from now or a date (`colabq status --since`)."""
    if since is None or isinstance(since, int | float):
        return since
    from producer.joblist import parse_since

    return parse_since(since, time.time())


def _stream_id_before(at: float) -> str:
    """The last stream entry id before the millisecond `at` falls in: reading after it starts
    with the first line written at or after `at` (entry ids are `<ms>-<sequence>`)."""
    ms = int(at * 1000)
    return "0-0" if ms <= 0 else f"{ms - 1}-{2**64 - 1}"
