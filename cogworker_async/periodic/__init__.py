"""Periodic jobs: entries declared in code, each slot enqueued exactly once by
whichever worker claims it first (no leader, no scheduler process)."""

from cogworker_async.periodic.entries import Entry, cron, every

__all__ = ["Entry", "cron", "every"]
