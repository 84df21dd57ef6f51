"""The processor's invoke step: a job through its middleware chain and its
timeout to its handler, in the handler's phase (see ``processor.py``).

A mixin of ``Processors``: methods on the class, so a job pays no call more
than it did when they lived in ``processor.py``.
"""

from __future__ import annotations

import asyncio
import difflib
import functools
from collections.abc import Callable
from typing import Any

from cogworker_async.errors import JobTimeout, UnknownJob
from cogworker_async.jobs import JobFunction, JobRegistry
from cogworker_async.middleware import Next, ServerMiddleware, wrap_server_chain
from cogworker_async.worker.aborting import FINISHING, IN_HANDLER
from cogworker_async.worker.running_job import RunningJob
from cogworker_async.worker.threads import HandlerThreads
from cogworker_async.workflows.results import RESULTS_OF, with_results


class InvokeStep:
    """``_run`` and ``_invoke`` of the processors (state set by ``Processors``)."""

    _registry: JobRegistry
    _middleware: list[ServerMiddleware]
    _default_timeout: float | None
    _threads: HandlerThreads

    async def _run(
        self,
        running: RunningJob,
        function: JobFunction[Any, Any] | None,
        box: list[Any] | None = None,
    ) -> None:
        """The job through the middleware chain, with its timeout; its return value
        goes into ``box`` when one is given."""
        job = running.job
        assert job is not None
        if function is None:
            # Through the chain like any failure, so middleware (metrics,
            # tracing, status) sees unknown names too.
            innermost: Next = functools.partial(_unknown, job["class"], self._registry)
        else:
            timeout = job.get("timeout") or function.defaults.timeout or self._default_timeout
            innermost = functools.partial(self._invoke, function, running, timeout, box)
        if self._middleware:
            await wrap_server_chain(self._middleware, job, innermost)()
        else:
            await innermost()

    async def _invoke(
        self,
        function: JobFunction[Any, Any],
        running: RunningJob,
        limit: float | None,
        box: list[Any] | None = None,
    ) -> None:
        """The handler itself, in its phase: aborted before it, it never starts; an
        abort cancels only this await; once it has returned, the job is finishing
        (the middleware's code after it included)."""
        if running.aborted:
            return  # aborted before its handler started: process() files it as aborted
        job = running.job
        assert job is not None
        args = job.get("args") or ()
        kwargs = job.get("kwargs") or {}
        running.phase = IN_HANDLER
        try:
            if RESULTS_OF in job:
                # A chord's callback: the group's results, read now (an abort
                # cancels this read as it would the handler).
                args = await with_results(job, args)
            if not function.is_async:
                call = functools.partial(function.fn, *args, **kwargs)
                if box is not None:
                    call = functools.partial(_into, box, call)
                limit_s = None if limit is None else float(limit)
                await self._threads.run(running.raw, job, call, limit_s)
                return
            if limit is None:
                value = await function.fn(*args, **kwargs)
                if box is not None:
                    box[0] = value
                return
            try:
                async with asyncio.timeout(float(limit)) as scope:
                    value = await function.fn(*args, **kwargs)
                if box is not None:
                    box[0] = value
            except TimeoutError:
                if scope.expired():
                    raise JobTimeout(f"ran past its timeout of {limit} s") from None
                raise
        finally:
            running.phase = FINISHING


def _into(box: list[Any], call: Callable[[], Any]) -> None:
    box[0] = call()


async def _unknown(name: str, registry: JobRegistry) -> None:
    names = registry.names
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.8)
    if close:
        hint = f" (did you mean {close[0]!r}?)"
    else:
        hint = f" (it knows {len(names)} job{'' if len(names) == 1 else 's'})"
    raise UnknownJob(f"no handler registered for {name!r} in this worker{hint}")
