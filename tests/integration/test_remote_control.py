"""Remote control through the CLI: quiet stops fetching, stop shuts down gracefully."""

from __future__ import annotations

import orjson
import redis as sync_redis

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from tests.helpers import wait_for_sync
from tests.integration.test_cli import cli
from tests.integration.test_shutdown import enqueue, runs, start_worker


def test_quiet_then_stop(settings: Settings, sync_client: sync_redis.Redis, keys: Keys) -> None:
    worker = start_worker(settings)
    try:
        wait_for_sync(lambda: sync_client.scard(keys.processes) == 1, timeout=15)
        identity = next(iter(sync_client.smembers(keys.processes))).decode()
        enqueue(sync_client, keys, "t.record", 1, jid="1" * 24)
        wait_for_sync(lambda: runs(sync_client, keys) == ["1" * 24], timeout=10)

        quiet = cli(settings, "quiet", identity)
        assert quiet.returncode == 0, quiet.stderr
        wait_for_sync(
            lambda: orjson.loads(sync_client.get(keys.process(identity)) or b"{}").get("quiet"),
            timeout=10,
        )
        enqueue(sync_client, keys, "t.record", 2, jid="2" * 24)
        # A beat later the job still waits: a quiet process fetches nothing.
        stamp = sync_client.hget(keys.last_beat, identity)
        wait_for_sync(lambda: sync_client.hget(keys.last_beat, identity) != stamp, timeout=10)
        assert sync_client.llen(keys.queue("default")) == 1

        stop = cli(settings, "stop", identity)
        assert stop.returncode == 0, stop.stderr
        assert worker.wait(timeout=15) == 0
        assert runs(sync_client, keys) == ["1" * 24]
        assert sync_client.llen(keys.queue("default")) == 1
    finally:
        if worker.poll() is None:
            worker.kill()


def test_signal_to_an_unknown_process_is_an_error(settings: Settings) -> None:
    result = cli(settings, "stop", "nobody:1:abc")
    assert result.returncode == 1
    assert "no live process 'nobody:1:abc'" in result.stderr
