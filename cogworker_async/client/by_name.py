"""Enqueue by name: the job a name stands for, and what the live processes say of it.

A job declared in this process (its module imported) takes its own options
(queue, retry, timeout) as if the function had been given; an unknown name
goes to the given queue, else ``default``. By name only (never on the
function path), the client also looks at the live processes' presence (cached
for a heartbeat interval) and warns when none reads that queue or none of
those that do knows the name.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

import orjson
from redis.asyncio import Redis

from cogworker_async.jobs import BoundJob, JobFunction, JobOptions, declared
from cogworker_async.keys import Keys
from cogworker_async.store.replies import loose_text

# The client's logger: what is said of a job enqueued by name is the client's.
log = logging.getLogger("cogworker_async.client")

# How long a "said so" about one (name, queue) keeps the client from saying it
# again: a loop enqueueing by name logs once a minute, not once a job.
TELL_AGAIN_AFTER = 60.0


def _no_handler_here(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError("a job known here by name only has no handler in this process")


def named(
    name: str, *, queue: str | None = None, delay: float | None = None
) -> tuple[BoundJob[Any, Any], bool]:
    """The job to enqueue by ``name``, and whether a ``@job`` of that name is declared here.

    A declared job brings its own options (queue, retry, timeout); ``queue``
    and ``delay`` given here override them. An unknown name gets ``queue``,
    else ``default``, and no options: the worker's registered job supplies
    them when it runs.
    """
    if not name:
        raise ValueError("job name must not be empty")
    known = declared(name)
    function = known if known is not None else JobFunction(_no_handler_here, name, JobOptions())
    return function.options(queue=queue, delay=delay), known is not None


@dataclass(frozen=True, slots=True)
class EnqueuedByName:
    """What ``Client.enqueue_by_name`` did: the jid (None if middleware dropped
    the job), the queue it went to, whether the name is declared in this
    process (its options were used), and what the live processes suggest is
    wrong (empty when a live process reading that queue knows the name, or
    when they could not be asked)."""

    jid: str | None
    queue: str
    known_here: bool
    warnings: tuple[str, ...]
    served: bool  # a live process reading that queue says it knows the name
    # A unique job already held: nothing enqueued, ``jid`` is the holder's.
    duplicate: bool = False
    # Whether the job keeps its result: True (its payload says so), False (a job
    # declared here that keeps none), None (unknown here, or a duplicate).
    keeps_result: bool | None = None

    def describe(self, name: str, what: str | None = None) -> str:
        """One line saying where the job (or ``what``) went, and that the name is unknown here."""
        line = f"enqueued {what or self.jid} on queue {self.queue}"
        if not self.known_here:
            line += f" (no job named {name} is known here)"
        return line


@dataclass(frozen=True, slots=True)
class _LiveProcess:
    queues: frozenset[str]
    jobs: frozenset[str] | None  # None: it does not say (an older version)


def _live_process(presence: object) -> _LiveProcess | None:
    if not isinstance(presence, bytes | str):
        return None
    try:
        info = orjson.loads(presence)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(info, dict):
        return None
    queues = info.get("queues")
    jobs = info.get("jobs")
    return _LiveProcess(
        frozenset(q for q in queues if isinstance(q, str))
        if isinstance(queues, list)
        else frozenset(),
        frozenset(j for j in jobs if isinstance(j, str)) if isinstance(jobs, list) else None,
    )


def _reader_problem(processes: list[_LiveProcess], queue: str | None) -> str | None:
    """Why no live process would take a job from ``queue`` (None: any queue), or None."""
    if not processes:
        where = "its queue" if queue is None else f"queue {queue!r}"
        return f"no live process is running: the job waits on {where} until one reads it"
    if queue is not None and not any(queue in p.queues for p in processes):
        read = sorted(set().union(*(p.queues for p in processes)))
        return (
            f"no live process reads queue {queue!r} (they read: {', '.join(read) or 'nothing'}):"
            " the job waits there until one does"
        )
    return None


def _live_problems(processes: list[_LiveProcess], name: str, queue: str) -> tuple[list[str], bool]:
    """What the live processes say about running ``name`` from ``queue``: (warnings, served)."""
    problem = _reader_problem(processes, queue)
    if problem is not None:
        return [problem], False
    readers = [p for p in processes if queue in p.queues]
    if any(p.jobs is not None and name in p.jobs for p in readers):
        return [], True
    if any(p.jobs is None for p in readers):
        return [], False  # one of them does not say what it knows
    return [
        f"no live process reading queue {queue!r} knows a job named {name!r}:"
        " it will be buried in dead as UnknownJob unless one that does starts"
    ], False


class LiveCheck:
    """A client's look at the live processes for jobs enqueued by name, and what it said."""

    def __init__(self, redis: Redis, keys: Keys, *, heartbeat_interval: float) -> None:
        self._redis = redis
        self._keys = keys
        self._heartbeat_interval = heartbeat_interval
        # The live processes as last read (when, what), and when each
        # (name, queue) was last said something about.
        self._live: tuple[float, list[_LiveProcess]] | None = None
        self._told: dict[tuple[str, str], float] = {}
        self._reading: asyncio.Task[list[_LiveProcess]] | None = None

    async def ask(self, name: str, queue: str) -> tuple[list[str], bool]:
        """What the live processes say about running ``name`` from ``queue`` (best effort)."""
        try:
            processes = await self._live_processes()
        except Exception as exc:  # noqa: BLE001 - the job is enqueued; the check is advice
            log.debug("could not read the live processes to check job %r: %s", name, exc)
            return [], False
        return _live_problems(processes, name, queue)

    async def reader_problem(self, queue: str | None) -> str | None:
        """Why no live process would take a job from ``queue`` (None: the queue is not
        known, so: is any process running?), or None; best effort (None if unknown)."""
        try:
            processes = await self._live_processes()
        except Exception as exc:  # noqa: BLE001 - advice only: the caller goes on without it
            log.debug("could not read the live processes to check queue %r: %s", queue, exc)
            return None
        return _reader_problem(processes, queue)

    async def _live_processes(self) -> list[_LiveProcess]:
        """The live processes' presence info, read at most once a heartbeat interval
        (callers arriving while it is read share that one read)."""
        now = time.monotonic()
        if self._live is not None and now - self._live[0] < self._heartbeat_interval:
            return self._live[1]
        if self._reading is None or self._reading.done():
            self._reading = asyncio.get_running_loop().create_task(self._read_live(now))
            # Its failure is each awaiting caller's; with none left, it is dropped here.
            self._reading.add_done_callback(lambda t: t.cancelled() or t.exception())
        # Shielded: one caller cancelled (its wait ended) leaves the read to the others.
        return await asyncio.shield(self._reading)

    async def _read_live(self, now: float) -> list[_LiveProcess]:
        identities = sorted(loose_text(i) for i in await self._redis.smembers(self._keys.processes))
        found: list[_LiveProcess] = []
        for start in range(0, len(identities), 500):
            chunk = identities[start : start + 500]
            # A presence key lapses with its process: a gone one reads as None.
            for presence in await self._redis.mget([self._keys.process(i) for i in chunk]):
                process = _live_process(presence)
                if process is not None:
                    found.append(process)
        self._live = (now, found)
        return found

    def tell(self, name: str, what: str | None, done: EnqueuedByName) -> None:
        """Log where a job enqueued by name went, when there is something to say.

        WARNING when the live processes suggest it will not run, or when the
        name is unknown here and no live process reading its queue confirms
        it; INFO for an unknown name that one does. Once per (name, queue) a
        minute, so a loop enqueueing by name does not flood the log.
        """
        if what is None:
            return
        if done.warnings or not (done.known_here or done.served):
            level = logging.WARNING
        elif not done.known_here:
            level = logging.INFO
        else:
            return
        key = (name, done.queue)
        now = time.monotonic()
        if now - self._told.get(key, -TELL_AGAIN_AFTER) < TELL_AGAIN_AFTER:
            return
        self._told[key] = now
        log.log(level, "%s", "; ".join([done.describe(name, what), *done.warnings]))
