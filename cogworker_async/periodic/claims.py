"""The ticker's Redis side: a batch of slot claims sent and their outcomes handled, and
the last-slot stamps read at start.

A bad key stops only what it touches, and never for long:

- a key a claim writes with the wrong type (the claim key, the last-slot hash,
  the queue, the queues set, the running lock) is reported by the claim
  script before it writes anything; it is moved to quarantine here (logged
  with where it went) and the slot claimed again at once;
- a last-slot stamp that is not a number is moved aside (logged once) and its
  entry starts afresh; the other entries never see it;
- any other failed claim is logged once per entry until that entry claims
  again, and its slot is given up (retried, it would be retried every tick);
  an outage is raised, for the duty to retry the whole pass.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence

from redis.asyncio import Redis

from cogworker_async import payload
from cogworker_async.keys import Keys
from cogworker_async.limits import LIMITS
from cogworker_async.periodic.entries import Entry
from cogworker_async.periodic.timing import claim_life
from cogworker_async.store import guard
from cogworker_async.store.faults import is_outage
from cogworker_async.store.limits import MARK_EVERY, mark_limits_used
from cogworker_async.store.periodic import (
    ClaimOutcome,
    SlotClaim,
    claim_slots,
    set_aside_last,
)
from cogworker_async.store.replies import text

# (entry, slot, as a catch-up of a missed slot, the entry's interval)
Wanted = tuple[Entry, float, bool, float]


def slot_id(slot: float) -> str:
    """A slot as written in keys: whole seconds without a fraction."""
    return format(slot, ".3f").rstrip("0").rstrip(".")


def slot_jid(entry: Entry, slot: float) -> str:
    """Deterministic: the same for every process (and every version of the entry)
    claiming this slot (24 hex)."""
    raw = f"{entry.name}:{slot_id(slot)}".encode()
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


class Claimer:
    """Sends claims, handles their outcomes; counts what this process pushed."""

    def __init__(self, redis: Redis, keys: Keys, logger: logging.Logger) -> None:
        self._redis = redis
        self._keys = keys
        self._log = logger
        self._failing: set[str] = set()  # entries whose failed claim was logged
        self._digests: dict[str, tuple[Entry, str]] = {}
        self.pushed = 0
        self._limits_marked = -MARK_EVERY

    async def claim(self, wanted: Sequence[Wanted], now: float) -> int:
        """Claim each (entry, slot) in one pipeline; returns how many this process pushed."""
        if any(LIMITS in w[0].options for w in wanted):
            await self._mark_limits()
        claims = [self._slot_claim(w, now) for w in wanted]
        outcomes = await claim_slots(self._redis, self._keys, claims)
        retry: list[int] = []
        for i, outcome in enumerate(outcomes):
            if outcome.kind == "wrongtype" and await self._move_aside(wanted[i][0], outcome):
                retry.append(i)
        if retry:
            again = await claim_slots(self._redis, self._keys, [claims[i] for i in retry])
            for i, outcome in zip(retry, again, strict=True):
                outcomes[i] = outcome
        pushed = 0
        for (entry, slot, _, _), outcome in zip(wanted, outcomes, strict=True):
            pushed += self._handle(entry, slot, outcome)
        self.pushed += pushed
        return pushed

    async def _mark_limits(self) -> None:
        """As a client does: limits are in use (``Keys.limits_used``) before a run
        with limits is pushed, or the fetch would take it unchecked; again every
        ``MARK_EVERY`` s (a Redis that lost its data)."""
        at = time.monotonic()
        if at - self._limits_marked >= MARK_EVERY:
            await mark_limits_used(self._redis, self._keys)
            self._limits_marked = at

    def _slot_claim(self, wanted: Wanted, now: float) -> SlotClaim:
        entry, slot, catch_up, interval = wanted
        jid = slot_jid(entry, slot)
        return SlotClaim(
            name=entry.name,
            slot=slot_id(slot),
            queue=entry.queue,
            jid=jid,
            payload=slot_payload(entry, slot, now, jid),
            claim_ms=int(claim_life(slot, now, interval) * 1000),
            lock_ms=0 if entry.overlap else max(1, int(entry.queued_ttl * 1000)),
            catch_up=catch_up,
            digest=self._digest(entry),
        )

    def _digest(self, entry: Entry) -> str:
        # Cached: the hash is an orjson dump and a sha1 of the definition per call.
        found = self._digests.get(entry.name)
        if found is None or found[0] is not entry:
            found = self._digests[entry.name] = (entry, entry.digest)
        return found[1]

    def _handle(self, entry: Entry, slot: float, outcome: ClaimOutcome) -> int:
        kind = outcome.kind
        if kind == "error":
            assert outcome.error is not None
            if is_outage(outcome.error):
                raise outcome.error
            if entry.name not in self._failing:
                self._failing.add(entry.name)
                self._log.error(
                    "Periodic entry %s: the claim of slot %s failed (%s: %s); its slot is not "
                    "run (logged once until the entry claims again)",
                    entry.name,
                    slot_id(slot),
                    type(outcome.error).__name__,
                    outcome.error,
                )
            return 0
        if kind == "wrongtype":
            # Could not be moved (logged there): the slot is given up.
            return 0
        self._failing.discard(entry.name)
        if kind == "held":
            # This process decided the slot, so the skip is logged once, here.
            self._log.warning(
                "Periodic entry %s: slot %s skipped: the previous run (jid=%s) is still "
                "queued or running (overlap=False)",
                entry.name,
                slot_id(slot),
                outcome.holder,
            )
        return 1 if kind == "pushed" else 0

    async def _move_aside(self, entry: Entry, outcome: ClaimOutcome) -> bool:
        """Quarantine the wrong-typed key a claim reported; True when it is gone."""
        assert outcome.key is not None
        expected = outcome.expected or "string"
        try:
            moved_to = await guard.quarantine(
                self._redis,
                self._keys,
                key=outcome.key,
                expected=expected,  # type: ignore[arg-type]
            )
        except Exception as exc:
            if is_outage(exc):
                raise
            self._log.error(
                "Periodic entry %s: %s has type %s, expected %s, and could not be moved to "
                "quarantine (%s: %s); its slot is not run",
                entry.name,
                outcome.key,
                outcome.found,
                expected,
                type(exc).__name__,
                exc,
            )
            return False
        if moved_to is not None:
            self._log.error(
                "Periodic entry %s: %s has type %s, expected %s: moved to %s (kept for a "
                "human to look at); the slot is claimed again",
                entry.name,
                outcome.key,
                outcome.found,
                expected,
                moved_to,
            )
        return True

    async def read_lasts(self, names: Sequence[str]) -> dict[str, float]:
        """Each entry's last slot; a stamp that is not a number is moved aside (logged
        once, here) and its entry reads as never run."""
        if not names:
            return {}
        raw = await self._redis.hmget(self._keys.periodic_last, list(names))
        lasts: dict[str, float] = {}
        for name, value in zip(names, raw, strict=True):
            if value is None:
                continue
            try:
                lasts[name] = float(text(value))
            except ValueError:
                await self._set_aside(name, value)
        return lasts

    async def _set_aside(self, name: str, value: bytes | str) -> None:
        where = self._keys.quarantine(self._keys.periodic_last)
        try:
            seen = value if isinstance(value, bytes) else value.encode()
            moved = await set_aside_last(self._redis, self._keys, name=name, seen=seen)
        except Exception as exc:
            if is_outage(exc):
                raise
            moved = "blocked"
            where = f"nowhere ({type(exc).__name__}: {exc})"
        done = {
            "moved": f"moved to field {name!r} of {where}",
            "changed": "rewritten meanwhile by a claim: left alone",
            "blocked": f"left in place ({where} is unusable): the next claim overwrites it",
        }[moved]
        self._log.warning(
            "Periodic entry %s: its last-slot stamp in %s is %r, not a number: %s; the "
            "entry starts afresh, as if it had never run",
            name,
            self._keys.periodic_last,
            value[:64],
            done,
        )
