#!/usr/bin/env python3
"""A tiny training run for colabq's example repository: linear regression by mini-batch SGD.

Standard library only, apart from PyYAML for the config (Colab has it). Reads a YAML config,
trains on its CSV, writes a checkpoint per epoch to the folder it is given (`epoch-NNN.json` and
`last.json`), resumes from `--resume` (a checkpoint file, e.g. colabq's `COLABQ_RESUME_FROM`) or
from that folder's `last.json`, and writes a summary to `--results`. Metrics go to MLflow when
the job has a tracking server (`MLFLOW_TRACKING_URI`, or `MLFLOW_RUN_ID` from the colabq worker
that opened the run) and always to `metrics.jsonl` beside the checkpoints.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

COHORT = "linreg-batch-scaling"  # the tag runs are compared by


def read_config(path: Path) -> dict[str, Any]:
    try:
        import yaml
    except ImportError:
        sys.exit("train.py: PyYAML is missing: pip install pyyaml")
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict):
        sys.exit(f"train.py: {path} is not a mapping of settings")
    return data


def read_rows(path: Path) -> list[tuple[list[float], float]]:
    with path.open(newline="") as f:
        rows = [[float(v) for v in row] for row in csv.reader(f) if row and row[0][0] != "x"]
    return [(row[:-1], row[-1]) for row in rows]


def predict(w: list[float], b: float, x: list[float]) -> float:
    return sum(wi * xi for wi, xi in zip(w, x, strict=True)) + b


def mse(w: list[float], b: float, rows: list[tuple[list[float], float]]) -> float:
    return sum((predict(w, b, x) - y) ** 2 for x, y in rows) / len(rows)


def sgd_epoch(
    w: list[float], b: float, rows: list[tuple[list[float], float]], opt: dict[str, float]
) -> tuple[list[float], float]:
    """One pass in shuffled mini-batches; the mean gradient of each batch, one step each."""
    order = list(range(len(rows)))
    random.Random(opt["shuffle_seed"]).shuffle(order)
    size, lr, wd = int(opt["batch_size"]), opt["lr"], opt["weight_decay"]
    for start in range(0, len(order), size):
        batch = [rows[i] for i in order[start : start + size]]
        gw, gb = [0.0] * len(w), 0.0
        for x, y in batch:
            err = predict(w, b, x) - y
            gw = [g + 2 * err * xi / len(batch) for g, xi in zip(gw, x, strict=True)]
            gb += 2 * err / len(batch)
        w = [wi - lr * (g + wd * wi) for wi, g in zip(w, gw, strict=True)]
        b -= lr * gb
    return w, b


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically: a job killed mid-write never leaves a half checkpoint behind."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


class Metrics:
    """metrics.jsonl always; MLflow too when the job has a tracking server."""

    def __init__(self, out_dir: Path, params: dict[str, Any]) -> None:
        self.path = out_dir / "metrics.jsonl"
        self.mlflow: Any = None
        if not (os.environ.get("MLFLOW_TRACKING_URI") or os.environ.get("MLFLOW_RUN_ID")):
            print("[train] no MLFLOW_TRACKING_URI: metrics go to metrics.jsonl only", flush=True)
            return
        try:
            import mlflow
        except ImportError:
            print("[train] mlflow is not installed: metrics go to metrics.jsonl only", flush=True)
            return
        # A literal: colabq reads the experiment from here and opens the job's run in it.
        mlflow.set_experiment("synthetic-linreg")
        mlflow.start_run()  # resumes MLFLOW_RUN_ID, the run colabq opened for the job
        mlflow.set_tag("cohort", COHORT)
        mlflow.log_params(params)
        self.mlflow = mlflow

    def log(self, epoch: int, loss: float, seconds: float) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps({"epoch": epoch, "loss": loss, "seconds": seconds}) + "\n")
        if self.mlflow is not None:
            self.mlflow.log_metric("loss", loss, step=epoch)

    def close(self) -> None:
        if self.mlflow is not None:
            self.mlflow.end_run()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, required=True)
    p.add_argument("--output-dir", type=Path, help="checkpoints go here (default: the config's)")
    p.add_argument("--results", type=Path, default=Path("results.json"))
    p.add_argument("--resume", type=Path, help="a checkpoint to start from")
    p.add_argument("--lr", type=float, help="override the config's optimizer.lr (a sweep)")
    p.add_argument("--seed", type=int, help="override the config's seed (a sweep)")
    args = p.parse_args(argv)

    cfg = read_config(args.config)
    base = Path(__file__).resolve().parent  # paths in a config are relative to the repository
    seed = args.seed if args.seed is not None else int(cfg["seed"])
    lr = args.lr if args.lr is not None else float(cfg["optimizer"]["lr"])
    batch_size, epochs = int(cfg["batch_size"]), int(cfg["epochs"])
    weight_decay = float(cfg["optimizer"].get("weight_decay", 0.0))
    out_dir = args.output_dir or base / cfg.get("output_dir", "checkpoints")
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = read_rows(base / cfg["data"]["train_file"])

    rng = random.Random(seed)
    w, b, done = [rng.uniform(-0.1, 0.1) for _ in rows[0][0]], 0.0, 0
    resume = args.resume or (out_dir / "last.json" if (out_dir / "last.json").exists() else None)
    if resume is not None and resume.is_dir():  # a synced checkpoints/ folder
        resume = resume / "last.json"
    if resume is not None:
        state = json.loads(resume.read_text())
        w, b, done = state["w"], state["b"], int(state["epoch"])
        print(f"[train] resuming from {resume} after epoch {done}", flush=True)

    params = {"batch_size": batch_size, "lr": lr, "seed": seed, "epochs": epochs}
    print(f"[train] {len(rows)} rows, {params}", flush=True)
    metrics = Metrics(out_dir, params)
    loss, times = mse(w, b, rows), []
    for epoch in range(done + 1, epochs + 1):
        started = time.perf_counter()
        opt = {"batch_size": batch_size, "lr": lr, "weight_decay": weight_decay}
        w, b = sgd_epoch(w, b, rows, {**opt, "shuffle_seed": seed * 100_003 + epoch})
        loss = mse(w, b, rows)
        times.append(time.perf_counter() - started)
        state = {"epoch": epoch, "w": w, "b": b, "loss": loss, "config": str(args.config)}
        write_json(out_dir / f"epoch-{epoch:03d}.json", state)
        write_json(out_dir / "last.json", state)
        metrics.log(epoch, loss, times[-1])
        print(f"epoch {epoch}/{epochs} loss {loss:.5f} ({times[-1]:.3f} s)", flush=True)
    metrics.close()

    per_epoch = sum(times) / len(times) if times else None
    write_json(
        args.results,
        {
            "epochs": epochs,
            "final_loss": loss,
            "weights": w,
            "bias": b,
            "seconds_per_epoch": per_epoch,
            "checkpoint": str(out_dir / "last.json"),
            "params": params,
        },
    )
    print(f"[train] done: loss {loss:.5f}, results in {args.results}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
