"""Which expected artifacts a job's sync paths put in the store: checked before anything is
enqueued, so that a job whose `--expect` no `--sync` covers is refused, not run and then FAILED.

"Covers" is what the wrapper on the VM does (`worker/vm/colab-job.sh`, `sync_all`): the job's
log folder goes to `logs/<job id>`, and each sync path P of the job's folder (a file or a
folder) is uploaded to its last name, `basename(P)`, under the destination's prefix. So after a
job the store holds `logs/...`, and for each sync path its last name and, for a folder,
everything under it; expected artifacts are verified at those paths (`worker/store/artifacts.py`,
`worker/store/hub.py`). An expected path is covered when it is a sync path's last name or lies
under it. Note that `--sync out/results.json` lands at `results.json`, so `--expect
out/results.json` is not covered by it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePosixPath

LOGS = "logs"


def _parts(path: str) -> tuple[str, ...]:
    return tuple(p for p in PurePosixPath(path.replace("\\", "/")).parts if p not in ("", "."))


def landing_names(sync_paths: Sequence[str]) -> tuple[str, ...]:
    """Where each sync path lands in the store, relative to the prefix: its last name."""
    return tuple(parts[-1] for p in sync_paths if (parts := _parts(p)))


def covered(expected: str, sync_paths: Sequence[str]) -> bool:
    parts = _parts(expected)
    if not parts:
        return False
    if parts == (LOGS,):
        return True  # the log folder is always uploaded
    return parts[0] in landing_names(sync_paths)


def find_uncovered(expected: Sequence[str], sync_paths: Sequence[str]) -> tuple[str, ...]:
    """The expected artifacts no sync path puts in the store, in the order given."""
    return tuple(e for e in expected if not covered(e, sync_paths))


def uncovered_advice(uncovered: Sequence[str], sync_paths: Sequence[str]) -> str:
    """One line: which expected paths no sync path covers, and what to do."""
    names = ", ".join(uncovered)
    lands = landing_names(sync_paths)
    moved = [f"--sync {p} lands at {_parts(p)[-1]}" for p in sync_paths if len(_parts(p)) > 1]
    where = (
        f"the sync paths land at {', '.join(lands)}" + (f" ({'; '.join(moved)})" if moved else "")
        if lands
        else "no --sync path is given"
    )
    return (
        f"--expect {names}: no --sync path puts it in the store ({where}; each sync path is "
        "uploaded under its last name); add the path to --sync, or expect it under where a "
        "sync path lands. Nothing was enqueued."
    )
