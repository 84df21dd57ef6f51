"""The fetcher's part in running suspects alone: declining them for a while,
telling a real one from a marked payload, and pausing fetches meanwhile.

A mixin of ``Fetcher`` (its state is set by ``Fetcher.__init__``).
"""

from __future__ import annotations

import asyncio
import logging
import time

import orjson
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store.faults import is_outage
from cogworker_async.worker.demand import Demand


class SuspectFetching:
    """Suspects, on the fetcher's side (state set by ``Fetcher``)."""

    _redis: Redis
    _keys: Keys
    _log: logging.Logger
    _demand: Demand
    _kick: asyncio.Event
    _decline_until: float

    def decline_suspects(self, seconds: float) -> None:
        """Take no suspect for ``seconds``: a queue whose front is one is skipped meanwhile."""
        self._decline_until = time.monotonic() + seconds

    def _declining(self) -> bool:
        return time.monotonic() < self._decline_until

    async def is_suspect(self, raw: bytes) -> bool:
        """Whether a job carrying the suspect mark is one: its orphan counter is >= 1.

        fetch.lua's rule (``real_suspect``), asked again here for a job that
        reached us without it (the blocking wait's ``BLMOVE``): only
        requeue.lua writes the counter, so a mark a producer wrote runs as a
        plain job. One GET, for marked jobs only. Unanswered: a suspect (the
        safe side).
        """
        try:
            jid = orjson.loads(raw).get("jid")
        except (orjson.JSONDecodeError, AttributeError):
            return False  # not a job object: buried as unparseable, alone or not
        if not isinstance(jid, str):
            return False
        try:
            count = await self._redis.get(self._keys.orphanings(jid))
        except Exception as exc:  # noqa: BLE001 - can't tell: run it alone
            if not is_outage(exc):
                self._log.warning("jid=%s orphan counter unreadable (%s): run alone", jid, exc)
            return True
        try:
            return count is not None and int(count) >= 1
        except ValueError:
            return False

    def isolate(self, on: bool) -> None:
        """Stop (or resume) fetching while a suspect waits for, or has, the process alone."""
        self._demand.isolating += 1 if on else -1
        if not on and self._demand.isolating == 0:
            self._kick.set()
