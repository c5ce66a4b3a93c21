"""The settings object: every invalid value is one ConfigError line naming its variable, a valid
one is read as written; the state dir's default and checks; quiet windows from the environment
or the settings file; the Hub endpoint's precedence; and the lazy settings of `colabq
preflight`. (Where the settings files are and which are read: test_settingsfiles.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from producer.clictx import ENV_PREFIX, LazySettings
from producer.preflight.gate import quiet_windows_from
from tests.unit.settings_env import isolate_settings, user_settings_file, write_private
from worker.errors import ConfigError
from worker.settings import Settings, load_settings, split_quiet_windows

FIX = (
    "Fix it in the environment or the settings file (~/.config/colabq/settings.env, or the "
    "--env-file)."
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No setting of the developer's shell or settings file: each test sets what it reads."""
    isolate_settings(monkeypatch, tmp_path, also=("HF_ENDPOINT", "XDG_STATE_HOME"))


def settings_file(tmp_path: Path, text: str) -> Path:
    """The user's settings file (HOME is tmp_path/home), mode 0600."""
    return write_private(user_settings_file(tmp_path), text)


def config_error(monkeypatch: pytest.MonkeyPatch, var: str, value: str) -> str:
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    return str(caught.value)


TWO_TLS_QUERIES = "sentinel://a?ssl_cert_reqs=none;sentinel://b?ssl_cert_reqs=optional"
BAD = [
    ("COLABQ_REDIS_URL", "redis://127.0.0.1:abc/0", "port 'abc' is not a number"),
    ("COLABQ_REDIS_URL", "redis://127.0.0.1:0/0", "1-65535"),
    ("COLABQ_REDIS_URL", "redis://127.0.0.1:65536/0", "1-65535"),
    ("COLABQ_REDIS_URL", "redis://127.0.0.1:6379/x", "database 'x'"),
    ("COLABQ_REDIS_URL", "redis://127.0.0.1:6379/-1", "database '-1'"),
    ("COLABQ_REDIS_URL", "redis://127.0.0.1:6379/0?db=two", "database 'two'"),
    ("COLABQ_REDIS_URL", "unix:///run/redis.sock?db=x", "database 'x'"),
    ("COLABQ_REDIS_URL", "redis:///0", "names no host"),
    ("COLABQ_REDIS_URL", "http://127.0.0.1:6379", "must start with redis://"),
    ("COLABQ_REDIS_URL", "sentinel://a:1;redis://:pw@b:2", "part 2 of 2"),
    ("COLABQ_REDIS_URL", "sentinel://a:1/0;sentinel://b:2/1", "different databases (0 and 1)"),
    ("COLABQ_REDIS_URL", "sentinel://:x@a:1;sentinel://:y@b:2", "different logins"),
    ("COLABQ_REDIS_URL", "sentinel://a:99999", "1-65535"),
    ("COLABQ_REDIS_URL", "sentinel://a:1?db=2", "takes only ssl_cert_reqs and ssl_ca_certs"),
    ("COLABQ_REDIS_URL", "sentinel://a:1/0?ssl_cert_reqs=maybe", "'maybe' is not one of"),
    ("COLABQ_REDIS_URL", "sentinel://a:1/0?ssl_ca_certs=/no/ca.pem", "/no/ca.pem is not a file"),
    ("COLABQ_REDIS_URL", "sentinel://a:1/0?ssl_ca_certs=", "ssl_ca_certs is empty"),
    ("COLABQ_REDIS_URL", "sentinel://a?ssl_cert_reqs=none&ssl_cert_reqs=none", "twice"),
    ("COLABQ_REDIS_URL", TWO_TLS_QUERIES, "different ?ssl_... queries"),
    ("COLABQ_REDIS_URL", "sentinel://a/0#x", "no #fragment"),
    ("COLABQ_REDIS_SENTINEL_USERNAME", "two words", "one word"),
    ("COLABQ_REDIS_URL", "sentinel://a:1;", "part 2 of 2"),
    ("COLABQ_WORKER_GPUS", "T4,V100", "'V100' is not a GPU type"),
    ("COLABQ_WORKER_GPUS", '["T4",', "not a JSON list"),
    ("COLABQ_WORKER_GPUS", "[1, 2]", "expected GPU types"),
    ("COLABQ_WORKER_GPUS", " , ", "names no GPU type"),
    ("COLABQ_QUEUE_PREFIX", "../", "may hold only letters"),
    ("COLABQ_KEY_PREFIX", "a b", "may hold only letters"),
    ("COLABQ_KEY_PREFIX", "colabq/*", "may hold only letters"),
    ("COLABQ_KEY_PREFIX", "", "must not be empty"),
    ("COLABQ_POLL_INTERVAL_S", "nan", "finite number"),
    ("COLABQ_POLL_INTERVAL_S", "inf", "finite number"),
    ("COLABQ_LEASE_TTL_S", "-inf", "finite number"),
    ("COLABQ_RETENTION_S", "0", "greater than 0"),
    ("COLABQ_WATCHDOG_POLL_S", "-1", "greater than 0"),
    ("COLABQ_REDIS_RETRY_S", "abc", "valid number"),
    ("COLABQ_RELEASE_ATTEMPTS", "0", "greater than or equal to 1"),
    ("COLABQ_QUIET_WINDOWS", "late evening", "quiet window 'late evening'"),
    ("COLABQ_QUIET_WINDOWS", "22:00-07:00,25:00-26:00", "25:00 is not a time of day"),
    ("COLABQ_QUIET_WINDOWS", "Sat,Funday 00:00-01:00", "'funday' is not a weekday"),
    ("COLABQ_HF_ENDPOINT", "ftp://hub.example.org", "http:// or https://"),
    ("COLABQ_HF_ENDPOINT", "huggingface.co", "http:// or https://"),
    ("COLABQ_HF_ENDPOINT", "http://", "with a host"),
    ("COLABQ_HF_ENDPOINT", "http://127.0.0.1:port", "port is not a number"),
]


@pytest.mark.parametrize(("var", "value", "why"), BAD, ids=[f"{v}={x}" for v, x, _ in BAD])
def test_an_invalid_value_is_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str, why: str
) -> None:
    message = config_error(monkeypatch, var, value)
    assert message.startswith(f"Invalid setting {var}: ") and message.endswith(FIX), message
    assert why in message and "\n" not in message


@pytest.mark.parametrize("var", ["COLABQ_HF_TOKEN_FILE", "COLABQ_GIT_CREDENTIALS_FILE"])
def test_a_token_file_that_is_a_folder_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, var: str
) -> None:
    message = config_error(monkeypatch, var, str(tmp_path))
    assert message.startswith(f"Invalid setting {var}: ") and "is a folder" in message


def test_a_redis_password_never_reaches_the_message(monkeypatch: pytest.MonkeyPatch) -> None:
    message = config_error(monkeypatch, "COLABQ_REDIS_URL", "redis://:s3cret-pw@host:abc/0")
    assert "s3cret-pw" not in message and "COLABQ_REDIS_URL" in message


def test_a_sentinel_url_needs_the_masters_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLABQ_REDIS_URL", "sentinel://s1:26379;sentinel://s2:26379/0")
    message = config_error(monkeypatch, "COLABQ_REDIS_MASTER_NAME", " ")
    assert message.startswith("Invalid setting COLABQ_REDIS_MASTER_NAME: a sentinel:// ")
    assert "sentinel monitor NAME" in message and "\n" not in message
    monkeypatch.setenv("COLABQ_REDIS_MASTER_NAME", "mymaster")
    assert load_settings().redis_master_name == "mymaster"
    monkeypatch.setenv("COLABQ_REDIS_URL", "redis://h/0")  # not read with any other URL
    monkeypatch.setenv("COLABQ_REDIS_MASTER_NAME", "two words")
    assert load_settings().redis_url == "redis://h/0"


GOOD = [
    ("COLABQ_REDIS_URL", "redis://127.0.0.1:6379/0", "redis_url", "redis://127.0.0.1:6379/0"),
    ("COLABQ_REDIS_URL", "rediss://:pw@h:6380/2", "redis_url", "rediss://:pw@h:6380/2"),
    ("COLABQ_REDIS_URL", "redis://h", "redis_url", "redis://h"),
    ("COLABQ_REDIS_URL", "unix:///run/r.sock?db=3", "redis_url", "unix:///run/r.sock?db=3"),
    ("COLABQ_WORKER_GPUS", "t4, a100", "worker_gpus", ("T4", "A100")),
    ("COLABQ_WORKER_GPUS", '["T4", "h100"]', "worker_gpus", ("T4", "H100")),
    ("COLABQ_WORKER_GPUS", "T4,T4,L4,", "worker_gpus", ("T4", "L4")),
    ("COLABQ_QUEUE_PREFIX", "", "queue_prefix", ""),
    ("COLABQ_QUEUE_PREFIX", "colabq-demo-1a2b.", "queue_prefix", "colabq-demo-1a2b."),
    ("COLABQ_KEY_PREFIX", "team:colabq_1.x-y", "key_prefix", "team:colabq_1.x-y"),
    ("COLABQ_POLL_INTERVAL_S", "0.5", "poll_interval_s", 0.5),
    ("COLABQ_REDIS_RETRY_S", "0", "redis_retry_s", 0.0),
    ("COLABQ_HF_ENDPOINT", "http://127.0.0.1:8080", "hf_endpoint", "http://127.0.0.1:8080"),
    ("COLABQ_HF_ENDPOINT", "https://hub.example.org/m", "hf_endpoint", "https://hub.example.org/m"),
    ("COLABQ_QUIET_WINDOWS", '["22:00-07:00"]', "quiet_windows", ("22:00-07:00",)),
]


@pytest.mark.parametrize(
    ("var", "value", "field", "expected"), GOOD, ids=[f"{v}={x}" for v, x, _, _ in GOOD]
)
def test_a_valid_value_is_read_as_written(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str, field: str, expected: object
) -> None:
    monkeypatch.setenv(var, value)
    assert getattr(load_settings(), field) == expected


def test_a_complex_value_a_source_cannot_decode_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # pydantic-settings decodes a list field's value as JSON before any validator runs, and
    # raises SettingsError (not ValidationError) when it is not JSON.
    import worker.settings

    class WithList(Settings):
        extra_hosts: list[str] = []

    monkeypatch.setattr(worker.settings, "Settings", WithList)
    message = config_error(monkeypatch, "COLABQ_EXTRA_HOSTS", "a,b")
    assert message.startswith("Invalid setting COLABQ_EXTRA_HOSTS: cannot be read")
    assert message.endswith(FIX) and "\n" not in message


def test_an_invalid_value_in_the_settings_file_is_named_too(tmp_path: Path) -> None:
    settings_file(tmp_path, "COLABQ_QUEUE_PREFIX=../\n")
    with pytest.raises(ConfigError, match=r"^Invalid setting COLABQ_QUEUE_PREFIX: "):
        load_settings()


# --- the state dir ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("xdg", "expected"),
    [
        ("{tmp}/xdg-state", "{tmp}/xdg-state/colabq"),
        (None, "{tmp}/home/.local/state/colabq"),
        ("", "{tmp}/home/.local/state/colabq"),
        ("relative/state", "{tmp}/home/.local/state/colabq"),  # the XDG spec: ignore it
    ],
)
def test_the_state_dir_defaults_to_xdg_state_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, xdg: str | None, expected: str
) -> None:
    if xdg is not None:
        monkeypatch.setenv("XDG_STATE_HOME", xdg.format(tmp=tmp_path))
    assert load_settings().state_dir == Path(expected.format(tmp=tmp_path))


def test_colabq_state_dir_wins_over_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("COLABQ_STATE_DIR", str(tmp_path / "mine"))
    assert load_settings().state_dir == tmp_path / "mine"


def test_ensure_state_dir_creates_a_missing_folder(tmp_path: Path) -> None:
    state = tmp_path / "a" / "b" / "state"
    assert load_settings(state_dir=state).ensure_state_dir() == state
    assert state.is_dir() and list(state.iterdir()) == []  # the write probe is gone


@pytest.mark.parametrize(
    ("where", "why"),
    [
        ("file", "is a file, not a folder"),
        ("file/sub", "not a writable folder"),
        ("/proc", "not a writable folder"),  # a folder no one may write, not even root
    ],
)
def test_ensure_state_dir_refuses_what_is_not_a_writable_folder(
    tmp_path: Path, where: str, why: str
) -> None:
    (tmp_path / "file").write_text("not a folder")
    settings = load_settings(state_dir=tmp_path / where)
    with pytest.raises(ConfigError) as caught:
        settings.ensure_state_dir()
    message = str(caught.value)
    assert message.startswith("Invalid setting COLABQ_STATE_DIR: ") and why in message
    assert message.endswith(FIX)


# --- quiet windows ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "windows"),
    [
        ("", ()),
        ("22:00-07:00", ("22:00-07:00",)),
        ("22:00-07:00,Sat 00:00-24:00", ("22:00-07:00", "Sat 00:00-24:00")),
        ("Sat,Sun 00:00-24:00, 12:00-13:00", ("Sat,Sun 00:00-24:00", "12:00-13:00")),
        ("Mon,Wed,Fri 09:00-10:00", ("Mon,Wed,Fri 09:00-10:00",)),
    ],
)
def test_quiet_windows_split_on_commas_but_keep_day_lists(
    monkeypatch: pytest.MonkeyPatch, raw: str, windows: tuple[str, ...]
) -> None:
    assert split_quiet_windows(raw) == windows
    monkeypatch.setenv("COLABQ_QUIET_WINDOWS", raw)
    assert load_settings().quiet_windows == windows


def test_quiet_windows_come_from_the_settings_file(tmp_path: Path) -> None:
    settings_file(tmp_path, 'COLABQ_QUIET_WINDOWS="Sat,Sun 00:00-24:00,22:00-07:00"\n')
    assert load_settings().quiet_windows == ("Sat,Sun 00:00-24:00", "22:00-07:00")
    assert quiet_windows_from(LazySettings()) == ("Sat,Sun 00:00-24:00", "22:00-07:00")


def test_the_environment_wins_over_the_settings_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings_file(tmp_path, "COLABQ_QUIET_WINDOWS=22:00-07:00\n")
    monkeypatch.setenv("COLABQ_QUIET_WINDOWS", "12:00-13:00")
    assert load_settings().quiet_windows == ("12:00-13:00",)


# --- the lazy settings of `colabq preflight` ----------------------------------------------------


def test_clictx_reads_the_sources_settings_reads() -> None:
    assert Settings.model_config["env_prefix"] == ENV_PREFIX
    assert Settings.model_config["env_file"] is None  # the settings files come from load_settings


@pytest.mark.parametrize("source", ["environment", "lower-case environment", "settings file"])
def test_quiet_windows_named_anywhere_build_the_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, source: str
) -> None:
    # An invalid unrelated setting shows whether the settings were built.
    monkeypatch.setenv("COLABQ_POLL_INTERVAL_S", "nan")
    if source == "settings file":
        settings_file(tmp_path, "COLABQ_QUIET_WINDOWS=22:00-07:00\n")
    else:
        name = "COLABQ_QUIET_WINDOWS" if source == "environment" else "colabq_quiet_windows"
        monkeypatch.setenv(name, "22:00-07:00")
    with pytest.raises(ConfigError, match="COLABQ_POLL_INTERVAL_S"):
        quiet_windows_from(LazySettings())


def test_quiet_windows_named_nowhere_do_not_build_the_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("COLABQ_POLL_INTERVAL_S", "nan")
    settings_file(tmp_path, "COLABQ_KEY_PREFIX=team\n")
    lazy = LazySettings()
    assert quiet_windows_from(lazy) == ()
    with pytest.raises(ConfigError, match="COLABQ_POLL_INTERVAL_S"):
        lazy()


def test_lazy_settings_are_built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    lazy = LazySettings()
    first = lazy()
    monkeypatch.setenv("COLABQ_KEY_PREFIX", "changed")
    assert lazy() is first and first.key_prefix == "colabq"


# --- the Hub endpoint ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("colabq", "hf", "expected"),
    [
        ("http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:1"),
        (None, "http://127.0.0.1:2", "http://127.0.0.1:2"),
        (None, None, None),  # huggingface.co
        (None, "", None),
    ],
)
def test_the_hub_endpoint_is_colabq_hf_endpoint_then_hf_endpoint(
    monkeypatch: pytest.MonkeyPatch, colabq: str | None, hf: str | None, expected: str | None
) -> None:
    if colabq is not None:
        monkeypatch.setenv("COLABQ_HF_ENDPOINT", colabq)
    if hf is not None:
        monkeypatch.setenv("HF_ENDPOINT", hf)
    assert load_settings().hub_endpoint() == expected


def test_hf_endpoint_in_the_settings_file_is_not_read(tmp_path: Path) -> None:
    # huggingface_hub reads HF_ENDPOINT from the process environment only; so does colabq.
    settings_file(tmp_path, "HF_ENDPOINT=http://127.0.0.1:2\n")
    assert load_settings().hub_endpoint() is None
    settings_file(tmp_path, "COLABQ_HF_ENDPOINT=http://127.0.0.1:3\n")
    assert load_settings().hub_endpoint() == "http://127.0.0.1:3"


def test_a_bad_hf_endpoint_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "hub.internal")
    with pytest.raises(ConfigError) as caught:
        load_settings().hub_endpoint()
    assert str(caught.value).startswith("Invalid setting HF_ENDPOINT: ")
    assert "COLABQ_HF_ENDPOINT" in str(caught.value)


def test_the_default_gpus_are_every_gpu_type() -> None:
    from worker.settings import ALL_GPUS
    from worker.spec import Gpu

    assert ALL_GPUS == tuple(g.value for g in Gpu) == load_settings().worker_gpus
