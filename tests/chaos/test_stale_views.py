"""No stale picture of Redis makes a live process look dead (issue 11, item 1).

Each scenario: two worker subprocesses, five long jobs running on each, both
beating long enough that either may judge the other; then Redis shows a stale
picture (back from an outage, restarted from an old snapshot, refusing writes,
one process slow to get back). Orphan recovery must requeue nothing and no job
may start twice, up to the moment no verdict can come any more: requeue.lua
judges only an identity whose presence key is gone, so once both processes
have beaten after the fault, a false verdict is either seen (a job off its
list) or impossible. The jobs need not run to their end for that.

``COGWORKER_STALE_RUNS=N`` repeats every scenario N times (the issue's
20-run loop); ``make test`` runs each once.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
import redis as sync_redis

from cogworker_async.embedded import EmbeddedRedis
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from tests.conftest import FAST
from tests.faultproxy import FaultProxy
from tests.helpers import wait_for_sync
from tests.integration.test_shutdown import enqueue, runs, start_worker

pytestmark = pytest.mark.chaos

RUNS = range(int(os.environ.get("COGWORKER_STALE_RUNS", "1")))
JOBS = 10
JOB_SECONDS = 120  # still running when the scenario ends: stopped (requeued) then
OUTAGE = 5.0  # longer than orphan_threshold (3.5 s in FAST)


@dataclass
class Outcome:
    duplicate_starts: int
    recovered: int


@dataclass
class Cluster:
    """A server, a plain client, the keys and the settings the workers use."""

    server: EmbeddedRedis
    client: sync_redis.Redis
    keys: Keys
    settings: Settings


@pytest.fixture
def aof(namespace: str) -> Iterator[Cluster]:
    yield from _cluster(namespace, ["--appendonly", "yes", "--appendfsync", "always"])


@pytest.fixture
def rdb(namespace: str) -> Iterator[Cluster]:
    """No AOF: a restart loads whatever ``SAVE`` last wrote."""
    yield from _cluster(namespace, [])


def _cluster(namespace: str, args: list[str]) -> Iterator[Cluster]:
    server = EmbeddedRedis(extra_args=args)
    server.start()
    client = sync_redis.Redis.from_url(server.url)
    # prefetch 0: nothing held ahead, so the ten jobs run five and five at once.
    settings = Settings(
        redis_url=server.url, namespace=namespace, concurrency=5, prefetch=0, **FAST
    )
    try:
        yield Cluster(server, client, Keys(namespace), settings)
    finally:
        client.close()
        server.stop()


def _redis_now(client: sync_redis.Redis) -> float:
    seconds, micros = client.time()
    return float(seconds) + micros / 1_000_000


def _all_may_judge(c: Cluster) -> bool:
    """Every process has beaten without a break for longer than orphan_threshold."""
    runs_started = c.client.hgetall(c.keys.beating_since)
    if len(runs_started) < 2:
        return False
    now = _redis_now(c.client)
    margin = c.settings.orphan_threshold + 0.5
    return all(now - float(v) > margin for v in runs_started.values())


def scenario(
    c: Cluster, fault: Callable[[], None], *, second_worker_url: str | None = None
) -> Outcome:
    second = c.settings
    if second_worker_url is not None:
        second = second.model_copy(update={"redis_url": second_worker_url})
    workers = [start_worker(c.settings), start_worker(second)]
    try:
        wait_for_sync(lambda: c.client.scard(c.keys.processes) == 2, timeout=60)
        for i in range(JOBS):
            enqueue(c.client, c.keys, "t.sleep", JOB_SECONDS, jid=f"{i:024x}")
        wait_for_sync(lambda: len(runs(c.client, c.keys)) == JOBS, timeout=60)
        identities = [m.decode() for m in c.client.smembers(c.keys.processes)]
        # Both run jobs: the one judged falsely would lose them.
        assert all(c.client.llen(c.keys.in_progress(i)) > 0 for i in identities)
        wait_for_sync(lambda: _all_may_judge(c), timeout=60)
        fault()
        over = _redis_now(c.client)
        wait_for_sync(lambda: _all_beat_since(c, identities, over), timeout=30)
        # Every job still on the list of the process that started it.
        listed = {i: c.client.lrange(c.keys.in_progress(i), 0, -1) for i in identities}
        assert sum(len(jobs) for jobs in listed.values()) == JOBS, listed
        starts = collections.Counter(r for r in runs(c.client, c.keys) if r.endswith(":start"))
        assert len(starts) == JOBS
        return Outcome(
            duplicate_starts=sum(n - 1 for n in starts.values()),
            recovered=int(c.client.get(c.keys.stat("recovered")) or 0),
        )
    finally:
        for worker in workers:  # both stop at once: their shutdowns overlap
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
        for worker in workers:
            _stop(worker)


def _all_beat_since(c: Cluster, identities: list[str], since: float) -> bool:
    """Each process's last beat (Redis's clock) is ``since`` or later: its presence is back."""
    beats = [c.client.zscore(c.keys.beats, i) for i in identities]
    return all(beat is not None and beat >= since for beat in beats)


def _stop(worker: subprocess.Popen[bytes]) -> None:
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
    try:
        worker.wait(timeout=15)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()


def _assert_no_false_requeue(outcome: Outcome) -> None:
    assert outcome == Outcome(duplicate_starts=0, recovered=0)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("run", RUNS)
def test_restart_after_an_outage_longer_than_the_threshold(aof: Cluster, run: int) -> None:
    def fault() -> None:
        aof.server.kill()
        time.sleep(OUTAGE)  # the outage itself is the scenario
        aof.server.restart()

    _assert_no_false_requeue(scenario(aof, fault))


@pytest.mark.timeout(240)
@pytest.mark.parametrize("run", RUNS)
def test_a_restart_faster_than_one_check(aof: Cluster, run: int) -> None:
    """Down and up again before the judge's next pass: the judge never sees it fail."""
    _assert_no_false_requeue(scenario(aof, aof.server.restart))


@pytest.mark.timeout(240)
@pytest.mark.parametrize("run", RUNS)
def test_restart_from_a_snapshot_older_than_the_threshold(rdb: Cluster, run: int) -> None:
    """Every presence key expired, every stamp old: a picture from the past."""

    def fault() -> None:
        rdb.client.save()
        time.sleep(rdb.settings.orphan_threshold + 1.5)  # the snapshot must grow old
        rdb.server.kill()
        rdb.server.restart()

    _assert_no_false_requeue(scenario(rdb, fault))


@pytest.mark.timeout(240)
@pytest.mark.parametrize("run", RUNS)
def test_writes_refused_for_lack_of_memory(aof: Cluster, run: int) -> None:
    """maxmemory with noeviction: beats refused (OOM) while reads still work."""

    def fault() -> None:
        aof.client.config_set("maxmemory-policy", "noeviction")
        aof.client.config_set("maxmemory", "1")
        time.sleep(OUTAGE)  # longer than orphan_threshold, reads answered all along
        aof.client.config_set("maxmemory", "0")

    _assert_no_false_requeue(scenario(aof, fault))


@pytest.mark.timeout(240)
@pytest.mark.parametrize("run", RUNS)
def test_a_live_process_slow_to_get_back_after_the_outage(aof: Cluster, run: int) -> None:
    """One worker reaches Redis through a link that stays down 2 s longer."""
    with FaultProxy("127.0.0.1", aof.server.port or 0) as proxy:

        def fault() -> None:
            proxy.refuse(True)
            aof.server.kill()
            time.sleep(OUTAGE)
            aof.server.restart()
            time.sleep(2.0)  # the other worker is back meanwhile, and would judge
            proxy.heal()

        _assert_no_false_requeue(scenario(aof, fault, second_worker_url=proxy.url))
