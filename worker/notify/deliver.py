"""One delivery of one event to one target, no retry (`consumer` retries): a webhook's POST of
a Slack-compatible body (`text` plus the event's fields), or a command hook run with the event
as JSON on stdin and a few `COLABQ_EVENT_*` variables. What a failure says never holds the URL.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import Mapping

from worker.notify.targets import Target

TIMEOUT_S = 20.0


class DeliveryFailed(Exception):
    """Why a delivery failed, in words that hold no secret."""


def body(event: Mapping[str, object]) -> dict[str, object]:
    """The JSON a webhook gets: Slack's `text`, then the event's fields."""
    state = str(event.get("to", "")).upper()
    run = event.get("run_name") or ""
    job = f"colabq: job {event.get('job')} {f'({run}) ' if run else ''}"
    if event.get("kind") == "overrun":
        text = f"{job}will overrun its time limit"
    else:
        text = f"{job}is {state}"
    if event.get("reason"):
        text += f": {event['reason']}"
    return {"text": text, **event}


def deliver(target: Target, event: Mapping[str, object]) -> None:
    """Deliver `event` to `target` once; raises DeliveryFailed."""
    if target.url:
        _post(target, event)
    else:
        _run(target, event)


def _post(target: Target, event: Mapping[str, object]) -> None:
    data = json.dumps(body(event)).encode()
    # http(s) only: `targets.load_targets` refuses any other scheme.
    req = urllib.request.Request(  # noqa: S310
        target.url, data=data, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:  # noqa: S310 (admin's URL)
            resp.read()
    except urllib.error.HTTPError as exc:
        raise DeliveryFailed(f"webhook {target.name}: HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:  # ValueError: a malformed URL
        why = getattr(exc, "reason", exc)
        raise DeliveryFailed(f"webhook {target.name}: {type(why).__name__}") from None


def _run(target: Target, event: Mapping[str, object]) -> None:
    env = {
        **os.environ,
        "COLABQ_EVENT_JOB": str(event.get("job", "")),
        "COLABQ_EVENT_STATE": str(event.get("to", "")),
        "COLABQ_EVENT_FROM": str(event.get("from", "")),
        "COLABQ_EVENT_RUN": str(event.get("run_name", "")),
        "COLABQ_EVENT_KIND": str(event.get("kind", "")),
    }
    try:
        done = subprocess.run(  # argv from the host's 0600 file, no shell
            list(target.argv), input=json.dumps(event).encode(), env=env, timeout=TIMEOUT_S,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DeliveryFailed(f"hook {target.name}: {type(exc).__name__}") from None
    if done.returncode != 0:
        raise DeliveryFailed(f"hook {target.name}: exit {done.returncode}")
