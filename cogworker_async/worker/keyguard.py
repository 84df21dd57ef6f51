"""The key guard: a key of ours with the wrong type is moved aside, not tripped over.

One wrong-typed key (a queue someone ``SET``, a counter holding ``"abc"``, a
hash where the last-beat stamps should be) would otherwise make every fetch,
beat, poll or recovery pass that touches it fail, on every pass. At boot and
every ``key_check_interval`` the guard asks the TYPE of every library key this
process touches, in one pipeline (plus a peek at the counters' values), and
moves each wrong one to ``<ns>:quarantine:<key>`` with ``quarantine.lua``
(which checks again first), with a TTL, logging an error that says what was
found and where it went. Absent keys are fine: they are created when needed.

Keys the heartbeat rewrites whole (``process:<identity>`` by SET,
``workers:<identity>`` by DEL + HSET) can't be broken by a wrong type and
aren't checked. The type of every key family is in ``key_table`` (complete
from ``keys.py``, a unit test checks); families keyed by a job, a lock or a
slot, which no pass can list, are checked one key at a time when a caller
``report``s one that said ``WRONGTYPE``.

Every key is isolated: one that can't be checked or moved is logged and the
others are still checked. An outage is raised, for ``run_duty`` to log once.

A ``WRONGTYPE`` reply seen anywhere (fetch, filing, heartbeat, poller, ...)
calls ``request_check``, which wakes the periodic pass at once (at most once
every ``MIN_CHECK_GAP``): a wrong-typed key stops the duty tripping over it
within about a second, not after up to ``key_check_interval``. Orphan
recovery, which meets other processes' keys, guards those itself with
``guard_recovery_keys``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import anyio
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.observability.history import minute_of
from cogworker_async.settings import Settings
from cogworker_async.store import guard
from cogworker_async.store.commands import today
from cogworker_async.store.faults import is_outage
from cogworker_async.store.guard import COUNTER_PEEK, QUARANTINE_TTL, ExpectedType
from cogworker_async.worker.key_table import expected_type_of


@dataclass(frozen=True, slots=True)
class QuarantineRecord:
    """A key moved aside: its type as found, the type it should have, where it went.

    ``expected_type`` ``integer`` means a string holding an integer (a counter);
    a counter found holding something else has ``found_type`` ``string``.
    """

    key: str
    found_type: str
    expected_type: ExpectedType
    moved_to: str


# The recovery and abort counters (``Keys.stat``): INCRBY on a wrong type fails them.
COUNTERS = ("aborted", "recovered", "process_died", "duplicates_suspected")
MAX_REPORTED = 1000
"""Keys reported and not yet checked kept at most (a flood of bad keys is not memory)."""

MIN_CHECK_GAP = 1.0
"""Seconds between passes asked for by ``request_check`` (a broken key may be hit
many times a second; one pass a second is enough to move it)."""
MAX_CHECK_GAP = 60.0
"""The gap doubles up to this while asked-for passes move nothing: a WRONGTYPE from a
key the guard doesn't know, or one it can't move, is not chased every second."""


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class KeyGuard:
    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        settings: Settings,
        *,
        identity: str,
        queues: Sequence[str],
        logger: logging.Logger,
        periodic_names: Sequence[str] = (),
        ttl: int = QUARANTINE_TTL,
    ) -> None:
        self._redis = redis
        self._keys = keys
        self._settings = settings
        self._identity = identity
        self._queues = list(queues)
        self._periodic_names = list(periodic_names)
        self._log = logger
        self._ttl = ttl
        # asyncio's, not anyio's: made outside the event loop, set from it only.
        self._asked = asyncio.Event()
        self._last_pass = float("-inf")
        self._gap = MIN_CHECK_GAP
        self._requested = False
        # Keys reported one at a time (``report``), checked with the next pass.
        self._reported: set[str] = set()

    def request_check(self) -> None:
        """Run a pass soon (a Redis reply said WRONGTYPE): wakes ``wait``. Event loop only;
        from another thread use ``loop.call_soon_threadsafe``."""
        self._asked.set()

    async def wait(self, seconds: float) -> None:
        """The duty's sleep: ``seconds``, or until ``request_check``, but never less than
        ``MIN_CHECK_GAP`` (more while asked-for passes find nothing) after the previous
        pass began."""
        with anyio.move_on_after(seconds):
            await self._asked.wait()
        self._requested = self._asked.is_set()
        gap = self._last_pass + self._gap - time.monotonic()
        if gap > 0:
            await anyio.sleep(gap)
        # Cleared only now: a request made during the coming pass runs another.
        self._asked.clear()

    def expected_types(self) -> dict[str, ExpectedType]:
        """Every key checked, with the type it must have."""
        k = self._keys
        expected: dict[str, ExpectedType] = {}
        for name in self._queues:
            expected[k.queue(name)] = "list"
            expected[k.wakeup(name)] = "zset"
        for key in (k.queues, k.paused, k.processes, k.in_progress_identities):
            expected[key] = "set"
        for key in (
            k.schedule,
            k.retry,
            k.dead,
            k.live_queues,
            k.schedule_wakeup,
            k.aborted,
            k.beats,
        ):
            expected[key] = "zset"
        for key in (k.in_progress(self._identity), k.unsettled, k.repeat_orphans):
            expected[key] = "list"
        expected[k.last_beat] = "hash"
        expected[k.beating_since] = "hash"
        # Periodic (every key under <ns>:periodic:): the hashes every process shares,
        # and the running lock of each entry this process ticks (a wrong-typed one
        # stopped that entry for good). A slot's claim key is checked by the claim
        # script itself, which reports a wrong type before it writes anything; the
        # ticker moves it aside through the same quarantine script.
        for key in (k.periodic_entries, k.periodic_last, k.periodic_results):
            expected[key] = "hash"
        expected[k.periodic_paused] = "set"  # a wrong type would stop every tick
        for name in self._periodic_names:
            expected[k.periodic_running(name)] = "string"
        # SET NX on a key of another type fails quietly: recovery would never run.
        expected[k.recovery_lock] = "string"
        expected[k.stats_processed] = "integer"
        expected[k.stats_failed] = "integer"
        # Today's and this minute's: the keys every settling script counts into
        # (best effort there: a wrong type would lose the counts unseen).
        now = time.time()
        expected[k.stats_processed_on(today(now))] = "integer"
        expected[k.stats_failed_on(today(now))] = "integer"
        expected[k.history(minute_of(now))] = "hash"
        for name in COUNTERS:
            expected[k.stat(name)] = "integer"
        # Remote signals: read in a pcall by the beat, so a wrong type silences them.
        expected[k.signals(self._identity)] = "list"
        # Unique releases a stopping worker handed over (the releases duty drains it).
        expected[k.unique("~releases")] = "list"
        # Keys named one at a time (a status or result key that said WRONGTYPE).
        for key in self._reported:
            kind = expected_type_of(k, key)
            if kind is not None:
                expected[key] = kind
        return expected

    def report(self, key: str) -> None:
        """A key of ours said WRONGTYPE (one of a family no pass can list: a job's status
        or result key, a lock): check it with the next pass, by its family's type in
        ``key_table``, and wake the pass. Event loop only."""
        if expected_type_of(self._keys, key) is not None and len(self._reported) < MAX_REPORTED:
            self._reported.add(key)
        self.request_check()

    async def check_once(self) -> list[QuarantineRecord]:
        """One pass over every key; returns the keys moved to quarantine."""
        self._last_pass = time.monotonic()
        requested, self._requested = self._requested, False
        reported = set(self._reported)
        records = await guard_keys(
            self._redis, self._keys, self.expected_types(), self._log, ttl=self._ttl
        )
        self._reported -= reported  # checked (a failed pass keeps them for the next)
        if records:
            self._gap = MIN_CHECK_GAP
        elif requested:
            self._gap = min(self._gap * 2, MAX_CHECK_GAP)
        return records


def recovery_keys(keys: Keys, identity: str) -> dict[str, ExpectedType]:
    """The keys orphan recovery's requeue of ``identity`` reads or writes, with their types:
    that process's in-progress list (no live process guards a dead one's) and the shared
    keys beside it."""
    return {
        keys.in_progress(identity): "list",
        keys.last_beat: "hash",
        keys.repeat_orphans: "list",
        keys.dead: "zset",
        keys.queues: "set",
        keys.live_queues: "zset",
        keys.in_progress_identities: "set",
    }


async def guard_recovery_keys(
    redis: Redis, keys: Keys, identity: str, logger: logging.Logger
) -> list[QuarantineRecord]:
    """Recovery's requeue of ``identity`` said WRONGTYPE: move aside whichever of its keys
    has the wrong type (each is logged), so the next pass recovers it."""
    return await guard_keys(redis, keys, recovery_keys(keys, identity), logger)


async def guard_keys(
    redis: Redis,
    keys: Keys,
    expected: Mapping[str, ExpectedType],
    logger: logging.Logger,
    *,
    ttl: int = QUARANTINE_TTL,
) -> list[QuarantineRecord]:
    """Check every key of ``expected`` in one pipeline; move the wrong ones to quarantine."""
    names = list(expected)
    counters = [key for key in names if expected[key] == "integer"]
    async with redis.pipeline(transaction=False) as pipe:
        for key in names:
            pipe.type(key)
        for key in counters:
            pipe.getrange(key, 0, COUNTER_PEEK - 1)
        replies = await pipe.execute(raise_on_error=False)
    types = dict(zip(names, replies[: len(names)], strict=True))
    values = dict(zip(counters, replies[len(names) :], strict=True))

    records: list[QuarantineRecord] = []
    for key in names:
        reply = types[key]
        if isinstance(reply, Exception):
            _unchecked(logger, key, reply)
            continue
        found = _text(reply)
        want = expected[key]
        if found == "none":
            continue  # absent is fine: created when needed
        detail = ""
        if want == "integer" and found == "string":
            value = values[key]
            if isinstance(value, Exception):
                _unchecked(logger, key, value)
                continue
            peeked = value if isinstance(value, bytes) else str(value).encode()
            if guard.holds_integer(peeked):
                continue
            detail = f" holding {peeked[:32]!r}, not an integer"
        elif found == want:
            continue
        record = await _move(redis, keys, logger, ttl, key, found, want, detail)
        if record is not None:
            records.append(record)
    return records


async def _move(
    redis: Redis,
    keys: Keys,
    logger: logging.Logger,
    ttl: int,
    key: str,
    found: str,
    want: ExpectedType,
    detail: str,
) -> QuarantineRecord | None:
    try:
        moved_to = await guard.quarantine(redis, keys, key=key, expected=want, ttl=ttl)
    except Exception as exc:
        if is_outage(exc):
            raise
        logger.error(
            "key guard: %s has type %s%s, expected %s, and could not be moved to "
            "quarantine (%s: %s); it is checked again on the next pass",
            key,
            found,
            detail,
            _described(want),
            type(exc).__name__,
            exc,
        )
        return None
    if moved_to is None:
        logger.info("key guard: %s was fixed before it could be moved; left alone", key)
        return None
    logger.error(
        "key guard: %s has type %s%s, expected %s: moved to %s (kept %s for a human "
        "to look at; the library starts the key afresh)",
        key,
        found,
        detail,
        _described(want),
        moved_to,
        _duration(ttl),
    )
    return QuarantineRecord(key, found, want, moved_to)


def _unchecked(logger: logging.Logger, key: str, exc: Exception) -> None:
    if is_outage(exc):
        raise exc
    logger.error(
        "key guard: could not check %s (%s: %s); the other keys are still checked",
        key,
        type(exc).__name__,
        exc,
    )


def _described(expected: ExpectedType) -> str:
    return "string holding an integer" if expected == "integer" else expected


def _duration(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    return f"{days} days" if days and not rest else f"{seconds} s"
