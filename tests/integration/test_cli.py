"""The command line as a user runs it: real subprocesses, real Redis."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import redis as sync_redis

from cogworker_async import api
from cogworker_async.cli import commands as cli_module
from cogworker_async.embedded import EmbeddedRedis
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from tests.conftest import child_env

ROOT = Path(__file__).resolve().parents[2]


def cli(
    settings: Settings, *args: str, timeout: float = 30, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cogworker_async", *args],
        cwd=ROOT,
        env=child_env(settings, **env),
        stdin=subprocess.DEVNULL,  # never a terminal: nothing may wait for an answer
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def one_error(done: subprocess.CompletedProcess[str], code: int) -> str:
    """Asserts stderr is exactly one ``error:`` line (blank lines aside) and the exit code."""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: "), done.stderr
    return lines[0]


def test_enqueue_then_stats_json(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    done = cli(settings, "enqueue", "t.record", "1", "--queue", "mail")
    assert done.returncode == 0, done.stderr
    jid = done.stdout.strip()
    assert len(jid) == 24
    job = orjson.loads(sync_client.lindex(keys.queue("mail"), 0))
    assert job["jid"] == jid
    assert job["args"] == [1]
    assert job["class"] == "t.record"
    assert cli(settings, "enqueue", "t.record", "2", "--in", "60").returncode == 0
    stats = cli(settings, "stats", "--json")
    assert stats.returncode == 0, stats.stderr
    data = json.loads(stats.stdout)
    assert data["scheduled"] == 1
    assert {q["name"]: q["size"] for q in data["queues"]} == {"mail": 1}
    assert set(data) >= {"processed", "failed", "retry", "dead", "processes", "queues"}
    assert data["queues"][0]["latency"] >= 0
    assert data["aborted"] == 0
    # The metrics history rides along: 30 days and 60 minutes by default.
    assert len(data["history"]["days"]) == 30
    assert len(data["history"]["minutes"]) == 60


def test_pause_resume_and_queues(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    assert cli(settings, "enqueue", "t.record", "1").returncode == 0
    assert cli(settings, "pause", "default").returncode == 0
    assert sync_client.sismember(keys.paused, "default")
    listed = json.loads(cli(settings, "queues", "--json").stdout)
    assert listed == [
        {"name": "default", "size": 1, "latency": listed[0]["latency"], "paused": True}
    ]
    assert cli(settings, "resume", "default").returncode == 0
    assert not sync_client.sismember(keys.paused, "default")


def test_user_mistakes_are_one_line_errors(settings: Settings) -> None:
    bad_arg = cli(settings, "enqueue", "t.record", "{oops")
    assert bad_arg.returncode == 2
    assert "argument 0 is not JSON" in bad_arg.stderr
    assert "Traceback" not in bad_arg.stderr

    bad_module = cli(settings, "worker", "no_such_module_here")
    assert bad_module.returncode != 0
    assert "cannot import job module 'no_such_module_here'" in bad_module.stderr
    assert "Traceback" not in bad_module.stderr

    bad_queue = cli(settings, "worker", "tests.jobs_for_tests", "-q", "mail:x")
    assert bad_queue.returncode == 2
    assert "bad queue spec 'mail:x'" in bad_queue.stderr

    unreachable = settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"})
    down = cli(unreachable, "stats")
    assert down.returncode == 1
    assert "cannot reach Redis at redis://127.0.0.1:1/0" in down.stderr
    assert "Traceback" not in down.stderr
    # A worker waits for a Redis that is down: test_worker_waits_for_redis.py.


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("localhost:6379", "no scheme): write redis://localhost:6379/0"),
        ("garbage", "no scheme): write redis://garbage:6379/0"),
        ("http://127.0.0.1:1/0", "scheme 'http://' is not Redis: use redis://"),
        ("redis://127.0.0.1:notaport/0", "the port must be an integer from 1 to 65535"),
        ("redis://127.0.0.1:1/abc", "the DB index 'abc' must be an integer >= 0"),
        ("redis+cluster://127.0.0.1:1/2", "a cluster has database 0 only"),
        ("redis+sentinel://127.0.0.1:1", "name the primary"),
    ],
)
def test_a_bad_redis_url_is_one_usage_line(settings: Settings, url: str, says: str) -> None:
    line = one_error(cli(settings, "stats", "--redis-url", url), 2)
    assert line.startswith("error: bad settings: --redis-url: ")
    assert says in line


def test_a_bad_redis_url_from_the_environment_names_the_variable(settings: Settings) -> None:
    line = one_error(cli(settings, "stats", COGWORKER_REDIS_URL="localhost:6379"), 2)
    assert "redis_url (COGWORKER_REDIS_URL): 'localhost:6379'" in line


def test_passwords_are_masked_in_every_message(settings: Settings) -> None:
    down = cli(settings, "stats", "--redis-url", "redis://:S3cret@127.0.0.1:1/0")
    line = one_error(down, 1)
    assert line.startswith("error: cannot reach Redis at redis://:***@127.0.0.1:1/0: ")
    bad = cli(settings, "stats", "--redis-url", "redis://:S3cret@127.0.0.1:notaport/0")
    assert "'redis://:***@127.0.0.1:notaport/0'" in one_error(bad, 2)
    for done in (down, bad):  # a waiting worker's log: test_worker_waits_for_redis.py
        assert "S3cret" not in done.stderr + done.stdout


@pytest.fixture
def acl_user(sync_client: sync_redis.Redis) -> Iterator[str]:
    """A user with password "right" on the test server (the default user stays open)."""
    name = f"u{uuid.uuid4().hex[:8]}"
    sync_client.execute_command("ACL", "SETUSER", name, "on", ">right", "~*", "&*", "+@all")
    yield name
    sync_client.execute_command("ACL", "DELUSER", name)


def test_a_wrong_password_says_authentication_failed(
    settings: Settings, redis_server: EmbeddedRedis, acl_user: str
) -> None:
    hostport = f"127.0.0.1:{redis_server.port}"
    wrong = f"redis://{acl_user}:wrongS3cret@{hostport}/0"
    for command in (["stats"], ["worker", "tests.jobs_for_tests"]):
        done = cli(settings, *command, "--redis-url", wrong)
        line = one_error(done, 1)
        assert line.startswith(
            f"error: authentication failed at redis://{acl_user}:***@{hostport}/0"
        )
        assert "cannot reach" not in line
        assert "wrongS3cret" not in done.stderr
    right = cli(
        settings, "stats", "--json", "--redis-url", f"redis://{acl_user}:right@{hostport}/0"
    )
    assert right.returncode == 0, right.stderr
    assert json.loads(right.stdout)["processed"] == 0


def test_a_db_index_the_server_lacks_is_one_runtime_line(
    settings: Settings, redis_server: EmbeddedRedis
) -> None:
    url = f"redis://127.0.0.1:{redis_server.port}/999"
    for command in (["stats"], ["worker", "tests.jobs_for_tests"]):
        line = one_error(cli(settings, *command, "--redis-url", url), 1)
        assert f"Redis at {url} has no such database" in line


def test_a_job_module_that_fails_to_import_is_one_line(settings: Settings, tmp_path: Path) -> None:
    (tmp_path / "syntax_slip.py").write_text("x = 1\ndef f(:\n    pass\n")
    (tmp_path / "raises_at_import.py").write_text("import os\nraise RuntimeError('no config')\n")
    path = {"PYTHONPATH": str(tmp_path)}

    slip = one_error(cli(settings, "worker", "syntax_slip", **path), 2)
    assert slip.startswith("error: cannot import job module 'syntax_slip': SyntaxError: ")
    assert slip.endswith("(syntax_slip.py, line 2)")
    raises = one_error(cli(settings, "worker", "raises_at_import", **path), 2)
    assert raises == (
        "error: cannot import job module 'raises_at_import': RuntimeError: no config "
        f"({tmp_path / 'raises_at_import.py'}, line 2)"
    )


@pytest.mark.parametrize(
    ("argument", "says"),
    [
        ("99999999999999999999999", "integer 99999999999999999999999 does not fit in 64 bits"),
        ("[1, -9223372036854775809]", "does not fit in 64 bits"),
        ("NaN", "NaN is not a JSON number"),
        ("Infinity", "Infinity is not a JSON number"),
        ("1e400", "1e400 is too large"),
    ],
)
def test_enqueue_refuses_numbers_json_cannot_carry(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys, argument: str, says: str
) -> None:
    line = one_error(cli(settings, "enqueue", "t.record", argument), 2)
    assert line.startswith("error: argument 0 is not portable JSON (")
    assert says in line
    assert sync_client.llen(keys.queue("default")) == 0


@pytest.mark.parametrize("delay", ["nan", "inf", "-inf", "-5", "1e20"])
def test_enqueue_refuses_a_delay_that_is_not_a_time(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys, delay: str
) -> None:
    line = one_error(cli(settings, "enqueue", "t.record", "1", "--in", delay), 2)
    # The one duration rule (timing.check_duration): "finite, 0 or more" or "at most".
    assert line.startswith("error: --in must be "), line
    assert ("0 or more" in line) != ("at most" in line), line
    assert sync_client.zcard(keys.schedule) == 0
    assert sync_client.llen(keys.queue("default")) == 0


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["worker", "tests.jobs_for_tests", "--log-level", "NOPE"], 2, "'NOPE' is not one of"),
        (["stats", "--bogus"], 2, "No such option: --bogus"),
        (["enqueue", "t.record", "--in", "soon"], 2, "Invalid value for '--in'"),
        (["no-such-command"], 2, "No such command 'no-such-command'"),
    ],
)
def test_usage_mistakes_are_one_line(
    settings: Settings, args: list[str], code: int, says: str
) -> None:
    line = one_error(cli(settings, *args), code)
    assert says in line


def test_log_level_lists_the_valid_levels_and_takes_any_case(settings: Settings) -> None:
    line = one_error(cli(settings, "worker", "tests.jobs_for_tests", "--log-level", "NOPE"), 2)
    for level in ("debug", "info", "warning", "error", "critical"):
        assert f"'{level}'" in line.lower()
    # A DB index the server lacks (an unreachable Redis is waited for, not an error).
    no_db = settings.model_copy(update={"redis_url": settings.redis_url.rsplit("/", 1)[0] + "/999"})
    quiet = cli(no_db, "worker", "tests.jobs_for_tests", "--log-level", "warning")
    assert "has no such database" in one_error(quiet, 1)  # accepted: it got as far as Redis


def test_version(settings: Settings) -> None:
    done = cli(settings, "--version")
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"cogworker-async \d+\.\d+\.\d+\S*\n", done.stdout), done.stdout


def test_clear_asks_first(settings: Settings, sync_client: sync_redis.Redis, keys: Keys) -> None:
    for n in range(2):
        assert cli(settings, "enqueue", "t.record", str(n), "--queue", "mail").returncode == 0
    line = one_error(cli(settings, "clear", "mail"), 2)
    assert "delete every job waiting on mail: add --yes" in line
    assert sync_client.llen(keys.queue("mail")) == 2
    done = cli(settings, "clear", "mail", "--yes")
    assert done.returncode == 0, done.stderr
    assert "cleared 2" in done.stdout
    assert sync_client.llen(keys.queue("mail")) == 0


def test_queues_is_a_table_with_a_header(settings: Settings) -> None:
    for queue in ("default", "a-rather-long-queue-name"):
        assert cli(settings, "enqueue", "t.record", "1", "--queue", queue).returncode == 0
    assert cli(settings, "pause", "default").returncode == 0
    done = cli(settings, "queues")
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.split() == ["QUEUE", "SIZE", "LATENCY", "PAUSED"]
    assert "\t" not in done.stdout
    by_name = {row.split()[0]: row for row in rows}
    assert set(by_name) == {"default", "a-rather-long-queue-name"}
    assert by_name["default"].endswith("paused")
    size_end = header.index("SIZE") + len("SIZE")
    for row in rows:  # sizes flush right under their header
        assert row[size_end - 1] == "1"
        assert row[size_end] == " "


def test_enqueue_passes_keyword_arguments(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    done = cli(
        settings, "enqueue", "t.record", "1", 'to="a@b.c"', "n=2", "--kwargs", '{"tags": ["x"]}'
    )
    assert done.returncode == 0, done.stderr
    job = orjson.loads(sync_client.lindex(keys.queue("default"), 0))
    assert job["args"] == [1]
    assert job["kwargs"] == {"to": "a@b.c", "n": 2, "tags": ["x"]}

    line = one_error(cli(settings, "enqueue", "t.record", "to=a@b.c"), 2)
    assert line.startswith("error: keyword argument 'to' is not JSON")
    line = one_error(cli(settings, "enqueue", "t.record", "--kwargs", "[1]"), 2)
    assert line.startswith("error: --kwargs must be a JSON object")
    line = one_error(cli(settings, "enqueue", "t.record", "n=1", "--kwargs", '{"n": 2}'), 2)
    assert line == "error: keyword argument 'n' is given twice"
    assert sync_client.llen(keys.queue("default")) == 1


def test_a_bug_of_ours_is_an_error_line_then_its_traceback(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def broken(*_args: object) -> object:
        raise KeyError("not a user mistake")

    monkeypatch.setattr(api, "stats", broken)
    code = cli_module.run_cli(["stats", "--redis-url", settings.redis_url])
    assert code == 1
    err = capsys.readouterr().err
    first, *rest = err.splitlines()
    assert first.startswith("error: unexpected KeyError: 'not a user mistake' (a bug")
    assert rest[0].startswith("Traceback (most recent call last):")


@pytest.mark.parametrize("queue", ["", "a:b", "a b", "*", "a\nb", "mail\n", " mail", "a:3"])
def test_enqueue_refuses_a_queue_no_worker_can_read(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys, queue: str
) -> None:
    line = one_error(cli(settings, "enqueue", "t.record", "1", "--queue", queue), 2)
    assert line.startswith(f"error: bad queue name {queue!r}")
    assert sync_client.keys(f"{keys.ns}:*") == []


def test_enqueue_refuses_an_empty_job_name(settings: Settings) -> None:
    assert one_error(cli(settings, "enqueue", "", "1"), 2) == (
        "error: the job name must not be empty"
    )
