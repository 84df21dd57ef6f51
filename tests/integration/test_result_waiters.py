"""All of one Client's result waiters on one connection (issue 21, item 5).

Before, each waiter held a pooled connection in a ``BLMOVE``: 65 waiters
exhausted the pool of 64 and an unrelated ``enqueue`` failed with "No
connection available". Now 10,000 waiters cost one subscribed connection,
enqueue on the same Client is untouched, every waiter gets its result, and a
waiter cut off from Redis while its result was written still gets it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest
from redis.asyncio import Redis

from cogworker_async import Client, Settings, Worker, job
from cogworker_async.embedded import EmbeddedRedis
from cogworker_async.errors import ResultTimeout
from cogworker_async.keys import Keys
from tests.faultproxy import FaultProxy
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio


@job(name="waiters.echo", keep_result=120)
async def echo(value: int) -> int:
    return value


async def _subscribed_clients(redis: Redis) -> list[dict[str, Any]]:
    return [c for c in await redis.client_list() if int(c.get("sub", 0)) > 0]


async def _no_subscribers(redis: Redis) -> bool:
    # The server drops a closed client when its loop reads the close: on a busy
    # machine a CLIENT LIST from another connection can come first (seen beside
    # two CPU hogs), so the end of the subscriptions is awaited. A subscriber
    # left behind by a leak still fails the wait.
    return await _subscribed_clients(redis) == []


@pytest.mark.timeout(180)
async def test_ten_thousand_waiters_cost_one_connection_and_leave_enqueue_alone(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    before = len(await redis.client_list())
    async with Client(settings) as client:
        # Waiters for jobs nobody enqueued yet (never, for most): they only wait.
        idle = [asyncio.create_task(client.result(f"{n:024x}", timeout=120)) for n in range(10_000)]
        await asyncio.sleep(0)  # one loop turn: each waiter has begun its wait
        with anyio.fail_after(30):
            enqueued = await asyncio.gather(*(client.enqueue(echo, n) for n in range(200)))
        assert all(handle is not None for handle in enqueued)

        async def all_subscribed() -> bool:
            return len(await redis.pubsub_channels(f"{keys.ns}:result_ready:*")) >= 10_000

        await wait_for(all_subscribed, timeout=60)
        assert len(await _subscribed_clients(redis)) == 1
        # The waiters' one connection, and the few the enqueues used: not one each.
        assert len(await redis.client_list()) - before <= 1 + 8
        async with Worker(settings, jobs=[echo]):
            with anyio.fail_after(60):
                values = await asyncio.gather(*(h.result(timeout=60) for h in enqueued if h))
        assert values == list(range(200))
        assert not any(task.done() for task in idle)
        for task in idle:
            task.cancel()
        await asyncio.gather(*idle, return_exceptions=True)

        async def all_unsubscribed() -> bool:
            return not await redis.pubsub_channels(f"{keys.ns}:result_ready:*")

        await wait_for(all_unsubscribed, timeout=30)
    await wait_for(lambda: _no_subscribers(redis), timeout=30)  # closed with the Client


@pytest.mark.timeout(90)
async def test_a_waiter_cut_off_while_its_result_is_written_still_gets_it(
    redis_server: EmbeddedRedis, settings: Settings, redis: Redis, keys: Keys
) -> None:
    with FaultProxy("127.0.0.1", redis_server.port or 0) as proxy:
        through = settings.model_copy(update={"redis_url": proxy.url})
        async with Client(through) as client:
            handle = await client.enqueue(echo, 7)
            assert handle is not None
            waiting = asyncio.create_task(handle.result(timeout=60))

            async def subscribed() -> bool:
                return bool(await redis.pubsub_channels(keys.result_ready(handle.jid)))

            await wait_for(subscribed)
            proxy.refuse(True)

            async def cut_off() -> bool:
                return not await redis.pubsub_channels(keys.result_ready(handle.jid))

            await wait_for(cut_off)
            # The worker (not behind the proxy) runs it while the waiter hears nothing.
            async with Worker(settings, jobs=[echo]):

                async def kept() -> bool:
                    return bool(await redis.exists(keys.result(handle.jid)))

                await wait_for(kept, timeout=30)
            assert not waiting.done()
            proxy.heal()
            with anyio.fail_after(30):
                assert await waiting == 7
            # And a fresh wait after the outage is answered as before.
            with pytest.raises(ResultTimeout):
                await client.result("f" * 24, timeout=0.2)


async def test_timeout_zero_is_one_look_and_closing_the_client_ends_the_waits(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        handle = await client.enqueue(echo, 3)
        assert handle is not None
        with pytest.raises(ResultTimeout):
            await handle.result(timeout=0)  # not done yet: said at once
        async with Worker(settings, jobs=[echo]):
            assert await handle.result(timeout=30) == 3
        assert await handle.result(timeout=0) == 3  # done: "is it done yet?" answers
        pending = asyncio.create_task(client.result("a" * 24, timeout=None))

        async def subscribed() -> bool:
            return bool(await redis.pubsub_channels(keys.result_ready("a" * 24)))

        await wait_for(subscribed)
    with anyio.fail_after(10), pytest.raises(RuntimeError, match="Client was closed"):
        await pending
    await wait_for(lambda: _no_subscribers(redis), timeout=30)
