#!/usr/bin/env bash
# The job colabq runs on the Colab VM: train, checkpoint every epoch, summarise.
#
# It runs in the job's own folder (colabq syncs `checkpoints/` from there) and writes
# checkpoints/ and results.json into the folder it is started in. The code is this repository:
# beside this script when it is run from a clone, else cloned from CODE_URL (a job
# `env:` entry; CODE_REF picks the branch or tag, CODE_SUBDIR the folder in that repository).
#
# Settings, all optional: CONFIG (default configs/run.yaml, relative to the repository), LR and
# SEED (a sweep's overrides), PYTHON (default python3). colabq's COLABQ_RESUME_FROM (a
# checkpoint of an earlier segment) is resumed from.
set -euo pipefail

OUT="$PWD"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python3}"
CONFIG="${CONFIG:-configs/run.yaml}"
log() { echo "[job] $(date -u +%H:%M:%S) $*"; }

if [ -f "$HERE/train.py" ]; then
  CODE="$HERE"
elif [ -n "${CODE_URL:-}" ]; then
  log "cloning $CODE_URL (${CODE_REF:-default branch})"
  git clone --quiet --depth 1 ${CODE_REF:+--branch "$CODE_REF"} "$CODE_URL" "$OUT/code"
  CODE="$OUT/code/${CODE_SUBDIR:-.}"
else
  echo "job.sh: train.py is not beside this script: set CODE_URL (and CODE_SUBDIR) in the job's env" >&2
  exit 2
fi

if [ -n "${MLFLOW_TRACKING_URI:-}${MLFLOW_RUN_ID:-}" ] && ! "$PYTHON" -c "import mlflow" 2>/dev/null; then
  log "installing mlflow-skinny: this job logs to MLflow"
  "$PYTHON" -m pip install --quiet mlflow-skinny
fi

args=(--config "$CONFIG" --output-dir "$OUT/checkpoints" --results "$OUT/results.json")
if [ -n "${LR:-}" ]; then args+=(--lr "$LR"); fi
if [ -n "${SEED:-}" ]; then args+=(--seed "$SEED"); fi
if [ -n "${COLABQ_RESUME_FROM:-}" ]; then args+=(--resume "$COLABQ_RESUME_FROM"); fi

log "config $CONFIG, checkpoints in $OUT/checkpoints"
cd "$CODE"
"$PYTHON" -u train.py "${args[@]}"
log "done: $(find "$OUT/checkpoints" -name 'epoch-*.json' | wc -l | tr -d ' ') checkpoint(s), $OUT/results.json"
