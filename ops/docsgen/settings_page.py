"""The settings page, generated from `worker/settings.py`'s model: each field's environment
name, type, default and description.

A field's description is its `Field(description=...)`, else the comment written for it in the
source: the block of `#` lines directly above its line (no blank line between), or a comment at
the end of its line. A field with neither is `Undocumented`: the site's build fails on it, so a
new setting without documentation fails CI.
"""

from __future__ import annotations

import ast
import html
import inspect
import io
import tokenize
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import AliasChoices
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined


class Undocumented(Exception):
    """Settings fields that have no description and no comment."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(
            "settings without documentation (write a comment above the field in "
            f"worker/settings.py, or Field(description=...)): {', '.join(names)}"
        )
        self.names = names


@dataclass(frozen=True)
class SettingDoc:
    name: str  # the field's name
    env: tuple[str, ...]  # its environment names, the canonical one first
    type: str
    default: str
    description: str


def _comments_by_line(source: str) -> dict[int, str]:
    """Each comment of `source` by its line number, without the `#`."""
    found: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            found[tok.start[0]] = tok.string.lstrip("#").strip()
    return found


def _field_nodes(source: str, class_name: str) -> dict[str, ast.AnnAssign]:
    tree = ast.parse(source)
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == class_name)
    return {
        n.target.id: n
        for n in cls.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }


def _comment_for(node: ast.AnnAssign, lines: list[str], comments: dict[int, str]) -> str:
    above: list[str] = []
    line = node.lineno - 1
    while line >= 1 and lines[line - 1].strip().startswith("#"):
        above.insert(0, comments.get(line, ""))
        line -= 1
    trailing = comments.get(node.end_lineno or node.lineno, "")
    if trailing and lines[(node.end_lineno or node.lineno) - 1].strip().startswith("#"):
        trailing = ""  # the line is a comment itself (cannot be: an AnnAssign), kept safe
    return " ".join(part for part in [*above, trailing] if part)


def _type_text(node: ast.AnnAssign, source: str) -> str:
    ann = node.annotation
    # Annotated[T, ...] documents as T: its metadata is how the value is read, not what it is.
    if isinstance(ann, ast.Subscript) and getattr(ann.value, "id", "") == "Annotated":
        inner = ann.slice
        if isinstance(inner, ast.Tuple):
            inner = inner.elts[0]
        return ast.get_source_segment(source, inner) or ""
    return ast.get_source_segment(source, ann) or ""


def _default_text(field: FieldInfo) -> str:
    """The default as Markdown: a value in code, or what a factory function's docstring says."""
    factory: Callable[[], Any] | None = field.default_factory  # type: ignore[assignment]
    if factory is not None and not isinstance(factory, type):
        doc = inspect.getdoc(factory)
        if doc:
            return " ".join(doc.split())
    if factory is not None:
        return f"`{_value_text(factory())}`"
    if field.default is PydanticUndefined:
        return "(required)"
    return f"`{_value_text(field.default)}`"


def _value_text(value: object) -> str:
    if value is None:
        return "unset"
    if value == "":
        return '"" (empty)'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(map(str, value)) if value else "(none)"
    if isinstance(value, dict):
        return "{}" if not value else repr(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _env_names(name: str, field: FieldInfo, prefix: str) -> tuple[str, ...]:
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        names = [c for c in alias.choices if isinstance(c, str)]
    elif isinstance(alias, str):
        names = [alias]
    else:
        names = [f"{prefix}{name}"]
    return tuple(n.upper() for n in names)


def settings_docs(model: type[Any], source_file: Path, prefix: str) -> list[SettingDoc]:
    """Every field of `model` (a pydantic-settings class defined in `source_file`), in the
    order it declares them; `Undocumented` naming each field without a description."""
    source = source_file.read_text()
    lines = source.splitlines()
    comments = _comments_by_line(source)
    nodes = _field_nodes(source, model.__name__)
    docs: list[SettingDoc] = []
    missing: list[str] = []
    for name, field in model.model_fields.items():
        node = nodes[name]
        text = (field.description or "").strip() or _comment_for(node, lines, comments)
        if not text:
            missing.append(f"{prefix}{name}".upper())
        docs.append(
            SettingDoc(
                name=name,
                env=_env_names(name, field, prefix),
                type=_type_text(node, source),
                default=_default_text(field),
                description=text,
            )
        )
    if missing:
        raise Undocumented(missing)
    return docs


def _cell(text: str) -> str:
    """`text` in a table cell: `<`, `>` and `&` outside code spans escaped (a comment's
    `gpu.<type>` is no HTML tag), `|` escaped everywhere."""
    pieces = text.replace("\n", " ").split("`")
    for i in range(0, len(pieces), 2):  # the even pieces are outside code spans
        pieces[i] = pieces[i].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(pieces).replace("|", "\\|")


def _env_words(text: str, docs: list[SettingDoc]) -> str:
    """A field named in code (`hf_token_file`) as the variable a reader sets."""
    for doc in docs:
        text = text.replace(f"`{doc.name}`", f"`{doc.env[0]}`")
    return text


def render_settings(docs: list[SettingDoc]) -> str:
    """The settings as one Markdown table."""
    rows = [
        "| setting | type | default | what it is |",
        "| --- | --- | --- | --- |",
    ]
    for doc in docs:
        # A long name may break after an underscore (<wbr>), never inside a word.
        env = "<br>".join(f"<code>{e.replace('_', '_<wbr>')}</code>" for e in doc.env)
        what = _cell(_env_words(doc.description, docs))
        # Inline HTML, not a code span: a `\|` inside a code span would show its backslash.
        kind = html.escape(doc.type).replace("|", "&#124;")
        rows.append(f"| {env} | <code>{kind}</code> | {_cell(doc.default)} | {what} |")
    return "\n".join(rows) + "\n"


def colabq_settings_docs(root: Path) -> list[SettingDoc]:
    """colabq's own settings (`worker.settings.Settings`)."""
    from worker.settings import ENV_PREFIX, Settings

    return settings_docs(Settings, root / "worker" / "settings.py", ENV_PREFIX)
