"""What a janitor pass says: one row per thing it saw (what it did, would do or left alone, and
why), and the report those rows make (`colabq janitor`, the beat's log lines, its JSON).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Row:
    kind: str  # job, assignment, account, tracker run
    subject: str
    seen: str
    did: str  # "did: …", "would: …", "left alone", "failed: …"
    why: str


@dataclass(frozen=True)
class JanitorReport:
    ran: bool
    dry_run: bool
    rows: tuple[Row, ...] = ()
    account_measured: bool = False
    account: str | None = None  # the Colab account whose pass this is (None: unknown)
    skipped: str = "another janitor pass holds the lock; skipped"  # why, when not `ran`

    def lines(self) -> list[str]:
        if not self.ran:
            return [self.skipped]
        mode = " (dry run)" if self.dry_run else ""
        acct = "" if self.account_measured else "; account not measured"
        of = f" of {self.account}" if self.account else ""
        head = f"janitor{mode}{of}: {len(self.rows)} finding(s){acct}"
        return [head, *(f"{r.kind} {r.subject} [{r.seen}]: {r.did}: {r.why}" for r in self.rows)]

    def to_json(self) -> dict[str, object]:
        return {
            "ran": self.ran,
            "dry_run": self.dry_run,
            "account": self.account,
            "account_measured": self.account_measured,
            "skipped": None if self.ran else self.skipped,
            "rows": [asdict(r) for r in self.rows],
        }

    def did(self, kind: str) -> list[Row]:
        return [r for r in self.rows if r.did.startswith(f"did: {kind}")]


def collapse_left_alone(rows: list[Row], *, shown: int = 3) -> list[Row]:
    """Rows left alone for the same reason, as one summary row where there are several (a host
    without a tracker's settings would otherwise print one row per finished job)."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        if r.did == "left alone":
            groups.setdefault((r.kind, r.why), []).append(r)
    out: list[Row] = []
    for r in rows:
        group = groups.get((r.kind, r.why)) if r.did == "left alone" else None
        if group is None or len(group) == 1:
            out.append(r)
        elif group[0] is r:
            names = ", ".join(g.subject for g in group[:shown])
            more = f" and {len(group) - shown} more" if len(group) > shown else ""
            out.append(Row(r.kind, f"{len(group)} {r.kind}s", names + more, r.did, r.why))
    return out
