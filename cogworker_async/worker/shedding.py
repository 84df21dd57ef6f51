"""Jobs held unrun while no processor of ours is free go back to their queues.

A batch ahead (and ``prefetch``) is held so that quick jobs never wait for a
round trip, and quick jobs are gone within milliseconds. Jobs still held
``SHED_AFTER`` after the timer was set are not quick. Those beyond
``prefetch`` go back then; those within it once they have sat ``after``
(``Settings.give_back_held_after``, by default the same 50 ms): a job held
here waits for a processor of this worker while one elsewhere could run it
(two workers ``-c 5``, ten long jobs: the sixth sat in one worker for a whole
job's length while the other had a free processor). They go back to the front
of their queues in one call, keeping their order, so by default no job sits in
our hands for more than about ``2 x SHED_AFTER`` (100 ms): the timer is set
once and looked at again when it fires, so a job that came just after it was
set waits one more round. Never while a fetch is out (it may be taking the
jobs behind them; the fetcher watches again when it lands), and the fetcher
asks for nothing until the give back has landed. The jobs held of a queue
paused meanwhile go back the same way: a pause takes effect here within that.

Then the worker is *slow* (no batch ahead) and, once even ``prefetch``'s jobs
went back, holds nothing beyond its waiting processors (``hold_none``) until a
processor finds nothing ready: only then is a job held ahead of use again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from cogworker_async.worker.giveback import GiveBack
from cogworker_async.worker.handout import Handout

# Held this long (the timer's one round) without a processor taking them: not
# quick jobs. Two rounds at most make the issue's ~100 ms bound. The default of
# ``Settings.give_back_held_after``.
SHED_AFTER = 0.05
TOLERANCE = 0.001  # a timer fires at its time or a little after, never much before


class Shedder:
    def __init__(
        self,
        handout: Handout,
        give_back: GiveBack,
        *,
        prefetch: int,
        after: float = SHED_AFTER,
        fetch_out: Callable[[], bool],
        keep: Callable[[Sequence[bytes]], None],
    ) -> None:
        self._handout = handout
        self._give_back = give_back
        self._prefetch = prefetch
        self._after = after
        self._fetch_out = fetch_out
        self._keep = keep
        self._timer: asyncio.TimerHandle | None = None
        # How many jobs processors must have taken by the time the timer
        # fires for everything held when it was set to be gone.
        self._mark = 0
        self._set_at = 0.0  # when the timer was set (monotonic)
        # Since when the jobs held have sat unrun (None: they were taken).
        self._sat_since: float | None = None
        # Jobs held sat unrun: no batch ahead (``slow``), and, once they sat
        # ``after``, not even ``prefetch`` (``hold_none``), until what is held
        # has drained (``drained()``: a processor found nothing ready).
        self.slow = False
        self.hold_none = False

    def watch(self) -> None:
        """Check in ``SHED_AFTER`` that the jobs held now were taken by then."""
        held = len(self._handout.ready)
        if held and self._timer is None:
            self._mark = self._handout.taken + held
            self._set_at = time.monotonic()
            self._timer = asyncio.get_running_loop().call_later(SHED_AFTER, self._check)

    def drained(self) -> None:
        self.slow = self.hold_none = False

    def _check(self) -> None:
        self._timer = None
        if self._handout.closed or self._fetch_out():
            return
        if self._handout.taken >= self._mark:
            self._sat_since = None
            self.watch()  # what was held then is gone: quick; watch what is held now
            return
        if self._sat_since is None:
            self._sat_since = self._set_at
        # Beyond prefetch: back after one round. Within it: once held ``after``.
        keep = self._prefetch
        if time.monotonic() - self._sat_since >= self._after - TOLERANCE:
            keep = 0
        ready = self._handout.ready
        # A processor woken for a job but not yet resumed counts as waiting
        # while the job is in ``ready``: leave it one each.
        count = len(ready) - keep - self._handout.waiting()
        if count > 0:
            self.slow = True
            if keep == 0:
                self.hold_none = True
                self._sat_since = None
            self._give_back.later([ready.pop() for _ in range(count)], keep=self._keep)
        self.watch()  # what is still held: is it taken by the next round?
