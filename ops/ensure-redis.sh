#!/usr/bin/env bash
# Start a local Redis on 127.0.0.1:6379 if none answers (the tests' integration half needs it).
set -u
if redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  exit 0
fi
if ! command -v redis-server >/dev/null 2>&1; then
  echo "ops/ensure-redis.sh: no Redis on 127.0.0.1:6379 and no redis-server to start (apt-get install redis-server)" >&2
  exit 1
fi
redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null
for _ in $(seq 1 50); do
  redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && { echo "started redis-server on 127.0.0.1:6379"; exit 0; }
  sleep 0.1
done
echo "ops/ensure-redis.sh: redis-server did not answer" >&2
exit 1
