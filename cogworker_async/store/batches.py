"""Batches in Redis: open, add members (with their push), close, read, list.

Invariant: a member is in its batch's pending set before it can run, and
leaves it only in the step that ends it (``includes/batch_end.lua``, called by
``includes/holds.lua`` for the ``holds.BATCH`` hold), so each member's end is
counted once and a batch's callbacks are pushed once, by the step that ends
its last member or by the close that finds none left.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from redis.asyncio import Redis

from cogworker_async import holds
from cogworker_async.errors import BatchGone
from cogworker_async.holds import Event, Hold
from cogworker_async.keys import Keys
from cogworker_async.store.scripts import EncodableArg, script

__all__ = ["BatchGone", "Callback", "Opened"]

# How long a finished batch stays readable (``batch_status``, ``batches show``).
BATCH_KEEP = 7 * 24 * 3600.0
CALLBACK_EVENTS = ("success", "complete", "death")
COUNTS = ("total", "pending", "succeeded", "failed", "dead")


@dataclass(frozen=True, slots=True)
class Callback:
    """A callback job ready to push: its queue and its encoded payload."""

    queue: str
    payload: bytes


def _callback_spec(keys: Keys, callback: Callback) -> dict[str, str]:
    return {
        "queue_key": keys.queue(callback.queue),
        "queues_key": keys.queues,
        "wakeup_key": keys.wakeup(callback.queue),
        "queue": callback.queue,
        "payload": callback.payload.decode(),
    }


class Opened(enum.Enum):
    OPENED = 1
    EXISTS = 0
    PARENT_OVER = -1


async def open_batch(
    redis: Redis,
    keys: Keys,
    *,
    bid: str,
    created_at: float,
    description: str = "",
    callbacks: Mapping[str, Callback] | None = None,
    parent: str | None = None,
    keep: float = BATCH_KEEP,
    results_by_token: bool = False,
) -> Opened:
    """Create batch ``bid``, open; a child of ``parent`` (a bid) counts as one of its
    members. ``results_by_token``: only members added under a once-token are listed
    for ``read_results`` (a flow's stage: its list is its group, in order)."""
    spec: dict[str, Any] = {
        "bid": bid,
        "pending_key": keys.batch_pending(bid),
        "results_key": keys.batch_results(bid),
        "description": description,
        "created_at": created_at,
        "keep": keep,
        "results_by_token": results_by_token,
        "callbacks": {event: _callback_spec(keys, cb) for event, cb in (callbacks or {}).items()},
    }
    script_keys = [keys.batch(bid), keys.batches]
    if parent is not None:
        script_keys.append(keys.batch(parent))
    return Opened(int(await script("batch_open").run(redis, script_keys, [orjson.dumps(spec)])))


async def add_members(
    redis: Redis,
    keys: Keys,
    *,
    bid: str,
    queue: str,
    members: Sequence[tuple[str, bytes]],
    due: float | None = None,
    once: str = "",
    keep_results: bool = False,
) -> int:
    """Add ``members`` (jid, payload) to batch ``bid`` and push them onto ``queue`` (or
    the schedule, ``due``) in one step; returns the batch's total. ``BatchGone`` when
    the batch is gone or over (nothing written). ``once``: a token; a second add
    under it adds nothing. ``keep_results``: the members keep a result, so their
    jids are listed, in this order, for ``read_results``."""
    if due is None:
        script_keys = [keys.queue(queue), keys.queues, keys.wakeup(queue)]
        args: list[EncodableArg] = ["push", queue]
    else:
        script_keys = [keys.schedule, keys.schedule_wakeup]
        args = ["schedule", due]
    args.extend((once, "1" if keep_results else ""))
    for jid, payload in members:
        args.extend((jid, payload))
    total = int(
        await script("batch_add").run(
            redis, [keys.batch(bid), keys.batch_pending(bid), *script_keys], args
        )
    )
    if total < 0:
        raise BatchGone(f"batch {bid} is gone or over: no member can be added to it")
    return total


async def close_batch(redis: Redis, keys: Keys, bid: str) -> str:
    """Close batch ``bid`` (no more members from outside); returns its state afterwards
    ("running", or "done" when every member had ended; "" when it is gone)."""
    state = await script("batch_close").run(redis, [keys.batch(bid)])
    return state.decode() if isinstance(state, bytes) else str(state)


async def read_batch(redis: Redis, keys: Keys, bid: str) -> dict[str, str] | None:
    """The batch's hash and its pending count (None when it is gone)."""
    async with redis.pipeline(transaction=True) as pipe:
        pipe.hgetall(keys.batch(bid))
        pipe.scard(keys.batch_pending(bid))
        fields, pending = await pipe.execute()
    if not fields:
        return None
    found = {k.decode(): v.decode() for k, v in fields.items()}
    found["pending"] = str(int(pending))
    return found


async def pending_members(redis: Redis, keys: Keys, bid: str, limit: int = 10_000) -> list[str]:
    """Up to ``limit`` members of ``bid`` that have not ended (jids; ``b:<bid>`` a child)."""
    members: list[str] = []
    async for member in redis.sscan_iter(keys.batch_pending(bid), count=500):
        members.append(member.decode() if isinstance(member, bytes) else str(member))
        if len(members) >= limit:
            break
    return members


async def list_batches(redis: Redis, keys: Keys, limit: int = 50) -> list[str]:
    """The newest ``limit`` bids (the index drops those whose hash expired)."""
    bids = await redis.zrevrange(keys.batches, 0, max(0, limit - 1))
    return [b.decode() if isinstance(b, bytes) else str(b) for b in bids]


async def forget_expired(redis: Redis, keys: Keys, bids: Sequence[str]) -> None:
    """Drop from the index the bids whose batch expired."""
    if bids:
        await redis.zrem(keys.batches, *bids)


def batch_state(fields: Mapping[str, str]) -> str:
    """What ``batch_status`` says: open, running, then success (every member
    succeeded), dead (one died) or complete (all ended, some failed)."""
    state = fields.get("state", "")
    if state != "done":
        return state
    if _count(fields, "dead"):
        return "dead"
    return "complete" if _count(fields, "failed") else "success"


def _stamp(fields: Mapping[str, str], name: str) -> float | None:
    try:
        return float(fields[name]) if name in fields else None
    except ValueError:
        return None


def _count(fields: Mapping[str, str], name: str) -> int:
    # A count someone wrote by hand reads as 0: a status is never refused for it.
    try:
        return int(fields.get(name, "0"))
    except ValueError:
        return 0


async def batch_status(redis: Redis, keys: Keys, bid: str) -> dict[str, Any] | None:
    """``{"bid", "state", "total", "pending", "succeeded", "failed", "dead",
    "description", "parent", "created_at", "closed_at", "finished_at",
    "callbacks": {event: "waiting" | "enqueued"}}``, or None (no such batch)."""
    fields = await read_batch(redis, keys, bid)
    if fields is None:
        return None
    return {
        "bid": bid,
        "state": batch_state(fields),
        **{name: _count(fields, name) for name in COUNTS},
        "description": fields.get("description", ""),
        "aborted": "aborted" in fields,
        "parent": fields.get("parent", "").removeprefix(keys.batch_prefix) or None,
        "created_at": _stamp(fields, "created_at"),
        "closed_at": _stamp(fields, "closed_at"),
        "finished_at": _stamp(fields, "finished_at"),
        "callbacks": {
            event: ("enqueued" if f"fired:{event}" in fields else "waiting")
            for event in CALLBACK_EVENTS
            if f"cb:{event}" in fields
        },
    }


async def recent_batches(redis: Redis, keys: Keys, limit: int = 50) -> list[dict[str, Any]]:
    """The newest ``limit`` batches' status, newest first; a bid whose batch expired
    is dropped from the index on the way."""
    found: list[dict[str, Any]] = []
    gone: list[str] = []
    for bid in await list_batches(redis, keys, limit):
        status = await batch_status(redis, keys, bid)
        if status is None:
            gone.append(bid)
        else:
            found.append(status)
    await forget_expired(redis, keys, gone)
    return found


async def fail_results(
    redis: Redis, keys: Keys, jids: Sequence[str], *, error_class: str, message: str, keep: float
) -> None:
    """Write a failure's result for jobs that will never run (a flow's dependents),
    unless one is there already, and tell their waiters (as a worker does)."""
    envelope = orjson.dumps({"ok": False, "error_class": error_class, "error_message": message})
    seconds = max(1, int(keep))
    for jid in jids:
        if await redis.exists(keys.result(jid)):
            continue
        async with redis.pipeline(transaction=True) as pipe:
            pipe.rpush(keys.result(jid), envelope)
            # Plain EXPIRE: its NX option is Redis 7's (the key is new here anyway).
            pipe.expire(keys.result(jid), seconds)
            pipe.set(keys.result_gone(jid), "1", ex=2 * seconds, nx=True)
            pipe.publish(keys.result_ready(jid), "1")
            await pipe.execute()


async def end_members(redis: Redis, keys: Keys, held: Sequence[Hold], event: Event) -> None:
    """Count the end of batch members outside a settling step (a basic-fetch success,
    whose ack settles no hold): ``held``, their counted holds, settled as ``event``."""
    groups = holds.encode(keys, held, event)
    block: list[EncodableArg] = [len(groups) // holds.HOLD_FIELDS, *groups]
    await script("batch_member_end").run(redis, [hold.key for hold in held], block)


async def mark_aborted(redis: Redis, keys: Keys, bid: str) -> bool:
    """Note on batch ``bid`` that it was aborted (a flow stops after it); False when
    there is no such batch."""
    return bool(await script("batch_abort").run(redis, [keys.batch(bid)]))
