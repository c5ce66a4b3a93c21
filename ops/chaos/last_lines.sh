#!/usr/bin/env bash
# Issue 25's stress run: every case of tests/integration/test_last_lines.py (a job whose proxy
# token expires at its last lines: the owner re-attaching; its attach client SIGKILLed at the end;
# its VM releasing itself after the final upload) RUNS times in a row, each on one worker, every
# run a fresh job that must end SUCCEEDED with every line of its console once, in order. The janitor
# case runs once. A failure stops its case and names the run ("run K of RUNS").
#
#   bash ops/chaos/last_lines.sh [RUNS=20] [pytest options...]
set -u
cd "$(dirname "$0")/../.."
runs="${1:-20}"
shift || true
bash ops/ensure-redis.sh || exit 1
export COLABQ_LAST_LINES_RUNS="$runs"
exec .venv/bin/pytest -q -s -p no:cacheprovider --timeout "$((runs * 120 + 120))" \
  tests/integration/test_last_lines.py "$@"
