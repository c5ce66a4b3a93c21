"""Stand-ins for what the emulator does not play: the emulator as `colab`, except for one
command whose output a test chooses (e.g. a real 0.7.5's `whoami` for a login without the email
scope, which the emulator's account cannot be)."""

from __future__ import annotations

from pathlib import Path

EMULATOR = Path(__file__).resolve().parents[1] / "ops" / "colab"

# The real `whoami` for a token without the userinfo.email scope (ADC can be one), and a whoami
# that fails where `colab new` works (tokeninfo out of reach): shell snippets for `colab_with`.
WHOAMI_NO_EMAIL = (
    "printf 'Auth provider: adc\\nEmail:         <unavailable: token has no userinfo.email "
    "scope>\\nAudience:      x\\nExpires in:    59m\\nScopes:        <none>\\n'; exit 0"
)
WHOAMI_FAILS = "echo '[colab] whoami: tokeninfo request failed: timed out' >&2; exit 1"


def colab_with(folder: Path, command: str, snippet: str) -> Path:
    """An executable `colab` in `folder`: the emulator, but `colab COMMAND` runs `snippet`."""
    path = folder / f"colab-{command}"
    path.write_text(
        "#!/usr/bin/env bash\n"
        f'for a in "$@"; do [ "$a" = {command} ] && {{ {snippet}; }}; done\n'
        f'exec "{EMULATOR}" "$@"\n'
    )
    path.chmod(0o755)
    return path
