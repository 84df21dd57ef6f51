"""Jobs that wait on others (``.options(after=[...])``), as Redis sees them: the
enqueue (``after_enqueue.lua``), the abort of a waiting one (``after_abort.lua``)
and the reads (the status of a waiting job, the list of waiting jobs).

A waiting job's payload sits in ``<ns>:after:~waiting`` (its place, lifecycle
``WAITING``); each prerequisite's settling step counts it down or ends it
(``includes/after_end.lua``), so nothing here polls.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import orjson
from redis.asyncio import Redis

from cogworker_async.errors import DependencyDropped, DependencyFailed, PrerequisiteUnknown
from cogworker_async.keys import Keys
from cogworker_async.store.replies import text
from cogworker_async.store.scripts import EncodableArg, script

# The error classes after_end.lua and after_enqueue.lua write (by name).
ERROR_CLASSES = (DependencyFailed.__name__, DependencyDropped.__name__)


@dataclass(frozen=True, slots=True)
class AfterReply:
    """What ``after_enqueue.lua`` did: ``queued`` (every prerequisite had ended as
    its edge allows), ``waiting`` (on ``waiting_on`` more), ``failed`` or
    ``dropped`` (ended at once: ``prerequisite``'s failure)."""

    outcome: str
    waiting_on: int = 0
    prerequisite: str | None = None


async def enqueue_after(
    redis: Redis, keys: Keys, job: dict[str, Any], *, status_ttl: float | None
) -> AfterReply:
    """Write ``job`` (its ``after`` maps prerequisite jids to their edge's policy)
    as ``after_enqueue.lua`` decides; ``status_ttl``: write its status (tracked)."""
    prerequisites = list(job["after"])
    args: list[EncodableArg] = [
        keys.after_prefix,
        str(job["jid"]),
        orjson.dumps(job),
        "" if status_ttl is None else status_ttl,
        *prerequisites,
    ]
    reply = await script("after_enqueue").run(redis, [keys.after_waiting, keys.after_left], args)
    outcome, detail = text(reply[0]), reply[1]
    if outcome == "unknown":
        raise PrerequisiteUnknown(
            f"after: nothing in Redis tells what became of job {text(detail)} (no status, "
            "no kept result, in no queue, schedule, retry, dead or in-progress list): "
            "it ended untracked, its status expired, or it never existed; nothing enqueued "
            "(track prerequisites with status=True or keep_result to name them after they ended)"
        )
    if outcome == "waiting":
        return AfterReply(outcome, waiting_on=int(detail))
    if outcome in ("failed", "dropped"):
        return AfterReply(outcome, prerequisite=text(detail))
    return AfterReply(outcome)


async def abort_waiting(redis: Redis, keys: Keys, jid: str, *, keep: float) -> bytes | None:
    """Abort job ``jid`` if it waits on others; its payload, or None when it doesn't."""
    entry = await script("after_abort").run(
        redis,
        [keys.after_waiting, keys.after_left, keys.aborted, keys.stat("aborted")],
        [keys.after_prefix, jid, time.time(), keep],
    )
    return bytes(entry) if entry else None


@dataclass(frozen=True, slots=True)
class Waiting:
    """A job waiting on others: its payload and the prerequisites not ended yet."""

    jid: str
    job: dict[str, Any]
    waiting_on: tuple[str, ...]


async def waiting_job(redis: Redis, keys: Keys, jid: str) -> Waiting | None:
    """Job ``jid`` if it waits on others, with the prerequisites it still waits on."""
    entry = await redis.hget(keys.after_waiting, jid)
    if not isinstance(entry, bytes):
        return None
    return (await _with_edges(redis, keys, {jid.encode(): entry}))[0]


async def waiting_jobs(redis: Redis, keys: Keys, *, limit: int = 100) -> list[Waiting]:
    """Up to ``limit`` of the jobs waiting on others (HSCAN order)."""
    found: dict[bytes, bytes] = {}
    async for jid, entry in redis.hscan_iter(keys.after_waiting, count=limit):
        found[jid] = entry
        if len(found) >= limit:
            break
    return await _with_edges(redis, keys, found) if found else []


async def _with_edges(redis: Redis, keys: Keys, entries: dict[bytes, bytes]) -> list[Waiting]:
    jobs: list[tuple[str, dict[str, Any]]] = []
    pipe = redis.pipeline(transaction=False)
    for raw_jid, entry in entries.items():
        job = orjson.loads(entry)
        jid = text(raw_jid)
        jobs.append((jid, job))
        for pre in job.get("after") or {}:
            pipe.sismember(keys.after_edges(pre), jid)
    answers = iter(await pipe.execute())
    out = []
    for jid, job in jobs:
        on = tuple(pre for pre in job.get("after") or {} if next(answers))
        out.append(Waiting(jid, job, on))
    return out
