"""How many jobs the fetcher asks for, and when asking cannot wait.

Invariant: what is asked for never exceeds what the processors will take
soon — the waiting processors, ``prefetch``, and while jobs are quick
``AHEAD_BATCHES`` batches more — minus what is held or already asked for,
and nothing at all while closing, while a suspect waits to run alone, or
while jobs are being given back: every job asked for is one more on the
in-progress list that nobody runs yet.
"""

from __future__ import annotations

from cogworker_async.worker.giveback import GiveBack
from cogworker_async.worker.handout import Handout
from cogworker_async.worker.shedding import Shedder

# Most jobs one call moves. Large: while jobs are quick, the cost of a call
# (client and Redis) is mostly per call, and a worker running quick jobs is
# bound by how many it gets per round trip (100 -> 300: about +26% no-op
# jobs/s in one process at 28% less CPU per job, BENCHMARKS.md).
MAX_BATCH = 300
# Batches held beyond prefetch while jobs are quick: one runs while the call
# for the next is out, and one more covers a reply that waits for the loop.
AHEAD_BATCHES = 2


class Demand:
    def __init__(
        self, handout: Handout, shedder: Shedder, give_back: GiveBack, *, prefetch: int
    ) -> None:
        self._handout = handout
        self._shedder = shedder
        self._give_back = give_back
        # Jobs fetched ahead of demand (already in progress, so recovered and
        # requeued like any other): a processor finishing a job finds the next
        # one waiting instead of paying a round trip for it.
        self.prefetch = prefetch
        self.last_batch = 0  # jobs the last call that brought any brought
        self.requested = 0  # asked for by calls still out
        # The last fetch came back short: the queues are dry. The lanes ask for
        # no more (they would spin on empty queues) until the blocking wait
        # brings a job or a wake-up; acks still go at once.
        self.dry = False
        self.closed = False
        # While a suspect (a job recovered from a dead process) waits to run
        # alone or runs, nothing new is fetched: a job held here when it
        # crashes us would be orphaned with it.
        self.isolating = 0

    def ahead(self) -> int:
        """How many jobs to hold beyond the waiting processors.

        ``prefetch`` (none while the shedder found jobs held unrun:
        ``hold_none``, see ``shedding.py``); and while jobs are quick (running processors take the
        next one themselves, see ``Handout``) ``AHEAD_BATCHES`` batches more:
        the call for the next batch then goes out as soon as one arrives, and
        is back before those are done, so the worker never sits out a round
        trip.
        """
        if self.prefetch == 0 or self._shedder.hold_none:
            # Asked for none; or jobs held lately sat unrun, prefetch's too: a
            # job held here would wait while a processor elsewhere is free.
            return 0
        quick = self._handout.quick and not self._shedder.slow
        return self.prefetch + (AHEAD_BATCHES * self.last_batch if quick else 0)

    def want(self) -> int:
        """Jobs wanted beyond those held, before counting what calls out will bring."""
        if self.closed or self.isolating or self._give_back.busy:
            return 0
        waiting = self._handout.waiting()
        return max(0, min(MAX_BATCH, waiting + self.ahead() - len(self._handout.ready)))

    def lane_want(self) -> int:
        """What a lane asks for: nothing while the queues are dry (the blocking wait is on)."""
        return 0 if self.dry else max(0, self.want() - self.requested)

    def starved(self, acks_waiting: bool) -> bool:
        """Short of jobs even once every call out returned: the next call goes at once.

        Short: some processor would have none, or the jobs held ahead would be
        under half of ``ahead()`` — a burst of finishing jobs would empty them
        before a gathered call could refill them.
        """
        if self.isolating:
            # A suspect waits for every ack to land before it runs alone.
            return acks_waiting
        if self.closed:
            return False
        waiting = self._handout.waiting()
        return waiting + self.ahead() // 2 > len(self._handout.ready) + self.requested
