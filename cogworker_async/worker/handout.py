"""Fetched jobs on their way to processors: the ready queue, the waiting processors, the wake-ups.

Every job here is already on the in-progress list (reliable mode): held in
memory, it is recovered and requeued like any other if the process dies.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence

MAX_BURST = 4096


class Handout:
    """Hands fetched jobs to processors with as few task switches as the jobs allow.

    Not one wake-up per job: a processor whose job returns without awaiting
    anything takes the next one from ``ready`` itself, so a batch of quick
    jobs can cost one task switch in all. How many waiting processors to wake
    for a batch (``burst``) is learnt from what became of the jobs left
    waiting at the last turn.
    """

    def __init__(self, on_wait: Callable[[], None]) -> None:
        # Called whenever a processor finds nothing ready and starts to wait.
        self._on_wait = on_wait
        self.ready: deque[bytes] = deque()
        self._waiters: deque[asyncio.Future[bytes | None]] = deque()
        # Jobs handed to a waiting processor that has not resumed yet.
        self._handed: dict[int, bytes] = {}
        self._wake_pending = False
        self._left = 0
        self.burst = 1
        self.closed = False
        # Jobs taken from ``ready`` by processors, ever (the fetcher tells
        # from it whether jobs it held were run or sat).
        self.taken = 0

    async def get(self) -> bytes | None:
        """The next job, or None once closed."""
        if self.ready:
            self.taken += 1
            return self.ready.popleft()
        if self.closed:
            return None
        future: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        self._on_wait()
        try:
            job = await future
        except asyncio.CancelledError:
            self._handed.pop(id(future), None)
            if future.done() and not future.cancelled() and future.result() is not None:
                # Handed a job in the instant we were cancelled: keep it for another.
                self.ready.appendleft(future.result())  # type: ignore[arg-type]
            else:
                future.cancel()
            raise
        self._handed.pop(id(future), None)
        return job

    @property
    def quick(self) -> bool:
        """The jobs lately were quick: running processors took them from ``ready`` themselves."""
        return self.burst == 1

    def waiting(self) -> int:
        """Processors waiting for a job."""
        return sum(1 for w in self._waiters if not w.done())

    @property
    def held(self) -> list[bytes]:
        """Jobs not yet taken by a processor (ready, or handed to one not yet resumed)."""
        return [*self.ready, *self._handed.values()]

    @property
    def handed(self) -> list[bytes]:
        """Jobs handed to a waiting processor that has not resumed yet."""
        return list(self._handed.values())

    def deliver(self, jobs: Sequence[bytes]) -> None:
        """Make fetched jobs available, handing the first of them to waiting processors now."""
        self.ready.extend(jobs)
        if self._waiters and not self._wake_pending:
            self._hand_out()

    def close(self) -> None:
        """Hand out nothing more: waiting processors get None."""
        self.closed = True
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    def _hand_out(self) -> None:
        """Hand ready jobs to up to ``burst`` waiting processors; look again next turn."""
        woken = 0
        while self.ready and self._waiters and woken < self.burst:
            waiter = self._waiters.popleft()
            if not waiter.done():
                job = self.ready.popleft()
                self.taken += 1
                self._handed[id(waiter)] = job
                waiter.set_result(job)
                woken += 1
        self._left = len(self.ready)
        self._wake_pending = True
        asyncio.get_running_loop().call_soon(self._look_again)

    def _look_again(self) -> None:
        """Learn ``burst`` from what became of the jobs left waiting at the last turn.

        Taken by processors already running: the jobs are quick, wake fewer
        next time (down to one). Still waiting: they await, and need a
        processor each: wake twice as many, now and from then on.
        """
        self._wake_pending = False
        if not self._waiters:
            return
        if self._left:
            if not self.ready:
                self.burst = max(1, self.burst // 2)
                return
            self.burst = min(self.burst * 2, MAX_BURST)
        # Hand out whatever is ready now: left over from the last turn, or
        # delivered since (``deliver`` leaves it to this look while one is
        # due). Returning on "nothing left" alone left such jobs ready beside
        # waiting processors, and the fetcher, counting them held, asked for
        # none: the worker stalled for good.
        if self.ready:
            self._hand_out()
