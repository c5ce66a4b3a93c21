"""People: who is acting on the queue, and what Redis lets them change (issues 20 and 26).

Design (the reasoning is kept here, the README says how to set it up):

**Identity.** A person or machine is a Redis ACL user: the username in `COLABQ_REDIS_URL`
(`redis://alice:PASSWORD@host`). colabq asks Redis who it is (`ACL WHOAMI`, one round trip per
process, `identity.identify`) and never reads an environment variable for it. The user `default`
means "no ACLs": a job's submitter is then this machine's user@host as before, and such a
deployment trusts everyone who has the Redis password.

**Users write only their own requests.** A user's rule (`acl.rules_for`) reads every key of the
deployment and the GPU queues, and writes only `<prefix>:u:<user>:*`: their requests stream and
the gate's replies; no Pub/Sub channel. Every change they make (submit, cancel, retry, a sweep's
cancel, clean's record) is a request the gate carries out as the service (`worker.gate`): it
takes the user from the stream's key, checks every id, and does the shared writes. So no user
can remove a job from an index, delete a queue or a kombu binding, move the notifier's group,
publish on Celery's event channels, or write any job record, their own included; `surface.py`
lists what is guarded and the attacker tests try it all.

**The owner is in the job id.** Under ACLs a job's id is `<16 hex>.<user>` (`owners.new_job_id`,
given by the gate); without ACLs it stays `<16 hex>`. The id says whose a job is: the gate
refuses a request naming another user's job or sweep (one line, `owners.refusal`) unless the
user is an operator, and a dependency (`--after`) must be the user's own job. Short ids (the hex
prefix) are unchanged. A worker still refuses an owned job whose `submitted_by` is not the owner
in its id, and the claim compares a message's spec with the recorded one.

**Idempotency keys and sweeps** are the gate's keys too: `<prefix>:idem.<user>:<key>` (one user's
key never names another's job) and `<prefix>:sweep:<id>`.

**Services and operators.** Workers, beat, janitors and gates run as a service user; an operator
is a person with the same rule (`~*`, and `ACL USERS`/`ACL DRYRUN` for the gate and `colabq acl
--check`, not `ACL GETUSER`, which shows password hashes). An operator is told from a user by
what Redis lets them write: a command asks with a no-op UNLINK of a key only they may write
(`identity.may_write_others`), the gate with `ACL DRYRUN` of the same write for the requesting
user (`identity.may_user_write_others`). Operators act through the gate too, on any job.

**Who did it.** Every history entry carries `actor` (the ACL user the gate served, or the OS user
without ACLs) and `host` (the client's, a label); a cancel request is an entry of its own
(`action: cancel`).
"""
