"""Middleware chains.

Client middleware sees each job dict before it is pushed and returns it
(possibly changed) or ``None`` to drop it. Server middleware wraps each run:
``async def mw(job: dict, call_next) -> None`` must ``await call_next()``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

JobDict = dict[str, Any]
ClientMiddleware = Callable[[JobDict], Awaitable[JobDict | None]]
Next = Callable[[], Awaitable[None]]
ServerMiddleware = Callable[[JobDict, Next], Awaitable[None]]


async def run_client_chain(chain: Sequence[ClientMiddleware], job: JobDict) -> JobDict | None:
    current: JobDict = job
    for middleware in chain:
        changed = await middleware(current)
        if changed is None:
            return None
        current = changed
    return current


def wrap_server_chain(chain: Sequence[ServerMiddleware], job: JobDict, innermost: Next) -> Next:
    """``innermost`` wrapped by each middleware, the first one outermost.

    Each layer is a ``functools.partial`` of the middleware itself (built in C),
    not a closure around it: calling one starts the middleware's own coroutine,
    with no wrapper coroutine per layer and job."""
    call: Next = innermost
    for middleware in reversed(chain):
        call = partial(middleware, job, call)
    return call
