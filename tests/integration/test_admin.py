"""The admin API against real Redis: set views, retry-now, processes, busy, quarantine, bad data."""

from __future__ import annotations

import logging
import time
from typing import Any

import anyio
import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import api, payload
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.store import admin, guard
from cogworker_async.worker.heartbeat import Heartbeat
from tests.lua.support import jid_of, make_job

pytestmark = pytest.mark.anyio

GARBAGE = b"\x00not json at all {"


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "cogworker_async.api" and r.levelno == logging.WARNING
    ]


async def _seed(redis: Redis, key: str, *entries: tuple[bytes, float]) -> None:
    await redis.zadd(key, dict(entries))


def _failed(name: str, queue: str = "mail", **extra: Any) -> bytes:
    return make_job(
        queue,
        **{
            "class": name,
            "args": ["a@b.c"],
            "error_class": "RuntimeError",
            "error_message": "SMTP said no",
            "retry_count": 3,
            **extra,
        },
    )


# --- listing and search ---------------------------------------------------------------


async def test_list_orders_pages_and_parses(redis: Redis, keys: Keys) -> None:
    a, b, c = _failed("emails.send"), _failed("reports.build"), _failed("emails.digest")
    for key in (keys.retry, keys.dead):
        await _seed(redis, key, (a, 100.0), (b, 300.0), (c, 200.0))

    retry = await api.list_entries(redis, keys, "retry")
    assert [e.raw for e in retry] == [a, c, b]  # soonest due first
    dead = await api.list_entries(redis, keys, "dead")
    assert [e.raw for e in dead] == [b, c, a]  # newest failure first

    first = retry[0]
    assert first.score == 100.0
    assert first.jid == jid_of(a)
    assert first.ref == first.jid
    assert (first.name, first.queue) == ("emails.send", "mail")
    assert (first.error_class, first.error_message) == ("RuntimeError", "SMTP said no")
    assert first.job is not None
    assert first.job["retry_count"] == 3
    assert first.problem is None

    page = await api.list_entries(redis, keys, "retry", limit=1, offset=1)
    assert [e.raw for e in page] == [c]
    assert await api.list_entries(redis, keys, "retry", offset=3) == []
    assert await api.list_entries(redis, keys, "schedule") == []


async def test_search_by_name_jid_and_text(redis: Redis, keys: Keys) -> None:
    send = _failed("emails.send", args=["Zoë@example.org"])
    build = _failed("reports.Build", args=["quarterly*"])
    other = _failed("misc.other", args=["x"])
    await _seed(redis, keys.dead, (send, 1.0), (build, 2.0), (other, 3.0))

    async def found(search: str) -> list[bytes]:
        return [e.raw for e in await api.list_entries(redis, keys, "dead", search=search)]

    assert await found("EMAILS.SEND") == [send]  # name, any case
    assert await found("build") == [build]
    assert await found(jid_of(other)) == [other]  # jid
    assert await found(jid_of(other)[:10].upper()) == [other]
    assert await found("zoË@EXAMPLE") == [send]  # any text, non-ASCII, any case
    assert await found("quarterly*") == [build]  # a glob character is matched literally
    assert await found("quarter*y") == []  # ... and "*" is not a wildcard
    assert await found("smtp said") == [other, build, send]  # newest first
    assert await found("nowhere") == []
    assert [e.raw for e in await api.list_entries(redis, keys, "dead", search="o", limit=1)] == [
        other
    ]
    assert await api.list_entries(redis, keys, "dead", search="o", offset=1, limit=1) == [
        api.parse_entry(build, 2.0)
    ]


async def test_unparseable_entries_are_listed_not_fatal(redis: Redis, keys: Keys) -> None:
    buried = payload.unparseable_entry(b"{broken", "not JSON: boom")
    await _seed(redis, keys.dead, (GARBAGE, 1.0), (b"[1, 2]", 2.0), (buried, 3.0))

    entries = {e.raw: e for e in await api.list_entries(redis, keys, "dead")}
    garbage = entries[GARBAGE]
    assert garbage.job is None
    assert garbage.jid is None
    assert garbage.problem is not None
    assert garbage.problem.startswith("not JSON")
    assert garbage.ref == api.digest(GARBAGE)
    assert garbage.ref.startswith("sha1:")
    assert entries[b"[1, 2]"].problem == "not a JSON object but list"
    kept = entries[buried]
    assert kept.name == "UnparseableJob"
    assert kept.job is not None
    assert kept.job["raw"] == "{broken"
    assert kept.problem == "no 'queue' string in the job"
    # JSON-ready, undecodable bytes replaced rather than failing.
    as_json = orjson.loads(orjson.dumps([e.as_dict() for e in entries.values()]))
    assert {d["ref"] for d in as_json} == {e.ref for e in entries.values()}
    assert set(as_json[0]) == {
        "raw",
        "score",
        "job",
        "jid",
        "name",
        "queue",
        "error_class",
        "error_message",
        "problem",
        "ref",
    }

    # Found by text, left in place by retry, removable by its ref.
    assert [e.raw for e in await api.list_entries(redis, keys, "dead", search="NOT JSON AT")] == [
        GARBAGE
    ]
    assert await api.retry_now(redis, keys, "dead", [garbage.ref, kept.ref]) == 0
    assert await redis.zcard(keys.dead) == 3
    assert await api.retry_all(redis, keys, "dead") == 0
    assert await api.delete(redis, keys, "dead", [garbage.ref]) == 1
    assert await redis.zscore(keys.dead, GARBAGE) is None
    assert await redis.zcard(keys.dead) == 2


# --- retry now --------------------------------------------------------------------------


async def test_retry_now_moves_the_entry_onto_its_queue(redis: Redis, keys: Keys) -> None:
    entry = _failed("emails.send", custom={"kept": True})
    stay = _failed("emails.send")
    await _seed(redis, keys.retry, (entry, time.time() + 3600), (stay, time.time() + 3600))

    before = time.time()
    assert await api.retry_now(redis, keys, "retry", [jid_of(entry)]) == 1

    assert await redis.zrange(keys.retry, 0, -1) == [stay]
    queued = await redis.lrange(keys.queue("mail"), 0, -1)
    assert len(queued) == 1
    job = orjson.loads(queued[0])
    original = orjson.loads(entry)
    assert job["enqueued_at"] >= before
    assert {k: v for k, v in job.items() if k != "enqueued_at"} == {
        k: v for k, v in original.items() if k != "enqueued_at"
    }  # retry_count and every other field carried through
    assert await redis.sismember(keys.queues, "mail")
    assert await redis.zscore(keys.wakeup("mail"), "1") == 0

    # Gone now: a second retry finds nothing and pushes nothing.
    assert await api.retry_now(redis, keys, "retry", [jid_of(entry)]) == 0
    assert await redis.llen(keys.queue("mail")) == 1


async def test_retry_now_from_dead_and_schedule(redis: Redis, keys: Keys) -> None:
    dead = _failed("emails.send", queue="mail")
    scheduled = make_job("later")
    await _seed(redis, keys.dead, (dead, 1.0))
    await _seed(redis, keys.schedule, (scheduled, time.time() + 3600))

    assert await api.retry_now(redis, keys, "dead", [jid_of(dead), "f" * 24]) == 1
    assert await api.retry_now(redis, keys, "schedule", [jid_of(scheduled)]) == 1
    assert await redis.zcard(keys.dead) == 0
    assert await redis.zcard(keys.schedule) == 0
    assert jid_of(await redis.rpop(keys.queue("mail"))) == jid_of(dead)
    assert jid_of(await redis.rpop(keys.queue("later"))) == jid_of(scheduled)


async def test_concurrent_retry_now_runs_the_job_once(redis: Redis, keys: Keys) -> None:
    entries = [_failed("emails.send") for _ in range(20)]
    await _seed(redis, keys.dead, *((raw, float(i)) for i, raw in enumerate(entries)))
    jids = [jid_of(raw) for raw in entries]
    results: list[int] = []

    async def operator() -> None:
        results.append(await api.retry_now(redis, keys, "dead", jids))

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(operator)

    assert sum(results) == 20
    queued = await redis.lrange(keys.queue("mail"), 0, -1)
    assert sorted(jid_of(raw) for raw in queued) == sorted(jids)
    assert await redis.zcard(keys.dead) == 0


async def test_enqueue_entry_script_moves_once(redis: Redis, keys: Keys) -> None:
    # Two operators read the entry before either moved it: only the first moves it.
    entry = _failed("emails.send")
    await _seed(redis, keys.retry, (entry, 5.0))
    moves = [
        await admin.enqueue_entry(
            redis, keys, source=keys.retry, entry=entry, payload=entry, queue="mail"
        )
        for _ in range(2)
    ]
    assert moves == [True, False]
    assert await redis.lrange(keys.queue("mail"), 0, -1) == [entry]
    assert await redis.zcard(keys.retry) == 0


async def test_a_broken_queue_key_leaves_the_entry(
    redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    entry = _failed("emails.send", queue="broken")
    await _seed(redis, keys.retry, (entry, 5.0))
    await redis.set(keys.queue("broken"), "not a list")
    # The set of queue names broken too: the move still happens, listing is best effort.
    ok = _failed("emails.send", queue="fine")
    await _seed(redis, keys.retry, (ok, 6.0))
    await redis.set(keys.queues, "not a set")

    with caplog.at_level(logging.WARNING, logger="cogworker_async.api"):
        assert await api.retry_all(redis, keys, "retry") == 1

    assert await redis.zrange(keys.retry, 0, -1) == [entry]
    assert await redis.get(keys.queue("broken")) == b"not a list"
    assert jid_of(await redis.rpop(keys.queue("fine"))) == jid_of(ok)
    assert any(keys.queue("broken") in w and "string" in w for w in _warnings(caplog))


async def test_retry_all_moves_every_runnable_entry(redis: Redis, keys: Keys) -> None:
    good = [_failed("emails.send", queue=f"q{i % 3}") for i in range(1200)]
    await _seed(redis, keys.retry, *((raw, float(i)) for i, raw in enumerate(good)))
    await _seed(redis, keys.retry, (GARBAGE, 0.5))

    assert await api.retry_all(redis, keys, "retry") == 1200

    assert await redis.zrange(keys.retry, 0, -1) == [GARBAGE]
    sizes = [await redis.llen(keys.queue(f"q{i}")) for i in range(3)]
    assert sizes == [400, 400, 400]


# --- delete -----------------------------------------------------------------------------


async def test_delete_and_delete_all(redis: Redis, keys: Keys) -> None:
    a, b, c = (_failed("emails.send") for _ in range(3))
    await _seed(redis, keys.dead, (a, 1.0), (b, 2.0), (c, 3.0))

    assert await api.delete(redis, keys, "dead", [jid_of(a), jid_of(b)]) == 2
    assert await redis.zrange(keys.dead, 0, -1) == [c]
    assert await api.delete(redis, keys, "dead", [jid_of(a)]) == 0
    assert await api.delete(redis, keys, "dead", []) == 0
    assert await redis.llen(keys.queue("mail")) == 0  # deleted, not queued

    assert await api.delete_all(redis, keys, "dead") == 1
    assert await redis.exists(keys.dead) == 0
    assert await api.delete_all(redis, keys, "dead") == 0


async def test_unknown_set_name_is_a_value_error(redis: Redis, keys: Keys) -> None:
    with pytest.raises(ValueError, match="unknown set 'morgue'"):
        await api.list_entries(redis, keys, "morgue")  # type: ignore[arg-type]


# --- wrong-typed keys -------------------------------------------------------------------


async def test_a_wrong_typed_retry_key_reads_as_empty_and_is_kept(
    redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    await redis.rpush(keys.retry, _failed("emails.send"))

    with caplog.at_level(logging.WARNING, logger="cogworker_async.api"):
        assert await api.list_entries(redis, keys, "retry") == []
        assert await api.list_entries(redis, keys, "retry", search="emails") == []
        assert await api.retry_now(redis, keys, "retry", ["f" * 24]) == 0
        assert await api.retry_all(redis, keys, "retry") == 0
        assert await api.delete(redis, keys, "retry", ["f" * 24]) == 0
        assert await api.delete_all(redis, keys, "retry") == 0

    assert await redis.type(keys.retry) == b"list"
    assert await redis.llen(keys.retry) == 1  # bad data kept for a human
    warnings = _warnings(caplog)
    assert len(warnings) == 6
    assert all(f"{keys.retry} holds a list, not a sorted set" in w for w in warnings)


async def test_wrong_typed_queue_keys(
    redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    await redis.set(keys.queues, "x")
    await redis.set(keys.paused, "x")
    await redis.hset(keys.queue("mail"), "a", "b")
    with caplog.at_level(logging.WARNING, logger="cogworker_async.api"):
        assert await api.queues(redis, keys) == []
        # force: with the queue list unreadable, "mail" can't be told from a typo.
        assert await api.pause(redis, keys, "mail", force=True) is False
        assert await api.resume(redis, keys, "mail", force=True) is False
        assert await api.clear_queue(redis, keys, "mail") == 0
    assert await redis.hgetall(keys.queue("mail")) == {b"a": b"b"}
    assert len(_warnings(caplog)) == 4


# --- queues -----------------------------------------------------------------------------


async def test_clear_queue(redis: Redis, keys: Keys) -> None:
    await redis.lpush(keys.queue("mail"), *(make_job("mail") for _ in range(3)))
    await redis.lpush(keys.queue("other"), make_job("other"))
    await redis.sadd(keys.queues, "mail", "other")
    assert await api.pause(redis, keys, "mail") is True

    assert await api.clear_queue(redis, keys, "mail") == 3
    assert await redis.exists(keys.queue("mail")) == 0
    assert await redis.llen(keys.queue("other")) == 1
    assert await api.clear_queue(redis, keys, "mail") == 0
    listed = {q.name: q for q in await api.queues(redis, keys)}
    assert (listed["mail"].size, listed["mail"].paused) == (0, True)


# --- processes and busy -----------------------------------------------------------------


async def _register(
    redis: Redis, keys: Keys, identity: str, info: bytes | None, beat: str | None = None
) -> None:
    await redis.sadd(keys.processes, identity)
    if info is not None:
        await redis.set(keys.process(identity), info, px=60_000)
    if beat is not None:
        await redis.hset(keys.last_beat, identity, beat)


async def test_processes_and_busy_from_a_real_heartbeat(
    redis: Redis, keys: Keys, settings: Settings
) -> None:
    running = make_job("mail", **{"class": "emails.send"})
    work = {
        "0": orjson.dumps({"queue": "mail", "payload": running.decode(), "run_at": 1000.5}).decode()
    }
    heartbeat = Heartbeat(
        settings,
        keys,
        identity="host:42:abc",
        queues=["mail", "default"],
        reliable=lambda: True,
        busy=lambda: work,
        logger=logging.getLogger("tests.admin"),
    )
    try:
        stamp = await anyio.to_thread.run_sync(heartbeat.beat_once)
    finally:
        heartbeat.close()
    await _register(redis, keys, "host:7:gone", None, beat="12.5")

    found = {p.identity: p for p in await api.processes(redis, keys)}
    live = found["host:42:abc"]
    assert live.alive
    assert live.queues == ["mail", "default"]
    assert (live.concurrency, live.busy) == (settings.concurrency, 1)
    assert live.pid is not None
    assert live.hostname
    assert live.started_at == pytest.approx(heartbeat.started_at)
    assert live.last_beat == pytest.approx(stamp)
    assert live.rss is not None
    assert live.rss > 1_000_000  # bytes of this very process
    assert live.problem is None
    gone = found["host:7:gone"]
    assert (gone.alive, gone.last_beat, gone.hostname) == (False, 12.5, None)

    jobs = await api.busy(redis, keys)
    assert [(b.identity, b.slot, b.queue, b.jid, b.name, b.run_at) for b in jobs] == [
        ("host:42:abc", "0", "mail", jid_of(running), "emails.send", 1000.5)
    ]
    assert jobs[0].job == orjson.loads(running)
    assert set(jobs[0].as_dict()) >= {"identity", "slot", "queue", "jid", "name", "run_at"}


async def test_processes_and_busy_survive_bad_data(redis: Redis, keys: Keys) -> None:
    info = orjson.dumps(
        {"hostname": "h", "pid": True, "queues": ["a", 3], "concurrency": "ten", "rss": 123456}
    )
    await _register(redis, keys, "p:odd", info, beat="not a number")
    await _register(redis, keys, "p:garbage", b"{nope")
    await _register(redis, keys, "p:typed", None)
    await redis.hset(keys.process("p:typed"), "x", "y")
    await _register(redis, keys, "p:dead", None)
    await redis.hset(keys.workers("p:dead"), "0", "{}")  # not alive: not shown as busy
    await redis.hset(
        keys.workers("p:odd"),
        mapping={
            "1": b"garbage",
            "2": orjson.dumps({"queue": "a", "payload": "[not a job", "run_at": "soon"}),
            "10": orjson.dumps({"queue": "a"}),
        },
    )
    await redis.set(keys.workers("p:garbage"), "wrong type")

    found = {p.identity: p for p in await api.processes(redis, keys)}
    odd = found["p:odd"]
    assert (odd.alive, odd.hostname, odd.pid, odd.queues) == (True, "h", None, ["a"])
    assert (odd.concurrency, odd.rss, odd.last_beat, odd.problem) == (None, 123456, None, None)
    assert found["p:garbage"].alive
    assert found["p:garbage"].problem is not None
    assert "not JSON" in found["p:garbage"].problem
    assert found["p:typed"].alive
    assert "WRONGTYPE" in (found["p:typed"].problem or "")
    assert not found["p:dead"].alive

    jobs = await api.busy(redis, keys)
    assert [(b.identity, b.slot) for b in jobs] == [("p:odd", "1"), ("p:odd", "2"), ("p:odd", "10")]
    one, two, ten = jobs
    assert one.job is None
    assert (one.problem or "").startswith("not JSON")
    assert (two.queue, two.job, two.run_at) == ("a", None, None)
    assert (two.problem or "").startswith("not JSON")
    assert (ten.queue, ten.problem) == ("a", "no payload")


async def test_a_wrong_typed_processes_set(
    redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    await redis.set(keys.processes, "x")
    with caplog.at_level(logging.WARNING, logger="cogworker_async.api"):
        assert await api.processes(redis, keys) == []
        assert await api.busy(redis, keys) == []
    assert len(_warnings(caplog)) == 2


# --- quarantine -------------------------------------------------------------------------


async def test_quarantine_list(redis: Redis, keys: Keys, namespace: str) -> None:
    assert await api.quarantine_list(redis, keys) == []
    await redis.rpush(keys.retry, "oops")
    moved_to = await guard.quarantine(redis, keys, key=keys.retry, expected="zset", ttl=600)
    assert moved_to == keys.quarantine(keys.retry)
    await redis.set(keys.quarantine("by-hand"), "x")
    await redis.set(f"other{namespace}:quarantine:x", "not ours")

    listed = await api.quarantine_list(redis, keys)
    assert [(q.key, q.type) for q in listed] == [
        (keys.quarantine("by-hand"), "string"),
        (keys.quarantine(keys.retry), "list"),
    ]
    assert listed[0].ttl is None
    assert listed[1].ttl is not None
    assert 590 <= listed[1].ttl <= 600
    assert listed[1].as_dict() == {"key": moved_to, "type": "list", "ttl": listed[1].ttl}
