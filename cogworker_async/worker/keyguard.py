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
aren't checked.

Every key is isolated: one that can't be checked or moved is logged and the
others are still checked. An outage is raised, for ``run_duty`` to log once.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.store import guard
from cogworker_async.store.faults import is_outage
from cogworker_async.store.guard import COUNTER_PEEK, QUARANTINE_TTL, ExpectedType


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
        ttl: int = QUARANTINE_TTL,
    ) -> None:
        self._redis = redis
        self._keys = keys
        self._settings = settings
        self._identity = identity
        self._queues = list(queues)
        self._log = logger
        self._ttl = ttl

    def expected_types(self) -> dict[str, ExpectedType]:
        """Every key checked, with the type it must have."""
        k = self._keys
        expected: dict[str, ExpectedType] = {}
        for name in self._queues:
            expected[k.queue(name)] = "list"
            expected[k.wakeup(name)] = "zset"
        for key in (k.queues, k.paused, k.processes, k.in_progress_identities):
            expected[key] = "set"
        for key in (k.schedule, k.retry, k.dead, k.live_queues):
            expected[key] = "zset"
        for key in (k.in_progress(self._identity), k.unsettled, k.repeat_orphans):
            expected[key] = "list"
        expected[k.last_beat] = "hash"
        expected[k.beating_since] = "hash"
        # SET NX on a key of another type fails quietly: recovery would never run.
        expected[k.recovery_lock] = "string"
        expected[k.stats_processed] = "integer"
        expected[k.stats_failed] = "integer"
        return expected

    async def check_once(self) -> list[QuarantineRecord]:
        """One pass over every key; returns the keys moved to quarantine."""
        expected = self.expected_types()
        names = list(expected)
        counters = [key for key in names if expected[key] == "integer"]
        async with self._redis.pipeline(transaction=False) as pipe:
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
                self._unchecked(key, reply)
                continue
            found = _text(reply)
            want = expected[key]
            if found == "none":
                continue  # absent is fine: created when needed
            detail = ""
            if want == "integer" and found == "string":
                value = values[key]
                if isinstance(value, Exception):
                    self._unchecked(key, value)
                    continue
                peeked = value if isinstance(value, bytes) else str(value).encode()
                if guard.holds_integer(peeked):
                    continue
                detail = f" holding {peeked[:32]!r}, not an integer"
            elif found == want:
                continue
            record = await self._move(key, found, want, detail)
            if record is not None:
                records.append(record)
        return records

    async def _move(
        self, key: str, found: str, want: ExpectedType, detail: str
    ) -> QuarantineRecord | None:
        try:
            moved_to = await guard.quarantine(
                self._redis, self._keys, key=key, expected=want, ttl=self._ttl
            )
        except Exception as exc:
            if is_outage(exc):
                raise
            self._log.error(
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
            self._log.info("key guard: %s was fixed before it could be moved; left alone", key)
            return None
        self._log.error(
            "key guard: %s has type %s%s, expected %s: moved to %s (kept %s for a human "
            "to look at; the library starts the key afresh)",
            key,
            found,
            detail,
            _described(want),
            moved_to,
            _duration(self._ttl),
        )
        return QuarantineRecord(key, found, want, moved_to)

    def _unchecked(self, key: str, exc: Exception) -> None:
        if is_outage(exc):
            raise exc
        self._log.error(
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
