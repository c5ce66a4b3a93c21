"""Offline emulator of Google's `colab` CLI 0.7.4 (stdlib only; see README.md).

The package is split by concern: `cli` parses and dispatches, the `cmd_*` modules implement the
commands, `store` holds the local CLI state, `backend` the emulated Google side, `vm` the per-VM
sandbox folders and processes, `kernel` and `runtime_server` run detached, `faults` is the
fault-injection schema and `admin` the `colab-emu` tool.
"""

CLI_VERSION = "0.7.4"
