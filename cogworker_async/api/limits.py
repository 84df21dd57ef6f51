"""Rate and concurrency limits, for a human: what each key holds now
(``limits list``), its run-time limit (``limits set`` / ``limits clear``), and
an operator's removal of held jobs (``limits clear-held``, ``clear Q``).

The keys are found by SCAN under ``<ns>:limits:`` (bounded: ``_SCAN_COUNT`` a
call), their numbers read in one pipeline.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from redis.asyncio import Redis

from cogworker_async import holds
from cogworker_async.api._common import _SCAN_COUNT, _glob_escape
from cogworker_async.keys import Keys
from cogworker_async.limits.declarations import check_key_text
from cogworker_async.store import limits as store
from cogworker_async.store import locks
from cogworker_async.store.fair import FairLine, fair_lines
from cogworker_async.store.replies import loose_text
from cogworker_async.timing import check_duration
from cogworker_async.unique.drop import drop_all

__all__ = ["FairLine", "LimitInfo", "clear_limit", "list_fair", "list_limits", "set_limit"]

# The bookkeeping keys of one limit key: "~<part>:<key>".
_PARTS = ("parked", "window", "pause")


@dataclass(frozen=True, slots=True)
class LimitInfo:
    """One limit key now: jobs running with its slot, jobs held on it, its
    run-time limit (``limits set``; None: the jobs' own), seconds its pause
    (``limits.BackOff``) has left (None: not paused), jobs admitted a second
    (over the last full 10 s of Redis's clock)."""

    key: str
    running: int
    held: int
    limit: str | None
    paused: float | None
    admitted: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _name_of(keys: Keys, key: str) -> str | None:
    rest = key[len(keys.limits_prefix) :]
    if not rest.startswith("~"):
        return rest or None
    part, _, name = rest[1:].partition(":")
    return name if part in _PARTS and name else None


def _shown(value: str) -> str:
    n, _, period_ms = value.partition(" ")
    return f"{n} per {int(period_ms) / 1000:g} s" if period_ms else n


async def list_limits(redis: Redis, keys: Keys) -> list[LimitInfo]:
    """Every key with a slot taken, a job held, a pause, a run-time limit or an
    admission in the last full 10 s, by name."""
    names: set[str] = set()
    pattern = _glob_escape(keys.limits_prefix) + "*"
    async for found in redis.scan_iter(match=pattern, count=_SCAN_COUNT):
        name = _name_of(keys, loose_text(found))
        if name is not None:
            names.add(name)
    config = {
        loose_text(k): loose_text(v) for k, v in (await redis.hgetall(keys.limit_config)).items()
    }
    names |= set(config)
    bucket = store.last_full_bucket(await redis.time())
    admitted = store.admitted_per_second(await redis.hgetall(keys.limit_admitted(bucket)))
    names |= set(admitted)
    ordered = sorted(names)
    async with redis.pipeline(transaction=False) as pipe:
        for name in ordered:
            pipe.scard(keys.limit_slots(name))
            pipe.llen(keys.limit_parked(name))
            pipe.pttl(keys.limit_pause(name))
        replies = await pipe.execute(raise_on_error=False)
    rows = []
    for i, name in enumerate(ordered):
        running, held, pause_ms = replies[3 * i : 3 * i + 3]
        rows.append(
            LimitInfo(
                name,
                running if isinstance(running, int) else 0,
                held if isinstance(held, int) else 0,
                _shown(config[name]) if name in config else None,
                pause_ms / 1000 if isinstance(pause_ms, int) and pause_ms > 0 else None,
                admitted.get(name, 0.0),
            )
        )
    return rows


async def list_fair(redis: Redis, keys: Keys) -> list[FairLine]:
    """Every fair key (``limits.fair``) with jobs waiting, by queue, in turn order."""
    names = sorted(loose_text(n) for n in await redis.smembers(keys.queues))
    return await fair_lines(redis, keys, names)


async def set_limit(
    redis: Redis, keys: Keys, key: str, limit: int, per: float | None = None
) -> None:
    """Limit ``key`` to ``limit`` (running at once, or starts ``per`` seconds for a
    window) from the next admission on, over what its jobs declare; held jobs
    the new limit has room for are let in. ValueError/TypeError for bad input."""
    check_key_text(key, "limits set")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"a limit must be a whole number >= 1, got {limit!r}")
    value = str(limit)
    if per is not None:
        per_ms = round(check_duration(per, "--per") * 1000)
        if per_ms < 1:
            raise ValueError(f"--per must be at least 0.001 s, got {per}")
        value = f"{limit} {per_ms}"
    await store.set_limit(redis, keys, key, value)


async def clear_limit(redis: Redis, keys: Keys, key: str) -> bool:
    """Back to what the jobs of ``key`` declare, and its pause (if any) ended;
    False when it had neither."""
    check_key_text(key, "limits clear")
    return await store.set_limit(redis, keys, key, None)


async def clear_held(redis: Redis, keys: Keys, key: str) -> int:
    """Delete every job held on limit ``key`` (they never run); how many. Each is
    removed with what it holds settled as an operator's delete (a unique lock
    released, a batch counting it failed, a tracked job's status JobDeleted), in
    atomic chunks, oldest first, up to the number held when called."""
    check_key_text(key, "limits clear-held")
    return await drop_all(
        redis,
        keys.limit_parked(key),
        kind="list",
        kinds=holds.kinds_table(keys),
        tracking_prefix=keys.tracking_prefix,
    )


HELD_WINDOW = 1000
"""Held jobs looked at per ``drop_jobs.lua`` call when a queue is cleared."""


async def clear_held_of_queue(
    redis: Redis, keys: Keys, queue: str, *, window: int = HELD_WINDOW
) -> int:
    """Delete every held job of ``queue``, on whichever limit key it is held (each
    key's list walked in windows; the others keep their places); how many.
    A namespace that never used limits has none: no SCAN there."""
    removed = 0
    if not await redis.exists(keys.limits_used):
        return 0
    pattern = _glob_escape(keys.limit_parked("")) + "*"
    held_keys = [loose_text(k) async for k in redis.scan_iter(match=pattern, count=_SCAN_COUNT)]
    for key in sorted(set(held_keys)):
        start = 0
        while start >= 0:
            got, start = await locks.drop_held(
                redis,
                key,
                queue=queue,
                start=start,
                window=window,
                kinds=holds.kinds_table(keys),
                tracking_prefix=keys.tracking_prefix,
            )
            removed += got
    return removed
