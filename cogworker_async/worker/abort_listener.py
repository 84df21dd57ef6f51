"""Aborts of running jobs reach the process that runs them: at once, or within a beat.

Two ways, so that one lost never loses an abort: a listener on the abort
channel (``<ns>:aborts``, its own connection, subscribed again after an
outage), and a check every ``heartbeat_interval`` of the jobs running here
against the tombstones (``<ns>:aborted``), which also runs as soon as the
listener is subscribed again, so an abort sent while it was cut off still
arrives. Neither costs a job anything: the check sends one ``ZMSCORE`` only
while jobs run, and nothing when the process is idle. A jid heard of that runs
nowhere here yet is remembered for a while (``pending_aborts``): a fetched job
still waiting for a processor is filed as aborted when it reaches one.
"""

from __future__ import annotations

import logging
import random
import time

import anyio
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.store import aborts
from cogworker_async.store.connection import connect
from cogworker_async.store.faults import FailureLog, is_outage
from cogworker_async.store.replies import text
from cogworker_async.store.topology import CLUSTER_SCHEMES, scheme_of
from cogworker_async.worker.aborting import FINISHING
from cogworker_async.worker.processor import Processors
from cogworker_async.worker.service import OUTAGE_RETRY

LISTEN_WAIT_MAX = 5.0  # s one wait for a message lasts (below the socket timeout)
PENDING_MAX = 10_000  # jids remembered at most (the oldest are dropped first)
REFUSED_RETRY_MAX = 60.0  # s between tries at most while subscribing is refused


class AbortWatcher:
    """Hands the aborts of jobs running here to the processors."""

    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        settings: Settings,
        processors: Processors,
        *,
        logger: logging.Logger,
        rng: random.Random,
    ) -> None:
        self._redis = redis
        self._keys = keys
        self._settings = settings
        self._processors = processors
        self._log = logger
        self._rng = rng
        self.subscribed = anyio.Event()  # set once the listener first listens (tests)

    def heard(self, jid: str) -> None:
        """An abort announced: the job's processor here acts on it, or it is kept for later."""
        if self._processors.abort(jid):
            return
        pending = self._processors.pending_aborts
        pending[jid] = time.monotonic()
        if len(pending) > PENDING_MAX:
            del pending[next(iter(pending))]

    def _heard_message(self, data: object) -> None:
        """A message on the abort channel: a jid, or something else that is ignored
        (logged once, one line): the listener goes on listening."""
        try:
            jid = text(data)
        except UnicodeDecodeError:
            self._log.warning(
                "abort listener: a message on %s that is not a jid (not UTF-8) ignored: %.80r",
                self._keys.aborts,
                data,
            )
            return
        self.heard(jid)

    async def check_once(self) -> None:
        """The jobs running here against the tombstones (one ``ZMSCORE``; none when idle)."""
        self._prune()
        jids = [
            str(running.job["jid"])
            for running in list(self._processors.running.values())
            if running.job is not None and not running.aborted and running.phase != FINISHING
        ]
        if not jids:
            return
        for jid in await aborts.tombstoned(self._redis, self._keys, jids):
            self._processors.abort(jid)

    def _prune(self) -> None:
        pending = self._processors.pending_aborts
        if not pending:
            return
        cutoff = time.monotonic() - aborts.TOMBSTONE_KEEP
        for jid, heard in list(pending.items()):
            if heard < cutoff:
                del pending[jid]

    async def listen(self) -> None:
        """Listen on the abort channel until cancelled; subscribe again after a failure."""
        if scheme_of(self._settings.redis_url) in CLUSTER_SCHEMES:
            # redis-py's cluster pub/sub leaves a node connection open on every
            # close, and each subscription again would leak one more: on a
            # cluster the tombstone check with each beat carries the aborts.
            await anyio.sleep_forever()
        failures = FailureLog("Abort listener", self._log)
        wait = max(0.05, min(LISTEN_WAIT_MAX, self._settings.socket_timeout / 2))
        # After a refusal that is not an outage (an ACL without the channel), tried
        # again less and less often: the beat check carries the aborts meanwhile.
        backoff = OUTAGE_RETRY
        while True:
            client = connect(self._settings, max_connections=1)
            pubsub = client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self._keys.aborts)
                # What was sent while nobody here listened: in the tombstones.
                await self.check_once()
                failures.succeeded()
                backoff = OUTAGE_RETRY
                self.subscribed.set()
                while True:
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=wait)
                    if message is not None and message.get("type") == "message":
                        self._heard_message(message["data"])
            except Exception as exc:  # noqa: BLE001 - logged once per episode; listen again
                failures.failed(exc)
                if not is_outage(exc):
                    backoff = min(backoff * 2, REFUSED_RETRY_MAX)
            finally:
                with anyio.CancelScope(shield=True):
                    await pubsub.aclose()
                    await client.aclose()
            await anyio.sleep(backoff * (0.5 + self._rng.random()))
