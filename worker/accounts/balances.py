"""Each account's balance as its hosts last saw it: the last `colab usage` answer a host of the
account recorded (a worker before each allocation, a janitor pass of the account), with when and
by whom. `colabq usage` shows it with its age; nothing here calls the CLI."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from worker.colab.parse import Usage
from worker.records.keys import Keys


@dataclass(frozen=True)
class Balance:
    account: str
    balance_units: float
    rate_per_hour: float
    active_assignments: int
    at: float
    by: str  # the worker or host that asked

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def record_usage(r: Any, keys: Keys, account: str, usage: Usage, *, by: str, now: float) -> None:
    """Remember `usage` as `account`'s latest (one round trip)."""
    b = Balance(account, usage.balance_units, usage.rate_per_hour, usage.active_assignments,
                now, by)  # fmt: skip
    r.hset(keys.account_usage(), account, json.dumps(b.to_json()))


def read_balances(r: Any, keys: Keys) -> dict[str, Balance]:
    """Every account's latest balance, by account (one round trip); a damaged entry is skipped."""
    return parse_balances(r.hgetall(keys.account_usage()))


def parse_balances(raw_hash: Mapping[Any, Any]) -> dict[str, Balance]:
    """The balances hash as read (`HGETALL`), by account; a damaged entry is skipped."""
    found: dict[str, Balance] = {}
    for raw_account, raw in raw_hash.items():
        try:
            account = raw_account.decode() if isinstance(raw_account, bytes) else str(raw_account)
            d = json.loads(raw)
            found[account] = Balance(
                account, float(d["balance_units"]), float(d["rate_per_hour"]),
                int(d["active_assignments"]), float(d["at"]), str(d.get("by", "")),
            )  # fmt: skip
        except (ValueError, KeyError, TypeError):
            continue
    return found
