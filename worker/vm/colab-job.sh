#!/usr/bin/env bash
# colabq's wrapper: runs on the Colab VM (or the emulator's sandbox) with /content as the working
# directory, started detached by the launch cell (its own session: no exec client, kernel restart
# or worker host keeps it alive or ends it). It owns the job's life on the VM: the first upload
# (must succeed before the job runs), periodic syncs, the job under `timeout`, `exit_code`, the
# final upload, a heartbeat file the owner's watchdog reads while no exec client is attached, and
# self-release only after the final upload succeeded (otherwise the VM holds the only copy of the
# results) and only after giving its owner `--release-hold-s` to stop the VM itself.
#
# Everything it prints goes to run/console.log, which attach cells follow by byte offset; the
# final upload stores a copy of it (logs/console.log) for a VM gone before its tail was forwarded.
#
# Usage: bash colab-job.sh --job ID --nonce N --ttl S --sync-interval S --dest-kind K
#          --dest-repo R --dest-type T --prefix P [--sync PATH]... [--token-file F]
#          [--job-secret hf_token] [--hf-endpoint URL] [--upload-attempts N]
#          [--upload-backoff-s S] [--resume URI] [--segment N] [--heartbeat-s S]
#          [--release-hold-s S] [--gpu-idle S [--gpu-idle-below P]] [--code-mode git|snapshot --code-commit SHA
#          [--code-remote R | --code-snapshot URI] [--code-subdir D] [--code-uv]
#          [--code-repair NAME]... [--git-credentials-file F] [--git-ssh-key-file F]]
#          [--input NAME=URI]... -- CMD [ARGS]...
# The job's user (colabq_jobuser.sh): run as root (Colab), the wrapper runs the job's own
# processes as an unprivileged user, with a HOME of its own; the job's folder is writable for it,
# colabq's files in it (logs/, run/) stay the wrapper's.
# The token: its one copy is read into this shell (never exported) and deleted at once; only the
# uploader and downloader processes (root) get it, as HF_TOKEN in their own environments. The job
# gets a copy of its own (a file, HF_TOKEN_PATH, never a value) only with --job-secret hf_token.
# The code (--code-mode): colabq_code.py puts the repository at exactly its commit in repo/ (and,
# with --code-uv, its environment: `uv sync --frozen`, then the job under `uv run --no-sync`);
# the job then starts in repo/<subdir>, where its sync paths are too. The git credential or deploy
# key, if any, is moved out of /content at once and deleted once the fetch is over; only git (and
# its ssh) reads it.
# The inputs (--input, colabq_inputs.py): downloaded in parallel beside the code stage, before the
# job starts, into inputs/<NAME>, each named to the job as COLABQ_INPUT_<NAME>; one missing or
# empty and the job does not run (exit 6).
# The GPU idle watch (--gpu-idle, colabq_gpuidle.py): the GPUs below P % (5) for S seconds while the
# job runs stop it as `timeout` would; the wrapper then syncs as for any end and says GPU_IDLE.
# Prints sentinels __COLABQ_<nonce>_<WHAT>__=<value> that the runner parses; a job that exits 126
# or 127 gets EXIT_WHY, what its shell said it could not run (worker/exitwhy.py words it).
set -u
# Colab presets that break uv projects and plotting in a batch job.
unset UV_SYSTEM_PYTHON PYTHONPATH MPLBACKEND

JOB="" NONCE="" TTL="" SYNC_INTERVAL=900 DEST_KIND="" DEST_REPO="" DEST_TYPE="model" PREFIX=""
SYNC_PATHS=() TOKEN_FILE="" JOB_SECRETS=() HF_ENDPOINT_ARG="" RESUME_URI=""
UPLOAD_ATTEMPTS=6 UPLOAD_BACKOFF_S=4 SEGMENT=0 HEARTBEAT_S=5 RELEASE_HOLD_S=30
GPU_IDLE_S="" GPU_IDLE_BELOW=5 CODE_MODE="" CODE_SNAPSHOT="" GIT_CREDENTIALS_FILE="" CODE_ARGS=()
GIT_SSH_KEY_FILE="" INPUTS=() INPUTS_PID=""
while [ $# -gt 0 ]; do
  case "$1" in
    --job) JOB="$2"; shift 2 ;;
    --nonce) NONCE="$2"; shift 2 ;;
    --ttl) TTL="$2"; shift 2 ;;
    --sync-interval) SYNC_INTERVAL="$2"; shift 2 ;;
    --dest-kind) DEST_KIND="$2"; shift 2 ;;
    --dest-repo) DEST_REPO="$2"; shift 2 ;;
    --dest-type) DEST_TYPE="$2"; shift 2 ;;
    --prefix) PREFIX="$2"; shift 2 ;;
    --sync) SYNC_PATHS+=("$2"); shift 2 ;;
    --token-file) TOKEN_FILE="$2"; shift 2 ;;
    --job-secret) JOB_SECRETS+=("$2"); shift 2 ;;
    --hf-endpoint) HF_ENDPOINT_ARG="$2"; shift 2 ;;
    --upload-attempts) UPLOAD_ATTEMPTS="$2"; shift 2 ;;
    --upload-backoff-s) UPLOAD_BACKOFF_S="$2"; shift 2 ;;
    --resume) RESUME_URI="$2"; shift 2 ;;
    --segment) SEGMENT="$2"; shift 2 ;;
    --heartbeat-s) HEARTBEAT_S="$2"; shift 2 ;;
    --release-hold-s) RELEASE_HOLD_S="$2"; shift 2 ;;
    --gpu-idle) GPU_IDLE_S="$2"; shift 2 ;;
    --gpu-idle-below) GPU_IDLE_BELOW="$2"; shift 2 ;;
    --code-mode) CODE_MODE="$2"; CODE_ARGS+=(--mode "$2"); shift 2 ;;
    --code-commit) CODE_ARGS+=(--commit "$2"); shift 2 ;;
    --code-remote) CODE_ARGS+=(--remote "$2"); shift 2 ;;
    --code-snapshot) CODE_SNAPSHOT="$2"; shift 2 ;;
    --code-subdir) CODE_ARGS+=(--subdir "$2"); shift 2 ;;
    --code-uv) CODE_ARGS+=(--uv); shift ;;
    --code-repair) CODE_ARGS+=(--repair "$2"); shift 2 ;;
    --git-credentials-file) GIT_CREDENTIALS_FILE="$2"; shift 2 ;;
    --git-ssh-key-file) GIT_SSH_KEY_FILE="$2"; shift 2 ;;
    --input) INPUTS+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) echo "colab-job.sh: unknown argument $1" >&2; exit 64 ;;
  esac
done
if [ -z "$JOB" ] || [ -z "$NONCE" ] || [ -z "$TTL" ] || [ $# -eq 0 ]; then
  echo "colab-job.sh: --job, --nonce, --ttl and a command are required" >&2
  exit 64
fi

ROOT="$PWD"
WORK="$ROOT/colab-jobs/$JOB"
JOB_DIR="$WORK"  # the job's folder: repo/<subdir> once the code is there
JOB_REL=""  # the same, from $WORK (the sync paths are uploaded from there, by the uploader)
LOGS="$WORK/logs"
RUN="$WORK/run"
mkdir -p "$LOGS" "$RUN"
# shellcheck source=colabq_jobuser.sh
. "$(dirname "${BASH_SOURCE[0]}")/colabq_jobuser.sh"
job_user_init "$ROOT" "$JOB"
if [ -n "$JOB_UID" ]; then
  # The job writes its folder; the sticky bit keeps colabq's entries in it (logs/, run/) the
  # wrapper's. Its script came 0600 with the bundle: the job's user must read it.
  chgrp "$JOB_GID" "$WORK" && chmod 1775 "$WORK"
  chmod 644 "$ROOT/colab-user-job.sh" "$ROOT/colabq_envcheck.py" 2>/dev/null
fi
# Each segment of a restarted job keeps its own log (and console copy) beside the earlier ones.
if [ "$SEGMENT" = "0" ]; then JOB_LOG="$LOGS/job.log"; else JOB_LOG="$LOGS/job.s$SEGMENT.log"; fi
if [ "$SEGMENT" = "0" ]; then CONSOLE_COPY="$LOGS/console.log"; else CONSOLE_COPY="$LOGS/console.s$SEGMENT.log"; fi
sentinel() { echo "__COLABQ_${NONCE}_$1__=$2"; }
# A shell's or a launcher's line saying what it could not run (exit 126 or 127).
CANNOT_RUN=': (command not found|not found|Permission denied|No such file or directory|Is a directory|cannot execute.*)$'

# The heartbeat: {"at": epoch, "phase": P, "pid": wrapper pid, "console_bytes": N}, rewritten
# atomically every HEARTBEAT_S while the wrapper lives (the loop stops with it); "done" (or
# "kept") once the final upload is over. With the GPU idle watch, "gpu_util" too (its last reading). A stale heartbeat therefore means nothing of this job
# runs on the VM any more; console_bytes, beyond what was forwarded, shows a stalled attach.
echo starting > "$RUN/phase"
beat() {
  local tmp="$RUN/.heartbeat.$BASHPID.tmp" size util
  size=$(stat -c %s "$RUN/console.log" 2>/dev/null || echo 0)
  util=""
  [ -n "$GPU_IDLE_S" ] && util=", \"gpu_util\": \"$(cat "$RUN/gpu_util" 2>/dev/null)\""
  printf '{"at": %s, "phase": "%s", "pid": %d, "segment": %s, "console_bytes": %s%s}\n' \
    "$(date +%s.%N)" "$(cat "$RUN/phase" 2>/dev/null)" "$$" "$SEGMENT" "$size" "$util" > "$tmp" \
    && mv -f "$tmp" "$RUN/heartbeat"
}
phase() { echo "$1" > "$RUN/phase"; beat; }
( while kill -0 $$ 2>/dev/null; do beat; sleep "$HEARTBEAT_S"; done ) </dev/null >/dev/null 2>&1 &
BEAT_PID=$!

UPLOAD_TOKEN=""
if [ -n "$TOKEN_FILE" ] && [ -f "$TOKEN_FILE" ]; then
  UPLOAD_TOKEN="$(cat "$TOKEN_FILE")"
  rm -f "$TOKEN_FILE"
fi
unset HF_TOKEN HF_TOKEN_PATH  # the job's environment names no token but the one it asked for
if [ -n "$UPLOAD_TOKEN" ] && [[ " ${JOB_SECRETS[*]-} " == *" hf_token "* ]]; then
  # Asked for by name: a copy the job's user owns, in its HOME (or, as before, the secrets folder).
  if [ -n "$JOB_UID" ]; then MINE="$JOB_HOME/.colabq"; else MINE="$ROOT/.colabq-secrets/$JOB"; fi
  mkdir -p "$MINE" && chmod 700 "$(dirname "$MINE")" "$MINE"
  (umask 077 && printf '%s\n' "$UPLOAD_TOKEN" > "$MINE/hf-token")
  job_user_owns "$MINE"
  export HF_TOKEN_PATH="$MINE/hf-token"
fi
take_secret() {
  # A host's git secret (its credential, its deploy key) out of /content at once, into a folder
  # only the wrapper's user reads (0700, the file 0600); prints where it is now.
  local dir="$ROOT/.colabq-secrets/$JOB"
  mkdir -p "$dir" && chmod 700 "$ROOT/.colabq-secrets" "$dir"
  mv "$1" "$dir/$2" && chmod 600 "$dir/$2" && echo "$dir/$2"
}
drop_secrets() {
  rm -f "$GIT_CREDENTIALS_FILE" "$GIT_SSH_KEY_FILE" "$ROOT/.colabq-secrets/$JOB/known_hosts"
}
[ -f "$GIT_CREDENTIALS_FILE" ] && GIT_CREDENTIALS_FILE="$(take_secret "$GIT_CREDENTIALS_FILE" git-credentials)"
[ -f "$GIT_SSH_KEY_FILE" ] && GIT_SSH_KEY_FILE="$(take_secret "$GIT_SSH_KEY_FILE" git-ssh-key)"
[ -f "$GIT_CREDENTIALS_FILE" ] || GIT_CREDENTIALS_FILE=""
[ -f "$GIT_SSH_KEY_FILE" ] || GIT_SSH_KEY_FILE=""
[ -n "$GIT_CREDENTIALS_FILE" ] && CODE_ARGS+=(--credentials "$GIT_CREDENTIALS_FILE")
[ -n "$GIT_SSH_KEY_FILE" ] && CODE_ARGS+=(--ssh-key "$GIT_SSH_KEY_FILE" --known-hosts "$ROOT/colabq_known_hosts")
if [ -n "$HF_ENDPOINT_ARG" ]; then
  export HF_ENDPOINT="$HF_ENDPOINT_ARG"
fi

HUB_OPTS=(--attempts "$UPLOAD_ATTEMPTS" --backoff-base-s "$UPLOAD_BACKOFF_S")
[ -n "$HF_ENDPOINT_ARG" ] && HUB_OPTS+=(--endpoint "$HF_ENDPOINT_ARG")

upload() {
  # One upload of one path under the job's folder (one commit, retried); only this process gets
  # the token. It follows no symbolic link (the job made them, the uploader is root): a link is
  # left out and named in its output (colabq_tree.py).
  HF_TOKEN="$UPLOAD_TOKEN" python3 "$ROOT/colabq_sync.py" --kind "$DEST_KIND" --repo "$DEST_REPO" \
    --repo-type "$DEST_TYPE" "${HUB_OPTS[@]}" --root "$WORK" --src "$1" --dst "$2"
}

sync_all() {
  # One upload pass: the log folder, then every declared sync path that exists (a link counts:
  # the uploader says it left it out), each named from the job's folder.
  upload logs "${PREFIX:+$PREFIX/}logs/$JOB" || return 1
  local p rel
  for p in "${SYNC_PATHS[@]+"${SYNC_PATHS[@]}"}"; do
    rel="${JOB_REL:+$JOB_REL/}$p"
    [ -e "$WORK/$rel" ] || [ -L "$WORK/$rel" ] || continue
    upload "$rel" "${PREFIX:+$PREFIX/}$(basename "$p")" || return 1
  done
}

final_sync() {
  # The last upload: the console as it stands (every line up to the job's exit status) goes with
  # the logs, byte for byte, so that its tail survives a VM that goes before an attach client
  # forwarded it (the owner then forwards it from the store, from its recorded offset).
  [ -f "$RUN/console.log" ] && cp "$RUN/console.log" "$CONSOLE_COPY"
  sync_all
}

finish() {
  # The end of the wrapper: the heartbeat's last word ("done", or "kept" when the VM holds the
  # only copy of the results), then the exit sentinel that attach cells stop on.
  drop_secrets
  [ -n "$INPUTS_PID" ] && kill "$INPUTS_PID" 2>/dev/null
  phase "$2"
  kill "$BEAT_PID" 2>/dev/null
  sentinel DONE "$1"
}

stage_code() {
  # The repository at its commit (and its uv environment) before the job: colabq_code.py, its
  # lines in the job's log. A snapshot is downloaded here, where the token is: only the
  # downloader process gets it. Sets JOB_DIR, and prefixes the job's command with `uv run`.
  local out="$RUN/code" archive rc
  rm -rf "$out" && mkdir -p "$out"
  if [ "$CODE_MODE" = snapshot ]; then
    if archive="$(HF_TOKEN="$UPLOAD_TOKEN" python3 "$ROOT/colabq_sync.py" download \
        --uri "$CODE_SNAPSHOT" --dest "$WORK/code-archive" "${HUB_OPTS[@]}" 2>"$out/download.err")"; then
      CODE_ARGS+=(--archive "$archive")
    else
      CODE_ARGS+=(--archive-error "$(tail -n 1 "$out/download.err" | sed 's/^colabq_sync: //')")
    fi
  fi
  # The checkout (and its .venv: uv runs as the job's user) becomes the job's.
  [ -n "$JOB_UID" ] && CODE_ARGS+=(--as-user "$JOB_UID:$JOB_GID:$JOB_HOME")
  python3 "$ROOT/colabq_code.py" "${CODE_ARGS[@]}" --repo "$WORK/repo" --out "$out" 2>&1 \
    | tee -a "$JOB_LOG"
  rc=${PIPESTATUS[0]}
  drop_secrets
  [ -s "$out/code.json" ] && sentinel CODE "$(cat "$out/code.json")"
  [ -s "$out/environment.json" ] && sentinel ENVIRONMENT "$(cat "$out/environment.json")"
  if [ "$rc" != 0 ] && ! grep -qs '"ok":false' "$out/code.json" "$out/environment.json"; then
    # The stage itself broke (its lines in the log say how): still one reason for the owner.
    local why="the code stage failed (exit $rc): see the job's log"
    echo "colabq: $why" >> "$JOB_LOG"
    sentinel CODE "{\"ok\":false,\"reason\":\"$why\"}"
  fi
  [ "$rc" = 0 ] || return "$rc"
  JOB_DIR="$(cat "$out/jobdir")"
  JOB_REL="${JOB_DIR#"$WORK"}" JOB_REL="${JOB_REL#/}"
  [ -s "$out/uv" ] && CODE_UV="$(cat "$out/uv")"
  return 0
}

start_inputs() {
  # The job's inputs, downloaded in parallel beside the code stage (as the wrapper's user: only
  # its downloader gets the token); none to fetch, nothing runs.
  [ ${#INPUTS[@]} -gt 0 ] || return 0
  rm -rf "$RUN/inputs" "$WORK/inputs" && mkdir -p "$RUN/inputs"
  HF_TOKEN="$UPLOAD_TOKEN" python3 "$ROOT/colabq_inputs.py" --dest "$WORK/inputs" \
    --out "$RUN/inputs" "${HUB_OPTS[@]}" "${INPUTS[@]}" </dev/null >"$RUN/inputs/log" 2>&1 &
  INPUTS_PID=$!
}

wait_inputs() {
  # Every input there before the job starts: the job's user owns them, COLABQ_INPUT_<NAME> names
  # each; else 6 (the INPUTS sentinel says which and why).
  [ -n "$INPUTS_PID" ] || return 0
  local rc name path
  wait "$INPUTS_PID"; rc=$?
  INPUTS_PID=""
  tee -a "$JOB_LOG" < "$RUN/inputs/log"
  if [ -s "$RUN/inputs/inputs.json" ]; then
    sentinel INPUTS "$(cat "$RUN/inputs/inputs.json")"
  elif [ "$rc" != 0 ]; then
    sentinel INPUTS "{\"ok\":false,\"reason\":\"the input download failed (exit $rc): see the job's log\"}"
  fi
  [ "$rc" = 0 ] || return 6
  [ -d "$WORK/inputs" ] && job_user_owns "$WORK/inputs"
  while IFS=$'\t' read -r name path; do
    export "COLABQ_INPUT_$name=$path"
  done < "$RUN/inputs/paths"
  return 0
}

echo "colabq: job $JOB segment $SEGMENT starting on $(hostname) at $(date -u +%FT%TZ)" > "$JOB_LOG"
phase uploading
if ! sync_all; then
  echo "colabq: first upload failed; the job does not run" | tee -a "$JOB_LOG"
  sentinel FIRST_UPLOAD failed
  finish 2 done
  exit 2
fi
sentinel FIRST_UPLOAD ok
start_inputs

CODE_UV=""
if [ -n "$CODE_MODE" ]; then
  phase preparing
  STAGE_T0=$SECONDS
  stage_code
  rc=$?
  if [ "$rc" != 0 ]; then
    echo "colabq: the job's code or environment is not ready; the job does not run" | tee -a "$JOB_LOG"
    final_sync || true
    finish "$rc" done
    exit "$rc"
  fi
  # The job's own time limit counts what the stage took (the wall cap holds both).
  TTL=$((TTL - (SECONDS - STAGE_T0)))
  [ "$TTL" -ge 1 ] || TTL=1
fi

if [ -n "$RESUME_URI" ]; then
  # An explicit checkpoint, never a framework's "last": missing or empty means the job does not run.
  if RESUME_PATH="$(HF_TOKEN="$UPLOAD_TOKEN" python3 "$ROOT/colabq_sync.py" download \
      --uri "$RESUME_URI" --dest "$WORK/resume" "${HUB_OPTS[@]}")"; then
    export COLABQ_RESUME_FROM="$RESUME_PATH"
    job_user_owns "$WORK/resume"
    echo "colabq: resuming from $RESUME_URI at $RESUME_PATH" | tee -a "$JOB_LOG"
    sentinel RESUME ok
  else
    echo "colabq: resume checkpoint $RESUME_URI missing or empty; the job does not run" | tee -a "$JOB_LOG"
    sentinel RESUME failed
    final_sync || true
    finish 3 done
    exit 3
  fi
fi

if [ -n "$INPUTS_PID" ]; then
  phase preparing
  INPUTS_T0=$SECONDS
  if ! wait_inputs; then
    echo "colabq: an input is missing, empty or could not be downloaded; the job does not run" | tee -a "$JOB_LOG"
    sync_all || true
    finish 6 done
    exit 6
  fi
  # What the downloads took beyond the code stage counts too (the wall cap holds both).
  TTL=$((TTL - (SECONDS - INPUTS_T0)))
  [ "$TTL" -ge 1 ] || TTL=1
fi

# The periodic sync stops only between uploads: the loop checks the stop flag before each pass.
STOP_FLAG="$WORK/.sync-stop"
rm -f "$STOP_FLAG"
(
  while sleep "$SYNC_INTERVAL"; do
    [ -e "$STOP_FLAG" ] && break
    sync_all >/dev/null 2>&1 || echo "colabq: periodic sync failed (will retry)" >> "$JOB_LOG"
  done
) </dev/null >/dev/null 2>&1 &
SYNC_PID=$!

phase running
[ -n "$CODE_UV" ] && set -- "$CODE_UV" run --no-sync "$@"
# The job's own time limit from now (what the stages above left of it): with STARTED, when
# `timeout` stops it, which the owner projects the run's end against (worker/progress/).
sentinel TTL "$TTL"
sentinel STARTED "$(date +%s.%N)"
JOB_T0=$SECONDS
JOB_LOG_AT=$(stat -c %s "$JOB_LOG")  # the job's own output starts here
GPU_PID=""
rm -f "$RUN/gpu_idle" "$RUN/job.pid"
if [ -n "$GPU_IDLE_S" ]; then
  python3 "$ROOT/colabq_gpuidle.py" --run "$RUN" --pid-file "$RUN/job.pid" --idle-s "$GPU_IDLE_S" \
    --below "$GPU_IDLE_BELOW" --interval "$HEARTBEAT_S" </dev/null >/dev/null 2>&1 &
  GPU_PID=$!
fi
# `timeout` (the wrapper's user) stops the job's process group; only the job runs as its user,
# with its own HOME and uv cache (where the code stage's uv, as that user, put it).
(
  cd "$JOB_DIR" || exit 1
  [ -n "$JOB_UID" ] && export HOME="$JOB_HOME" USER="$JOB_USER" LOGNAME="$JOB_USER" \
    UV_CACHE_DIR="$JOB_HOME/.cache/uv" PATH="$JOB_HOME/.local/bin:$PATH"  # pip's --user scripts
  echo "$BASHPID" > "$RUN/job.pid"  # timeout's, for the GPU idle watch
  exec timeout --kill-after=120 "$TTL" "${JOB_AS[@]+"${JOB_AS[@]}"}" "$@"
) 2>&1 | tee -a "$JOB_LOG"
rc=${PIPESTATUS[0]}
[ -n "$GPU_PID" ] && kill "$GPU_PID" 2>/dev/null
# `timeout` stopped the job at its limit (124; 137 after the kill grace), as opposed to a job
# that exited 124 by itself earlier: the owner ends it TIMED_OUT, not FAILED.
TIMED_OUT=""
if { [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && [ $((SECONDS - JOB_T0)) -ge "$TTL" ]; then
  TIMED_OUT=1
fi
FINISHED_AT="$(date +%s.%N)"
# A job whose last line has no newline must not swallow the sentinels that follow.
[ -n "$(tail -c 1 "$JOB_LOG")" ] && echo
if [ -n "$TIMED_OUT" ]; then
  echo "colabq: the job's time limit of ${TTL}s ran out; timeout stopped it (exit $rc)" | tee -a "$JOB_LOG"
fi
GPU_IDLE=""
[ -s "$RUN/gpu_idle" ] && GPU_IDLE="$(cat "$RUN/gpu_idle")"
if [ -n "$GPU_IDLE" ]; then
  echo "colabq: the GPUs stayed below ${GPU_IDLE_BELOW}% for ${GPU_IDLE_S}s; the job was stopped (exit $rc)" | tee -a "$JOB_LOG"
fi

phase finishing
touch "$STOP_FLAG"
kill "$SYNC_PID" 2>/dev/null
wait "$SYNC_PID" 2>/dev/null
echo "$rc" > "$LOGS/exit_code"
sentinel FINISHED "$FINISHED_AT"
[ -n "$TIMED_OUT" ] && sentinel TIME_LIMIT "$TTL"
[ -n "$GPU_IDLE" ] && sentinel GPU_IDLE "$GPU_IDLE"
if [ "$rc" = 126 ] || [ "$rc" = 127 ]; then
  # Found but not runnable, or not found: the shell's (or timeout's, setpriv's) own words for
  # what, from the job's output (worker/exitwhy.py words it), and as which user.
  SAID="$(tail -c +"$((JOB_LOG_AT + 1))" "$JOB_LOG" | grep -aE "$CANNOT_RUN" | tail -n 1 | cut -c 1-400)"
  sentinel EXIT_WHY "${JOB_USER}"$'\t'"${SAID}"
fi
sentinel EXIT "$rc"

if final_sync; then
  sentinel FINAL_UPLOAD ok
  finish "$rc" done
  if [ -n "${TBE_RUNTIME_ADDR:-}" ]; then
    # The owner stops the VM itself once it has the last lines; if nobody does within the hold
    # (the worker host is gone), the VM releases itself: the results are safe in the store.
    sleep "$RELEASE_HOLD_S"
    echo "colabq: nobody stopped the VM within ${RELEASE_HOLD_S}s; releasing it"
    sentinel SELF_RELEASE requested
    python3 - "$TBE_RUNTIME_ADDR" <<'PY'
import sys, urllib.request
req = urllib.request.Request(f"http://{sys.argv[1]}/unassign", data=b"", method="POST")
try:
    urllib.request.urlopen(req, timeout=30).read()
except Exception as exc:
    print(f"colabq: self-release failed: {exc}", flush=True)
PY
  fi
else
  sentinel FINAL_UPLOAD failed
  echo "colabq: final upload failed; keeping the VM: it holds the only copy of the results"
  finish "$rc" kept
fi
exit "$rc"
