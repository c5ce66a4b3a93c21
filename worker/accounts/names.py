"""An account's name: the email of its Google login, lower case (Google's addresses are not
case-sensitive), so that the setting, `colab whoami` and every record compare equal. Pure."""

from __future__ import annotations

import re

_EMAIL = re.compile(r"[^\s@]+@[^\s@]+")


def account_name(text: str) -> str:
    """`text` as an account name; ValueError (one line) when it is not an email address."""
    name = text.strip().lower()
    if not _EMAIL.fullmatch(name):
        raise ValueError(
            f"{text!r} is not an account: write the email of the Colab login, as `colab whoami` "
            "prints it (e.g. you@example.com)"
        )
    return name


def same_account(recorded: str | None, mine: str | None) -> bool:
    """Whether a host of account `mine` may act on a VM of account `recorded`: a job that
    recorded none (before accounts) may be acted on by any host, as before; a host whose own
    account is unknown acts on no job that recorded one."""
    return not recorded or recorded == mine
