"""Accounts: which Colab account (the Google login of a host's `colab` CLI) each host and job is.

A job belongs to the account of the worker that claimed it, recorded on its record (`account`)
before anything is allocated; only a host logged in as that account acts on the job's VM (adopt,
re-attach, restart, recover, stop): another account's `colab sessions` and `colab status` cannot
see that VM, and reading "not listed" as "lost" is how a job ran twice on two accounts. A janitor
of another account settles such a job only from what the store proves, else leaves it to its
account's janitor (`worker.janitor.accounts`). A deployment with one account records the same
name on every job and behaves as before.

`names` checks an account name; `login` asks the CLI who it is (`colab whoami`) and checks it
against the `account` setting; `balances` keeps the last `colab usage` each account's workers
saw (`colabq usage`).
"""
