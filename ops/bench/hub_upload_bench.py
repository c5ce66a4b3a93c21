"""Benchmark: `HubStore.upload_folder` versus the `hf upload` CLI, on a local Hub server.

Starts `ops/hubserver` in a subprocess, writes a checkpoint folder of about 200 MB (three large
binary shards, twenty small binary shards, twenty small text files; random bytes), and uploads it
into two private repos, one per method, several runs each (alternating which goes first). Before
every upload the head of every file is rewritten with fresh random bytes, so that no LFS object
is ever already on the server (no deduplication flatters either side). Every upload is checked by
reading the byte count back. Prints MB/s (1 MB = 10**6 bytes) per run, the medians and the ratio.
Always exits 0 (it reports; it does not gate).

    .venv/bin/python ops/bench/hub_upload_bench.py [--runs 3] [--size-mb 200]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HF_CLI = Path(sys.executable).parent / "hf"
TOKEN = "hf_bench_write_0123456789abcdef"
CHUNK = 8 * 1024 * 1024


def start_server(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    tokens = data_dir.parent / "tokens.json"
    tokens.write_text(json.dumps({TOKEN: {"user": "alice", "role": "write"}}))
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "ops" / "hubserver"), "--data", str(data_dir),
         "--tokens", str(tokens), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("hubserver listening on "):
        proc.kill()
        raise SystemExit(f"hub_upload_bench: the server did not start ({line!r})")
    return proc, line.removeprefix("hubserver listening on ")


def _write_random(path: Path, size: int, *, text: bool = False) -> None:
    with path.open("wb") as f:
        left = size
        while left > 0:
            n = min(CHUNK, left)
            f.write(os.urandom(n // 2 + 1).hex().encode()[:n] if text else os.urandom(n))
            left -= n


def make_checkpoint(folder: Path, total_mb: int) -> int:
    """Three large shards (90%), twenty small binary shards (9%), twenty text files (1%)."""
    total = total_mb * 10**6
    (folder / "shards").mkdir(parents=True)
    (folder / "logs").mkdir()
    for i in range(3):
        _write_random(folder / f"model-{i:05d}-of-00003.bin", int(total * 0.30))
    for i in range(20):
        _write_random(folder / "shards" / f"optim-{i:02d}.bin", int(total * 0.09 / 20))
    for i in range(20):
        _write_random(folder / "logs" / f"rank-{i:02d}.log", int(total * 0.01 / 20), text=True)
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def refresh(folder: Path) -> None:
    """New content hashes for every file, same sizes and kinds (binary stays binary)."""
    for path in folder.rglob("*"):
        if path.is_file():
            with path.open("r+b") as f:
                head = os.urandom(8).hex().encode() if path.suffix == ".log" else os.urandom(16)
                f.write(b"\0" + head[1:] if path.suffix == ".bin" else head)


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--size-mb", type=int, default=200)
    args = p.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from ops.bench.figures import check_runs

    check_runs(args.runs)
    work = Path(tempfile.mkdtemp(prefix="colabq-hub-bench-"))
    proc, url = start_server(work / "hub")
    try:
        # Read by huggingface_hub at import time: set before worker.store.hub imports it.
        env = {
            "HF_ENDPOINT": url,
            "HF_HUB_DISABLE_XET": "1",
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_DISABLE_UPDATE_CHECK": "1",
            "HF_HOME": str(work / "hf_home"),
        }
        os.environ.update(env)
        sys.path.insert(0, str(ROOT))
        from worker.spec import ArtifactDest
        from worker.store.hub import HubStore

        store = HubStore(url, TOKEN)
        repos = {
            "colabq": ArtifactDest(kind="hf", repo="alice/bench-colabq"),
            "hf upload": ArtifactDest(kind="hf", repo="alice/bench-hf-cli"),
        }
        for dest in repos.values():
            store.check_output_repo(dest)
        folder = work / "checkpoint"
        size = make_checkpoint(folder, args.size_mb)
        cli_env = {**os.environ, **env, "HF_TOKEN": TOKEN}

        def upload(method: str, path_in_repo: str) -> None:
            dest = repos[method]
            if method == "colabq":
                store.upload_folder(folder, dest, path_in_repo)
            else:
                cli = subprocess.run(
                    [str(HF_CLI), "upload", dest.repo, str(folder), path_in_repo, "--quiet"],
                    env=cli_env, capture_output=True, text=True, timeout=1800, check=False,
                )  # fmt: skip
                if cli.returncode != 0:
                    raise SystemExit(f"hub_upload_bench: hf upload failed: {cli.stderr[-500:]}")
            uploaded = store.exists_nonempty(f"hf://{dest.repo}/{path_in_repo}")
            if uploaded != size:
                raise SystemExit(f"hub_upload_bench: {method} left {uploaded} of {size} bytes")

        print(f"hub_upload_bench: {size / 1e6:.0f} MB in "
              f"{sum(1 for p in folder.rglob('*') if p.is_file())} files, {args.runs} run(s), "
              f"server {url}")  # fmt: skip
        rates: dict[str, list[float]] = {m: [] for m in repos}
        for run in range(args.runs):
            order = list(repos) if run % 2 == 0 else list(reversed(repos))
            for method in order:
                refresh(folder)
                seconds = timed(partial(upload, method, f"run-{run}"))
                rates[method].append(size / 1e6 / seconds)
                print(
                    f"  run {run + 1} {method:>9}: {seconds:6.2f} s  {rates[method][-1]:7.1f} MB/s"
                )
        medians = {m: statistics.median(r) for m, r in rates.items()}
        for method, rate in medians.items():
            print(f"median {method:>9}: {rate:7.1f} MB/s")
        ratio = medians["colabq"] / medians["hf upload"]
        print(f"ratio colabq / hf upload: {ratio:.2f}")
        from ops.bench.figures import Figure, emit

        emit([
            Figure(
                "H1", f"checkpoint upload to the Hub, {size / 1e6:.0f} MB", "MB/s",
                rates["colabq"], rates["hf upload"], "`hf upload`", ">= 0.8x anchor",
                ratio >= 0.8,
            )
        ])  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
