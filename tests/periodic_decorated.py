"""A job declared with ``@periodic`` for subprocess workers (tests/integration/
test_periodic_decorator.py): ``cogworker-async worker tests.periodic_decorated``,
with no ``--periodic``: the entry comes with the job. Every second (cron's
six-field form); each run counts itself per slot in ``<ns>:test:decorated``.
"""

from __future__ import annotations

import os
from typing import Any

from redis.asyncio import Redis

from cogworker_async import current_job, periodic

_client: dict[str, Redis] = {}


def runs_key() -> str:
    return f"{os.environ['COGWORKER_NAMESPACE']}:test:decorated"


@periodic("* * * * * *", name="every-second", job_name="periodic.decorated")
async def decorated() -> None:
    if "c" not in _client:
        _client["c"] = Redis.from_url(os.environ["COGWORKER_REDIS_URL"])
    slot: Any = current_job().payload["periodic_slot"]
    await _client["c"].hincrby(runs_key(), f"{float(slot):.0f}", 1)
