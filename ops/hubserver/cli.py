"""Command line: `python -m hubserver --data DIR [--host H] [--port P] [--tokens FILE]`.

Prints `hubserver listening on http://HOST:PORT` as its first stdout line (so a parent process
can read the bound port when `--port 0`), then serves until SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from types import FrameType

from .app import DEFAULT_LFS_THRESHOLD_BYTES, DEFAULT_TREE_PAGE_SIZE, ServerConfig, build_state
from .server import HubHTTPServer


def parse_args(argv: list[str] | None) -> ServerConfig:
    parser = argparse.ArgumentParser(prog="hubserver", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", required=True, type=Path, help="data directory (created if missing)"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", default=0, type=int, help="0 picks a free port")
    parser.add_argument(
        "--tokens", type=Path, help='JSON {token: {"user": ..., "role": "read|write"}}'
    )
    parser.add_argument("--lfs-threshold-bytes", type=int, default=DEFAULT_LFS_THRESHOLD_BYTES)
    parser.add_argument("--tree-page-size", type=int, default=DEFAULT_TREE_PAGE_SIZE)
    args = parser.parse_args(argv)
    return ServerConfig(
        data_dir=args.data,
        host=args.host,
        port=args.port,
        tokens_path=args.tokens,
        lfs_threshold_bytes=args.lfs_threshold_bytes,
        tree_page_size=args.tree_page_size,
    )


def _stop(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    httpd = HubHTTPServer(build_state(config))
    print(f"hubserver listening on {httpd.url}", flush=True)
    signal.signal(signal.SIGTERM, _stop)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
    print("hubserver stopped", file=sys.stderr, flush=True)
    return 0
