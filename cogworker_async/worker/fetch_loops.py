"""When the fetcher calls Redis: its two loops.

The batching loop's lanes send acks and demand as one ``fetch.lua`` call
whenever either is waiting (gathering a moment when nobody is short of a job);
the blocking loop waits on Redis while the processors starve and the queues
are dry. What one call sends and does with its reply is ``Fetcher._send`` and
``Fetcher._block_once`` (fetcher.py).

A mixin of ``Fetcher`` (its state is set by ``Fetcher.__init__``).
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import TYPE_CHECKING

import anyio
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store.faults import FailureLog
from cogworker_async.store.limits import Admission, admit_taken
from cogworker_async.worker.acks import AckBook
from cogworker_async.worker.blocking import Woke
from cogworker_async.worker.demand import Demand
from cogworker_async.worker.fetcher_state import BLOCKING_WAIT
from cogworker_async.worker.giveback import GiveBack
from cogworker_async.worker.shedding import Shedder

MAX_IN_FLIGHT = 2
# How long acks and prefetch may wait for company when no processor is short
# of a job: a few more per call, far fewer calls when jobs finish one by one.
GATHER_FOR = 0.001


class FetchLoops:
    """The batching and the blocking loop (state set by ``Fetcher``)."""

    reliable: bool
    _redis: Redis
    _keys: Keys
    _identity: str
    _rng: random.Random
    _give_back: GiveBack
    _shedder: Shedder
    _demand: Demand
    _acks: AckBook
    _fetching: dict[object, float]
    _kick: asyncio.Event
    _short: asyncio.Event
    _starving: asyncio.Event
    _gathering: bool
    _block_failures: FailureLog

    if TYPE_CHECKING:  # one call of each loop, in fetcher.py

        async def _send(self, want: int) -> None: ...

        async def _block_once(self, streak: int) -> Woke: ...

    # --- the batching loop ----------------------------------------------------
    async def batch_loop(self) -> None:
        """Send acks and demand as one call whenever either is waiting.

        ``MAX_IN_FLIGHT`` lanes, each one call at a time. A starved processor
        (waiting, with no job ready or asked for on its behalf) gets a call at
        once, even beside one in flight: it never waits for a round trip it
        isn't in. Acks and prefetch are not urgent: they wait for the call in
        flight to return, or ``GATHER_FOR`` when none is, and meanwhile more
        pile up for the same call — larger batches, far fewer round trips.
        """
        async with anyio.create_task_group() as lanes:
            lanes.start_soon(self._give_back.run, self._kick.set)
            for _ in range(MAX_IN_FLIGHT):
                lanes.start_soon(self._lane)

    async def _lane(self) -> None:
        demand = self._demand
        while True:
            if demand.dry and demand.want() > demand.requested:
                self._starving.set()  # short of jobs, queues dry: the blocking wait is on
            want = demand.lane_want()
            if self._acks.waiting or want:
                if demand.starved(self._acks.waiting):
                    await self._send(want)
                    continue
                if not self._acks.calls_out and not self._gathering:
                    await self._gather()
                    await self._send(demand.lane_want())
                    continue
            self._kick.clear()
            await self._kick.wait()

    async def _gather(self) -> None:
        """Give acks and demand ``GATHER_FOR`` to pile up, unless a processor runs short."""
        self._gathering = True
        try:
            self._short.clear()
            with anyio.move_on_after(GATHER_FOR):
                await self._short.wait()
        finally:
            self._gathering = False

    # --- the blocking loop ----------------------------------------------------
    async def block_loop(self) -> None:
        """While processors starve, block on Redis until work arrives."""
        streak = 0
        while True:
            await self._starving.wait()
            if self._demand.closed:
                return
            if self._demand.isolating:
                # Nothing new while a suspect waits to run alone (isolate()
                # kicks the lanes when it is done, and they look again).
                self._starving.clear()
                continue
            self._fetching[BLOCKING_WAIT] = time.monotonic()
            try:
                woke = await self._block_once(streak)
            except Exception as exc:  # noqa: BLE001 - the loop must outlive any one failure
                self._block_failures.failed(exc)
                await anyio.sleep(0.2 + 0.3 * self._rng.random())
                continue
            finally:
                del self._fetching[BLOCKING_WAIT]
            self._block_failures.succeeded()
            got = woke in (Woke.JOB, Woke.WOKEN)
            streak = 0 if got else streak + 1
            if woke is not Woke.NOTHING:
                self._demand.dry = False  # a job or a wake-up: the lanes look again
            if woke is Woke.JOB:
                # Demand may have gone while it waited (a give back landing
                # wakes it too): what it brought is watched like any fetch.
                self._shedder.watch()
            if self._demand.want() == 0 or woke is not Woke.NOTHING:
                self._starving.clear()
                self._kick.set()

    async def _held_back(self, job: bytes) -> bool:
        """Whether a job a blocking wait took is not to run here: parked by a
        full limit (or gone), as the fetch script parks the jobs it takes."""
        admission = await admit_taken(
            self._redis, self._keys, identity=self._identity, job=job, reliable=self.reliable
        )
        return admission is not Admission.RUN
