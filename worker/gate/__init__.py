"""The gate: users write only their own requests; a trusted service does every shared write
(issue 26). The reasoning is kept here; the README says how to run it.

**Requests.** A user (a Redis ACL user, `worker.people`) appends a request to their own stream,
`<prefix>:u:<user>:requests` (`XADD`, one JSON field, `wire.Request`: submit, cancel, cancel a
sweep, retry, note), and waits for the answer on `<prefix>:u:<user>:reply:<rid>` (`BLPOP` with a
timeout; `producer.ask`). Those two are the only keys the user's ACL rule lets them write
(`~<prefix>:u:<user>:*`); everything else of the deployment they may only read, and they have no
Pub/Sub channel at all: no job record, index, queue, kombu binding, event stream or Celery event
channel. Redis refuses the rest, whatever client they use.

**The gate** (`serve.Gate`, run as the service user) reads every user's stream with one
consumer group (`XREADGROUP ... BLOCK`), so several gates never handle one request twice; a
request left pending by a dead gate is taken over (`XAUTOCLAIM`) and every operation is
idempotent (a submit by its idempotency key, a cancel of a cancelled job is `already_over`). It
derives the user from the stream's key (never from the request's body), validates the request
(pydantic, `extra="forbid"`; the specs again as `JobSpec`s; every id against the ledger: a job or
sweep of another user is refused in one line unless the user is an operator, dependencies are
the user's own jobs, destinations pass `worker.people.destinations.check_destination`), gives
each new job and sweep its id in the user's namespace, and does the shared writes in one atomic
script (`worker.records.create`): the job records, indexes, history, events and the Celery
messages on their queues (built in-process as Celery and kombu would push them,
`worker.fleet.messages`); then the messages' `task-sent` events for Flower. A batch is one
request, one validation pass, one script.

**Who runs it.** `colabq gate` (a compose service) and every GPU worker (a thread of its main
process, `duty.GateDuty`) run the same loop behind one lease (`SET NX PX`, renewed): one gate
serves at a time, another takes over when its lease expires. Idle, a gate costs about one Redis
command a second (a blocking read that times out, and every few seconds the list of users from
`ACL USERS` and its lease). Without ACLs the only user is `default` and the same path runs.

**Operators** act through the gate too: the gate asks Redis whether the requesting user may
write outside their namespace (`ACL DRYRUN`, `worker.people.acl.operator_probe_key`), exactly
what makes them an operator; without ACLs everyone may act on every job.
"""
