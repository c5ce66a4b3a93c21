"""The MkDocs hook (`mkdocs.yml`'s `hooks:`) that writes the generated pages at build time: a
page holding `<!-- generated: cli-reference -->` gets every command's own `--help`, one holding
`<!-- generated: settings -->` the settings model's table. A settings field without a
description fails the build (`PluginError`), so a new setting without documentation fails CI.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[2]
# MkDocs loads this file by path, with sys.path restored right after: the clone's own modules
# are imported here, while it is on the path, and used by the events below.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from ops.docsgen.cli_page import render_cli_reference  # noqa: E402
from ops.docsgen.settings_page import (  # noqa: E402
    Undocumented,
    colabq_settings_docs,
    render_settings,
)

CLI_MARK = "<!-- generated: cli-reference -->"
SETTINGS_MARK = "<!-- generated: settings -->"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if CLI_MARK in markdown:
        markdown = markdown.replace(CLI_MARK, render_cli_reference())
    if SETTINGS_MARK in markdown:
        try:
            docs = colabq_settings_docs(ROOT)
        except Undocumented as exc:
            raise PluginError(str(exc)) from None
        markdown = markdown.replace(SETTINGS_MARK, render_settings(docs))
    return markdown
