"""`COLABQ_REDIS_URL` in Sentinel form is read as kombu reads it, but the same by every client:
the sentinels, and the master's database and login from whichever parts write them, given to
kombu on every part (kombu reads them from the part it is on, and again from each part it
switches to). The sentinels' own login goes to the sentinels only, the master's to the master
only, and a TLS query to both. A password never reaches a message, nor what Celery shows; a
refused login is one line that says whose."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from celery.utils.saferepr import saferepr as safe_repr
from celery.utils.serialization import jsonify
from celery.worker.consumer.connection import Connection as ConsumerConnection
from kombu import Connection
from kombu.utils import json as kombu_json
from redis.connection import SSLConnection
from redis.sentinel import SentinelManagedSSLConnection

from producer import exitcodes
from worker.celery_app import build_app, celery_config
from worker.errors import BrokerUnavailable, RedisLoginRefused, redacted_url
from worker.records.redisconn import client
from worker.records.sentinelurl import (
    SentinelAddress,
    SentinelLogin,
    broker_transport_options,
    broker_url,
    broker_use_ssl,
    parse_sentinel,
)
from worker.settings import load_settings

TWO = (("h1", 1), ("h2", 2))
PARSED = [
    ("sentinel://h1", SentinelAddress((("h1", 26379),))),
    ("sentinel://h1:1;sentinel://h2:2/3", SentinelAddress(TWO, 3)),
    ("sentinel://:p%40ss@h1:1/2;sentinel://h2:2", SentinelAddress(TWO, 2, None, "p@ss")),
    ("sentinel://u:pw@h1:1;sentinel://u:pw@[::1]:2/0",
     SentinelAddress((("h1", 1), ("::1", 2)), 0, "u", "pw")),
    ("SENTINEL://h1:1/4;sentinel://h2:2/4", SentinelAddress(TWO, 4)),
]  # fmt: skip


@pytest.mark.parametrize(("url", "want"), PARSED)
def test_a_sentinel_url_is_read_once_for_every_client(url: str, want: SentinelAddress) -> None:
    assert parse_sentinel(url) == want
    # kombu, switched to any of the parts colabq gives it, reads the same master's address.
    conn = Connection(broker_url(url), transport_options=broker_transport_options("m", url))
    for part in conn.alt:
        conn.switch(part)
        assert (conn.userid, conn.password) == (want.username, want.password)
        assert int(conn.virtual_host) == want.db
        assert (conn.hostname, conn.port) in want.sentinels
    assert conn.transport_options["master_name"] == "m"


def test_a_plain_url_is_left_as_it_is() -> None:
    assert broker_url("redis://:pw@h:1/2") == "redis://:pw@h:1/2"
    assert broker_transport_options("ignored", "redis://h") == {}


def test_a_sentinel_client_needs_the_masters_name() -> None:
    with pytest.raises(ValueError, match="needs the name of the master"):
        client("sentinel://h1:1", None)


def test_no_part_of_a_sentinel_url_prints_its_password() -> None:
    url = "sentinel://h1:1;sentinel://:s3cret@h2:2/0;sentinel://u:s3cret@[::1]:3"
    shown = redacted_url(url)
    assert "s3cret" not in shown and shown.count("***") == 2 and "[::1]:3" in shown
    assert "s3cret" not in str(BrokerUnavailable(url, "ConnectionError"))
    with pytest.raises(ValueError) as caught:
        parse_sentinel("sentinel://:s3cret@h1:1;redis://:s3cret@h2")
    assert "s3cret" not in str(caught.value)


# --- the sentinels' own login, and TLS ------------------------------------------------------

MASTER_PW, SENTINEL_PW = "m4ster-pw", "s3ntinel-pw"


def tls_url(ca: Path) -> str:
    """Kombu's form with the master's login on the first part and TLS written once, last."""
    query = f"?ssl_cert_reqs=required&ssl_ca_certs={ca}"
    return f"sentinel://colabq:{MASTER_PW}@h1:1;sentinel://h2:2/3{query}"


@pytest.fixture
def ca(tmp_path: Path) -> Path:
    path = tmp_path / "ca.pem"
    path.write_text("(a CA; the parser checks only that it is a file)\n")
    return path


def test_a_tls_query_is_read_for_the_sentinels_and_the_master(ca: Path) -> None:
    addr = parse_sentinel(tls_url(ca))
    tls = (("ssl_ca_certs", str(ca)), ("ssl_cert_reqs", "required"))
    assert addr == SentinelAddress(TWO, 3, "colabq", MASTER_PW, tls)
    assert addr.tls_kwargs() == {"ssl_cert_reqs": "required", "ssl_ca_certs": str(ca)}
    only_ca = parse_sentinel(f"sentinel://h1:1?ssl_ca_certs={ca}")
    assert only_ca.tls_kwargs() == {"ssl_cert_reqs": "required", "ssl_ca_certs": str(ca)}
    assert parse_sentinel("sentinel://h1:1").tls_kwargs() == {}  # no query: plain TCP
    assert MASTER_PW not in repr(addr)


def test_each_side_gets_only_its_own_login_and_both_tls(ca: Path) -> None:
    url = tls_url(ca)
    login = SentinelLogin("watcher", SENTINEL_PW)
    master: Any = client(url, "m", login)
    pool = master.connection_pool
    assert issubclass(pool.connection_class, SentinelManagedSSLConnection)
    assert pool.connection_kwargs["password"] == MASTER_PW
    assert pool.connection_kwargs["username"] == "colabq"
    assert pool.connection_kwargs["ssl_ca_certs"] == str(ca)
    for sentinel in pool.sentinel_manager.sentinels:
        kwargs = sentinel.connection_pool.connection_kwargs
        assert kwargs["credential_provider"].get_credentials() == ("watcher", SENTINEL_PW)
        assert kwargs["password"] is None  # (redis-py's default)
        assert issubclass(sentinel.connection_pool.connection_class, SSLConnection)
        assert kwargs["ssl_ca_certs"] == str(ca)
    # kombu: the master's login on every part of its URL, the sentinels' only in the
    # transport options, and TLS for each (broker_use_ssl is the master's).
    kombu_url = broker_url(url)
    assert SENTINEL_PW not in kombu_url and "ssl" not in kombu_url
    assert kombu_url.count(f"colabq:{MASTER_PW}@") == 2
    options = broker_transport_options("m", url, login)["sentinel_kwargs"]
    assert options["credential_provider"].get_credentials() == ("watcher", SENTINEL_PW)
    assert options["ssl"] is True and options["ssl_ca_certs"] == str(ca)
    assert MASTER_PW not in str(options) and SENTINEL_PW not in str(options)
    assert broker_use_ssl(url) == {"ssl_cert_reqs": "required", "ssl_ca_certs": str(ca)}
    assert broker_use_ssl("sentinel://h1:1") is None and broker_use_ssl("rediss://h") is None


def test_neither_password_is_in_what_celery_or_the_settings_show(ca: Path) -> None:
    """A worker's `inspect conf` and `inspect stats` replies (Celery messages, which Flower's
    worker page shows) hold its `conf.table()` and its broker connection's info with the
    transport options: the sentinels' login is there, as a credential provider, but no
    password is."""
    settings = load_settings(
        redis_url=tls_url(ca), redis_master_name="m", redis_sentinel_username="watcher",
        redis_sentinel_password=SENTINEL_PW,
    )  # fmt: skip
    config = celery_config(settings)
    given = config["broker_transport_options"]["sentinel_kwargs"]["credential_provider"]
    assert given.get_credentials() == ("watcher", SENTINEL_PW)
    assert config["broker_use_ssl"]["ssl_ca_certs"] == str(ca)
    app = build_app(settings)
    step, consumer = ConsumerConnection(SimpleNamespace()), SimpleNamespace()
    consumer.connection = app.connection_for_read()
    stats = kombu_json.dumps(step.info(consumer))  # the broker part of `inspect stats`
    conf = json.dumps(jsonify(app.conf.table(), unknown_type_filter=safe_repr))
    for shown in (stats, conf):
        assert "sentinel_kwargs" in shown and str(ca) in shown, shown  # what is there, is shown
        assert SENTINEL_PW not in shown and MASTER_PW not in shown, shown
    assert "the sentinels' login, not shown" in stats
    assert SENTINEL_PW not in repr(settings) and SENTINEL_PW not in str(settings.model_dump())


REFUSED = [
    (RedisLoginRefused("sentinel://:pw@h1:1;sentinel://h2:2/0", "m", sentinels=True),
     "The sentinels of sentinel://:***@h1:1;sentinel://h2:2/0 refused colabq's login. Set "
     "COLABQ_REDIS_SENTINEL_PASSWORD (and COLABQ_REDIS_SENTINEL_USERNAME for an ACL user) to "
     "the sentinels' own requirepass, not the master's."),
    (RedisLoginRefused("sentinel://:pw@h1:1/0", "m"),
     "The Redis master 'm' (named by the sentinels of sentinel://:***@h1:1/0) refused the login "
     "of COLABQ_REDIS_URL. Write the master's USER:PASSWORD@ (its requirepass, or an ACL user's) "
     "in COLABQ_REDIS_URL, not the sentinels'."),
    (RedisLoginRefused("redis://u:pw@h:1/0", None),
     "Redis at redis://u:***@h:1/0 refused the login of COLABQ_REDIS_URL. Fix its "
     "USER:PASSWORD@ (the requirepass, or an ACL user's)."),
]  # fmt: skip


@pytest.mark.parametrize(("error", "line"), REFUSED)
def test_a_refused_login_is_one_line_naming_whose_and_what_to_set(
    error: RedisLoginRefused, line: str
) -> None:
    assert error.advice() == line
    assert isinstance(error, BrokerUnavailable)  # exit 3, as Redis unreachable
    assert exitcodes.for_error(error) == exitcodes.REDIS_UNREACHABLE
