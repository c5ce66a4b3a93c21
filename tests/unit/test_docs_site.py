"""The documentation site builds with `mkdocs build --strict` (as CI runs it here), with the
network cut: a broken link or anchor fails the build, the settings page lists every setting of
the model, the CLI reference is the commands' own `--help`, and the built pages fetch nothing
from elsewhere (no web fonts, no CDN script)."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import AliasChoices

from ops.docsgen.cli_page import command_paths, help_text
from ops.docsgen.settings_page import Undocumented, settings_docs
from worker.settings import ENV_PREFIX, Settings

ROOT = Path(__file__).resolve().parents[2]

# Loaded first by the build's interpreter (PYTHONPATH): any connection or name lookup is
# written down and refused.
NO_NETWORK = """
import os, socket
_log = os.environ["DOCS_NETWORK_LOG"]
def _refuse(what):
    with open(_log, "a") as f:
        f.write(what + "\\n")
    raise OSError("the docs build may not use the network: " + what)
_connect = socket.socket.connect
def connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6):
        _refuse(f"connect {address!r}")
    return _connect(self, address)
socket.socket.connect = connect
socket.socket.connect_ex = lambda self, address: _refuse(f"connect_ex {address!r}")
socket.getaddrinfo = lambda *a, **k: _refuse(f"getaddrinfo {a[:2]!r}")
socket.create_connection = lambda address, *a, **k: _refuse(f"create_connection {address!r}")
"""


def build(config: Path, site: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    guard = tmp / "guard"
    guard.mkdir(exist_ok=True)
    (guard / "sitecustomize.py").write_text(NO_NETWORK)
    env = {
        **os.environ,
        "PYTHONPATH": str(guard),
        "DOCS_NETWORK_LOG": str(tmp / "network.log"),
        "NO_MKDOCS_2_WARNING": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("docs")
    result = build(ROOT / "mkdocs.yml", tmp / "site", tmp)
    assert result.returncode == 0, result.stderr[-4000:]
    network = tmp / "network.log"
    assert not network.exists(), network.read_text()
    return tmp / "site"


def variables(field: str) -> list[str]:
    """The variables that set a field: its aliases (a renamed setting: the new name first),
    else its own name with the prefix."""
    alias = Settings.model_fields[field].validation_alias
    if isinstance(alias, AliasChoices):
        return [str(choice) for choice in alias.choices]
    return [f"{ENV_PREFIX}{field}".upper()]


def page_text(site: Path, page: str) -> str:
    raw = (site / page / "index.html").read_text()
    return html.unescape(re.sub(r"<[^>]+>", "", raw))


def test_the_built_pages_fetch_nothing_from_elsewhere(site: Path) -> None:
    pages = list(site.rglob("*.html"))
    assert len(pages) > 30
    for page in pages:
        raw = page.read_text()
        assert "fonts.googleapis.com" not in raw and "fonts.gstatic.com" not in raw, page
        assets = re.findall(r'<(?:script|link)\b[^>]*\b(?:src|href)="(https?:[^"]+)"', raw)
        assert not assets, (page, assets)


def test_the_settings_page_lists_every_setting_of_the_model(site: Path) -> None:
    raw = (site / "reference" / "settings" / "index.html").read_text()
    table = raw.split('id="every-setting"', 1)[1].split("</table>", 1)[0].replace("<wbr>", "")
    rows = re.findall(r"<tr>\s*<td>(.*?)</td>", table, re.S)
    listed = [re.findall(r"<code>(COLABQ_[A-Z0-9_]+)</code>", row) for row in rows]
    assert listed == [variables(name) for name in Settings.model_fields]
    text = page_text(site, "reference/settings")
    for doc in settings_docs(Settings, ROOT / "worker" / "settings.py", ENV_PREFIX):
        # Its text up to the first code span (rendered), else the text after that span.
        pieces = doc.description.split("`")
        words = pieces[0].strip() if len(pieces[0].split()) >= 2 else pieces[2].strip()[:40]
        assert " ".join(words.split()) in " ".join(text.split()), doc.name


def test_the_cli_reference_is_every_command_s_own_help(site: Path) -> None:
    text = page_text(site, "reference/cli")
    paths = command_paths()
    assert ("submit",) in paths and ("quota",) in paths
    for path in [(), *paths]:
        for line in help_text(path).splitlines():
            assert line.strip() in text, (path, line)


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    config = (ROOT / "mkdocs.yml").read_text()
    hooks = ROOT / "ops" / "docsgen" / "hooks.py"
    (tmp_path / "mkdocs.yml").write_text(config.replace("ops/docsgen/hooks.py", str(hooks)))
    glossary = tmp_path / "docs" / "glossary.md"
    glossary.write_text(glossary.read_text() + "\nSee [the moon](concepts/moon.md).\n")
    result = build(tmp_path / "mkdocs.yml", tmp_path / "site", tmp_path)
    assert result.returncode != 0
    assert "concepts/moon.md" in result.stderr


SOURCE = textwrap.dedent(
    """
    from pydantic_settings import BaseSettings

    class Example(BaseSettings):
        # How long a thing waits.
        wait_s: float = 1.0
        count: int = 2  # how many things
        bare: str = "x"
    """
)


def test_a_setting_without_documentation_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "example_settings.py"
    source.write_text(SOURCE)
    namespace: dict[str, object] = {}
    exec(compile(SOURCE, str(source), "exec"), namespace)
    model = namespace["Example"]
    with pytest.raises(Undocumented) as raised:
        settings_docs(model, source, "EX_")  # type: ignore[arg-type]
    assert raised.value.names == ["EX_BARE"]
    documented = SOURCE.replace('bare: str = "x"', 'bare: str = "x"  # a bare name')
    source.write_text(documented)
    namespace = {}
    exec(compile(documented, str(source), "exec"), namespace)
    docs = settings_docs(namespace["Example"], source, "EX_")  # type: ignore[arg-type]
    assert [(d.env, d.description) for d in docs] == [
        (("EX_WAIT_S",), "How long a thing waits."),
        (("EX_COUNT",), "how many things"),
        (("EX_BARE",), "a bare name"),
    ]
