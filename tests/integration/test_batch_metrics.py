"""The batch counters a Prometheus scrape reads (observability/batch_counters.py),
written by the batch scripts in the steps that count: batches opened and
finished by state, members ended by outcome, callbacks enqueued by event, and
the jobs waiting on others (after=[...])."""

from __future__ import annotations

import pytest
import redis as sync_redis
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from cogworker_async import Client, Settings, Worker, job
from cogworker_async.keys import Keys
from cogworker_async.observability.redis_snapshot import RedisCollector
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio


@job(name="bm.work")
async def work() -> None:
    return None


@job(name="bm.dies", retry=0)
async def dies() -> None:
    raise RuntimeError("no luck")


@job(name="bm.callback", queue="unread")
async def callback() -> None:
    return None


def scrape(sync_client: sync_redis.Redis, keys: Keys) -> dict[tuple[str, tuple[str, ...]], float]:
    registry = CollectorRegistry()
    registry.register(RedisCollector(sync_client, keys))
    text = generate_latest(registry).decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if "batch" in sample.name or "after" in sample.name:
                samples[(sample.name, tuple(sorted(sample.labels.values())))] = sample.value
    return samples


async def test_batch_counters_count_each_batch_member_and_callback_once(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    assert scrape(sync_client, keys)[("cogworker_batches_opened_total", ())] == 0
    async with Client(settings) as client:
        async with client.batch(on_success=callback, on_complete=callback) as ok:
            await ok.enqueue_many(work, [(), (), ()])
        async with client.batch(on_complete=callback, on_death=callback) as bad:
            await bad.enqueue(work)
            await bad.enqueue(dies)
        pre = await client.enqueue(work.options(queue="later"))
        assert pre is not None
        await client.enqueue(work.options(after=[pre]))
        assert scrape(sync_client, keys)[("cogworker_after_waiting", ())] == 1
        async with Worker(settings, jobs=[work, dies, callback]):

            async def both_over() -> bool:
                states = [await client.batch_status(b) for b in (ok.bid, bad.bid)]
                return all(s is not None and s["state"] != "running" for s in states)

            await wait_for(both_over, timeout=30)
    got = scrape(sync_client, keys)
    assert got[("cogworker_batches_opened_total", ())] == 2
    assert got[("cogworker_batches_finished_total", ("success",))] == 1
    assert got[("cogworker_batches_finished_total", ("dead",))] == 1
    assert got[("cogworker_batches_finished_total", ("complete",))] == 0
    assert got[("cogworker_batch_members_ended_total", ("succeeded",))] == 4
    assert got[("cogworker_batch_members_ended_total", ("dead",))] == 1
    assert got[("cogworker_batch_members_ended_total", ("failed",))] == 0
    assert got[("cogworker_batch_callbacks_enqueued_total", ("success",))] == 1
    assert got[("cogworker_batch_callbacks_enqueued_total", ("complete",))] == 2
    assert got[("cogworker_batch_callbacks_enqueued_total", ("death",))] == 1
    assert got[("cogworker_after_waiting", ())] == 1  # its prerequisite's queue is unread
