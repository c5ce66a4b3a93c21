"""A host's account on the emulator: `colab whoami` checked against COLABQ_ACCOUNT when a worker
starts, and a host of another account refused before it takes a job's VM (no Redis needed)."""

from __future__ import annotations

from pathlib import Path

import fakeredis
import pytest

from ops.chaos.env import EMULATOR
from tests.colab_standin import WHOAMI_FAILS, WHOAMI_NO_EMAIL, colab_with
from tests.factories import SESSION, make_spec
from worker.accounts.login import AccountMismatch, check_may_act, host_account
from worker.clock import FakeClock
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.session.checks import worker_host_check
from worker.session.owner import adopt_job
from worker.settings import Settings
from worker.states import JobState as S

pytestmark = pytest.mark.integration


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """This host: its HOME and the emulated account (one emulator home, one account)."""
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLAB_EMU_HOME", str(tmp_path / "emulator"))
    return {"state_dir": tmp_path / "state", "colab_bin": str(EMULATOR)}


def test_a_worker_on_another_login_does_not_start(host: dict[str, object]) -> None:
    found = worker_host_check(Settings(**host))  # type: ignore[arg-type]
    assert (found.problem, found.account) == (None, "emulator@colab.example")
    same = Settings(**host, account="EMULATOR@colab.example")  # type: ignore[arg-type]
    assert worker_host_check(same).problem is None
    other = Settings(**host, account="b@colab.example")  # type: ignore[arg-type]
    assert worker_host_check(other).problem == (
        "the colab CLI is logged in as emulator@colab.example, not "
        "COLABQ_ACCOUNT=b@colab.example: log it in as b@colab.example (`colab whoami` shows the "
        "login), or set COLABQ_ACCOUNT=emulator@colab.example"
    )
    with pytest.raises(AccountMismatch):
        host_account(other)


def test_a_host_of_another_account_never_adopts_the_job(host: dict[str, object]) -> None:
    settings = Settings(**host)  # type: ignore[arg-type]
    ledger = Ledger(fakeredis.FakeRedis(), FakeClock(), Keys("t"), log_maxlen=100)
    job_id, _ = ledger.create(make_spec())
    assert ledger.claim(job_id, "w1", ttl_s=30)
    ledger.transition(job_id, S.ALLOCATING, owner="w1", reason="claimed")
    ledger.set_fields(job_id, owner="w1", account="b@colab.example", endpoint="gpu-1",
                      session=SESSION)  # fmt: skip
    ledger.release_lock(job_id, "w1")
    with pytest.raises(AccountMismatch) as caught:
        adopt_job(job_id, settings, ledger, worker_name="adopter")
    assert caught.value.advice() == (
        f"job {job_id}'s VM is on Colab account b@colab.example; this host is logged in as "
        "emulator@colab.example: act on it from a host of b@colab.example (its janitor does so "
        "by itself)"
    )
    assert ledger.get(job_id).owner == "w1"
    assert not (Path(str(host["state_dir"])) / "jobs").exists()
    check_may_act(job_id, None, settings)  # a job from before accounts: anyone's, as before


@pytest.mark.parametrize("whoami", [WHOAMI_NO_EMAIL, WHOAMI_FAILS], ids=["no-email", "fails"])
def test_a_login_whoami_cannot_name_is_the_account_setting_with_a_warning(
    host: dict[str, object], tmp_path: Path, whoami: str
) -> None:
    host = {**host, "colab_bin": str(colab_with(tmp_path, "whoami", whoami))}
    found = worker_host_check(Settings(**host, account="ops@example.com"))  # type: ignore[arg-type]
    assert (found.problem, found.account) == (None, "ops@example.com")
    [warning] = found.warnings
    assert warning.startswith("`colab whoami` cannot name this host's Colab login (it ")
    assert warning.endswith("running as COLABQ_ACCOUNT=ops@example.com, which colabq cannot check")
    # Without the setting there is no account to record: refused, asking for it.
    alone = worker_host_check(Settings(**host))  # type: ignore[arg-type]
    assert alone.problem is not None and alone.problem.startswith(
        "`colab whoami` cannot name this host's Colab account ("
    )
    assert alone.problem.endswith(
        "set COLABQ_ACCOUNT to the email of its Colab login (a worker records the account of "
        "every job it runs)"
    )
    # An adopter on such a host acts as its setting: its own account's job, never another's.
    settings = Settings(**host, account="ops@example.com")  # type: ignore[arg-type]
    check_may_act("j1", "ops@example.com", settings)
    with pytest.raises(AccountMismatch):
        check_may_act("j1", "b@colab.example", settings)
