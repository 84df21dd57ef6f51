"""Input refused, never silently changed or stranded (issue 12, item 1).

One rule each, shared by ``Client.enqueue``, ``enqueue_many``, ``.options()``
and the CLI: strict JSON arguments, queue names a worker's ``-q`` accepts,
delays that are a time. What is refused leaves nothing in Redis.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import enum
import math
import uuid
from typing import Any

import orjson
import pytest
import redis as sync_redis
from redis.asyncio import Redis

from cogworker_async import Client, Settings, Worker, api, job
from cogworker_async.jobs import BoundJob, JobOptions
from cogworker_async.keys import Keys
from tests.helpers import wait_for
from tests.integration.test_cli import cli, one_error

pytestmark = pytest.mark.anyio


@job(name="input.echo")
async def echo(*args: Any, **kwargs: Any) -> None:
    pass


class Colour(enum.IntEnum):
    RED = 1


@dataclasses.dataclass
class Point:
    x: int


async def _nothing_stored(redis: Redis, keys: Keys) -> bool:
    return not await redis.exists(keys.queue("default"), keys.schedule, keys.queues)


# --- arguments: strict JSON --------------------------------------------------------------

# Each of these was stored changed on bc90d0c (NaN as null, a datetime as a
# string, a tuple as a list...) and came back to the handler as something else.
CHANGED_ON_THE_WAY = [
    pytest.param(float("nan"), ValueError, "nan is not a JSON number", id="nan"),
    pytest.param(float("inf"), ValueError, "inf is not a JSON number", id="inf"),
    pytest.param([1, float("-inf")], ValueError, r"at \[1\]: -inf", id="nested-inf"),
    pytest.param(2**63, ValueError, "does not fit in 64 bits", id="int-over-64-bits"),
    pytest.param(-(2**63) - 1, ValueError, "does not fit in 64 bits", id="int-under-64-bits"),
    pytest.param(datetime.datetime(2026, 1, 2), TypeError, "datetime.datetime", id="datetime"),
    pytest.param(datetime.date(2026, 1, 2), TypeError, "datetime.date", id="date"),
    pytest.param(uuid.UUID(int=7), TypeError, "uuid.UUID", id="uuid"),
    pytest.param({"pair": (1, 2)}, TypeError, r"builtins.tuple at \['pair'\]", id="tuple"),
    pytest.param(Colour.RED, TypeError, "Colour", id="int-enum"),
    pytest.param(Point(1), TypeError, "Point", id="dataclass"),
    pytest.param({1: "a"}, TypeError, "as a dict key", id="int-key"),
]


@pytest.mark.parametrize(("value", "error", "says"), CHANGED_ON_THE_WAY)
async def test_enqueue_refuses_what_json_would_change(
    settings: Settings, redis: Redis, keys: Keys, value: object, error: type, says: str
) -> None:
    async with Client(settings) as client:
        with pytest.raises(error, match=f"argument 1.*{says}"):
            await client.enqueue(echo, "fine", value)
        with pytest.raises(error, match=f"keyword argument 'v'.*{says}"):
            await client.enqueue("input.by_name", v=value)
        with pytest.raises(error, match=f"argument 0.*{says}"):
            await client.enqueue(echo.options(delay=30), value)
        # The same rule, the same message, for a batch: nothing of it is sent.
        with pytest.raises(error, match=f"argument 1.*{says}"):
            await client.enqueue_many(echo, [(1, 2), ("fine", value)])
        with pytest.raises(error, match=f"keyword argument 'v'.*{says}"):
            await client.enqueue_many(echo, [{"v": 1}, {"v": value}])
    assert await _nothing_stored(redis, keys)


async def test_plain_json_arguments_arrive_as_given(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    value = [1, -(2**63), 2**63 - 1, 1.5, "é", None, True, {"k": [{}]}]
    async with Client(settings) as client:
        await client.enqueue(echo, *value, k=value)
        await client.enqueue_many(echo, [tuple(value)])
    for raw in await redis.lrange(keys.queue("default"), 0, -1):
        assert orjson.loads(raw)["args"] == value


# --- queue names ---------------------------------------------------------------------------

BAD_QUEUES = ["a:b", "a b", "*", "", "a\nb", "mail\n"]


@pytest.mark.parametrize("queue", BAD_QUEUES)
async def test_a_queue_no_worker_could_read_is_refused(
    settings: Settings, redis: Redis, keys: Keys, queue: str
) -> None:
    with pytest.raises(ValueError, match=r"bad queue name.*letters, digits"):
        echo.options(queue=queue)
    with pytest.raises(ValueError, match="bad queue name"):
        job(queue=queue)
    # A BoundJob built directly (as the CLI does) meets the same rule in the client.
    bound = BoundJob(echo, JobOptions(queue=queue))
    async with Client(settings) as client:
        with pytest.raises(ValueError, match="bad queue name"):
            await client.enqueue(bound, 1)
        with pytest.raises(ValueError, match="bad queue name"):
            await client.enqueue_many(bound, [(1,)])
    with pytest.raises(ValueError, match="bad queue name"):
        await api.pause(redis, keys, queue, force=True)
    with pytest.raises(ValueError, match="bad queue name"):
        await api.clear_queue(redis, keys, queue)
    assert await _nothing_stored(redis, keys)
    assert not await redis.exists(keys.paused)


async def test_pause_of_a_queue_nothing_knows_needs_force(redis: Redis, keys: Keys) -> None:
    with pytest.raises(api.UnknownQueueError, match=r"no queue 'typo_queue'.*force"):
        await api.pause(redis, keys, "typo_queue")
    with pytest.raises(api.UnknownQueueError):
        await api.resume(redis, keys, "typo_queue")
    assert not await redis.exists(keys.paused)
    assert await api.pause(redis, keys, "typo_queue", force=True) is True
    # Paused, however it got so: resumed without force.
    assert await api.resume(redis, keys, "typo_queue") is True
    await redis.sadd(keys.queues, "listed")
    assert await api.pause(redis, keys, "listed") is True


def test_cli_pause_refuses_a_typo_and_a_bad_name(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    line = one_error(cli(settings, "pause", "typo_queue"), 2)
    assert "no queue 'typo_queue'" in line
    assert line.endswith("pause it anyway with --force")
    assert not sync_client.exists(keys.paused)
    for bad in ("a:b", "*"):
        line = one_error(cli(settings, "pause", bad, "--force"), 2)
        assert line.startswith(f"error: bad queue name {bad!r}")
    assert not sync_client.exists(keys.paused)
    done = cli(settings, "pause", "typo_queue", "--force")
    assert done.returncode == 0, done.stderr
    assert sync_client.sismember(keys.paused, "typo_queue")


# --- delays ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "when",
    [
        {"delay": math.inf},
        {"delay": math.nan},
        {"delay": -5.0},
        {"at": math.inf},
        {"at": math.nan},
        {"at": -math.inf},
    ],
    ids=["delay-inf", "delay-nan", "delay-negative", "at-inf", "at-nan", "at-minus-inf"],
)
async def test_a_delay_that_is_no_time_is_refused(
    settings: Settings, redis: Redis, keys: Keys, when: dict[str, float]
) -> None:
    with pytest.raises(ValueError, match="finite"):
        echo.options(**when)  # type: ignore[arg-type]
    bound = BoundJob(echo, JobOptions(**when))  # type: ignore[arg-type]
    async with Client(settings) as client:
        with pytest.raises(ValueError, match="finite"):
            await client.enqueue(bound, 1)
        with pytest.raises(ValueError, match="finite"):
            await client.enqueue_many(bound, [(1,)])
    assert await _nothing_stored(redis, keys)


# --- payloads that are not UTF-8 ------------------------------------------------------------


async def test_invalid_utf8_reaches_dead_with_its_exact_bytes(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    raw = b'{"jid":"a1","class":"input.echo","args":["caf\xe9"],"queue":"default"}'
    await redis.lpush(keys.queue("default"), raw)
    async with Worker(settings, jobs=[echo]):

        async def buried() -> bool:
            return bool(await redis.zcard(keys.dead))

        await wait_for(buried)
    (entry,) = [orjson.loads(e) for e in await redis.zrange(keys.dead, 0, -1)]
    assert entry["error_class"] == "UnparseableJob"
    assert "surrogates" not in entry["error_message"]
    at = raw.index(b"\xe9")
    assert entry["error_message"] == (
        f"not valid UTF-8: byte 0xe9 at offset {at} (invalid continuation byte)"
    )
    assert base64.b64decode(entry["raw_b64"]) == raw
    assert entry["raw"] == raw.decode("utf-8", "replace")


# --- weights ---------------------------------------------------------------------------------


@pytest.mark.parametrize("weight", ["20000000", "99999999999999999999999", "0"])
def test_worker_refuses_a_weight_out_of_bounds_at_start(settings: Settings, weight: str) -> None:
    done = cli(
        settings, "worker", "tests.jobs_for_tests", "-q", f"default:{weight}", "-q", "b", timeout=20
    )
    line = one_error(done, 2)
    assert f"bad queue spec 'default:{weight}'" in line
    assert "at least 1 and at most 1000" in line
