"""`COLABQ_REDIS_URL` in Sentinel form is read as kombu reads it, but the same by every client:
the sentinels, and the master's database and login from whichever parts write them, given to
kombu on every part (kombu reads them from the part it is on, and again from each part it
switches to). A password never reaches a message."""

from __future__ import annotations

import pytest
from kombu import Connection

from worker.errors import BrokerUnavailable, redacted_url
from worker.records.redisconn import (
    SentinelAddress,
    broker_transport_options,
    broker_url,
    client,
    parse_sentinel,
)

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
