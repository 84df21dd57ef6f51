"""Reconciliation: finish pending settlements and requeue this process's own strays.

A stray is an entry on this process's in-progress list that no processor
holds: judged by the process's own memory (running, fetched-not-started,
pending acks and filings), never by the workers hash in Redis, which a
failover can lose while a long job still runs. It is requeued only once seen
stray on two looks in a row, and only if every call that may bring jobs and
was out at the first look has come back since: a job moved by a fetch whose
reply is still on its way is on the list and in no processor's hands, however
long that reply takes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

import orjson
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store import commands
from cogworker_async.worker.settlement import Settler


def jid_of(raw: bytes) -> str:
    try:
        job = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return "?"
    return str(job.get("jid", "?")) if isinstance(job, dict) else "?"


class Reconciler:
    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        settler: Settler,
        *,
        identity: str,
        default_queue: str,
        known: Callable[[], Iterable[bytes]],
        fetching_since: Callable[[], float | None],
        reliable: Callable[[], bool],
        logger: logging.Logger,
    ) -> None:
        self._redis = redis
        self._keys = keys
        self._settler = settler
        self._identity = identity
        self._default_queue = default_queue
        self._known = known
        self._fetching_since = fetching_since
        self._previous_look = 0.0
        self._reliable = reliable
        self._log = logger
        self._previous: set[bytes] = set()
        self.strays_requeued = 0

    async def once(self) -> None:
        await self._settler.settle_pending()
        await self._settler.flush_counters()
        if self._reliable():
            await self._requeue_strays()

    async def _requeue_strays(self) -> None:
        look = time.monotonic()
        listed: list[bytes] = await self._redis.lrange(  # type: ignore[assignment]
            self._keys.in_progress(self._identity), 0, -1
        )
        known = set(self._known())
        strays = {raw for raw in listed if raw not in known}
        previous_look, self._previous_look = self._previous_look, look
        previous, self._previous = self._previous, strays
        out_since = self._fetching_since()
        if out_since is not None and out_since <= previous_look:
            # A call out since before the last look may still bring some of
            # what it saw: judge them at the next look instead.
            return
        for raw in strays & previous:
            result = await commands.give_back(
                self._redis,
                self._keys,
                identity=self._identity,
                jobs=[raw],
                default_queue=self._default_queue,
            )
            if result.given:
                self.strays_requeued += 1
                self._log.warning("requeued stray in-progress job jid=%s", jid_of(raw))
        self._previous = strays - previous
