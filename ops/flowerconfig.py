"""The Flower configuration file's former place (`--conf=ops/flowerconfig.py`): the settings of
`worker/flowerconfig.py`, which `colabq flower`, the documented way to start Flower, uses."""

import runpy

globals().update(
    {k: v for k, v in runpy.run_module("worker.flowerconfig").items() if not k.startswith("_")}
)
