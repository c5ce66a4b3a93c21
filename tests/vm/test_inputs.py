"""The job's declared inputs on the VM: the wrapper downloads every `--input NAME=URI` before the
job starts, in parallel (an https server that answers two files only once both were asked for
proves it), `hf://` from the local Hub server with the job's read token and `https://` from a
local TLS server with no credential at all; each lands in a folder the job's unprivileged user
owns and is named to it as COLABQ_INPUT_<NAME>, while its script still gets `--hub-input
NAME=URI`. A missing or empty input fails the job before it runs, in one line naming it; a job
without inputs never starts the downloader."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.httpsfiles import https_files
from tests.hub import conftest as hub_conftest
from tests.hub.conftest import Hub
from tests.vm.conftest import Vm

_client_env = hub_conftest._client_env
make_hub = hub_conftest.make_hub
hub = hub_conftest.hub

JOB = """\
echo "args: $*"
echo "uid: $(id -u)"
for name in DATA VOCAB LABELS; do
  var="COLABQ_INPUT_$name"
  echo "$name: ${!var:-unset} $(stat -c %u "${!var}" 2>/dev/null) $(tr "\\n" " " < "${!var}")"
done
"""
RAN = "echo the-job-ran\n"


def _hub_args(vm: Vm, hub: Hub) -> list[str]:
    """The job's read token as the bundle brings it, and the Hub the VM talks to."""
    token = vm.content / ".colabq-upload-token"
    token.write_text(hub.tokens["alice_read"] + "\n")
    token.chmod(0o600)
    return ["--token-file", str(token), "--hf-endpoint", hub.url, "--upload-attempts", "2",
            "--upload-backoff-s", "0.2"]  # fmt: skip


def _inputs(**declared: str) -> tuple[list[str], list[str]]:
    """The wrapper's `--input` options and the job's `--hub-input` arguments, as the plan
    writes them."""
    items = [f"{name}={uri}" for name, uri in declared.items()]
    wrapper = [a for i in items for a in ("--input", i)]
    return wrapper, [a for i in items for a in ("--hub-input", i)]


def test_inputs_are_downloaded_in_parallel_before_the_job_and_named_to_it(
    vm: Vm, hub: Hub, tmp_path: Path
) -> None:
    data = hub.private_dataset()  # alice's private dataset: only a token reads it
    files = {"vocab.txt": b"a b c\n", "labels/labels.csv": b"0,cat\n1,dog\n"}
    with https_files(tmp_path / "https", files, together=frozenset(files)) as web:
        vm.env["SSL_CERT_FILE"] = str(web.cafile)
        opts, job_args = _inputs(
            DATA=data, VOCAB=web.url("vocab.txt"), LABELS=web.url("labels/labels.csv")
        )
        run = vm.run(JOB, *_hub_args(vm, hub), *opts, job_args=job_args)
    assert run.rc == 0, run.console
    log = run.job_log
    assert f"args: {' '.join(job_args)}" in log  # the seed's arguments, names and all
    uid = int(log.split("uid: ")[1].split()[0])
    inputs = run.work / "inputs"
    for name, text in (("DATA", "a,b 1,2"), ("VOCAB", "a b c"), ("LABELS", "0,cat 1,dog")):
        line = next(ln for ln in log.splitlines() if ln.startswith(f"{name}: "))
        path, owner, *content = line.split()[1:]
        assert Path(path).is_relative_to(inputs / name), line
        assert int(owner) == uid and " ".join(content) == text, line
    if os.geteuid() == 0:
        assert uid != 0  # read by the job's unprivileged user, who owns them
    report = json.loads(run.sentinels["INPUTS"])
    assert report["ok"] is True and set(report["inputs"]) == {"DATA", "VOCAB", "LABELS"}
    assert report["inputs"]["VOCAB"]["bytes"] == 6 and report["inputs"]["DATA"]["uri"] == data
    # Both https files were asked for before either was answered, and with no credential.
    assert sorted(web.asked) == [("labels/labels.csv", False), ("vocab.txt", False)]
    assert "STARTED" in run.sentinels and run.sentinels["EXIT"] == "0"


def test_a_missing_or_empty_input_fails_the_job_before_it_runs_naming_it(
    vm: Vm, hub: Hub, tmp_path: Path
) -> None:
    data = hub.private_dataset()
    with https_files(tmp_path / "https", {"empty.bin": b""}) as web:
        vm.env["SSL_CERT_FILE"] = str(web.cafile)
        opts, job_args = _inputs(
            DATA=data, GONE="hf://datasets/alice/ds/nope.csv", EMPTY=web.url("empty.bin"),
            LOST=web.url("lost.bin"),
        )  # fmt: skip
        run = vm.run(RAN, *_hub_args(vm, hub), *opts, job_args=job_args)
    assert run.rc == 6, run.console
    assert "the-job-ran" not in run.console and "STARTED" not in run.sentinels
    report = json.loads(run.sentinels["INPUTS"])
    reason = report["reason"]
    assert report["ok"] is False and "\n" not in reason, report
    assert "GONE (hf://datasets/alice/ds/nope.csv) is missing" in reason
    assert f"EMPTY ({web.url('empty.bin')}) holds no data" in reason
    assert f"LOST ({web.url('lost.bin')}) is missing (HTTP 404)" in reason
    assert "DATA" not in reason  # the one that was there
    assert run.sentinels["DONE"] == "6" and "EXIT" not in run.sentinels
    # The log says why, and reached the store for the user to read.
    assert reason in (vm.store / "p" / "logs" / "j1" / "job.log").read_text()


def test_a_job_without_inputs_never_starts_the_downloader(vm: Vm) -> None:
    (vm.content / "colabq_inputs.py").unlink()  # a job without inputs gets none in its bundle
    run = vm.run('echo "data: ${COLABQ_INPUT_DATA:-none}"\n')
    assert run.rc == 0, run.console
    assert "data: none" in run.job_log
    assert "INPUTS" not in run.sentinels and not (run.work / "inputs").exists()


def test_a_gs_input_is_left_to_the_job_and_said_so(vm: Vm) -> None:
    opts, job_args = _inputs(CKPT="gs://bucket/ckpt.pt")
    run = vm.run('echo "args: $* ckpt: ${COLABQ_INPUT_CKPT:-unset}"\n', *opts, job_args=job_args)
    assert run.rc == 0, run.console
    assert "args: --hub-input CKPT=gs://bucket/ckpt.pt ckpt: unset" in run.job_log
    assert "input CKPT: gs://bucket/ckpt.pt is not fetched by colabq" in run.job_log
    report = json.loads(run.sentinels["INPUTS"])
    assert report["ok"] is True and report["inputs"] == {}
