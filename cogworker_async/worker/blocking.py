"""One blocking wait for work, on its own connection: an idle worker neither polls nor sleeps.

``BLMOVE`` for one queue (the job moves into the in-progress list as it
arrives), ``BZPOPMIN`` on the queues' wake-up markers for several (the
fetcher then looks once), ``BRPOP`` in basic mode.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store.replies import raw


class Woke(enum.Enum):
    NOTHING = "nothing"  # timed out on the queues themselves
    JOB = "job"  # brought one job
    WOKEN = "woken"  # a wake-up marker fired: look once
    LOOK = "look"  # timed out on the markers: look once anyway


async def wait_for_work(
    blocking: Redis,
    keys: Keys,
    *,
    identity: str,
    queues: Sequence[str],
    reliable: bool,
    block_for: float,
) -> tuple[Woke, bytes | None]:
    """Block up to ``block_for`` s (Redis's own timeout) on ``queues``, unpaused, in order."""
    if not reliable:
        reply = await blocking.brpop([keys.queue(n) for n in queues], timeout=block_for)
        return (Woke.NOTHING, None) if reply is None else (Woke.JOB, raw(reply[1]))
    if len(queues) == 1:
        job = await blocking.blmove(
            keys.queue(queues[0]),
            keys.in_progress(identity),
            block_for,  # type: ignore[arg-type]  # Redis takes fractional seconds
            "RIGHT",
            "LEFT",
        )
        return (Woke.NOTHING, None) if job is None else (Woke.JOB, raw(job))
    marker = await blocking.bzpopmin([keys.wakeup(n) for n in queues], block_for)
    # Timed out, look once too: a producer that doesn't touch the marker
    # still gets its job run within fetch_idle_max_interval.
    return (Woke.LOOK if marker is None else Woke.WOKEN), None
