"""Reading a launch script for what it will log to, without running anything.

Owns following a Bash launch script to the Python files it starts (`python train.py`,
`python -m pkg.train`, `uv run`, `accelerate launch`, `torchrun …`), following those files'
imports inside the repository, and collecting with `ast`: imported modules, tracker classes
used, `report_to=`/`log_with=` strings, tracker calls with their constant arguments, and the
environment variables the scripts set. Deciding which tracker that means is `monitoring.py`'s.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

MAX_FILES = 64
TRACKER_NAMES = frozenset(
    {
        "SummaryWriter",
        "WandbLogger",
        "TensorBoardLogger",
        "MLFlowLogger",
        "NeptuneLogger",
        "WandbCallback",
        "MLflowCallback",
        "NeptuneCallback",
        "TensorBoardCallback",
    }
)
TRACKER_CALLS = frozenset(
    {
        "wandb.init",
        "mlflow.set_experiment",
        "mlflow.start_run",
        "mlflow.set_tags",
        "mlflow.set_tag",
        "neptune.init_run",
        "neptune.init",
        "SummaryWriter",
        "WandbLogger",
        "TensorBoardLogger",
        "MLFlowLogger",
        "NeptuneLogger",
    }
)
# The keyword a tracker call's first positional argument stands for.
_FIRST_ARG = {
    "mlflow.set_experiment": "experiment_name",
    "SummaryWriter": "log_dir",
    "mlflow.set_tags": "tags",
    "mlflow.set_tag": "tags",
}
_REPORT_KEYWORDS = frozenset({"report_to", "log_with", "logger", "loggers"})
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")"})


@dataclass(frozen=True)
class TrackerCall:
    func: str  # canonical dotted name, e.g. "wandb.init"
    kwargs: Mapping[str, str | None]  # constant arguments as text; None = computed at run time
    file: Path


@dataclass(frozen=True)
class LaunchScan:
    files: tuple[Path, ...] = ()
    modules: frozenset[str] = frozenset()
    names: frozenset[str] = frozenset()
    report_to: frozenset[str] = frozenset()
    calls: tuple[TrackerCall, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    problems: tuple[str, ...] = ()


def _module_file(module: str, roots: list[Path]) -> Path | None:
    parts = module.split(".")
    for root in roots:
        for candidate in (
            root.joinpath(*parts).with_suffix(".py"),
            root.joinpath(*parts, "__init__.py"),
            root.joinpath(*parts, "__main__.py"),
        ):
            if candidate.is_file():
                return candidate
    return None


class _Collector:
    def __init__(self, repo: Path, max_files: int) -> None:
        self.repo, self.max_files = repo, max_files
        self.queue: list[Path] = []
        self.seen: set[Path] = set()
        self.modules: set[str] = set()
        self.names: set[str] = set()
        self.report_to: set[str] = set()
        self.calls: list[TrackerCall] = []
        self.env: dict[str, str] = {}
        self.problems: list[str] = []

    def add(self, path: Path | None) -> None:
        if path is None:
            return
        path = path.resolve()
        if path not in self.seen and len(self.seen) < self.max_files and path.is_file():
            self.seen.add(path)
            self.queue.append(path)

    def roots(self, here: Path) -> list[Path]:
        return [here, self.repo, self.repo / "src"]

    def run(self) -> LaunchScan:
        done: list[Path] = []
        while self.queue:
            path = self.queue.pop(0)
            done.append(path)
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError as exc:
                self.problems.append(f"{path}: {exc.strerror}")
                continue
            if _is_python(path, text):
                self.python(path, text)
            else:
                self.bash(path, text)
        return LaunchScan(
            tuple(done),
            frozenset(self.modules),
            frozenset(self.names),
            frozenset(self.report_to),
            tuple(self.calls),
            dict(self.env),
            tuple(self.problems),
        )

    def bash(self, path: Path, text: str) -> None:
        for line in re.sub(r"\\\r?\n", " ", text).splitlines():
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split, lexer.commenters = True, "#"
            try:
                tokens = list(lexer)
            except ValueError:
                continue
            self._bash_tokens(path.parent, tokens)

    def _bash_tokens(self, here: Path, tokens: list[str]) -> None:
        command_start = True
        for i, tok in enumerate(tokens):
            if tok in _SEPARATORS:
                command_start = True
                continue
            assign = _ASSIGN.match(tok)
            if assign and (command_start or tokens[i - 1] in ("export", "env")):
                if "$" not in assign.group(2):
                    self.env[assign.group(1)] = assign.group(2)
                continue
            if tok in ("export", "env"):
                continue
            command_start = False
            if "$" in tok:
                continue
            if tok.endswith((".py", ".sh", ".bash")):
                self.add(next((r / tok for r in self.roots(here) if (r / tok).is_file()), None))
            elif tok == "-m" and i + 1 < len(tokens):
                self.add(_module_file(tokens[i + 1], self.roots(here)))

    def python(self, path: Path, text: str) -> None:
        try:
            tree = ast.parse(text, filename=str(path))
        except SyntaxError as exc:
            self.problems.append(f"{path}:{exc.lineno}: does not parse ({exc.msg})")
            return
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.modules.add(alias.name)
                    aliases[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
                    self.add(_module_file(alias.name, self.roots(path.parent)))
            elif isinstance(node, ast.ImportFrom):
                self._import_from(path, node, aliases)
        for node in ast.walk(tree):
            if isinstance(node, ast.Name | ast.Attribute):
                name = node.id if isinstance(node, ast.Name) else node.attr
                if name in TRACKER_NAMES:
                    self.names.add(name)
            elif isinstance(node, ast.Call):
                self._call(path, node, aliases)
            elif isinstance(node, ast.Assign):
                self._environ_assign(node)

    def _import_from(self, path: Path, node: ast.ImportFrom, aliases: dict[str, str]) -> None:
        if node.level:
            base = path.parent
            for _ in range(node.level - 1):
                base = base.parent
            roots, module = [base], node.module or ""
        else:
            roots, module = self.roots(path.parent), node.module or ""
        if not node.level:
            self.modules.add(module)
        for alias in node.names:
            full = f"{module}.{alias.name}" if module else alias.name
            if not node.level:
                self.modules.add(full)
            aliases[alias.asname or alias.name] = alias.name if module else full
            if alias.name in TRACKER_NAMES:
                self.names.add(alias.name)
            self.add(_module_file(full, roots) or (_module_file(module, roots) if module else None))

    def _call(self, path: Path, node: ast.Call, aliases: dict[str, str]) -> None:
        for kw in node.keywords:
            if kw.arg in _REPORT_KEYWORDS:
                self.report_to.update(s.lower() for s in _strings(kw.value))
        dotted = _dotted(node.func)
        if dotted is None:
            return
        head, _, rest = dotted.partition(".")
        func = aliases.get(head, head) + (f".{rest}" if rest else "")
        if func not in TRACKER_CALLS:
            return
        kwargs: dict[str, str | None] = {
            kw.arg: _constant(kw.value) for kw in node.keywords if kw.arg
        }
        first = _FIRST_ARG.get(func)
        if node.args and first:
            kwargs.setdefault(first, _constant(node.args[0]))
        self.calls.append(TrackerCall(func, kwargs, path))

    def _environ_assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            if (
                isinstance(target, ast.Subscript)
                and _dotted(target.value) == "os.environ"
                and isinstance(target.slice, ast.Constant)
                and isinstance(target.slice.value, str)
            ):
                value = _constant(node.value)
                if value is not None:
                    self.env[target.slice.value] = value


def _is_python(path: Path, text: str) -> bool:
    if path.suffix == ".py":
        return True
    first = text.split("\n", 1)[0]
    return first.startswith("#!") and "python" in first


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def _strings(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return [s for elt in node.elts for s in _strings(elt)]
    return []


def _constant(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and node.value is not None:
        return str(node.value)
    strings = _strings(node)
    if strings and isinstance(node, ast.List | ast.Tuple | ast.Set):
        return ",".join(strings)
    return None


def scan_launch_script(script: Path, repo: Path, *, max_files: int = MAX_FILES) -> LaunchScan:
    """Scan a Python or Bash launch script and the repository files it leads to."""
    collector = _Collector(repo.resolve(), max_files)
    if not script.is_file():
        return LaunchScan(problems=(f"{script}: launch script not found",))
    collector.add(script)
    return collector.run()
