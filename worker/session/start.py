"""The steps before the job runs: ALLOCATING (checks, the watchdog, `colab new`, the endpoint
recorded at once; a `new` that failed or was killed reconciled by name, `reconcile`) and STARTING
(one bundle upload, the launch cell that starts the wrapper detached, once). An adopter resumes
them: it waits for a `colab new` a dead owner left running, and never launches the job twice."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

import redis

from worker.accounts.balances import record_usage
from worker.colab.parse import Usage
from worker.colab.versions import CliRelease
from worker.errors import (
    BudgetExceeded,
    ColabError,
    ColabqError,
    RemotePathNotFound,
    SessionLost,
    SessionNotFound,
)
from worker.fleet.causes import CAPACITY_ERRORS, Cause, GpuMismatch, PutBack, cause_of
from worker.people.destinations import check_local_paths
from worker.records.fleet import live_workers
from worker.records.record import JobRecord
from worker.session import checks, codecheck, hubtoken, procs
from worker.session import plan as vmplan
from worker.session.gitroute import NoGitRoute, fetchers
from worker.session.job import FRESH, Finish, JobRun, session_name
from worker.session.launch import launch_job, lost_while_launching
from worker.session.reconcile import Found, reconcile_new
from worker.session.watchpolicy import Phase
from worker.spec import CodeSpec, queue_for
from worker.states import JobState as S
from worker.tracker.clients import open_run
from worker.tracker.runs import TrackerRef, run_env


class Starting(JobRun):
    # The job's tracker run, once asked for (`_tracker_ref`).
    _tracker: TrackerRef | None = None
    _tracker_asked = False
    # The CLI release the checks found (`_check_before_allocation`).
    _cli: CliRelease | None = None

    def _allocate(self, rec: JobRecord) -> None:
        d = self.d
        if self.name is not None and not self._new_started():
            # An adopted job whose owner died before its `colab new` started: nothing was
            # assigned for it, so it is allocated afresh.
            self.log(f"the owner died before allocating {self.name}; allocating afresh")
            self.name = None
        if self.name is not None:
            # An adopted job whose owner died during allocation.
            if self.endpoint is None and not self._wait_for_endpoint():
                raise Finish(
                    S.FAILED_LOST,
                    f"the owner died while allocating {self.name}; no endpoint was recorded, so "
                    "an assignment it may have made shows as [?] in `colab sessions`",
                )
            self._to(S.STARTING, f"session {self.name} at {self.endpoint}")
            return
        self._phase(Phase.CHECKING)
        balance = self._check_before_allocation()
        self.name = session_name(d.settings.session_prefix)
        self._write_watch()
        try:
            d.start_watchdog(self.files, self._child_env())
        except (ColabqError, OSError) as exc:
            why = exc.advice() if isinstance(exc, ColabqError) else str(exc)
            raise PutBack(Cause.HOST, f"the watchdog did not start: {why}") from None
        assert self._cli is not None
        self.log(f"checks passed ({self._cli.describe()}, balance {balance:.2f} units)")
        if warning := self._cli.warning():
            self.log(f"WARNING: {warning}")
        self.log("watchdog alive")
        self._tracker_ref(rec)  # before `colab new`: a slow tracker costs no GPU time
        d.fence()
        # The CLI's version on the record: the report says it, whoever ends the job.
        d.ledger.set_fields(self.job_id, owner=self.owner, session=self.name,
                            colab_cli=self._cli.version)  # fmt: skip
        self._phase(Phase.ALLOCATING)
        gpu = self._new_session()
        self._to(S.STARTING, f"session {self.name} ({gpu}) at {self.endpoint}", gpu=gpu)

    def _new_session(self) -> str:
        """`colab new` with the job's GPU types this worker serves, in order; the type it got.
        Colab's refusals are capacity (the job waits); any other failure of `colab new` that
        left no session is this host's (the job goes back)."""
        d, spec = self.d, self.spec
        assert self.name is not None
        served = [g for g in spec.gpus if g.value in d.served_gpus] or [spec.gpu]
        refused: list[str] = []
        self._new_marker().touch()  # an adopter tells "never started" from "may have assigned"
        for gpu in served:
            self.log(f"allocating {gpu}{' high-mem' if spec.high_mem else ''} as {self.name}")
            try:
                d.driver.new(self.name, gpu.value, spec.high_mem, on_retry=self._log_retry)
            except CAPACITY_ERRORS as exc:
                if self._record_endpoint():
                    raise Finish(S.FAILED_NO_GPU, f"no GPU: {exc}") from None
                refused.append(gpu.value)
                self.log(f"{gpu} refused: {exc}")
                continue
            except ColabError as exc:
                self._reconcile_new(exc)
            if not self._record_endpoint():
                raise Finish(S.FAILED, "colab new said READY but recorded no endpoint")
            self.gpu = gpu.value
            return gpu.value
        raise PutBack(Cause.CAPACITY, "/".join(refused), gpus_tried=tuple(refused))

    def _log_retry(self, line: str) -> None:
        self.log(f"colab new retried its assignment (the CLI's colab.log): {line}")

    def _reconcile_new(self, exc: ColabError) -> None:
        """A `colab new` that failed or was killed (`exc`): go on with the VM it assigned to
        this name, if any (returns); else release what may be assigned and give the job back,
        never a second `new` for it here (raises)."""
        assert self.name is not None
        why = exc.advice()
        found = reconcile_new(self.d.driver, self.name, self.files.endpoint(self.name), self.log)
        if found.found is Found.ADOPTED:
            self.log(f"colab new failed ({why}) after assigning {found.endpoint} to {self.name}: "
                     "going on with it")  # fmt: skip
            return
        if found.found is Found.UNKNOWN and found.endpoint is not None:
            self.files.record_endpoint(self.name, found.endpoint)
            self._record_endpoint()
            raise Finish(S.QUEUED, f"colab new failed: {why}; what it assigned is released",
                         "host")  # fmt: skip
        if found.unnamed:
            self.log(
                f"`colab sessions` lists {len(found.unnamed)} assignment(s) no CLI record names: "
                f"{', '.join(found.unnamed)}; colabq cannot tell whether the failed `colab new` "
                "made one of them, so it never stops them (the janitor reports them)"
            )
        raise PutBack(Cause.HOST, f"colab new failed: {why}") from None

    def _check_before_allocation(self) -> float:
        # Invariant 1: nothing is allocated before these pass, the watchdog included. A check
        # of the host (its token files, its CLI, its login, its Hub connection, its reach to
        # the job's git remote) that fails puts the job back; a check of the job's own (its
        # script, its destination, its inputs, its code, its budget) ends it.
        d, spec = self.d, self.spec
        try:
            launch = vmplan.launch_source(spec, d.settings, self.nonce, self._segment_plan())
            checks.check_job_files(spec, self.files.root, vmplan.VM_DIR, launch)
            check_local_paths(hubtoken.job_user(spec), spec, d.settings)  # the job's
            token = hubtoken.choose(spec, d.settings)  # a bad or missing one: this host's
            if token.whose in ("destination", "user"):
                self.log(f"uploads use {token.describe()}")
            dest = d.store.check_destination(spec.artifact)
            self.log(f"destination: {dest}")
            if self.resume_uri is None and spec.resume_from:
                size = d.check_input(spec.resume_from)
                self.log(f"resume checkpoint {spec.resume_from}: {size} bytes")
            if spec.code is not None:
                self.log(self._check_code(spec.code))
            self._cli = checks.check_cli_release(d.driver, d.settings)
            account = d.settings.account
            return checks.check_budget(
                d.driver, spec.budget_units, d.settings.budget_floor_for(account),
                on_usage=lambda usage: self._note_usage(account, usage),
            )  # fmt: skip
        except BudgetExceeded as exc:
            raise Finish(S.FAILED_BUDGET, exc.advice()) from None
        except hubtoken.NoHubToken as exc:
            raise PutBack(Cause.HOST, exc.advice()) from None
        except codecheck.CodeHostFailure as exc:
            raise PutBack(Cause.HOST, f"pre-allocation check failed: {exc.advice()}") from None
        except (ColabqError, OSError) as exc:
            why = exc.advice() if isinstance(exc, ColabqError) else f"{type(exc).__name__}: {exc}"
            if cause_of(exc) is Cause.HOST:
                raise PutBack(Cause.HOST, f"pre-allocation check failed: {why}") from None
            raise Finish(S.FAILED, f"pre-allocation check failed: {why}") from None

    def _note_usage(self, account: str | None, usage: Usage) -> None:
        """The account's balance as this worker just saw it (`colabq usage`); best effort."""
        if account is None:
            return
        with contextlib.suppress(redis.RedisError):
            record_usage(self.d.ledger.r, self.d.ledger.keys, account, usage,
                         by=self.d.worker_name, now=self.d.clock.time())  # fmt: skip

    def _check_code(self, code: CodeSpec) -> str:
        """The job's commit fetchable from its remote with this host's credential or deploy
        key, as the VM will fetch it, or its snapshot staged (`codecheck`). An ssh remote this
        host cannot fetch goes to another live worker that can; with none, it is the job's."""
        d = self.d
        try:
            return codecheck.check_code(
                code, job_id=self.job_id, host=d.worker_name,
                credentials=d.settings.git_credentials_file, workdir=self.files.root,
                check_input=d.check_input, ssh_key=d.settings.git_ssh_key_file,
            )  # fmt: skip
        except NoGitRoute as exc:
            queues = [queue_for(g, d.settings.queue_prefix) for g in self.spec.gpus]
            cards = live_workers(d.ledger.r, d.ledger.keys)
            others = [n for n in fetchers(cards, queues, code.remote) if n != d.worker_name]
            if others:
                raise PutBack(Cause.HOST, f"{exc.advice()} ({others[0]} can)") from None
            raise codecheck.CodeCheckFailed(exc.advice()) from None

    def _new_marker(self) -> Path:
        assert self.name is not None
        return self.files.root / f"new-started-{self.name}"

    def _new_started(self) -> bool:
        return self._new_marker().exists()

    def _wait_for_endpoint(self) -> bool:
        """Adoption: a `colab new` the dead owner started may still be writing its state."""
        assert self.name is not None
        while procs.cli_running(self.d.driver.config_path):
            self.d.clock.sleep(0.5)
        return self._record_endpoint()

    def _start(self, rec: JobRecord) -> None:
        d, name = self.d, self.name
        assert name is not None
        self._phase(Phase.UPLOADING)
        if not (self.adopted and self._launched()):
            env = self._tracker_env(rec)
            bundle = vmplan.write_bundle(
                self.files.root / vmplan.BUNDLE,
                vmplan.bundle_members(
                    self.files.root / vmplan.SCRIPT,
                    hubtoken.choose(self.spec, d.settings).path,
                    vmplan.git_route_for(self.spec, d.settings),
                    inputs=bool(self.spec.hub_inputs),
                ),
            )
            try:
                d.fence()
                self._upload_bundle(name, bundle)
            finally:
                bundle.unlink(missing_ok=True)
            launch = self.files.root / f"launch-{self.segment}.py"
            seg = dataclasses.replace(
                self._segment_plan(), env=tuple(sorted(env.items())), gpu=self.gpu
            )
            launch.write_text(vmplan.launch_source(self.spec, d.settings, self.nonce, seg))
            # The client may linger, or die, after its cell started the job: the sentinel is
            # read as it streams, and a client that fails without it is judged on the VM.
            try:
                self.log(f"launched on the VM ({launch_job(self, launch)})")
            except GpuMismatch as exc:
                # Released at once, then the job waits for its GPU like any refusal.
                self.log(f"the VM's GPU is not the one allocated: {exc}; releasing it")
                raise Finish(S.QUEUED, f"{exc.wanted} (the VM had {exc.got})", "capacity") from None
        self._to(S.RUNNING, f"started detached on {name}")

    def _upload_bundle(self, name: str, bundle: Path) -> None:
        """The one bundle upload, tried twice (it overwrites the same file: a retry is safe).
        Failing twice is this host's failure, not the job's: the session is released and the
        job goes to another worker."""
        remote = f"/content/{vmplan.BUNDLE}"
        try:
            self.d.driver.upload(name, bundle, remote)
            return
        except ColabError as first:
            self.log(f"the bundle upload failed ({first.advice()}); trying once more")
        try:
            self.d.fence()
            self.d.driver.upload(name, bundle, remote)
        except ColabError as exc:
            raise Finish(
                S.QUEUED, f"the bundle upload failed twice: {exc.advice()}", "host"
            ) from None

    def _tracker_env(self, rec: JobRecord) -> dict[str, str]:
        """The job's tracker run, in its environment."""
        ref = self._tracker_ref(rec)
        return run_env(ref, self.job_id, self.d.settings) if ref is not None else {}

    def _tracker_ref(self, rec: JobRecord) -> TrackerRef | None:
        """The job's tracker run: the one recorded (a restarted segment, an adopter), else one
        opened now and recorded (asked once). A tracker that cannot be reached costs one log
        line, never the GPU run: the job then opens a run of its own."""
        if self._tracker_asked:
            return self._tracker
        self._tracker_asked = True
        self._tracker = self._open_tracker_run(rec)
        return self._tracker

    def _open_tracker_run(self, rec: JobRecord) -> TrackerRef | None:
        d, spec = self.d, self.spec
        if not spec.tracker:
            return None
        recorded = rec.get("tracker_run")
        ref = TrackerRef.parse(recorded) if recorded else None
        if ref is None:
            try:
                opened = open_run(spec, d.settings)
            except Exception as exc:  # a tracker outage never fails the job
                why = exc.advice() if isinstance(exc, ColabqError) else type(exc).__name__
                self.log(f"tracker {spec.tracker}: no run opened ({why}); the job opens its own")
                return None
            if opened is None:
                why = (
                    "COLABQ_MLFLOW_TRACKING_URI is not set on this worker"
                    if spec.tracker == "mlflow"
                    else "colabq assigns no run id for it"
                )
                self.log(f"tracker {spec.tracker}: {why}; the job opens its own run")
                return None
            ref = opened.ref
            fields = {"tracker_run": str(ref)}
            if opened.experiment_id is not None:
                fields["tracker_experiment"] = opened.experiment_id
            d.fence()
            d.ledger.set_fields(self.job_id, owner=self.owner, **fields)
            self.log(f"tracker run {ref}")
        return ref

    def _launched(self) -> bool:
        """Whether the wrapper was started already (an adopter's question: never twice). A
        session that is gone before the job was launched (its owner died mid-upload and the
        watchdog stopped the idle VM) is the VM's end, never the job's: a fresh session
        (`FRESH`, not counted as a restart) unless the store shows the job ran."""
        if self.d.ledger.read_watch(self.job_id).get("exec_launched"):
            return True
        assert self.name is not None
        marker = self.files.root / "launched-probe"
        try:
            self.d.driver.download(
                self.name,
                f"{vmplan.remote_job_dir(self.job_id)}/run/launched",
                marker,
                timeout_s=self.d.settings.colab_call_timeout_s,
            )
        except RemotePathNotFound:
            return False
        except (SessionNotFound, SessionLost):
            if (
                lost_while_launching(self, "its session was gone when this owner resumed it")
                is None
            ):
                return True  # the job ran and ended (the store has its exit): settle it
            raise Finish(
                S.RESTARTING, f"{FRESH} its session was released before the job was launched"
            ) from None
        finally:
            marker.unlink(missing_ok=True)
        return True
