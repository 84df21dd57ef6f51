"""The web UI mounted under /jobs inside your own Starlette app (FastAPI: ``app.mount``).

    pip install 'cogworker-async[web]'
    COGWORKER_WEB_AUTH=admin:change-me uvicorn examples.web_mounted:app

Then open http://127.0.0.1:8000/jobs/ (basic auth: admin / change-me);
http://127.0.0.1:8000/jobs-view/ is the same UI read-only, for a header your
proxy sets (``X-Auth-Role: staff``).
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from cogworker_async import Settings
from cogworker_async.web import basic_auth, create_app

settings = Settings()


def staff_only(request: Request) -> bool:
    # Any check on the request: a session, a header your proxy sets, a token.
    return request.headers.get("x-auth-role") == "staff"


async def home(request: Request) -> PlainTextResponse:
    return PlainTextResponse("your app; the jobs are at /jobs/")


app = Starlette(
    routes=[
        Route("/", home),
        Mount("/jobs", app=create_app(settings, auth=basic_auth(settings))),
        Mount("/jobs-view", app=create_app(settings, auth=staff_only, read_only=True)),
    ]
)
