"""A local Hugging Face Hub-compatible server for tests and the offline demo.

The real `huggingface_hub` client talks to it with `HF_ENDPOINT=http://127.0.0.1:PORT` (and
`HF_HUB_DISABLE_XET=1`: this server has no Xet storage). See README.md for the endpoints, the
admin/fault API and the request log.
"""

from .admin_client import AdminClient
from .app import ServerConfig
from .server import RunningServer, start_server

__all__ = ["AdminClient", "RunningServer", "ServerConfig", "start_server"]
