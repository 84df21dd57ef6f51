"""The periodic ticker: a duty every worker runs, no leader.

Each process keeps, per entry, the last time it looked. A tick reads Redis's
clock (one clock for every process, whatever their own drift) and claims each
slot that came since (``periodic_claim.lua``: the slot's claim key plus the
push, one step; a tick's claims go in pipelines of ``CLAIM_BATCH``), then
sleeps until the next slot of any entry. Whoever claims first pushes the job;
the others' claims find the key.

A slot is claimed only while it is on time (``timing.on_time_window``: half
the interval, 2 to 60 s). A slot later than that was missed (Redis away, the
loop stalled, no process running): ``misfire="skip"`` never runs it;
``"run_once"`` runs the latest missed slot once (within ``grace``) when no
on-time slot of the same tick runs, and only if the entry's last slot is older
(``catch_up``), which is what stops two processes, or a late one, running a
missed slot twice. A process's first tick looks back to its start only, except
for that ``run_once`` catch-up.

An entry paused at run time (``periodic pause NAME``: its name in
``<ns>:periodic:paused``, read once a tick: ticks come at slots, not per job)
has its due slots passed over as if claimed elsewhere: they are skipped, not
kept for later, by every process, until it is resumed.

A tick never holds the event loop for long: it yields every ``SLICE`` seconds
of work and sends its claims in batches, so 2,000 due entries don't stall the
processors and the heartbeat's callbacks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import anyio.lowlevel
import orjson
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.periodic.claims import Claimer, slot_id, slot_jid, slot_payload
from cogworker_async.periodic.entries import Entry
from cogworker_async.periodic.readers import UnreadQueueWarnings
from cogworker_async.periodic.timing import (
    catch_up_slot,
    due_slots,
    next_slot,
    on_time_window,
    typical_interval,
)
from cogworker_async.store.periodic import paused_entries, publish_entries

# The longest sleep between ticks (a process started with no entry due for
# weeks still looks now and then, and a clock step is noticed).
MAX_SLEEP = 60.0
# Ticks land just after the slot, so the slot is <= Redis's now.
WAKE_AFTER = 0.002
# After a failed pass (not an outage: run_duty retries those itself) the next
# comes after this, doubling up to MAX_SLEEP: a failing start never spins.
RETRY_AFTER_FAILURE = 1.0
# Seconds of work between two yields to the event loop; claims per pipeline.
SLICE = 0.01
CLAIM_BATCH = 200


async def redis_now(redis: Redis) -> float:
    seconds, micros = await redis.time()
    return int(seconds) + int(micros) / 1e6


async def publish(redis: Redis, keys: Keys, entries: Sequence[Entry], now: float) -> None:
    """Record each entry's definition in ``<ns>:periodic:entries`` (for ``periodic list``),
    with when this process started ticking it (``published_at``, Redis's clock)."""
    if entries:
        mapping: dict[str, bytes] = {
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
        await publish_entries(redis, keys, mapping)


class _Slices:
    """Yields to the event loop once ``SLICE`` seconds of work have passed."""

    def __init__(self) -> None:
        self._since = time.perf_counter()

    async def checkpoint(self) -> None:
        if time.perf_counter() - self._since >= SLICE:
            await anyio.lowlevel.checkpoint()
            self._since = time.perf_counter()

    def reset(self) -> None:
        self._since = time.perf_counter()


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
        self._claimer = Claimer(redis, keys, logger)
        self._readers = UnreadQueueWarnings(self.entries, logger)
        self._seen: dict[str, float] = {}  # entry name -> when it was last looked at
        self._next: dict[str, float] = {}  # entry name -> its first slot after _seen
        self._interval: dict[str, float] = {}  # entry name -> its (typical) interval
        self._now = 0.0
        self._wake = 0.0
        self._started = False
        self._failures = 0
        self._names = set(names)
        self._paused: set[str] = set()  # names paused as of the last tick (for the log)

    @property
    def claimed(self) -> int:
        """Slots this process pushed so far."""
        return self._claimer.pushed

    async def tick(self) -> int:
        """Claim every slot come since the last tick; returns how many this process pushed."""
        try:
            if not self._started:
                await self.start()
                pushed = 0
            else:
                pushed = await self._tick()
        except Exception:
            self._failures += 1
            raise
        self._failures = 0
        return pushed

    async def start(self) -> None:
        """Publish the definitions; a ``run_once`` entry claims its latest missed slot."""
        now = await redis_now(self.redis)
        paused = await self._read_paused()
        await publish(self.redis, self.keys, self.entries, now)
        lasts = await self._claimer.read_lasts([e.name for e in self.entries])
        slices = _Slices()
        catch_up: list[tuple[Entry, float, bool]] = []
        for entry in self.entries:
            await slices.checkpoint()
            self._interval[entry.name] = typical_interval(entry, now)
            self._seen[entry.name] = now
            self._next[entry.name] = next_slot(entry, now)
            slot = catch_up_slot(entry, now, lasts.get(entry.name))
            if slot is not None and entry.name not in paused:
                self.log.info(
                    "Periodic entry %s: running missed slot %.0f once (misfire=run_once)",
                    entry.name,
                    slot,
                )
                catch_up.append((entry, slot, True))
        await self._send(catch_up, now)
        await self._readers.check(self.redis, self.keys, now)
        self._now = now
        self._wake = min(self._next.values(), default=now + MAX_SLEEP)
        self._started = True

    async def _tick(self) -> int:
        now = await redis_now(self.redis)
        paused = await self._read_paused()
        await self._readers.check(self.redis, self.keys, now)
        slices = _Slices()
        batch: list[tuple[Entry, float, bool]] = []
        # Entries whose slots are in ``batch`` (or none due), with their next slot.
        looked: list[tuple[Entry, float]] = []
        missed: list[str] = []
        pushed = 0
        wake = now + MAX_SLEEP
        for entry in self.entries:
            upcoming = self._next[entry.name]
            # Cached: a cron entry's next slot costs a cronsim walk (~40 µs), and
            # most ticks of a many-entry process find most entries not due.
            if now < upcoming:
                wake = min(wake, upcoming)
                continue
            await slices.checkpoint()
            # Paused: its due slots count as looked at (skipped, never run later).
            picked = [] if entry.name in paused else self._pick(entry, now, missed)
            batch.extend((entry, slot, catch_up) for slot, catch_up in picked)
            following = next_slot(entry, now)
            looked.append((entry, following))
            wake = min(wake, following)
            if len(batch) >= CLAIM_BATCH:
                pushed += await self._commit(batch, looked, now)
                batch, looked = [], []
                slices.reset()
        pushed += await self._commit(batch, looked, now)
        if missed:
            self.log.warning(
                "Periodic: %d entr%s missed slots (Redis away, or no process ticked them on "
                "time) and skip them (misfire=skip): %s",
                len(missed),
                "y" if len(missed) == 1 else "ies",
                ", ".join(missed[:10]) + (", ..." if len(missed) > 10 else ""),
            )
        self._now, self._wake = now, wake
        return pushed

    async def _read_paused(self) -> set[str]:
        """The paused entries' names; each of this process's entries is logged once when
        it is paused and once when resumed. (A wrong-typed set raises WRONGTYPE, which
        wakes the key guard: guessing "none paused" would run what an operator paused.)"""
        paused = await paused_entries(self.redis, self.keys)
        mine = self._names
        for name in sorted((paused - self._paused) & mine):
            self.log.info("Periodic entry %s is paused: its slots are skipped until resumed", name)
        for name in sorted((self._paused - paused) & mine):
            self.log.info("Periodic entry %s is resumed: its next slots run", name)
        self._paused = paused
        return paused

    def _pick(self, entry: Entry, now: float, missed: list[str]) -> list[tuple[float, bool]]:
        """The slots of ``entry`` this tick claims: (slot, as a catch-up)."""
        due = due_slots(entry, self._seen[entry.name], now, self._window(entry))
        picked = [(slot, False) for slot in due.on_time]
        if due.last_missed is None:
            return picked
        if entry.misfire == "skip":
            missed.append(entry.name)
        elif not picked and (entry.grace is None or now - due.last_missed <= entry.grace):
            picked.append((due.last_missed, True))
        return picked

    async def _commit(
        self,
        batch: list[tuple[Entry, float, bool]],
        looked: list[tuple[Entry, float]],
        now: float,
    ) -> int:
        """Send ``batch``; only once it is answered do these entries count as looked at
        (after an outage the next tick claims their slots again: a claim is idempotent)."""
        pushed = await self._send(batch, now)
        for entry, following in looked:
            self._seen[entry.name] = now
            self._next[entry.name] = following
        return pushed

    async def _send(self, batch: list[tuple[Entry, float, bool]], now: float) -> int:
        if not batch:
            return 0
        wanted = [(e, slot, catch_up, self._interval[e.name]) for e, slot, catch_up in batch]
        return await self._claimer.claim(wanted, now)

    def _window(self, entry: Entry) -> float:
        return on_time_window(self._interval[entry.name])

    def interval(self) -> float:
        """Seconds until the next slot of any entry, on Redis's clock as last read; after a
        failed pass, a retry delay that doubles (a failing start never spins)."""
        if self._failures:
            return min(MAX_SLEEP, RETRY_AFTER_FAILURE * 2.0 ** (self._failures - 1))
        if not self._started:
            return WAKE_AFTER
        return max(0.0, min(MAX_SLEEP, self._wake - self._now)) + WAKE_AFTER


__all__ = ["Ticker", "publish", "redis_now", "slot_id", "slot_jid", "slot_payload"]
