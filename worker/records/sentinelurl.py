"""Reading a Sentinel `COLABQ_REDIS_URL` (kombu's form) and the sentinels' own login, and saying
them to kombu, Celery and Flower. Builds no client (`worker.records.redisconn` does).

The URL: one `sentinel://[USER:PASSWORD@]HOST[:PORT][/DB]` part per sentinel, joined by `;`
(port 26379 when none is written). Its user, password and database are the master's: kombu
reads them from the first part, and again from each part it switches to, so colabq takes them
from whichever parts write them (they must agree) and gives kombu every part with them.

The sentinels' own login (their `requirepass`, or an ACL user of theirs) is not in the URL: it
is `COLABQ_REDIS_SENTINEL_USERNAME`/`_PASSWORD` (`SentinelLogin`), given to redis-py's and
kombu's `sentinel_kwargs` only, so neither password ever reaches the other side; and there as a
credential provider, not a password a Celery worker would send in its `inspect stats` reply.

TLS: the URL takes the query a `rediss://` URL takes for it, `?ssl_cert_reqs=required&
ssl_ca_certs=/path/ca.pem` (on one part, or the same on each); written, every connection to the
sentinels and to the master speaks TLS, the certificate checked against that CA (the system's
when none is named). kombu gets the master's TLS as Celery's `broker_use_ssl`, the sentinels'
in `sentinel_kwargs`.

Standard library only: the settings' validators and the observers import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

SENTINEL_SCHEME = "sentinel"
SENTINEL_PORT = 26379
# A sentinel answers at once or not at all: asking one that hangs must not hold up the next.
SENTINEL_TIMEOUT_S = 5.0
# What a sentinel URL's query may say (TLS only), and the values each takes.
CERT_REQS = ("required", "optional", "none")
TLS_KEYS = ("ssl_cert_reqs", "ssl_ca_certs")


def is_sentinel(url: str) -> bool:
    return url.lower().startswith(f"{SENTINEL_SCHEME}://")


@dataclass(frozen=True)
class SentinelLogin:
    """How colabq logs in to the sentinels themselves; nothing for sentinels without a password.

    It is the sentinels' clients' redis-py credential provider (`kwargs()`), never a plain
    `password` argument: kombu's transport options hold it, and a Celery worker sends those in
    its `inspect stats` reply (to Flower), where kombu's JSON shows it as `__json__` says."""

    username: str | None = None
    password: str | None = field(default=None, repr=False)

    def kwargs(self) -> dict[str, Any]:
        """redis-py's connection arguments for this login."""
        return {"credential_provider": self} if self.password is not None else {}

    def get_credentials(self) -> tuple[str, ...]:
        """AUTH's arguments (redis-py's CredentialProvider)."""
        assert self.password is not None, "kwargs() offers no login without a password"
        return (self.username, self.password) if self.username else (self.password,)

    async def get_credentials_async(self) -> tuple[str, ...]:
        return self.get_credentials()

    def __json__(self) -> str:
        return "<the sentinels' login, not shown>"


def sentinel_username_problem(username: str | None) -> str | None:
    """Why `username` cannot be the sentinels' ACL user, or None."""
    if username is not None and (not username.isprintable() or any(c.isspace() for c in username)):
        return "must be one word (no spaces): the sentinels' ACL user"
    return None


def sentinel_password_problem(username: str | None, password: str | None) -> str | None:
    """Why the sentinels' password cannot be `password` beside `username`, or None (it is
    never echoed)."""
    if username is not None and password is None:
        return (
            "is unset, but COLABQ_REDIS_SENTINEL_USERNAME is set: the sentinels' ACL user logs "
            "in with this password"
        )
    return None


@dataclass(frozen=True)
class SentinelAddress:
    """A `sentinel://` URL read: the sentinels, how to log in to the master they name, and TLS
    (`ssl_*` arguments of redis-py; none: plain TCP)."""

    sentinels: tuple[tuple[str, int], ...]
    db: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: tuple[tuple[str, str], ...] = ()

    def master_kwargs(self) -> dict[str, Any]:
        """The master's database and login, as redis-py's connection arguments."""
        found: dict[str, Any] = {"db": self.db}
        if self.username is not None:
            found["username"] = self.username
        if self.password is not None:
            found["password"] = self.password
        return found

    def tls_kwargs(self) -> dict[str, str]:
        """redis-py's TLS arguments (`ssl_cert_reqs` always said), or {} without TLS."""
        return {"ssl_cert_reqs": "required", **dict(self.tls)} if self.tls else {}


def parse_sentinel(url: str) -> SentinelAddress:
    """The sentinels of a `sentinel://` URL; ValueError(why) when it is not one colabq uses."""
    hosts: list[tuple[str, int]] = []
    dbs: set[int] = set()
    logins: set[tuple[str | None, str | None]] = set()
    queries: set[tuple[tuple[str, str], ...]] = set()
    texts = url.split(";")
    for n, text in enumerate(texts, 1):
        if not is_sentinel(text):  # (the part is not echoed: it may hold a password)
            raise ValueError(f"part {n} of {len(texts)} (between ';') is not sentinel://HOST:PORT")
        parts = urlsplit(text)
        if parts.fragment:
            raise ValueError("a sentinel:// part takes no #fragment")
        if parts.query:
            queries.add(_tls_query(parts.query))
        hosts.append((_host(parts.hostname), _port(parts)))
        if db_text := parts.path.strip("/"):
            if not db_text.isdigit():
                raise ValueError(f"the database {db_text!r} is not a non-negative integer")
            dbs.add(int(db_text))
        if parts.username or parts.password is not None:
            user = unquote(parts.username) if parts.username else None
            logins.add((user, None if parts.password is None else unquote(parts.password)))
    if len(dbs) > 1:
        listed = " and ".join(str(d) for d in sorted(dbs))
        raise ValueError(f"its parts name different databases ({listed}): name one")
    if len(logins) > 1:
        raise ValueError("its parts hold different logins: write the same USER:PASSWORD@ on each")
    if len(queries) > 1:
        raise ValueError("its parts hold different ?ssl_... queries: write it once, on the last")
    (username, password) = next(iter(logins), (None, None))
    tls = next(iter(queries), ())
    return SentinelAddress(tuple(hosts), next(iter(dbs), 0), username, password, tls)


def _host(hostname: str | None) -> str:
    if not hostname:
        raise ValueError("a sentinel:// part names no host (sentinel://HOST:PORT)")
    return hostname


def _port(parts: Any) -> int:
    try:
        port: int | None = parts.port
    except ValueError:
        port_text = parts.netloc.rpartition(":")[2]
        raise ValueError(f"the port {port_text!r} is not a number in 1-65535") from None
    if port == 0:
        raise ValueError("the port must be in 1-65535")
    return port or SENTINEL_PORT


def _tls_query(query: str) -> tuple[tuple[str, str], ...]:
    """A part's `?ssl_cert_reqs=...&ssl_ca_certs=...`, checked: TLS is all a query may say."""
    try:
        found = parse_qs(query, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise ValueError("its ?query is not KEY=VALUE&... (?ssl_ca_certs=/path/ca.pem)") from None
    for key, values in found.items():
        if key not in TLS_KEYS:
            raise ValueError(
                f"its ?query names {key!r}: a sentinel:// URL takes only {' and '.join(TLS_KEYS)} "
                "(TLS to the sentinels and the master)"
            )
        if len(values) > 1:
            raise ValueError(f"its ?query names {key} twice")
    reqs = found.get("ssl_cert_reqs", ["required"])[0]
    if reqs not in CERT_REQS:
        raise ValueError(f"its ssl_cert_reqs {reqs!r} is not one of {', '.join(CERT_REQS)}")
    if ca := found.get("ssl_ca_certs", [""])[0]:
        if not Path(ca).is_file():
            raise ValueError(f"its ssl_ca_certs {ca} is not a file: name the CA's PEM file")
    elif "ssl_ca_certs" in found:
        raise ValueError("its ssl_ca_certs is empty: name the CA's PEM file")
    return tuple(sorted((key, values[0]) for key, values in found.items()))


def sentinel_url_problem(url: str) -> str | None:
    """Why `url` is not a `sentinel://` URL colabq can use, or None."""
    try:
        parse_sentinel(url)
    except ValueError as exc:
        return str(exc)
    return None


def master_name_problem(url: str, name: str | None) -> str | None:
    """Why `name` cannot be the master's name for `url`, or None (it is read only with
    sentinel:// URLs)."""
    if not is_sentinel(url):
        return None
    if not name:
        return (
            "a sentinel:// COLABQ_REDIS_URL needs the name of the master its sentinels monitor "
            "(NAME in their `sentinel monitor NAME HOST PORT QUORUM`)"
        )
    if not name.isprintable() or any(c.isspace() for c in name):
        return "must be one word (no spaces): the NAME of `sentinel monitor NAME ...`"
    return None


def netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def sentinel_kwargs(
    timeout_s: float, login: SentinelLogin | None, tls: dict[str, str]
) -> dict[str, Any]:
    """redis-py's connection arguments for the sentinels: their own login (a credential
    provider) and TLS, never the master's password. No retry per sentinel: redis-py asks the
    next one, and the caller's retry asks them all again (retry None is "no retries" to
    redis-py, and a plain value in Celery's config)."""
    found: dict[str, Any] = {
        "socket_connect_timeout": timeout_s, "socket_timeout": timeout_s, "retry": None,
    }  # fmt: skip
    if tls:
        found.update(ssl=True, **tls)
    return {**found, **(login or SentinelLogin()).kwargs()}


# --- kombu, Celery and Flower ---------------------------------------------------------------


def broker_url(url: str) -> str:
    """`url` as kombu reads it: a sentinel URL with its database and the master's login on
    every part (kombu takes them from the part it is on), without the TLS query (kombu's is
    `broker_use_ssl`); any other URL unchanged."""
    if not is_sentinel(url):
        return url
    addr = parse_sentinel(url)
    login = ""
    if addr.username is not None or addr.password is not None:
        login = quote(addr.username or "", safe="")
        if addr.password is not None:
            login += ":" + quote(addr.password, safe="")
        login += "@"
    return ";".join(
        f"{SENTINEL_SCHEME}://{login}{netloc(host, port)}/{addr.db}"
        for host, port in addr.sentinels
    )


def broker_transport_options(
    master_name: str | None, url: str, login: SentinelLogin | None = None
) -> dict[str, Any]:
    """kombu's options for the Sentinel transport (none for any other URL): the master's name,
    and how to reach the sentinels (their login and TLS). Flower's broker view reads them too."""
    if not is_sentinel(url):
        return {}
    tls = parse_sentinel(url).tls_kwargs()
    return {
        "master_name": master_name,
        "sentinel_kwargs": sentinel_kwargs(SENTINEL_TIMEOUT_S, login, tls),
    }


def broker_use_ssl(url: str) -> dict[str, str] | None:
    """Celery's `broker_use_ssl` for a sentinel URL with TLS: the master's (kombu's Sentinel
    transport and Flower's broker view read it); None otherwise (a `rediss://` URL says its
    own)."""
    if not is_sentinel(url):
        return None
    return parse_sentinel(url).tls_kwargs() or None
