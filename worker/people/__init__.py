"""People: who is acting on the queue, and what Redis lets them change (issue 20).

Design (the reasoning is kept here, the README says how to set it up):

**Identity.** A person or machine is a Redis ACL user: the username in `COLABQ_REDIS_URL`
(`redis://alice:PASSWORD@host`). colabq asks Redis who it is (`ACL WHOAMI`, one round trip per
process, `identity.identify`) and never reads an environment variable for it. The user `default`
means "no ACLs": a job's submitter is then this machine's user@host as before, and such a
deployment trusts everyone who has the Redis password.

**The owner is in the job id.** Under ACLs a job's id is `<16 hex>.<user>` (`owners.new_job_id`);
without ACLs it stays `<16 hex>`. Every key of a job (`<prefix>:job:<id>`, its `:history`, `:log`,
`:watch`, `:cancel`, `:lock`, `:adopting`) therefore ends in, or contains, `.<user>`, and the
user's ACL rule grants writes to `<prefix>:job:*.<user>` and `<prefix>:job:*.<user>:*` only, plus
reads of every `<prefix>:*` key (`acl.rules_for`). Redis itself then refuses alice's write to any
key of bob's job (NOPERM), whatever client she uses. User names are `[a-z0-9][a-z0-9_-]*`, so
`.` cannot occur in a name and `*.alice:*` cannot match a key of bob's job. Short ids (the hex
prefix) are unchanged. Why this shape rather than per-user request keys carried out by a
service: the submitter still records its job in one atomic script and one round trip (P5
unchanged), a worker still claims it from the message in one script (P4 unchanged), nothing new
must run for a QUEUED job to exist, and without ACLs the same code runs with no suffix.

**Forged messages.** A user may push to the GPU queues (that is how a job is sent), so a message
could name bob's QUEUED job with another spec. The claim script compares, for an owned id, the
message's spec with the one in the job record (which only bob, services and operators can
write) and refuses a mismatch; the worker also refuses an owned job whose `submitted_by` is not
the owner in its id. So per-user settings keyed by the submitter can trust it.

**Idempotency keys** of an owned job live under `<prefix>:u:<user>:idem:<key>`: one user cannot
take or release another's key.

**Services and operators.** Workers, beat and janitors run as a service user; an operator is a
person with the same key rights (`~*`): they carry out any job's state changes. A command tells
an operator from a user by asking Redis (`identity.may_write_others`: a no-op UNLINK of a key only
they may write), so the check is exactly what Redis enforces.

**Who did it.** Every history entry carries `actor` (the ACL user, or the OS user without ACLs)
and `host`; a cancel request is an entry of its own (`action: cancel`).

**Not enforced by Redis (yet).** Users write a few shared indexes when they submit or cancel
their own job: `<prefix>:jobs`, `<prefix>:active`, `<prefix>:live-destinations`,
`<prefix>:janitor:tracker-check`, the GPU queue lists and Celery's task events channel. A user
with a bare client can remove another job's id from them (hide it from `status`, from a janitor
pass until its lease or resend brings it back, or free its destination), or drop queued
messages (the janitor sends a QUEUED job's message again); none of these changes another job's
record, state, history or log, which stay the owner's and the services' alone.
"""
