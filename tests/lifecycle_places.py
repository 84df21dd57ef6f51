"""``locate``: in which place(s) of Redis a job is, by jid (the lifecycle tests' eye).

Reads every key a job can be in (SPEC.md §2): each queue of the queues set
(and any named here), the schedule, retry and dead sets, every in-progress
list (the registry's and any a SCAN finds), every limit's held jobs, every
fair key's line, repeat_orphans, unsettled and the jobs waiting on others
(after=[...]). A
job found twice is reported twice: the lifecycle's invariant is one place.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.lifecycle import Place


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def jid_in(raw: bytes, jid: str) -> bool:
    """Whether ``raw`` (a job, a suspect-marked job, an unsettled record) is job ``jid``.

    An entry that is not a JSON object (a raw burial) matches when it holds the jid."""
    try:
        body: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return jid.encode() in raw
    if not isinstance(body, dict):
        return jid.encode() in raw
    return body.get("jid") == jid


async def _lists(redis: Redis, keys: Keys, extra_queues: Iterable[str]) -> list[tuple[Place, str]]:
    queues = {_text(q) for q in await redis.smembers(keys.queues)} | set(extra_queues)
    lists = [(Place.QUEUE, keys.queue(q)) for q in sorted(queues)]
    identities = {_text(i) for i in await redis.smembers(keys.in_progress_identities)}
    async for key in redis.scan_iter(match=f"{keys.in_progress_prefix}*", count=500):
        identities.add(_text(key)[len(keys.in_progress_prefix) :])
    lists.extend((Place.IN_PROGRESS, keys.in_progress(i)) for i in sorted(identities))
    async for key in redis.scan_iter(match=f"{keys.limit_parked('')}*", count=500):
        lists.append((Place.HELD, _text(key)))
    # Fair keys' lines (not the rings beside them: key names, not jobs).
    async for key in redis.scan_iter(match=f"{keys.fair_base('')}*", count=500):
        if not _text(key).endswith(":~ring"):
            lists.append((Place.FAIR, _text(key)))
    lists.append((Place.REPEAT_ORPHANS, keys.repeat_orphans))
    lists.append((Place.UNSETTLED, keys.unsettled))
    return lists


def jid_of(raw: bytes) -> str | None:
    """The jid of a job or unsettled record; None for an entry that is not a JSON object."""
    try:
        body: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    jid = body.get("jid") if isinstance(body, dict) else None
    return jid if isinstance(jid, str) else None


Found = tuple[Place, str, bytes]  # the place, its key, the entry as stored


async def snapshot(
    redis: Redis, keys: Keys, *, queues: Iterable[str] = ("default",)
) -> dict[str | None, list[Found]]:
    """Every job entry of every place, by jid (None: entries that are no JSON job)."""
    found: dict[str | None, list[Found]] = {}
    for place, key in await _lists(redis, keys, queues):
        if await redis.type(key) == b"list":
            listed: list[bytes] = await redis.lrange(key, 0, -1)  # type: ignore[assignment]
            for raw in listed:
                found.setdefault(jid_of(raw), []).append((place, key, raw))
    sets = ((Place.SCHEDULE, keys.schedule), (Place.RETRY, keys.retry), (Place.DEAD, keys.dead))
    for place, key in sets:
        if await redis.type(key) == b"zset":
            members: list[bytes] = await redis.zrange(key, 0, -1)  # type: ignore[assignment]
            for raw in members:
                found.setdefault(jid_of(raw), []).append((place, key, raw))
    if await redis.type(keys.after_waiting) == b"hash":
        waiting: dict[bytes, bytes] = await redis.hgetall(keys.after_waiting)  # type: ignore[misc]
        for raw in waiting.values():
            found.setdefault(jid_of(raw), []).append((Place.AFTER, keys.after_waiting, raw))
    return found


async def locate(
    redis: Redis, keys: Keys, jid: str, *, queues: Iterable[str] = ("default",)
) -> list[tuple[Place, str]]:
    """Every (place, key) holding job ``jid``; empty when it is in none (``Place.GONE``)."""
    everything = await snapshot(redis, keys, queues=queues)
    found = [(place, key) for place, key, _ in everything.get(jid, [])]
    # An entry that is no JSON job (a raw burial) counts when it holds the jid.
    found.extend((place, key) for place, key, raw in everything.get(None, []) if jid_in(raw, jid))
    return found


async def places(redis: Redis, keys: Keys, jid: str) -> list[Place]:
    """The places of ``locate``, without their keys; ``[Place.GONE]`` when in none."""
    found = [place for place, _ in await locate(redis, keys, jid)]
    return found or [Place.GONE]
