"""Which lock holders are nowhere: the search behind ``locks delete-orphaned``.

A lock is orphaned when its holder jid is in no place a job can be: the
schedule and retry sets, a queue, an in-progress list, a worker's slot, the
unsettled records or the repeat orphans. The search reads every such place
once per pass, in chunks (``READ_CHUNK`` entries a call: no Redis call blocks
for long), and looks each entry's jids up in a set of the holders: linear in
locks plus jobs, where one script per lock scanning every job was quadratic
(~1.5 s of blocked Redis per lock at 100k jobs).

Not one atomic step, so a job may move while it is looked for. The places
are read in the order jobs flow (scheduled and retrying, queued, in
progress, in a slot, unsettled, repeat orphans): a job moving forward goes
where the pass has yet to look. A holder not found by the first pass is
looked for again by a second; only one missed by both is reported, and the
caller deletes its lock only while that holder still holds it. What is left:
a job moving backwards (a failure into retry, a requeue) at the wrong moment
in both passes loses its lock (a duplicate may then be enqueued): never the
job itself.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterable

from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store.replies import loose_text

READ_CHUNK = 1000  # entries read per Redis call
DELETE_CHUNK = 500  # locks deleted per delete_orphan_locks.lua call
PASSES = 2

_JID_RUN = re.compile(rb"[0-9a-f]{24,}")
_JID = re.compile(rb"[0-9a-f]{24}")


def _jids_in(entry: bytes) -> Iterable[bytes]:
    """Every 24-hex-character run in ``entry`` (a jid, as the wire contract has it);
    a longer run gives each of its 24-character windows (a chance match keeps a
    lock, never deletes one)."""
    for match in _JID_RUN.finditer(entry):
        run = match.group()
        if len(run) == 24:
            yield run
        else:
            yield from (run[i : i + 24] for i in range(len(run) - 23))


def _bytes(value: object) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


async def _chunks(redis: Redis, key: str) -> AsyncIterator[list[bytes]]:
    """A place's entries, ``READ_CHUNK`` a call: a list from its head (pushes at the
    head only make a later chunk repeat entries), a sorted set or hash by its SCAN
    (which returns every entry present throughout). Another type: nothing."""
    kind = loose_text(await redis.type(key))
    if kind == "list":
        start = 0
        while True:
            chunk = await redis.lrange(key, start, start + READ_CHUNK - 1)
            if not chunk:
                return
            yield [_bytes(entry) for entry in chunk]
            if len(chunk) < READ_CHUNK:
                return
            start += READ_CHUNK
    elif kind == "zset":
        cursor = 0
        while True:
            cursor, pairs = await redis.zscan(key, cursor, count=READ_CHUNK)
            yield [_bytes(member) for member, _ in pairs]
            if cursor == 0:
                return
    elif kind == "hash":
        cursor = 0
        while True:
            cursor, fields = await redis.hscan(key, cursor, count=READ_CHUNK)
            yield [_bytes(value) for value in fields.values()] if isinstance(fields, dict) else []
            if cursor == 0:
                return


async def _members(redis: Redis, key: str) -> list[str]:
    if loose_text(await redis.type(key)) != "set":
        return []
    return sorted(loose_text(m) for m in await redis.smembers(key))


async def _places(redis: Redis, keys: Keys) -> list[str]:
    """Every key that holds jobs, in the order jobs flow through them."""
    queues = [keys.queue(name) for name in await _members(redis, keys.queues)]
    running = [keys.in_progress(i) for i in await _members(redis, keys.in_progress_identities)]
    slots = [keys.workers(i) for i in await _members(redis, keys.processes)]
    return [
        keys.schedule,
        keys.retry,
        *queues,
        *running,
        *slots,
        keys.unsettled,
        keys.repeat_orphans,
    ]


async def _one_pass(redis: Redis, keys: Keys, missing: set[bytes]) -> None:
    """Remove from ``missing`` every holder found in a place."""
    odd = {h for h in missing if _JID.fullmatch(h) is None}  # not a jid's shape
    for place in await _places(redis, keys):
        async for chunk in _chunks(redis, place):
            for entry in chunk:
                missing.difference_update(_jids_in(entry))
                if odd:
                    seen = {h for h in odd if h in entry}
                    odd -= seen
                    missing -= seen
            if not missing:
                return


async def orphaned_holders(redis: Redis, keys: Keys, holders: set[bytes]) -> set[bytes]:
    """The holders (exact bytes) found in no place by any of ``PASSES`` passes."""
    missing = set(holders)
    for _ in range(PASSES):
        if not missing:
            break
        await _one_pass(redis, keys, missing)
    return missing
