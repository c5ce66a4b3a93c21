"""Who is who (worker.people), pure and on fakeredis: the owner in a job id, the ACL rules of
each role, the identity Redis reports, and history entries that name who did what."""

from __future__ import annotations

import re

import fakeredis
import pytest

from tests.factories import make_spec
from worker.clock import FakeClock
from worker.errors import ConfigError, UserInputError
from worker.people.acl import Role, rules_for, setuser_command
from worker.people.identity import Identity, identify
from worker.people.owners import is_mine, new_job_id, owner_of
from worker.records.claim import Claim, claim_and_start
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.spec import JobSpec, decode_spec, encode_spec
from worker.states import JobState

ALICE = Identity("alice", "laptop", "al")
NO_ACL = Identity("default", "laptop", "al")


def test_an_owned_job_id_names_its_owner_and_a_plain_one_none() -> None:
    owned_id = new_job_id("alice")
    assert re.fullmatch(r"[0-9a-f]{16}\.alice", owned_id) and owner_of(owned_id) == "alice"
    plain = new_job_id(None)
    assert re.fullmatch(r"[0-9a-f]{16}", plain) and owner_of(plain) is None


def test_without_acls_everyone_may_change_every_job() -> None:
    assert is_mine(NO_ACL, new_job_id("bob")) and is_mine(NO_ACL, new_job_id(None))


def owned(**fields: object) -> JobSpec:
    """A spec as the gate makes it for alice (`worker.gate.ops`): in her namespace."""
    return make_spec(job_id=new_job_id("alice"), submitted_by="alice", **fields)


def test_an_owned_spec_round_trips_byte_for_byte() -> None:
    spec = owned()
    assert owner_of(spec.job_id) == "alice" and spec.submitted_by == "alice"
    # The claim compares the message's spec with the record's byte for byte: a resend
    # (decoded, then encoded again) must be the same bytes.
    assert encode_spec(decode_spec(encode_spec(spec))) == encode_spec(spec)
    assert is_mine(ALICE, spec.job_id) and not is_mine(ALICE, new_job_id("bob"))
    assert not is_mine(ALICE, new_job_id(None))


def test_a_users_rule_reads_all_and_writes_only_their_own_requests() -> None:
    rules = rules_for("alice", Role.USER, "cq", "cq:q.")
    keys = [r for r in rules if "~" in r]
    assert keys == ["%R~cq:*", "%R~cq:q.gpu.*", "~cq:u:alice:*"]
    assert not [r for r in rules if r.startswith("&")]  # no channel: resetchannels alone
    assert "resetchannels" in rules and "+acl|users" not in rules
    for role in (Role.OPERATOR, Role.SERVICE):
        wide = rules_for("ops", role, "cq", "")
        assert {"~*", "&*", "+acl|users", "+acl|dryrun"} <= set(wide)
        assert "+acl|getuser" not in wide  # it shows every user's password hash
    assert setuser_command("alice", Role.USER, "cq", "").startswith("ACL SETUSER alice resetkeys")


@pytest.mark.parametrize("name", ["Alice", "a.b", "default", "", "x" * 33, "-a"])
def test_a_name_that_cannot_end_a_job_id_gets_no_rule(name: str) -> None:
    with pytest.raises(UserInputError):
        rules_for(name, Role.USER, "cq", "")


def test_identity_is_what_redis_says_never_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LOGNAME", "mallory")
    monkeypatch.setenv("USER", "mallory")
    client = fakeredis.FakeRedis()
    me = identify(client)
    assert me.user == "default" and not me.acl and me.owner is None

    class Named(fakeredis.FakeRedis):
        def execute_command(self, *args: object, **kw: object) -> object:
            if args[:2] == ("ACL", "WHOAMI"):
                return b"alice"
            return super().execute_command(*args, **kw)

    me = identify(Named())
    assert (me.user, me.actor, me.submitter, me.owner) == ("alice", "alice", "alice", "alice")

    class Odd(Named):
        def execute_command(self, *args: object, **kw: object) -> object:
            return b"Al.ice" if args[:2] == ("ACL", "WHOAMI") else super().execute_command(*args)

    with pytest.raises(ConfigError):
        identify(Odd())


def test_every_history_entry_names_its_actor_and_host_and_a_cancel_request_is_one() -> None:
    ledger = Ledger(fakeredis.FakeRedis(), FakeClock(100.0), Keys("cq"), log_maxlen=100)
    job_id, _ = ledger.create(make_spec())
    ledger.request_cancel(job_id, "not needed")
    me = ledger.identity
    history = ledger.history(job_id)
    assert [(h.state, h.action, h.reason) for h in history] == [
        (JobState.QUEUED, "", "submitted"), (JobState.QUEUED, "cancel", "not needed"),
    ]  # fmt: skip
    assert {(h.actor, h.host) for h in history} == {(me.actor, me.host)}
    assert me.actor == me.local_user  # no ACLs: this machine's user


def test_a_message_for_an_owned_job_runs_only_with_the_spec_its_owner_recorded() -> None:
    ledger = Ledger(fakeredis.FakeRedis(), FakeClock(100.0), Keys("cq"), log_maxlen=100)
    spec = owned()
    job_id, _ = ledger.create(spec)
    forged = spec.model_copy(update={"script": "cat $HF_TOKEN_PATH\n"})
    args = {"ttl_s": 60, "worker": "w1", "owner_host": "h", "nonce": "n", "wall_deadline_at": 1e9}
    got = claim_and_start(ledger, job_id, "o1", payload=encode_spec(forged), **args)
    assert got.claim is Claim.FORGED and ledger.state_of(job_id) is JobState.QUEUED
    got = claim_and_start(ledger, job_id, "o1", payload=encode_spec(spec), **args)
    assert got.claim is Claim.CLAIMED
