"""Notifications: on the state changes a job or the deployment picks (terminal ones by default),
a webhook (a Slack-compatible JSON body) or a local command hook, delivered at least once from
the event log (`worker.records.events`) by `colabq notifier`, a process that never holds a GPU.

- `targets`: the notifier host's 0600 file of names (`name = URL` or `name = exec COMMAND`),
  and which names a job asks for (`--notify NAME[:STATES]`, the deployment's default).
- `deliver`: one delivery (an HTTP POST, or the command with the event on stdin), no retry.
- `consumer`: the consumer group over the event log (XREADGROUP, XACK after delivery, XAUTOCLAIM
  of a dead consumer's entries), the retries with backoff, and a failure recorded as an event.

A webhook's URL is a secret: it stays in the host's file, never in Redis, a log or an event.
"""
