"""A handler's ``raise limits.BackOff(key, seconds)``: the key is paused and the
job held back on it (``store.limits.back_off``), instead of a failure filed.

No retry is counted and nothing is filed; the job runs again, first of its
key, once the pause is over (the "Limit timers" duty lets it in). When Redis
refuses the step (an outage), the processor files the exception as a failure
as it would any other, so the job is never lost.
"""

from __future__ import annotations

import logging
from typing import Any

from cogworker_async.limits import BackOff
from cogworker_async.store.faults import is_outage
from cogworker_async.store.limits import back_off
from cogworker_async.worker.fetcher import Fetcher


class BackOffs:
    """Holds back the jobs whose handler asked to back off."""

    def __init__(self, fetcher: Fetcher, logger: logging.Logger) -> None:
        self._fetcher = fetcher
        self._log = logger

    async def held_back(self, raw: bytes, job: dict[str, Any], exc: BackOff) -> bool:
        """Whether the job was held back (or was no longer ours to hold: recovery
        took it meanwhile); False: file it as a failure."""
        fetcher = self._fetcher
        try:
            mine = await back_off(
                fetcher.redis,
                fetcher.keys,
                identity=fetcher.identity,
                job=raw,
                key=exc.key,
                seconds=exc.seconds,
                reliable=fetcher.reliable,
            )
        except Exception as error:  # noqa: BLE001 - filed as a failure instead, never lost
            self._log.warning(
                "jid=%s %s: could not back off %r (%s%s): filed as a failure",
                job.get("jid"),
                job.get("class"),
                exc.key,
                type(error).__name__,
                ", Redis unreachable" if is_outage(error) else f": {error}",
            )
            return False
        self._log.info(
            "jid=%s %s backed off %r for %g s: held, no retry counted%s",
            job.get("jid"),
            job.get("class"),
            exc.key,
            exc.seconds,
            "" if mine else " (it was no longer on our list: recovery had requeued it)",
        )
        return True
