"""`colabq status`: the job list (filters, pages, a live view) or one job, with its held GPU
time and compute units; `status JOB` exits with the job's outcome (`exitcodes.for_state`).

Owns the command's options, its connection and the live view. What the list holds and how it is
read fast is `producer.joblist`'s; the drawing is `producer.render`'s. Start-up matters: this
module imports only Typer at load time, and the command never imports Celery or
`worker.session` (so not `worker.deps` either: it builds its Redis client itself). The list
reads its two settings without pydantic-settings (`clictx.ledger_address`), and the list
neither as `--json` nor empty imports rich; one job (`status JOB`) builds the whole settings.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from producer.clictx import JsonOpt, LedgerAddress, ledger_address, load_settings, out, print_line
from worker.errors import BrokerUnavailable, LedgerError, UserInputError

if TYPE_CHECKING:
    from rich.console import RenderableType

    from producer.joblist import Filters, Listing
    from producer.render import Progress
    from worker.records.ledger import Ledger
    from worker.records.record import HistoryEntry, JobRecord
    from worker.settings import Settings

T = TypeVar("T")
DEFAULT_LIMIT = 30


class DamagedJob(LedgerError):
    """A job's record cannot be read (bad JSON, an unknown state, a field missing)."""

    def __init__(self, job_id: str, problem: str, key: str) -> None:
        super().__init__(
            f"Job {job_id}'s record is damaged ({problem}); `colabq status` lists it as DAMAGED."
        )
        self.job_id, self.problem = job_id, problem
        self.hint = f"Inspect it with `redis-cli HGETALL {key}`."


JobOpt = Annotated[
    str | None, typer.Argument(help="A job id (a unique prefix is enough); omit for the list.")
]
StateOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--state",
        "-s",
        help="Only jobs in this state (any case; repeatable), or a group: live, ended, failed.",
    ),
]
RunOpt = Annotated[
    str | None, typer.Option(help="Only runs whose name matches this glob, e.g. 'coco-*'.")
]
SinceOpt = Annotated[
    str | None,
    typer.Option(help="Only jobs submitted in the last 2h, 3d... or since a date (2026-05-01)."),
]
MineOpt = Annotated[
    bool,
    typer.Option("--mine", help="Only your jobs: your Redis user's (your user@host without ACLs)."),
]
LimitOpt = Annotated[int, typer.Option(help="Jobs per page.")]
PageOpt = Annotated[int, typer.Option(help="Which page, 1 being the newest jobs.")]
WatchOpt = Annotated[
    bool,
    typer.Option(
        "--watch",
        "-w",
        help="Redraw live until Ctrl-C; for one job, until it ends (then exit as it ended).",
    ),
]
EveryOpt = Annotated[float, typer.Option(help="Seconds between redraws with --watch.")]


def status(
    job: JobOpt = None,
    state: StateOpt = None,
    run: RunOpt = None,
    since: SinceOpt = None,
    mine: MineOpt = False,
    limit: LimitOpt = DEFAULT_LIMIT,
    page: PageOpt = 1,
    watch: WatchOpt = False,
    every: EveryOpt = 2.0,
    as_json: JsonOpt = False,
    sweep: Annotated[
        str | None, typer.Option(help="A sweep's points (its id, as `colabq submit` printed it).")
    ] = None,
) -> None:
    """The jobs (newest first), or one job's states, reasons, GPU time and final report.

    `status JOB` exits as the job ended: 0 SUCCEEDED, 9 not over yet (README: exit codes)."""
    if limit < 1 or page < 1:
        raise UserInputError("--limit and --page are 1 or more.")
    if every <= 0:
        raise UserInputError("--every is a number of seconds above 0, e.g. 2.")
    if watch and as_json:
        raise UserInputError("--watch draws a live table: drop --json (or poll `--json`).")
    if job is not None and (state or run or since or mine or page != 1 or limit != DEFAULT_LIMIT):
        raise UserInputError(
            "--state, --run, --since, --mine, --limit and --page filter the list: "
            f"drop them, or drop {job!r}."
        )
    if sweep is not None:
        if job is not None or watch:
            raise UserInputError("--sweep lists a sweep's points: drop the job id and --watch.")
        from producer.commands.sweepview import print_sweep_status

        settings = load_settings()
        where = LedgerAddress.of(settings)
        ledger = _ledger(settings, _client(where))
        _reading(settings, lambda: print_sweep_status(ledger, sweep, as_json=as_json))
        return
    if job is not None:
        settings = load_settings()
        where = LedgerAddress.of(settings)
        _one_job(settings, _client(where), job, watch=watch, every_s=every, as_json=as_json)
        return
    args = _ListArgs.of(state or [], run, since, mine, limit, page)  # checked before connecting
    where = ledger_address()
    client = _client(where)
    if mine:
        args = dataclasses.replace(args, user=_submitter(where, client))
    if as_json:
        print(json.dumps(_list_json(where, client, args)))
    elif watch:
        _live(lambda: (_list_view(where, client, args), False), every)
    else:
        _print_list(where, client, args)


@dataclass(frozen=True)
class _ListArgs:
    """The list's options as typed (checked once, before Redis is asked anything)."""

    states: tuple[str, ...]
    run: str | None
    since: str | None
    mine: bool
    limit: int
    page: int
    state_set: frozenset[str] | None
    user: str | None

    @classmethod
    def of(
        cls, states: Sequence[str], run: str | None, since: str | None, mine: bool, limit: int,
        page: int,
    ) -> _ListArgs:  # fmt: skip
        from producer import joblist

        if since is not None:
            joblist.parse_since(since, time.time())
        return cls(tuple(states), run, since, mine, limit, page, joblist.parse_states(states), None)

    def filters(self, now: float) -> Filters:
        """`--since 2h` slides with the clock of a live view."""
        from producer.joblist import Filters, parse_since

        when = None if self.since is None else parse_since(self.since, now)
        return Filters(self.state_set, self.run, when, self.user)

    def next_page(self) -> str:
        argv = ["colabq", "status"]
        for s in self.states:
            argv += ["--state", s]
        for name, value in (("--run", self.run), ("--since", self.since)):
            if value is not None:
                argv += [name, value]
        argv += ["--mine"] if self.mine else []
        argv += ["--limit", str(self.limit)] if self.limit != DEFAULT_LIMIT else []
        return shlex.join([*argv, "--page", str(self.page + 1)])


def _submitter(where: LedgerAddress, client: Any) -> str:
    """Who `--mine` means: the Redis user this client is (ACL WHOAMI), user@host without ACLs,
    as the gate records a job's submitter."""
    from worker.people.identity import identify

    return _reading(where, lambda: identify(client).submitter)


def _listing(where: LedgerAddress, client: Any, args: _ListArgs, now: float) -> Listing:
    from producer.joblist import read_listing
    from worker.records.keys import Keys

    keys, filters = Keys(where.key_prefix), args.filters(now)
    return _reading(
        where, lambda: read_listing(client, keys, filters, limit=args.limit, page=args.page)
    )


def _list_view(where: LedgerAddress, client: Any, args: _ListArgs) -> RenderableType:
    now = time.time()
    return _table(_listing(where, client, args, now), now, args)


def _table(listing: Listing, now: float, args: _ListArgs) -> RenderableType:
    from producer import render

    width = max(80, render.console_width())
    return render.jobs_table(listing, now, next_page=args.next_page(), width=width)


def _print_list(where: LedgerAddress, client: Any, args: _ListArgs) -> None:
    """The list as `_list_view` draws it; a page without rows is its footer line alone."""
    from producer import render

    now = time.time()
    listing = _listing(where, client, args, now)
    if listing.rows:
        out.print(_table(listing, now, args))
    else:
        print_line(render.footer(listing, args.next_page()))


def _list_json(where: LedgerAddress, client: Any, args: _ListArgs) -> list[dict[str, Any]]:
    from producer import render

    now = time.time()
    listing = _listing(where, client, args, now)
    return [render.row_json(r, listing.short[r.job_id], now) for r in listing.rows]


def _one_job(
    settings: Settings, client: Any, job: str, *, watch: bool, every_s: float, as_json: bool
) -> None:
    from producer import exitcodes, render
    from worker.states import TERMINAL

    ledger = _ledger(settings, client)
    job_id = _reading(settings, lambda: ledger.find_by_prefix(job))
    if as_json:
        rec, history = _read_job(settings, ledger, job_id)
        data = render.job_json(rec, history, progress=_progress(settings, ledger, job_id))
        data["id"] = _short_id(settings, ledger, job_id)
        print(json.dumps(data))
        raise typer.Exit(exitcodes.for_state(rec.state))
    last: list[JobRecord] = []  # the record drawn last: its state is the exit code

    def draw() -> tuple[RenderableType, bool]:
        rec, history = _read_job(settings, ledger, job_id)
        last[:] = [rec]
        progress = _progress(settings, ledger, job_id)
        return render.job_detail(rec, history, progress=progress), rec.state in TERMINAL

    if watch:
        if not _live(draw, every_s):
            return  # Ctrl-C: the job goes on; nothing to report about its outcome
    else:
        out.print(draw()[0])
    raise typer.Exit(exitcodes.for_state(last[0].state))


def _read_job(
    settings: Settings, ledger: Ledger, job_id: str
) -> tuple[JobRecord, list[HistoryEntry]]:
    """The record and history, or DamagedJob (one line) when they cannot be decoded."""
    import redis

    try:
        return ledger.get(job_id), ledger.history(job_id)
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise BrokerUnavailable(settings.redis_url, type(exc).__name__) from None
    # A JobNotFound is a LookupError, none of these. A ResponseError: a key of another type.
    except (KeyError, ValueError, TypeError, redis.ResponseError) as exc:
        raise DamagedJob(job_id, _problem(exc), ledger.keys.job(job_id)) from None


def _progress(settings: Settings, ledger: Ledger, job_id: str) -> Progress:
    """The run's progress and time limit, from the job's watch hash (checked as it is read)."""
    from worker.progress import record

    return _reading(settings, lambda: record.read(ledger.r, ledger.keys.watch(job_id)))


def _problem(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"no {exc.args[0]!s} field"
    if isinstance(exc, json.JSONDecodeError):
        return "a field is not JSON"
    first = (str(exc).splitlines() or [type(exc).__name__])[0]
    return first[:120]


def _short_id(settings: Settings, ledger: Ledger, job_id: str) -> str:
    from producer.joblist import short_ids
    from worker.records import ids

    known = _reading(settings, lambda: ledger.r.zrange(ledger.keys.jobs(), 0, -1))
    return short_ids(ids.members("job id", known, ledger.keys.jobs()), [job_id])[job_id]


def _live(draw: Callable[[], tuple[RenderableType, bool]], every_s: float) -> bool:
    """Redraw every `every_s` until `draw` says done (True) or Ctrl-C (False).

    Ctrl-C sets a flag the loop checks between redraws (a KeyboardInterrupt raised inside a
    library's write or lock could leave the terminal or the process stuck); a second Ctrl-C
    interrupts at once."""
    import signal

    from rich.live import Live

    stopped: list[bool] = []  # a plain flag: a signal handler must take no lock

    def on_sigint(signum: int, frame: object) -> None:
        if stopped:
            raise KeyboardInterrupt
        stopped.append(True)

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        with Live(console=out, auto_refresh=False) as live:
            while not stopped:
                view, done = draw()
                live.update(view, refresh=True)
                if done:
                    return True
                until = time.monotonic() + every_s
                while not stopped and time.monotonic() < until:
                    time.sleep(min(0.05, every_s))
        return False
    except KeyboardInterrupt:
        return False
    finally:
        signal.signal(signal.SIGINT, previous)
        if not out.is_terminal:
            out.line()  # Live ends a view written to a pipe or file without one


def _reading(where: LedgerAddress | Settings, fn: Callable[[], T]) -> T:
    """`fn()`, with Redis failing mid-way as one line (exit 3), never a traceback."""
    import redis

    try:
        return fn()
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise BrokerUnavailable(where.redis_url, type(exc).__name__) from None
    except redis.RedisError as exc:  # e.g. an ACL that forbids a command
        raise LedgerError(f"Redis refused a read: {str(exc).splitlines()[0]}.") from None


def _client(where: LedgerAddress) -> Any:
    """A Redis client that answers now (`worker.deps.connect_ledger`'s, without importing
    `worker.deps`, which loads the session and Colab modules this command never needs)."""
    import redis

    from worker.records.redisconn import client as redis_client
    from worker.records.sentinels import login_refusal

    client = redis_client(
        where.redis_url, where.redis_master_name, where.sentinel_login,
        socket_connect_timeout=5, socket_timeout=30, health_check_interval=30,
    )  # fmt: skip
    try:
        client.ping()
    except redis.RedisError as exc:
        refused = login_refusal(exc, where.redis_url, where.redis_master_name, where.sentinel_login)
        raise refused or BrokerUnavailable(where.redis_url, type(exc).__name__) from None
    return client


def _ledger(settings: Settings, client: Any) -> Ledger:
    from worker.clock import SystemClock
    from worker.records.keys import Keys
    from worker.records.ledger import Ledger

    return Ledger(
        client, SystemClock(), Keys(settings.key_prefix),
        log_maxlen=settings.log_stream_maxlen, retention_s=settings.retention_s,
        quota_tz=settings.quota_timezone,
    )  # fmt: skip
