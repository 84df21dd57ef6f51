"""Jobs of ours put back on their queues, to run next here or elsewhere.

Two callers: a suspect that must not wait on our in-progress list while
another runs alone, and jobs fetched a batch ahead that turned out not to be
quick (they would sit in one worker while others idle).

Invariant: a job is ours (we may run it) only while it is on our list. A give
back whose reply is lost may have run, so "the call failed" never means "still
ours": the call is repeated until Redis answers. It is idempotent — the script
moves only jobs still on the list — so a repeat after a lost reply reports the
jobs as gone, and nothing runs both here and from its queue.

Basic fetch has no list: the jobs held here are in memory only, and each one
given back is pushed. Each call then carries a once-marker key of its own
(``Keys.given_back``), the same for every repeat, which the script writes with
its push: a repeat after a lost reply pushes nothing twice, and a call cut off
by the shutdown is sent again by it (``at_stop``) with its marker, so a job
held ahead is never lost on a graceful stop either.
"""

from __future__ import annotations

import logging
import random
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence

import anyio
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store import commands
from cogworker_async.store.faults import FailureLog

RETRY_MAX = 2.0  # seconds between tries while Redis does not answer


class GiveBack:
    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        *,
        identity: str,
        default_queue: str,
        logger: logging.Logger,
        rng: random.Random,
        on_wrong_type: Callable[[], None] | None = None,
        sources: Callable[[Sequence[bytes]], Mapping[bytes, str]] | None = None,
        listed: bool = True,
    ) -> None:
        self._redis = redis
        # False in basic fetch: the jobs are on no list (see the module's docstring).
        self._listed = listed
        self._calls = 0
        # Basic fetch: calls a cancellation cut off, unanswered (jobs, marker).
        self._unlanded: list[tuple[list[bytes], str]] = []
        # Where each job was fetched from (the fetcher knows): it goes back there.
        self._sources = sources
        self._keys = keys
        self._identity = identity
        self._default_queue = default_queue
        self._log = logger
        self._rng = rng
        self._outage = FailureLog("Give back", logger, on_wrong_type=on_wrong_type)
        # Being given back in the background: still on our list (or, basic fetch,
        # in our hands), still ours.
        self.pending: list[bytes] = []
        self._batches: deque[tuple[list[bytes], Callable[[list[bytes]], None], str | None]] = (
            deque()
        )
        self._wake = anyio.Event()

    @property
    def busy(self) -> bool:
        """A background give back is queued or out: the queues' fronts are about to change."""
        return bool(self.pending)

    async def one(self, raw: bytes) -> bool:
        """Put one job of ours back on its queue (it runs next).

        True when it is no longer ours: moved back, or already gone from the
        list (another process's requeue moved it). False when its queue
        refused it (a key of the wrong type): still ours, the caller keeps it.
        """
        return not await self.now([raw])

    async def now(self, newest_first: Sequence[bytes]) -> list[bytes]:
        """Give jobs back in one atomic call; returns those the queues refused, oldest first."""
        jobs = list(newest_first)
        once = self._marker()
        self.pending.extend(jobs)
        try:
            kept = await self._until_answered(jobs, once)
        except BaseException:  # why: re-raised; a cut-off call is remembered for the stop
            self._cut_off(jobs, once)
            raise
        finally:
            for job in jobs:
                self.pending.remove(job)
        return kept[::-1]

    async def at_stop(self, newest_first: Sequence[bytes]) -> list[bytes]:
        """Basic fetch, on a graceful stop: send again every give back the stop cut off
        (with its own marker: none pushes twice), then give ``newest_first`` back (held
        jobs: nowhere but here, and older than any shed: they run first). Returns every
        job the queues refused."""
        # Cut off first, then those never sent (the run task is over), then the held.
        self._unlanded.extend((jobs, once) for jobs, _, once in self._batches if once)
        self._batches.clear()
        kept: list[bytes] = []
        while self._unlanded:
            jobs, once = self._unlanded[0]
            kept.extend((await self._until_answered(jobs, once))[::-1])
            self._unlanded.pop(0)
        if newest_first:
            kept.extend(await self.now(newest_first))
        return kept

    def _marker(self) -> str | None:
        if self._listed:
            return None
        self._calls += 1
        return self._keys.given_back(f"{self._identity}:{self._calls}")

    def _cut_off(self, jobs: list[bytes], once: str | None) -> None:
        if once is not None:
            self._unlanded.append((jobs, once))

    def later(self, newest_first: Sequence[bytes], keep: Callable[[list[bytes]], None]) -> None:
        """Give jobs back in the background, in one atomic call.

        ``newest_first``: the last one given runs first, so the jobs keep their
        order at the front of their queues. ``keep`` gets any the queues
        refused, oldest first (they are still ours: run them here after all).
        """
        jobs = list(newest_first)
        self.pending.extend(jobs)
        self._batches.append((jobs, keep, self._marker()))
        self._wake.set()

    async def run(self, on_done: Callable[[], None]) -> None:
        """Send the background give backs, one call a batch; ``on_done`` after each lands."""
        while True:
            while not self._batches:
                self._wake = anyio.Event()
                await self._wake.wait()
            jobs, keep, once = self._batches[0]
            try:
                kept = await self._until_answered(jobs, once)
            except BaseException:  # why: re-raised; a cut-off call is remembered for the stop
                self._cut_off(jobs, once)
                raise
            finally:
                self._batches.popleft()
                for job in jobs:
                    self.pending.remove(job)
            if kept:
                keep(kept[::-1])
            on_done()

    async def _until_answered(self, jobs: list[bytes], once: str | None) -> list[bytes]:
        """The jobs still ours once Redis has answered one give back call (``once``: its
        marker in basic fetch, the same for every repeat)."""
        pause = 0.2
        while True:
            sent = time.monotonic()
            try:
                result = await commands.give_back(
                    self._redis,
                    self._keys,
                    identity=self._identity,
                    jobs=jobs,
                    default_queue=self._default_queue,
                    sources=self._sources(jobs) if self._sources is not None else None,
                    once=once,
                )
            except Exception as exc:  # noqa: BLE001 - unanswered: it may have run, so ask again
                self._outage.failed(exc)  # once per episode
                await anyio.sleep(pause * (1 + self._rng.random()))
                pause = min(pause * 2, RETRY_MAX)
                continue
            self._outage.succeeded(sent)
            if result.kept:
                self._log.warning(
                    "%d job(s) could not be given back (their queue key refused them): kept",
                    len(result.kept),
                )
            return result.kept
