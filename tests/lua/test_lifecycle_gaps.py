"""Gaps the lifecycle's stateful model showed, each kept as a test once fixed.

A gap not fixed yet is written as a strict xfail saying what the contract asks
and what the code does; when a fix lands it turns into a failure
("XPASS(strict)"): remove the mark.
"""

from __future__ import annotations

import logging

import pytest
from redis.asyncio import Redis

from cogworker_async.client.aborting import AbortOutcome, abort_job
from cogworker_async.keys import Keys
from cogworker_async.lifecycle import Place, State
from cogworker_async.payload import new_jid
from cogworker_async.settings import Settings
from cogworker_async.worker.unsettled import file_unsettled
from tests.lifecycle_places import places
from tests.lua.support import make_job
from tests.lua.test_lifecycle_table import Job, put

pytestmark = pytest.mark.anyio


async def test_an_aborted_unsettled_job_is_not_retried(
    redis: Redis, keys: Keys, settings: Settings
) -> None:
    """Abort of a job on the unsettled list (a failure a stopping process handed
    over) once answered not_found and left no tombstone: file_unsettled then filed
    it into retry and it ran again, though abort promises a waiting job never runs."""
    jid = new_jid()
    await put(Job(redis, keys, jid, make_job(jid=jid)), State.UNSETTLED)
    outcome = await abort_job(redis, keys, settings, jid)
    await file_unsettled(redis, keys, logging.getLogger("test"))
    assert outcome is not AbortOutcome.NOT_FOUND
    assert await places(redis, keys, jid) != [Place.RETRY]
    # What it is now: removed, gone for good, and a second abort says so.
    assert outcome is AbortOutcome.REMOVED
    assert await places(redis, keys, jid) == [Place.GONE]
    assert await abort_job(redis, keys, settings, jid) is AbortOutcome.FINISHED
