"""The wrappers of the orphan-recovery scripts: requeue a (dead) process's
in-progress list, bury a job orphaned too often, complete a raw burial."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store.commands import DAY_STAT_TTL, today
from cogworker_async.store.replies import text
from cogworker_async.store.scripts import EncodableArg, script

ORPHANINGS_TTL = 7 * 24 * 3600
# A requeued job of an overlap=False periodic entry re-takes its running lock
# for the queued TTL its payload names, or this long (ms) when it names none.
RUNNING_LOCK_DEFAULT_TTL_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class RequeueResult:
    alive: bool
    moved: int
    failed: int
    unread_queues: list[str]
    raw_burials: list[bytes]
    # The judge's own view of Redis could not be trusted yet: nobody judged.
    untrusted: bool = False
    # Queue name -> jobs put back on it, in the order first met.
    per_queue: dict[str, int] = field(default_factory=dict, compare=False)


async def requeue(
    redis: Redis,
    keys: Keys,
    *,
    identity: str,
    threshold: float | None,
    default_queue: str,
    max_orphanings: int,
    live_window: float,
    finished: Sequence[bytes] = (),
    keep: Sequence[bytes] = (),
    judge: str = "",
    judge_ttl: float = 0.0,
    sole_queue: str | None = None,
    targets: Mapping[bytes, str] | None = None,
) -> RequeueResult:
    """Requeue ``identity``'s in-progress list; with ``threshold``, only if it is dead.

    With ``threshold`` the verdict is the script's (see requeue.lua, "Who may
    judge"): ``judge`` is the asking process, trusted only once it has beaten
    without a gap over ``judge_ttl`` for ``threshold``; ``untrusted`` says it
    was not yet.

    Own list only (no ``threshold``): ``sole_queue``, the one queue the owner
    reads, takes every job back; else ``targets`` (raw job -> the queue it
    was fetched from) for jobs whose payload names another queue. Without
    either a job goes back to the queue its payload names.
    """
    config: dict[str, Any] = {
        "identity": identity,
        "threshold": threshold if threshold is not None else False,
        "clock": time.time(),
        "queue_prefix": keys.queue_prefix,
        "wakeup_prefix": keys.wakeup_prefix,
        "default_queue": default_queue,
        "counter_prefix": keys.orphanings_prefix,
        "counter_ttl": ORPHANINGS_TTL,
        "max_orphanings": max_orphanings,
        "live_window": live_window,
        "judge": judge,
        "judge_ttl": judge_ttl,
        "lock_prefix": keys.periodic_running_prefix,
        "lock_ttl": RUNNING_LOCK_DEFAULT_TTL_MS,
    }
    if sole_queue is not None and threshold is None:
        config["sole_queue"] = sole_queue
    script_keys = [
        keys.in_progress(identity),
        keys.process(identity),
        keys.last_beat,
        keys.repeat_orphans,
        keys.dead,
        keys.queues,
        keys.live_queues,
        keys.beating_since,
        keys.processes,
        keys.workers(identity),
        keys.in_progress_identities,
    ]
    args: list[EncodableArg] = [orjson.dumps(config)]
    args.extend(b"d:" + raw for raw in finished)
    args.extend(b"k:" + raw for raw in keep)
    if targets and threshold is None:
        args.extend(b"t:" + queue.encode() + b":" + raw for raw, queue in targets.items())
    reply = await script("requeue").run(redis, script_keys, args)
    moved, failed, unread, counted = int(reply[0]), int(reply[1]), int(reply[2]), int(reply[3])
    if moved == -2:
        return RequeueResult(False, 0, 0, [], [], untrusted=True)
    if moved < 0:
        return RequeueResult(True, 0, 0, [], [])
    names = [text(n) for n in reply[4 : 4 + unread]]
    at = 4 + unread
    per_queue = {text(reply[at + 2 * i]): int(reply[at + 2 * i + 1]) for i in range(counted)}
    burials = list(reply[at + 2 * counted :])
    return RequeueResult(False, moved, failed, names, burials, per_queue=per_queue)


async def bury_orphan(
    redis: Redis,
    keys: Keys,
    *,
    raw: bytes,
    jid: str,
    dead_entry: bytes,
    release: tuple[str, str] | None = None,
) -> bool:
    """Move the head of repeat_orphans into dead with its ProcessDied entry (and
    release its unique lock, owner-checked, in the same step)."""
    now = time.time()
    script_keys = [
        keys.repeat_orphans,
        keys.dead,
        keys.stats_failed,
        keys.stats_failed_on(today(now)),
        keys.orphanings(jid),
    ]
    args: list[EncodableArg] = [raw, now, dead_entry, DAY_STAT_TTL, keys.periodic_running_prefix]
    if release is not None:
        args.extend(release)
    return bool(await script("bury_orphan").run(redis, script_keys, args))


async def swap_dead_entry(
    redis: Redis,
    keys: Keys,
    *,
    old: bytes,
    new: bytes,
    score: float,
    release: tuple[str, str] | None = None,
) -> bool:
    """Replace a dead entry atomically; False when it was already gone."""
    args: list[EncodableArg] = [old, score, new]
    if release is not None:
        args.extend(release)
    return bool(await script("swap_dead_entry").run(redis, [keys.dead], args))
