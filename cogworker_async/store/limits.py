"""The limits' Redis side: the admission of a job a blocking wait took, and
what ``limits list/set/clear`` read and write (``cogworker_async.limits``)."""

from __future__ import annotations

import enum
from collections.abc import Mapping

from redis.asyncio import Redis

from cogworker_async import holds
from cogworker_async.keys import Keys
from cogworker_async.store.replies import loose_text
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


# s between two "limits are in use" of a writer that is not a Client (the
# periodic ticker): as often as a Client's (client/enqueueing.py).
MARK_EVERY = 10.0


async def mark_limits_used(redis: Redis, keys: Keys, *, fair: bool = False) -> None:
    """Say limits are in use in this namespace (``Keys.limits_used``): before a
    job with limits is first written, or the fetch would take it unchecked;
    ``fair``: fair keys too (``Keys.fair_used``), before a fair job is written."""
    if fair:
        await redis.mset({keys.limits_used: 1, keys.fair_used: 1})
    else:
        await redis.set(keys.limits_used, 1)


# The most keys one limits_due call serves (more wait for the next call).
DUE_BATCH = 100


async def limits_due(redis: Redis, keys: Keys) -> float | None:
    """Let back in the held jobs whose window has reopened (``limits_due.lua``);
    the seconds until the next key is due, or None when none is."""
    reply = int(
        await script("limits_due").run(redis, [keys.limit_due], [keys.limits_prefix, DUE_BATCH])
    )
    return None if reply < 0 else reply / 1000


async def back_off(
    redis: Redis,
    keys: Keys,
    *,
    identity: str,
    job: bytes,
    key: str,
    seconds: float,
    reliable: bool,
) -> bool:
    """Pause limit ``key`` for ``seconds`` and hold ``job`` back on it, first in
    line, no retry counted (``back_off.lua``); False when the job was no
    longer on the in-progress list (nothing changed)."""
    reply = await script("back_off").run(
        redis,
        [keys.in_progress(identity)],
        [
            job,
            keys.limits_prefix,
            key,
            max(1, round(seconds * 1000)),
            "reliable" if reliable else "basic",
            holds.kinds_table(keys),
        ],
    )
    return bool(reply)


async def set_limit(redis: Redis, keys: Keys, key: str, value: str | None) -> bool:
    """Set (``value``: "n" or "n period_ms") or clear (None: the run-time limit
    and any pause) limit ``key``'s run-time limit (``limits_set.lua``); whether
    something changed."""
    reply = await script("limits_set").run(
        redis,
        [keys.limit_config, keys.limit_due],
        [keys.limits_prefix, key, "clear" if value is None else "set", value or ""],
    )
    return bool(reply)


async def settle_points(
    redis: Redis, keys: Keys, key: str, *, give_back: float, points: int, interval_ms: float
) -> float:
    """Give ``give_back`` points (the estimate less the real cost; negative takes
    more) back to points limit ``key`` (``settle_points.lua``); its points after."""
    reply = await script("settle_points").run(
        redis,
        [keys.limit_due],
        [keys.limits_prefix, key, repr(give_back), points, repr(interval_ms)],
    )
    return float(reply)


# Admissions are counted per key in buckets of this many ms of Redis's clock
# (includes/limits.lua count_admitted); admitted/s is the last full bucket's.
ADMITTED_BUCKET_MS = 10_000


def last_full_bucket(redis_time: tuple[int, int]) -> int:
    """The bucket (``Keys.limit_admitted``) just before the one ``redis_time``
    (Redis's TIME: seconds, µs) falls in: the last one no admission adds to."""
    seconds, micros = redis_time
    return (seconds * 1000 + micros // 1000) // ADMITTED_BUCKET_MS - 1


def admitted_per_second(counts: Mapping[bytes | str, bytes | str]) -> dict[str, float]:
    """A bucket's hash read (HGETALL) as admissions per second by key; a field
    that is no count is left out."""
    rates = {}
    for name, value in counts.items():
        try:
            rates[loose_text(name)] = int(value) * 1000 / ADMITTED_BUCKET_MS
        except ValueError:
            continue
    return rates
