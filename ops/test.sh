#!/usr/bin/env bash
# The whole test suite (what `make test` and CI run). Integration tests use the real Redis on
# 127.0.0.1:6379; pytest's "no tests collected" (exit 5) counts as a failure.
set -u
cd "$(dirname "$0")/.."
bash ops/ensure-redis.sh || exit 1
export COLABQ_REQUIRE_SERVICES=1
.venv/bin/pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "ops/test.sh: pytest collected no tests: failing" >&2
  exit 1
fi
exit "$rc"
