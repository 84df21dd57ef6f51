"""A failed job filed into retry or dead (or discarded), or handed over to the
unsettled list when its process stops before it could be filed."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass
from typing import Any

import orjson
from redis.asyncio import Redis

from cogworker_async import holds
from cogworker_async.holds import Event, Hold
from cogworker_async.keys import Keys
from cogworker_async.store import aborts
from cogworker_async.store import run_history as history
from cogworker_async.store.commands.days import DAY_STAT_TTL, today
from cogworker_async.store.scripts import EncodableArg, script


@dataclass(frozen=True, slots=True)
class Filing:
    """Where a failed job goes: ``target`` is the retry or dead set, or None to discard.

    ``counted``: the job's name for the metrics history ("" when it has none:
    unparseable), or None when the history is off.
    ``aborted``: the job was aborted (``target`` None): settled by
    ``settle_aborted.lua`` instead, counted as aborted, not failed.
    """

    raw: bytes
    jid: str
    target: str | None
    score: float
    entry: bytes
    counted: str | None = None
    aborted: bool = False
    # What the job holds, settled in the filing's own step as each kind's rule
    # for the filing's event says (``filing_event``): a retry keeps an `until_executed`
    # unique lock and a periodic running lock for its delay plus their TTL, a
    # terminal filing releases them; a retry that turns into an abort (the job
    # has a tombstone: see ``FileOutcome``) settles them as an abort.
    holds: tuple[Hold, ...] = ()


def filing_event(filing: Filing, keys: Keys) -> Event:
    """How a filing settles its job, for its holds' rules."""
    if filing.aborted:
        return Event.ABORT
    if filing.target is None:
        return Event.DISCARD
    return Event.DEAD if filing.target == keys.dead else Event.RETRY


class FileOutcome(enum.IntEnum):
    """What ``file`` did (falsy only for GONE, so ``if await file(...)`` reads "filed")."""

    GONE = 0  # no longer on the list: recovery requeued it while it ran here
    FILED = 1  # into retry or dead, or discarded
    # An abort was answered ("cancelling") while its failure was being filed:
    # settled as aborted instead of retried, so it never runs again.
    ABORTED = 2


async def file(
    redis: Redis,
    keys: Keys,
    *,
    identity: str,
    filing: Filing,
    dead_max_jobs: int,
    dead_timeout: float,
    listed: bool = True,
) -> FileOutcome:
    """Move a failed job from in-progress into retry/dead (or discard it); see ``FileOutcome``.

    ``listed``: False in basic fetch, where the job is on no in-progress list."""
    now = time.time()
    day = today(now)
    script_keys = [
        keys.in_progress(identity),
        filing.target or keys.dead,
        keys.orphanings(filing.jid),
        keys.stats_processed,
        keys.stats_failed,
        keys.stats_processed_on(day),
        keys.stats_failed_on(day),
        keys.schedule_wakeup,
        keys.aborted,
        keys.stat("aborted"),
    ]
    args: list[EncodableArg] = [
        filing.raw,
        filing.score,
        filing.entry if filing.target else "",
        1 if filing.target == keys.dead else 0,
        dead_max_jobs,
        now - dead_timeout,
        DAY_STAT_TTL,
        "" if filing.counted is None else keys.history(history.minute_of(now)),
        filing.counted or "",
        history.MINUTE_TTL,
        1 if listed else 0,
    ]
    retry = filing.target == keys.retry and filing.jid != ""
    # Only a retry would run it again: it alone checks for an abort's tombstone,
    # and sends its holds settled both ways (filed, or aborted instead).
    args.append(filing.jid if retry else "")
    args.extend(
        holds.block(keys, filing.holds, filing_event(filing, keys), wait=filing.score - now)
    )
    if retry:
        args.extend(holds.block(keys, filing.holds, Event.ABORT))
    return FileOutcome(int(await script("file").run(redis, script_keys, args)))


def unsettled_record(filing: Filing, keys: Keys) -> bytes:
    """The JSON record a stopping process hands over for a filing it couldn't make."""
    which = "dead" if filing.target == keys.dead else "retry"
    record: dict[str, Any] = {
        "set": which,
        "score": filing.score,
        "payload": filing.entry.decode(),
        "jid": filing.jid,
    }
    gone = holds.released(filing.holds, filing_event(filing, keys))
    if gone:
        # The record's one release pair (SPEC: "release": [key, jid]).
        record["release"] = [gone[0].key, gone[0].owner]
    return orjson.dumps(record)


async def park_unsettled(
    redis: Redis, keys: Keys, *, identity: str, filing: Filing, listed: bool = True
) -> bool:
    """Hand a pending failure over to the unsettled list (removing it from in-progress;
    ``listed=False``: basic fetch, on no list)."""
    script_keys = [keys.in_progress(identity), keys.unsettled]
    args: list[EncodableArg] = [filing.raw, unsettled_record(filing, keys), 1 if listed else 0]
    return bool(await script("park_unsettled").run(redis, script_keys, args))


async def file_unsettled(
    redis: Redis,
    keys: Keys,
    *,
    record: bytes,
    target: str,
    jid: str,
    score: float,
    entry: bytes,
    counted: str | None = None,
) -> FileOutcome:
    """File the head record of the unsettled list; ``GONE`` when someone else did (or
    an abort removed it), ``ABORTED`` when the job has an abort tombstone and is
    bound for retry: settled as aborted instead, its waiters told, never run again.

    What the job holds (its payload says) is settled in the same step as the
    rule of its filing says (dead: released; retry: kept for the wait plus
    its TTL; aborted: released). ``counted``: the job's name for the metrics
    history (None: history off)."""
    script_keys = [
        keys.unsettled,
        target,
        keys.orphanings(jid),
        keys.stats_processed,
        keys.stats_failed,
        keys.aborted,
        keys.stat("aborted"),
    ]
    args: list[EncodableArg] = [
        record,
        score,
        entry,
        "" if counted is None else keys.history(history.minute_of(time.time())),
        counted or "",
        history.MINUTE_TTL,
    ]
    event = Event.DEAD if target == keys.dead else Event.RETRY
    wait_ms = max(0, int((score - time.time()) * 1000)) if event is Event.RETRY else 0
    args.extend((holds.kinds_table(keys), event.value, wait_ms))
    # As file.lua: only a filing into retry would run the job again.
    args.extend(
        (
            jid if event is Event.RETRY else "",
            keys.tracking_prefix,
            aborts.ERROR_CLASS,
            aborts.WHILE_RUNNING,
            time.time(),
        )
    )
    return FileOutcome(int(await script("file_unsettled").run(redis, script_keys, args)))
