"""A SIGKILL of the worker running an overlap=False periodic job: recovery puts
the run back (re-taking the entry's running lock in the same step), no other
slot starts while it is dead, queued or running again, and the lock is released
once it finishes, so the schedule goes on."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import anyio
import pytest
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from tests.helpers import wait_for
from tests.integration.test_periodic import spawn, stop

pytestmark = [pytest.mark.chaos, pytest.mark.anyio]


async def spans(redis: Redis, settings: Settings) -> list[list[str]]:
    raw = await redis.lrange(f"{settings.namespace}:test:periodic_runs:spans", 0, -1)  # type: ignore[misc]
    return [r.decode().split() for r in raw]


async def test_sigkill_of_an_overlap_false_run_recovers_it_alone_and_releases_the_lock(
    settings: Settings, redis: Redis, keys: Keys, tmp_path: Path
) -> None:
    log = tmp_path / "workers.log"
    env = {"TEST_PERIODIC_OVERLAP": "0", "TEST_PERIODIC_SLEEP": "3"}
    procs: list[subprocess.Popen[bytes]] = [spawn(settings, log, **env)]
    try:

        async def started() -> bool:
            return any(s[0] == "start" for s in await spans(redis, settings))

        await wait_for(started, timeout=30)
        _, slot, jid = next(s for s in await spans(redis, settings) if s[0] == "start")
        lock = keys.periodic_running("tick")
        assert await redis.get(lock) == jid.encode()
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait(timeout=10)
        # A survivor ticking the same entry: while the killed run waits for
        # recovery, then runs again, every slot it claims is skipped.
        procs.append(spawn(settings, log, **env))

        async def recovered_and_done() -> bool:
            return ["end", slot] in await spans(redis, settings)

        bound = settings.heartbeat_ttl + settings.orphan_threshold + settings.orphan_check_interval
        await wait_for(recovered_and_done, timeout=bound + 30)

        async def next_slot_ran() -> bool:
            return any(s[0] == "end" and s[1] != slot for s in await spans(redis, settings))

        await wait_for(next_slot_ran, timeout=30)
        stop(procs)
    finally:
        stop(procs)
        await anyio.sleep(0)

    found = await spans(redis, settings)
    text = log.read_text()
    # The killed slot: started, killed, started again by recovery (same jid), ended once.
    ours = [s for s in found if s[1] == slot]
    assert ours == [["start", slot, jid], ["start", slot, jid], ["end", slot]], found
    # Nothing else started from the first start of that slot until its end.
    first = found.index(["start", slot, jid])
    end = found.index(["end", slot])
    assert all(s[1] == slot for s in found[first : end + 1]), found
    # The slots that came meanwhile were skipped, each logged once, naming the holder.
    skipped = [line for line in text.splitlines() if "skipped: the previous run" in line]
    assert skipped, text[-3000:]
    assert all(f"jid={jid}" in line for line in skipped[:3])
    # Released by the recovered run's success: later slots ran, one at a time.
    later = found[end + 1 :]
    assert later
    assert all(int(s[1]) > int(slot) for s in later)
    for begun, ended in zip(later[::2], later[1::2], strict=False):
        assert (begun[0], ended[0], begun[1]) == ("start", "end", ended[1]), found
    assert int(await redis.get(keys.stat("recovered")) or 0) >= 1
