"""Reading one training config (YAML, JSON or TOML) into a nested dict, with its `# why:` notes.

Owns parsing and the per-key line numbers needed to match a `# why: …` comment to the key it
explains. A file that does not parse raises `ConfigParseError` naming the file and line, which
the checks turn into a FAIL finding (never a traceback). Finding candidates is `discovery.py`'s.
A Python config (MMDetection, Detectron2 LazyConfig) named with `--config` or `--reference` is
read as data by `pyconfig.py`; it is not a discovery candidate. The YAML and TOML parsers are
imported when a file of their format is read (PyYAML costs `colabq preflight` about 0.01 s of
start-up).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from producer.preflight.pyconfig import read_python_config
from worker.errors import UserInputError

if TYPE_CHECKING:
    import yaml

CONFIG_SUFFIXES: tuple[str, ...] = (".yaml", ".yml", ".json", ".toml")
PYTHON_SUFFIX = ".py"

_WHY = re.compile(r"^#+\s*why\s*[:\-]\s*(?P<reason>.+?)\s*$", re.IGNORECASE)
_TOML_LINE_NO = re.compile(r"\(at line (\d+), column \d+\)")
_TOML_TABLE = re.compile(r"^\s*\[\[?(?P<name>[^\[\]]+)\]\]?\s*(?:#.*)?$")
_TOML_KEY = re.compile(r"^\s*(?P<key>[A-Za-z0-9_\-\"'. ]+?)\s*=")


class ConfigParseError(UserInputError):
    """A config file is not valid YAML/JSON/TOML, or its top level is not a mapping."""

    def __init__(self, path: Path, line: int | None, message: str) -> None:
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line
        self.message = message


@dataclass(frozen=True)
class LoadedConfig:
    """A parsed config: its data, where each dotted key sits, and its `# why:` comments."""

    path: Path
    data: Mapping[str, Any]
    key_lines: Mapping[str, int] = field(default_factory=dict)  # dotted key → 1-based line
    why_by_line: Mapping[int, str] = field(default_factory=dict)  # line → reason

    def why_for(self, dotted_key: str) -> str | None:
        line = self.key_lines.get(dotted_key)
        return None if line is None else self.why_by_line.get(line)

    @property
    def why_notes(self) -> tuple[str, ...]:
        return tuple(self.why_by_line.values())


def load_config(path: Path) -> LoadedConfig:
    """Parse one config file; raises `ConfigParseError` (or `OSError` if it cannot be read)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigParseError(path, None, f"not UTF-8 text ({exc.reason})") from exc
    return parse_config_text(path, text)


def parse_config_text(path: Path, text: str) -> LoadedConfig:
    suffix = path.suffix.lower()
    if suffix == ".json":
        return LoadedConfig(path, _parse_json(path, text))
    if suffix == ".toml":
        data = _parse_toml(path, text)
        return LoadedConfig(path, data, _toml_key_lines(text), _why_comments(text))
    if suffix in (".yaml", ".yml"):
        data, key_lines = _parse_yaml(path, text)
        return LoadedConfig(path, data, key_lines, _why_comments(text))
    if suffix == PYTHON_SUFFIX:
        try:
            data, key_lines = read_python_config(text, str(path))
        except SyntaxError as exc:
            raise ConfigParseError(path, exc.lineno, exc.msg) from exc
        except (ValueError, RecursionError) as exc:  # NUL bytes; absurdly deep nesting
            raise ConfigParseError(path, None, f"not a readable Python config ({exc})") from exc
        return LoadedConfig(path, data, key_lines, _why_comments(text))
    raise ConfigParseError(path, None, f"unknown config format {suffix!r}")


def _require_mapping(path: Path, data: Any) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigParseError(path, 1, f"top level is a {type(data).__name__}, not a mapping")
    return data


def _parse_json(path: Path, text: str) -> dict[str, Any]:
    try:
        return _require_mapping(path, json.loads(text))
    except json.JSONDecodeError as exc:
        raise ConfigParseError(path, exc.lineno, exc.msg) from exc


def _parse_toml(path: Path, text: str) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = _TOML_LINE_NO.search(str(exc))
        line = int(found.group(1)) if found else max(1, text.count("\n") + 1)
        message = _TOML_LINE_NO.sub("", str(exc)).replace("(at end of document)", "").strip()
        raise ConfigParseError(path, line, message) from exc


def _parse_yaml(path: Path, text: str) -> tuple[dict[str, Any], dict[str, int]]:
    import yaml

    loader_class: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise ConfigParseError(path, line, exc.problem or exc.context or "invalid YAML") from exc
    except yaml.YAMLError as exc:
        raise ConfigParseError(path, None, str(exc)) from exc
    finally:
        loader.dispose()
    mapping = _require_mapping(path, data)
    lines = dict(_yaml_key_lines(node, "")) if node is not None else {}
    return mapping, lines


def _yaml_key_lines(node: yaml.Node, prefix: str) -> Iterator[tuple[str, int]]:
    import yaml

    if not isinstance(node, yaml.MappingNode):
        return
    for key_node, value_node in node.value:
        dotted = f"{prefix}{key_node.value}"
        yield dotted, key_node.start_mark.line + 1
        yield from _yaml_key_lines(value_node, dotted + ".")


def _comment_start(line: str) -> int:
    """Index of a `#` that starts a comment (outside quotes, after whitespace), or -1."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return i
    return -1


def _why_comments(text: str) -> dict[int, str]:
    """`# why: …` reasons by line; a comment alone on its line explains the next key line."""
    found: dict[int, str] = {}
    pending: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        at = _comment_start(line)
        code = (line if at < 0 else line[:at]).strip()
        why = _WHY.match(line[at:].strip()) if at >= 0 else None
        if not code:
            if why:
                pending = why.group("reason")
            continue
        reason = why.group("reason") if why else pending
        if reason:
            found[number] = reason
        pending = None
    return found


def _toml_dotted(key: str) -> str:
    parts = re.findall(r'"[^"]*"|\'[^\']*\'|[^.]+', key)
    return ".".join(p.strip().strip("\"'") for p in parts if p.strip())


def _toml_key_lines(text: str) -> dict[str, int]:
    """Dotted key → line for TOML; approximate (no multi-line strings), used only for comments."""
    lines: dict[str, int] = {}
    table = ""
    for number, line in enumerate(text.splitlines(), start=1):
        header = _TOML_TABLE.match(line)
        if header:
            table = _toml_dotted(header.group("name")) + "."
            lines.setdefault(table[:-1], number)
            continue
        key = _TOML_KEY.match(line)
        if key:
            lines.setdefault(table + _toml_dotted(key.group("key")), number)
    return lines
