"""The limits' Redis side: the admission of a job a blocking wait took, and
what ``limits list/set/clear`` read and write (``cogworker_async.limits``)."""

from __future__ import annotations

import enum

from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store.scripts import script

# What the payload of a job with limits contains (a plain one is not looked at).
LIMITS_MARK = b'"limits"'


class Admission(enum.Enum):
    RUN = 1  # admitted, its slots taken
    PARKED = 0  # held back on a full limit's list, off the in-progress list
    GONE = 2  # no longer on the in-progress list: not to run


async def admit_taken(
    redis: Redis, keys: Keys, *, identity: str, job: bytes, reliable: bool
) -> Admission:
    """Check the limits of ``job``, taken by a blocking wait, as the fetch does
    for the jobs it takes (``admit_taken.lua``)."""
    reply = await script("admit_taken").run(
        redis,
        [keys.in_progress(identity)],
        [job, keys.limits_prefix, "reliable" if reliable else "basic"],
    )
    return Admission(int(reply))
