"""The `colabq` commands, one module each (a family of commands shares one: `worker` and `beat`
in `worker.py`; `workers`, `drain` and `undrain` in `fleet.py`). Each is thin: it turns options
into a call of the helpers it uses (`producer.submit`, `producer.joblist`, `producer.preflight`,
`producer.clean`, `producer.doctor`, `producer.stage`, `producer.demo`, the worker's modules)
and prints the result. `producer/cli.py` maps each command's name to its module and imports it
only when the command is named; this package's `__init__` imports nothing.
"""
