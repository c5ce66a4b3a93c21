"""Sentinel with passwords and TLS, as a deployment across machines runs it: the master behind a
password (`requirepass`, or colabq an ACL user there), the sentinels behind their own, different
one (`requirepass`, or an ACL user of theirs), and, in one variant, TLS on every connection,
checked against the CA the URL names. The master's login is the URL's, the sentinels' is
`COLABQ_REDIS_SENTINEL_USERNAME`/`_PASSWORD`.

Every process of colabq connects through both: the Celery worker (its broker and transport),
each job's watchdog and attach client, `colabq beat` (its janitor through the broker),
`colabq notifier`, `colabq flower` (its events and its broker view), `colabq submit`, `status`
and `doctor`; no password reaches a log, an output, Flower or a command line. A wrong password
on either side is one line at start naming whose, and what to set."""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from producer.broker import free_port
from producer.cli import app
from tests.integration.conftest import Fleet
from tests.integration.sentinel_cluster import (
    MASTER_NAME,
    Security,
    SentinelCluster,
    full_security,
)
from tests.integration.test_flower import AUTH, get, stop, wait_events, wait_up
from tests.integration.test_run_on_vm import submit, wait_for
from worker.states import JobState

pytestmark = pytest.mark.integration
COLABQ = str(Path(sys.executable).parent / "colabq")
LOGS = ("worker", "notifier", "beat", "flower")

VARIANTS: dict[str, Callable[[Path], Security]] = {
    # requirepass on both sides, each its own
    "passwords": lambda _root: Security(secrets.token_hex(12), secrets.token_hex(12)),
    # an ACL user on each side for colabq, and TLS everywhere
    "acl users and tls": full_security,
}


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SentinelCluster]:
    root = tmp_path_factory.mktemp("sentinel-auth")
    with SentinelCluster(root, security=VARIANTS[request.param](root)) as c:
        yield c


@pytest.fixture
def redis_url(cluster: SentinelCluster, monkeypatch: pytest.MonkeyPatch) -> str:
    for name, value in cluster.env().items():  # the fleet fixture's own ledger's settings
        monkeypatch.setenv(name, value)
    return cluster.url


@pytest.fixture
def fleet_env_extra(cluster: SentinelCluster, tmp_path: Path) -> dict[str, str]:
    # The worker's gate opens the test's folder to ACL users' local stores (no other folder is
    # open under ACLs: `worker.people.destinations`).
    return {**cluster.env(), "COLABQ_LOCAL_STORE_ROOT": str(tmp_path)}


def passwords(cluster: SentinelCluster) -> list[str]:
    sec = cluster.security
    assert sec is not None
    found = [sec.master_password, sec.sentinel_password, sec.colabq_password]
    return [p for p in [*found, sec.watcher_password] if p]


def spawn(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def command_lines() -> str:
    """Every process's command line on this machine."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
            except (OSError, UnicodeDecodeError):
                continue
    return "\n".join(found)


def the_side_services(fleet: Fleet, procs: list[subprocess.Popen[bytes]]) -> tuple[Path, str]:
    """`colabq notifier` (its hook appends each event to a file), `colabq beat` (a janitor
    pass every second) and `colabq flower`, started; the notifier's file and Flower's URL."""
    notified, targets = fleet.root / "notified", fleet.root / "webhooks"
    targets.write_text(f"default = exec sh -c 'cat >> {notified}; echo >> {notified}'\n")
    targets.chmod(0o600)
    notifier_env = {**fleet.env, "COLABQ_WEBHOOKS_FILE": str(targets)}
    procs.append(spawn([COLABQ, "notifier"], notifier_env, fleet.root / "notifier.log"))
    beat_env = {**fleet.other_host("beat"), "COLABQ_JANITOR_INTERVAL_S": "1"}
    procs.append(spawn([COLABQ, "beat"], beat_env, fleet.root / "beat.log"))
    auth = fleet.root / "flower-auth"
    auth.write_text(f"{AUTH[0]}:{AUTH[1]}\n")
    auth.chmod(0o600)
    port = free_port()
    flower_env = {**fleet.env, "COLABQ_FLOWER_AUTH_FILE": str(auth),
                  "COLABQ_FLOWER_DB": str(fleet.root / "flower.db")}  # fmt: skip
    argv = [COLABQ, "flower", f"--port={port}", "--address=127.0.0.1"]
    procs.append(spawn(argv, flower_env, fleet.root / "flower.log"))
    wait_for(lambda: "targets" in (fleet.root / "notifier.log").read_text(), "the notifier", 60)
    return notified, f"http://127.0.0.1:{port}"


def told(notified: Path) -> set[tuple[str, str]]:
    """(job, state) of each event the notifier's hook received."""
    text = notified.read_text() if notified.exists() else ""  # (the hook's first run makes it)
    events = [json.loads(line) for line in text.splitlines() if line.strip()]
    return {(e["job"], e["to"]) for e in events}


def test_every_process_connects_and_no_password_is_shown(
    fleet: Fleet, cluster: SentinelCluster
) -> None:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        notified, flower = the_side_services(fleet, procs)
        job_id = submit(fleet, "echo through-both-logins\n")  # colabq submit
        assert fleet.wait_terminal(job_id) is JobState.SUCCEEDED
        assert "through-both-logins" in fleet.output(job_id)  # the attach client's forwarding
        assert fleet.ledger.read_watch(job_id).get("heartbeat_at")  # the watchdog's
        wait_for(lambda: (job_id, "succeeded") in told(notified), "the notifier's hook", 60)
        beat_log = fleet.root / "beat.log"
        ran = re.compile(r"Task colabq\.janitor\[[^]]+\] succeeded")
        wait_for(lambda: ran.search(beat_log.read_text()), "beat's janitor pass ran", 90)
        wait_up(flower)
        wait_events(flower)  # its event consumer, over the broker
        queue = f"{fleet.env['COLABQ_QUEUE_PREFIX']}gpu.t4"
        lengths = get(f"{flower}/api/queues/length")["active_queues"]  # its broker view
        assert {"name": queue, "messages": 0} in lengths, lengths
        shown = json.dumps(get(f"{flower}/api/workers?refresh=1"))  # each worker's conf too
        assert "broker_transport_options" in shown, shown[:2000]
        outputs = [shown, *the_commands_answer(fleet, cluster, job_id)]
    finally:
        for proc in procs:
            stop(proc)
    logs = [(fleet.root / f"{name}.log").read_text() for name in LOGS]
    job_log = "\n".join(line.text for line in fleet.ledger.read_log(job_id, count=10_000))
    for text in [*outputs, *logs, job_log, command_lines()]:
        for password in passwords(cluster):
            assert password not in text


def the_commands_answer(fleet: Fleet, cluster: SentinelCluster, job_id: str) -> list[str]:
    """`colabq status JOB`, `colabq status` reading only the ledger's settings (without the
    settings object) and `colabq doctor`'s Redis rows, through both logins; their outputs."""
    runner = CliRunner()
    one = runner.invoke(app, ["status", job_id], env=fleet.env)
    assert one.exit_code == 0 and "SUCCEEDED" in one.output, one.output
    ledger_only = {k: v for k, v in fleet.env.items() if not k.startswith("COLABQ_")}
    for name in ("COLABQ_REDIS_URL", "COLABQ_KEY_PREFIX", *cluster.env()):
        ledger_only[name] = fleet.env[name]
    listed = subprocess.run(
        [COLABQ, "status", "--json"], env=ledger_only, capture_output=True, text=True, timeout=60
    )
    assert listed.returncode == 0 and job_id in listed.stdout, listed.stdout + listed.stderr
    doctor = runner.invoke(app, ["doctor", "--json"], env=fleet.env)
    rows = {r["check"]: r for r in json.loads(doctor.output)["checks"]}
    assert rows["redis sentinels"]["status"] == "PASS", rows["redis sentinels"]
    assert "3 of 3 sentinel(s) answer" in rows["redis sentinels"]["detail"]
    assert rows["redis"]["status"] == "PASS", rows["redis"]
    return [one.output, listed.stdout + listed.stderr, doctor.output]


def wrong_env(cluster: SentinelCluster, wrong: str, home: Path) -> dict[str, str]:
    """This deployment's Redis settings with one side's password wrong."""
    sec = cluster.security
    assert sec is not None
    env = {**cluster.env(), "COLABQ_REDIS_URL": cluster.url, "HOME": str(home),
           "COLABQ_STATE_DIR": str(home / "state"), "COLABQ_KEY_PREFIX": "colabq-auth"}  # fmt: skip
    if wrong == "sentinels":
        env["COLABQ_REDIS_SENTINEL_PASSWORD"] = "not-the-sentinels-password"
    else:
        user, password = sec.master_login()
        env["COLABQ_REDIS_URL"] = cluster.url.replace(
            f"{user or ''}:{password}@", f"{user or ''}:not-the-masters-password@"
        )
        assert env["COLABQ_REDIS_URL"] != cluster.url
    return env


SAYS = {  # what each command's line begins with, and what it says to set
    "sentinels": ("The sentinels of sentinel://", "COLABQ_REDIS_SENTINEL_PASSWORD"),
    "master": (f"The Redis master '{MASTER_NAME}' (named by the sentinels of sentinel://",
               "the master's USER:PASSWORD@"),
}  # fmt: skip


@pytest.mark.parametrize("wrong", ["sentinels", "master"])
def test_a_wrong_password_is_one_line_naming_whose(
    cluster: SentinelCluster, wrong: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):  # only the settings below (the developer's shell has others)
        if name.upper().startswith("COLABQ_"):
            monkeypatch.delenv(name)
    env = wrong_env(cluster, wrong, tmp_path)
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    start, to_set = SAYS[wrong]
    said: list[str] = []
    for argv in (["status"], ["worker", "--gpu", "T4"]):
        result = runner.invoke(app, argv, env=env)
        lines = result.output.strip().splitlines()
        assert result.exit_code == 3 and len(lines) == 1, (argv, result.output)
        assert lines[0].startswith(f"colabq: {start}") and to_set in lines[0], lines[0]
        said.append(result.output)
    doctor = runner.invoke(app, ["doctor", "--json"], env=env)
    assert doctor.exit_code == 1, doctor.output
    rows: dict[str, Any] = {r["check"]: r for r in json.loads(doctor.output)["checks"]}
    redis_row, sentinels = rows["redis"], rows["redis sentinels"]
    assert redis_row["status"] == "FAIL" and redis_row["detail"].startswith(start), redis_row
    assert to_set in redis_row["what_to_do"], redis_row
    if wrong == "sentinels":
        assert sentinels["status"] == "FAIL" and "refused colabq's login" in sentinels["detail"]
        assert to_set in sentinels["what_to_do"], sentinels
    else:
        assert sentinels["status"] == "PASS", sentinels
    for text in [*said, doctor.output]:
        assert "Traceback" not in text and "not-the-" not in text
        for password in passwords(cluster):
            assert password not in text
