"""A fleet on one Redis, simulated: what heartbeats and orphan recovery cost it.

N identities beat every ``heartbeat_interval`` through the real heartbeat
script (the arguments built by the real ``Heartbeat.beat_once``, sent
pipelined: a light simulator, not N processes), and every one of them runs the
real recovery duty (``Recovery.pass_once`` every jittered
``orphan_check_interval``, as each worker process does). One identity in a
hundred (at least one) beats once with a job on its in-progress list and then
"dies": the recovery must still find it.

After a warm-up (judges earn their standing: ``orphan_threshold`` of unbroken
beats), over a window: Redis CPU per second (INFO cpu, user + sys), the
commands the simulated processes sent per process per minute, and the
requeue.lua calls per second. Intervals are the defaults that set the rates
(beat every 5 s, a recovery attempt every 10 s); ``orphan_threshold`` is cut
to 12 s (heartbeat_ttl 10 s) only to shorten the warm-up.

It drives whichever cogworker_async is importable, so the same file measures
an older checkout too (its recovery and heartbeat, its scripts):

    python bench/fleet_sim.py --sizes 10,100,1000,10000
    PYTHONPATH=/tmp/old python bench/fleet_sim.py --sizes 10,100,1000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import time
from typing import Any

import common
from redis.asyncio import BlockingConnectionPool, Redis

from cogworker_async import Settings
from cogworker_async.keys import Keys
from cogworker_async.store.scripts import script
from cogworker_async.worker.heartbeat import Heartbeat
from cogworker_async.worker.recovery import Recovery

LOG = logging.getLogger("bench.fleet_sim")
BEAT_BATCH = 200
TIMING: dict[str, Any] = {
    "heartbeat_interval": 5.0,
    "heartbeat_ttl": 10.0,
    "orphan_threshold": 12.0,
    "orphan_check_interval": 10.0,
}


class CountingRedis(Redis):
    """The simulated processes' client: counts what they send, requeue calls apart."""

    sent = 0
    requeues = 0

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        self.sent += 1
        if args[0] == "EVALSHA" and args[1] == script("requeue").sha:
            self.requeues += 1
        return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]


class _Recorder:
    """Stands in for the heartbeat's blocking client: keeps the call, sends nothing."""

    call: tuple[Any, ...] = ()

    def evalsha(self, *args: Any) -> list[bytes]:
        self.call = args
        return [b"0"]

    def close(self) -> None:
        pass


async def _beat(redis: Redis, heartbeat: Heartbeat, identities: list[str]) -> int:
    recorder = _Recorder()
    heartbeat._redis = recorder  # type: ignore[assignment]  # arguments only
    pipe = redis.pipeline(transaction=False)
    for identity in identities:
        heartbeat.identity = identity
        heartbeat.beat_once()
        pipe.evalsha(*recorder.call)
    await pipe.execute()
    return len(identities)


async def _beater(redis: Redis, heartbeat: Heartbeat, live: list[str], sent: list[int]) -> None:
    """Every identity once per heartbeat_interval, batches spread over it."""
    interval = TIMING["heartbeat_interval"]
    batches = [live[i : i + BEAT_BATCH] for i in range(0, len(live), BEAT_BATCH)]
    while True:
        started = time.monotonic()
        for index, batch in enumerate(batches):
            sent[0] += await _beat(redis, heartbeat, batch)
            due = started + interval * (index + 1) / len(batches)
            await asyncio.sleep(max(0.0, due - time.monotonic()))


async def _duty(recovery: Recovery, rng: random.Random) -> None:
    interval = TIMING["orphan_check_interval"]
    await asyncio.sleep(rng.random() * interval)
    while True:
        try:
            await recovery.pass_once()
        # Reported; the simulation goes on, like a worker's duty loop.
        except Exception as exc:
            LOG.warning("pass failed: %s", exc)
        await asyncio.sleep(interval * rng.uniform(0.9, 1.1))


async def _cpu(redis: Redis) -> tuple[float, int]:
    info = await redis.info()
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"]), int(
        info["total_commands_processed"]
    )


async def simulate(url: str, size: int, window: float) -> dict[str, Any]:
    namespace = common.new_namespace(f"fleet{size}")
    settings = Settings(redis_url=url, namespace=namespace, concurrency=1, **TIMING)
    keys = Keys(namespace)
    pool = BlockingConnectionPool.from_url(url, max_connections=32)
    client = CountingRedis(connection_pool=pool)
    watcher = Redis.from_url(url)
    identities = [f"sim:{i}" for i in range(size)]
    dead = identities[::100] if size >= 100 else identities[:1]
    live = [i for i in identities if i not in set(dead)]
    heartbeat = Heartbeat(
        settings,
        keys,
        identity=live[0],
        queues=["default"],
        reliable=lambda: True,
        busy=dict,
        logger=LOG,
    )
    await client.script_load(script("heartbeat").text)
    for identity in dead:
        await watcher.lpush(
            keys.in_progress(identity), json.dumps({"jid": identity, "queue": "default"})
        )
    await _beat(watcher, heartbeat, dead)  # one beat, then silence
    rng = random.Random(size)
    beats = [0]
    duties = [Recovery(client, keys, settings, identity=i, logger=LOG) for i in live]
    tasks = [asyncio.create_task(_beater(watcher, heartbeat, live, beats))]
    tasks += [asyncio.create_task(_duty(d, rng)) for d in duties]
    try:
        warmup = TIMING["orphan_threshold"] + TIMING["orphan_check_interval"] + 2
        common.note(f"{size} identities: warming up {warmup:.0f} s, then {window:.0f} s")
        await asyncio.sleep(warmup)
        cpu0, commands0 = await _cpu(watcher)
        sent0, requeues0, beats0, t0 = client.sent, client.requeues, beats[0], time.monotonic()
        await asyncio.sleep(window)
        cpu1, commands1 = await _cpu(watcher)
        elapsed = time.monotonic() - t0
        sent = client.sent - sent0 + beats[0] - beats0
        found = sum([await watcher.llen(keys.in_progress(i)) == 0 for i in dead])
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        heartbeat.close()
        await client.aclose()
        await pool.disconnect()
        await watcher.aclose()
        await common.cleanup(url, namespace)
    return {
        "identities": size,
        "redis_cpu_per_s": (cpu1 - cpu0) / elapsed,
        "commands_per_process_per_min": sent / len(live) / elapsed * 60,
        "redis_commands_per_s": (commands1 - commands0) / elapsed,
        "requeue_calls_per_s": (client.requeues - requeues0) / elapsed,
        "dead_found": f"{found}/{len(dead)}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    common.add_common_args(parser, repeat=False, uvloop=False)
    parser.add_argument("--sizes", default="10,100,1000,10000")
    parser.add_argument("--window", type=float, default=30.0, help="measured seconds")
    args = parser.parse_args()
    rows = []
    with common.redis_server(args.redis_url) as url:
        for size in (int(s) for s in args.sizes.split(",")):
            rows.append(common.run_async(simulate(url, size, args.window)))
            common.note(json.dumps(rows[-1]))
    if args.json:
        print(json.dumps(rows))
    header = (
        "| identities | Redis CPU (s/s) | commands/process/min | Redis cmds/s "
        "| requeue calls/s | dead found |"
    )
    lines = [header, "|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['identities']} | {r['redis_cpu_per_s']:.4f} | "
            f"{r['commands_per_process_per_min']:.1f} | {r['redis_commands_per_s']:.0f} | "
            f"{r['requeue_calls_per_s']:.1f} | {r['dead_found']} |"
        )
    common.note("\n".join(lines))


if __name__ == "__main__":
    main()
