"""`colab whoami` (hidden in 0.7.4): the login's identity, as the real command prints it.

The real command refreshes the credentials, asks Google's tokeninfo endpoint about the access
token and prints the auth provider, the email, the audience, the time left and the scopes (sorted).
Here the email is the emulator home's account (`colab-emu set-account EMAIL`; each emulator home
is one Colab account, with its own assignments and billing), and an `auth` fault fails it the
way it fails the other commands that authenticate; `mode: "http"` stands for a token tokeninfo
rejects (stderr, exit 1, as the real command prints it).
"""

from __future__ import annotations

from typing import Any

from .context import EmuContext
from .errors import CliExit, ColabRequestError
from .output import echo
from .session_ops import authenticate, backend_for

AUDIENCE = "emulated.apps.googleusercontent.com"
# The CLI's PUBLIC_SCOPES (colab_cli/auth.py), printed sorted as `whoami` prints them.
SCOPES = (
    "openid",
    "https://www.googleapis.com/auth/userinfo.profile",
    "https://www.googleapis.com/auth/userinfo.email",
    "https://www.googleapis.com/auth/cloud-platform",
    "https://www.googleapis.com/auth/colaboratory",
    "https://www.googleapis.com/auth/drive.file",
)
INVALID_TOKEN = '{"error": "invalid_token", "error_description": "Invalid Value"}'


def cmd_whoami(ctx: EmuContext, opts: dict[str, Any]) -> int:
    try:
        authenticate(ctx, None)
    except ColabRequestError:
        echo(f"[colab] whoami: tokeninfo returned HTTP 400: {INVALID_TOKEN}", err=True)
        raise CliExit(1) from None
    echo(f"Auth provider: {ctx.auth}")
    echo(f"Email:         {backend_for(ctx).account()}")
    echo(f"Audience:      {AUDIENCE}")
    echo("Expires in:    59m")
    echo("Scopes:")
    for scope in sorted(SCOPES):
        echo(f"  - {scope}")
    return 0
