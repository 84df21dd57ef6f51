"""The wrappers of the orphan-recovery scripts: requeue a (dead) process's
in-progress list, bury a job orphaned too often, complete a raw burial."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from redis.asyncio import Redis

from cogworker_async import holds
from cogworker_async.keys import Keys
from cogworker_async.store.commands import DAY_STAT_TTL, today
from cogworker_async.store.faults import is_wrong_type
from cogworker_async.store.replies import text
from cogworker_async.store.scripts import EncodableArg, script

ORPHANINGS_TTL = 7 * 24 * 3600


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
        "holds": holds.kinds_spec(keys),
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
        keys.beats,
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
) -> bool:
    """Move the head of repeat_orphans into dead with its ProcessDied entry (and
    settle what it holds as a burial, owner-checked: released; and record a
    tracked job's end: its status, its result waiters' ``JobFailed``, in the
    same step)."""
    now = time.time()
    script_keys = [
        keys.repeat_orphans,
        keys.dead,
        keys.stats_failed,
        keys.stats_failed_on(today(now)),
        keys.orphanings(jid),
    ]
    args: list[EncodableArg] = [raw, now, dead_entry, DAY_STAT_TTL, holds.kinds_table(keys)]
    # A tracked job's status and result waiters hear of the burial (job_end.lua).
    args.append(keys.tracking_prefix)
    return bool(await script("bury_orphan").run(redis, script_keys, args))


async def swap_dead_entry(
    redis: Redis,
    keys: Keys,
    *,
    old: bytes,
    new: bytes,
    score: float,
    burial: bool = False,
) -> bool:
    """Replace a dead entry atomically; False when it was already gone.

    ``burial``: the swap completes a ProcessDied burial: what the job holds
    (its payload says) is settled as a burial (released) in the same step."""
    args: list[EncodableArg] = [old, score, new]
    if burial:
        args.append(holds.kinds_table(keys))
    return bool(await script("swap_dead_entry").run(redis, [keys.dead], args))


async def overdue(redis: Redis, keys: Keys, *, threshold: float) -> set[str]:
    """The identities a recovery pass must judge: last beat at least ``threshold``
    old on Redis's clock, or registered without a beat in the index (overdue.lua)."""
    reply = await script("overdue").run(
        redis,
        [keys.beats, keys.processes, keys.in_progress_identities],
        [threshold, time.time()],
    )
    return {text(identity) for identity in reply}


async def stamped_only_identities(redis: Redis, keys: Keys) -> set[str]:
    """Identities with a last-beat or beating-since stamp that no registry
    ``overdue`` reads names (not in the beats index, the process set or the
    in-progress registry): what a lost registry leaves. One pipeline of five
    reads of the namespace's own keys, never a SCAN: a SCAN, even with a MATCH on
    our prefix, walks the whole keyspace of a shared Redis.

    A wrong-typed key counts as naming nobody (the key guard moves it aside, and
    the next process's first pass reads again); an outage raises.
    """
    async with redis.pipeline(transaction=False) as pipe:
        pipe.hkeys(keys.last_beat)
        pipe.hkeys(keys.beating_since)
        pipe.zrange(keys.beats, 0, -1)
        pipe.smembers(keys.processes)
        pipe.smembers(keys.in_progress_identities)
        replies = await pipe.execute(raise_on_error=False)
    named: list[set[str]] = []
    for reply in replies:
        if isinstance(reply, Exception) and not is_wrong_type(reply):
            raise reply
        members = () if isinstance(reply, Exception) else reply
        named.append({text(identity) for identity in members})
    last_beat, beating_since, beats, processes, registry = named
    return (last_beat | beating_since) - beats - processes - registry
