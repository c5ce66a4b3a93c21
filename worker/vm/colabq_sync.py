"""VM-side uploader: copies one file or folder to the job's artifact destination.

Runs on the Colab VM with only the standard library (plus huggingface_hub for `hf`, which Colab
images have). Exit 0 when the upload succeeded, 1 otherwise. `local` destinations exist for
rehearsals on the emulator, where the "VM" shares the worker's disk.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path


def upload_local(src: Path, repo: str, dst: str) -> None:
    target = Path(repo) / dst
    if src.is_dir():
        shutil.copytree(src, target, dirs_exist_ok=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--kind", choices=["local", "hf"], required=True)
    p.add_argument("--repo", required=True)
    p.add_argument("--repo-type", default="model")
    p.add_argument("--src", required=True)
    p.add_argument("--dst", required=True)
    a = p.parse_args(argv)
    src = Path(a.src)
    if not src.exists():
        print(f"colabq_sync: {src} does not exist", file=sys.stderr)
        return 1
    try:
        if a.kind == "local":
            upload_local(src, a.repo, a.dst)
        else:
            print("colabq_sync: hf destinations need the Hub store", file=sys.stderr)
            return 1
    except OSError as exc:
        print(f"colabq_sync: upload failed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
