"""``enqueue_many`` streams its items in chunks: memory that does not grow with the batch,
any iterable or async iterable, typed arguments (issue 12.5)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import Client, Settings, job
from cogworker_async.client.enqueue_many import MANY_CHUNK  # jobs per pipeline
from cogworker_async.keys import Keys
from tests.conftest import ROOT

if TYPE_CHECKING:
    from cogworker_async.jobs import JobArgs

pytestmark = pytest.mark.anyio


@job(name="stream.add")
async def add(a: int, b: int = 0) -> None: ...


async def _queued(redis: Redis, keys: Keys, queue: str = "default") -> list[dict[str, object]]:
    raw = await redis.lrange(keys.queue(queue), 0, -1)
    return [orjson.loads(r) for r in reversed(raw)]


# A child process, so the test process's own memory history doesn't count: the
# peak resident size (VmHWM) grown by enqueueing COUNT jobs from a generator.
PEAK_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    from cogworker_async import Client, Settings, job

    @job(name="stream.noop")
    async def noop(i: int) -> None: ...

    def peak_kib() -> int:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmHWM")

    async def main(url: str, namespace: str, count: int) -> None:
        async with Client(Settings(redis_url=url, namespace=namespace)) as client:
            await client.enqueue(noop, -1)  # connected, scripts loaded: only the batch is left
            before = peak_kib()
            jids = await client.enqueue_many(noop, ((i,) for i in range(count)))
            after = peak_kib()
            queued = await client.redis.llen(f"{namespace}:queue:default")
            await client.redis.delete(f"{namespace}:queue:default")
        print(json.dumps({"growth_mib": (after - before) / 1024, "jids": len(jids),
                          "queued": queued}))

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
    """
)


def test_peak_memory_does_not_grow_with_the_batch(settings: Settings) -> None:
    count = 300_000
    done = subprocess.run(
        [sys.executable, "-c", PEAK_SCRIPT, settings.redis_url, settings.namespace, str(count)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["jids"] == count
    assert result["queued"] == count + 1
    # ~5 KB a job before (1.4 GiB for these); now one chunk's payloads plus the
    # jids (~80 bytes each): about 60 MiB.
    assert result["growth_mib"] < 150, result


async def test_an_async_iterable_of_typed_args(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async def produce() -> AsyncIterator[JobArgs[Any] | tuple[int] | dict[str, int]]:
        for i in range(3):
            yield add.args(i, b=10 * i)
        yield (7,)
        yield {"a": 8}

    async with Client(settings) as client:
        jids = await client.enqueue_many(add, produce())
    queued = await _queued(redis, keys)
    assert [j["jid"] for j in queued] == jids
    assert [(j["args"], j.get("kwargs")) for j in queued] == [
        ([0], {"b": 0}),
        ([1], {"b": 10}),
        ([2], {"b": 20}),
        ([7], None),
        ([], {"a": 8}),
    ]


async def test_a_generator_longer_than_a_chunk_is_read_once_in_order(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    count = MANY_CHUNK * 2 + 5
    read: list[int] = []

    def produce() -> Iterator[tuple[int]]:
        for i in range(count):
            read.append(i)
            yield (i,)

    async with Client(settings) as client:
        jids = await client.enqueue_many(add.options(queue="long"), produce())
    assert read == list(range(count))
    queued = await _queued(redis, keys, "long")
    assert [j["args"] for j in queued] == [[i] for i in range(count)]
    assert [j["jid"] for j in queued] == jids


async def test_delayed_batches_go_to_the_schedule_and_wake_the_poller(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        jids = await client.enqueue_many(
            add.options(delay=60), (add.args(i) for i in range(MANY_CHUNK + 3))
        )
    assert await redis.zcard(keys.schedule) == len(jids) == MANY_CHUNK + 3
    ((_, due),) = await redis.zrange(keys.schedule_wakeup, 0, -1, withscores=True)
    ((_, first),) = await redis.zrange(keys.schedule, 0, 0, withscores=True)
    assert due == first


async def test_an_error_midway_says_how_many_were_enqueued(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    def produce() -> Iterator[tuple[object]]:
        for i in range(MANY_CHUNK + 10):
            yield (i,)
        yield (object(),)

    async with Client(settings) as client:
        with pytest.raises(TypeError) as caught:
            await client.enqueue_many(add, produce())
    assert f"the first {MANY_CHUNK} jobs were enqueued" in "".join(caught.value.__notes__)
    assert await redis.llen(keys.queue("default")) == MANY_CHUNK


# --- types: mypy checks each job's arguments as it does for enqueue ----------------

TYPED_USE = textwrap.dedent(
    """
    from cogworker_async import Client, job

    @job
    async def send(address: str, times: int = 1) -> None: ...

    @job
    async def other(flag: bool) -> None: ...

    async def ok(client: Client) -> None:
        await client.enqueue_many(send, [send.args("a@b.c"), send.args("d@e.f", times=2)])
        await client.enqueue_many(send.options(delay=5), (send.args(a) for a in ["x", "y"]))
        await client.enqueue_many(send, [("a@b.c",), {"address": "x"}])
        await client.enqueue_many("by.name", [("anything", 1)])

    async def wrong(client: Client) -> None:
        send.args(1)  # BAD
        send.args("a", times="2")  # BAD
        await client.enqueue_many(send, [other.args(True)])  # BAD
    """
)


def test_mypy_checks_enqueue_many_arguments(tmp_path: object) -> None:
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    module = tmp_path / "typed_use.py"
    module.write_text(TYPED_USE)
    done = subprocess.run(  # noqa: PLW1510 - mypy's exit status is 1 on the expected errors
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", str(module)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    bad_lines = {i for i, line in enumerate(TYPED_USE.splitlines(), 1) if "# BAD" in line}
    flagged = {int(line.split(":")[1]) for line in done.stdout.splitlines() if ": error:" in line}
    assert flagged == bad_lines, done.stdout
