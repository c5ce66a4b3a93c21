"""The chaos suite: see `ops/chaos/run.py`."""
