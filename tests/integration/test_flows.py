"""Chains, groups and chords end to end, with each edge's failure policy.

A chain passes each result as the next job's first argument; a chord's
callback gets its group's results in order; a group inside a chain gets the
previous result in each of its jobs and hands the next stage their list. A
failed step: ``fail`` (the default) ends every later job as failed with
``DependencyFailed``, never run; ``drop`` ends the flow there; ``run`` runs the
dependent anyway with ``None``. Mistakes are one error before anything is
written.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from redis.asyncio import Redis

from cogworker_async import (
    Client,
    JobFailed,
    JobFunction,
    Settings,
    Worker,
    chain,
    chord,
    group,
    job,
    step,
)
from cogworker_async.keys import Keys

pytestmark = pytest.mark.anyio

ran: list[tuple[str, Any]] = []


@job(name="fl.add")
async def add(a: int, b: int) -> int:
    return a + b


@job(name="fl.double")
async def double(x: int) -> int:
    ran.append(("double", x))
    return 2 * x


@job(name="fl.text")
async def text(x: Any, suffix: str = "") -> str:
    ran.append(("text", x))
    return f"{x}{suffix}"


@job(name="fl.square")
async def square(x: int) -> int:
    return x * x


@job(name="fl.total")
async def total(values: list[int]) -> int:
    ran.append(("total", values))
    return sum(values)


@job(name="fl.fails", retry=0)
async def fails() -> None:
    raise RuntimeError("step one broke")


waiting: dict[str, anyio.Event] = {}


@job(name="fl.waits")
async def waits(x: int) -> int:
    waiting["started"].set()
    await anyio.sleep_forever()
    return x


ALL: list[JobFunction[Any, Any]] = [add, double, text, square, total, fails, waits]


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


async def test_a_chain_passes_each_result_on(settings: Settings) -> None:
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        flow = await client.enqueue_flow(
            chain(add.args(1, 2), double.args(), text.args(suffix="!"))
        )
        assert await flow.last.result(timeout=30) == "6!"
        assert await flow.stages[0][0].result(timeout=5) == 3
        for bid in flow.bids:
            status = await client.batch_status(bid)
            assert status is not None
            assert status["state"] == "success"
    assert ran == [("double", 3), ("text", 6)]


async def test_a_chords_callback_gets_the_results_in_order(settings: Settings) -> None:
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        flow = await client.enqueue_flow(
            chord(group(square.args(i) for i in range(5)), total.args())
        )
        assert await flow.last.result(timeout=30) == 30
    assert ran == [("total", [0, 1, 4, 9, 16])]


async def test_a_group_inside_a_chain(settings: Settings) -> None:
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        flow = await client.enqueue_flow(
            chain(add.args(2, 3), group(double.args(), square.args()), total.args())
        )
        assert await flow.last.result(timeout=30) == 10 + 25
    assert ("double", 5) in ran


async def test_a_failed_step_fails_its_dependents_by_default(settings: Settings) -> None:
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        flow = await client.enqueue_flow(chain(fails, double.args(), text.args()))
        with pytest.raises(JobFailed) as caught:
            await flow.last.result(timeout=30)
        assert caught.value.error_class == "DependencyFailed"
        with pytest.raises(JobFailed) as middle:
            await flow.stages[1][0].result(timeout=5)
        assert middle.value.error_class == "DependencyFailed"
        assert await client.batch_status(flow.bids[1]) is None  # never started
    assert ran == []


async def test_drop_ends_the_flow_and_run_runs_it_anyway(settings: Settings) -> None:
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        dropped = await client.enqueue_flow(chain(fails, step(double.args(), if_failed="drop")))
        anyway = await client.enqueue_flow(chain(fails, step(text.args(), if_failed="run")))
        assert await anyway.last.result(timeout=30) == "None"
        first = await client.batch_status(dropped.bids[0])
        assert first is not None
        assert first["state"] == "dead"
        await anyio.sleep(1.0)  # its step ran beside the other flow's
        assert await client.batch_status(dropped.bids[1]) is None
    assert ran == [("text", None)]


async def test_abort_flow_stops_the_running_stage_and_everything_after(
    settings: Settings,
) -> None:
    waiting["started"] = anyio.Event()
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        flow = await client.enqueue_flow(
            chain(add.args(1, 1), waits.args(), step(double.args(), if_failed="run"))
        )
        with anyio.fail_after(30):
            await waiting["started"].wait()
        assert await client.abort_flow(flow) == 1
        with pytest.raises(JobFailed) as caught:
            await flow.last.result(timeout=30)
        assert caught.value.error_class == "JobAborted"  # though its edge says "run"
        status = await client.batch_status(flow.bids[1])
        assert status is not None
        assert (status["state"], status["failed"], status["aborted"]) == ("complete", 1, True)
        assert await client.batch_status(flow.bids[2]) is None  # never started
    assert ("double", None) not in ran


async def test_mistakes_are_one_error_and_write_nothing(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        with pytest.raises(ValueError, match="if_failed must be one of"):
            step(double.args(), if_failed="later")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="at least one step"):
            group()
        with pytest.raises(TypeError, match="a group holds steps only"):
            group(chain(add.args(1, 2), double.args()))
        with pytest.raises(TypeError, match="a flow's step is"):
            chain(add.args(1, 2), 42)
        with pytest.raises(ValueError, match="can't be delayed"):
            await client.enqueue_flow(chain(add.args(1, 2), double.options(delay=60).args()))
        with pytest.raises(TypeError):  # checked against the handler before anything
            await client.enqueue_flow(chain(add.args(1, 2), add.args("too", "many", "args")))
        assert await redis.zcard(keys.batches) == 0
        assert await redis.llen(keys.queue("default")) == 0
