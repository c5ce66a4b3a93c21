"""The launch cell as the kernel runs it, with every value a user controls made hostile: each
value holds every placeholder name of the cell (and the `{content}` it once expanded), quotes of
both kinds, `$()`, backticks and `;`, and some a newline. The real template is filled for a real
spec and run with python3 in a folder that stands for /content, its bundle holding a wrapper
that only writes down its argv and environment: each value arrives byte-exact, colabq's own
files are the only items put under /content, and nothing else ran (no `pwned` file anywhere).
A NUL, which no argv or environment can carry, is refused when the spec is read, in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.factories import make_spec
from worker.errors import SpecError
from worker.session import plan as vmplan
from worker.settings import Settings
from worker.spec import ArtifactDest, CodeSpec, decode_spec, encode_spec

PLACEHOLDERS = "{{JOB}}{{NONCE}}{{ARGV}}{{ON_VM}}{{BUNDLE}}{{ENV}}{{GPU_NAME}}{content}"
# One line, no whitespace (a prefix, a URI), then with spaces and a newline where they may be.
WORD = PLACEHOLDERS + "'\"$(touch${IFS}pwned)`touch${IFS}pwned`;touch${IFS}pwned;'"
LINE = WORD + " $(touch pwned) ` touch pwned ` \" ' ; touch pwned"
LINES = PLACEHOLDERS + "'\"$(touch pwned)`touch pwned`\nimport os;os.system('touch pwned')\n"
SHA = "0123456789abcdef0123456789abcdef01234567"

# What the wrapper gets: `seen.argv` (NUL-separated, $0 first) and `seen.env`, then `seen`.
RECORDER = """\
printf '%s\\0' "$0" "$@" > "$PWD/seen.argv"
env -0 > "$PWD/seen.env"
: > "$PWD/seen"
"""


def hostile_spec(store: Path) -> Any:
    return make_spec(
        artifact=ArtifactDest(kind="local", repo=f"/s/{LINES}", prefix=WORD),
        sync_paths=(LINE, f"ckpt/{WORD}"),
        expected_artifacts=(LINE,),
        env={"SWEEP_VALUE": LINE, "OTHER": WORD},
        hub_inputs={"DATA": f"hf://datasets/alice/ds/{WORD}", "URL": f"https://h.test/{WORD}"},
        resume_from=f"hf://alice/runs/{WORD}",
        code=CodeSpec(
            mode="snapshot", commit=SHA, snapshot=f"file:///{store}/{WORD}.tar.gz", subdir=LINE
        ),
        commit=SHA,
    )


def run_cell(content: Path, source: str) -> str:
    cell = content.parent / "launch.py"
    cell.write_text(source)
    done = subprocess.run(
        [sys.executable, str(cell)], cwd=content, capture_output=True, text=True, timeout=60,
        env={"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def wait_for(path: Path, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_every_hostile_value_reaches_the_wrapper_byte_exact_and_nothing_else_runs(
    tmp_path: Path,
) -> None:
    content = tmp_path / "content"
    content.mkdir()
    token = tmp_path / "token"
    token.write_text("hf_x\n")
    token.chmod(0o600)
    spec = hostile_spec(tmp_path / "store")
    assert decode_spec(encode_spec(spec)) == spec  # it is a spec a worker accepts
    settings = Settings(hf_token_file=token, hf_endpoint="http://127.0.0.1:1")
    seg = vmplan.Segment(env=(("COLABQ_TRACKER_RUN_ID", LINE),))
    source = vmplan.launch_source(spec, settings, "n1", seg)
    recorder = tmp_path / "recorder.sh"
    recorder.write_text(RECORDER)
    vmplan.write_bundle(content / vmplan.BUNDLE, [(recorder, vmplan.WRAPPER), (token, "t")])

    out = run_cell(content, source)

    assert "__COLABQ_n1_LAUNCHED__=" in out, out
    wait_for(content / "seen")
    argv = (content / "seen.argv").read_bytes().split(b"\0")[:-1]
    env = dict(
        item.split(b"=", 1) for item in (content / "seen.env").read_bytes().split(b"\0") if item
    )
    expected = [
        os.path.join(content, a.name) if isinstance(a, vmplan.VmFile) else a
        for a in vmplan.wrapper_argv(spec, settings, "n1", seg)
    ]
    assert expected[1] == str(content / vmplan.WRAPPER)
    assert [a.decode() for a in argv] == expected[1:]  # bash's $0 is the wrapper's path
    for value in (LINES, WORD, LINE):
        assert any(value in a for a in expected), value  # every hostile value was in the argv
    assert env[b"SWEEP_VALUE"].decode() == LINE and env[b"OTHER"].decode() == WORD
    assert env[b"COLABQ_TRACKER_RUN_ID"].decode() == LINE
    assert not [p for p in tmp_path.rglob("*pwned*")], "a value ran as code"
    assert not Path("pwned").exists()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("artifact.prefix", lambda d: d["artifact"].update(prefix="a\x00b")),
        ("artifact.repo", lambda d: d["artifact"].update(repo="/store/a\x00b")),
        ("hub_inputs.DATA", lambda d: d.update(hub_inputs={"DATA": "hf://a/b/c\x00"})),
        ("resume_from", lambda d: d.update(resume_from="hf://a/b/\x00c")),
        ("code.snapshot", lambda d: d.update(
            code={"mode": "snapshot", "commit": SHA, "snapshot": "file:///s/\x00.tar.gz"},
            commit=SHA)),
        ("tracker_project", lambda d: d.update(tracker_project="p\x00")),
    ],
)  # fmt: skip
def test_a_nul_is_refused_when_the_spec_is_read_in_one_line(field: str, value: Any) -> None:
    data = json.loads(encode_spec(make_spec()))
    value(data)
    with pytest.raises(SpecError) as caught:
        decode_spec(json.dumps(data))
    line = caught.value.advice()
    assert line == f"spec: {field} holds a NUL character, which cannot reach the VM: remove it"
