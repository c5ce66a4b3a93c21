"""The code one `colabq submit` ships: each distinct request surveyed once, the jobs' `CodeSpec`,
the snapshot staged once per submit (not per sweep point), and what the VM will fetch and run.

A sweep's points share the commit. A snapshot is staged under the first job's destination
prefix; every job of the submit writing to the same repo (or local store) uses that archive.
Nothing is staged until every job passed its pre-flight (`stage`), and never by a dry run.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from producer.code.checks import size_text
from producer.code.snapshot import archive_name, build_archive
from producer.code.staging import snapshot_uri, stage_archive
from producer.code.survey import CodeRequest, CodeState, survey
from worker.errors import UserInputError

if TYPE_CHECKING:
    from worker.settings import Settings
    from worker.spec import ArtifactDest, CodeSpec, JobSpec
    from worker.store.hub import HubStore

VM_JOBS = "/content/colab-jobs"  # where the wrapper keeps each job's folder on the VM


@dataclass
class Snapshot:
    state: CodeState
    dest: ArtifactDest
    uri: str
    staged: str = ""  # "uploaded", "already there"; "" until staged (a dry run never is)
    archive_bytes: int = 0


@dataclass(frozen=True)
class CodeAsked:
    """The submit options about code (`code`, `repo_dir`, `commit`, `include`, `repairs`)."""

    code: str | None
    repo_dir: Path
    commit: str | None = None
    include: tuple[str, ...] = ()
    repairs: tuple[str, ...] = ()


class Shipping:
    def __init__(self) -> None:
        self._states: dict[tuple[object, ...], CodeState] = {}
        self._snapshots: dict[tuple[object, ...], Snapshot] = {}

    def survey(self, asked: CodeAsked) -> CodeState | None:
        """The repository surveyed for `asked` (once per distinct request), or None when the
        job ships no code."""
        if asked.code is None:
            if asked.include or asked.repairs:
                named = "include" if asked.include else "repairs"
                raise UserInputError(
                    f"{named}: is for a job that ships its repository: add code: snapshot "
                    "(or code: git)."
                )
            return None
        request = CodeRequest(asked.code, asked.repo_dir, asked.commit, asked.include)
        key = (request.mode, request.repo.resolve(), request.rev, request.include)
        if key not in self._states:
            self._states[key] = survey(request)
        return self._states[key]

    def code_spec(self, state: CodeState, asked: CodeAsked, dest: ArtifactDest) -> CodeSpec:
        """The job's `CodeSpec`; a snapshot's URI is where it will be staged for `dest`."""
        from pydantic import ValidationError

        from worker.spec import CodeSpec, spec_error

        if asked.repairs and not state.env.uv:
            raise UserInputError(
                f"repairs: the VM repairs a uv project's environment, and commit {state.short} "
                "has no pyproject.toml and uv.lock in the job's folder."
            )
        fields: dict[str, Any] = {
            "mode": state.mode,
            "commit": state.commit,
            "subdir": state.subdir,
            "uv": state.env.uv,
            "python": state.env.python,
            "repairs": asked.repairs,
        }
        if state.remote is not None:
            fields["remote"] = state.remote.url
        else:
            fields["snapshot"] = self._snapshot(state, dest).uri
        try:
            return CodeSpec(**fields)
        except ValidationError as exc:
            raise UserInputError(f"Invalid job: code.{spec_error(exc)}.") from None

    def _snapshot(self, state: CodeState, dest: ArtifactDest) -> Snapshot:
        key = (state.commit, state.digest, dest.kind, dest.repo, dest.repo_type)
        if key not in self._snapshots:
            uri = snapshot_uri(dest, archive_name(state.commit, state.digest))
            self._snapshots[key] = Snapshot(state, dest, uri)
        return self._snapshots[key]

    def stage(self, settings: Settings, login: Callable[[], HubStore] | None = None) -> None:
        """Build and stage every snapshot of this submit, once each. A Hub destination's store
        is `login()`, by default this machine's login (the demo gives its own Hub's)."""

        def hub_store() -> HubStore:
            from producer.stage import build_hub_store

            return login() if login is not None else build_hub_store(settings)

        for snap in self._snapshots.values():
            if snap.staged:
                continue
            with tempfile.TemporaryDirectory(prefix="colabq-code-") as tmp:
                archive = Path(tmp) / "code.tar.gz"
                build_archive(snap.state.top, snap.state.commit, snap.state.includes, archive)
                snap.archive_bytes = archive.stat().st_size
                snap.staged = stage_archive(archive, snap.dest, snap.uri, hub_store)

    def describe(self, spec: JobSpec) -> dict[str, Any] | None:
        """What the VM fetches and runs for `spec`, as data (`--json`), or None (no code)."""
        code = spec.code
        if code is None:
            return None
        repo = f"{VM_JOBS}/<job>/repo"
        data: dict[str, Any] = {"mode": code.mode, "commit": code.commit}
        if code.mode == "git":
            data["remote"] = code.remote
        else:
            snap = next(s for s in self._snapshots.values() if s.uri == code.snapshot)
            data |= {
                "snapshot": code.snapshot,
                "files": snap.state.files,
                "bytes": snap.state.size_bytes,
                "staged": snap.staged or None,
            }
            if snap.archive_bytes:
                data["archive_bytes"] = snap.archive_bytes
        job = f"bash {spec.script_name}"
        return data | {
            "starts_in": f"{repo}/{code.subdir}".rstrip("/"),
            "uv": code.uv,
            "python": code.python or None,
            "setup": ["uv sync --frozen"] if code.uv else [],
            "run": f"uv run --no-sync {job}" if code.uv else job,
            "repairs": list(code.repairs),
        }

    def plan_lines(self, specs: Sequence[JobSpec]) -> list[str]:
        """What the VM will fetch and run, once per distinct code of the jobs."""
        lines: list[str] = []
        seen: set[tuple[str, str, str]] = set()
        for spec in specs:
            d = self.describe(spec)
            if d is None or (d["commit"], d["starts_in"], d["run"]) in seen:
                continue
            seen.add((d["commit"], d["starts_in"], d["run"]))
            repo = d["starts_in"].split("/repo")[0] + "/repo"
            if d["mode"] == "git":
                lines.append(f"code: the VM fetches {d['remote']} @ {d['commit']} into {repo}")
            else:
                what = f"{d['files']} files, {size_text(d['bytes'])}"
                when = f"; {d['staged']}" if d["staged"] else "; staged when submitted"
                lines.append(
                    f"code: the VM downloads {d['snapshot']} ({what}{when}) and unpacks it into "
                    f"{repo} (commit {d['commit']})"
                )
            setup = ""
            if d["uv"]:
                pin = f"Python {d['python']}" if d["python"] else "the Python uv picks"
                setup = f"uv sync --frozen ({pin}), then "
            lines.append(f"run: in {d['starts_in']}: {setup}{d['run']}")
            if d["repairs"]:
                lines.append(f"repairs allowed on the VM: {', '.join(d['repairs'])}")
        return lines
