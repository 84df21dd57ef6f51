"""On a real 3-primary cluster: a SIGKILLed worker's jobs recovered, and the
namespace's slot migrated to another primary while a worker runs."""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from collections.abc import Iterator

import anyio
import pytest
import redis as sync_redis
from redis.crc import key_slot

from cogworker_async import Client, Settings, Worker, current_job, job
from cogworker_async.keys import Keys
from cogworker_async.store.connection import connect_sync
from cogworker_async.store.topology import hash_tag
from tests.helpers import wait_for, wait_for_sync
from tests.integration.test_shutdown import enqueue, runs, start_worker
from tests.servers import HOST, Cluster

pytestmark = pytest.mark.chaos


@pytest.fixture
def client(settings: Settings) -> Iterator[sync_redis.Redis]:
    redis = connect_sync(settings, socket_timeout=5, socket_connect_timeout=5)
    yield redis
    redis.close()


def test_orphans_of_a_sigkilled_worker_are_recovered(
    settings: Settings, client: sync_redis.Redis
) -> None:
    keys = Keys(settings.namespace)
    victim = start_worker(settings)
    survivor = None
    try:
        wait_for_sync(lambda: client.scard(keys.processes) == 1, timeout=30)
        victim_id = next(iter(client.smembers(keys.processes))).decode()
        jids = [f"{i:024x}" for i in range(3)]
        for jid in jids:
            enqueue(client, keys, "t.sleep", 2.0, jid=jid)
        wait_for_sync(lambda: client.llen(keys.in_progress(victim_id)) == 3, timeout=15)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
        survivor = start_worker(settings)
        bound = settings.heartbeat_ttl + settings.orphan_threshold + settings.orphan_check_interval
        wait_for_sync(
            lambda: sum(r.endswith(":done") for r in runs(client, keys)) == 3, timeout=bound + 20
        )
        done = [r for r in runs(client, keys) if r.endswith(":done")]
        assert sorted(done) == sorted(f"{j}:done" for j in jids)  # each finished once
        assert client.llen(keys.in_progress(victim_id)) == 0
        assert int(client.get(keys.stat("recovered")) or 0) == 3
        survivor.send_signal(signal.SIGTERM)
        assert survivor.wait(timeout=15) == 0
    finally:
        for proc in (victim, survivor):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


done_jids: list[str] = []


@job(name="cl.slow_add")
async def slow_add(n: int) -> None:
    await asyncio.sleep(0.02)
    done_jids.append(current_job().jid)


def _migrate(cluster: Cluster, slot: int, source: int, target: int) -> int:
    """Move ``slot`` from node ``source`` to node ``target`` as redis-cli's reshard does."""
    src, dst = cluster.client(source), cluster.client(target)
    src_id, dst_id = cluster.node_id(source), cluster.node_id(target)
    moved = 0
    try:
        dst.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", src_id)
        src.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", dst_id)
        while names := src.execute_command("CLUSTER GETKEYSINSLOT", slot, 5):
            src.execute_command(
                "MIGRATE", HOST, cluster.nodes[target].port, "", 0, 5000, "KEYS", *names
            )
            moved += len(names)
            time.sleep(0.05)  # a slow reshard: the worker keeps meeting ASK and TRYAGAIN
        for index in range(len(cluster.nodes)):
            with cluster.client(index) as node:
                node.execute_command("CLUSTER SETSLOT", slot, "NODE", dst_id)
    finally:
        src.close()
        dst.close()
    return moved


@pytest.mark.anyio
async def test_the_namespaces_slot_migrates_while_a_worker_runs(
    settings: Settings, cluster: Cluster
) -> None:
    done_jids.clear()
    tag = hash_tag(settings.namespace)
    assert tag is not None
    slot = key_slot(tag.encode())
    source = cluster.owner(slot)
    target = (source + 1) % len(cluster.nodes)
    total = 600
    settings = settings.model_copy(update={"concurrency": 2})
    async with Client(settings) as producer:
        jids = await producer.enqueue_many(slow_add, [(i,) for i in range(total)])
    async with Worker(settings, jobs=[slow_add]):

        async def started() -> bool:
            return len(done_jids) >= 20

        await wait_for(started, timeout=30)
        moved = await anyio.to_thread.run_sync(_migrate, cluster, slot, source, target)
        assert len(done_jids) < total  # the worker was still at it when the slot moved

        async def finished() -> bool:
            return len(done_jids) >= total

        await wait_for(finished, timeout=120)
    assert cluster.owner(slot) == target
    assert moved > 0
    twice = [jid for jid, n in Counter(done_jids).items() if n > 1]
    assert twice == []
    assert sorted(done_jids) == sorted(jids)
