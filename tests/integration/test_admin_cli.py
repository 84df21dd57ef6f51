"""The operators' commands as a user runs them: real subprocesses, real Redis, real data."""

from __future__ import annotations

import json
import time
from typing import Any

import orjson
import redis as sync_redis

from cogworker_async import api
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from tests.integration.test_cli import cli
from tests.lua.support import jid_of, make_job

ENTRY_FIELDS = {
    "ref",
    "raw",
    "score",
    "job",
    "jid",
    "name",
    "queue",
    "error_class",
    "error_message",
    "problem",
}


def _failed(name: str, queue: str = "mail", **extra: Any) -> bytes:
    fields = {"class": name, "error_class": "RuntimeError", "error_message": "boom", **extra}
    return make_job(queue, retry_count=2, **fields)


def _ok(done: Any) -> str:
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return str(done.stdout)


def _one_line_error(done: Any, code: int, text: str) -> None:
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    last = done.stderr.splitlines()[-1]  # after any warnings about bad data
    assert last.startswith("error: ")
    assert text in last


def test_retry_set_commands(settings: Settings, sync_client: sync_redis.Redis, keys: Keys) -> None:
    send, build, digest = _failed("emails.send"), _failed("reports.build"), _failed("emails.digest")
    later = time.time() + 3600
    sync_client.zadd(keys.retry, {send: later, build: later + 1, digest: later + 2})

    listed = json.loads(_ok(cli(settings, "retry", "list", "--json")))
    assert [e["jid"] for e in listed] == [jid_of(send), jid_of(build), jid_of(digest)]
    assert set(listed[0]) == ENTRY_FIELDS
    assert listed[0]["name"] == "emails.send"
    assert listed[0]["job"]["retry_count"] == 2
    assert listed[0]["score"] == later

    human = _ok(cli(settings, "retry", "list"))
    lines = human.splitlines()
    assert len(lines) == 3
    assert jid_of(send) in lines[0]
    assert "emails.send" in lines[0]
    assert "RuntimeError: boom" in lines[0]

    found = json.loads(_ok(cli(settings, "retry", "list", "--search", "EMAILS", "--json")))
    assert [e["jid"] for e in found] == [jid_of(send), jid_of(digest)]
    by_jid = json.loads(_ok(cli(settings, "retry", "list", "--search", jid_of(build), "--json")))
    assert [e["jid"] for e in by_jid] == [jid_of(build)]
    limited = json.loads(_ok(cli(settings, "retry", "list", "--limit", "1", "--json")))
    assert [e["jid"] for e in limited] == [jid_of(send)]

    assert "moved 1" in _ok(cli(settings, "retry", "retry", jid_of(send)))
    queued = orjson.loads(sync_client.lindex(keys.queue("mail"), 0))
    assert (queued["jid"], queued["retry_count"]) == (jid_of(send), 2)
    assert sync_client.zscore(keys.retry, send) is None
    # Already moved: said in one line, nothing pushed twice.
    _one_line_error(cli(settings, "retry", "retry", jid_of(send)), 1, "no runnable entry of retry")
    assert sync_client.llen(keys.queue("mail")) == 1

    assert "deleted 1" in _ok(cli(settings, "retry", "delete", jid_of(build)))
    assert sync_client.zscore(keys.retry, build) is None
    _one_line_error(cli(settings, "retry", "delete", jid_of(build)), 1, "no entry of retry")

    assert "moved 1" in _ok(cli(settings, "retry", "retry-all"))
    assert sync_client.zcard(keys.retry) == 0
    assert sync_client.llen(keys.queue("mail")) == 2


def test_dead_set_commands(settings: Settings, sync_client: sync_redis.Redis, keys: Keys) -> None:
    a, b, c = _failed("a.job"), _failed("b.job", queue="other"), _failed("c.job")
    sync_client.zadd(keys.dead, {a: 1.0, b: 2.0, c: 3.0})

    listed = json.loads(_ok(cli(settings, "dead", "list", "--json")))
    assert [e["name"] for e in listed] == ["c.job", "b.job", "a.job"]  # newest first
    assert "moved 2" in _ok(cli(settings, "dead", "retry", jid_of(a), jid_of(b)))
    assert jid_of(sync_client.rpop(keys.queue("mail"))) == jid_of(a)
    assert jid_of(sync_client.rpop(keys.queue("other"))) == jid_of(b)
    assert sync_client.zrange(keys.dead, 0, -1) == [c]

    _one_line_error(cli(settings, "dead", "delete-all"), 2, "add --yes")
    assert sync_client.zcard(keys.dead) == 1
    assert "deleted 1" in _ok(cli(settings, "dead", "delete-all", "--yes"))
    assert sync_client.zcard(keys.dead) == 0

    sync_client.zadd(keys.dead, {a: 1.0})
    assert "moved 1" in _ok(cli(settings, "dead", "retry-all"))
    assert "(none)" in _ok(cli(settings, "dead", "list"))
    assert json.loads(_ok(cli(settings, "dead", "list", "--json"))) == []


def test_scheduled_commands(settings: Settings, sync_client: sync_redis.Redis, keys: Keys) -> None:
    jid = _ok(cli(settings, "enqueue", "t.record", "1", "--queue", "mail", "--in", "600")).strip()
    other = _ok(cli(settings, "enqueue", "t.record", "2", "--in", "900")).strip()

    listed = json.loads(_ok(cli(settings, "scheduled", "list", "--json")))
    assert [e["jid"] for e in listed] == [jid, other]
    assert listed[0]["score"] > time.time() + 500
    assert "moved 1" in _ok(cli(settings, "scheduled", "enqueue-now", jid))
    assert jid_of(sync_client.rpop(keys.queue("mail"))) == jid
    assert "deleted 1" in _ok(cli(settings, "scheduled", "delete", other))
    assert sync_client.zcard(keys.schedule) == 0
    assert sync_client.llen(keys.queue("default")) == 0


def test_clear_processes_busy_quarantine(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    for n in range(3):
        _ok(cli(settings, "enqueue", "t.record", str(n), "--queue", "mail"))
    assert "cleared 3" in _ok(cli(settings, "clear", "mail", "--yes"))
    assert sync_client.llen(keys.queue("mail")) == 0
    assert json.loads(_ok(cli(settings, "queues", "--json"))) == [
        {"name": "mail", "size": 0, "latency": 0.0, "paused": False}
    ]

    running = make_job("mail", **{"class": "emails.send"})
    info = {
        "identity": "h:1:a",
        "hostname": "h",
        "pid": 1,
        "queues": ["mail"],
        "concurrency": 5,
        "started_at": 10.0,
        "busy": 1,
        "version": "0.1.0",
        "rss": 53_687_091,
    }
    sync_client.set(keys.process("h:1:a"), orjson.dumps(info), px=60_000)
    sync_client.hset(keys.last_beat, "h:1:a", "100.25")
    sync_client.sadd(keys.processes, "h:1:a", "h:2:gone")
    work = {"queue": "mail", "payload": running.decode(), "run_at": 50.0}
    sync_client.hset(keys.workers("h:1:a"), "3", orjson.dumps(work))

    procs = json.loads(_ok(cli(settings, "processes", "--json")))
    assert [(p["identity"], p["alive"]) for p in procs] == [("h:1:a", True), ("h:2:gone", False)]
    assert set(procs[0]) == {
        "identity",
        "alive",
        "hostname",
        "pid",
        "queues",
        "concurrency",
        "busy",
        "started_at",
        "last_beat",
        "version",
        "rss",
        "quiet",
        "problem",
    }
    assert (procs[0]["rss"], procs[0]["last_beat"], procs[0]["queues"]) == (
        53_687_091,
        100.25,
        ["mail"],
    )
    human = _ok(cli(settings, "processes")).splitlines()
    assert human[0].startswith("h:1:a  alive  h:1  busy 1/5  queues mail")
    assert human[0].endswith("rss 51.2 MiB")
    assert human[1].startswith("h:2:gone  gone (no presence key)  beat -")

    busy = json.loads(_ok(cli(settings, "busy", "--json")))
    assert len(busy) == 1
    assert {k: busy[0][k] for k in ("identity", "slot", "queue", "jid", "name", "run_at")} == {
        "identity": "h:1:a",
        "slot": "3",
        "queue": "mail",
        "jid": jid_of(running),
        "name": "emails.send",
        "run_at": 50.0,
    }
    assert jid_of(running) in _ok(cli(settings, "busy"))

    assert json.loads(_ok(cli(settings, "quarantine", "list", "--json"))) == []
    sync_client.set(keys.quarantine(keys.retry), "x", ex=300)
    quarantined = json.loads(_ok(cli(settings, "quarantine", "list", "--json")))
    assert [(q["key"], q["type"]) for q in quarantined] == [(keys.quarantine(keys.retry), "string")]
    assert 0 < quarantined[0]["ttl"] <= 300
    assert keys.quarantine(keys.retry) in _ok(cli(settings, "quarantine", "list"))


def test_bad_data_is_shown_not_a_crash(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    garbage = b"\xff{definitely not json"
    good = _failed("a.job")
    sync_client.zadd(keys.dead, {garbage: 5.0, good: 1.0})

    listed = json.loads(_ok(cli(settings, "dead", "list", "--json")))
    assert [e["job"] is None for e in listed] == [True, False]
    bad = listed[0]
    assert bad["jid"] is None
    assert bad["ref"] == api.digest(garbage)
    assert bad["problem"].startswith("not JSON")
    assert bad["raw"].endswith("{definitely not json")
    human = _ok(cli(settings, "dead", "list")).splitlines()
    assert human[0].startswith(bad["ref"])
    assert "unreadable" in human[0]

    # Can't be retried (a one-line error, and it stays), can be deleted by its ref.
    _one_line_error(cli(settings, "dead", "retry", bad["ref"]), 1, "no runnable entry")
    assert sync_client.zscore(keys.dead, garbage) == 5.0
    moved = cli(settings, "dead", "retry-all")
    assert "moved 1" in _ok(moved)
    assert f"dead entry {bad['ref']} left in place" in moved.stderr
    assert "deleted 1" in _ok(cli(settings, "dead", "delete", bad["ref"]))
    assert sync_client.zcard(keys.dead) == 0

    # A retry key of the wrong type: named on stderr, shown as empty, kept.
    sync_client.rpush(keys.retry, "oops")
    shown = cli(settings, "retry", "list")
    assert "(none)" in _ok(shown)
    assert f"warning: {keys.retry} holds a list, not a sorted set" in shown.stderr
    assert json.loads(_ok(cli(settings, "retry", "list", "--json"))) == []
    assert "moved 0" in _ok(cli(settings, "retry", "retry-all"))
    assert "deleted 0" in _ok(cli(settings, "retry", "delete-all", "--yes"))
    assert sync_client.lrange(keys.retry, 0, -1) == [b"oops"]

    # A paused set of the wrong type: pause says it could not, in one line.
    sync_client.set(keys.paused, "x")
    paused = cli(settings, "pause", "mail")
    _one_line_error(paused, 1, "could not pause mail")
    assert f"warning: {keys.paused} holds a string, not a set" in paused.stderr


def test_admin_commands_report_an_unreachable_redis(settings: Settings) -> None:
    unreachable = settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"})
    for command in (["dead", "list"], ["processes"], ["clear", "mail", "--yes"]):
        _one_line_error(
            cli(unreachable, *command), 1, "cannot reach Redis at redis://127.0.0.1:1/0"
        )
