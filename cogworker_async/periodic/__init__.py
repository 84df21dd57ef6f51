"""Periodic jobs: entries declared in code, each slot enqueued exactly once by
whichever worker claims it first (no leader, no scheduler process).

``@periodic(expression, ...)`` declares a job and its entry together;
``entry`` is ``cron`` under the name SPEC §3 uses
(``periodic.entry("0 * * * *", job)``), for a job declared elsewhere.
"""

from cogworker_async.periodic.decorator import Periodic, periodic
from cogworker_async.periodic.entries import Entry, cron, every

entry = cron

__all__ = ["Entry", "Periodic", "cron", "entry", "every", "periodic"]
