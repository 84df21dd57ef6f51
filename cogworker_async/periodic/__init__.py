"""Periodic jobs: entries declared in code, each slot enqueued exactly once by
whichever worker claims it first (no leader, no scheduler process).

``entry`` is ``cron`` under the name SPEC §3 uses (``periodic.entry("0 * * * *", job)``).
"""

from cogworker_async.periodic.entries import Entry, cron, every

entry = cron

__all__ = ["Entry", "cron", "entry", "every"]
