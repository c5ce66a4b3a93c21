"""Reading a Python config file as data, without running it.

Owns the literal subset that MMEngine/MMDetection configs (`train_dataloader = dict(batch_size=2)`)
and Detectron2 LazyConfig files (`optimizer.lr = 0.02`, `dataloader.train.total_batch_size = 16`)
are written in: top-level assignments of constants, lists, tuples, dicts and `dict(...)` calls,
attribute targets (nested keys), names assigned earlier in the file, and `+ - * /` on numbers
(`+` on strings). Anything else (imports, other calls, comprehensions) is left out: it cannot be
known without running the file, which a pre-flight must not do. Errors are `configs.py`'s.
"""

from __future__ import annotations

import ast
import copy
import operator
from collections.abc import Callable, Mapping
from typing import Any

_ARITHMETIC: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
}


class _NotLiteral(Exception):
    """The value needs the file to run to be known."""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _Reader:
    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.lines: dict[str, int] = {}

    def value(self, node: ast.expr, at: str) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            return [self.value(e, f"{at}[{i}]") for i, e in enumerate(node.elts)]
        if isinstance(node, ast.Dict):
            found: dict[str, Any] = {}
            for key, item in zip(node.keys, node.values, strict=True):
                if key is None:  # `{**base, ...}`
                    found.update(self._mapping(item, at))
                elif isinstance(key, ast.Constant) and isinstance(key.value, str):
                    self.lines.setdefault(f"{at}.{key.value}", key.lineno)
                    found[key.value] = self.value(item, f"{at}.{key.value}")
                else:
                    raise _NotLiteral
            return found
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "dict"
        ):
            return self._dict_call(node, at)
        if isinstance(node, ast.Name) and node.id in self.data:
            return copy.deepcopy(self.data[node.id])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            operand = self.value(node.operand, at)
            if _is_number(operand):
                return -operand if isinstance(node.op, ast.USub) else operand
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
            left, right = self.value(node.left, at), self.value(node.right, at)
            numbers = _is_number(left) and _is_number(right)
            strings = isinstance(left, str) and isinstance(right, str)
            if numbers or (strings and isinstance(node.op, ast.Add)):
                try:
                    return _ARITHMETIC[type(node.op)](left, right)
                except ArithmeticError:
                    raise _NotLiteral from None
        raise _NotLiteral

    def _mapping(self, node: ast.expr, at: str) -> Mapping[str, Any]:
        found = self.value(node, at)
        if not isinstance(found, Mapping):
            raise _NotLiteral
        return found

    def _dict_call(self, node: ast.Call, at: str) -> dict[str, Any]:
        if len(node.args) > 1:
            raise _NotLiteral
        found = dict(self._mapping(node.args[0], at)) if node.args else {}
        for kw in node.keywords:
            if kw.arg is None:
                found.update(self._mapping(kw.value, at))
            else:
                self.lines.setdefault(f"{at}.{kw.arg}", kw.lineno)
                found[kw.arg] = self.value(kw.value, f"{at}.{kw.arg}")
        return found

    def assign(self, target: ast.expr, node: ast.expr, line: int) -> None:
        path = _target_path(target)
        if path is None:
            return
        dotted = ".".join(path)
        try:
            found = self.value(node, dotted)
        except _NotLiteral:
            return
        here = self.data
        for part in path[:-1]:
            child = here.get(part)
            if not isinstance(child, dict):
                child = here[part] = {}
            here = child
        here[path[-1]] = found
        self.lines.setdefault(dotted, line)


def _target_path(target: ast.expr) -> list[str] | None:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Attribute):
        inner = _target_path(target.value)
        return None if inner is None else [*inner, target.attr]
    return None


def read_python_config(text: str, filename: str) -> tuple[dict[str, Any], dict[str, int]]:
    """(data, dotted key → line) of a Python config; raises `SyntaxError` if it is not Python."""
    tree = ast.parse(text, filename=filename)
    reader = _Reader()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                reader.assign(target, stmt.value, stmt.lineno)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            reader.assign(stmt.target, stmt.value, stmt.lineno)
    return reader.data, reader.lines
