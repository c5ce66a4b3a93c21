"""`colabq stage PATH --to hf://…`: local data uploaded to a private Hub repo before submitting,
to be declared as an input (`--hub-input NAME=URI`). The upload and its proof are
`producer/stage.py`'s, imported when the command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from producer.clictx import load_settings


def stage(
    path: Annotated[Path, typer.Argument(help="Local file or folder (a data set, a checkpoint).")],
    to: Annotated[str, typer.Option("--to", help="hf://[datasets/]OWNER/REPO/PATH")],
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace data already at --to (mirror PATH).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as data.")] = False,
) -> None:
    """Upload local data to a private Hub repo, to declare it later with --hub-input NAME=URI."""
    from producer.stage import build_hub_store
    from producer.stage import stage as upload

    result = upload(path, to, build_hub_store(load_settings()), overwrite=overwrite)
    if as_json:
        import json

        typer.echo(
            json.dumps(
                {
                    "uri": result.uri,
                    "commit": result.commit,
                    "size_bytes": result.size_bytes,
                    "files": result.files,
                    "replaced_bytes": result.replaced_bytes,
                    "repo": result.repo.repo_id,
                    "repo_type": result.repo.repo_type,
                    "repo_created": result.repo.created,
                }
            )
        )
        return
    replaced = f", replacing {result.replaced_bytes} bytes" if result.replaced_bytes else ""
    typer.echo(
        f"staged {result.uri}: {result.size_bytes} bytes in {result.files} file(s), "
        f"commit {result.commit[:12]}{replaced} ({result.repo.detail})"
    )
    typer.echo(f"declare it with: --hub-input NAME={result.uri}")
