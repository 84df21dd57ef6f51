"""What a result wait can know besides the result: that none will come, and why
it may be long.

The invariant: a wait for a result that will never be kept ends at once with
``ResultNotKept``, never by running out its timeout (or never, with no
timeout). Two ways to know it:

- A handle (what ``enqueue`` returns) knows its job's payload: no
  ``keep_result`` in a job declared here means none is kept (the worker's own
  fallbacks are the same ``@job``'s options and the ``keep_result`` setting,
  which we take to be the client's). Enqueued by a name unknown here, or a
  unique duplicate (the holder's payload is another caller's), it does not know.
- A bare jid carries no payload, and the job's payload sits in a queue, a
  sorted set or a worker's in-progress list that only a scan could search. Its
  status hash, when tracked, is read instead, in the same pipeline as the look
  for the result: a job it says finished with neither a result nor its "gone"
  marker kept none (or kept one that ran out long ago). Only ``complete``,
  ``failed`` and ``dead`` count: a client's abort writes ``aborted`` and the
  result in two steps, so that state alone proves nothing.

A wait no live process would end (none runs, or none reads the job's queue:
what ``enqueue`` by name warns of) still waits, since a worker that starts
later delivers, but it is said: a WARNING as the wait starts (once per queue a
minute per Client) and in the ``ResultTimeout`` message.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from cogworker_async.errors import ResultError, ResultExpired, ResultNotKept, ResultTimeout

# What a look says of a job its status calls finished with nothing of a result kept.
from cogworker_async.store.status import FINISHED

if TYPE_CHECKING:
    from cogworker_async.client.by_name import LiveCheck

TELL_AGAIN_AFTER = 60.0  # s: a queue no one reads is said once a minute, not once a wait
RECHECK_TIMEOUT = 2.0  # s at most spent asking the live processes once a wait timed out

_log = logging.getLogger("cogworker_async.client")


class FinishedUnkept:
    """A look's finding: the status says ``state`` (finished) and no result is kept."""

    __slots__ = ("state",)

    def __init__(self, state: str) -> None:
        self.state = state


def finished_unkept(state: Any, result: Any, gone: Any) -> FinishedUnkept | None:
    """What a look's ``HGET status state`` (with no result and no marker) says."""
    if result is not None or gone is True or gone == 1:
        return None
    if isinstance(state, bytes):
        state = state.decode("utf-8", "replace")
    return FinishedUnkept(state) if state in FINISHED else None


def not_kept(jid: str, why: str) -> ResultNotKept:
    """The error of a wait for a result that will never come, saying how to ask for one."""
    return ResultNotKept(
        f"job {jid} {why}, so no result will come: ask for one with keep_result= on the"
        " job (@job(keep_result=600)) or its .options(keep_result=600), or for every job"
        " with the keep_result setting"
    )


def unkept_error(jid: str, found: FinishedUnkept, keeps: bool | None) -> ResultError:
    """What a waiter raises when its look found the job finished and no result kept."""
    if keeps:
        # It kept one (its payload says so): past the "gone" marker too.
        return ResultExpired(f"job {jid} finished ({found.state}) but its result is no longer kept")
    return not_kept(
        jid,
        f"finished ({found.state}) and keeps no result (or its keep_result ran out long ago)",
    )


class NoReaderNotice:
    """Says when no live process would run a job whose result is awaited."""

    def __init__(self, live: LiveCheck) -> None:
        self._live = live
        self._told: dict[str | None, float] = {}

    async def warn(self, jid: str, queue: str | None, timeout: float | None) -> None:  # noqa: ASYNC109 - only said
        """Log a WARNING if no live process reads ``queue`` (None: if none runs at all)."""
        problem = await self._live.reader_problem(queue)
        if problem is None:
            return
        now = time.monotonic()
        if now - self._told.get(queue, -TELL_AGAIN_AFTER) < TELL_AGAIN_AFTER:
            return
        self._told[queue] = now
        if timeout is None:
            then = "waiting with no timeout: a worker that starts later still delivers"
        else:
            then = f"ResultTimeout in {timeout} s unless a worker starts (one that does delivers)"
        _log.warning("waiting for the result of job %s: %s; %s", jid, problem, then)

    async def problem(self, queue: str | None) -> str | None:
        """Why no live process would run the job now, for a timeout's message (bounded)."""
        try:
            async with asyncio.timeout(RECHECK_TIMEOUT):
                return await self._live.reader_problem(queue)
        except TimeoutError:
            return None

    async def watch(
        self,
        jid: str,
        queue: str | None,
        timeout: float | None,  # noqa: ASYNC109 - the wait's own, passed through
        wait: Callable[[], Awaitable[Any]],
    ) -> Any:
        """Run ``wait``, warning as it starts if no live process would end it, and
        naming that in its ``ResultTimeout``."""
        if timeout is not None and timeout <= 0:
            return await wait()  # one look, not a wait: nothing to warn of
        # Beside the wait, not before it: a result already there is not delayed.
        warning = asyncio.get_running_loop().create_task(self.warn(jid, queue, timeout))
        try:
            return await wait()
        except ResultNotKept:
            raise
        except ResultTimeout as exc:
            problem = await self.problem(queue)
            if problem is None:
                raise
            raise ResultTimeout(f"{exc}: {problem}") from None
        finally:
            warning.cancel()
            await asyncio.gather(warning, return_exceptions=True)
