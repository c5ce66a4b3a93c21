"""colabq's own modules (`worker.*`, `producer.*`, `colabq.*`) import one another without a cycle.

The graph is read from the source with `ast`, nothing is imported. An edge is any import of
one of colabq's modules, wherever it is written:

- **at module level and inside functions alike.** An import inside a function is how a cycle
  hides (it runs later, so Python never complains), but the two modules still need each other:
  neither can be understood, tested or moved without the other. The cure is the same either
  way: the module that needs its caller's name takes it as a parameter, or the shared piece
  moves down a floor.
- **not under `if TYPE_CHECKING:`.** Those run only for the type checker: a name used in an
  annotation is no dependency at run time, and naming a caller's type is how a lower module
  takes the caller's object as a parameter. (`from __future__ import annotations` keeps those
  annotations unevaluated.)
- **to the module named and to every package above it**, since importing `worker.store.hub`
  runs `worker/store/__init__.py` first; `from worker.store import hub` is an edge to
  `worker.store.hub` (a submodule), `from worker.records.ledger import Ledger` to
  `worker.records.ledger` (a name in a module).

A module's own packages are left out of those implied: `worker/records/ledger.py` importing
`worker.records.keys` needs `worker/records/__init__.py`, but that ran before `ledger.py` could
(a package whose `__init__` re-exports its modules' names is no cycle). A module that imports a
name *from* its own package's `__init__` does depend on it, and is an edge.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("worker", "producer", "colabq")

Graph = dict[str, set[str]]


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Every module of colabq's packages, by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, except those under `if TYPE_CHECKING:` (an
    `else:` beside one runs, so it is walked)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                yield from _imports_of(child)
            continue
        yield from _imports_of(node)


def _imports_of(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
    yield from _imports(node)


def _named(target: str, importer: str, modules: dict[str, Path]) -> set[str]:
    """`target` (when it is one of colabq's modules) and the packages above it that importing
    it runs, except those above `importer` too: they were run before `importer` was."""
    parts = target.split(".")
    above_importer = {".".join(importer.split(".")[:i]) for i in range(1, importer.count(".") + 1)}
    implied = {".".join(parts[:i]) for i in range(1, len(parts))} - above_importer
    return ({target} | implied) & modules.keys()


def imported_by(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The colabq modules that `name` (at `path`) imports at run time."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in _imports(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                targets |= _named(alias.name, name, modules)
            continue
        base = node.module or ""
        if node.level:  # relative: from the module's package, up level - 1 more
            here = name.split(".") if is_package else name.split(".")[:-1]
            here = here[: len(here) - (node.level - 1)]
            base = ".".join([*here, base] if base else here)
        subs = {f"{base}.{alias.name}" for alias in node.names} & modules.keys()
        if len(subs) < len(node.names):  # a name defined in `base` itself
            targets |= _named(base, name, modules)
        for sub in subs:  # `from package import submodule`
            targets |= _named(sub, name, modules)
    targets.discard(name)
    return targets


def build_graph(root: Path = ROOT) -> Graph:
    modules = module_files(root)
    return {name: imported_by(name, path, modules) for name, path in modules.items()}


def find_cycles(graph: Graph) -> list[list[str]]:
    """A shortest cycle through each knot (`find_knots`), as a path that ends where it starts;
    sorted, so the failure reads the same on every run."""
    return sorted(_shortest_cycle(graph, knot) for knot in find_knots(graph))


def find_knots(graph: Graph) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm): the
    modules of each can all reach one another, so each holds one cycle or several."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return components


def _shortest_cycle(graph: Graph, component: set[str]) -> list[str]:
    """The shortest cycle through the component's modules (the first by name among equals)."""
    best: list[str] = []
    for start in sorted(component):
        cycle = _shortest_way_back(graph, component, start)
        if not best or len(cycle) < len(best):
            best = cycle
    return best


def _shortest_way_back(graph: Graph, component: set[str], start: str) -> list[str]:
    paths = {start: [start]}
    frontier = [start]
    while frontier:  # breadth first: the first way back found is a shortest one
        following: list[str] = []
        for v in frontier:
            for w in sorted(graph[v] & component):
                if w == start:
                    return [*paths[v], start]
                if w not in paths:
                    paths[w] = [*paths[v], w]
                    following.append(w)
        frontier = following
    raise AssertionError(f"{start} is in a strongly connected component with no way back")


def describe(graph: Graph) -> str:
    """Each knot: a shortest cycle through it, then every import between its modules."""
    knots = sorted(find_knots(graph), key=sorted)
    lines = [f"{len(knots)} knot(s) of import cycles among colabq's modules:"]
    for knot in knots:
        lines.append("  " + " -> ".join(_shortest_cycle(graph, knot)))
        lines += [f"      {v} imports {w}" for v in sorted(knot) for w in sorted(graph[v] & knot)]
    return "\n".join(lines)


def test_colabqs_modules_import_one_another_without_a_cycle() -> None:
    graph = build_graph()
    cycles = find_cycles(graph)
    assert not cycles, describe(graph)


def test_the_worker_imports_nothing_from_the_producer() -> None:
    # The floors: the producer (the command a user runs) builds on the worker's contract,
    # settings and records; the worker never needs the producer's code.
    graph = build_graph()
    upward = sorted(
        f"{v} imports {w}"
        for v, targets in graph.items()
        if v.startswith("worker")
        for w in targets
        if w.startswith("producer")
    )
    assert upward == []


def test_the_python_api_sits_above_the_producer() -> None:
    # `colabq` (the Python API) wraps the producer's functions; neither the producer nor the
    # worker may need it.
    graph = build_graph()
    upward = sorted(
        f"{v} imports {w}"
        for v, targets in graph.items()
        if not v.startswith("colabq")
        for w in targets
        if w.startswith("colabq")
    )
    assert upward == []
    assert any(w.startswith("producer") for w in graph["colabq.client"] | graph["colabq.errors"])


# The detector itself, on small trees: a must-report case beside each must-not-report one.


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for package in PACKAGES:
        (tmp_path / package).mkdir(exist_ok=True)
        (tmp_path / package / "__init__.py").touch()
    return tmp_path


CASES = [
    ("module level", {"worker/a.py": "import worker.b\n", "worker/b.py": "from worker import a\n"},
     [["worker.a", "worker.b", "worker.a"]]),
    ("inside a function",
     {"worker/a.py": "def f():\n    from worker.b import g\n",
      "worker/b.py": "from worker.a import f\n"},
     [["worker.a", "worker.b", "worker.a"]]),
    ("relative, across packages",
     {"worker/s/__init__.py": "", "worker/s/x.py": "from . import y\n",
      "worker/s/y.py": "from ..z import t\n", "worker/z.py": "from worker.s.x import u\n"},
     [["worker.s.x", "worker.s.y", "worker.z", "worker.s.x"]]),
    ("through a package's __init__",
     {"worker/s/__init__.py": "from worker.s.x import v\n", "worker/s/x.py": "import worker.t\n",
      "worker/t.py": "import worker.s.y\n", "worker/s/y.py": ""},
     [["worker.s", "worker.s.x", "worker.t", "worker.s"]]),
    ("between producer and worker",
     {"worker/settings.py": "from producer.clictx import X\n",
      "producer/clictx.py": "def f():\n    import worker.settings\n"},
     [["producer.clictx", "worker.settings", "producer.clictx"]]),
    ("only for the type checker",
     {"worker/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import worker.b\n",
      "worker/b.py": "import worker.a\n"},
     []),
    ("typing.TYPE_CHECKING, with an else that runs",
     {"worker/a.py": "import typing\nif typing.TYPE_CHECKING:\n    import worker.b\n"
                     "else:\n    import worker.c\n",
      "worker/b.py": "import worker.a\n", "worker/c.py": "import worker.a\n"},
     [["worker.a", "worker.c", "worker.a"]]),
    ("a chain, no way back",
     {"worker/a.py": "import worker.b\n", "worker/b.py": "from worker import c\n",
      "worker/c.py": "import json\nimport celery\n"},
     []),
    ("a module and its own empty package",
     {"worker/s/__init__.py": "", "worker/s/x.py": "from . import y\n",
      "worker/s/y.py": "import worker.s\n"},
     []),
    ("a package re-exporting its modules' names",
     {"worker/s/__init__.py": "from worker.s.x import v\n",
      "worker/s/x.py": "from worker.s.y import w\nv = w\n", "worker/s/y.py": "w = 1\n"},
     []),
    ("a module importing a name from the package that re-exports it",
     {"worker/s/__init__.py": "from worker.s.x import v\n",
      "worker/s/x.py": "from worker.s import w\nv = w\n", "worker/s/y.py": "w = 1\n"},
     [["worker.s", "worker.s.x", "worker.s"]]),
]  # fmt: skip


@pytest.mark.parametrize(("files", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_detector(tmp_path: Path, files: dict[str, str], expected: list[list[str]]) -> None:
    assert find_cycles(build_graph(_tree(tmp_path, files))) == expected
