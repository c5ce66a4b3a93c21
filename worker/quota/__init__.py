"""Quotas (issue 27): per user and per Colab account, the most GPUs running at once and the
compute units a day, week and month, set by an operator (`colabq quota`), enforced fleet-wide
and atomically where a job is claimed; and what `colabq budget` reads.

- `limits`: the quotas themselves, who a job's user is, setting and clearing them.
- `periods`: the day, week and month in the deployment's time zone.
- `claim`: the claim script's part: a job over a quota waits, never fails; the slots it takes.
- `release`: slots given back where a job ends or is put back; its units added where it ends.
- `check`: the same decision in Python (for `colabq quota`, and a submit-time notice).
- `read`: reading the running sets, the sums and the recent endings back, checked.

Under Redis ACLs every key here (`<prefix>:quota:*`) is a service and operator key: a user's
rule may read it and never write it, so no user can raise her quota, free her slots or lower
her sums.
"""
