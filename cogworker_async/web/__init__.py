"""The web UI: ``create_app(settings, auth=..., read_only=...)`` builds an ASGI app.

Needs the ``web`` extra (``pip install cogworker-async[web]``: Starlette,
Jinja2, uvicorn). Pages read through ``cogworker_async.api`` in bounded
amounts; actions are POSTs guarded against other sites (``security``).
"""

from cogworker_async.web.app import create_app
from cogworker_async.web.security import AuthHook, basic_auth

__all__ = ["AuthHook", "basic_auth", "create_app"]
