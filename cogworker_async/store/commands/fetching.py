"""``fetch``: acknowledge finished jobs and take new ones, in one step."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store.commands.acks import Ack, Start, _ack_args, _end_args
from cogworker_async.store.commands.days import DAY_STAT_TTL, today
from cogworker_async.store.replies import text
from cogworker_async.store.scripts import EncodableArg, script


@dataclass(frozen=True, slots=True)
class FetchResult:
    jobs: list[bytes]
    missing_acks: list[Ack]
    broken_queues: list[str]
    # (queue, how many) in the order of ``jobs``: where each job was fetched from.
    sources: list[tuple[str, int]] = field(default_factory=list)
    # The unique locks renewed as their jobs were taken (``unique_prefix``).
    renewals: list[Renewal] = field(default_factory=list)
    # (key, error) of each end or "working" write that failed (a wrong-typed key).
    end_failures: list[tuple[str, str]] = field(default_factory=list)


class Renewal(NamedTuple):
    """An ``until_executed`` job's lock renewed by the fetch that took it: the job
    (raw, as taken), its jid, and the jid holding the lock afterwards (its own
    when renewed or taken again; another copy's, left alone; None when the key
    is not a string)."""

    raw: bytes
    jid: str
    holder: str | None


async def fetch(
    redis: Redis,
    keys: Keys,
    *,
    identity: str,
    queues: Sequence[str],
    want: int,
    acks: Sequence[Ack],
    reliable: bool,
    suspects: bool = True,
    unique_prefix: str = "",
    unique_default: float = 3600.0,
    starts: Sequence[Start] = (),
) -> FetchResult:
    """Acknowledge ``acks`` and take up to ``want`` jobs from ``queues`` (in that order).

    ``suspects=False``: take no suspect (a queue whose front is one is skipped).
    ``unique_prefix``: the unique locks' prefix; an ``until_executed`` job taken
    has its lock (under it) renewed for its ``unique_for`` (``unique_default``
    s when its payload names none) in the same step ("": none renewed).
    ``starts``: tracked jobs' ``working`` writes, made in the same step.
    A job whose limit is full is parked on it instead of taken (``limits``).
    """
    script_keys = [
        keys.in_progress(identity),
        keys.paused,
        keys.stats_processed,
        keys.stats_processed_on(today()),
        *(keys.queue(q) for q in queues),
    ]
    args: list[EncodableArg] = [
        "reliable" if reliable else "basic",
        want,
        keys.orphanings_prefix,
        keys.wakeup_prefix,
        DAY_STAT_TTL,
        1 if suspects else 0,
        *_ack_args(keys, acks),
        *queues,
        unique_prefix,
        max(1, int(unique_default * 1000)),
        keys.limits_prefix,
        *_end_args(keys, acks, starts),
    ]
    reply = await script("fetch").run(redis, script_keys, args)
    taken, missing, broken, sources, renewed, failed = reply
    names = [text(b) for b in broken]
    runs = [(text(sources[i]), int(sources[i + 1])) for i in range(0, len(sources), 2)]
    renewals = [
        Renewal(
            taken[renewed[i] - 1],
            text(renewed[i + 1]),
            None if renewed[i + 2] is None else text(renewed[i + 2]),
        )
        for i in range(0, len(renewed), 3)
    ]
    failures = [(text(failed[i]), text(failed[i + 1])) for i in range(0, len(failed), 2)]
    return FetchResult(list(taken), [acks[i - 1] for i in missing], names, runs, renewals, failures)
