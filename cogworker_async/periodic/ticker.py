"""The periodic ticker: a duty every worker runs, no leader.

Each process keeps, per entry, the next slot it has not looked at yet. A tick
reads Redis's clock (one clock for every process, whatever their own drift),
claims each slot that has come (``periodic_claim.lua``: SET NX of the slot's
claim key plus the push, one step; the claims of every entry due in one tick
go in one pipeline) and sleeps until the next slot of any entry. Whoever
claims first pushes the job; the others' claims return 0.

A process only claims slots that came while it ran (its first slot is the
first one after its start): a slot missed while no worker ran is not run,
except for a ``run_once`` entry, whose latest missed slot is claimed once at
start when it is newer than the persisted last slot (and within ``grace``).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from typing import Any

import orjson
from redis.asyncio import Redis

from cogworker_async import payload
from cogworker_async.keys import Keys
from cogworker_async.periodic.entries import Entry
from cogworker_async.periodic.timing import catch_up_slot, next_slot, slots_between
from cogworker_async.store.replies import text
from cogworker_async.store.scripts import EncodableArg, script

# The claim key outlives its slot by this many periods (at least a day): long
# enough that no late tick of a slow process can claim the slot again.
CLAIM_PERIODS = 10
CLAIM_MIN_TTL = 86400.0
# Slots that came during one tick's lag (a stalled loop) are claimed too, but
# never more than this many per entry at once.
CATCH_UP_LIMIT = 4
# The longest sleep between ticks (a process started with no entry due for
# weeks still looks now and then, and a clock step is noticed).
MAX_SLEEP = 60.0
# Ticks land just after the slot, so the slot is <= Redis's now.
WAKE_AFTER = 0.002


def slot_id(slot: float) -> str:
    """A slot as written in keys: whole seconds without a fraction."""
    return format(slot, ".3f").rstrip("0").rstrip(".")


def slot_jid(entry: Entry, slot: float) -> str:
    """Deterministic: the same for every process claiming this slot (24 hex)."""
    raw = f"{entry.name}:{entry.digest}:{slot_id(slot)}".encode()
    return hashlib.sha1(raw, usedforsecurity=False).hexdigest()[:24]


def slot_payload(entry: Entry, slot: float, now: float, jid: str | None = None) -> bytes:
    job = payload.build(
        entry.job,
        entry.args,
        entry.kwargs,
        entry.queue,
        now=now,
        jid=jid or slot_jid(entry, slot),
        extra=entry.payload_fields(slot),
    )
    return payload.encode_job(job)


async def redis_now(redis: Redis) -> float:
    seconds, micros = await redis.time()
    return int(seconds) + int(micros) / 1e6


async def publish(redis: Redis, keys: Keys, entries: Sequence[Entry], now: float) -> None:
    """Record each entry's definition in ``<ns>:periodic:entries`` (for ``periodic list``),
    with when this process started ticking it (``published_at``, Redis's clock)."""
    if entries:
        mapping: dict[str | bytes, bytes | str | float] = {
            e.name: orjson.dumps(
                {
                    **e.definition(),
                    "hash": e.digest,
                    "schedule": e.schedule,
                    "published_at": now,
                    "queued_ttl": e.queued_ttl,
                    "active_ttl": e.active_ttl,
                }
            )
            for e in entries
        }
        await redis.hset(keys.periodic("entries"), mapping=mapping)  # type: ignore[arg-type]


class Ticker:
    """Claims the slots of ``entries``; ``tick`` is one pass, ``interval`` the sleep after it."""

    def __init__(
        self, redis: Redis, keys: Keys, entries: Sequence[Entry], logger: logging.Logger
    ) -> None:
        names = [e.name for e in entries]
        if len(set(names)) != len(names):
            raise ValueError(f"periodic entry names must be unique, got {names}")
        self.redis = redis
        self.keys = keys
        self.entries = list(entries)
        self.log = logger
        self._seen: dict[str, float] = {}  # entry name -> last slot looked at
        self._next: dict[str, float] = {}  # entry name -> its first slot after _seen
        self._now = 0.0
        self._wake = 0.0
        self._started = False
        self.claimed = 0

    async def start(self) -> None:
        """Publish the definitions; a ``run_once`` entry claims its latest missed slot."""
        now = await redis_now(self.redis)
        await publish(self.redis, self.keys, self.entries, now)
        lasts = await self.redis.hmget(self.keys.periodic("last"), [e.name for e in self.entries])
        for entry, raw in zip(self.entries, lasts, strict=True):
            self._seen[entry.name] = now
            last = None if raw is None else float(text(raw))
            slot = catch_up_slot(entry, now, last)
            if slot is not None:
                self.log.info(
                    "Periodic entry %s: running missed slot %.0f once (misfire=run_once)",
                    entry.name,
                    slot,
                )
                await self._claim([(entry, slot)], now)
        self._next = {e.name: next_slot(e, now) for e in self.entries}
        self._now = now
        self._wake = min(self._next.values(), default=now + MAX_SLEEP)
        self._started = True

    async def tick(self) -> int:
        """Claim every slot come since the last tick; returns how many this process pushed."""
        if not self._started:
            await self.start()
            return 0
        now = await redis_now(self.redis)
        claims: list[tuple[Entry, float]] = []
        seen: dict[str, float] = {}
        wake = now + MAX_SLEEP
        upcoming = self._next
        for entry in self.entries:
            name = entry.name
            # Cached: a cron entry's next slot costs a cronsim walk (~40 µs), and
            # most ticks of a many-entry process find most entries not due.
            if now < upcoming[name]:
                wake = min(wake, upcoming[name])
                continue
            due = slots_between(entry, self._seen[name], now, CATCH_UP_LIMIT)
            claims.extend((entry, slot) for slot in due)
            seen[name] = due[-1] if due else self._seen[name]
            wake = min(wake, next_slot(entry, seen[name]))
        # Every due slot in one round trip (each claim is still its own atomic
        # step). Only once it is answered do the slots count as seen: after a
        # failed pipeline (an outage) the next tick claims them again.
        pushed = await self._claim(claims, now)
        for entry in self.entries:
            if entry.name in seen:
                self._seen[entry.name] = seen[entry.name]
                upcoming[entry.name] = next_slot(entry, seen[entry.name])
        self._now, self._wake = now, wake
        return pushed

    def interval(self) -> float:
        """Seconds until the next slot of any entry, on Redis's clock as last read."""
        return max(0.0, min(MAX_SLEEP, self._wake - self._now)) + WAKE_AFTER

    async def _claim(self, claims: list[tuple[Entry, float]], now: float) -> int:
        """Claim these (entry, slot) pairs in one pipeline; returns how many this process pushed."""
        if not claims:
            return 0
        keys = self.keys
        calls: list[tuple[Sequence[str], Sequence[EncodableArg]]] = []
        for entry, slot in claims:
            ttl = max(CLAIM_MIN_TTL, CLAIM_PERIODS * entry.period)
            jid = slot_jid(entry, slot)
            calls.append(
                (
                    [
                        keys.periodic(f"claim:{entry.name}:{entry.digest}:{slot_id(slot)}"),
                        keys.periodic("last"),
                        keys.queue(entry.queue),
                        keys.queues,
                        keys.wakeup(entry.queue),
                        keys.periodic_running(entry.name),
                    ],
                    [
                        int(ttl * 1000),
                        entry.name,
                        slot_id(slot),
                        entry.queue,
                        slot_payload(entry, slot, now, jid),
                        "" if entry.overlap else max(1, int(entry.queued_ttl * 1000)),
                        jid,
                    ],
                )
            )
        replies: list[Any] = await script("periodic_claim").run_many(self.redis, calls)
        pushed = 0
        for (entry, slot), claimed in zip(claims, replies, strict=True):
            if isinstance(claimed, int):
                pushed += claimed
                continue
            # This process decided the slot, so the skip is logged once, here.
            self.log.warning(
                "Periodic entry %s: slot %s skipped: the previous run (jid=%s) is still "
                "queued or running (overlap=False)",
                entry.name,
                slot_id(slot),
                text(claimed),
            )
        self.claimed += pushed
        return pushed
