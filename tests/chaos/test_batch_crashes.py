"""Batches under kill -9: every batch ends, each callback is enqueued exactly once.

Many batches (some with a child batch), chains and chords run on two worker processes; one is
SIGKILLed mid-run, then Redis (started again from its AOF), then the other
worker, each replaced (the long run, ``COGWORKER_BATCH_CHAOS_SCALE``, goes on
round after round). Members the dead processes
held come back through orphan recovery and may run twice (at least once):
their batch still counts each member once, none stays pending, and each
batch's callbacks were enqueued exactly once: they go to a queue no worker
reads, and the ledger is that queue (a callback pushed twice would be there
twice; a callback run twice, at least once as every job, would not tell). Each chain and chord
ends with its right result, each of its stages started once.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile

import anyio
import orjson
import pytest
from redis.asyncio import Redis
from redis.exceptions import RedisError

from cogworker_async import Client, Settings, chain, chord, group
from cogworker_async.embedded import EmbeddedRedis
from cogworker_async.keys import Keys
from tests.batch_jobs import callback, inc, member, runs_key, total
from tests.chaos.test_outages import durable_redis, durable_settings  # noqa: F401 - fixtures
from tests.conftest import ROOT, child_env
from tests.helpers import wait_for

pytestmark = [pytest.mark.chaos, pytest.mark.anyio]

# `make test` runs it short (52 workflows); COGWORKER_BATCH_CHAOS_SCALE=N runs
# N times as many (193: 10,036 workflows, issue 24's long run) and more rounds
# of kills (a worker, then Redis, in turn).
SCALE = int(os.environ.get("COGWORKER_BATCH_CHAOS_SCALE", "1"))
BATCHES = 40 * SCALE
MEMBERS = 8  # per batch; every fourth batch also has a child batch of MEMBERS
CHAINS = 8 * SCALE  # chains of 4 steps, each adding 1 to the result before it
CHORDS = 4 * SCALE  # chords of a group of 5 steps and their sum
# Kill rounds: even ones SIGKILL a worker (replaced), odd ones Redis (restarted
# from its AOF); 3 in the short run, up to 15 in a long one.
ROUNDS = min(15, 3 + 2 * (SCALE // 10))


def start(settings: Settings, *queues: str) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "cogworker_async", "worker", "tests.batch_jobs"]
    for queue in queues:
        args += ["-q", queue]
    with tempfile.NamedTemporaryFile(prefix="cogworker-batch-", suffix=".log", delete=False) as log:
        return subprocess.Popen(
            args, cwd=ROOT, env=child_env(settings), stdout=log, stderr=subprocess.STDOUT
        )


async def member_runs(redis: Redis, keys: Keys) -> int:
    try:
        return int(await redis.hlen(runs_key(keys.ns)))
    except (OSError, RedisError):  # Redis restarting: ask again
        return -1


@pytest.mark.timeout(240 * SCALE)
async def test_kill_9_mid_run_leaves_no_batch_stuck_and_fires_each_callback_once(
    durable_redis: EmbeddedRedis,  # noqa: F811 - the fixture
    durable_settings: Settings,  # noqa: F811 - the fixture
    keys: Keys,
) -> None:
    settings = durable_settings
    rng = random.Random(24)
    procs = [start(settings, "default"), start(settings, "default")]
    live = list(procs)  # the member workers not killed yet, oldest first
    bids: list[str] = []
    with_child: list[str] = []
    redis = Redis.from_url(settings.redis_url)
    try:
        async with Client(settings) as client:
            for n in range(BATCHES):
                async with client.batch(
                    on_success=callback.args(), on_complete=callback.args()
                ) as b:
                    for _ in range(MEMBERS):
                        await b.enqueue(member, rng.uniform(0.05, 0.4))
                    if n % 4 == 0:
                        async with b.batch(on_complete=callback.args()) as child:
                            await child.enqueue_many(
                                member, [(rng.uniform(0.05, 0.4),) for _ in range(MEMBERS)]
                            )
                        with_child.append(child.bid)
                bids.append(b.bid)
            chains = [
                await client.enqueue_flow(
                    chain(inc.args(0), inc.args(), inc.args(), inc.args(pause=0.3))
                )
                for _ in range(CHAINS)
            ]
            chords = [
                await client.enqueue_flow(
                    chord(group(inc.args(i, 0.3) for i in range(5)), total.args())
                )
                for _ in range(CHORDS)
            ]
            total_members = BATCHES * MEMBERS + len(with_child) * MEMBERS
            # Mid-run, round by round: SIGKILL the oldest member worker (and
            # start a new one), or Redis (and start it again from its AOF).
            # Spaced over what is left to run (the workers ran members while
            # the batches were being created), so every round comes mid-run.
            step = max(1, (total_members - await member_runs(redis, keys)) // (ROUNDS + 3))
            for round_ in range(ROUNDS):
                seen = await member_runs(redis, keys)
                await wait_for(
                    lambda seen=seen: _more(redis, keys, seen + step), timeout=60 * SCALE
                )
                if round_ % 2:
                    durable_redis.kill()
                    await anyio.sleep(0.5)
                    durable_redis.start()
                    continue
                victim = live.pop(0)
                victim.send_signal(signal.SIGKILL)
                victim.wait(timeout=10)
                live.append(start(settings, "default"))
                procs.append(live[-1])

            async def all_done() -> bool:
                try:
                    for bid in [*bids, *with_child]:
                        status = await client.batch_status(bid)
                        if status is None or status["state"] != "success":
                            return False
                    expected = 2 * len(bids) + len(with_child)
                    return await redis.llen(keys.queue("callbacks")) >= expected
                except (OSError, RedisError):  # a connection from before Redis restarted
                    return False

            # Recovery of a killed worker's jobs takes about orphan_threshold + a check.
            await wait_for(all_done, timeout=150 * SCALE, interval=0.5)
            await anyio.sleep(1.0)  # a second firing of any callback would land by now
            ledger = await pushed_callbacks(redis, keys)
            expected = {f"{bid}:{event}": 1 for bid in bids for event in ("success", "complete")}
            expected.update({f"{bid}:complete": 1 for bid in with_child})
            assert ledger == expected
            for bid in bids:
                status = await client.batch_status(bid)
                assert status is not None
                size = MEMBERS + (1 if bid in _parents(bids, with_child) else 0)
                assert (status["total"], status["succeeded"], status["pending"]) == (size, size, 0)
                assert (status["failed"], status["dead"]) == (0, 0)
            runs = {k.decode(): int(v) for k, v in (await redis.hgetall(runs_key(keys.ns))).items()}
            assert len(runs) == total_members  # every member ran; some maybe twice
            # Every flow ended with its right result, each stage started once.
            for flow in chains:
                assert await flow.last.result(timeout=60) == 4
            for flow in chords:
                assert await flow.last.result(timeout=60) == sum(range(1, 6))
            for flow in [*chains, *chords]:
                for bid, jobs in zip(flow.bids, flow.stages, strict=True):
                    status = await client.batch_status(bid)
                    assert status is not None
                    assert status["state"] == "success"
                    assert status["total"] == len(jobs)
                    assert status["succeeded"] == status["total"]
            # The kills did catch members mid-run: recovery brought them back.
            assert int(await redis.get(keys.stat("recovered")) or 0) > 0
    finally:
        await redis.aclose()
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def pushed_callbacks(redis: Redis, keys: Keys) -> dict[str, int]:
    """How many times each (bid, event) callback was pushed: the callbacks queue,
    which no worker reads."""
    ledger: dict[str, int] = {}
    for raw in await redis.lrange(keys.queue("callbacks"), 0, -1):
        field = orjson.loads(raw)["batch_callback"]
        name = f"{field['bid']}:{field['event']}"
        ledger[name] = ledger.get(name, 0) + 1
    return ledger


async def _more(redis: Redis, keys: Keys, count: int) -> bool:
    return await member_runs(redis, keys) >= count


def _parents(bids: list[str], children: list[str]) -> set[str]:
    # Every fourth batch (0, 4, 8, ...) opened a child.
    return {bid for n, bid in enumerate(bids) if n % 4 == 0} if children else set()


@pytest.mark.timeout(240)
async def test_a_redis_crash_mid_run_leaves_no_batch_stuck_nor_a_callback_twice(
    durable_redis: EmbeddedRedis,  # noqa: F811 - the fixture
    durable_settings: Settings,  # noqa: F811 - the fixture
    keys: Keys,
) -> None:
    """Redis SIGKILLed mid-run and started again from its AOF (fsync always): the
    counts and callbacks written by each settling step survive with it or not at
    all, so every batch still ends and each callback was enqueued exactly once."""
    settings = durable_settings
    rng = random.Random(7)
    procs = [start(settings, "default")]
    bids: list[str] = []
    redis = Redis.from_url(settings.redis_url)
    try:
        async with Client(settings) as client:
            for _ in range(BATCHES // 2):
                async with client.batch(
                    on_success=callback.args(), on_complete=callback.args()
                ) as b:
                    await b.enqueue_many(
                        member, [(rng.uniform(0.05, 0.3),) for _ in range(MEMBERS)]
                    )
                bids.append(b.bid)
            total_members = len(bids) * MEMBERS
            await wait_for(lambda: _more(redis, keys, total_members // 4), timeout=60)
        durable_redis.kill()
        await anyio.sleep(1.0)
        durable_redis.start()
        async with Client(settings) as client:

            async def all_done() -> bool:
                for bid in bids:
                    status = await client.batch_status(bid)
                    if status is None or status["state"] != "success":
                        return False
                return await redis.llen(keys.queue("callbacks")) >= 2 * len(bids)

            await wait_for(all_done, timeout=150, interval=0.5)
            await anyio.sleep(1.0)  # a second firing of any callback would land by now
            ledger = await pushed_callbacks(redis, keys)
            assert ledger == {
                f"{bid}:{event}": 1 for bid in bids for event in ("success", "complete")
            }
            for bid in bids:
                status = await client.batch_status(bid)
                assert status is not None
                assert (status["succeeded"], status["pending"]) == (MEMBERS, 0)
    finally:
        await redis.aclose()
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
