"""compose.yaml is checked as data (docker does not run here): the services colabq needs, one
beat, scalable workers, healthy Redis first, no secret in any environment, real commands."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml
from typer.main import get_command

from producer.cli import app

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


WORKERS = ("worker-t4", "worker-a100")
MONITORING = ("prometheus", "grafana")


def test_services_present(compose: dict) -> None:
    assert set(compose["services"]) == {"redis", *WORKERS, "beat", "gate", "flower", "notifier",
                                        "metrics", *MONITORING}  # fmt: skip
    # Only when asked for: a deployment without notifications starts as before.
    assert compose["services"]["notifier"]["profiles"] == ["notify"]
    for name in MONITORING:
        assert compose["services"][name]["profiles"] == ["monitoring"], name


def test_valid_against_the_compose_specification(compose: dict) -> None:
    schema = json.loads((ROOT / "tests" / "data" / "compose-spec.json").read_text())
    jsonschema.Draft201909Validator(schema).validate(compose)


def test_a_worker_per_gpu_type_with_init(compose: dict) -> None:
    for name, gpu in zip(WORKERS, ("T4", "A100"), strict=True):
        worker = compose["services"][name]
        assert worker["command"][:4] == ["colabq", "worker", "--gpu", gpu], name
        assert worker["init"] is True, name


def test_exactly_one_beat_and_scalable_workers(compose: dict) -> None:
    beat = compose["services"]["beat"]
    assert beat["deploy"]["replicas"] == 1
    worker = compose["services"]["worker-t4"]
    # A fixed container name or a published port would stop `--scale worker=N`.
    assert "container_name" not in worker and "ports" not in worker


def test_everything_waits_for_a_healthy_redis(compose: dict) -> None:
    assert "healthcheck" in compose["services"]["redis"]
    for name in (*WORKERS, "beat", "gate", "flower", "notifier", "metrics"):
        dep = compose["services"][name]["depends_on"]["redis"]
        assert dep["condition"] == "service_healthy", name


def test_no_secret_in_environment(compose: dict) -> None:
    for name, svc in compose["services"].items():
        for key, value in (svc.get("environment") or {}).items():
            assert "TOKEN" not in key.upper() or key.endswith("_FILE"), (name, key)
            assert not str(value).startswith("hf_"), (name, key)
    assert "hf_token" in compose["secrets"]


def test_commands_exist(compose: dict) -> None:
    names = set(get_command(app).commands)  # type: ignore[attr-defined]
    for svc in (*WORKERS, "beat", "gate", "flower", "notifier", "metrics"):
        cmd = compose["services"][svc]["command"]
        assert cmd[0] == "colabq" and cmd[1] in names, cmd
    assert compose["services"]["flower"]["command"][:2] == ["colabq", "flower"]


def test_referenced_files_exist(compose: dict) -> None:
    assert (ROOT / "Dockerfile").is_file()
    for svc in compose["services"].values():
        for vol in svc.get("volumes") or ():
            src = vol.split(":")[0]
            if src.startswith("./ops/") and "$" not in src and not src.endswith("colab-home"):
                assert (ROOT / src).exists(), src


def test_flower_has_a_login_and_keeps_its_state(compose: dict) -> None:
    flower = compose["services"]["flower"]
    env = flower["environment"]
    assert env["COLABQ_FLOWER_AUTH_FILE"].startswith("/run/secrets/")
    assert "flower_auth" in flower["secrets"] and "flower_auth" in compose["secrets"]
    db_dir = env["COLABQ_FLOWER_DB"].rsplit("/", 1)[0]
    assert any(v.endswith(f":{db_dir}") for v in flower["volumes"])
    assert not any("FLOWER_UNAUTHENTICATED_API" in str(k) for k in env)


def test_beat_can_reach_the_account_and_the_hub(compose: dict) -> None:
    beat = compose["services"]["beat"]
    assert any(v.split("  ")[0].endswith(":/run/colab-cli:ro") for v in beat["volumes"])
    assert beat["environment"]["COLABQ_HF_TOKEN_FILE"].startswith("/run/secrets/")


def test_no_secret_can_be_baked_into_the_image() -> None:
    """The Dockerfile copies `ops/`: the token files mounted from there never enter the build."""
    ignored = (ROOT / ".dockerignore").read_text().split()
    for pattern in ("ops/secrets/", ".env", "ops/colab-home/"):
        assert pattern in ignored, pattern


def test_redis_needs_a_password_that_no_file_here_holds(compose: dict) -> None:
    redis = compose["services"]["redis"]
    assert "redis_auth" in redis["secrets"] and "redis_auth" in compose["secrets"]
    assert redis["command"][-2:] == ["--include", "/run/secrets/redis_auth"]
    assert "ports" not in redis  # never published: other machines come through a tunnel
    assert "REDISCLI_AUTH" in " ".join(redis["healthcheck"]["test"])
    for name in (*WORKERS, "beat", "flower"):
        svc = compose["services"][name]
        assert "COLABQ_REDIS_URL" not in (svc.get("environment") or {}), name
        [env_file] = svc["env_file"]  # a listed env file must exist: compose fails without it
        assert "ops/secrets/" in env_file, name


def test_workers_are_checked_and_never_share_a_state_dir(compose: dict) -> None:
    worker = compose["services"]["worker-t4"]
    assert "inspect ping" in " ".join(worker["healthcheck"]["test"])
    state = worker["environment"]["COLABQ_STATE_DIR"]
    assert state in worker["volumes"]  # an anonymous volume: one per replica
    named = set(compose.get("volumes") or {})
    assert not any(v.split(":")[0] in named and v.endswith(f":{state}") for v in worker["volumes"])


def test_each_container_writes_only_its_own_copy_of_the_colab_cli_folder(
    compose: dict, tmp_path: Path
) -> None:
    for name in (*WORKERS, "beat"):
        mounts = compose["services"][name]["volumes"]
        assert any(v.endswith(":/run/colab-cli:ro") for v in mounts), name
        assert not any("/.config/colab-cli" in v for v in mounts), name
    assert 'ENTRYPOINT ["/app/ops/docker-entrypoint.sh"]' in (ROOT / "Dockerfile").read_text()
    script = (ROOT / "ops" / "docker-entrypoint.sh").read_text()
    # What it does, on a stand-in for /run/colab-cli: the copy is the container's own, 0700.
    src = tmp_path / "run-colab-cli"
    src.mkdir()
    (src / "token.json").write_text("{}")
    home = tmp_path / "home"
    res = subprocess.run(
        ["sh", "-c", script.replace("/run/colab-cli", str(src)), "entrypoint", "true"],
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    copied = home / ".config" / "colab-cli" / "token.json"
    assert copied.read_text() == "{}" and (copied.stat().st_mode & 0o077) == 0


def test_the_image_runs_colabq_on_the_python_the_tests_run_on() -> None:
    import sys

    from worker.colab.versions import NEWEST

    text = (ROOT / "Dockerfile").read_text()
    [base] = [ln.split()[1] for ln in text.splitlines() if ln.startswith("FROM ")]
    assert base == f"python:{sys.version_info.major}.{sys.version_info.minor}-slim", base
    # The `colab` CLI, pinned to the newest release colabq drives, on an interpreter of its own.
    assert f"uv tool install --python 3.12 google-colab-cli=={NEWEST.version}" in text


def test_the_monitoring_profile_is_pinned_provisioned_and_holds_no_secret(compose: dict) -> None:
    """`docker compose --profile monitoring config` as data: Prometheus and Grafana at exact
    versions, every file they mount in this repository where their configuration expects it,
    Grafana's password a secret file, every port on 127.0.0.1 only."""
    services = compose["services"]
    for name in MONITORING:
        image = services[name]["image"]
        assert re.fullmatch(r"[a-z/]+:v?\d+\.\d+\.\d+", image), image  # never `latest`
        for port in services[name]["ports"]:
            assert port.startswith("127.0.0.1:"), (name, port)
        for vol in services[name]["volumes"]:
            src = vol.split(":")[0]
            if src.startswith("./"):
                assert (ROOT / src).is_dir(), src
    prom = services["prometheus"]
    assert "./ops/monitoring/prometheus:/etc/prometheus:ro" in prom["volumes"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in prom["command"]
    config = yaml.safe_load((ROOT / "ops/monitoring/prometheus/prometheus.yml").read_text())
    for rules in config["rule_files"]:
        assert (ROOT / "ops/monitoring/prometheus" / rules).is_file(), rules
    targets = {t for job in config["scrape_configs"] for c in job["static_configs"]
               for t in c["targets"]}  # fmt: skip
    metrics = services["metrics"]["command"]
    assert targets == {f"metrics:{metrics[metrics.index('--port') + 1]}", "flower:5555"}
    assert "127.0.0.1:9815:9815" in services["metrics"]["ports"]
    grafana = services["grafana"]
    env = grafana["environment"]
    assert env["GF_SECURITY_ADMIN_PASSWORD__FILE"] == "/run/secrets/grafana_admin"
    assert "grafana_admin" in grafana["secrets"] and "grafana_admin" in compose["secrets"]
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    for key in env:
        assert "PASSWORD" not in key or key.endswith("__FILE"), key
    mounts = dict(v.split(":")[:2] for v in grafana["volumes"] if v.startswith("./"))
    provider = yaml.safe_load(
        (ROOT / "ops/monitoring/grafana/provisioning/dashboards/colabq.yml").read_text()
    )["providers"][0]["options"]["path"]
    assert mounts["./ops/monitoring/grafana/dashboards"] == provider
    assert env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"] == f"{provider}/colabq.json"
    assert (ROOT / "ops/monitoring/grafana/dashboards/colabq.json").is_file()
    assert mounts["./ops/monitoring/grafana/provisioning"] == "/etc/grafana/provisioning"
    source = yaml.safe_load(
        (ROOT / "ops/monitoring/grafana/provisioning/datasources/prometheus.yml").read_text()
    )["datasources"][0]
    assert source["url"] == "http://prometheus:9090" and "9090" in prom["ports"][0]
