"""Flower never runs open: the login it is given, checked wherever Flower is started.

Flower serves every page to anyone unless it has HTTP basic auth or a complete OAuth setup
(`auth` empty means no OAuth check at all, whatever `auth_provider` says). colabq's login is
basic auth from a file (`COLABQ_FLOWER_AUTH_FILE`, mode 0600, one `user:password` per line), or
Flower's own OAuth variables, all of them: `FLOWER_AUTH_PROVIDER`, `FLOWER_AUTH` (the allowed
emails), `FLOWER_OAUTH2_KEY`, `FLOWER_OAUTH2_SECRET`, `FLOWER_OAUTH2_REDIRECT_URI` (Okta also
`FLOWER_OAUTH2_OKTA_BASE_URL`). A password is never on a command line (`--basic-auth=`,
`--oauth2-secret=`) nor in `FLOWER_BASIC_AUTH`.

Two places check: `colabq flower` before it starts Flower (`check_login(login_from_env())`,
one line through the CLI), and `refuse_open_flower` inside Flower's own process. `connect_guard`
(called by `worker.celery_app` and by the configuration file, `worker/flowerconfig.py`) hangs it
on Celery's `import_modules` signal, which Flower's app sends while it is built, once every
option (environment, command line, `--conf` file) is final and before it listens. However
Flower was started (`colabq flower`, `celery flower` with or without `--conf`, `python -m
flower`), it exits with one line unless its own final options hold a login.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from worker.errors import UserInputError

AUTH_FILE_VAR = "COLABQ_FLOWER_AUTH_FILE"
OAUTH_VARS = (
    "FLOWER_AUTH_PROVIDER",
    "FLOWER_AUTH",
    "FLOWER_OAUTH2_KEY",
    "FLOWER_OAUTH2_SECRET",
    "FLOWER_OAUTH2_REDIRECT_URI",
)
# Flower's options that carry a password: never on a command line (any user can read it).
SECRET_OPTIONS = ("basic_auth", "oauth2_secret")
HOW = (
    f"set {AUTH_FILE_VAR} to a 0600 file of `user:password` lines (or all of Flower's OAuth "
    f"variables: {', '.join(OAUTH_VARS)}) and start it with `colabq flower`"
)


class FlowerLoginError(UserInputError):
    """Flower would run without a login, or with a password where others can read it."""


@dataclass(frozen=True)
class Login:
    """What Flower is given to let a person in: basic-auth lines and its OAuth options."""

    basic_auth: tuple[str, ...] = ()
    auth: str = ""  # the allowed emails (Flower's `--auth`): empty means no OAuth check
    provider: str = ""
    key: str = ""
    secret: str = ""
    redirect_uri: str = ""


def auth_file_lines(env: Mapping[str, str]) -> list[str]:
    """The `user:password` lines of `COLABQ_FLOWER_AUTH_FILE` ([] when it is not set)."""
    path = env.get(AUTH_FILE_VAR, "")
    if not path:
        return []
    p = Path(path)
    try:
        mode = stat.S_IMODE(p.stat().st_mode)
        lines = [ln.strip() for ln in p.read_text().splitlines() if ln.strip()]
    except OSError as exc:
        raise FlowerLoginError(f"cannot read {AUTH_FILE_VAR} {path}: {exc.strerror}") from None
    if mode & 0o077:
        raise FlowerLoginError(
            f"{AUTH_FILE_VAR} {path} has mode {mode:04o}: run `chmod 600 {path}`"
        )
    if not lines or not all(_is_user_password(ln) for ln in lines):
        raise FlowerLoginError(
            f"{AUTH_FILE_VAR} {path} must hold `user:password` lines (neither part empty)"
        )
    return lines


def _is_user_password(line: str) -> bool:
    user, sep, password = line.partition(":")
    return bool(sep and user and password)


def login_from_env(env: Mapping[str, str] | None = None) -> Login:
    """The login a Flower started by `colabq flower` will have (it reads the same variables)."""
    env = os.environ if env is None else env
    return Login(
        basic_auth=tuple(auth_file_lines(env)),
        auth=env.get("FLOWER_AUTH", ""),
        provider=env.get("FLOWER_AUTH_PROVIDER", ""),
        key=env.get("FLOWER_OAUTH2_KEY", ""),
        secret=env.get("FLOWER_OAUTH2_SECRET", ""),
        redirect_uri=env.get("FLOWER_OAUTH2_REDIRECT_URI", ""),
    )


def check_login(
    login: Login, argv: Sequence[str] = (), env: Mapping[str, str] | None = None
) -> None:
    """Raise `FlowerLoginError` unless `login` lets nobody in without credentials and no
    password is on `argv` or in `FLOWER_BASIC_AUTH`."""
    env = os.environ if env is None else env
    on_argv = secret_options_on(argv)
    if on_argv:
        raise FlowerLoginError(
            f"{on_argv[0]} is on the command line, where any user of the host can read it: "
            f"put the login in a 0600 file named by {AUTH_FILE_VAR} instead"
        )
    if env.get("FLOWER_BASIC_AUTH"):
        raise FlowerLoginError(
            f"FLOWER_BASIC_AUTH is set: unset it and put the `user:password` lines in a 0600 "
            f"file named by {AUTH_FILE_VAR}"
        )
    if (env.get("FLOWER_UNAUTHENTICATED_API") or "").lower() not in ("", "0", "false", "no", "off"):
        raise FlowerLoginError(
            "FLOWER_UNAUTHENTICATED_API is set: unset it (Flower's API needs a login)"
        )
    if login.auth or login.provider:
        _check_oauth(login, env)
    elif not login.basic_auth:
        raise FlowerLoginError(f"Flower has no login and shows every job: {HOW}")
    if not all(_is_user_password(line) for line in login.basic_auth):
        raise FlowerLoginError(f"a basic-auth entry is not `user:password`: {HOW}")


def _check_oauth(login: Login, env: Mapping[str, str]) -> None:
    """A half-set OAuth is refused: without `auth` Flower checks nobody's login at all, and
    without its provider, key, secret or redirect URI nobody can log in."""
    if not login.auth:
        raise FlowerLoginError(
            "FLOWER_AUTH_PROVIDER is set without FLOWER_AUTH (the allowed emails, e.g. "
            "`.*@example.com`): Flower would serve every page to anyone; set FLOWER_AUTH, or "
            f"unset FLOWER_AUTH_PROVIDER and use {AUTH_FILE_VAR}"
        )
    missing = [
        name
        for name, value in (
            ("FLOWER_AUTH_PROVIDER", login.provider),
            ("FLOWER_OAUTH2_KEY", login.key),
            ("FLOWER_OAUTH2_SECRET", login.secret),
            ("FLOWER_OAUTH2_REDIRECT_URI", login.redirect_uri),
        )
        if not value
    ]
    if login.provider.endswith("OktaLoginHandler") and not env.get("FLOWER_OAUTH2_OKTA_BASE_URL"):
        missing.append("FLOWER_OAUTH2_OKTA_BASE_URL")
    if missing:
        raise FlowerLoginError(f"Flower's OAuth is half set: set {', '.join(missing)} as well")
    from flower.utils.authentication import validate_auth_option

    if not validate_auth_option(login.auth):
        raise FlowerLoginError(
            f"FLOWER_AUTH {login.auth!r} is not an email, `a@x|b@y` or `.*@example.com`"
        )
    if not login.redirect_uri.startswith(("https://", "http://")):
        raise FlowerLoginError(
            "FLOWER_OAUTH2_REDIRECT_URI must be an http(s) URL of Flower's /login"
        )
    from celery.utils.imports import symbol_by_name

    try:
        symbol_by_name(login.provider)
    except (ImportError, AttributeError, ValueError):
        raise FlowerLoginError(
            f"FLOWER_AUTH_PROVIDER {login.provider!r} cannot be loaded: name one of "
            "flower.views.auth.GoogleAuth2LoginHandler, GithubLoginHandler, GitLabLoginHandler "
            "or OktaLoginHandler"
        ) from None


def secret_options_on(argv: Sequence[str]) -> list[str]:
    """The options of `argv` that carry a password, as Flower's command line reads them
    (`--basic-auth=`, `--basic_auth=`, `-basic_auth=`, …)."""
    found = []
    for arg in argv:
        name = arg.lstrip("-").partition("=")[0].replace("-", "_")
        if arg.startswith("-") and name in SECRET_OPTIONS:
            found.append(arg.partition("=")[0])
    return found


# --- the hook inside Flower's own process ---------------------------------------------------


def connect_guard() -> None:
    """Run `refuse_open_flower` whenever a Celery app of this process imports its modules
    (`worker.celery_app` connects it, and so does colabq's Flower configuration file, for a
    Flower on another app); once, however often it is called."""
    from celery import signals

    signals.import_modules.connect(refuse_open_flower, weak=False, dispatch_uid=__name__)


def refuse_open_flower(**_: Any) -> None:
    """Celery's `import_modules` receiver: when a Flower app is being built in this process,
    exit with one line unless its final options hold a login. Anything else (a worker, beat,
    the producer) passes through untouched."""
    flower_app = _flower_being_built(sys._getframe(1))
    if flower_app is None:
        return
    options = flower_app.options
    oauth = flower_app.settings.get("oauth") or {}
    login = Login(
        basic_auth=tuple(x for x in (options.basic_auth or ()) if x),
        auth=options.auth or "",
        provider=options.auth_provider or "",
        key=oauth.get("key") or "",
        secret=oauth.get("secret") or "",
        redirect_uri=oauth.get("redirect_uri") or "",
    )
    try:
        check_login(login, sys.argv[1:])
    except FlowerLoginError as exc:
        print(f"colabq flower: not starting: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None


def _flower_being_built(frame: FrameType | None) -> Any:
    """The Flower app whose constructor is on the stack above this signal, if any (Flower's
    `__init__` imports the Celery app's modules once its options are final)."""
    flower_app = sys.modules.get("flower.app")
    if flower_app is None:
        return None
    init = flower_app.Flower.__init__.__code__
    for _ in range(12):
        if frame is None:
            return None
        if frame.f_code is init:
            return frame.f_locals.get("self")
        frame = frame.f_back
    return None
