"""The beat-scheduled janitor: it reconciles the ledger and the account with what crashed.

`snapshot` reads, `classify` finds, `settle` decides a dead owner's outcome, `run` acts and
reports, `wiring` builds the real side effects from this host's settings.
"""
