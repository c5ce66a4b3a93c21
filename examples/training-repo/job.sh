#!/usr/bin/env bash
# The job colabq runs on the Colab VM: say which commit it runs, train, checkpoint every epoch.
#
# colabq ships this repository at the submitted commit (job.yaml's `code:`), runs `uv sync
# --frozen`, and starts this script in the repository's folder under `uv run --no-sync`: the
# code is the folder it starts in, and checkpoints/ and results.json land there, where colabq
# syncs them from. Locally: `uv run bash job.sh` here (or `bash job.sh` with PyYAML installed);
# run from another folder, the code is beside this script and the outputs go to that folder.
#
# Settings, all optional: CONFIG (default configs/run.yaml, relative to the repository), LR and
# SEED (a sweep's overrides), PYTHON (default python3, the project's under `uv run`). colabq's
# COLABQ_RESUME_FROM (a checkpoint of an earlier segment) is resumed from.
set -euo pipefail

OUT="$PWD"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python3}"
CONFIG="${CONFIG:-configs/run.yaml}"
log() { echo "[job] $(date -u +%H:%M:%S) $*"; }

if [ -f "$HERE/train.py" ]; then
  CODE="$HERE"
elif [ -f "$OUT/train.py" ]; then
  CODE="$OUT"  # on the VM: colabq's copy of this script, started in the repository's folder
else
  echo "job.sh: train.py is neither beside this script nor in $OUT: submit with 'code: git' or" \
    "'code: snapshot' in the job file, so the job starts in the repository's folder" >&2
  exit 2
fi

# The commit this run is: a snapshot records it in .colabq-commit at the repository's top (it
# has no .git), a checkout answers git. Looked for upwards: the job may start in a subfolder.
commit_of() {
  local dir="$1"
  while :; do
    if [ -f "$dir/.colabq-commit" ]; then
      echo "$(cat "$dir/.colabq-commit") (snapshot)"
      return
    fi
    [ "$dir" = / ] && break
    dir="$(dirname "$dir")"
  done
  git -C "$1" rev-parse HEAD 2>/dev/null | sed 's/$/ (git checkout)/' || true
}
log "commit $(commit_of "$CODE" | grep . || echo 'unknown: not a git checkout nor a colabq snapshot')"

if [ -n "${MLFLOW_TRACKING_URI:-}${MLFLOW_RUN_ID:-}" ] && ! "$PYTHON" -c "import mlflow" 2>/dev/null; then
  # Into the VM's environment only, never into uv.lock: the run logs to MLflow, the lock stays.
  log "installing mlflow-skinny: this job logs to MLflow"
  if [ -n "${VIRTUAL_ENV:-}" ] && command -v uv >/dev/null; then
    uv pip install --quiet mlflow-skinny
  else
    "$PYTHON" -m pip install --quiet mlflow-skinny
  fi
fi

args=(--config "$CONFIG" --output-dir "$OUT/checkpoints" --results "$OUT/results.json")
if [ -n "${LR:-}" ]; then args+=(--lr "$LR"); fi
if [ -n "${SEED:-}" ]; then args+=(--seed "$SEED"); fi
if [ -n "${COLABQ_RESUME_FROM:-}" ]; then args+=(--resume "$COLABQ_RESUME_FROM"); fi

log "config $CONFIG, checkpoints in $OUT/checkpoints"
cd "$CODE"
"$PYTHON" -u train.py "${args[@]}"
log "done: $(find "$OUT/checkpoints" -name 'epoch-*.json' | wc -l | tr -d ' ') checkpoint(s), $OUT/results.json"
