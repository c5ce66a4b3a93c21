"""P8: the memory a held GPU session adds on the worker host, measured on real held sessions.

Jobs go the way a user's do: `colabq submit` -> a real Celery worker -> the Colab emulator, on a
private redis-server. Each job sleeps ~20 s; while it is RUNNING, every host process whose
command line names the job's folder is sampled from /proc (VmRSS from `status`; Pss and the
private pages, USS, from `smaps_rollup`), three times a second apart, the largest value kept:
  - the exec client (`python -m worker.session.attach`)       colabq's
  - the watchdog (`python -m worker.session.watchdog`)        colabq's
  - the `colab exec` the exec client runs                     the CLI's: here the emulator
The figure P8 is the sum of colabq's own two by PSS (what they add to the host: private pages
plus each one's share of the pages it shares); P8r the same by RSS, which counts the shared
interpreter and libraries in each. The CLI's process is listed beside them, never counted:
colabq cannot make it smaller. With `--real-cli COLAB`, the real CLI's peak RSS for an
`exec` that fails at once (no session: its imports and argument parsing, no websocket yet) is
measured too, as a reference row (a live exec holds more).

Anchor: 0 (a session that adds nothing). The floors are printed beside it, measured in the same
run: a bare interpreter of this venv, and one that imported redis-py (what any process that
talks to Redis with it holds).

    .venv/bin/python ops/bench/memory_bench.py [--runs 3] [--sleep-s 20] [--real-cli PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

from idle_bench import colabq, wait_terminal  # noqa: E402

from ops.bench.figures import Figure, check_runs, emit, spread  # noqa: E402
from ops.bench.rig import PY, fleet_env, private_redis, start_worker, tear_down  # noqa: E402

TARGET_MB = 60.0
ATTACH, WATCHDOG, EXEC = "exec client", "watchdog", "colab exec"
OURS = (ATTACH, WATCHDOG)
MB = 1024.0  # /proc reports kB


@dataclass(frozen=True)
class Mem:
    rss_mb: float
    pss_mb: float
    uss_mb: float


def read_mem(pid: int) -> Mem | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None

    def kb(text: str, name: str) -> float:
        m = re.search(rf"^{name}:\s+(\d+) kB", text, re.M)
        return float(m[1]) if m else 0.0

    uss = kb(rollup, "Private_Clean") + kb(rollup, "Private_Dirty")
    return Mem(kb(status, "VmRSS") / MB, kb(rollup, "Pss") / MB, uss / MB)


def argv_of(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def kind_of(argv: list[str]) -> str | None:
    if "worker.session.attach" in argv:
        return ATTACH
    if "worker.session.watchdog" in argv:
        return WATCHDOG
    if "exec" in argv and "--config" in argv:
        return EXEC
    return None  # a short `colab status` of the watchdog, the VM's own processes...


def job_processes(job_dir: Path) -> dict[str, list[int]]:
    """The host processes of one job, by kind: every live process naming its folder (or, for
    the bench's whole folder, of every job)."""
    needle = str(job_dir)
    found: dict[str, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            argv = argv_of(int(entry))
            kind = kind_of(argv) if any(needle in a for a in argv) else None
            if kind is not None:
                found.setdefault(kind, []).append(int(entry))
    return found


def sample(job_dir: Path, times: int = 3, every_s: float = 1.0) -> dict[str, Mem]:
    """The largest of `times` samples of each kind (a kind with several live processes, as
    during a re-attach, is their sum)."""
    best: dict[str, Mem] = {}
    for i in range(times):
        for kind, pids in job_processes(job_dir).items():
            mems = [m for m in map(read_mem, pids) if m is not None]
            tot = Mem(*(sum(getattr(m, f) for m in mems) for f in ("rss_mb", "pss_mb", "uss_mb")))
            if kind not in best or tot.rss_mb > best[kind].rss_mb:
                best[kind] = tot
        if i + 1 < times:
            time.sleep(every_s)
    return best


def end_leftovers(root: Path) -> None:
    """SIGKILL what the bench's jobs left running under `root` (a watchdog outlives its worker
    by design, until its next poll finds the session gone)."""
    for pids in job_processes(root).values():
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def submit(env: dict[str, str], root: Path, name: str, script_text: str) -> str:
    script = root / f"{name}.sh"
    script.write_text(script_text)
    out = colabq(
        env,
        "submit",
        str(script),
        "--name",
        name,
        "--wall",
        "10m",
        "--local-store",
        str(root / "store"),
        "--json",
        "--waive",
        "config-diff",
        "--waive",
        "paths",
        "--waive",
        "monitoring",
    )
    return str(json.loads(out)["jobs"][0]["job_id"])


def wait_state(r: redis.Redis, key: str, state: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = r.hget(key, "state")
        if got is not None and got.decode() == state:
            return
        time.sleep(0.1)
    raise SystemExit(f"{key} never reached {state}")


def one_session(
    env: dict[str, str], r: redis.Redis, root: Path, i: int, sleep_s: float
) -> dict[str, Mem]:
    job_id = submit(env, root, f"bench-mem-{i}", f"sleep {sleep_s:g}\necho done\n")
    wait_state(r, f"{env['COLABQ_KEY_PREFIX']}:job:{job_id}", "running")
    job_dir = Path(env["COLABQ_STATE_DIR"]) / "jobs" / job_id
    deadline = time.monotonic() + 30
    while set(job_processes(job_dir)) < {ATTACH, WATCHDOG, EXEC}:
        if time.monotonic() > deadline:
            raise SystemExit(f"job {job_id}: no exec client, watchdog and colab exec together")
        time.sleep(0.1)
    time.sleep(3.0)  # past start-up: the steady state a held session keeps for hours
    got = sample(job_dir)
    rec = wait_terminal(env, job_id, timeout_s=sleep_s + 120)
    if rec.get("state") != "succeeded":
        raise SystemExit(f"bench job {job_id} ended {rec.get('state')}: {rec.get('reason')}")
    return got


def floor_mb(code: str) -> float:
    """RSS of a fresh interpreter of this venv once `code` ran (as the session's processes
    start: `python -m`, with site-packages)."""
    probe = (
        f"{code}\nimport re\n"
        "print(re.search(r'VmRSS:\\s+(\\d+)', open('/proc/self/status').read())[1])"
    )
    out = subprocess.run([PY, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    return float(out.stdout.split()[-1]) / MB


def real_cli_peak_mb(cli: str, root: Path) -> float:
    """The real CLI's peak RSS for `colab exec` on a session it does not know (it fails once
    its modules are loaded and its sessions.json read: before any network call)."""
    cell = root / "cell.py"
    cell.write_text("print(1)\n")
    # As colabq's driver runs it: no daily update check (a PyPI request, imports of its own).
    settings = root / "home" / ".config" / "colab-cli" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"enable_update_check": False}))
    cfg = root / "real-cli-sessions.json"
    # A fresh parent per run: its children's peak is this run's alone.
    probe = (
        "import resource, subprocess, sys\n"
        "subprocess.run(sys.argv[1:], capture_output=True, timeout=120)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    out = subprocess.run(
        [PY, "-c", probe, cli, "--config", str(cfg), "exec", "-s", "none", "-f", str(cell)],
        capture_output=True, text=True, check=True, env={**os.environ, "HOME": str(root / "home")},
    )  # fmt: skip
    return float(out.stdout.split()[-1]) / MB


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sleep-s", type=float, default=20.0)
    ap.add_argument("--real-cli", default="", help="the real `colab` executable, if installed")
    a = ap.parse_args()
    runs = check_runs(a.runs)
    root = Path(tempfile.mkdtemp(prefix="colabq-memory-bench-"))
    real_cli = [real_cli_peak_mb(a.real_cli, root) for _ in range(runs)] if a.real_cli else None
    bare = floor_mb("pass")
    with_redis = floor_mb("import redis")
    samples: list[dict[str, Mem]] = []
    with private_redis() as (url, _):
        env = fleet_env(root, url)
        r = redis.Redis.from_url(url)
        worker = start_worker(env, root / "worker.log")
        try:
            for i in range(runs):
                got = one_session(env, r, root, i, a.sleep_s)
                samples.append(got)
                detail = ", ".join(
                    f"{k} RSS {m.rss_mb:.1f} MB (PSS {m.pss_mb:.1f}, USS {m.uss_mb:.1f})"
                    for k, m in sorted(got.items())
                )
                print(f"session {i + 1}: {detail}", flush=True)
        finally:
            end_leftovers(root)
            tear_down(env, root, worker)

    def col(kind: str, field: str) -> list[float]:
        return [getattr(s[kind], field) for s in samples]

    ours = [sum(s[k].rss_mb for k in OURS) for s in samples]
    ours_pss = [sum(s[k].pss_mb for k in OURS) for s in samples]
    ours_uss = [sum(s[k].uss_mb for k in OURS) for s in samples]
    for kind in (ATTACH, WATCHDOG, EXEC):
        whose = "colabq's" if kind in OURS else "the CLI's (the emulator here), not counted"
        print(
            f"  {kind:12} RSS {spread(col(kind, 'rss_mb'), 'MB')}, PSS "
            f"{spread(col(kind, 'pss_mb'), 'MB')}, USS {spread(col(kind, 'uss_mb'), 'MB')}"
            f"  [{whose}]"
        )
    print(
        f"  floors (same run): bare interpreter {bare:.1f} MB, interpreter + `import redis` "
        f"{with_redis:.1f} MB"
    )
    extra = {
        "exec_client_rss_mb": statistics.median(col(ATTACH, "rss_mb")),
        "watchdog_rss_mb": statistics.median(col(WATCHDOG, "rss_mb")),
        "emulator_colab_exec_rss_mb": statistics.median(col(EXEC, "rss_mb")),
        "ours_pss_mb": statistics.median(ours_pss),
        "ours_uss_mb": statistics.median(ours_uss),
        "floor_bare_python_mb": bare,
        "floor_python_redis_mb": with_redis,
    }
    note = (
        f"colabq's exec client + watchdog, RSS (PSS {spread(ours_pss, 'MB')}, USS "
        f"{spread(ours_uss, 'MB')}); the `colab exec` process is the CLI's, not counted "
        f"(emulator: {spread(col(EXEC, 'rss_mb'), 'MB')}). Floor: a process that talks to Redis "
        f"with redis-py holds {with_redis:.1f} MB RSS (bare interpreter {bare:.1f} MB; `import "
        f"redis` loads redis.asyncio and, when installed, the OpenTelemetry SDK), two of them "
        f"{2 * with_redis:.1f} MB"
    )
    figs = [
        Figure(
            "P8", "host memory per held session (exec client + watchdog), PSS", "MB",
            ours_pss, [0.0] * runs, "nothing added", f"<= {TARGET_MB:g} MB",
            met=statistics.median(ours_pss) <= TARGET_MB,
            note="PSS: each process's private pages plus its share of the pages it shares "
            "(the interpreter, libraries): what the two add to the host. " + note,
            extra=extra,
        ),
        Figure(
            "P8r", "the same, RSS (shared pages counted in each process)", "MB",
            ours, [0.0] * runs, "nothing added", f"<= {TARGET_MB:g} MB",
            met=statistics.median(ours) <= TARGET_MB,
            note=f"RSS floor: two processes that import redis-py hold {2 * with_redis:.1f} MB",
        ),
    ]  # fmt: skip
    if real_cli is not None:
        figs.append(
            Figure(
                "P8-cli",
                "the real `colab exec` process (not colabq's)",
                "MB",
                real_cli,
                None,
                "",
                "reference only",
                met=True,
                note="peak RSS of google-colab-cli 0.7.4's `exec` up to its first failure "
                "(imports, no connection): a floor for the CLI's process per held session",
            )
        )
    emit(figs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
