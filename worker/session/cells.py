"""The cells colabq runs on the VM, filled from their templates in `worker/vm/`. Light on
purpose: the attach client (`attach.py`) builds its cell here without the job contract.

A template names its values `{{NAME}}` (capitals, digits, `_`) and is filled in one pass: every
placeholder is replaced by its value written as a literal of the template's language (Python:
`repr` of plain data, which reads back as exactly the same value), and nothing a value brings is
ever looked at again, so a value that holds another placeholder's name, quotes, `$()` or a
newline stays data. A placeholder without a value, or a value without a placeholder, is refused:
the set of names is the template's own, fixed where it is written.
"""

from __future__ import annotations

import re
from pathlib import Path

VM_DIR = Path(__file__).parents[1] / "vm"
PLACEHOLDER = re.compile(r"\{\{([A-Z][A-Z0-9_]*)\}\}")


class TemplateError(ValueError):
    """A template and its values do not match (a bug of colabq's, never the user's input)."""


def python_literal(value: object) -> str:
    """`value` as a Python literal that evaluates to an equal value: plain data only (str, int,
    bool, None, lists and tuples of them, dicts with str keys); anything else is refused."""
    return repr(_plain(value))


def _plain(value: object) -> object:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _plain(v) for k, v in value.items()}
    raise TemplateError(f"{type(value).__name__} is not plain data for a cell")


def fill_text(text: str, values: dict[str, object], name: str = "template") -> str:
    """`text` with each `{{NAME}}` replaced, in one pass, by `values[NAME]` as a Python literal."""
    wanted = set(PLACEHOLDER.findall(text))
    if missing := sorted(wanted - values.keys()):
        raise TemplateError(f"{name}: no value for {', '.join(missing)}")
    if unknown := sorted(values.keys() - wanted):
        raise TemplateError(f"{name} has no placeholder {', '.join(unknown)}")
    literals = {key: python_literal(value) for key, value in values.items()}
    return PLACEHOLDER.sub(lambda m: literals[m[1]], text)


def fill(template: str, values: dict[str, object]) -> str:
    """`template` (a Python file of `worker/vm/`) filled with `values` (`fill_text`)."""
    return fill_text((VM_DIR / template).read_text(), values, template)


def attach_source(job_id: str, nonce: str, offset: int) -> str:
    """The attach cell: follow the console from byte `offset` to the wrapper's end."""
    return fill("attach.py.tmpl", {"JOB": job_id, "NONCE": nonce, "OFFSET": int(offset)})
