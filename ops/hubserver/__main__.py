"""Run the server: `python -m hubserver ...` (`ops/` on sys.path) or `python ops/hubserver ...`."""

import sys
from pathlib import Path

if not __package__:
    # Run as a directory: make `ops/` the import root so the package's relative imports work,
    # instead of the package directory itself (whose module names would shadow nothing useful).
    sys.path[0] = str(Path(__file__).resolve().parent.parent)
    from hubserver.cli import main
else:
    from .cli import main

raise SystemExit(main())
