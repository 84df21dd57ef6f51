"""Arguments that do not fit a job's handler: refused at enqueue, dead at once in a worker.

Issue 25: a wrong number of arguments used to be accepted at enqueue and
failed in the worker with ``TypeError``, retried 25 times.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import Client, Settings, Worker, job, jobs
from cogworker_async.keys import Keys
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

ran: list[object] = []


@job(name="argcheck.greet")
async def greet(name: str, *, loud: bool = False) -> None:
    ran.append((name, loud))


@job(name="argcheck.plain")
def plain(a: int, b: int) -> None:
    ran.append((a, b))


async def _nothing_written(redis: Redis, keys: Keys) -> None:
    assert await redis.llen(keys.queue("default")) == 0
    assert await redis.zcard(keys.schedule) == 0


@pytest.mark.parametrize(
    ("args", "kwargs", "says"),
    [
        ((), {}, "missing a required argument: 'name'"),
        (("a", "b"), {}, "too many positional arguments"),
        (("a",), {"shout": True}, "got an unexpected keyword argument 'shout'"),
    ],
)
async def test_enqueue_refuses_arguments_that_do_not_fit(
    settings: Settings,
    redis: Redis,
    keys: Keys,
    args: tuple[object, ...],
    kwargs: dict[str, object],
    says: str,
) -> None:
    async with Client(settings) as client:
        with pytest.raises(TypeError) as caught:
            await client.enqueue(greet, *args, **kwargs)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "job 'argcheck.greet' cannot take these arguments" in message
    assert says in message
    assert message.endswith("; it takes (name, *, loud=False)")
    await _nothing_written(redis, keys)


async def test_every_enqueue_path_checks_a_function_known_here(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        with pytest.raises(TypeError, match=r"argcheck\.plain"):
            await client.enqueue(plain.options(delay=60), 1)  # type: ignore[call-overload]
        with pytest.raises(TypeError, match="too many positional arguments"):
            await client.enqueue_many(plain, [(1, 2, 3)])
        with pytest.raises(TypeError, match="missing a required argument: 'b'"):
            await client.enqueue("argcheck.plain", 1)  # declared in this process
        # Fitting ones go through, by function, by options, in bulk and by name.
        assert await client.enqueue(greet, "x", loud=True)
        assert await client.enqueue(plain.options(queue="default"), 1, 2)
        assert len(await client.enqueue_many(plain, [(1, 2), {"a": 3, "b": 4}])) == 2
        assert await client.enqueue("argcheck.plain", 5, 6)
    assert await redis.llen(keys.queue("default")) == 5
    assert await redis.zcard(keys.schedule) == 0


async def test_an_unknown_name_is_not_checked(settings: Settings, redis: Redis, keys: Keys) -> None:
    async with Client(settings) as client:
        assert await client.enqueue("argcheck.elsewhere", 1, 2, 3)
    assert await redis.llen(keys.queue("default")) == 1


async def test_a_misfit_payload_goes_to_dead_at_once_not_retried(
    settings: Settings, redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Enqueued by name by a process that does not know the job (or an older client)."""
    ran.clear()
    monkeypatch.delitem(jobs._declared, "argcheck.greet")  # a client that never imported it
    async with Client(settings) as client:
        bad = await client.enqueue_by_name("argcheck.greet", ["a", "b"], queue="default")
        good = await client.enqueue(greet, "ok")
    assert bad.jid is not None
    assert good
    async with Worker(settings, jobs=[greet]):

        async def dead_one() -> bool:
            return await redis.zcard(keys.dead) == 1

        await wait_for(dead_one, timeout=30)
        await wait_for(lambda: _ran(1), timeout=30)
    assert await redis.zcard(keys.retry) == 0
    [raw] = await redis.zrange(keys.dead, 0, -1)
    assert isinstance(raw, bytes)
    entry = orjson.loads(raw)
    assert entry["jid"] == bad.jid
    assert entry["error_class"] == "TypeError"
    assert entry["error_message"].startswith("job 'argcheck.greet' cannot take its arguments")
    assert "too many positional arguments" in entry["error_message"]
    assert ran == [("ok", False)]


async def _ran(n: int) -> bool:
    return len(ran) >= n


async def _defaults(a: int, b: int = 2, *, c: int = 3) -> None: ...
async def _star(a: int, *rest: int) -> None: ...
async def _required_keyword(a: int, *, must: int) -> None: ...
async def _anything(*args: int, **kwargs: int) -> None: ...


@pytest.mark.parametrize(
    ("fn", "args", "kwargs", "fits"),
    [
        (_defaults, (1,), {}, True),
        (_defaults, (1, 2), {}, True),
        (_defaults, (), {}, False),
        (_defaults, (1, 2, 3), {}, False),
        (_defaults, (1,), {"c": 4}, True),
        (_defaults, (1,), {"d": 4}, False),
        (_star, (1, 2, 3, 4), {}, True),
        (_star, (), {}, False),
        (_required_keyword, (1,), {}, False),
        (_required_keyword, (1,), {"must": 2}, True),
        (_anything, (1, 2), {"x": 1}, True),
    ],
)
async def test_the_check_agrees_with_a_call(
    fn: Any, args: tuple[int, ...], kwargs: dict[str, int], fits: bool
) -> None:
    """The fast path (positional arguments alone) and the bind say what a call would."""
    function = job(name=f"argcheck.{fn.__name__}")(fn)
    for _ in range(2):  # the first reads the signature, the second uses what it cached
        if fits:
            function.check_call(args, kwargs)
        else:
            with pytest.raises(TypeError, match=rf"job 'argcheck\.{fn.__name__}' cannot take"):
                function.check_call(args, kwargs)
