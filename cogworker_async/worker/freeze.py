"""After a freeze: the held jobs recovery took back are dropped, and no jid starts twice here.

A process frozen (SIGSTOP, a long GC or VM pause) past ``orphan_threshold`` is
rightly judged dead: another process requeues its in-progress list. Continued,
it still holds the jobs it had fetched ahead, which are back on their queues
(and may run elsewhere), and it may fetch the requeued copy of a job it is
running. Only the jobs *running* at the freeze may run twice.

So a processor about to start a job compares the clock with ``fresh_until``
(the last beat that landed, plus ``heartbeat_ttl``; written by the heartbeat
thread, which sets it to -inf when it sees the gap first, as the loop does
while it watches): one attribute test a job. Past it (a gap longer than the
TTL: our presence may have lapsed and we may have been judged dead), before
anything starts, one check (shared by every processor that arrives meanwhile) waits for
a beat to land — from then on nobody judges us dead — then reads our own
in-progress list once and drops from our hands every held job that is no
longer on it: those in the ready queue, those handed to a processor not yet
resumed, and those of the processors waiting on the check. A job no longer
listed is someone else's now; it is not run, and not acked.

The jids running at the check are watched until they end: a copy of one
(requeued by the recovery, fetched here again) waits for the run here to end
before it starts, so one process never runs a jid twice at the same time.

Basic fetch keeps no list and nothing of ours is requeued: no check there.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable

import anyio
import orjson
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store.faults import FailureLog
from cogworker_async.worker.handout import Handout

POLL = 0.02  # s between looks while waiting for a beat, or for a run here to end
RETRY = 0.2  # s before the list is read again after a failure
# How long jobs found gone are looked out for (a processor handed one resumes
# within a loop turn): past it the slow path ends even if one never came.
DROP_WATCH = 2.0


class _NeverFrozen:
    """What a processor built without a guard reads: never past it, never watching."""

    fresh_until = math.inf


NEVER_FROZEN = _NeverFrozen()


def jid_of(raw: bytes) -> str | None:
    """The job's jid, or None for a payload that has none (buried by the processor)."""
    try:
        jid = orjson.loads(raw).get("jid")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return jid if isinstance(jid, str) else None


class FreezeGuard:
    """Checks, after a heartbeat gap, that what this process is about to start is still its own."""

    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        *,
        identity: str,
        ttl: float,
        listed: bool,
        handout: Handout,
        claimed: Callable[[], Iterable[bytes]],
        running_jids: Callable[[], set[str]],
        logger: logging.Logger,
    ) -> None:
        self._redis = redis
        self._list = keys.in_progress(identity)
        self._ttl = ttl
        self._handout = handout
        self._claimed = claimed
        self._running_jids = running_jids
        self._log = logger
        self._listed = listed
        # The one value a start tests: the last landed beat's deadline, or -inf
        # while there is something to check or watch (every start looks then).
        # Basic fetch: never past it (nothing of ours is requeued).
        now = time.monotonic()
        self.fresh_until = now + ttl if listed else math.inf
        # Written by the heartbeat thread, under the lock: when the last beat
        # that landed was sent, and whether a gap came before it that the loop
        # has not checked yet (fresh_until then stays behind, whichever thread
        # was first to run after the freeze).
        self._lock = threading.Lock()
        self._last_sent = now
        self._gap_unchecked = False
        # Slow path on for every start: jobs found gone still to be met, or
        # jids running at the check still running.
        self.watching = False
        self._gone: Counter[bytes] = Counter()
        self._gone_until = 0.0
        self._running_at_gap: set[str] = set()
        self._check: asyncio.Task[None] | None = None
        # Jobs processors took and wait on the check with: claimed, not started.
        self._admitting: Counter[bytes] = Counter()
        self._outage = FailureLog("Check after a heartbeat gap", logger)
        self.checks = 0  # checks done (tests, logs)

    def beaten(self, sent_at: float) -> None:
        """A beat sent at ``sent_at`` (monotonic) landed; called from the heartbeat thread."""
        if not self._listed:
            return
        with self._lock:
            if sent_at - self._last_sent > self._ttl:
                # The thread may run first after a freeze: the loop must still check.
                self._gap_unchecked = True
            self._last_sent = sent_at
            self._gate()

    def _gate(self) -> None:
        """Set what a start tests (under the lock: both threads write it)."""
        pending = self._gap_unchecked or self.watching
        self.fresh_until = -math.inf if pending else self._last_sent + self._ttl

    async def admit(self, raw: bytes) -> bool:
        """Whether the job a processor just took may start (False: drop it, it is not ours).

        Called only when past ``fresh_until``; may wait: for the
        check after a gap, or for this process's run of the same jid to end.
        """
        if self._gap_unchecked or time.monotonic() - self._last_sent > self._ttl:
            if self._check is None or self._check.done():
                self._check = asyncio.get_running_loop().create_task(self._check_once())
            self._admitting[raw] += 1
            try:
                # Shielded: a processor cancelled meanwhile (a stop) leaves the
                # check to those still waiting on it.
                await asyncio.shield(self._check)
            finally:
                self._admitting[raw] -= 1
        if not self.watching:
            return True
        if self._gone[raw] > 0:
            self._gone[raw] -= 1
            if self._gone[raw] == 0:
                del self._gone[raw]
            self._update_watch()
            return False
        jid = jid_of(raw)
        if jid is not None and jid in self._running_at_gap:
            # Polled, after a gap only: an event would cost every job's end a set().
            while jid in self._running_jids():  # noqa: ASYNC110
                await anyio.sleep(POLL)
        self._update_watch()
        return True

    def _held(self) -> Counter[bytes]:
        """Every copy this process holds: taken by a processor, handed, or ready."""
        held = Counter(self._claimed())
        held.update(self._handout.handed)
        held.update(self._handout.ready)
        return held

    def _update_watch(self) -> None:
        self._running_at_gap &= self._running_jids()
        if self._gone and time.monotonic() > self._gone_until:
            self._gone.clear()
        self.watching = bool(self._gone or self._running_at_gap)
        with self._lock:
            self._gate()

    async def _check_once(self) -> None:
        """Wait for a beat to land, then drop every held job our list no longer has."""
        # A beat landed lately: nobody judges us dead from now on. Polled: the
        # heartbeat thread moves it (no loop-side event to wait on).
        while time.monotonic() - self._last_sent >= self._ttl:  # noqa: ASYNC110
            await anyio.sleep(POLL)
        while True:
            sent = time.monotonic()
            # What we hold as the read goes out: the fetcher keeps fetching while
            # the read is on its way, and a job it lands meanwhile is on our list
            # after the snapshot the read returns. Only these copies are judged.
            before = self._held()
            try:
                listed = await self._redis.lrange(self._list, 0, -1)
            except Exception as exc:  # noqa: BLE001 - unanswered: nothing starts until it is
                self._outage.failed(exc)
                await anyio.sleep(RETRY)
                continue
            self._outage.succeeded(sent)
            break
        # From here to the end, no await: what is held now is judged as one.
        self.checks += 1
        left = Counter(listed)
        # Copies that came while the read was out are listed, if after its snapshot.
        left.update(self._held() - before)
        # Jobs past their start (running, or waiting beside a suspect) hold their
        # entries; those a processor took and is checking now are judged below.
        waiting = +self._admitting
        left.subtract(Counter(self._claimed()) - waiting)
        gone: Counter[bytes] = Counter()
        for raw in [*waiting.elements(), *self._handout.handed]:
            if left[raw] > 0:
                left[raw] -= 1
            else:
                gone[raw] += 1
        ready = self._handout.ready
        kept = []
        for raw in ready:
            if left[raw] > 0:
                left[raw] -= 1
                kept.append(raw)
        dropped = len(ready) - len(kept) + sum(gone.values())
        if len(kept) < len(ready):
            ready.clear()
            ready.extend(kept)
        self._gone = gone
        self._gone_until = time.monotonic() + DROP_WATCH
        self._running_at_gap = self._running_jids()
        self._update_watch()
        with self._lock:
            self._gap_unchecked = False
            self._gate()
        self._log.warning(
            "heartbeat gap longer than heartbeat_ttl (%g s): checked what this process holds "
            "against its in-progress list; %d job(s) taken back by recovery dropped, "
            "%d running job(s) watched",
            self._ttl,
            dropped,
            len(self._running_at_gap),
        )
