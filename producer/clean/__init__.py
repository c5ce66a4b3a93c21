"""`colabq clean RUN`'s logic, one module a concern: what each of the four steps would do
(`plan.py`), running the steps in order (`steps.py`), the tracker's run (`trackers.py`), and
the guard no local path is deleted without (`guard.py`). The command is
`producer/commands/clean.py`.
"""
