"""colabq's pre-flight checks: quick checks on the training repository before a job is
enqueued (config diff, run name, paths, monitoring, ETA; the code shipped and its environment are
`producer.code`'s), and the report that gates submission.

`run_preflight` runs them; `render_report` draws the result. See `/work/shared/spec/preflight.md`.
"""

from producer.preflight.remote import (
    HttpRemoteChecker,
    RemoteChecker,
    RemoteState,
    RemoteStatus,
    build_remote_checker,
)
from producer.preflight.report import CHECK_NAMES, CheckName, Finding, Report, Verdict
from producer.preflight.run import PreflightOptions, run_preflight

__all__ = [
    "CHECK_NAMES",
    "CheckName",
    "Finding",
    "HttpRemoteChecker",
    "PreflightOptions",
    "RemoteChecker",
    "RemoteState",
    "RemoteStatus",
    "Report",
    "Verdict",
    "build_remote_checker",
    "run_preflight",
]
