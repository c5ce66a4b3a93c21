"""P9: log forwarding lag of a job that prints 100k lines; M2: the Redis memory those lines take.

Jobs go the way a user's do: `colabq submit` -> a real Celery worker -> the Colab emulator, on a
private redis-server. The job prints N lines (100k), then one line holding the time it printed
it (the VM's clock: this machine's). From the moment of submitting, this process polls the tail
of the job's Redis log stream (XREVRANGE, every 5 ms) until that last line is there:
  P9 = when the last line was seen in the stream - when the job printed it
Anchor, in the same run: the same N lines printed by the same code locally, into a pipe this
process reads (the time from its first line to its last). Target: P9 median <= 1 s.

M2: `MEMORY USAGE` of the job's stream once the job ended, per 100k lines, (a) as kept in full
(the bench's worker runs with COLABQ_LOG_STREAM_MAXLEN above N) and (b) as the default cap
(`Settings.log_stream_maxlen`) would keep it: a copy of the stream trimmed the way XADD trims
it (MAXLEN ~). Cross-check: `INFO memory` used_memory before the job and after it (the job's
record and history are in it too). No target.

    .venv/bin/python ops/bench/logs_bench.py [--runs 3] [--lines 100000]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

from idle_bench import wait_terminal  # noqa: E402
from memory_bench import ATTACH, end_leftovers, job_processes, submit  # noqa: E402

from ops.bench.figures import Figure, check_runs, emit  # noqa: E402
from ops.bench.rig import PY, fleet_env, private_redis, start_worker, tear_down  # noqa: E402
from worker.records.keys import Keys  # noqa: E402
from worker.settings import Settings  # noqa: E402

TARGET_S = 1.0
LAST = "BENCH_LAST="
# The job's code, as the VM runs it and as the anchor runs it here.
PRINTER = (
    "import sys, time\n"
    "n = int(sys.argv[1])\n"
    "print('BENCH_FIRST=%f' % time.time())\n"
    "for i in range(n):\n"
    "    print('line %d of the bench job' % i)\n"
    "print('BENCH_LAST=%f' % time.time(), flush=True)\n"
)


def job_script(lines: int) -> str:
    return f"python3 - {lines} <<'EOF'\n{PRINTER}EOF\n"


def local_print_s(lines: int) -> float:
    """The anchor: the same lines printed here into a pipe, first line to last."""
    proc = subprocess.Popen([PY, "-c", PRINTER, str(lines)], stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate()
    first = float(out.split("BENCH_FIRST=", 1)[1].split()[0])
    last = float(out.rsplit(LAST, 1)[1].split()[0])
    return last - first


def peak_rss_mb(pid: int) -> float:
    """VmHWM: the most memory the process ever held resident."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    m = re.search(r"^VmHWM:\s+(\d+) kB", status, re.M)
    return float(m[1]) / 1024 if m else 0.0


def wait_last_line(
    r: redis.Redis, key: str, job_dir: Path, timeout_s: float
) -> tuple[float, float, float]:
    """(when the job printed its last line, when this process first saw it in the stream, the
    exec client's peak RSS by then)."""
    deadline = time.monotonic() + timeout_s
    peak = 0.0
    while time.monotonic() < deadline:
        for pid in job_processes(job_dir).get(ATTACH, []):
            peak = max(peak, peak_rss_mb(pid))
        for _, fields in r.xrevrange(key, count=200):
            text = fields[b"line"].decode(errors="replace")
            if text.startswith(LAST):
                return float(text[len(LAST) :]), time.time(), peak
        time.sleep(0.005)
    raise SystemExit(f"the job's last line never reached {key}")


def stream_kb(r: redis.Redis, key: str, maxlen: int | None = None) -> float:
    """MEMORY USAGE of the stream (all of it), or of a copy trimmed as XADD's MAXLEN ~ would."""
    if maxlen is None:
        return float(r.memory_usage(key, samples=0) or 0) / 1024
    tmp = f"{key}:bench-trimmed"
    r.copy(key, tmp, replace=True)
    # One XTRIM ~ evicts at most 100 nodes' worth; XADD trims a little each time, so trim to
    # where it would be.
    while r.xtrim(tmp, maxlen=maxlen, approximate=True):
        pass
    try:
        return float(r.memory_usage(tmp, samples=0) or 0) / 1024
    finally:
        r.delete(tmp)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--lines", type=int, default=100_000)
    a = ap.parse_args()
    runs = check_runs(a.runs)
    default_maxlen = int(Settings.model_fields["log_stream_maxlen"].default)
    root = Path(tempfile.mkdtemp(prefix="colabq-logs-bench-"))
    lags: list[float] = []
    anchors: list[float] = []
    full_kb: list[float] = []
    capped_kb: list[float] = []
    used_kb: list[float] = []
    peaks: list[float] = []
    per = 100_000 / a.lines
    with private_redis() as (url, _):
        env = {**fleet_env(root, url), "COLABQ_LOG_STREAM_MAXLEN": str(a.lines * 2)}
        keys = Keys(env["COLABQ_KEY_PREFIX"])
        r = redis.Redis.from_url(url)
        worker = start_worker(env, root / "worker.log")
        try:
            for i in range(runs):
                anchors.append(local_print_s(a.lines))
                used0 = int(r.info("memory")["used_memory"])
                job_id = submit(env, root, f"bench-logs-{i}", job_script(a.lines))
                job_dir = Path(env["COLABQ_STATE_DIR"]) / "jobs" / job_id
                printed_at, seen_at, peak = wait_last_line(r, keys.log(job_id), job_dir, 300)
                lags.append(seen_at - printed_at)
                peaks.append(peak)
                rec = wait_terminal(env, job_id, timeout_s=300)
                if rec.get("state") != "succeeded":
                    raise SystemExit(f"job {job_id} ended {rec.get('state')}: {rec.get('reason')}")
                used_kb.append((int(r.info("memory")["used_memory"]) - used0) / 1024 * per)
                entries = int(r.xlen(keys.log(job_id)))
                full_kb.append(stream_kb(r, keys.log(job_id)) * per)
                capped_kb.append(stream_kb(r, keys.log(job_id), default_maxlen))
                print(
                    f"job {i + 1}: lag {lags[-1]:.3f} s (local print of the same lines "
                    f"{anchors[-1]:.3f} s); stream {entries} entries, {full_kb[-1]:,.0f} KB per "
                    f"100k lines, {capped_kb[-1]:,.0f} KB under the default cap "
                    f"({default_maxlen}); used_memory delta {used_kb[-1]:,.0f} KB per 100k; "
                    f"exec client peak RSS {peaks[-1]:.1f} MB",
                    flush=True,
                )
        finally:
            end_leftovers(root)
            tear_down(env, root, worker)
    per_entry = statistics.median(full_kb) * 1024 / 100_000
    text_b = sum(len(f"line {i} of the bench job") for i in range(a.lines)) / a.lines
    emit(
        [
            Figure(
                "P9", f"log lag, job printing {a.lines:,} lines", "s", lags, anchors,
                "the same lines printed locally", f"<= {TARGET_S:g} s",
                met=statistics.median(lags) <= TARGET_S,
                note="from the job's last line printed on the VM to that line in its Redis "
                f"stream; the exec client's peak RSS meanwhile {statistics.median(peaks):.1f} MB",
                extra={"exec_client_peak_rss_mb": statistics.median(peaks)},
            ),
            Figure(
                "M2", "Redis memory per 100k log lines (stream)", "KB", full_kb, None, "",
                "none (a figure)", met=True,
                note=f"{per_entry:.0f} B per line: its {text_b:.0f} B of text and "
                f"{per_entry - text_b:.0f} B of stream entry (ID delta, flags, the `stream` "
                f"field's value, listpack framing); the default cap (log_stream_maxlen "
                f"{default_maxlen}) keeps a job's stream at "
                f"{statistics.median(capped_kb):,.0f} KB whatever it prints; used_memory delta "
                f"{statistics.median(used_kb):,.0f} KB per 100k lines",
                extra={
                    "capped_kb": statistics.median(capped_kb),
                    "used_memory_delta_kb": statistics.median(used_kb),
                    "bytes_per_entry": per_entry,
                },
            ),
        ]
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
