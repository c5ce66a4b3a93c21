"""Runtime-proxy tokens that expire (ops/colab_emulator/tokens.py): the lifetime and the refresh
margin (scaled down here: a 4 s token, a 1 s margin), the server's renewal on the assignments
list, the proxy's 401 for an expired or unknown token and what each command makes of it, and an
attached exec whose websocket the proxy closes when its token expires."""

from __future__ import annotations

import json
import time
from datetime import datetime

import pytest

from tests.emulator.conftest import Emu, wait_for

LIFETIME_S = 4.0
MARGIN_S = 1.0


@pytest.fixture
def tok(emu: Emu) -> Emu:
    emu.env["COLAB_EMU_TOKEN_LIFETIME_S"] = str(LIFETIME_S)
    emu.env["COLAB_EMU_TOKEN_REFRESH_MARGIN_S"] = str(MARGIN_S)
    return emu


def expires_at(emu: Emu, name: str) -> float:
    raw = emu.sessions_json()[name]["token_expires_at"]
    return datetime.fromisoformat(str(raw)).timestamp()


def server_token(emu: Emu, endpoint: str) -> str:
    state = json.loads((emu.emu_home / "server.json").read_text())
    return str(state["assignments"][endpoint]["token"])


def test_default_lifetime_is_an_hour(emu: Emu) -> None:
    before = time.time()
    emu.new("s1")
    assert 3590 <= expires_at(emu, "s1") - before <= 3610


def test_new_records_the_tokens_expiry_and_status_renews_it_near_expiry(tok: Emu) -> None:
    before = time.time()
    endpoint = tok.new("s1")
    first = tok.sessions_json()["s1"]["token"]
    assert first == server_token(tok, endpoint)
    assert before < expires_at(tok, "s1") <= before + LIFETIME_S + 0.5
    # Far from expiry, a status keeps the token.
    assert tok.run("status", "-s", "s1")[0] == 0
    assert tok.sessions_json()["s1"]["token"] == first
    # Within the margin (or past expiry) the list hands out a fresh token with a full lifetime.
    time.sleep(max(0.0, expires_at(tok, "s1") - MARGIN_S - time.time()) + 0.1)
    rc, out, _ = tok.run("status", "-s", "s1")
    assert rc == 0 and "[s1]" in out
    renewed = tok.sessions_json()["s1"]
    assert renewed["token"] != first and renewed["token"] == server_token(tok, endpoint)
    assert expires_at(tok, "s1") > time.time() + MARGIN_S
    # get_session does the same on its own: a file command past expiry just works.
    time.sleep(max(0.0, expires_at(tok, "s1") - time.time()) + 0.1)
    assert tok.run("ls", "-s", "s1")[0] == 0
    assert tok.sessions_json()["s1"]["token"] not in (first, renewed["token"])


def test_exec_that_reaches_the_proxy_after_expiry_prunes_a_live_session(tok: Emu) -> None:
    endpoint = tok.new("s1")
    assert expires_at(tok, "s1") - time.time() > MARGIN_S  # get_session will not refresh
    # Slow between get_session and the proxy: the token expired on the way.
    assert tok.admin("faults", "set", "exec", json.dumps({"delay_s": LIFETIME_S + 0.5}))[0] == 0
    rc, out, _ = tok.run("exec", "-s", "s1", input="print('hi')\n")
    assert rc == 1
    assert "[colab] Session 's1' appears to be lost (404/401). Cleaning up." in out
    assert "hi" not in out
    assert "s1" not in tok.sessions_json()  # the record is pruned ...
    rc, out, _ = tok.run("sessions")
    assert rc == 0 and f"[?] {endpoint}" in out  # ... while the VM is still assigned
    history = (tok.home / ".config/colab-cli/history/s1.jsonl").read_text()
    assert '"reason": "pruned"' in history
    assert "401" in (tok.home / ".config/colab-cli/colab.log").read_text()


def write_record(emu: Emu, name: str, endpoint: str, token: str, expires: str) -> None:
    path = emu.home / ".config/colab-cli/sessions.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[name] = {"name": name, "endpoint": endpoint, "token": token, "url": "https://x",
                  "token_expires_at": expires, "variant": "GPU", "accelerator": "T4"}  # fmt: skip
    path.write_text(json.dumps(data))


def test_the_proxy_answers_401_to_a_token_it_never_issued(tok: Emu) -> None:
    endpoint = tok.new("s1")
    write_record(tok, "s1", endpoint, "forged", "2999-01-01T00:00:00+00:00")
    rc, out, _ = tok.run("ls", "-s", "s1")
    assert rc == 1 and out.startswith("[colab] Error: 401 Client Error: Unauthorized"), out
    rc, out, _ = tok.run("download", "-s", "s1", "content/x", "x")
    assert rc == 1 and "Download failed: 401 Client Error" in out, out
    rc, _, err = tok.run("restart-kernel", "-s", "s1")
    assert rc == 1 and "HTTPError: 401 Client Error: Unauthorized" in err, err
    assert tok.sessions_json()["s1"]["token"] == "forged"  # these commands keep the record
    # A hand-written record without token or expiry (adoption) is refreshed first: it works.
    write_record(tok, "s2", endpoint, "", None)  # type: ignore[arg-type]
    assert tok.run("ls", "-s", "s2")[0] == 0


TICKS = (
    "import time\n"
    "for i in range(32):\n"
    "    line = f'tick-{i} {time.time():.3f}'\n"
    "    print(line, flush=True)\n"
    "    with open('ticks.txt', 'a') as fh:\n"
    "        fh.write(line + '\\n')\n"
    "    time.sleep(0.25)\n"
    "open('done.txt', 'w').write('ok')\n"
)
DEADLINE_S = 12.0
EXIT_DELAY_S = 10.0


def _ticks(text: str) -> list[tuple[str, float]]:
    return [
        (name, float(at))
        for name, at in (ln.split() for ln in text.splitlines() if ln.startswith("tick-"))
    ]


def test_an_attached_exec_loses_its_connection_when_its_token_expires(tok: Emu) -> None:
    """jupyter-kernel-client 0.9.0: the proxy's close clears `connection_ready` without waking
    `execute_interactive`, which then waits for its deadline and raises `Connection was lost.`;
    the websocket thread ended with the close (no exit delay); the cell goes on in the kernel;
    the record written back holds the old token, which the next command's get_session
    refreshes."""
    endpoint = tok.new("s1")
    token, expiry = tok.sessions_json()["s1"]["token"], expires_at(tok, "s1")
    assert expiry - time.time() > MARGIN_S  # the exec connects with this token
    started = time.monotonic()
    rc, out, err = tok.run("exec", "-s", "s1", "--timeout", str(DEADLINE_S), input=TICKS)
    elapsed = time.monotonic() - started
    assert rc == 1, (out, err)
    assert err.startswith("Traceback (most recent call last):")
    assert err.splitlines()[-1] == "RuntimeError: Connection was lost."
    assert DEADLINE_S <= elapsed < DEADLINE_S + EXIT_DELAY_S, "the deadline, with no exit delay"
    got = _ticks(out)
    assert got and all(at <= expiry + 0.1 for _, at in got), "nothing after the close arrived"
    # The cell went on in the kernel: every tick was printed there, the later ones to nobody.
    wait_for(lambda: (tok.content(endpoint) / "done.txt").exists())
    printed = _ticks((tok.content(endpoint) / "ticks.txt").read_text())
    assert len(printed) == 32 and [n for n, _ in got] == [n for n, _ in printed[: len(got)]]
    assert any(at > expiry + 0.5 for _, at in printed)
    log = (tok.home / ".config/colab-cli/colab.log").read_text()
    assert f"websocket to {endpoint} closed by the proxy: proxy token expired" in log
    assert "Failed to stop websocket connection thread." not in log
    record = tok.sessions_json()["s1"]
    assert (record["token"], record["running"]) == (token, None), "the record it read, back"
    # The next calls: get_session sees the expiry passed and refreshes, the proxy accepts.
    assert tok.run("exec", "-s", "s1", input="print('after')\n") == (0, "after\n", "")
    assert tok.sessions_json()["s1"]["token"] not in (token, "")
    assert expires_at(tok, "s1") > time.time()
