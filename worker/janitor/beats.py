"""When the janitor counts a beat as missed: the thresholds derived from the beat intervals the
deployment's settings give (pure; `wiring` reads the settings, `classify` applies them).

The beats a pass can see without a remote call:
- the owner's lease: its lock, renewed every `heartbeat_interval_s` with a TTL of `lease_ttl_s`.
  The lock's expiry *is* the threshold, and the janitor never shortens it: the owner's own fence
  trusts the lease for `lease_ttl_s` after its last renewal, so an adopter that acted sooner
  could act beside a live owner.
- the watchdog's heartbeat into Redis (`heartbeat_at`), written at the end of every poll, every
  `watchdog_poll_s` plus the poll's own time (one `colab status`). It is missed after
  `MISSED_BEATS` polls plus a margin for one slow poll and for the skew between the watchdog's
  clock and the janitor's, never sooner than `FLOOR_S`.
The VM's heartbeat file is read only through the account (a remote call per job): a pass does not.
"""

from __future__ import annotations

MISSED_BEATS = 3
# One slow poll (a `colab status` that takes a few seconds) and the clock skew between hosts.
MARGIN_S = 5.0
# Never sooner: a host under load, or a clock a few seconds off, is not a lost host.
FLOOR_S = 10.0


def watchdog_lost_after_s(watchdog_poll_s: float) -> float:
    """A watchdog heartbeat older than this: the watchdog (and, with its owner gone, its host)
    is gone. 50 s for the default 15 s poll."""
    return max(FLOOR_S, MISSED_BEATS * watchdog_poll_s + MARGIN_S)


def host_lost_noticed_within_s(
    *, lease_ttl_s: float, watchdog_poll_s: float, janitor_interval_s: float
) -> float:
    """The longest a lost host's job waits for the pass that adopts it: the later of its lease's
    expiry and its watchdog's missed beats, then at most one janitor interval."""
    return max(lease_ttl_s, watchdog_lost_after_s(watchdog_poll_s)) + janitor_interval_s
