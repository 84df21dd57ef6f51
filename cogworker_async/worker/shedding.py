"""Jobs held beyond prefetch that sat unrun go back to their queues.

A batch ahead is fetched only while jobs are quick, and quick jobs are gone
within milliseconds. Still held ``SHED_AFTER`` later, they are not: the extra
ones would sit in this worker while others idle. They go back to the front
of their queues in one call, keeping their order: never while a fetch is out
(it may be taking the jobs behind them; the fetcher watches again when it
lands), and the fetcher asks for nothing until the give back has landed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from cogworker_async.worker.giveback import GiveBack
from cogworker_async.worker.handout import Handout

SHED_AFTER = 0.05  # held beyond prefetch this long: not quick jobs after all


class Shedder:
    def __init__(
        self,
        handout: Handout,
        give_back: GiveBack,
        *,
        prefetch: int,
        fetch_out: Callable[[], bool],
        keep: Callable[[Sequence[bytes]], None],
    ) -> None:
        self._handout = handout
        self._give_back = give_back
        self._prefetch = prefetch
        self._fetch_out = fetch_out
        self._keep = keep
        self._timer: asyncio.TimerHandle | None = None
        # How many jobs processors must have taken by the time the timer
        # fires for everything held beyond prefetch when it was set to be gone.
        self._mark = 0
        # Jobs held ahead sat unrun: hold no batch ahead until what is held
        # has drained (``drained()``: a processor found nothing ready).
        self.slow = False

    def watch(self) -> None:
        """Check in ``SHED_AFTER`` that the jobs held beyond prefetch now were taken."""
        excess = len(self._handout.ready) - self._prefetch
        if excess > 0 and self._timer is None:
            self._mark = self._handout.taken + excess
            self._timer = asyncio.get_running_loop().call_later(SHED_AFTER, self._check)

    def drained(self) -> None:
        self.slow = False

    def _check(self) -> None:
        self._timer = None
        if self._handout.closed or self._fetch_out():
            return
        if self._handout.taken >= self._mark:
            self.watch()  # what was held then is gone: quick; watch what is held now
            return
        ready = self._handout.ready
        count = len(ready) - self._prefetch - self._handout.waiting()
        if count <= 0:
            return
        self.slow = True
        self._give_back.later([ready.pop() for _ in range(count)], keep=self._keep)
