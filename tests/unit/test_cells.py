"""Filling a cell's template: one pass over the template's own `{{NAME}}`s, each value a Python
literal that reads back as itself; a value's text is never read again as the template's."""

from __future__ import annotations

import ast

import pytest

from worker.session.cells import TemplateError, fill, fill_text, python_literal

TEMPLATE = "A = {{A}}\nB = {{B}}\n"


def test_a_value_holding_a_placeholder_name_stays_data() -> None:
    text = fill_text(TEMPLATE, {"A": "{{B}}'\"\n\x00", "B": ["{{A}}", 1, None, {"k": True}]})
    values = {line.split(" = ")[0]: ast.literal_eval(line.split(" = ")[1])
              for line in text.splitlines()}  # fmt: skip
    assert values == {"A": "{{B}}'\"\n\x00", "B": ["{{A}}", 1, None, {"k": True}]}


@pytest.mark.parametrize(
    ("values", "error"),
    [
        ({"A": 1}, "template: no value for B"),
        ({"A": 1, "B": 2, "C": 3}, "template has no placeholder C"),
    ],
)
def test_missing_or_unknown_names_are_refused(values: dict[str, object], error: str) -> None:
    with pytest.raises(TemplateError, match=f"^{error}$"):
        fill_text(TEMPLATE, values)


def test_only_plain_data_becomes_a_literal() -> None:
    assert python_literal(("a", 1)) == "['a', 1]"
    with pytest.raises(TemplateError):
        python_literal(object())
    with pytest.raises(TemplateError):
        python_literal({1: "a"})


def test_the_attach_template_names_exactly_its_values() -> None:
    source = fill("attach.py.tmpl", {"JOB": "j", "NONCE": "n", "OFFSET": 0})
    compile(source, "attach.py", "exec")
    with pytest.raises(TemplateError):
        fill("attach.py.tmpl", {"JOB": "j", "NONCE": "n"})
