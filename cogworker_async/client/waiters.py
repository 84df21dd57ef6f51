"""All of one Client's result waiters on one connection.

A waiter never holds a pooled connection: it registers a future under its jid,
and the jid's channel (``<ns>:result_ready:<jid>``) is subscribed on the
Client's one pub/sub connection (made at the first wait, closed with the
Client). Whoever writes a result publishes that channel in the same step (and
so does a finished status written without one), so a result is looked for
(``LINDEX`` + ``EXISTS result_gone`` + the status's ``state``, which tells a
job that finished and kept none: ``result_checks``, + the list's ``PTTL``,
which tells a one-key result past its keeping) exactly when it may be
there: once the subscription is confirmed (a result written before the wait
began), and whenever the channel speaks. The looks and the
(un)subscriptions of one loop turn go out together, so 10,000 waiters cost one
connection and a few pipelines, and ``enqueue`` on the same Client keeps its
pool. After the connection is lost, the reader connects again, subscribes every
awaited jid again, and each confirmation looks again: a result published
meanwhile is still found. The invariant: a waiter whose result is kept hears
of it, whatever was lost on the way, within its timeout.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.exceptions import ResponseError

from cogworker_async.client.result_checks import FinishedUnkept, finished_unkept, unkept_error
from cogworker_async.client.results import expired, open_envelope, wrong_type
from cogworker_async.errors import ResultExpired, ResultTimeout
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.store.connection import connect
from cogworker_async.store.faults import FailureLog, is_outage
from cogworker_async.store.replies import text

LOOK_BATCH = 1000  # jids looked at in one pipeline at most
RETRY_AFTER = 1.0  # s before a failed look or a lost connection is tried again
RETRY_MAX = 30.0  # s between tries at most while Redis refuses

_log = logging.getLogger("cogworker_async.client")

# What a look found, handed to every waiter of the jid: the envelope's bytes,
# or one of these.
_GONE = object()


class ResultWaiters:
    """Waits for kept results: one subscription per awaited jid, one connection in all."""

    def __init__(self, redis: Redis, keys: Keys, settings: Settings) -> None:
        self._redis = redis  # the Client's own pool: the looks, batched
        self._keys = keys
        self._settings = settings
        self._prefix = keys.result_ready("")
        self._waiting: dict[str, set[asyncio.Future[Any]]] = {}
        self._ops: list[tuple[str, str]] = []  # (SUBSCRIBE|UNSUBSCRIBE, channel), in order
        self._looks: set[str] = set()
        self._flush: asyncio.Task[None] | None = None
        self._pubsub: PubSub | None = None
        # Subscribing every awaited jid (after a connect) and sending the queued
        # ops never interleave, so each channel's last word is the one sent last.
        self._sending = asyncio.Lock()
        self._reader: asyncio.Task[None] | None = None
        self._failures = FailureLog("Result waiters", _log)
        self._rng = random.Random()

    async def wait(self, jid: str, timeout: float | None, keeps: bool | None = None) -> Any:  # noqa: ASYNC109 - the API's
        """The job's value (see ``Client.result``); ``keeps``: whether the job is known
        to keep its result (None: not known), which says what a finished job that
        kept nothing means (``result_checks``)."""
        if timeout is not None and timeout <= 0:
            # No wait at all: one look, as "is it done yet?".
            return self._open(jid, await self._look_once(jid), timeout, keeps)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        futures = self._waiting.setdefault(jid, set())
        futures.add(future)
        if len(futures) == 1:
            self._queue_op("SUBSCRIBE", jid)
        self._start_reader()
        try:
            async with asyncio.timeout(timeout):
                found = await future
        except TimeoutError:
            raise ResultTimeout(f"no result for job {jid} within {timeout} s") from None
        finally:
            self._forget(jid, future)
        return self._open(jid, found, timeout, keeps)

    def _open(self, jid: str, found: Any, timeout: float | None, keeps: bool | None) -> Any:
        if found is None:
            raise ResultTimeout(f"no result for job {jid} within {timeout} s")
        if isinstance(found, FinishedUnkept):
            raise unkept_error(jid, found, keeps)
        if found is _GONE:
            raise ResultExpired(f"job {jid} finished but its result is no longer kept")
        if isinstance(found, Exception):
            raise type(found)(*found.args)  # a fresh one per waiter (its own traceback)
        return open_envelope(self._keys.result(jid), jid, found)

    async def _look_once(self, jid: str) -> Any:
        """What one look finds now: the envelope, ``_GONE``, an error, or None."""
        pipe = self._redis.pipeline(transaction=False)
        pipe.lindex(self._keys.result(jid), 0)
        pipe.exists(self._keys.result_gone(jid))
        pipe.hget(self._keys.status(jid), "state")
        pipe.pttl(self._keys.result(jid))
        found, gone, state, pttl = await pipe.execute(raise_on_error=False)
        return self._found(jid, found, gone, state, pttl)

    def _found(self, jid: str, found: Any, gone: Any, state: Any, pttl: Any) -> Any:
        """A look's replies: the result list's first element, the marker's
        ``EXISTS``, the status's state and the list's ``PTTL`` (the two shapes of
        ``store/results.py``: a one-key envelope in its last ``gone_for`` s is gone)."""
        if isinstance(found, ResponseError):
            return wrong_type(self._keys.result(jid), found)
        if isinstance(found, Exception):
            raise found
        if found is not None:
            return _GONE if expired(found, pttl) else found
        if gone is True or gone == 1:
            return _GONE
        # A status hash of the wrong type (its reply an error) says nothing here.
        return finished_unkept(state, found, gone)

    async def close(self) -> None:
        """Stop the reader and close the connection; a wait still going fails at once."""
        waiting, self._waiting = self._waiting, {}
        for jid, futures in waiting.items():
            for future in futures:
                if not future.done():
                    future.set_exception(
                        RuntimeError(f"the Client was closed while waiting for job {jid}")
                    )
        for task in (self._reader, self._flush):
            if task is not None:
                task.cancel()
        for task in (self._reader, self._flush):
            if task is not None:
                await asyncio.gather(task, return_exceptions=True)
        self._reader = self._flush = None

    # --- bookkeeping ------------------------------------------------------------

    def _forget(self, jid: str, future: asyncio.Future[Any]) -> None:
        futures = self._waiting.get(jid)
        if futures is None:
            return
        futures.discard(future)
        if not futures:
            del self._waiting[jid]
            self._queue_op("UNSUBSCRIBE", jid)

    def _settle(self, jid: str, found: Any) -> None:
        for future in self._waiting.get(jid, ()):
            if not future.done():
                future.set_result(found)

    def _queue_op(self, command: str, jid: str) -> None:
        self._ops.append((command, self._prefix + jid))
        self._schedule_flush()

    def _look_soon(self, jid: str) -> None:
        if jid in self._waiting:
            self._looks.add(jid)
            self._schedule_flush()

    def _schedule_flush(self) -> None:
        if self._flush is None or self._flush.done():
            self._flush = asyncio.get_running_loop().create_task(self._flush_soon())

    async def _flush_soon(self) -> None:
        # From the next loop turn: every op and look of this turn goes in one batch.
        while self._ops or self._looks:
            await asyncio.sleep(0)
            await self._send_ops()
            await self._look()

    async def _send_ops(self) -> None:
        """Send the (un)subscriptions in order, runs of one command as one call.

        Without a connection they are dropped: the reader subscribes every
        awaited jid when it connects.
        """
        async with self._sending:
            ops, self._ops = self._ops, []
            pubsub = self._pubsub
            if pubsub is not None:
                await self._send(pubsub, ops)

    async def _send(self, pubsub: PubSub, ops: list[tuple[str, str]]) -> None:
        try:
            start = 0
            while start < len(ops):
                command = ops[start][0]
                end = start
                while end < len(ops) and ops[end][0] == command and end - start < LOOK_BATCH:
                    end += 1
                channels = [channel for _, channel in ops[start:end]]
                await pubsub.execute_command(command, *channels)
                start = end
        except Exception as exc:  # noqa: BLE001 - the reader sees the link die and resubscribes
            self._failures.failed(exc)

    async def _look(self) -> None:
        """Look for the results of the jids that may have one (one pipeline per batch)."""
        jids = [jid for jid in self._looks if jid in self._waiting]
        self._looks.clear()
        for start in range(0, len(jids), LOOK_BATCH):
            batch = jids[start : start + LOOK_BATCH]
            pipe = self._redis.pipeline(transaction=False)
            for jid in batch:
                pipe.lindex(self._keys.result(jid), 0)
                pipe.exists(self._keys.result_gone(jid))
                pipe.hget(self._keys.status(jid), "state")
                pipe.pttl(self._keys.result(jid))
            try:
                replies = await pipe.execute(raise_on_error=False)
            except Exception as exc:  # noqa: BLE001 - looked at again shortly; waiters wait
                self._failures.failed(exc)
                asyncio.get_running_loop().call_later(RETRY_AFTER, self._look_again, batch)
                continue
            for index, jid in enumerate(batch):
                try:
                    found = self._found(jid, *replies[4 * index : 4 * index + 4])
                except Exception as exc:  # noqa: BLE001 - this jid's reply failed: looked at again
                    self._failures.failed(exc)
                    asyncio.get_running_loop().call_later(RETRY_AFTER, self._look_again, [jid])
                    continue
                if found is not None:
                    self._settle(jid, found)

    def _look_again(self, jids: list[str]) -> None:
        for jid in jids:
            self._look_soon(jid)

    # --- the connection -----------------------------------------------------------

    def _start_reader(self) -> None:
        if self._reader is None or self._reader.done():
            self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        """Connect, subscribe every awaited jid, and hand what the channels say to
        the looks; after a failure, again (logged once per episode)."""
        wait = max(0.05, min(5.0, self._settings.socket_timeout / 2))
        backoff = RETRY_AFTER
        while True:
            try:
                client = connect(self._settings, max_connections=1)
                pubsub = client.pubsub()
                try:
                    await pubsub.connect()  # type: ignore[no-untyped-call]
                    async with self._sending:
                        self._pubsub = pubsub
                        self._ops.clear()  # superseded: every awaited jid is subscribed now
                        channels = [self._prefix + jid for jid in self._waiting]
                        for start in range(0, len(channels), LOOK_BATCH):
                            await pubsub.execute_command(
                                "SUBSCRIBE", *channels[start : start + LOOK_BATCH]
                            )
                    self._failures.succeeded()
                    backoff = RETRY_AFTER
                    while True:
                        message = await pubsub.get_message(timeout=wait)
                        if message is not None:
                            self._heard(message)
                finally:
                    self._pubsub = None
                    await asyncio.shield(self._close(pubsub, client))
            except Exception as exc:  # noqa: BLE001 - logged once per episode; connect again
                self._failures.failed(exc)
                if not is_outage(exc):
                    backoff = min(backoff * 2, RETRY_MAX)
            await asyncio.sleep(backoff * (0.5 + self._rng.random()))

    def _heard(self, message: dict[str, Any]) -> None:
        # A confirmed subscription (the result may have been written before it)
        # and a publish both mean: look now.
        if message.get("type") in ("subscribe", "message"):
            channel = text(message["channel"])
            if channel.startswith(self._prefix):
                self._look_soon(channel[len(self._prefix) :])

    @staticmethod
    async def _close(pubsub: PubSub, client: Redis) -> None:
        try:
            await pubsub.aclose()
            await client.aclose()
        except Exception as exc:  # noqa: BLE001 - a link already broken; nothing to keep
            _log.debug("closing the result waiters' connection: %s", exc)
