"""A Click-like command line: the global options, each command's options, usage errors, help.

Only the commands colabq uses are declared; the other real commands are listed so that they are
reported as "not emulated" rather than "no such command".
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .errors import UsageError
from .output import box, echo


class Opt(NamedTuple):
    names: tuple[str, ...]
    dest: str
    kind: str = "value"  # value | flag | multi | float
    metavar: str = "TEXT"
    help: str = ""


class Command(NamedTuple):
    name: str
    help: str
    options: tuple[Opt, ...] = ()
    args: tuple[tuple[str, bool], ...] = ()  # (METAVAR, required)
    defaults: tuple[tuple[str, Any], ...] = ()

    @property
    def usage(self) -> str:
        parts = [f"colab {self.name} [OPTIONS]"]
        parts += [name if required else f"[{name}]" for name, required in self.args]
        return " ".join(parts)


SESSION = Opt(("-s", "--session"), "session", help="Session name.")
COMMANDS = {
    c.name: c
    for c in (
        Command(
            "download",
            "Download a file from the session.",
            (SESSION,),
            (("REMOTE", True), ("LOCAL", True)),
        ),
        Command(
            "exec",
            "Execute Python code (file or stdin) in a session's kernel.",
            (
                SESSION,
                Opt(
                    ("-f", "--file"), "file", metavar="PATH", help="Python file or notebook to run."
                ),
                Opt(
                    ("--output-image",),
                    "output_image",
                    metavar="PATH",
                    help="Where to save images.",
                ),
                Opt(
                    ("--timeout",),
                    "timeout",
                    "float",
                    "FLOAT",
                    "Execution timeout in seconds. [default: 30.0]",
                ),
                Opt(
                    ("--env",),
                    "env",
                    "multi",
                    "KEY=VALUE",
                    "Set an environment variable (repeatable).",
                ),
            ),
            defaults=(("timeout", 30.0), ("env", [])),
        ),
        Command("ls", "List files in the session.", (SESSION,), (("PATH", False),)),
        Command(
            "new",
            "Create a new Colab session.",
            (
                SESSION,
                Opt(("--tpu",), "tpu", help="TPU type (v5e1, v6e1)."),
                Opt(("--gpu",), "gpu", help="GPU type (t4, l4, g4, a100, h100)."),
                Opt(("--high-mem",), "high_mem", "flag", "", "Request a high-memory machine."),
            ),
        ),
        Command("restart-kernel", "Restart a session's kernel.", (SESSION,)),
        Command("rm", "Delete a file in the session.", (SESSION,), (("PATH", True),)),
        Command("sessions", "List active sessions on the server."),
        Command("status", "Show local session status.", (SESSION,)),
        Command("stop", "Stop a session.", (SESSION,)),
        Command(
            "upload",
            "Upload a file to the session.",
            (SESSION,),
            (("LOCAL", True), ("REMOTE", True)),
        ),
        Command("usage", "Show compute-unit balance and usage."),
        Command("version", "Show the CLI version."),
        Command("whoami", "[debug] Print the active credentials' identity, scopes, and expiry."),
        Command("help", "Show help for a command.", (), (("COMMAND", False),)),
    )
}
NOT_EMULATED = (
    *("auth", "console", "drivemount", "edit", "install", "log", "pay", "readme", "repl"),
    *("run", "skill", "ssh", "update", "url", "README", "SKILL"),
)
HIDDEN = ("whoami",)  # hidden from `colab --help`, as in 0.7.4
AUTH_CHOICES = ("oauth2", "adc")
HELP = ("-h", "--help")


class GlobalOpts:
    def __init__(self) -> None:
        self.config: str | None = None
        self.auth = "oauth2"
        self.log_to_stderr = False
        self.help = False


def _split(arg: str) -> tuple[str, str | None]:
    if arg.startswith("--") and "=" in arg:
        name, value = arg.split("=", 1)
        return name, value
    return arg, None


def parse_global(argv: list[str]) -> tuple[GlobalOpts, str | None, list[str]]:
    """Global options (before the command), the command name and the rest."""
    opts = GlobalOpts()
    i = 0
    while i < len(argv):
        name, inline = _split(argv[i])
        if name in HELP:
            opts.help = True
        elif name == "--logtostderr":
            opts.log_to_stderr = True
        elif name in ("--install-completion", "--show-completion"):
            pass
        elif name in ("--config", "--auth", "-c", "--client-oauth-config"):
            if inline is None:
                if i + 1 >= len(argv):
                    raise UsageError(f"Option '{name}' requires an argument.")
                i += 1
                inline = argv[i]
            if name == "--config":
                opts.config = inline
            elif name == "--auth":
                if inline.lower() not in AUTH_CHOICES:
                    raise UsageError(
                        f"Invalid value for '--auth': '{inline}' is not one of 'oauth2', 'adc'."
                    )
                opts.auth = inline.lower()
        elif name.startswith("-c") and len(name) > 2:
            pass  # -cPATH
        elif name.startswith("-") and name != "-":
            raise UsageError(f"No such option: {name}")
        else:
            return opts, argv[i], argv[i + 1 :]
        i += 1
    return opts, None, []


def _find(command: Command, name: str) -> Opt:
    for opt in command.options:
        if name in opt.names:
            return opt
    known = [n for opt in command.options for n in opt.names if n.startswith("--")]
    import difflib  # only on this error path: it is slow to import

    close = difflib.get_close_matches(name, known, n=1)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    raise UsageError(f"No such option: {name}{hint}", command.name)


def parse_command(command: Command, argv: list[str]) -> dict[str, Any]:
    """The command's options and arguments by `dest`; {'help': True} for -h/--help."""
    values: dict[str, Any] = {opt.dest: None for opt in command.options}
    values.update({k: (list(v) if isinstance(v, list) else v) for k, v in command.defaults})
    positional: list[str] = []
    i, only_args = 0, False
    while i < len(argv):
        arg = argv[i]
        if only_args or not arg.startswith("-") or arg == "-":
            positional.append(arg)
        elif arg == "--":
            only_args = True
        elif arg in HELP:
            return {"help": True}
        else:
            name, inline = _split(arg)
            if not name.startswith("--") and len(name) > 2:
                name, inline = name[:2], name[2:]
            opt = _find(command, name)
            if opt.kind == "flag":
                values[opt.dest] = True
            else:
                if inline is None:
                    if i + 1 >= len(argv):
                        raise UsageError(f"Option '{name}' requires an argument.", command.name)
                    i += 1
                    inline = argv[i]
                values[opt.dest] = _convert(command, opt, name, inline, values[opt.dest])
        i += 1
    for index, (metavar, required) in enumerate(command.args):
        if index < len(positional):
            values[metavar.lower()] = positional[index]
        elif required:
            raise UsageError(f"Missing argument '{metavar}'.", command.name)
        else:
            values[metavar.lower()] = None
    extra = positional[len(command.args) :]
    if extra:
        plural = "s" if len(extra) > 1 else ""
        raise UsageError(f"Got unexpected extra argument{plural} ({' '.join(extra)})", command.name)
    return values


def _convert(command: Command, opt: Opt, name: str, raw: str, current: Any) -> Any:
    if opt.kind == "multi":
        return [*(current or []), raw]
    if opt.kind == "float":
        try:
            return float(raw)
        except ValueError:
            label = " / ".join(f"'{n}'" for n in opt.names)
            raise UsageError(
                f"Invalid value for {label}: '{raw}' is not a valid float.", command.name
            ) from None
    return raw


def print_root_help() -> None:
    echo("")
    echo(" Usage: colab [OPTIONS] COMMAND [ARGS]...")
    echo("")
    echo(" Colab CLI - manage Google Colab runtimes from your terminal (offline emulator).")
    echo("")
    rows = [
        "--client-oauth-config  -c      PATH  OAuth client config JSON.",
        "--config                       PATH  Session state file.",
        "--logtostderr                        Also log to stderr.",
        "--auth                         TEXT  oauth2 or adc. [default: oauth2]",
        "--help                 -h            Show this message and exit.",
    ]
    echo(box("Options", rows))
    names = sorted(c for c in COMMANDS if c not in ("help", *HIDDEN))
    width = max(map(len, names))
    echo(box("Commands", [f"{n:<{width}} {COMMANDS[n].help}" for n in names]))


def print_command_help(command: Command) -> None:
    echo("")
    echo(f" Usage: {command.usage}")
    echo("")
    echo(f" {command.help}")
    echo("")
    rows = []
    for opt in command.options:
        longs = ", ".join(n for n in opt.names if n.startswith("--"))
        shorts = ", ".join(n for n in opt.names if not n.startswith("--"))
        rows.append(f"{longs:<16} {shorts:<4} {opt.metavar:<10} {opt.help}")
    rows.append(f"{'--help':<16} {'-h':<4} {'':<10} Show this message and exit.")
    echo(box("Options", rows))
