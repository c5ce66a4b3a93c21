"""`secrets:` (job file) and `--secret` (flag): the secrets a job's own processes may read, asked
for by name; a job that names none is the same job as before (its idempotency key unchanged), and
a name colabq does not know is refused in one line, before anything is enqueued."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from producer.cli import app
from tests.cli.test_jobfile_sweep import env, jobs, ledger, prefix, write_job  # noqa: F401
from worker.records.ledger import Ledger

runner = CliRunner()


def test_a_job_asks_for_the_hub_token_by_name_in_its_file_or_with_a_flag(
    tmp_path: Path,
    env: dict[str, str | None],  # noqa: F811
    ledger: Ledger,  # noqa: F811
) -> None:
    asked = write_job(tmp_path / "a", "secrets: [hf_token]\n")
    res = runner.invoke(app, ["submit", str(asked), "--json"], env=env)
    assert res.exit_code == 0, res.output
    plain = write_job(tmp_path / "b", "")
    flag = runner.invoke(app, ["submit", str(plain), "--secret", "hf_token", "--json"], env=env)
    assert flag.exit_code == 0, flag.output
    none = runner.invoke(app, ["submit", str(plain), "--allow-same-run", "--json"], env=env)
    assert none.exit_code == 0, none.output
    ids = [json.loads(r.output.splitlines()[-1])["jobs"][0]["job_id"] for r in (res, flag, none)]
    assert len(set(ids)) == 3  # asking for a secret makes another job, never the same one
    secrets = {spec["job_id"]: spec["secrets"] for spec in jobs(ledger)}
    assert [secrets[i] for i in ids] == [("hf_token",), ("hf_token",), ()]


def test_an_unknown_secret_is_refused_in_one_line_and_nothing_is_enqueued(
    tmp_path: Path,
    env: dict[str, str | None],  # noqa: F811
    ledger: Ledger,  # noqa: F811
) -> None:
    path = write_job(tmp_path, "")
    res = runner.invoke(app, ["submit", str(path), "--secret", "wandb_key", "--json"], env=env)
    assert res.exit_code == 2, res.output
    assert "secrets: Input should be 'hf_token'" in res.output
    assert len(res.output.strip().splitlines()) == 1, res.output
    filed = write_job(tmp_path / "f", "secrets: wandb_key\n")
    res = runner.invoke(app, ["submit", str(filed), "--json"], env=env)
    assert res.exit_code == 2 and "secrets" in res.output and "hf_token" in res.output, res.output
    assert jobs(ledger) == []
