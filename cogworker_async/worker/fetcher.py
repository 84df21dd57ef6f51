"""The coalescing fetcher: every processor's round trips become one script call.

Processors call ``get()`` for their next job and ``ack()`` when one succeeds.
Underneath, one loop gathers whatever acks and demand piled up while its
previous call was in flight and sends them as one ``fetch.lua`` call, which
acknowledges the finished jobs and moves new ones into the in-progress list
atomically. When the queues run dry, a second loop blocks on its own
connection — ``BLMOVE`` for one queue, ``BZPOPMIN`` on the queues' wake-up
markers for several, ``BRPOP`` in basic mode — so an idle worker picks a job
up within milliseconds without polling.

Invariant: a job handed to a processor is on the in-progress list first
(reliable mode); one fetched but not yet handed out is still on that list and
is requeued on shutdown like any other. In basic mode (no list) a job fetched
ahead is held in memory only: given back (shed, or on a graceful stop) it is
pushed once (see ``giveback``), never dropped.

Here: the fetcher's state, the processors' side, and what one call sends and
does with its reply (``_send``, ``_block_once``). Its loops are
``fetch_loops.py``, its reads and stop ``fetcher_state.py``, the fetched
batches' sources ``fetch_sources.py``, its side of the suspects
``fetch_suspects.py``, the queue order ``queue_order.py``.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence

import anyio
from redis.asyncio import Redis

from cogworker_async.holds import Hold
from cogworker_async.keys import Keys
from cogworker_async.observability.history import Run
from cogworker_async.settings import QueueSpec
from cogworker_async.store import commands
from cogworker_async.store.commands import Ack, End, Start
from cogworker_async.store.connection import drop_idle_connections
from cogworker_async.store.faults import FailureLog, is_outage
from cogworker_async.store.limits import LIMITS_MARK
from cogworker_async.store.replies import text
from cogworker_async.timing import idle_backoff
from cogworker_async.unique.lock import DEFAULT_UNIQUE_FOR
from cogworker_async.unique.renewals import FetchRenewals
from cogworker_async.worker.acks import AckBook
from cogworker_async.worker.blocking import Woke, wait_for_work
from cogworker_async.worker.demand import Demand
from cogworker_async.worker.fetch_loops import FetchLoops
from cogworker_async.worker.fetch_sources import SOURCES_PRUNE_AT, FetchSources
from cogworker_async.worker.fetch_suspects import SuspectFetching
from cogworker_async.worker.fetcher_state import BLOCKING_WAIT, FetcherState
from cogworker_async.worker.giveback import GiveBack
from cogworker_async.worker.handout import Handout
from cogworker_async.worker.queue_order import weighted_order
from cogworker_async.worker.shedding import SHED_AFTER, Shedder

# s at most a "working" write waits for a call to ride before one goes for it.
START_RIDE_FOR = 0.01

# Importable from here as before.
__all__ = ["SOURCES_PRUNE_AT", "Fetcher", "weighted_order"]


class Fetcher(FetcherState, FetchLoops, FetchSources, SuspectFetching):
    def __init__(
        self,
        redis: Redis,
        blocking_redis: Redis,
        keys: Keys,
        *,
        identity: str,
        queues: Sequence[QueueSpec],
        strict_order: bool,
        reliable: bool,
        idle_max: float,
        logger: logging.Logger,
        rng: random.Random,
        on_missing_ack: Callable[[Ack], None],
        prefetch: int = 0,
        on_wrong_type: Callable[[], None] | None = None,
        give_back_held_after: float = SHED_AFTER,
    ) -> None:
        self._redis = redis
        self._blocking = blocking_redis
        self._keys = keys
        self._identity = identity
        self._specs = list(queues)
        self._strict = strict_order
        self.reliable = reliable
        self._idle_max = idle_max
        self._log = logger
        self._rng = rng
        self._on_missing_ack = on_missing_ack
        self._handout = Handout(on_wait=self._processor_waits)
        self._ready = self._handout.ready
        # The jobs held, for the check after a heartbeat gap (freeze.py).
        self.handout = self._handout
        # The processors' call for their next job, without a coroutine between.
        self.get: Callable[[], Awaitable[bytes | None]] = self._handout.get
        self._give_back = GiveBack(
            redis,
            keys,
            identity=identity,
            default_queue=self._specs[0].name,
            logger=logger,
            rng=rng,
            on_wrong_type=on_wrong_type,
            sources=self.sources_of,
            listed=reliable,
        )
        # Put one job of ours back on its queue; False if it is still ours.
        self.give_back: Callable[[bytes], Awaitable[bool]] = self._give_back.one
        self._shedder = Shedder(
            self._handout,
            self._give_back,
            prefetch=prefetch,
            after=give_back_held_after,
            fetch_out=lambda: any(c is not BLOCKING_WAIT for c in self._fetching),
            keep=self._deliver,
        )
        self._demand = Demand(self._handout, self._shedder, self._give_back, prefetch=prefetch)
        self._acks = AckBook()
        # Calls out that may bring jobs (fetches asking for some, the blocking
        # wait) → when each went out: until its reply is in, the jobs it moved
        # are on the in-progress list and nowhere in memory.
        self._fetching: dict[object, float] = {}
        self._kick = asyncio.Event()
        # Set when a processor has to wait for a job: ends any gathering.
        self._short = asyncio.Event()
        self._gathering = False
        self._starving = asyncio.Event()
        self._paused: set[str] = set()
        self._broken: set[str] = set()
        # Failures logged once per episode, each loop its own (one may fail while
        # the other works); a WRONGTYPE reply wakes the key guard.
        self._outage = FailureLog("Fetch", logger, on_wrong_type=on_wrong_type)
        self._block_failures = FailureLog("Blocking fetch", logger, on_wrong_type=on_wrong_type)
        self._on_wrong_type = on_wrong_type or (lambda: None)
        # Until then (monotonic) no suspect is taken: this process just gave
        # one back, unable to get itself to itself in time (see Processors).
        self._decline_until = 0.0
        # Where the jobs we hold were fetched from, for the shutdown requeue: a
        # payload may name another queue than the one it sat on, and a job
        # goes back where it was fetched from. Reading one queue, that is it;
        # reading several, each fetched batch is kept with fetch.lua's
        # (queue, count) runs: one entry per batch, nothing per job, and
        # batches none of whose jobs is still ours (``ours``, set by the
        # worker) are dropped every SOURCES_PRUNE_AT batches or so.
        self.sole_queue = self._specs[0].name if len(self._specs) == 1 else None
        self._batches: list[tuple[Sequence[bytes], Sequence[tuple[str, int]]]] = []
        self._prune_at = SOURCES_PRUNE_AT
        self.ours: Callable[[], Iterable[bytes]] = lambda: self.held
        # Unique locks renewed by the fetch that takes their jobs (set by the
        # worker when it minds unique locks; None: the fetch renews none).
        self.renewals: FetchRenewals | None = None
        # The timer that sends "working" writes no call took along (``send_start``).
        self._start_kick: asyncio.TimerHandle | None = None
        # Told of each end or "working" write a call could not make (set by the
        # tracker: logged, a wrong-typed key moved aside).
        self.on_end_failures: Callable[[list[tuple[str, str]]], None] | None = None

    # --- processors' side -------------------------------------------------
    def _processor_waits(self) -> None:
        if not self._ready:
            self._shedder.drained()
        self._kick.set()
        self._short.set()

    def ack(
        self,
        raw: bytes,
        jid: str,
        run: Run | None = None,
        holds: tuple[Hold, ...] = (),
        end: End | None = None,
        member: str = "",
        slots: Sequence[str] = (),
    ) -> None:
        """Acknowledge a finished job with the next call (batched); ``run``: what the
        metrics history counts of it, in the same call; ``holds``: what the job holds
        (a unique or periodic running lock, ...), settled in that call's step if the
        ack removes the job; ``end``: its kept result and final status, written in
        that call's step (reliable fetch only: see ``Tracker.end_in_ack``);
        ``member``: the batch whose membership is all it holds (``Ack.member``);
        ``slots``: the concurrency limits whose slots are all it holds (``Ack.slots``)."""
        if not self.reliable:
            raw, jid = b"", jid if holds or member or slots else ""  # basic mode: only counted
        self._acks.add(Ack(raw, jid, run, holds, end, member, slots))
        self._kick.set()

    def send_start(self, start: Start) -> None:
        """A tracked job's ``working`` status, to ride the next call (best effort).

        Not a call of its own at once: a busy worker's next call (an ack's, a
        fetch's) comes within moments, and a quick job's end takes its start
        back and writes both as one (``Tracker.success_end``), so kicking the
        lanes for each start would only wake them for nothing. A worker that
        makes no call meanwhile (one long job) sends it after ``START_RIDE_FOR``."""
        self._acks.add_start(start)
        if self._start_kick is None:
            self._start_kick = asyncio.get_running_loop().call_later(
                START_RIDE_FOR, self._kick_for_starts
            )

    def _kick_for_starts(self) -> None:
        self._start_kick = None
        if self._acks.starts_waiting:
            self._kick.set()

    def take_start(self, jid: str) -> Start | None:
        """Job ``jid``'s ``working`` write if no call carries it yet (taken out)."""
        return self._acks.take_start(jid)

    def _deliver(self, jobs: Sequence[bytes]) -> None:
        self._handout.deliver(jobs)

    def _order(self) -> list[str]:
        specs = [s for s in self._specs if s.name not in self._paused]
        return weighted_order(specs, self._strict, self._rng)

    async def _send(self, want: int) -> None:
        if not self._acks.waiting and not want:
            return
        call_id = object()
        acks = self._acks.send(call_id)
        starts = self._acks.take_starts()
        self._demand.requested += want
        sent = time.monotonic()
        if want:
            self._fetching[call_id] = sent
        try:
            result = await commands.fetch(
                self._redis,
                self._keys,
                identity=self._identity,
                queues=self._order() if want else [],
                want=want,
                acks=acks,
                reliable=self.reliable,
                suspects=sent >= self._decline_until,
                unique_prefix="" if self.renewals is None else self.renewals.prefix,
                unique_default=DEFAULT_UNIQUE_FOR,
                starts=starts,
            )
        except Exception as exc:  # noqa: BLE001 - any failure: keep the acks, retry soon
            self._acks.failed(call_id)
            self._acks.starts_failed(starts)
            self._fetching.pop(call_id, None)
            self._demand.requested -= want
            self._outage.failed(exc)
            if is_outage(exc):
                await drop_idle_connections(self._redis)
            await anyio.sleep(0.2 + 0.3 * self._rng.random())
            self._kick.set()
            return
        self._demand.requested -= want
        self._outage.succeeded(sent)
        for missing in self._acks.answered(call_id, result.missing_acks):
            self._on_missing_ack(missing)
        if result.broken_queues:
            if set(result.broken_queues) != self._broken:
                self._log.error(
                    "queue key(s) of the wrong type skipped: %s: the key guard moves them aside",
                    ", ".join(f"{self._keys.queue(q)}" for q in result.broken_queues),
                )
            self._on_wrong_type()
        self._broken = set(result.broken_queues)
        if self.renewals is not None:
            self.renewals.note(result.renewals)  # before the jobs are handed out
        if result.end_failures and self.on_end_failures is not None:
            self.on_end_failures(result.end_failures)
        self._deliver(result.jobs)
        self._remember(result.jobs, result.sources)
        self._shedder.watch()
        # Only now: the jobs it moved are in memory (held) at last.
        self._fetching.pop(call_id, None)
        if result.jobs:
            self._demand.last_batch = len(result.jobs)
        if want and len(result.jobs) < want:
            self._demand.dry = True
            self._starving.set()

    async def _block_once(self, streak: int) -> Woke:
        """One blocking wait on the unpaused queues; a job it brings is delivered."""
        paused = await self._redis.smembers(self._keys.paused)
        self._paused = {text(p) for p in paused}
        names = [s.name for s in self._specs if s.name not in self._paused]
        if not names:
            await anyio.sleep(idle_backoff(streak, self._idle_max, self._rng))
            return Woke.NOTHING
        # While declining suspects, never BLMOVE: it would take one at the
        # queue's front all the same. The markers make the lanes look instead.
        on_markers = self.reliable and (len(names) > 1 or self._declining())
        woke, job, queue, stopped = await wait_for_work(
            self._blocking,
            self._keys,
            identity=self._identity,
            queues=self._order() if not self.reliable else names,
            reliable=self.reliable,
            block_for=idle_backoff(streak, self._idle_max, self._rng)
            if on_markers
            else self._idle_max,
        )
        if job is None:
            return woke
        if LIMITS_MARK in job and await self._held_back(job):
            return Woke.WOKEN
        # Only BLMOVE brings a job (reliable mode), from its one queue.
        self._remember([job], [(names[0], 1)])
        if stopped and queue is not None:
            # Paused while we waited (a job enqueued right after the pause):
            # back to the front of its queue, to run after the resume. No
            # fetch until it has landed (Demand.want), then the lanes look.
            self._paused.add(queue)
            self._give_back.later([job], keep=self._deliver)
            return Woke.WOKEN
        self._deliver([job])
        return woke
