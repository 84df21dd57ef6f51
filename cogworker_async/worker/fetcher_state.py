"""What the fetcher tells the rest of the worker: the jobs it holds, the calls
it has out, the acks not yet landed; and its part in a stop (closing, giving
back what it holds, waiting for its calls to land).

A mixin of ``Fetcher`` (its state is set by ``Fetcher.__init__``).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Sequence

import anyio
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store.commands import Ack
from cogworker_async.store.connection import unblock_named
from cogworker_async.worker.acks import AckBook
from cogworker_async.worker.blocking import wait_name
from cogworker_async.worker.demand import Demand
from cogworker_async.worker.giveback import GiveBack
from cogworker_async.worker.handout import Handout

BLOCKING_WAIT = object()  # the blocking loop's entry among the calls out
UNBLOCK_EVERY = 0.1  # seconds between two unblocks of a wait at a stop


class FetcherState:
    """The fetcher's reads and its stop (state set by ``Fetcher``)."""

    _redis: Redis
    _keys: Keys
    _identity: str
    _handout: Handout
    _ready: deque[bytes]
    _give_back: GiveBack
    _fetching: dict[object, float]
    _acks: AckBook
    _demand: Demand
    _kick: asyncio.Event
    _starving: asyncio.Event

    @property
    def redis(self) -> Redis:
        return self._redis

    @property
    def keys(self) -> Keys:
        """The namespace's key names this fetcher reads and acks under."""
        return self._keys

    @property
    def identity(self) -> str:
        """The process identity whose in-progress list this fetcher fills."""
        return self._identity

    @property
    def held(self) -> list[bytes]:
        """Jobs fetched and not yet taken by a processor (waiting, or handed over to one
        that has not resumed yet)."""
        return [*self._handout.held, *self._give_back.pending]

    async def give_back_held(self) -> None:
        """Put every job fetched ahead back on its queue (one processor, a suspect to run)."""
        newest_first = [self._ready.pop() for _ in range(len(self._ready))]
        if newest_first:
            self._ready.extendleft(reversed(await self._give_back.now(newest_first)))

    async def give_back_at_stop(self, unsettled: Sequence[bytes]) -> list[bytes]:
        """Basic fetch, on a graceful stop: every job still ours goes back to the front
        of its queue (there is no list to requeue): give backs the stop cut off, the
        jobs held ahead, and ``unsettled`` (fetched before them: a processor's job cut
        off by the stop), which run first. Returns any the queues refused."""
        newest_first = [*reversed(self._handout.held), *reversed(unsettled)]
        self._handout.ready.clear()
        return await self._give_back.at_stop(newest_first)

    async def calls_landed(self, bound: float) -> None:
        """Wait (up to ``bound`` s) until no call that may bring jobs is out, at a stop.

        Reliable fetch: a call cancelled is not a call over. Its socket's close
        reaches Redis when it does, and a ``BLMOVE`` still blocked there takes
        the first job the shutdown's requeue pushes onto its queue, onto the
        list of a process that has left (only orphan recovery finds it then).
        Basic fetch: the jobs a call popped are nowhere but in its reply. So the
        calls land first; the blocking wait is ended on the server
        (``CLIENT UNBLOCK``, as if timed out), again until it has landed: sent
        before the wait reached the server, an unblock finds nothing to end.
        """
        nudged = 0.0
        with anyio.move_on_after(bound):
            # Polled, at a stop only: an event would cost every call out a set().
            while self._fetching:
                if BLOCKING_WAIT in self._fetching and time.monotonic() - nudged >= UNBLOCK_EVERY:
                    nudged = time.monotonic()
                    await unblock_named(self._redis, wait_name(self._identity))
                await anyio.sleep(0.01)

    @property
    def fetching(self) -> bool:
        """A call that may bring jobs is out (a fetch asking for some, or a blocking wait)."""
        return self.fetching_since() is not None

    def fetching_since(self) -> float | None:
        """When the oldest call still out that may bring jobs went out (monotonic), or None."""
        return min(self._fetching.values(), default=None)

    @property
    def acks_out(self) -> bool:
        """Finished jobs whose ack has not landed yet (they are still on the list)."""
        return self._acks.out

    def pending_ack_raws(self) -> list[bytes]:
        """Finished jobs whose ack hasn't landed yet (still on the list, not strays)."""
        return self._acks.pending_raws()

    def take_pending_acks(self) -> list[Ack]:
        """Every ack not yet landed, taken out: shutdown sends them itself."""
        return self._acks.take_all()

    def close(self) -> None:
        """Stop handing out jobs: waiting processors get None."""
        self._demand.closed = True
        self._handout.close()
        self._kick.set()
        self._starving.set()
