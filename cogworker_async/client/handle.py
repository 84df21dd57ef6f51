"""``JobHandle``: what ``Client.enqueue`` returns, the jid and a way to its result,
status and abort."""

from __future__ import annotations

from typing import Any, Protocol

from cogworker_async.client.aborting import AbortOutcome
from cogworker_async.client.tracking import JobStatus


class AsksAboutJobs(Protocol):
    """What a handle asks of its client (``Client``'s ``result``, ``status``, ``abort``)."""

    async def result(self, jid: str, timeout: float | None = None) -> Any: ...  # noqa: ASYNC109 - the API peers use

    async def status(self, jid: str) -> JobStatus | None: ...

    async def abort(self, jid: str) -> AbortOutcome: ...


class JobHandle(str):
    """What ``enqueue`` returns: the jid itself (a ``str``, as before), and a way to
    its result and status.

    ``await handle.result(timeout=10)`` needs the job to keep its result
    (``keep_result``): the handle knows whether it does (``keeps_result``), so
    on one that keeps none it raises ``ResultNotKept`` at once. ``await
    handle.status()`` needs status tracking.

    A unique job's duplicate is not enqueued: its handle has ``duplicate``
    True and is the *holder's* jid (``holder``), the job already queued or
    running under the same lock, so ``result()`` waits for that one.
    """

    _client: AsksAboutJobs
    duplicate: bool
    keeps_result: bool | None
    queue: str | None

    def __new__(
        cls,
        jid: str,
        client: AsksAboutJobs,
        *,
        duplicate: bool = False,
        keeps_result: bool | None = None,
        queue: str | None = None,
    ) -> JobHandle:
        """``keeps_result``: True when the job's payload keeps its result, False when
        it is a job declared here that keeps none, None when that is not known here
        (enqueued by a name unknown here, a duplicate); ``queue``: where it went."""
        handle = super().__new__(cls, jid)
        handle._client = client
        handle.duplicate = duplicate
        handle.keeps_result = keeps_result
        handle.queue = queue
        return handle

    @property
    def holder(self) -> str | None:
        """The jid holding the unique lock when this enqueue was a duplicate, else None."""
        return str(self) if self.duplicate else None

    def __reduce__(self) -> tuple[type[str], tuple[str]]:
        # Pickled or copied (a task queue's args, a cache), it is the jid alone.
        return (str, (str(self),))

    @property
    def jid(self) -> str:
        return str(self)

    async def result(self, timeout: float | None = None) -> Any:  # noqa: ASYNC109 - the API peers use
        """The value the job returned, waiting up to ``timeout`` s (None: no limit).

        ``ResultNotKept`` at once when the job keeps no result (``keeps_result``
        False); a WARNING as the wait starts when no live process reads its
        queue (it still waits: a worker that starts later delivers). The rest as
        ``Client.result``.
        """
        return await self._client.result(self, timeout=timeout)

    async def status(self) -> JobStatus | None:
        """See ``Client.status``."""
        return await self._client.status(self.jid)

    async def abort(self) -> AbortOutcome:
        """See ``Client.abort``."""
        return await self._client.abort(self.jid)
