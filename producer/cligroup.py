"""The `colabq` command group: commands built when first named, values read without pydantic
where Typer would import it for nothing, and a usage error as one line.

- **Lazy commands.** Each command is registered as a loader (`OneLineErrors.loaders`, name to
  the function that imports the command's module and returns its function), and built into a
  click command when it is first looked up: `colabq status` imports and builds `status` alone,
  while `--help` and shell completion, which look up every command, still list each with its
  help text.
- **Plain values without pydantic.** Typer coerces each option's value with a pydantic
  `TypeAdapter` (importing pydantic costs about 0.05 s of start-up). A `str`, `int`, `float`,
  `list[str]` or `Path` value whose result is plain (a decimal integer, a number with a point,
  a string) is coerced here to exactly what the adapter returns; anything else (a range, an
  error, a parser of its own) still goes to Typer's adapter, so its messages are Typer's.
- **Flags without a type.** Typer's rich help prints each option's type (`<int>`), a flag's
  too (`<bool>`), although a flag takes no value: a flag's metavar is made empty, which shows
  nothing there (the plain help never shows a flag's metavar).
- **One-line usage errors.** Typer's framed error is several lines on stderr; every colabq
  error is one line (`colabq: ...`) with the exit code of bad input (2).

Everything else is Typer's own `TyperGroup`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from typer._click import Command, Context, Parameter
from typer._click.exceptions import ClickException  # Typer vendors click as typer._click
from typer.core import TyperCommand, TyperGroup
from typer.exceptions import Abort

# What pydantic's lax int and float parse to the same value as int() and float(): no sign but
# a minus, no space, underscore, exponent or leading zero. Anything else goes to pydantic.
_INT = re.compile(r"0|-?[1-9][0-9]{0,17}")
_FLOAT = re.compile(r"-?(?:0|[1-9][0-9]{0,14})(?:\.[0-9]{1,15})?")
_MISS = object()  # "not a plain value": Typer's adapter coerces it


def _plain_str(value: Any, param: Parameter, ctx: Context) -> Any:
    return value if type(value) is str else _MISS


def _plain_int(value: Any, param: Parameter, ctx: Context) -> Any:
    if type(value) is int:
        return value
    return int(value) if type(value) is str and _INT.fullmatch(value) else _MISS


def _plain_float(value: Any, param: Parameter, ctx: Context) -> Any:
    if type(value) is float:
        return value
    return float(value) if type(value) is str and _FLOAT.fullmatch(value) else _MISS


def _plain_strs(value: Any, param: Parameter, ctx: Context) -> Any:
    if isinstance(value, list | tuple) and all(type(v) is str for v in value):
        return list(value)
    return _MISS


def _path_of(info: Any) -> Callable[[Any, Any, Context], Any]:
    """Typer's path check (exists, file or dir, readable...) on the text as typed, then the
    `Path` pydantic would make of it; the messages are Typer's own."""
    from typer._param_types import coerce_cli_path

    def coerce(value: Any, param: Any, ctx: Context) -> Any:
        if isinstance(value, Path):
            path_type: type[Path] | None = Path
        elif type(value) is str and value:
            path_type = None  # checked as typed, made a Path below
        else:
            return _MISS
        try:
            checked = coerce_cli_path(value, info, path_type=path_type, param=param, ctx=ctx)
        except ValueError:  # an embedded NUL byte: pydantic words that error
            return _MISS
        return checked if isinstance(checked, Path) else Path(str(checked))

    return coerce


def _plain_coercion(descriptor: Any) -> Callable[[Any, Any, Context], Any] | None:
    """The pydantic-free coercion of a parameter whose values may be plain, or None."""
    info = descriptor.parameter_info
    if info.parser is not None or descriptor.file_annotation is not None:
        return None
    annotation = descriptor.annotation
    if annotation is str:
        return _plain_str
    if annotation in (int, float):
        if info.min is not None or info.max is not None or info.clamp:
            return None
        return _plain_int if annotation is int else _plain_float
    if annotation == list[str]:
        return _plain_strs
    plain_path = info.path_type is None and not info.allow_dash and not info.resolve_path
    if annotation is Path and plain_path:
        return _path_of(info)
    return None


class PlainValues:
    """One parameter's runtime coercion (Typer's `RuntimeParam` contract): plain values here,
    the rest by the pydantic adapter Typer builds on first need."""

    def __init__(self, descriptor: Any) -> None:
        self.descriptor = descriptor
        self._plain = _plain_coercion(descriptor)
        self._typer: Any = None

    def coerce(self, value: Any, param: Parameter, ctx: Context) -> Any:
        if value is None:  # as Typer's RuntimeParam.coerce
            return () if param.multiple or param.nargs == -1 else None
        if self._plain is not None:
            got = self._plain(value, param, ctx)
            if got is not _MISS:
                return got
        return self._adapter().coerce(value, param=param, ctx=ctx)

    def _coerce_value(self, value: Any, param: Parameter, ctx: Context) -> Any:
        return self._adapter()._coerce_value(value, param=param, ctx=ctx)

    def _adapter(self) -> Any:
        if self._typer is None:
            from typer._coercion import build_runtime_param

            self._typer = build_runtime_param(self.descriptor)
        return self._typer


def read_plain_values(params: Sequence[Parameter]) -> None:
    """Give each Typer parameter whose coercion is not built yet a `PlainValues`. A Typer
    without this hook (no `_runtime_param`) keeps its own coercion: slower, never wrong."""
    for param in params:
        if getattr(param, "_runtime_param", _MISS) is None and hasattr(param, "type_descriptor"):
            param._runtime_param = PlainValues(param.type_descriptor)  # type: ignore[attr-defined]


def untyped_flags(params: list[Parameter]) -> list[Parameter]:
    """`params`, each flag's metavar made empty (see the module's docstring)."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


class PlainValuesCommand(TyperCommand):
    """Typer's command, its values coerced by `PlainValues`, its flags shown without a type."""

    def get_params(self, ctx: Context) -> list[Parameter]:
        return untyped_flags(super().get_params(ctx))

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        read_plain_values(self.get_params(ctx))  # with --help, made on first need
        return super().parse_args(ctx, args)


def build_command(fn: Callable[..., Any], rich_markup_mode: Any) -> Command:
    """The click command Typer makes of `fn` registered with `Typer().command()`."""
    import typer
    from typer.main import get_command_from_info

    registry = typer.Typer()
    registry.command(cls=PlainValuesCommand)(fn)
    return get_command_from_info(
        registry.registered_commands[0],
        pretty_exceptions_short=registry.pretty_exceptions_short,
        rich_markup_mode=rich_markup_mode,
    )


class LazyCommands(MutableMapping[str, Command]):
    """A group's commands by name, in order; each built by its loader on first lookup. Listing
    the names builds nothing; looking a command up (or iterating the items) builds it."""

    def __init__(
        self, built: Mapping[str, Command], loaders: Mapping[str, Callable[[], Command]]
    ) -> None:
        self._names = list(dict.fromkeys([*built, *loaders]))
        self._built = dict(built)
        self._loaders = dict(loaders)

    def __getitem__(self, name: str) -> Command:
        if name not in self._built:
            if name not in self._loaders:
                raise KeyError(name)
            self._built[name] = self._loaders.pop(name)()
        return self._built[name]

    def __setitem__(self, name: str, command: Command) -> None:
        if name not in self._names:
            self._names.append(name)
        self._loaders.pop(name, None)
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self._names:
            raise KeyError(name)
        self._names.remove(name)
        self._built.pop(name, None)
        self._loaders.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._names))

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._names


class OneLineErrors(TyperGroup):
    # Name -> the command's function (importing its module): set by the app's group subclass,
    # in the order `--help` lists them.
    loaders: ClassVar[Mapping[str, Callable[[], Callable[..., Any]]]] = {}

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        markup = self.rich_markup_mode
        built = {n: c for n, c in self.commands.items() if n not in self.loaders}
        loaders = {name: _builder(load, markup) for name, load in self.loaders.items()}
        self.commands = LazyCommands(built, loaders)

    def list_commands(self, ctx: Context) -> list[str]:
        return list(self.commands)  # the names alone: listing builds no command

    def get_params(self, ctx: Context) -> list[Parameter]:
        return untyped_flags(super().get_params(ctx))

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        read_plain_values(self.get_params(ctx))  # with --help and the completion options
        return super().parse_args(ctx, args)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except ClickException as exc:
            ctx = getattr(exc, "ctx", None)
            where = ctx.command_path if ctx is not None else "colabq"
            message = exc.format_message().rstrip(".")
            sys.stderr.write(f"colabq: {message}. See `{where} --help`.\n")
            sys.exit(exc.exit_code)
        except Abort:
            sys.stderr.write("colabq: aborted.\n")
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


def _builder(load: Callable[[], Callable[..., Any]], markup: Any) -> Callable[[], Command]:
    return lambda: build_command(load(), markup)
