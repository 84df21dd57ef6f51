"""Suspects: a job recovered from a dead process more than once runs alone.

If it is what killed that process, it kills only itself this time, and only
its own orphan count grows: innocent neighbours are never buried as
``ProcessDied`` for sharing a process with it. The wait for the process to be
free is bounded (``RUN_ALONE_WAIT``): a process busy with long jobs is never
drained for it, and never left idle for long.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping

import anyio

from cogworker_async.worker.fetcher import Fetcher
from cogworker_async.worker.settlement import Settler

# requeue.lua marks a job it recovers from a dead process with this prefix once
# it has been orphaned before (a mark counts only beside its orphan counter).
SUSPECT_PREFIX = b'{"suspect":'
# How long a suspect waits for the process to have nothing else of its own
# before it is given back to the front of its queue (and suspects declined for
# as long): a process busy with long jobs is never drained for it, and never
# left idle for long. Another process, or this one later, takes it.
RUN_ALONE_WAIT = 10.0


class Suspects:
    """The processors' suspects: which marked jobs are suspects, and running one alone.

    ``quiet`` is set by the processors whenever nothing runs; ``none_running``
    is clear while a suspect runs (every other job waits for it).
    """

    def __init__(
        self,
        fetcher: Fetcher,
        settler: Settler,
        running: Mapping[int, object],
        process: Callable[[int, bytes], Awaitable[None]],
        *,
        concurrency: int,
        logger: logging.Logger,
        alone_wait: float | None = None,
        on_cut_off: Callable[[bytes, BaseException], None] = lambda raw, exc: None,
    ) -> None:
        # Told of a suspect the shutdown cancelled while it waited to run (see
        # Processors.interrupted); once running, the processor tells itself.
        self._on_cut_off = on_cut_off
        self._fetcher = fetcher
        self._settler = settler
        self._running = running  # the processors' own dict: what runs now
        self._process = process
        self._concurrency = concurrency
        self._log = logger
        self._alone_wait = RUN_ALONE_WAIT if alone_wait is None else alone_wait
        self._lock = asyncio.Lock()
        self._taken = 0  # suspects taken by a processor and not yet settled
        self.none_running = asyncio.Event()
        self.none_running.set()
        self.quiet = asyncio.Event()
        self.quiet.set()

    async def is_suspect(self, raw: bytes) -> bool:
        """Whether a marked job is a suspect indeed; nothing is fetched while we ask."""
        self._fetcher.isolate(True)
        try:
            return await self._fetcher.is_suspect(raw)
        finally:
            # A suspect is isolated again before anything else runs (no await
            # in between, see run_alone): the lanes see no gap.
            self._fetcher.isolate(False)

    async def run_alone(self, slot: int, raw: bytes) -> None:
        """Run a job recovered from a dead process with nothing else of ours on the list.

        If it is what killed that process, it kills only itself this time, and
        only its own orphan count grows: innocent neighbours are never buried
        as ``ProcessDied`` for sharing a process with it. That includes other
        suspects: one that arrives while another is ours goes back to its
        queue (it runs next, here or elsewhere) rather than wait on our list.

        The wait is bounded (``alone_wait``): a process still busy then gives
        it back to the front of its queue, declines suspects as long, and goes
        on with its other work.
        """
        if self._taken and await self._fetcher.give_back(raw):
            return
        self._taken += 1
        self._fetcher.isolate(True)
        # Where a cancellation finds it: waiting (cut off: noted), being given back
        # (the give back knows), or running (the processor knows).
        waiting = True
        try:
            async with self._lock:
                if self._concurrency == 1:
                    await self._fetcher.give_back_held()  # no other processor to run them
                # Nothing else running, nothing on its way here, no finished
                # job still on the list (its ack or filing not landed), and
                # (when another processor can run them) nothing fetched
                # waiting to run: all would be orphaned with it if it crashed us.
                deadline = time.monotonic() + self._alone_wait
                while (
                    self._running
                    or self._fetcher.fetching
                    or self._fetcher.acks_out
                    or self._settler.pending
                    or (self._concurrency > 1 and self._fetcher.held)
                ):
                    # Only jobs still running make it give up: the rest (a
                    # blocking wait, acks, filings) clear by themselves soon.
                    if self._running and time.monotonic() >= deadline:
                        waiting = False
                        given = await self._fetcher.give_back(raw)
                        waiting = True
                        if given:
                            self._fetcher.decline_suspects(self._alone_wait)
                            self._log.info(
                                "suspect given back to its queue: this process was not "
                                "free to run it alone within %.1f s: %.200r",
                                self._alone_wait,
                                raw,
                            )
                            return
                        deadline = float("inf")  # its queue refused it: still ours, run it
                    self.quiet.clear()
                    with anyio.move_on_after(0.05):
                        await self.quiet.wait()
                self.none_running.clear()
                waiting = False
                try:
                    await self._process(slot, raw)
                finally:
                    self.none_running.set()
        except BaseException as exc:  # why: re-raised; a stop's cut is only noted
            if waiting:
                self._on_cut_off(raw, exc)
            raise
        finally:
            self._taken -= 1
            self._fetcher.isolate(False)
