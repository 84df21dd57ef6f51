"""The key guard against real Redis: wrong-typed keys go to quarantine, nothing else moves."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from cogworker_async.keys import Keys
from cogworker_async.observability.history import minute_of
from cogworker_async.settings import Settings
from cogworker_async.store import guard
from cogworker_async.store.commands import today
from cogworker_async.store.guard import QUARANTINE_TTL, ExpectedType, holds_integer
from cogworker_async.worker.key_table import expected_type_of
from cogworker_async.worker.keyguard import KeyGuard, QuarantineRecord

pytestmark = pytest.mark.anyio

ME = "host:1:me"
QUEUES = ["default", "q"]
LOGGER = "tests.keyguard"


@pytest.fixture
def key_guard(redis: Redis, keys: Keys, settings: Settings) -> KeyGuard:
    return KeyGuard(
        redis, keys, settings, identity=ME, queues=QUEUES, logger=logging.getLogger(LOGGER)
    )


async def _namespace_keys(redis: Redis, keys: Keys) -> set[bytes]:
    return {k async for k in redis.scan_iter(match=f"{keys.ns}:*")}


async def _quarantined(redis: Redis, keys: Keys) -> set[bytes]:
    return {k async for k in redis.scan_iter(match=keys.quarantine("*"))}


def _error_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno >= logging.ERROR
    ]


Breaker = Callable[[Redis, Keys], Awaitable[str]]


async def _retry_as_string(redis: Redis, keys: Keys) -> str:
    await redis.set(keys.retry, "oops")
    return keys.retry


async def _queue_as_hash(redis: Redis, keys: Keys) -> str:
    await redis.hset(keys.queue("q"), mapping={"jid": "abc", "class": "x"})
    return keys.queue("q")


async def _registry_as_list(redis: Redis, keys: Keys) -> str:
    await redis.rpush(keys.in_progress_identities, "host:9:other", "host:8:another")
    return keys.in_progress_identities


async def _corrupt_counter(redis: Redis, keys: Keys) -> str:
    await redis.set(keys.stats_processed, "abc")
    return keys.stats_processed


async def _hash_counter(redis: Redis, keys: Keys) -> str:
    await redis.hset(keys.stats_failed, "n", "3")
    return keys.stats_failed


async def _last_beat_as_string(redis: Redis, keys: Keys) -> str:
    await redis.set(keys.last_beat, "1700000000")
    return keys.last_beat


async def _wakeup_as_list(redis: Redis, keys: Keys) -> str:
    await redis.rpush(keys.wakeup("default"), "1")
    return keys.wakeup("default")


async def _own_list_as_set(redis: Redis, keys: Keys) -> str:
    await redis.sadd(keys.in_progress(ME), '{"jid":"x"}')
    return keys.in_progress(ME)


async def _recovery_lock_as_hash(redis: Redis, keys: Keys) -> str:
    await redis.hset(keys.recovery_lock, "owner", "someone")
    return keys.recovery_lock


async def _todays_processed_as_hash(redis: Redis, keys: Keys) -> str:
    key = keys.stats_processed_on(today())
    await redis.hset(key, "n", "1")
    return key


async def _signals_as_string(redis: Redis, keys: Keys) -> str:
    await redis.set(keys.signals(ME), "stop")
    return keys.signals(ME)


async def _handed_over_releases_as_set(redis: Redis, keys: Keys) -> str:
    await redis.sadd(keys.unique("~releases"), "lock")
    return keys.unique("~releases")


async def _recovered_counter_corrupt(redis: Redis, keys: Keys) -> str:
    await redis.set(keys.stat("recovered"), "many")
    return keys.stat("recovered")


CASES: list[tuple[Breaker, str, ExpectedType]] = [
    (_retry_as_string, "string", "zset"),
    (_queue_as_hash, "hash", "list"),
    (_registry_as_list, "list", "set"),
    (_corrupt_counter, "string", "integer"),
    (_hash_counter, "hash", "integer"),
    (_last_beat_as_string, "string", "hash"),
    (_wakeup_as_list, "list", "zset"),
    (_own_list_as_set, "set", "list"),
    (_recovery_lock_as_hash, "hash", "string"),
    (_todays_processed_as_hash, "hash", "integer"),
    (_signals_as_string, "string", "list"),
    (_handed_over_releases_as_set, "set", "list"),
    (_recovered_counter_corrupt, "string", "integer"),
]


@pytest.mark.parametrize(
    ("breaker", "found", "expected"), CASES, ids=[c[0].__name__.strip("_") for c in CASES]
)
async def test_wrong_type_is_quarantined(
    key_guard: KeyGuard,
    redis: Redis,
    keys: Keys,
    caplog: pytest.LogCaptureFixture,
    breaker: Breaker,
    found: str,
    expected: ExpectedType,
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    key = await breaker(redis, keys)
    before = await redis.dump(key)
    assert before is not None

    records = await key_guard.check_once()

    target = keys.quarantine(key)
    assert records == [QuarantineRecord(key, found, expected, target)]
    assert await redis.exists(key) == 0
    assert await redis.dump(target) == before  # the data is kept as it was
    ttl = await redis.ttl(target)
    assert QUARANTINE_TTL - 60 < ttl <= QUARANTINE_TTL
    assert QUARANTINE_TTL == 7 * 24 * 3600
    errors = _error_lines(caplog)
    assert len(errors) == 1
    for part in (key, f"type {found}", target):
        assert part in errors[0]
    assert ("integer" if expected == "integer" else f"expected {expected}") in errors[0]
    # Nothing else was moved.
    assert await _quarantined(redis, keys) == {target.encode()}


async def test_corrupt_counter_error_shows_the_value(
    key_guard: KeyGuard, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger=LOGGER)
    await redis.set(keys.stats_processed, "abc")
    await key_guard.check_once()
    assert await redis.get(keys.quarantine(keys.stats_processed)) == b"abc"
    (line,) = _error_lines(caplog)
    assert "b'abc'" in line
    assert "not an integer" in line


async def test_several_wrong_keys_in_one_pass(
    key_guard: KeyGuard, redis: Redis, keys: Keys
) -> None:
    moved = {await breaker(redis, keys) for breaker, _, _ in CASES}
    records = await key_guard.check_once()
    assert {r.key for r in records} == moved
    assert await _quarantined(redis, keys) == {keys.quarantine(k).encode() for k in moved}
    assert await key_guard.check_once() == []  # the next pass finds nothing


async def _populate_correctly(redis: Redis, keys: Keys) -> None:
    for name in QUEUES:
        await redis.lpush(keys.queue(name), b'{"jid":"1","queue":"%s"}' % name.encode())
        await redis.zadd(keys.wakeup(name), {"1": 0})
    await redis.sadd(keys.queues, *QUEUES)
    await redis.sadd(keys.paused, "q")
    await redis.sadd(keys.processes, ME)
    await redis.sadd(keys.in_progress_identities, ME)
    zsets = (
        keys.schedule,
        keys.retry,
        keys.dead,
        keys.live_queues,
        keys.schedule_wakeup,
        keys.beats,
    )
    for zset in (*zsets, keys.aborted):
        await redis.zadd(zset, {"entry": 1.0})
    for lst in (keys.in_progress(ME), keys.unsettled, keys.repeat_orphans):
        await redis.rpush(lst, b'{"jid":"2"}')
    await redis.hset(keys.last_beat, ME, "1700000000.5")
    await redis.hset(keys.beating_since, ME, "1700000000.5")
    for name in ("entries", "last", "results"):
        await redis.hset(keys.periodic(name), "tick", "{}")
    await redis.sadd(keys.periodic_paused, "tick")  # type: ignore[misc]
    await redis.set(keys.recovery_lock, "token", px=60_000)
    await redis.set(keys.stats_processed, "9223372036854775807")
    await redis.set(keys.stats_failed, "-12")
    for counter in ("aborted", "recovered", "process_died", "duplicates_suspected"):
        await redis.set(keys.stat(counter), "3")
    await redis.set(keys.stats_processed_on(today()), "5")
    await redis.set(keys.stats_failed_on(today()), "1")
    await redis.hset(keys.history(minute_of(time.time())), "job|h0", "1")
    await redis.rpush(keys.signals(ME), "quiet")
    await redis.rpush(keys.unique("~releases"), '["lock", "jid"]')


async def test_correct_keys_are_untouched(key_guard: KeyGuard, redis: Redis, keys: Keys) -> None:
    await _populate_correctly(redis, keys)
    present = await _namespace_keys(redis, keys)
    # Every key the guard checks is present, so each was really looked at.
    assert {k.encode() for k in key_guard.expected_types()} <= present
    dumps = {k: await redis.dump(k) for k in present}

    assert await key_guard.check_once() == []

    assert await _namespace_keys(redis, keys) == present
    assert {k: await redis.dump(k) for k in present} == dumps
    assert await redis.pttl(keys.recovery_lock) > 0  # its own TTL kept


async def test_zero_counter_is_fine(key_guard: KeyGuard, redis: Redis, keys: Keys) -> None:
    await redis.set(keys.stats_processed, "0")
    assert await key_guard.check_once() == []
    assert await redis.get(keys.stats_processed) == b"0"


async def test_absent_keys_are_fine(
    key_guard: KeyGuard, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    assert await key_guard.check_once() == []
    assert await _namespace_keys(redis, keys) == set()  # nothing created either
    assert _error_lines(caplog) == []


async def test_second_collision_keeps_both(key_guard: KeyGuard, redis: Redis, keys: Keys) -> None:
    await redis.set(keys.retry, "first")
    (first,) = await key_guard.check_once()
    assert first.moved_to == keys.quarantine(keys.retry)

    await redis.set(keys.retry, "second")
    (second,) = await key_guard.check_once()
    assert second.moved_to != first.moved_to
    assert second.moved_to.startswith(keys.quarantine(keys.retry) + ":")

    await redis.set(keys.retry, "third")
    (third,) = await key_guard.check_once()
    assert len({first.moved_to, second.moved_to, third.moved_to}) == 3

    for record, value in ((first, b"first"), (second, b"second"), (third, b"third")):
        assert await redis.get(record.moved_to) == value
        assert 0 < await redis.ttl(record.moved_to) <= QUARANTINE_TTL
    assert await redis.exists(keys.retry) == 0


async def test_script_leaves_a_correct_key_alone(redis: Redis, keys: Keys) -> None:
    """The move re-checks the type: a key fixed after the caller's check stays put."""
    await redis.zadd(keys.retry, {"entry": 5.0})
    await redis.set(keys.stats_processed, "42")
    await redis.rpush(keys.queue("q"), "job")

    assert await guard.quarantine(redis, keys, key=keys.retry, expected="zset") is None
    assert await guard.quarantine(redis, keys, key=keys.stats_processed, expected="integer") is None
    assert await guard.quarantine(redis, keys, key=keys.queue("q"), expected="list") is None
    assert await guard.quarantine(redis, keys, key=keys.dead, expected="zset") is None  # absent

    assert await redis.zrange(keys.retry, 0, -1, withscores=True) == [(b"entry", 5.0)]
    assert await redis.get(keys.stats_processed) == b"42"
    assert await redis.lrange(keys.queue("q"), 0, -1) == [b"job"]
    assert await _quarantined(redis, keys) == set()
    # The same call does move it when it is wrong (so the None above means something).
    await redis.delete(keys.retry)
    await redis.set(keys.retry, "broken")
    moved = await guard.quarantine(redis, keys, key=keys.retry, expected="zset")
    assert moved == keys.quarantine(keys.retry)


async def test_key_fixed_between_check_and_move_stays(
    key_guard: KeyGuard,
    redis: Redis,
    keys: Keys,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    real = guard.quarantine
    await redis.set(keys.retry, "broken")

    async def fixed_first(redis: Redis, keys: Keys, **kw: Any) -> str | None:
        # Someone repairs the key after the guard's TYPE pipeline, before the script.
        await redis.delete(kw["key"])
        await redis.zadd(kw["key"], {"repaired": 1.0})
        return await real(redis, keys, **kw)

    monkeypatch.setattr(guard, "quarantine", fixed_first)
    assert await key_guard.check_once() == []
    assert await redis.zrange(keys.retry, 0, -1) == [b"repaired"]
    assert await _quarantined(redis, keys) == set()
    assert _error_lines(caplog) == []
    assert any("fixed before" in r.getMessage() for r in caplog.records)


async def test_one_key_failing_to_move_does_not_stop_the_others(
    key_guard: KeyGuard,
    redis: Redis,
    keys: Keys,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger=LOGGER)
    real = guard.quarantine
    # The failing key comes first in the guard's order, so the others run after it.
    await redis.hset(keys.queue("default"), "a", "b")
    await redis.set(keys.retry, "broken")
    await redis.set(keys.stats_failed, "x")

    async def flaky(redis: Redis, keys: Keys, **kw: Any) -> str | None:
        if kw["key"] == keys.queue("default"):
            raise ResponseError("NOPERM this user has no permissions to run 'rename'")
        return await real(redis, keys, **kw)

    monkeypatch.setattr(guard, "quarantine", flaky)
    records = await key_guard.check_once()
    assert {r.key for r in records} == {keys.retry, keys.stats_failed}
    assert await redis.hgetall(keys.queue("default")) == {b"a": b"b"}  # left, not lost
    assert any(keys.queue("default") in line and "NOPERM" in line for line in _error_lines(caplog))

    monkeypatch.setattr(guard, "quarantine", real)
    (record,) = await key_guard.check_once()  # the next pass moves it
    assert record.key == keys.queue("default")


async def test_outage_propagates_for_run_duty(
    key_guard: KeyGuard, redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    await redis.set(keys.retry, "broken")

    async def down(redis: Redis, keys: Keys, **kw: Any) -> str | None:
        raise RedisConnectionError("Connection refused")

    monkeypatch.setattr(guard, "quarantine", down)
    with pytest.raises(RedisConnectionError):
        await key_guard.check_once()
    assert await redis.get(keys.retry) == b"broken"


COUNTER_VALUES = [
    b"0",
    b"1",
    b"-1",
    b"42",
    b"9223372036854775807",
    b"-9223372036854775808",
    b"9223372036854775808",
    b"-9223372036854775809",
    b"99999999999999999999",
    b"-0",
    b"01",
    b"+1",
    b" 1",
    b"1 ",
    b"1.5",
    b"1e3",
    b"",
    b"abc",
    b"12abc",
    b"-",
    b"7" * 100,
]


@pytest.mark.parametrize("value", COUNTER_VALUES, ids=lambda v: repr(v)[:30])
async def test_integer_check_agrees_with_incr(redis: Redis, keys: Keys, value: bytes) -> None:
    """Python's check, the script's and INCR's own all agree on what a counter may hold."""
    key = keys.stats_processed
    await redis.set(key, value)
    try:
        await redis.incrby(key, 0)
    except ResponseError:
        incr_accepts = False
    else:
        incr_accepts = True
    await redis.set(key, value)

    assert holds_integer(value) is incr_accepts
    moved = await guard.quarantine(redis, keys, key=key, expected="integer")
    assert (moved is None) is incr_accepts
    if moved is not None:
        assert await redis.get(moved) == value


async def test_request_check_wakes_the_pass_at_once_and_backs_off_when_it_finds_nothing(
    key_guard: KeyGuard, redis: Redis, keys: Keys
) -> None:
    """The duty's sleep (key_check_interval, here 300 s) ends at a WRONGTYPE's request, one
    pass a second at most; asked-for passes that move nothing space out (1 s, 2 s, ...)."""
    clock = anyio.current_time
    key_guard.request_check()
    began = clock()
    await key_guard.wait(300)  # no pass yet: at once
    assert clock() - began < 0.5
    assert await key_guard.check_once() == []  # asked for, found nothing: next gap 2 s

    key_guard.request_check()
    await key_guard.wait(300)
    assert clock() - began >= 1.9
    await redis.set(keys.paused, "garbage")
    (record,) = await key_guard.check_once()  # moved something: back to 1 s
    assert record.key == keys.paused

    passed = clock()
    key_guard.request_check()
    await key_guard.wait(300)
    assert 0.9 <= clock() - passed < 1.5


async def test_every_key_a_pass_checks_has_the_type_the_table_gives(
    key_guard: KeyGuard, keys: Keys
) -> None:
    for key, kind in key_guard.expected_types().items():
        assert expected_type_of(keys, key) == kind, key


async def test_a_reported_status_key_of_the_wrong_type_is_moved_by_the_next_pass(
    key_guard: KeyGuard, redis: Redis, keys: Keys
) -> None:
    """No pass could list every job's status key: a caller whose write said WRONGTYPE
    reports the key, and the next pass moves it (by its family's type, a hash)."""
    status, result = keys.status("j1"), keys.result("j2")
    await redis.set(status, "not a hash")
    await redis.set(result, "not a list")
    key_guard.report(status)
    key_guard.report(result)
    key_guard.report(keys.process(ME))  # rewritten by every beat: never moved
    key_guard.report("elsewhere:status:j1")  # not ours
    records = await key_guard.check_once()
    assert sorted(r.key for r in records) == sorted([status, result])
    assert await _quarantined(redis, keys) == {
        keys.quarantine(status).encode(),
        keys.quarantine(result).encode(),
    }
    assert await key_guard.check_once() == []  # checked once, then forgotten
