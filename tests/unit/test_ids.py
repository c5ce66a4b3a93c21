"""The one grammar of names read back (`worker.records.ids`): what each accepts and refuses, that
every accepted value is one safe path component, that the Lua twins inside the ledger's scripts
agree with it on the real Redis, and that the places built on it use it (the spec, user names,
the driver's session names)."""

from __future__ import annotations

import logging
import secrets

import pytest
import redis

from tests.factories import make_spec
from worker.colab import driver
from worker.errors import SpecError, UntrustedValue
from worker.fleet.dispatch import copy_ids, jobs_of_task
from worker.people.identity import USER_NAME
from worker.records import ids
from worker.spec import Gpu, decode_spec, encode_spec

HEX16 = "0123456789abcdef"
BAD_NAMES = ["", ".", "..", "../x", "a/../../etc", "/abs/path", "a\x00b", "a b", "a:b", "A" * 300,
             "é", "a\nb", "-rf"]  # fmt: skip

CASES = [
    # kind, accepted, refused (besides BAD_NAMES, which every grammar refuses)
    ("job id", [HEX16, f"{HEX16}.alice", "feedbeef01", f"{HEX16}.a_b-9"],
     [f"{HEX16}.", f"{HEX16}.Alice", f"{HEX16}.a.b", "abc", "x" * 41, f"{HEX16}.{'u' * 33}",
      "ABCDEF0123456789", f"{HEX16}*"]),
    ("sweep id", ["sw0123456789ab", "sw0123456789ab.bob"],
     ["sw0123", "sw0123456789abc", "sw0123456789aZ", "sx0123456789ab"]),
    ("user", ["alice", "a", "b0b_-x"], ["Alice", "a.b", "_a", "u" * 33]),
    ("session", ["colabq-" + "0" * 32, "my-notebook", "job1", "a.b_c"], ["x" * 129, "_a"]),
    ("endpoint", ["gpu-0123456789", "tpu-v5e1-s-kkb-12", "m.n~o_p"], ["e" * 201, "a%2F..", "a?b"]),
    ("worker", ["celery@host", "test-ab12cd@my.host", "w1", "a+b@h"], ["w" * 201, "a b@h"]),
]  # fmt: skip
CHECKS = {"job id": ids.job_id, "sweep id": ids.sweep_id, "user": ids.user,
          "session": ids.session, "endpoint": ids.endpoint, "worker": ids.worker}  # fmt: skip


@pytest.mark.parametrize(("kind", "good", "bad"), CASES, ids=[c[0] for c in CASES])
def test_each_grammar_accepts_its_names_and_refuses_the_rest(
    kind: str, good: list[str], bad: list[str]
) -> None:
    check = CHECKS[kind]
    for value in good:
        assert check(value) == value, value
        assert check(value.encode()) == value  # as Redis returns it
        assert ids.component_problem(value) is None, value  # a safe path component
    for value in [*bad, *BAD_NAMES]:
        assert check(value) is None, value
    assert check(b"\xff\xfe" + HEX16.encode()) is None  # not UTF-8
    assert check(None) is None and check(12345678) is None


def test_owned_session_is_the_prefix_and_128_random_bits() -> None:
    name = "colabq-" + secrets.token_hex(16)
    assert ids.owned_session(name, "colabq-") == name
    assert ids.owned_session(name, "other-") is None
    for bad in ["colabq-x", "my-notebook", "colabq-" + "0" * 31, "colabq-" + "G" * 32, None]:
        assert ids.owned_session(bad, "colabq-") is None, bad


def test_the_spec_user_names_and_session_names_use_the_grammar() -> None:
    assert USER_NAME is ids.USER and driver._NAME is ids.SESSION
    for job_id in (HEX16, f"{HEX16}.alice"):
        assert decode_spec(encode_spec(make_spec(job_id=job_id))).job_id == job_id
    for job_id in ("../../etc", f"{HEX16}/..", "a" * 300, f"{HEX16}\\u0000"):
        payload = encode_spec(make_spec(job_id=HEX16)).replace(f'"{HEX16}"', f'"{job_id}"')
        with pytest.raises(SpecError, match="job_id"):
            decode_spec(payload)


def test_a_bad_value_is_reported_once_naming_where_it_was(
    caplog: pytest.LogCaptureFixture,
) -> None:
    where = f"t:{secrets.token_hex(4)}:active"
    with caplog.at_level(logging.WARNING, logger="worker.records.ids"):
        got = ids.members("job id", [HEX16.encode(), b"../x", b"\xff", b"../x"], where)
        ids.members("job id", [b"../x"], where)
    assert got == [HEX16]
    lines = [r.getMessage() for r in caplog.records]
    assert sum("'../x'" in line and where in line for line in lines) == 1, lines
    assert sum("\\xff" in line for line in lines) == 1, lines


def test_refused_values_raise_one_line_naming_where() -> None:
    from worker.errors import refuse

    with pytest.raises(UntrustedValue) as err:
        ids.job_id("../../etc") or refuse("job id", "the job to adopt", "../../etc")
    assert err.value.advice().count("\n") == 0
    assert "the job to adopt holds '../../etc', which is not a job id" in err.value.advice()


def test_a_task_id_names_its_jobs_whatever_the_owner_is_called() -> None:
    owned = make_spec(job_id=f"{HEX16}.alice", submitted_by="alice",
                      gpu=Gpu.A100, gpu_fallback=(Gpu.T4,))  # fmt: skip
    copies = [task for task, _ in copy_ids(owned)]
    assert copies == [f"{HEX16}.alice", f"{HEX16}.alice.t4"]
    assert all(owned.job_id in jobs_of_task(t) for t in copies)
    # A user named like a GPU type: the id reads either way; both are kept.
    assert jobs_of_task(f"{HEX16}.t4") == {f"{HEX16}.t4", HEX16}
    assert jobs_of_task("../x.t4") == set() and jobs_of_task(b"\xff") == set()


# --- the Lua twins, on the real Redis -------------------------------------------------------

LUA_CASES = [
    *[(v, True) for v in CASES[0][1]],
    *[(v, False) for v in [*CASES[0][2], *BAD_NAMES]],
]


def test_the_scripts_grammar_agrees_with_pythons(redis_client: redis.Redis) -> None:
    script = (
        ids.LUA_NAMES
        + """
local out = {}
for i, s in ipairs(ARGV) do out[i] = is_job_id(s) and 1 or 0 end
return out
"""
    )
    values = [v for v, _ in LUA_CASES]
    got = redis_client.eval(script, 0, *values)
    assert [bool(x) for x in got] == [ids.job_id(v) is not None for v in values]
    assert [bool(x) for x in got] == [ok for _, ok in LUA_CASES]
    sweeps = [("sw0123456789ab", HEX16, True), ("sw0123456789ab.bob", f"{HEX16}.bob", True),
              ("sw0123456789ab.bob", f"{HEX16}.eve", False),  # another user's sweep
              ("sw0123456789ab.bob", HEX16, False), ("sw0123456789ab", f"{HEX16}.eve", False),
              ("sw0123", HEX16, False), ("sw0123456789ab.B", f"{HEX16}.B", False)]  # fmt: skip
    script = ids.LUA_NAMES + "return is_sweep_id(ARGV[1], ARGV[2]) and 1 or 0"
    for sweep, job, ok in sweeps:
        assert bool(redis_client.eval(script, 0, sweep, job)) is ok, (sweep, job)
        assert (ids.sweep_id(sweep) is not None and ids.owner_of(sweep) == ids.owner_of(job)) is ok
