"""Random identifiers (hex, UUID-shaped, URL-safe tokens) straight from `os.urandom`.

`secrets` and `uuid` cost more to import than the rest of a short `colab` call; the values only
have to look like the real ones and not collide.
"""

from __future__ import annotations

import base64
import os


def random_hex(chars: int) -> str:
    return os.urandom((chars + 1) // 2).hex()[:chars]


def random_uuid() -> str:
    """A version-4-shaped UUID string."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def random_token(nbytes: int = 24) -> str:
    return base64.urlsafe_b64encode(os.urandom(nbytes)).rstrip(b"=").decode()
