"""Accounts: the setting, `colab whoami` read, who may act on a job's VM, budget floors per
account, and the balances `colabq usage` shows (on the emulator: tests/integration/
test_accounts_emulator.py)."""

from __future__ import annotations

import fakeredis
import pytest

from worker.accounts.balances import read_balances, record_usage
from worker.accounts.names import account_name, same_account
from worker.colab.parse import Usage, classify_failure, parse_whoami
from worker.errors import (
    CliCall,
    ColabNotAuthenticated,
    ColabTransportError,
    ColabUnrecognisedOutput,
    ConfigError,
)
from worker.records.keys import Keys
from worker.settings import load_settings

# colab_cli 0.7.4's `whoami`, as it prints it.
WHOAMI = """Auth provider: oauth2
Email:         Alice@Example.com
Audience:      1234.apps.googleusercontent.com
Expires in:    59m
Scopes:
  - https://www.googleapis.com/auth/colaboratory
  - openid
"""


def test_whoami_is_read_as_the_lower_case_email_or_none_without_one() -> None:
    assert parse_whoami(WHOAMI) == "alice@example.com"
    # A token without the userinfo.email scope (ADC can be one): the real command says so.
    no_email = WHOAMI.replace("Alice@Example.com", "<unavailable: token has no userinfo.email "
                              "scope>")  # fmt: skip
    assert parse_whoami(no_email) is None
    for text in ("Email:         a@b\n", "", WHOAMI.replace("Alice@Example.com", "<none>"),
                 WHOAMI + "Email:         b@c.d\n"):  # fmt: skip
        with pytest.raises(ColabUnrecognisedOutput):
            parse_whoami(text)


@pytest.mark.parametrize(
    ("stderr", "error"),
    [
        ('[colab] whoami: tokeninfo returned HTTP 400: {"error": "invalid_token"}',
         ColabNotAuthenticated),
        ("[colab] whoami: failed to refresh credentials: invalid_grant", ColabNotAuthenticated),
        ("[colab] whoami: tokeninfo request failed: timed out", ColabTransportError),
    ],
)  # fmt: skip
def test_a_failed_whoami_says_why(stderr: str, error: type) -> None:
    call = CliCall(("colab", "--config", "x", "whoami"), 1, "", stderr + "\n")
    assert type(classify_failure(call)) is error


def test_the_account_setting_is_an_email_in_lower_case(monkeypatch: pytest.MonkeyPatch) -> None:
    assert account_name(" Bob@X.org ") == "bob@x.org"
    monkeypatch.setenv("COLABQ_ACCOUNT", "A@Example.com")
    monkeypatch.setenv("COLABQ_BUDGET_FLOORS", '{"B@x.org": 12.5}')
    s = load_settings()
    assert s.account == "a@example.com" and s.budget_floors == {"b@x.org": 12.5}
    assert s.budget_floor_for("b@x.org") == 12.5
    assert s.budget_floor_for("a@example.com") == s.budget_floor_for(None) == 0.0
    monkeypatch.setenv("COLABQ_ACCOUNT", "")
    assert load_settings().account is None  # empty is unset


@pytest.mark.parametrize(
    ("var", "value", "said"),
    [("COLABQ_ACCOUNT", "alice", "COLABQ_ACCOUNT: 'alice' is not an account"),
     ("COLABQ_BUDGET_FLOORS", '{"a@x": -1}', "COLABQ_BUDGET_FLOORS: a floor is negative"),
     ("COLABQ_BUDGET_FLOORS", '{"nobody": 1}', "COLABQ_BUDGET_FLOORS: 'nobody' is not an account"),
     ("COLABQ_BUDGET_FLOORS", "a@x=1", "COLABQ_BUDGET_FLOORS: cannot be read")],
)  # fmt: skip
def test_a_bad_account_setting_is_one_line(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str, said: str
) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert said in str(caught.value) and "\n" not in str(caught.value)


def test_who_may_act_on_a_vm() -> None:
    assert same_account(None, "a@x") and same_account("", None)  # recorded none: anyone
    assert same_account("a@x", "a@x")
    assert not same_account("b@x", "a@x") and not same_account("b@x", None)


# --- balances ---------------------------------------------------------------------------------


def test_the_last_usage_of_each_account_is_kept() -> None:
    r, keys = fakeredis.FakeRedis(), Keys("t")
    record_usage(r, keys, "a@x", Usage(80.5, 1.76, 1), by="w1", now=10.0)
    record_usage(r, keys, "a@x", Usage(79.0, 0.0, 0), by="w2", now=20.0)
    record_usage(r, keys, "b@x", Usage(5.0, 0.0, 0), by="w3", now=15.0)
    r.hset(keys.account_usage(), "c@x", "{not json")
    got = read_balances(r, keys)
    assert sorted(got) == ["a@x", "b@x"]
    assert (got["a@x"].balance_units, got["a@x"].at, got["a@x"].by) == (79.0, 20.0, "w2")


def test_workers_show_their_accounts() -> None:
    from rich.console import Console

    from producer.render import workers_table

    def shown(*accounts: str) -> str:
        rows = [{"name": f"w{i}", "host": "h", "account": a, "gpus": ["T4"], "state": "idle",
                 "job_id": None, "beat_at": 0.0} for i, a in enumerate(accounts)]  # fmt: skip
        console = Console(width=200, record=True)
        console.print(workers_table(rows, 0.0))
        return console.export_text()

    one = shown("a@x.org", "a@x.org")
    assert "2 live worker(s), Colab account a@x.org" in one and "┃ account" not in one
    two = shown("a@x.org", "b@x.org")
    assert "┃ account" in two and "b@x.org" in two
