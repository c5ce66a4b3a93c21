"""The anchor of P4 (`dispatch_bench.py`): a plain Celery worker on the same broker, the library's
defaults, whose one task writes the time it starts to Redis.

    celery -A ops.bench.dispatch_anchor worker -Q $BENCH_ANCHOR_QUEUE -c 1
"""

from __future__ import annotations

import os
import time

import redis
from celery import Celery

app = Celery("bench-anchor", broker=os.environ["COLABQ_REDIS_URL"])
_client = redis.Redis.from_url(os.environ["COLABQ_REDIS_URL"])


@app.task(name="bench.stamp")  # type: ignore[untyped-decorator]
def stamp(key: str) -> None:
    _client.set(key, repr(time.time()), ex=600)
