"""The raw-protocol floor: redis-py + hiredis with no job library in between.

The same workload as ``throughput.py --mode noop`` (20,000 no-op jobs, 50 at
a time, one queue, payloads written by ``enqueue_many``), drained by the
shortest client code that still moves each job into an in-progress list
before it runs and removes it after (what reliable fetch means):

  blmove_lrem     50 coroutines, each BLMOVE a job, decode it, run it, LREM it
  lua_per_job     50 coroutines, each one script call per job: LREM the
                  previous job, LMOVE the next
  lua_batch       one script call LREMs a batch of finished jobs and moves up
                  to 50 more, fanned out to 50 coroutines (what the issue's
                  fastest raw row does; per-command overhead is paid per batch)
  lua_batch_count as lua_batch, 300 a call, acknowledged by trimming the list's
                  tail by count with no check of what is there: unsafe (a job
                  pushed by a fetch whose reply was lost would be trimmed as if
                  it were one of ours), kept only as the least Redis can do per
                  job, the bound behind ``multiprocess.py``'s ratio

Each job is decoded (``orjson``) and its handler awaited, as any queue must.
Client CPU is this process's ``time.process_time()`` over the drain; Redis
CPU from ``INFO cpu``. Nothing here is cogworker_async's code path: compare
with ``throughput.py``'s numbers from the same run.

    python bench/floor.py [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable

import common
import jobs
import orjson
from redis.asyncio import Redis

from cogworker_async import Client, Settings
from cogworker_async.keys import Keys

TOTAL = 20_000
CONCURRENCY = 50

ACK_AND_MOVE_ONE = """
if ARGV[1] ~= "" then redis.call("LREM", KEYS[2], -1, ARGV[1]) end
return redis.call("LMOVE", KEYS[1], KEYS[2], "RIGHT", "LEFT")
"""

# Moves up to ARGV[1] jobs from the queue's tail into the in-progress list.
_MOVE_BATCH = """
local want = tonumber(ARGV[1])
if want == 0 then return {} end
local batch = redis.call("LRANGE", KEYS[1], -want, -1)
if #batch == 0 then return {} end
local taken = {}
for j = #batch, 1, -1 do taken[#taken + 1] = batch[j] end
redis.call("LPUSH", KEYS[2], unpack(taken))
redis.call("LTRIM", KEYS[1], 0, -(#batch + 1))
return taken
"""

# ARGV[2..] = the finished jobs, removed by value.
ACK_AND_MOVE_BATCH = (
    """for i = 2, #ARGV do redis.call("LREM", KEYS[2], -1, ARGV[i]) end""" + _MOVE_BATCH
)

# ARGV[2] = how many finished jobs to trim off the list's tail, unchecked.
TRIM_AND_MOVE_BATCH = (
    """
local acked = tonumber(ARGV[2])
if acked > 0 then redis.call("LTRIM", KEYS[2], 0, -(acked + 1)) end
"""
    + _MOVE_BATCH
)


async def _run(raw: bytes) -> None:
    job = orjson.loads(raw)
    await jobs.noop.fn(*job["args"])


async def blmove_lrem(redis: Redis, queue: str, listed: str) -> None:
    async def processor() -> None:
        # A short timeout: the queue is full until the end, then each waits once.
        while (raw := await redis.blmove(queue, listed, 0.01, "RIGHT", "LEFT")) is not None:
            await _run(raw)
            await redis.lrem(listed, -1, raw)

    await asyncio.gather(*(processor() for _ in range(CONCURRENCY)))


async def lua_per_job(redis: Redis, queue: str, listed: str) -> None:
    step = redis.register_script(ACK_AND_MOVE_ONE)

    async def processor() -> None:
        previous = b""
        while (raw := await step(keys=[queue, listed], args=[previous])) is not None:
            await _run(raw)
            previous = raw
        if previous:
            await redis.lrem(listed, -1, previous)

    await asyncio.gather(*(processor() for _ in range(CONCURRENCY)))


async def lua_batch(redis: Redis, queue: str, listed: str) -> None:
    step = redis.register_script(ACK_AND_MOVE_BATCH)
    finished: list[bytes] = []
    while batch := await step(keys=[queue, listed], args=[CONCURRENCY, *finished]):
        await asyncio.gather(*(_run(raw) for raw in batch))
        finished = batch
    if finished:
        await step(keys=[queue, listed], args=[0, *finished])


async def lua_batch_count(redis: Redis, queue: str, listed: str) -> None:
    step = redis.register_script(TRIM_AND_MOVE_BATCH)
    finished = 0
    while batch := await step(keys=[queue, listed], args=[300, finished]):
        for start in range(0, len(batch), CONCURRENCY):
            await asyncio.gather(*(_run(raw) for raw in batch[start : start + CONCURRENCY]))
        finished = len(batch)
    await step(keys=[queue, listed], args=[0, finished])


VARIANTS: dict[str, Callable[[Redis, str, str], Awaitable[None]]] = {
    "blmove_lrem": blmove_lrem,
    "lua_per_job": lua_per_job,
    "lua_batch": lua_batch,
    "lua_batch_count": lua_batch_count,
}


async def _redis_cpu(redis: Redis) -> float:
    info = await redis.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


async def run_once(url: str, variant: str) -> dict[str, float]:
    namespace = common.new_namespace(f"floor-{variant}")
    keys = Keys(namespace)
    redis = Redis.from_url(url, max_connections=CONCURRENCY + 5)
    try:
        async with Client(Settings(redis_url=url, namespace=namespace)) as client:
            await client.enqueue_many(jobs.noop, [(i,) for i in range(TOTAL)])
        redis_before = await _redis_cpu(redis)
        cpu_before = time.process_time()
        started = time.perf_counter()
        await VARIANTS[variant](redis, keys.queue("default"), keys.in_progress("floor"))
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu_before
        redis_cpu = await _redis_cpu(redis) - redis_before
        left = await redis.llen(keys.queue("default")) + await redis.llen(keys.in_progress("floor"))
        if left:
            raise RuntimeError(f"{variant}: {left} jobs left behind")
    finally:
        await redis.aclose()
        await common.cleanup(url, namespace)
    return {
        "jobs_per_s": TOTAL / wall,
        "cpu_us_per_job": cpu / TOTAL * 1e6,
        "redis_cpu_us_per_job": redis_cpu / TOTAL * 1e6,
    }


async def bench(url: str, *, repeat: int) -> list[common.Result]:
    results = []
    for variant in VARIANTS:
        title = f"raw floor {variant} ({TOTAL:,} no-op jobs, {CONCURRENCY} at a time)"
        common.note(f"{title}: {repeat} run(s)")

        async def once(_: int, variant: str = variant) -> dict[str, float]:
            return await run_once(url, variant)

        runs = await common.repeat_runs(repeat, once, variant)
        results.append(
            common.collect(
                f"floor-{variant}",
                title,
                {"jobs": TOTAL, "concurrency": CONCURRENCY, "variant": variant},
                runs,
                [
                    ("jobs_per_s", "processed", "jobs/s"),
                    ("cpu_us_per_job", "client CPU", "µs/job"),
                    ("redis_cpu_us_per_job", "redis-server CPU", "µs/job"),
                ],
            )
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description="redis-py + hiredis with no library: the floor")
    common.add_common_args(parser, uvloop=False)
    args = parser.parse_args()
    with common.redis_server(args.redis_url) as url:
        results = common.run_async(bench(url, repeat=args.repeat))
    common.emit(results, as_json=args.json)


if __name__ == "__main__":
    main()
