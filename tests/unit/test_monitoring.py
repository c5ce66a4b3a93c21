"""The monitoring that ships (`ops/monitoring`): every query of the Grafana dashboard and of the
alert rules names only metrics `colabq metrics` really exports (the names read from a real
scrape of a ledger holding every kind of fact), on the data source Grafana is given. With
`promtool` (Debian's, `ops/ensure-promtool.sh`; without it these skip locally and fail under CI):
the rules and Prometheus's configuration load, every dashboard query parses, each alert fires
on the series it is for (with its words) and not on their healthy twins, and a scrape passes
`promtool check metrics`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import fakeredis
import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import service_missing
from tests.factories import make_spec
from worker.accounts.balances import record_usage
from worker.clock import FakeClock
from worker.colab.parse import Usage
from worker.fleet.health import drain_by_hand
from worker.metrics.counts import count_janitor, count_notify_failure
from worker.metrics.families import Options
from worker.metrics.live import LiveJobs
from worker.metrics.service import LedgerCollector, build_registry
from worker.records.fleet import WorkerCard, publish
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.states import JobState as S

ROOT = Path(__file__).resolve().parents[2]
MON = ROOT / "ops" / "monitoring"
RULES = MON / "prometheus" / "rules" / "colabq.rules.yml"
DASHBOARD = MON / "grafana" / "dashboards" / "colabq.json"
NOW = 1_800_000_000.0
# PromQL's words that are not metric names (the functions and operators these files use).
PROMQL = {"sum", "max", "min", "rate", "increase", "histogram_quantile", "and", "or", "unless",
          "label_values"}  # fmt: skip
# Grafana's variables, as Grafana would fill them in.
GRAFANA_VARS = {"$__rate_interval": "5m", "$__range": "6h", "$gpu": ".*"}


class Row:
    def __init__(self, kind: str, did: str) -> None:
        self.kind, self.did = kind, did


def scrape_text() -> str:
    """A scrape of a ledger with a job of every kind: ended with a report, running with a
    watchdog beat, queued; a busy and a drained worker; a balance; janitor and notifier
    counters."""
    ledger = Ledger(fakeredis.FakeRedis(), FakeClock(NOW), Keys("t"), log_maxlen=100)
    r, k = ledger.r, ledger.keys
    done, running, _ = (ledger.create(make_spec())[0] for _ in range(3))
    for job_id, path in ((done, (S.STARTING, S.RUNNING, S.RELEASING, S.SUCCEEDED)),
                         (running, (S.STARTING, S.RUNNING))):  # fmt: skip
        assert ledger.claim(job_id, "w", ttl_s=60)
        ledger.transition(job_id, S.ALLOCATING, owner="w", reason="claimed")
        ledger.set_fields(job_id, owner="w", endpoint=f"gpu-{job_id}", account="a@example.com")
        for st in path:
            ledger.transition(job_id, st, owner="w", reason=st.value)
    ledger.record_watch(running, {"heartbeat_at": repr(NOW)})
    for name, job in (("w1@h", running), ("w2@h", None)):
        card = WorkerCard(name, "h", ("T4",), ("gpu.t4",), job, NOW, NOW, "a@example.com")
        publish(r, k, card, ttl_s=3600)
    drain_by_hand(r, k, "w2@h", "by hand", NOW, "ops")
    record_usage(r, k, "a@example.com", Usage(50.0, 1.76, 1), by="w1@h", now=NOW)
    pipe = r.pipeline()
    count_janitor(pipe, k, "a@example.com", [Row("assignment", "did: stop orphan (x)")])
    pipe.execute()
    count_notify_failure(r, k, "team", "failed")
    live = LiveJobs(r, k)
    live.load()
    collector = LedgerCollector(r, k, live, Options(floor_for=lambda a: 5.0), "", lambda: NOW)
    return generate_latest(build_registry(collector)).decode()


@pytest.fixture(scope="module")
def exported() -> set[str]:
    return {s.name for f in text_string_to_metric_families(scrape_text()) for s in f.samples}


def dashboard_queries() -> list[str]:
    dash = json.loads(DASHBOARD.read_text())
    out = [t["expr"] for p in dash["panels"] if p["type"] != "row" for t in p["targets"]]
    return out + [v["definition"] for v in dash["templating"]["list"]]


def rule_queries() -> list[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule["expr"] for g in groups for rule in g["rules"]]


def metric_names(expr: str) -> set[str]:
    """The metric names a query names (strings, matchers, ranges and groupings left out)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)
    e = re.sub(r"\{[^}]*\}|\[[^\]]*\]|\boffset\s+\w+", "", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", e)
    e = re.sub(r"label_values\(([a-z_:]+),[^)]*\)", r"\1", e)
    return set(re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b", e)) - PROMQL


def test_every_dashboard_and_rule_query_names_only_exported_metrics(exported: set[str]) -> None:
    assert {"colabq_jobs", "colabq_jobs_ended_total", "celery_queue_length",
            "colabq_job_wait_seconds_bucket", "colabq_worker_drained"} <= exported  # fmt: skip
    for expr in dashboard_queries():
        names = metric_names(expr)
        assert names and names <= exported, (expr, names - exported)
    for expr in rule_queries():
        names = metric_names(expr) - {"up"}  # Prometheus's own, per scrape target
        assert names and names <= exported, (expr, names - exported)


def test_the_dashboard_uses_the_provisioned_data_source_and_a_panel_per_question() -> None:
    dash = json.loads(DASHBOARD.read_text())
    source = yaml.safe_load((MON / "grafana/provisioning/datasources/prometheus.yml").read_text())
    uid = source["datasources"][0]["uid"]
    panels = [p for p in dash["panels"] if p["type"] != "row"]
    assert dash["uid"] == "colabq" and len(panels) >= 12
    for p in panels:
        assert p["datasource"]["uid"] == uid and p["targets"], p["title"]
        assert all(t["datasource"]["uid"] == uid for t in p["targets"]), p["title"]
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    asked = " ".join(dashboard_queries())
    for metric in ("colabq_jobs{", "colabq_queue_depth", "colabq_queue_oldest_wait_seconds",
                   "colabq_job_wait_seconds_bucket", "colabq_job_run_seconds_bucket",
                   "colabq_gpu_held_seconds_total", "colabq_compute_units_total",
                   "colabq_account_balance_units", "colabq_workers", "colabq_worker_drained",
                   "colabq_vm_heartbeat_age_seconds", "colabq_janitor_actions_total",
                   "colabq_notify_failures_total", "celery_queue_length"):  # fmt: skip
        assert metric in asked, metric


def test_every_alert_the_issue_asks_for_is_there_with_its_words() -> None:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    rules = {r["alert"]: r for g in groups for r in g["rules"]}
    for name in ("ColabqNoWorkerForQueuedJobs", "ColabqJobQueuedTooLong", "ColabqWorkerDrained",
                 "ColabqBalanceUnderFloor", "ColabqOrphanVmStopped",
                 "ColabqNotificationFailing"):  # fmt: skip
        rule = rules[name]
        assert rule["labels"]["severity"] in ("warning", "critical"), name
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], name


def promtool() -> str:
    exe = shutil.which("promtool")
    if exe is None:
        service_missing("promtool is needed: run ops/ensure-promtool.sh (Debian's prometheus)")
    return exe


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], input=stdin, capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip


def test_promtool_loads_the_rules_and_the_config_and_parses_every_dashboard_query(
    tmp_path: Path,
) -> None:
    res = run("check", "rules", str(RULES))
    assert res.returncode == 0 and "SUCCESS: 7 rules found" in res.stdout, res.stdout + res.stderr
    res = run("check", "config", str(MON / "prometheus" / "prometheus.yml"))
    assert res.returncode == 0, res.stdout + res.stderr
    recorded = []
    for i, expr in enumerate(q for q in dashboard_queries() if not q.startswith("label_values")):
        for var, value in GRAFANA_VARS.items():
            expr = expr.replace(var, value)
        recorded.append({"record": f"colabq_dashboard:query_{i}", "expr": expr})
    path = tmp_path / "dashboard.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": recorded}]}))
    res = run("check", "rules", str(path))
    assert res.returncode == 0, res.stdout + res.stderr


def test_promtool_lints_a_scrape() -> None:
    """Prometheus's naming rules hold, but for a name kept as celery-exporter spells it."""
    res = run("check", "metrics", stdin=scrape_text())
    problems = [ln for ln in (res.stdout + res.stderr).splitlines() if ln.strip()]
    assert problems == [
        "celery_active_worker_count non-histogram and non-summary metrics should not have "
        '"_count" suffix'
    ]


def alert(name: str, at: str, *expected: dict[str, Any]) -> dict[str, Any]:
    return {"eval_time": at, "alertname": name, "exp_alerts": list(expected)}


def fired(labels: dict[str, str], summary: str, description: str) -> dict[str, Any]:
    return {"exp_labels": labels, "exp_annotations": {"summary": summary,
                                                      "description": description}}  # fmt: skip


SERIES = {
    # T4 jobs queued with only a drained T4 worker; A100's worker is busy on its one.
    'colabq_queue_depth{gpu="T4"}': "2x30",
    'colabq_queue_depth{gpu="A100"}': "1x30",
    'colabq_workers{gpu="A100",account="a",state="busy"}': "1x30",
    'colabq_workers{gpu="T4",account="a",state="drained"}': "1x30",
    # The oldest T4 job passes an hour at 10m; A100's waits seconds.
    'colabq_queue_oldest_wait_seconds{gpu="T4"}': "3000+60x30",
    'colabq_queue_oldest_wait_seconds{gpu="A100"}': "10x30",
    'colabq_worker_drained{hostname="w2",account="a",kind="manual",reason="disk"}': "1x30",
    'colabq_account_balance_units{account="a"}': "4x30",
    'colabq_account_balance_floor_units{account="a"}': "5x30",
    'colabq_account_balance_units{account="b"}': "50x30",
    'colabq_account_balance_floor_units{account="b"}': "5x30",
    # An orphan stopped at 5m (its series born at 1), a settlement; a notification fails at 6m.
    'colabq_janitor_actions_total{account="a",action="orphan_stopped"}': "_x5 1x25",
    'colabq_janitor_actions_total{account="a",action="settled"}': "_x5 1x25",
    'colabq_notify_failures_total{target="team",state="failed"}': "0x5 1x25",
    'colabq_notify_failures_total{target="ops",state="failed"}': "0x30",
    "colabq_ledger_up": "1x30",
    'up{job="colabq"}': "1x30",
}


def test_promtool_fires_each_alert_on_its_series_and_not_on_healthy_ones(tmp_path: Path) -> None:
    tests = [
        alert("ColabqNoWorkerForQueuedJobs", "10m", fired(
            {"severity": "critical", "gpu": "T4"},
            "T4 jobs are queued and no live worker takes T4 jobs",
            "Start a worker for T4 (`colabq worker --gpu T4`) or undrain one (`colabq workers` "
            "lists them).")),
        alert("ColabqNoWorkerForQueuedJobs", "3m"),  # not for 5 minutes yet
        alert("ColabqJobQueuedTooLong", "20m", fired(
            {"severity": "warning", "gpu": "T4"}, "A T4 job has been QUEUED for 1h 10m 0s",
            "`colabq status --state queued` shows why it waits (a busy fleet, Colab's capacity, "
            "its dependencies).")),
        alert("ColabqJobQueuedTooLong", "12m"),  # past an hour since 10m: not 5 minutes yet
        alert("ColabqWorkerDrained", "10m", fired(
            {"severity": "warning", "hostname": "w2", "account": "a", "kind": "manual",
             "reason": "disk"},
            "Worker w2 is drained (manual): disk",
            "A host drain lifts itself once its probe finds the host healthy; a manual one needs "
            "`colabq undrain w2`.")),
        alert("ColabqBalanceUnderFloor", "10m", fired(
            {"severity": "critical", "account": "a"},
            "Colab account a has 4 compute units, at or under its floor",
            "Its workers allocate nothing (jobs end FAILED_BUDGET): top the account up, or lower "
            "COLABQ_BUDGET_FLOORS.")),
        alert("ColabqOrphanVmStopped", "4m"),
        alert("ColabqOrphanVmStopped", "10m", fired(
            {"severity": "warning", "account": "a", "action": "orphan_stopped"},
            "The janitor stopped an orphan VM of account a",
            "A VM outlived its job (an owner died mid-release?): `colabq events --since 1h` "
            "names it.")),
        alert("ColabqNotificationFailing", "4m"),
        alert("ColabqNotificationFailing", "10m", fired(
            {"severity": "warning", "target": "team", "state": "failed"},
            "Notifications to team fail",
            "Check the target in the notifier host's webhooks file; `colabq events` shows each "
            "notify-failed event.")),
        alert("ColabqMetricsCannotReadTheLedger", "20m"),
    ]  # fmt: skip
    spec = {
        "rule_files": [str(RULES)], "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "alert_rule_test": tests,
                   "input_series": [{"series": s, "values": v} for s, v in SERIES.items()]}],
    }  # fmt: skip
    path = tmp_path / "colabq.rules.test.yml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    res = run("test", "rules", str(path))
    assert res.returncode == 0, res.stdout + res.stderr
