"""Entry point of the emulated `colab`: global options, update banner, dispatch, exit codes.

Exit codes follow the real CLI: 0 success, 1 errors and tracebacks, 2 usage errors, 130 on
SIGINT (after `finally` blocks ran), 143 on SIGTERM (no cleanup).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from .cmd_account import cmd_whoami
from .cmd_exec import cmd_exec
from .cmd_files import cmd_download, cmd_ls, cmd_rm, cmd_upload
from .cmd_session import (
    cmd_new,
    cmd_restart_kernel,
    cmd_sessions,
    cmd_status,
    cmd_stop,
    cmd_usage,
    cmd_version,
)
from .context import EmuContext, build_context, emu_home_from
from .errors import CliExit, UsageError
from .output import echo, print_traceback, usage_error
from .parsing import (
    COMMANDS,
    NOT_EMULATED,
    parse_command,
    parse_global,
    print_command_help,
    print_root_help,
)
from .release import ReleaseError, release_from
from .store import load_settings, save_settings

Handler = Callable[[EmuContext, dict[str, Any]], int]
HANDLERS: dict[str, Handler] = {
    "download": cmd_download,
    "exec": cmd_exec,
    "ls": cmd_ls,
    "new": cmd_new,
    "restart-kernel": cmd_restart_kernel,
    "rm": cmd_rm,
    "sessions": cmd_sessions,
    "status": cmd_status,
    "stop": cmd_stop,
    "upload": cmd_upload,
    "usage": cmd_usage,
    "version": cmd_version,
    "whoami": cmd_whoami,
}
NO_UPDATE_CHECK = {
    "update",
    "version",
    "log",
    "pay",
    "help",
    "url",
    "whoami",
    "readme",
    "README",
    "skill",
    "SKILL",
}
UPDATE_URL = "https://pypi.org/pypi/google-colab-cli/json"


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def maybe_print_banner(ctx: EmuContext) -> None:
    """The update check: the emulator's configured "PyPI latest" stands for the network fetch."""
    if load_settings(ctx).get("enable_update_check") is False:
        return
    from .backend import Backend

    latest = Backend(ctx.emu_home).latest_version()
    current = release_from(ctx.environ).version

    def remember(settings: dict[str, Any]) -> None:
        settings.setdefault("update_url", UPDATE_URL)
        settings.setdefault("enable_update_check", True)
        settings["last_check"] = time.time()
        settings["latest_version"] = latest or current

    save_settings(ctx, remember)
    if latest and _version_tuple(latest) > _version_tuple(current):
        echo("")
        echo(f"[colab] A new version of Colab CLI is available: {latest} (current: {current})")
        echo("[colab] Run 'colab update' to update.")
        echo(
            '[colab] To silence this check, set "enable_update_check": false in '
            "~/.config/colab-cli/settings.json"
        )
        echo("")


def _on_sigterm(signum: int, frame: object) -> None:
    os._exit(143)


def _dispatch(argv: list[str]) -> int:
    g, name, rest = parse_global(argv)
    if g.help or name is None:
        print_root_help()
        return 0
    if name == "help":
        target = rest[0] if rest else None
        if target is None:
            print_root_help()
        elif target in COMMANDS:
            print_command_help(COMMANDS[target])
        else:
            raise UsageError(f"No such command '{target}'.")
        return 0
    if name in NOT_EMULATED:
        echo(
            f"[colab-emulator] 'colab {name}' is not implemented by the offline emulator.", err=True
        )
        return 2
    if name not in HANDLERS:
        raise UsageError(f"No such command '{name}'.")
    ctx = build_context(os.environ, config=g.config, auth=g.auth, log_to_stderr=g.log_to_stderr)
    if name not in NO_UPDATE_CHECK:
        maybe_print_banner(ctx)
    opts = parse_command(COMMANDS[name], rest)
    if opts.get("help"):
        print_command_help(COMMANDS[name])
        return 0
    return HANDLERS[name](ctx, opts)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _on_sigterm)
    # Python leaves SIGINT ignored when the parent ignored it (a background job of a script);
    # the contract is "SIGINT -> 130" whoever started us.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    args = sys.argv[1:] if argv is None else argv
    standard = build_context(os.environ).standard_traceback
    try:
        release_from(os.environ)
    except ReleaseError as exc:
        echo(f"[colab-emulator] {exc}", err=True)
        return 2
    try:
        return _dispatch(args)
    except CliExit as exc:
        return exc.code
    except UsageError as exc:
        command = f"colab {exc.command}" if exc.command else "colab"
        usage = COMMANDS[exc.command].usage if exc.command else "colab [OPTIONS] COMMAND [ARGS]..."
        usage_error(exc.message, usage, f"{command} -h")
        return 2
    except KeyboardInterrupt:
        return 130
    except EOFError:
        echo("", err=True)
        echo("Aborted.", err=True)
        return 1
    except Exception as exc:
        print_traceback(exc, standard=standard)
        return 1


def emu_home_for_admin() -> str:
    return str(emu_home_from(os.environ))
