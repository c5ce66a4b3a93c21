"""`colabq flower`: Flower, Celery's web monitor, on colabq's Celery app and configuration
(`worker/flowerconfig.py`), behind its login. Without one (`COLABQ_FLOWER_AUTH_FILE`, or all of
Flower's OAuth variables) it refuses in one line before anything starts; `worker.flowerlogin`
checks the same inside Flower, however it was started.
"""

from __future__ import annotations

import os
from importlib.util import find_spec
from typing import Annotated

import typer

from producer.clictx import _connect, build_app, cannot_listen, load_settings


def flower(
    port: Annotated[int, typer.Option(help="The port Flower listens on.")] = 5555,
    address: Annotated[
        str, typer.Option(help="The address Flower listens on (0.0.0.0: every interface).")
    ] = "127.0.0.1",
) -> None:
    """Run Flower (tasks, their phases and ends, the workers) behind its login."""
    from worker.flowerlogin import check_login, login_from_env

    check_login(login_from_env(os.environ))
    settings = load_settings()
    _connect(settings)
    spec = find_spec("worker.flowerconfig")
    assert spec is not None and spec.origin, "worker/flowerconfig.py is part of colabq"
    argv = ["flower", f"--conf={spec.origin}", f"--port={port}", f"--address={address}"]
    try:
        build_app(settings).start(argv)
    except OSError as exc:
        raise cannot_listen(exc, "Flower", address, port) from None
