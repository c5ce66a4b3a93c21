"""Offline emulator of Google's `colab` CLI 0.7.4 and 0.7.5 (stdlib only; see README.md).

The package is split by concern: `cli` parses and dispatches, the `cmd_*` modules implement the
commands, `store` holds the local CLI state, `backend` the emulated Google side, `assign` the
assignment request of `new` (and 0.7.5's retries), `release` which release a process speaks, `vm`
the per-VM sandbox folders and processes, `kernel` and `runtime_server` run detached, `faults` is
the fault-injection schema and `admin` the `colab-emu` tool.
"""

# What the emulator speaks unless COLAB_EMU_VERSION says otherwise: the newest release it knows.
CLI_VERSION = "0.7.5"
