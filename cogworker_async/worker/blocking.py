"""One blocking wait for work, on its own connection: an idle worker neither polls nor sleeps.

``BLMOVE`` for one queue (the job moves into the in-progress list as it
arrives), ``BZPOPMIN`` on the queues' wake-up markers for several (the
fetcher then looks once), ``BRPOP`` in basic mode.

None of these reads the paused set: a queue paused while the wait is on
still hands it a job. The paused set is read right after, in the same round
trip, and the fetcher gives such a job back (``Fetcher._block_once``).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import NamedTuple

from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store.replies import raw


class Woke(enum.Enum):
    NOTHING = "nothing"  # timed out on the queues themselves
    JOB = "job"  # brought one job
    WOKEN = "woken"  # a wake-up marker fired: look once
    LOOK = "look"  # timed out on the markers: look once anyway


class Waited(NamedTuple):
    woke: Woke
    job: bytes | None = None  # the job it brought, if any
    queue: str | None = None  # the queue that job came from
    # The job's queue was paused by the time it arrived (read right after it).
    paused: bool = False


def wait_name(identity: str) -> str:
    """The name the blocking connections of process ``identity`` give themselves, so
    that its stop can end a wait still out on the server (``unblock_named``)."""
    # CLIENT SETNAME refuses spaces and newlines (a host name may hold anything).
    return "cogworker-wait:" + "".join(c if c.isprintable() and c != " " else "_" for c in identity)


async def wait_for_work(
    blocking: Redis,
    keys: Keys,
    *,
    identity: str,
    queues: Sequence[str],
    reliable: bool,
    block_for: float,
) -> Waited:
    """Block up to ``block_for`` s (Redis's own timeout) on ``queues``, unpaused, in order.

    A wait that may bring a job goes out pipelined with a read of the paused
    set, which Redis runs on this connection right after the wait returns: a
    pause made while it blocked is seen without a round trip more.
    """
    if reliable and len(queues) > 1:
        marker = await blocking.bzpopmin([keys.wakeup(n) for n in queues], block_for)
        # Timed out, look once too: a producer that doesn't touch the marker
        # still gets its job run within fetch_idle_max_interval.
        return Waited(Woke.LOOK if marker is None else Woke.WOKEN)
    names = {keys.queue(n): n for n in queues}
    pipe = blocking.pipeline(transaction=False)
    if reliable:
        pipe.blmove(
            keys.queue(queues[0]),
            keys.in_progress(identity),
            block_for,  # type: ignore[arg-type]  # Redis takes fractional seconds
            "RIGHT",
            "LEFT",
        )
    else:
        pipe.brpop(list(names), timeout=block_for)
    pipe.smembers(keys.paused)
    # Errors as values: a paused set that can't be read must not lose the job.
    reply, paused = await pipe.execute(raise_on_error=False)
    if isinstance(reply, Exception):
        raise reply
    if reply is None:
        return Waited(Woke.NOTHING)
    queue: str | None
    if reliable:
        job, queue = raw(reply), queues[0]
    else:
        job, queue = raw(reply[1]), names.get(raw(reply[0]).decode("utf-8", "replace"))
    stopped = (
        not isinstance(paused, Exception)
        and queue is not None
        and (queue.encode() in paused or queue in paused)
    )
    return Waited(Woke.JOB, job, queue, stopped)
