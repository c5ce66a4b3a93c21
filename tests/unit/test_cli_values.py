"""The `colabq` group's pieces that keep start-up lean: option values coerced without pydantic
(`PlainValues`) give exactly what Typer's own pydantic adapter gives, or leave the value to it;
the command table builds a command only when it is looked up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer._click import Context
from typer._click.exceptions import BadParameter
from typer._coercion import build_runtime_param
from typer.core import TyperCommand
from typer.main import get_command

from producer.cligroup import LazyCommands, PlainValues, read_plain_values


def _param(annotation: Any, **option: Any) -> tuple[Any, Context]:
    """The Typer parameter of an option `--v` typed `annotation | None`, and a context."""

    option_v = typer.Option(None, "--v", **option)

    def f(v: Any = option_v) -> None:
        pass

    f.__annotations__ = {"v": annotation | None, "return": None}
    app = typer.Typer()
    app.command()(f)
    command = get_command(app)
    return command.params[0], Context(command)


def _outcome(coercer: Any, value: Any, param: Any, ctx: Context) -> tuple[str, Any]:
    try:
        got = coercer.coerce(value, param=param, ctx=ctx)
    except BadParameter as exc:
        return "error", exc.format_message()
    return type(got).__name__, repr(got)  # repr: nan equals nan


# (annotation, value, taken by the plain path: True, or left to Typer's adapter: False)
CASES = [
    (str, "abc", True), (str, "", True), (str, " padded ", True), (str, "ünï", True),
    (int, 30, True), (int, "30", True), (int, "-5", True), (int, "0", True),
    (int, "007", False), (int, " 7", False), (int, "+7", False), (int, "1_000", False),
    (int, "1e1", False), (int, "3.0", False), (int, "x", False), (int, "", False),
    (int, "9" * 30, False), (int, True, False),
    (float, 2.0, True), (float, "2.5", True), (float, "60", True), (float, "-0.1", True),
    (float, "0.1000000000000000055511151231257827", False), (float, "1e3", False),
    (float, ".5", False), (float, "nan", False), (float, "inf", False), (float, "x", False),
    (float, 2, False),
    (list[str], ("a", "b"), True), (list[str], (), True), (list[str], ["x"], True),
    (list[str], "ab", False),
    (Path, ".", True), (Path, "some/where", True), (Path, Path("."), True), (Path, "", False),
]  # fmt: skip


@pytest.mark.parametrize(("annotation", "value", "plain"), CASES)
def test_a_value_is_coerced_as_typers_adapter_coerces_it(
    annotation: Any, value: Any, plain: bool
) -> None:
    param, ctx = _param(annotation)
    ours = PlainValues(param.type_descriptor)
    expected = _outcome(build_runtime_param(param.type_descriptor), value, param, ctx)
    assert _outcome(ours, value, param, ctx) == expected
    assert (ours._typer is None) is plain  # taken here, or Typer's adapter was built for it


def test_a_missing_value_is_none_or_empty_without_coercion() -> None:
    for annotation, missing in ((int, None), (list[str], ())):
        param, ctx = _param(annotation)
        ours = PlainValues(param.type_descriptor)
        assert ours.coerce(None, param=param, ctx=ctx) == missing
        assert ours._typer is None


@pytest.mark.parametrize(
    ("annotation", "option"),
    [(int, {"min": 1}), (float, {"max": 2.0}), (int, {"clamp": True, "min": 0}),
     (str, {"parser": str.upper}), (Path, {"resolve_path": True})],
)  # fmt: skip
def test_a_constrained_option_is_left_to_typer(annotation: Any, option: dict[str, Any]) -> None:
    param, ctx = _param(annotation, **option)
    ours = PlainValues(param.type_descriptor)
    value = "5" if annotation is not Path else "."
    expected = _outcome(build_runtime_param(param.type_descriptor), value, param, ctx)
    assert _outcome(ours, value, param, ctx) == expected
    assert ours._typer is not None


def test_a_path_that_must_exist_is_checked_with_typers_message(tmp_path: Path) -> None:
    param, ctx = _param(Path, exists=True)
    ours = PlainValues(param.type_descriptor)
    missing = str(tmp_path / "nope")
    assert _outcome(ours, missing, param, ctx) == (
        "error", f"Invalid value for '--v': path {missing!r} does not exist."
    )  # fmt: skip
    assert _outcome(ours, str(tmp_path), param, ctx) == ("PosixPath", repr(tmp_path))
    assert ours._typer is None


def test_only_typer_parameters_not_yet_coerced_are_given_plain_values() -> None:
    param, _ = _param(int)
    read_plain_values([param])
    assert isinstance(param._runtime_param, PlainValues)
    built = build_runtime_param(param.type_descriptor)
    param._runtime_param = built
    read_plain_values([param])
    assert param._runtime_param is built  # one already built is kept


def test_commands_are_built_when_looked_up_not_when_listed() -> None:
    built: list[str] = []

    def loader(name: str) -> Any:
        def load() -> TyperCommand:
            built.append(name)
            return TyperCommand(name=name)

        return load

    eager = TyperCommand(name="first")
    commands = LazyCommands({"first": eager}, {"b": loader("b"), "a": loader("a")})
    assert list(commands) == ["first", "b", "a"] and len(commands) == 3 and "a" in commands
    assert built == []
    assert commands["a"].name == "a" and commands.get("a") is commands["a"]
    assert built == ["a"]  # once
    assert commands.get("nope") is None
    assert [name for name, _ in commands.items()] == ["first", "b", "a"]
    assert built == ["a", "b"]
    commands["c"] = TyperCommand(name="c")
    del commands["first"]
    assert list(commands) == ["b", "a", "c"]
    with pytest.raises(KeyError):
        del commands["first"]
