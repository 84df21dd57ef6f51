"""Periodic entries, for the CLI and the web UI: what each entry is, when it runs
next, its last run and result, and running one now.

The entries are those the live workers published (``<ns>:periodic:entries``);
a worker that stops running an entry leaves its last published definition.
"""

from __future__ import annotations

from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.periodic.view import PeriodicInfo, periodic_list, run_now


async def periodic_entries(redis: Redis, keys: Keys) -> list[PeriodicInfo]:
    """Every published entry: name, schedule, zone, next run (Redis's clock), last
    slot run, last result, and for an overlap=False entry the jid holding its lock."""
    return await periodic_list(redis, keys)


async def run_periodic_now(redis: Redis, keys: Keys, name: str) -> str | None:
    """Enqueue one run of entry ``name`` now (a fresh jid, the schedule unchanged);
    returns its jid, or None when no entry has that name."""
    return await run_now(redis, keys, name)


__all__ = ["PeriodicInfo", "periodic_entries", "run_periodic_now"]
