"""The web UI against the real test redis-server: an app per test, and odd data to show."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import redis as sync_redis
from starlette.testclient import TestClient

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.web import create_app
from tests.lua.support import make_job

SCRIPT = "<script>alert('x')</script>"
GARBAGE = b"\x00not json at all {"
HUGE = "h" * 1_000_000
LOOPBACK = "http://127.0.0.1:8000"
"""Where the tests ask the app: a name it serves by default (``allowed_hosts``)."""

PAGES = [
    "/",
    "/stats.json",
    "/busy",
    "/queues",
    "/queues/mail",
    "/queues/mail?order=oldest",
    "/queues/broken",
    "/scheduled",
    "/retries",
    "/dead",
    "/dead?q=emails",
    "/retries?q=script",
    "/periodic",
    "/locks",
    "/limits",
    "/batches",
    "/quarantine",
    "/metrics",
    "/metrics?minutes=240",
]


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings), base_url=LOOPBACK) as test_client:
        yield test_client


def failed(name: str = "emails.send", queue: str = "mail", **extra: Any) -> bytes:
    body: dict[str, Any] = {
        "class": name,
        "args": ["a@b.c"],
        "error_class": "RuntimeError",
        "error_message": "SMTP said no",
        "retry_count": 3,
        "failed_at": 1_700_000_000.0,
    }
    body.update(extra)
    return make_job(queue, **body)


def seed_odd(r: sync_redis.Redis, keys: Keys) -> dict[str, bytes]:
    """A namespace full of odd data: script in args, unparseable and huge entries, bad keys."""
    jobs = {
        "script": failed("emails.evil", args=[SCRIPT], error_message=SCRIPT),
        "plain": failed(),
        "huge": failed("reports.huge", args=[HUGE]),
        "array": b"[1, 2, 3]",
        "garbage": GARBAGE,
        "noqueue": orjson.dumps({"jid": "f" * 24, "class": "x", "args": []}),
    }
    for key in (keys.retry, keys.dead, keys.schedule):
        r.zadd(key, {raw: 1_700_000_000 + i for i, raw in enumerate(jobs.values())})
    r.sadd(keys.queues, "mail", "broken", "<b>odd</b>")
    r.lpush(keys.queue("mail"), *jobs.values())
    r.set(keys.queue("broken"), "a string where a list belongs")
    r.set(keys.stats_processed, "not a number")
    # Processes: one well, one with garbage presence, one gone; a garbage slot record.
    good = {
        "hostname": "h<i>",
        "pid": 7,
        "queues": ["mail"],
        "concurrency": 4,
        "busy": 1,
        "started_at": 1_700_000_000.0,
        "rss": 123_456,
        "quiet": False,
    }
    r.sadd(keys.processes, "good", "garbled", "gone")
    r.set(keys.process("good"), orjson.dumps(good))
    r.set(keys.process("garbled"), GARBAGE)
    r.hset(keys.last_beat, mapping={"good": "1700000000", "gone": "nonsense"})
    r.hset(
        keys.workers("good"),
        mapping={
            "0": orjson.dumps(
                {"queue": "mail", "run_at": 1_700_000_000.0, "payload": jobs["script"].decode()}
            ),
            "1": GARBAGE,
        },
    )
    r.set(keys.workers("garbled"), "wrong type")
    r.hset(keys.periodic("entries"), mapping={"bad": GARBAGE})
    r.set(keys.quarantine(keys.queue("x")), "moved aside", ex=3600)
    return jobs
