"""Settlement's filings sent to Redis: filed now, or kept pending when Redis
refuses and tried again by reconciliation (with a back-off after a refusal
that is not an outage), or handed over at shutdown (see ``settlement.py``).

A mixin of ``Settler`` (its state is set by ``Settler.__init__``).
"""

from __future__ import annotations

import logging
import random
import time

from redis.asyncio import Redis

from cogworker_async.holds import released
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.store import aborts, commands
from cogworker_async.store.commands import FileOutcome, Filing
from cogworker_async.store.faults import FailureLog, is_outage
from cogworker_async.store.stats import add_stat
from cogworker_async.unique.lock import Release
from cogworker_async.unique.releases import DeferredReleases

DUPLICATE_WARNING = "recovered while still running here: it may have run twice"
RETRY_FIRST = 1.0  # s before a filing refused by a non-outage error is tried again
RETRY_MAX = 60.0


class FilingCalls:
    """Filing, pending filings and the duplicates counted (state set by ``Settler``)."""

    _redis: Redis
    _keys: Keys
    _settings: Settings
    _identity: str
    _listed: bool
    _log: logging.Logger
    _rng: random.Random
    pending: dict[bytes, Filing]
    _backoff: dict[bytes, tuple[float, float]]
    _failures: FailureLog
    duplicates_suspected: int
    _unflushed_duplicates: int
    releases: DeferredReleases | None

    async def file(self, filing: Filing) -> bool:
        """File now, or keep it pending if Redis refuses; never raises (but cancellation).

        True when a retry was settled as aborted instead: an abort answered
        "cancelling" landed while it was being filed (its tombstone)."""
        sent = time.monotonic()
        try:
            outcome = await self._file(filing)
        except Exception as exc:  # noqa: BLE001 - whatever failed, the job stays ours to file
            self._keep_pending(filing, exc)
            return False
        self._failures.succeeded(sent)
        return outcome is FileOutcome.ABORTED

    def _keep_pending(self, filing: Filing, exc: Exception) -> None:
        """Keep a filing Redis refused for reconciliation; named once, when it is first kept."""
        first = filing.raw not in self.pending
        self.pending[filing.raw] = filing
        self._failures.failed(exc)  # once per episode; WRONGTYPE wakes the key guard
        if is_outage(exc):
            self._backoff.pop(filing.raw, None)  # tried on every pass until Redis is back
        else:
            previous = self._backoff.get(filing.raw)
            delay = RETRY_FIRST if previous is None else min(previous[1] * 2, RETRY_MAX)
            jittered = delay * (0.5 + self._rng.random())
            self._backoff[filing.raw] = (time.monotonic() + jittered, delay)
        if first:
            self._log.warning(
                "jid=%s: could not file its failure (%s): kept pending, %s",
                filing.jid,
                type(exc).__name__,
                "filed when Redis is back" if is_outage(exc) else "tried again with back-off",
            )

    async def _file(self, filing: Filing) -> FileOutcome:
        if filing.aborted:
            settled = await aborts.settle_aborted(
                self._redis,
                self._keys,
                identity=self._identity,
                raw=filing.raw,
                jid=filing.jid,
                holds=filing.holds,
                listed=self._listed,
            )
            if not settled:
                self.note_duplicate(filing.jid)
                return FileOutcome.GONE
            return FileOutcome.FILED
        filed = await commands.file(
            self._redis,
            self._keys,
            identity=self._identity,
            filing=filing,
            dead_max_jobs=self._settings.dead_max_jobs,
            dead_timeout=self._settings.dead_timeout,
            listed=self._listed,
        )
        if filed is FileOutcome.GONE:
            self.note_duplicate(filing.jid)
        elif filed is FileOutcome.ABORTED:
            self._log.warning(
                "jid=%s was aborted while its failure was being filed: filed as aborted, "
                "not retried",
                filing.jid,
            )
        return filed

    def note_duplicate(self, jid: str) -> None:
        self.duplicates_suspected += 1
        self._unflushed_duplicates += 1
        self._log.warning("jid=%s %s", jid, DUPLICATE_WARNING)

    async def flush_counters(self) -> None:
        """Add the duplicates noted since the last flush to their stat (batched, best effort)."""
        count, self._unflushed_duplicates = self._unflushed_duplicates, 0
        if not count:
            return
        try:
            await add_stat(self._redis, self._keys, "duplicates_suspected", count)
        except Exception:
            self._unflushed_duplicates += count
            raise

    async def hand_over_pending(self) -> tuple[list[bytes], list[bytes]]:
        """On shutdown: pending failures go to the unsettled list for any live process
        to file. Returns (discarded jobs to drop with the requeue, jobs to keep on the
        list because even the hand-over failed)."""
        finished: list[bytes] = []
        keep: list[bytes] = []
        for raw, filing in list(self.pending.items()):
            if filing.target is None:
                finished.append(raw)  # retry=False: dropping it is its settlement
                if self.releases is not None:  # its holds' releases are handed over next
                    event = commands.filing_event(filing, self._keys)
                    for hold in released(filing.holds, event):
                        self.releases.defer(Release(hold.key, hold.owner))
                continue
            try:
                await commands.park_unsettled(
                    self._redis,
                    self._keys,
                    identity=self._identity,
                    filing=filing,
                    listed=self._listed,
                )
            except Exception as exc:  # noqa: BLE001 - kept on the list, recovery finds it
                self._log.error("jid=%s: could not hand over its failure (%s)", filing.jid, exc)
                keep.append(raw)
            self.pending.pop(raw, None)
            self._backoff.pop(raw, None)
        return finished, keep

    async def settle_pending(self) -> int:
        """Try every pending filing that is due once; returns how many are still pending."""
        now = time.monotonic()
        for raw, filing in list(self.pending.items()):
            backoff = self._backoff.get(raw)
            if backoff is not None and backoff[0] > now:
                continue
            sent = time.monotonic()
            try:
                await self._file(filing)
            except Exception as exc:  # noqa: BLE001 - one bad filing must not block the rest
                self._keep_pending(filing, exc)
                if is_outage(exc):
                    break
                continue
            self._failures.succeeded(sent)
            self.pending.pop(raw, None)
            self._backoff.pop(raw, None)
        return len(self.pending)
