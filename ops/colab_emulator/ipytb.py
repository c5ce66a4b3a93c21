"""IPython 8's tracebacks, as the Colab kernel sends them in an `error` output (stdlib only).

The real kernel is IPython: an uncaught exception in a cell becomes an `error` output whose
`traceback` is the list of strings VerboseTB builds (its "Neutral" colour scheme, the one ipykernel
uses), and `colab exec` writes `"".join(traceback) + "\\n"` to stderr (`display_output` in the real
CLI's commands/execution.py). Joining with "" (Jupyter frontends join with "\\n") puts the red
dashed rule, the `<ExcName>   Traceback (most recent call last)` header and the first
`Cell In[N], line L` on one line; that is what the real CLI prints, so it is what this prints.

Three shapes, as IPython 8 makes them:
- `verbose`: any exception raised while the cell runs (VerboseTB, "Context" mode): rule, header,
  one block per frame (`Cell In[N], line L[, in func(args)]` or `File path:L[, in ...]`, then the
  source around the line with `---->` on it, syntax-coloured like pygments' Terminal256Formatter
  with the "default" style), then `<ExcName>: message`; chained exceptions come first.
- `syntax`: the cell does not compile (SyntaxTB): location, the line, a caret, `SyntaxError: msg`.
- `exit`: SystemExit, `An exception has occurred, use %tb to see the full traceback.` and then
  `SystemExit: N`.

The kernel bootstrap (kernel.py) loads this file by path only when a cell fails.
"""

from __future__ import annotations

import ast
import functools
import inspect
import keyword
import linecache
import os
import re
from collections import Counter
from collections.abc import Iterator
from types import CodeType, FrameType, TracebackType
from typing import Any


def _esc(code: str) -> str:
    return f"\x1b[{code}m"


# IPython's "Neutral" exception colours (IPython/core/excolors.py).
NORMAL = _esc("0")
RED, GREEN, LIGHT_GREEN = _esc("0;31"), _esc("0;32"), _esc("1;32")
CYAN, BLUE = _esc("0;36"), _esc("0;34")
TOPLINE = EXC_NAME = LINE = RED
FILENAME_EM = LINENO_EM = GREEN
LINENO = LIGHT_GREEN
V_NAME = NORMAL_EM = CYAN
VAL_EM = BLUE
CARET = NORMAL
WIDTH = 75  # min(75, terminal width); a kernel has no terminal, so 80 columns
INDENT_SIZE = 8
EXIT_NOTE = "An exception has occurred, use %tb to see the full traceback.\n"
DIRECT_CAUSE = "\nThe above exception was the direct cause of the following exception:\n"
DURING_HANDLING = "\nDuring handling of the above exception, another exception occurred:\n"

# ---------------------------------------------------------------------------------------------
# Syntax colouring: pygments 2.21's PythonLexer rules, rendered like Terminal256Formatter with
# the "default" style (what IPython 8 uses for traceback source lines).

# (on, off) escape codes per kind, from Terminal256Formatter(style="default").style_string.
_STYLE = {
    "ws": ("38;5;250", "39"),  # Whitespace
    "kw": ("38;5;28;01", "39;00"),  # Keyword (and .Constant, .Namespace)
    "builtin": ("38;5;28", "39"),  # Name.Builtin (and .Pseudo)
    "exc": ("38;5;167;01", "39;00"),  # Name.Exception
    "func": ("38;5;21", "39"),  # Name.Function (and .Magic)
    "var": ("38;5;18", "39"),  # Name.Variable.Magic
    "class": ("38;5;21;01", "39;00"),  # Name.Class
    "ns": ("38;5;21;01", "39;00"),  # Name.Namespace
    "deco": ("38;5;129", "39"),  # Name.Decorator
    "op": ("38;5;241", "39"),  # Operator
    "opword": ("38;5;129;01", "39;00"),  # Operator.Word
    "str": ("38;5;124", "39"),  # String (and .Affix, .Single, .Double)
    "doc": ("38;5;124;03", "39;00"),  # String.Doc
    "esc": ("38;5;130;01", "39;00"),  # String.Escape
    "interp": ("38;5;132;01", "39;00"),  # String.Interpol
    "num": ("38;5;241", "39"),  # Number
    "comment": ("38;5;66;03", "39;00"),  # Comment
}
ON_OFF = {kind: (_esc(on), _esc(off)) for kind, (on, off) in _STYLE.items()}

_NAME = LINE = RED
FILENAME_EM = LINENO_EM = GREEN
LINENO = LIGHT_GREEN
V_NAME = NORMAL_EM = CYAN
VAL_EM = BLUE
CARET = NORMAL
WIDTH = 75  # min(75, terminal width); a kernel has no terminal, so 80 columns
INDENT_SIZE = 8
EXIT_NOTE = "An exception has occurred, use %tb to see the full traceback.\n"
DIRECT_CAUSE = "\nThe above exception was the direct cause of the following exception:\n"
DURING_HANDLING = "\nDuring handling of the above exception, another exception occurred:\n"

# ---------------------------------------------------------------------------------------------
# Syntax colouring: pygments 2.21's PythonLexer rules, rendered like Terminal256Formatter with
# the "default" style (what IPython 8 uses for traceback source lines).

_STYLE = {
    "ws": ("38;5;250", False),
    "kw": ("38;5;28", True),
    "builtin": ("38;5;28", False),
    "exc": ("38;5;167", True),
    "func": ("38;5;21", False),
    "var": ("38;5;18", False),
    "class": ("38;5;21", True),
    "ns": ("38;5;21", True),
    "deco": ("38;5;129", False),
    "op": ("38;5;241", False),
    "opword": ("38;5;129", True),
    "str": ("38;5;124", False),
    "doc": ("38;5;124;03", True),
    "esc": ("38;5;130", True),
    "interp": ("38;5;132", True),
    "num": ("38;5;241", False),
    "comment": ("38;5;66;03", True),
}
ON_OFF = {
    kind: (_esc(code + (";01" if strong and not code.endswith(";03") else "")), _esc("39;00"))
    if strong
    else (_esc(code), _esc("39"))
    for kind, (code, strong) in _STYLE.items()
}

_NAME = r"[^\W\d]\w*"


def _names(text: str) -> list[str]:
    return text.split()


_BUILTINS = _names(
    "__import__ abs aiter all any bin bool bytearray breakpoint bytes callable chr classmethod "
    "compile complex delattr dict dir divmod enumerate eval filter float format frozendict "
    "frozenset getattr globals hasattr hash hex id input int isinstance issubclass iter len list "
    "locals map max memoryview min next object oct open ord pow print property range repr "
    "reversed round sentinel set setattr slice sorted staticmethod str sum super tuple type vars "
    "zip"
)
_EXCEPTIONS = _names(
    "ArithmeticError AssertionError AttributeError BaseException BufferError BytesWarning "
    "DeprecationWarning EOFError EnvironmentError Exception FloatingPointError FutureWarning "
    "GeneratorExit IOError ImportError ImportWarning IndentationError IndexError KeyError "
    "KeyboardInterrupt LookupError MemoryError NameError NotImplementedError OSError "
    "OverflowError PendingDeprecationWarning ReferenceError ResourceWarning RuntimeError "
    "RuntimeWarning StopIteration SyntaxError SyntaxWarning SystemError SystemExit TabError "
    "TypeError UnboundLocalError UnicodeDecodeError UnicodeEncodeError UnicodeError "
    "UnicodeTranslateError UnicodeWarning UserWarning ValueError VMSError Warning WindowsError "
    "ZeroDivisionError BlockingIOError ChildProcessError ConnectionError BrokenPipeError "
    "ConnectionAbortedError ConnectionRefusedError ConnectionResetError FileExistsError "
    "FileNotFoundError InterruptedError IsADirectoryError NotADirectoryError PermissionError "
    "ProcessLookupError TimeoutError StopAsyncIteration ModuleNotFoundError RecursionError "
    "EncodingWarning"
)
_MAGIC_FUNCS = _names(
    "abs add aenter aexit aiter and anext await bool bytes call complex contains del delattr "
    "delete delitem dir divmod enter eq exit float floordiv format ge get getattr getattribute "
    "getitem gt hash iadd iand ifloordiv ilshift imatmul imod imul index init instancecheck int "
    "invert ior ipow irshift isub iter itruediv ixor le len length_hint lshift lt matmul missing "
    "mod mul ne neg new next or pos pow prepare radd rand rdivmod repr reversed rfloordiv "
    "rlshift rmatmul rmod rmul ror round rpow rrshift rshift rsub rtruediv rxor set setattr "
    "setitem str sub subclasscheck truediv xor"
)
_MAGIC_VARS = _names(
    "annotations bases class closure code defaults dict doc file func globals kwdefaults module "
    "mro name objclass qualname self slots weakref"
)


def _words(words: list[str], prefix: str = "", suffix: str = r"\b") -> str:
    return (
        prefix
        + "(?:"
        + "|".join(sorted(map(re.escape, words), key=len, reverse=True))
        + ")"
        + suffix
    )


INCLUDE = "include"


def _include(state: str) -> tuple[str, str, None]:
    """pygments' `include(state)`: that state's rules, in place."""
    return (state, INCLUDE, None)


def _inner_string(kind: str) -> list[tuple[str, Any, Any]]:
    return [
        (
            r"%(\(\w+\))?[-#0 +]*([0-9]+|[*])?(\.([0-9]+|[*]))?[hlL]?[E-GXc-giorsaux%]",
            "interp",
            None,
        ),
        (
            r"\{((\w+)((\.\w+)|(\[[^\]]+\]))*)?(\![sra])?"
            r"(\:(.?[<>=\^])?[-+ ]?#?0?(\d+)?,?(\.\d+)?[E-GXb-gnosx%]?)?\}",
            "interp",
            None,
        ),
        (r"[^\\\'\"%{\n]+", kind, None),
        (r"[\'\"\\]", kind, None),
        (r"%|(\{{1,2})", kind, None),
    ]


def _fstring(kind: str) -> list[tuple[str, Any, Any]]:
    return [
        (r"\}", "interp", None),
        (r"\{", "interp", ["expr-inside-fstring"]),
        (r"[^\\\'\"{}\n]+", kind, None),
        (r"[\'\"\\]", kind, None),
    ]


_KW_LOWER = "|".join(k for k in keyword.kwlist if k[0].islower())
_STRING_OPENERS: list[tuple[str, str, str]] = [
    # (prefix regex, quote, state); quotes are tried triple first, as pygments does.
    ("(?i)(r[ft]|[ft]r)", '"""', "rfstringescape+tdqf"),
    ("(?i)(r[ft]|[ft]r)", "'''", "rfstringescape+tsqf"),
    ("(?i)(r[ft]|[ft]r)", '"', "rfstringescape+dqf"),
    ("(?i)(r[ft]|[ft]r)", "'", "rfstringescape+sqf"),
    ("([fFtT])", '"""', "fstringescape+tdqf"),
    ("([fFtT])", "'''", "fstringescape+tsqf"),
    ("([fFtT])", '"', "fstringescape+dqf"),
    ("([fFtT])", "'", "fstringescape+sqf"),
    ("(?i)(rb|br|r)", '"""', "tdqs"),
    ("(?i)(rb|br|r)", "'''", "tsqs"),
    ("(?i)(rb|br|r)", '"', "dqs"),
    ("(?i)(rb|br|r)", "'", "sqs"),
    ("([uU]?)", '"""', "stringescape+tdqs"),
    ("([uU]?)", "'''", "stringescape+tsqs"),
    ("([uU]?)", '"', "stringescape+dqs"),
    ("([uU]?)", "'", "stringescape+sqs"),
    ("([bB])", '"""', "bytesescape+tdqs"),
    ("([bB])", "'''", "bytesescape+tsqs"),
    ("([bB])", '"', "bytesescape+dqs"),
    ("([bB])", "'", "bytesescape+sqs"),
]
_RAW_STATES: dict[str, list[tuple[str, Any, Any]]] = {
    "root": [
        (r"\n", "ws", None),
        (r'^(\s*)([rRuUbB]{,2})("""[\s\S]*?""")', ("ws", "str", "doc"), None),
        (r"^(\s*)([rRuUbB]{,2})('''[\s\S]*?''')", ("ws", "str", "doc"), None),
        (r"\A#!.+$", "comment", None),
        (r"#.*$", "comment", None),
        (r"\\\n", None, None),
        (r"\\", None, None),
        _include("keywords"),
        (
            r"(^[ \t]*)(match|case)\b(?![ \t]*(?:[:,;=^&|@~)\]}]|(?:" + _KW_LOWER + r")\b))",
            (None, "kw"),
            ["soft-keywords-inner"],
        ),
        (r"(def)((?:\s|\\\s)+)", ("kw", "ws"), ["funcname"]),
        (r"(class)((?:\s|\\\s)+)", ("kw", "ws"), ["classname"]),
        (r"^(lazy)((?:\s|\\\s)+)(from)((?:\s|\\\s)+)", ("kw", "ws", "kw", "ws"), ["fromimport"]),
        (r"^(lazy)((?:\s|\\\s)+)(import)((?:\s|\\\s)+)", ("kw", "ws", "kw", "ws"), ["import"]),
        (r"(from)((?:\s|\\\s)+)", ("kw", "ws"), ["fromimport"]),
        (r"(import)((?:\s|\\\s)+)", ("kw", "ws"), ["import"]),
        _include("expr"),
    ],
    "expr": [
        *[
            (prefix + "(" + re.escape(quote) + ")", ("str", "str"), [state])
            for prefix, quote, state in _STRING_OPENERS
        ],
        (r"[^\S\n]+", None, None),
        (
            r"(\d(?:_?\d)*\.(?:\d(?:_?\d)*)?|(?:\d(?:_?\d)*)?\.\d(?:_?\d)*)([eE][+-]?\d(?:_?\d)*)?",
            "num",
            None,
        ),
        (r"\d(?:_?\d)*[eE][+-]?\d(?:_?\d)*j?", "num", None),
        (r"0[oO](?:_?[0-7])+", "num", None),
        (r"0[bB](?:_?[01])+", "num", None),
        (r"0[xX](?:_?[a-fA-F0-9])+", "num", None),
        (r"\d(?:_?\d)*", "num", None),
        (r"!=|==|<<|>>|:=|[-~+/*%=<>&^|.]", "op", None),
        (r"[]{}:(),;[]", None, None),
        (r"(in|is|and|or|not)\b", "opword", None),
        (
            _words(["async for", "await", "else", "for", "if", "lambda", "yield", "yield from"]),
            "kw",
            None,
        ),
        (_words(["True", "False", "None"]), "kw", None),
        (_words(_BUILTINS, prefix=r"(?<!\.)"), "builtin", None),
        (r"(?<!\.)(self|Ellipsis|NotImplemented|cls)\b", "builtin", None),
        (_words(_EXCEPTIONS, prefix=r"(?<!\.)"), "exc", None),
        (_words([f"__{name}__" for name in _MAGIC_FUNCS]), "func", None),
        (_words([f"__{name}__" for name in _MAGIC_VARS]), "var", None),
        ("@" + _NAME, "deco", None),
        (r"@", "op", None),
        (_NAME, None, None),
    ],
    "keywords": [
        (
            _words(
                [
                    *_names(
                        "assert async await break continue del elif else except finally for "
                        "global if lambda pass raise nonlocal return try while yield as with"
                    ),
                    "yield from",
                ]
            ),
            "kw",
            None,
        ),
        (_words(["True", "False", "None"]), "kw", None),
    ],
    "expr-inside-fstring": [
        (r"[{([]", None, ["expr-inside-fstring-inner"]),
        (r"(=\s*)?(\![sraf])?\}", "interp", "#pop"),
        (r"(=\s*)?(\![sraf])?:", "interp", "#pop"),
        (r"\s+", "ws", None),
        _include("expr"),
    ],
    "expr-inside-fstring-inner": [
        (r"[{([]", None, ["expr-inside-fstring-inner"]),
        (r"[])}]", None, "#pop"),
        (r"\s+", "ws", None),
        _include("expr"),
    ],
    "soft-keywords-inner": [
        (r"(\s+)([^\n_]*)(_\b)", ("ws", "using", "kw"), None),
        ("", None, "#pop"),
    ],
    "funcname": [
        (_words([f"__{name}__" for name in _MAGIC_FUNCS]), "func", None),
        (_NAME, "func", "#pop"),
        ("", None, "#pop"),
    ],
    "classname": [(_NAME, "class", "#pop")],
    "import": [
        (r"(\s+)(as)(\s+)", ("ws", "kw", "ws"), None),
        (r"\.", "ns", None),
        (_NAME, "ns", None),
        (r"(\s*)(,)(\s*)", ("ws", "op", "ws"), None),
        ("", None, "#pop"),
    ],
    "fromimport": [
        (r"(\s+)(import)\b", ("ws", "kw"), "#pop"),
        (r"\.", "ns", None),
        (r"None\b", "kw", "#pop"),
        (_NAME, "ns", None),
        ("", None, "#pop"),
    ],
    "rfstringescape": [(r"\{\{", "esc", None), (r"\}\}", "esc", None)],
    "fstringescape": [_include("rfstringescape"), _include("stringescape")],
    "bytesescape": [(r"\\([\\abfnrtv\"\']|\n|x[a-fA-F0-9]{2}|[0-7]{1,3})", "esc", None)],
    "stringescape": [
        (r"\\(N\{.*?\}|u[a-fA-F0-9]{4}|U[a-fA-F0-9]{8})", "esc", None),
        _include("bytesescape"),
    ],
    "dqf": [(r'"', "str", "#pop"), (r'\\\\|\\"|\\\n', "esc", None), *_fstring("str")],
    "sqf": [(r"'", "str", "#pop"), (r"\\\\|\\'|\\\n", "esc", None), *_fstring("str")],
    "dqs": [(r'"', "str", "#pop"), (r'\\\\|\\"|\\\n', "esc", None), *_inner_string("str")],
    "sqs": [(r"'", "str", "#pop"), (r"\\\\|\\'|\\\n", "esc", None), *_inner_string("str")],
    "tdqf": [(r'"""', "str", "#pop"), *_fstring("str"), (r"\n", "str", None)],
    "tsqf": [(r"'''", "str", "#pop"), *_fstring("str"), (r"\n", "str", None)],
    "tdqs": [(r'"""', "str", "#pop"), *_inner_string("str"), (r"\n", "str", None)],
    "tsqs": [(r"'''", "str", "#pop"), *_inner_string("str"), (r"\n", "str", None)],
}
Rule = tuple[re.Pattern[str], Any, Any]
_STATES: dict[str, list[Rule]] = {}


def _rules(name: str) -> list[Rule]:
    """The compiled rules of a state (`a+b` is pygments' `combined(a, b)`), includes expanded."""
    if name not in _STATES:
        compiled: list[Rule] = []
        for part in name.split("+"):
            for pattern, action, new in _RAW_STATES[part]:
                if action == INCLUDE:
                    compiled.extend(_rules(pattern))
                    continue
                compiled.append((re.compile(pattern, re.MULTILINE), action, new))
        _STATES[name] = compiled
    return _STATES[name]


def lex(text: str, state: str = "root") -> Iterator[tuple[str | None, str]]:
    """(style kind or None, text) pairs, as pygments' RegexLexer would split `text`."""
    stack = [state]
    pos = 0
    while pos < len(text):
        for regex, action, new in _rules(stack[-1]):
            match = regex.match(text, pos)
            if match is None:
                continue
            if isinstance(action, tuple):
                for index, kind in enumerate(action, 1):
                    data = match.group(index)
                    if not data:
                        continue
                    if kind == "using":
                        yield from lex(data)
                    else:
                        yield kind, data
            elif match.group():
                yield action, match.group()
            pos = match.end()
            if new == "#pop":
                if len(stack) > 1:
                    stack.pop()
            elif new:
                stack.extend(new)
            break
        else:
            if text[pos] == "\n":
                stack = ["root"]
                yield "ws", "\n"
            else:
                yield None, text[pos]
            pos += 1


@functools.lru_cache(maxsize=64)
def _highlight(code: str) -> tuple[str, ...]:
    return tuple(highlight(code))


def highlight(code: str) -> list[str]:
    """`code` coloured like pygments.highlight(code, PythonLexer, Terminal256Formatter), by line."""
    if not code.endswith("\n"):
        code += "\n"
    out: list[str] = []
    for kind, value in lex(code):
        on, off = ON_OFF[kind] if kind else ("", "")
        pieces = value.split("\n")
        for piece in pieces[:-1]:
            if piece:
                out.append(on + piece + off)
            out.append("\n")
        if pieces[-1]:
            out.append(on + pieces[-1] + off)
    return "".join(out).splitlines()


# ---------------------------------------------------------------------------------------------
# Which source lines a frame shows: stack_data's "pieces" (a statement, or the header of a
# compound statement), two before and two after the one being executed, within the frame's scope.

MAX_LINES_PER_PIECE = 6
LINE_GAP = None


def _line_range(node: ast.AST) -> tuple[int, int]:
    if hasattr(ast, "match_case") and isinstance(node, ast.match_case):
        return _line_range(node.pattern)[0], _line_range(node.body[-1])[1]
    start = getattr(node, "lineno", 1)
    for decorator in getattr(node, "decorator_list", ()) or ():
        start = min(start, decorator.lineno)
    return start, (getattr(node, "end_lineno", None) or start) + 1


def _raw_pieces(node: ast.AST, start: int, end: int) -> Iterator[tuple[int, int]]:
    statement_types: tuple[type, ...] = (ast.stmt, ast.ExceptHandler)
    if hasattr(ast, "match_case"):
        statement_types += (ast.match_case,)
    for _, body in ast.iter_fields(node):
        if isinstance(body, list) and body and isinstance(body[0], statement_types):
            groups: dict[tuple[int, int], list[ast.AST]] = {}
            for statement in body:
                groups.setdefault(_line_range(statement), []).append(statement)
            for span, group in sorted(groups.items()):
                for inner_start, inner_end in _raw_pieces(group[0], *span):
                    if start < inner_start:
                        yield start, inner_start
                    if inner_start < inner_end:
                        yield inner_start, inner_end
                    start = inner_end
    yield start, end


def _pieces(tree: ast.AST, lines: list[str]) -> list[tuple[int, int]]:
    def blank(number: int) -> bool:
        return 0 < number <= len(lines) and not lines[number - 1].strip()

    pieces = []
    for start, end in _raw_pieces(tree, 1, len(lines) + 1):
        while start < end and blank(start):
            start += 1
        while end > start and blank(end - 1):
            end -= 1
        if start < end:
            pieces.append((start, end))
    return pieces


def _scope(tree: ast.Module, lineno: int) -> ast.AST | None:
    """The innermost def/class (or the module) around the statement executing at `lineno`."""
    parents: dict[ast.AST, ast.AST] = {}
    deepest: ast.AST | None = None
    depth: dict[ast.AST, int] = {tree: 0}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
            depth[child] = depth[node] + 1
        if isinstance(node, ast.stmt):
            start, end = _line_range(node)
            if start <= lineno < end and (deepest is None or depth[node] > depth[deepest]):
                deepest = node
    if deepest is None:
        return None
    node = parents.get(deepest)
    while node is not None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            return node
        node = parents.get(node)
    return None


@functools.lru_cache(maxsize=64)
def _parsed(filename: str) -> tuple[list[str], ast.Module, list[tuple[int, int]]] | None:
    """A source file's lines, syntax tree and pieces (None without source or parsable code)."""
    lines = [line.rstrip("\n") for line in linecache.getlines(filename)]
    if not lines:
        return None
    try:
        tree = ast.parse("\n".join(lines) + "\n")
    except (SyntaxError, ValueError):
        return None
    return lines, tree, _pieces(tree, lines)


def _arrow(pad: int) -> str:
    if pad >= 2:
        return "-" * (pad - 2) + "> "
    return ">" if pad == 1 else ""


def context_lines(filename: str, lineno: int, context: int = 5) -> list[str]:
    """The numbered source lines of one frame (`----> L` on the current one), coloured.

    `context` is IPython's number_of_lines_of_context: 5 (two pieces either side) for the
    exception raised, 3 (one either side) for the exceptions chained to it.
    """
    after = (context - 1) // 2
    before = context - 1 - after
    parsed = _parsed(filename)
    if parsed is None:
        return []
    lines, tree, pieces = parsed
    scope = _scope(tree, lineno)
    if scope is None:
        return []
    scope_start, scope_end = (
        (1, len(lines) + 1) if isinstance(scope, ast.Module) else _line_range(scope)
    )
    scope_pieces = [p for p in pieces if scope_start <= p[0] and p[1] <= scope_end]
    current = next((p for p in scope_pieces if p[0] <= lineno < p[1]), None)
    if current is None:
        return []
    index = scope_pieces.index(current)
    shown = scope_pieces[max(0, index - before) : index + 1 + after]
    first = scope_start
    coloured = _highlight("\n".join(lines[first - 1 : scope_end - 1]))
    numbers = [n for piece in shown for n in range(*piece)]
    indent = min(
        (len(lines[n - 1]) - len(lines[n - 1].lstrip()) for n in numbers if lines[n - 1].strip()),
        default=0,
    )
    out = []
    for piece in shown:
        rows: list[int | None] = list(range(*piece))
        if piece != current and len(rows) > MAX_LINES_PER_PIECE:
            right = (MAX_LINES_PER_PIECE - 1) // 2
            left = MAX_LINES_PER_PIECE - 1 - right
            rows = [*rows[:left], LINE_GAP, *rows[-right:]]
        for number in rows:
            if number is None:
                out.append(f"{LINENO_EM}   (...){NORMAL}\n")
                continue
            text = coloured[number - first] if number - first < len(coloured) else ""
            if indent:
                text = text.replace(" " * indent, "", 1)
            if number == lineno:
                num = _arrow(INDENT_SIZE - 1 - len(str(number))) + str(number)
                colour = LINENO_EM
            else:
                num = f"{number:>{INDENT_SIZE - 1}}"
                colour = LINENO
            out.append(f"{colour}{num}{NORMAL} {text}\n")
    return out


# ---------------------------------------------------------------------------------------------
# The traceback parts.


def display_path(filename: str) -> str:
    """A file as the VM names it: the VM's root is `/`, its HOME (`/root`) becomes `~`."""
    root = os.environ.get("COLAB_EMU_VM_ROOT", "").rstrip("/")
    path = filename
    home = os.path.expanduser("~")
    if root and (path == root or path.startswith(root + "/")):
        path = "/" + path[len(root) :].lstrip("/")
        home = "/root"
    if path.startswith(home):
        path = "~" + path[len(home) :]
    return path


def location(filename: str, lineno: int | None, cells: dict[str, int], close: str) -> str:
    """`Cell In[N], line L` for a cell, `File path:L` otherwise (IPython's _format_filename)."""
    if filename in cells:
        name = f"In[{cells[filename]}]"
        where = name if lineno is None else f"{name}, line {lineno}"
        return f"Cell {FILENAME_EM}{where}{close}"
    path = display_path(filename)
    where = path if lineno is None else f"{path}:{lineno}"
    return f"File {FILENAME_EM}{where}{close}"


def _qualname(code: CodeType) -> str:
    return str(getattr(code, "co_qualname", code.co_name))


def format_frame(frame: FrameType, lineno: int, cells: dict[str, int], context: int = 5) -> str:
    code = frame.f_code
    link = location(code.co_filename, lineno, cells, NORMAL)
    func = _qualname(code)
    call = ""
    if func != "<module>":
        args, varargs, varkw, locals_ = inspect.getargvalues(frame)
        try:
            scope = inspect.formatargvalues(
                args, varargs, varkw, locals_, formatvalue=lambda value: ""
            )
            call = f"in {V_NAME}{func}{VAL_EM}{scope}{NORMAL}"
        except KeyError:
            call = f"in {V_NAME}{func}{VAL_EM}(***failed resolving arguments***){NORMAL}"
    result = f"{link}{', ' if call else ''}{call}\n"
    return result + "".join(context_lines(code.co_filename, lineno, context))


def _records(tb: TracebackType | None) -> list[tuple[FrameType, int]]:
    records = []
    while tb is not None:
        records.append((tb.tb_frame, tb.tb_lineno if tb.tb_lineno is not None else 0))
        tb = tb.tb_next
    return records


def _collapse_repeated(records: list[tuple[FrameType, int]]) -> list[Any]:
    """stack_data's collapse of recursion: runs of frames seen > 3 times become one entry."""
    keys = [(frame.f_code, lineno) for frame, lineno in records]
    counts = Counter(keys)
    marks: list[bool] = []
    index = 0
    while index < len(keys):
        common = counts[keys[index]] > 3
        end = index
        while end < len(keys) and (counts[keys[end]] > 3) == common:
            end += 1
        group = keys[index:end]
        if common:
            shown = [False] * len(group)
            for item in set(group):
                first = group.index(item)
                shown[first] = True
                if item in group[first + 1 :]:
                    shown[group.index(item, first + 1)] = True
                shown[len(group) - 1 - group[::-1].index(item)] = True
            marks.extend(shown)
        else:
            marks.extend([True] * len(group))
        index = end
    out: list[Any] = []
    run: list[tuple[CodeType, int]] = []
    for record, key, mark in zip(records, keys, marks, strict=True):
        if mark:
            if run:
                out.append(_repeated(run))
                run = []
            out.append(record)
        else:
            run.append(key)
    if run:
        out.append(_repeated(run))
    return out


def _repeated(keys: list[tuple[CodeType, int]]) -> str:
    counts = sorted(Counter(keys).items(), key=lambda item: (-item[1], item[0][0].co_name))
    return ", ".join(
        f"{_qualname(code)} at line {lineno} ({count} time{'' if count == 1 else 's'})"
        for (code, lineno), count in counts
    )


def _exception_text(exc: BaseException) -> list[str]:
    try:
        message = str(exc)
    except Exception:
        message = f"<unprintable {type(exc).__name__} object>"
    notes = getattr(exc, "__notes__", None) or []
    if isinstance(notes, str | bytes) or not isinstance(notes, list | tuple):
        notes = [repr(notes)]
    return [
        f"{EXC_NAME}{type(exc).__name__}{NORMAL}: {message}",
        *(f"{NORMAL}{note}" for note in notes),
    ]


def _whole(
    exc: BaseException,
    tb: TracebackType | None,
    offset: int,
    cells: dict[str, int],
    context: int,
) -> list[list[str]]:
    """VerboseTB.format_exception_as_a_whole: header, frames, `<ExcName>: message`."""
    name = type(exc).__name__
    head = f"{EXC_NAME}{name}{NORMAL}" + "Traceback (most recent call last)".rjust(
        WIDTH - len(name)
    )
    records = _collapse_repeated(_records(tb)[offset:])
    frames: list[str] = []
    skipped = 0
    for i, record in enumerate(records):
        if isinstance(record, str):
            if skipped:
                frames.append(f"    {EXC_NAME}[... skipping hidden {skipped} frame]{NORMAL}\n")
                skipped = 0
            frames.append(f"    {EXC_NAME}[... skipping similar frames: {record}]{NORMAL}\n")
            continue
        frame, lineno = record
        if frame.f_locals.get("__tracebackhide__", 0) and i != len(records) - 1:
            skipped += 1
            continue
        if skipped:
            frames.append(f"    {EXC_NAME}[... skipping hidden {skipped} frame]{NORMAL}\n")
            skipped = 0
        frames.append(format_frame(frame, lineno, cells, context))
    if skipped:
        frames.append(f"    {EXC_NAME}[... skipping hidden {skipped} frame]{NORMAL}\n")
    return [[head, *frames, *_exception_text(exc)]]


def _chained(exc: BaseException) -> BaseException | None:
    if exc.__cause__ is not None:
        return exc.__cause__
    if exc.__suppress_context__:
        return None
    return exc.__context__


def verbose(exc: BaseException, cells: dict[str, int], offset: int = 1) -> list[str]:
    """VerboseTB.structured_traceback: the rule, then each exception, the oldest first."""
    parts = [f"{TOPLINE}{'-' * WIDTH}{NORMAL}"]
    formatted = _whole(exc, exc.__traceback__, offset, cells, 5)
    value = _chained(exc)
    if value is not None:
        formatted += [[DIRECT_CAUSE if exc.__cause__ is not None else DURING_HANDLING]]
    seen: set[int] = set()
    while value is not None:
        formatted += _whole(value, value.__traceback__, 0, cells, 3)
        following = _chained(value)
        if following is not None and id(following) not in seen:
            seen.add(id(following))
            formatted += [[DIRECT_CAUSE if value.__cause__ is not None else DURING_HANDLING]]
            value = following
        else:
            value = None
    for block in reversed(formatted):
        parts += block
    return parts


def exception_only(exc: BaseException, cells: dict[str, int]) -> str:
    """ListTB._format_exception_only, joined (a SyntaxError shows its line and a caret)."""
    name = f"{EXC_NAME}{type(exc).__name__}{NORMAL}"
    out = []
    if isinstance(exc, SyntaxError):
        filename = exc.filename or "<string>"
        lineno = exc.lineno
        text = linecache.getline(filename, lineno) if lineno else ""
        where = location(filename, lineno or None, cells, NORMAL_EM)
        out.append(f"{NORMAL_EM}  {where}{NORMAL}\n")
        if not text:
            text = exc.text or ""
        if text:
            i = len(text) - len(text.lstrip())
            out.append(f"{LINE}    {text.strip()}{NORMAL}\n")
            if exc.offset is not None:
                pad = "    " + "".join(c if c.isspace() else " " for c in text[i : exc.offset - 1])
                out.append(f"{CARET}{pad}^{NORMAL}\n")
        message = exc.msg
    else:
        try:
            message = str(exc)
        except Exception:
            message = f"<unprintable {type(exc).__name__} object>"
    out.append(f"{name}{EXC_NAME}:{NORMAL} {message}\n" if message else f"{name}\n")
    out.extend(f"{note}\n" for note in getattr(exc, "__notes__", None) or [])
    return "".join(out)


def structured(exc: BaseException, mode: str, cells: dict[str, int]) -> list[str]:
    """The `traceback` list of the kernel's `error` output for `exc`."""
    if mode == "syntax":
        return [exception_only(exc, cells)]
    if mode == "exit":
        return [EXIT_NOTE, exception_only(exc, cells)]
    return verbose(exc, cells)


def render(exc: BaseException, mode: str, cells: dict[str, int]) -> str:
    """What the real CLI writes to stderr for that output: `"".join(traceback) + "\\n"`."""
    return "".join(structured(exc, mode, cells)) + "\n"
