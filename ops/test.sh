#!/usr/bin/env bash
# The whole test suite (what `make test` and CI run). Integration tests use a real redis-server
# of each test process's own, behind a password (or COLABQ_TEST_REDIS_URL); pytest's "no tests collected" (exit 5) counts as a failure. Four processes:
# the integration tests mostly wait on jobs, so they overlap well even on two cores (each test
# has its own key prefix, queues, emulator and folders). The tests that need the MLflow server
# run in one process (`xdist_group`), so that only one starts.
set -u
cd "$(dirname "$0")/.."
bash ops/ensure-redis.sh || exit 1
export COLABQ_REQUIRE_SERVICES=1
.venv/bin/pytest -n "${COLABQ_TEST_PROCESSES:-4}" --dist loadgroup "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "ops/test.sh: pytest collected no tests: failing" >&2
  exit 1
fi
exit "$rc"
