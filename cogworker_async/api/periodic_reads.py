"""What ``periodic list`` / ``periodic run-now`` and the web UI read and do.

The entries are those the live workers published in ``<ns>:periodic:entries``
when they started (the definition the newest process runs, per name).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from cogworker_async import payload
from cogworker_async.keys import Keys
from cogworker_async.limits import LIMITS
from cogworker_async.periodic.entries import Entry
from cogworker_async.periodic.readers import unread_queues
from cogworker_async.periodic.ticker import redis_now
from cogworker_async.periodic.timing import next_slot
from cogworker_async.settings import check_queue_name
from cogworker_async.store import enqueues, locks
from cogworker_async.store.faults import is_wrong_type
from cogworker_async.store.limits import mark_limits_used
from cogworker_async.store.periodic import paused_entries, set_entry_paused
from cogworker_async.store.replies import text

log = logging.getLogger("cogworker_async.periodic")


@dataclass(frozen=True, slots=True)
class PeriodicInfo:
    name: str
    job: str
    queue: str
    schedule: str
    tz: str
    misfire: str
    next_run: float | None
    last_run: float | None
    # The last run's outcome: {"jid", "slot", "result": "ok" | "failed, ...",
    # "at", "error"?} (None: no run recorded yet).
    last_result: dict[str, Any] | None = None
    overlap: bool = True
    # overlap=False: the jid holding the running lock (queued or running), if any.
    running: str | None = None
    # Whether a live process reads the entry's queue (False: its runs pile up
    # there unread); None when the definition is unreadable.
    queue_read: bool | None = None
    # Paused at run time (``periodic pause NAME``): its slots are skipped until resumed.
    paused: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def entry_of(definition: dict[str, Any]) -> Entry:
    """The entry a published definition describes."""
    return Entry(
        definition["name"],
        definition["job"],
        definition["queue"],
        tuple(definition.get("args") or ()),
        dict(definition.get("kwargs") or {}),
        seconds=definition.get("every"),
        expression=definition.get("cron"),
        tz=definition.get("tz") or "UTC",
        misfire=definition.get("misfire") or "skip",
        grace=definition.get("grace"),
        overlap=definition.get("overlap", True) is not False,
        queued_ttl=float(definition.get("queued_ttl") or 3600.0),
        active_ttl=float(definition.get("active_ttl") or 3600.0),
        options=dict(definition.get("options") or {}),
    )


def _definition(raw: bytes | str) -> dict[str, Any] | str:
    """A published definition, or the problem that makes it unreadable (naming the field)."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return f"not JSON: {exc}"
    if not isinstance(value, dict):
        return f"not a JSON object: {type(value).__name__}"
    missing = [f for f in ("name", "job", "queue") if not isinstance(value.get(f), str)]
    if missing:
        return f"no {', '.join(missing)}"
    wrong = [
        f"{field!r} is {value[field]!r}, not {kind}"
        for field, check, kind in _FIELDS
        if value.get(field) is not None and not check(value[field])
    ]
    if wrong:
        return "; ".join(wrong)
    try:
        check_queue_name(value["queue"])
    except ValueError as exc:
        return str(exc)
    return value


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


# The fields entry_of reads beside name/job/queue: (field, check, what it must be).
_FIELDS: tuple[tuple[str, Callable[[object], bool], str], ...] = (
    ("args", lambda v: isinstance(v, list), "a list"),
    ("kwargs", lambda v: isinstance(v, dict), "an object"),
    ("every", _number, "a number > 0"),
    ("cron", lambda v: isinstance(v, str), "a string"),
    ("tz", lambda v: isinstance(v, str), "a string"),
    ("misfire", lambda v: v in ("skip", "run_once"), "'skip' or 'run_once'"),
    ("grace", lambda v: _number(v) or v == 0, "a number >= 0"),
    ("queued_ttl", _number, "a number > 0"),
    ("active_ttl", _number, "a number > 0"),
    ("options", lambda v: isinstance(v, dict), "an object"),
)


async def definitions(redis: Redis, keys: Keys) -> dict[str, dict[str, Any] | str]:
    """Every published definition by name; an unreadable one is named with its
    problem (kept in Redis for a human: the next worker with that entry
    publishes it again)."""
    raw = await redis.hgetall(keys.periodic("entries"))
    return {text(k): _definition(v) for k, v in raw.items()}


def _float(raw: bytes | str) -> float | None:
    try:
        return float(text(raw))
    except ValueError:
        return None


async def periodic_list(redis: Redis, keys: Keys) -> list[PeriodicInfo]:
    """Every published entry with its next slot (Redis's clock) and the last slot run."""
    found = await definitions(redis, keys)
    lasts = await redis.hgetall(keys.periodic("last"))
    last = {text(k): _float(v) for k, v in lasts.items()}
    results = await redis.hgetall(keys.periodic("results"))
    result = {text(k): _loads(v) for k, v in results.items()}
    names = sorted(found)
    try:
        paused = await paused_entries(redis, keys)
    except ResponseError as exc:
        if not is_wrong_type(exc):
            raise
        # Shown as not paused (the tickers refuse to guess; the key guard moves it).
        log.warning("%s is not a set: paused entries unknown (%s)", keys.periodic_paused, exc)
        paused = set()
    locked = [
        n for n, d in sorted(found.items()) if isinstance(d, dict) and d.get("overlap") is False
    ]
    holders = dict(zip(locked, await _holders(redis, keys, locked), strict=True))
    now = await redis_now(redis)
    queues = [d["queue"] for d in found.values() if isinstance(d, dict)]
    unread = await unread_queues(redis, keys, queues, now)
    out = []
    for name in names:
        d = found[name]
        if isinstance(d, str):
            log.warning("periodic entry %r: its published definition is unreadable (%s)", name, d)
            schedule = f"unreadable definition ({d})"
            out.append(
                PeriodicInfo(
                    name, "?", "?", schedule, "?", "?", None, last.get(name), paused=name in paused
                )
            )
            continue
        try:
            upcoming: float | None = next_slot(entry_of(d), now)
        except Exception:  # noqa: BLE001 - one bad definition must not hide the others
            upcoming = None
        out.append(
            PeriodicInfo(
                name,
                d["job"],
                d["queue"],
                d.get("schedule") or "?",
                d.get("tz") or "UTC",
                d.get("misfire") or "skip",
                upcoming,
                last.get(name),
                result.get(name),
                d.get("overlap") is not False,
                holders.get(name),
                d["queue"] not in unread,
                name in paused,
            )
        )
    return out


def _loads(raw: bytes | str) -> dict[str, Any] | None:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


async def _holders(redis: Redis, keys: Keys, names: list[str]) -> list[str | None]:
    if not names:
        return []
    raw = await redis.mget([keys.periodic_running(n) for n in names])
    return [None if r is None else text(r) for r in raw]


async def pause(redis: Redis, keys: Keys, name: str) -> bool | None:
    """Pause entry ``name``: every process skips its slots until ``resume``. True when
    it was running, False when already paused, None when no entry has that name (a
    typo must not look done)."""
    if not await redis.hexists(keys.periodic_entries, name):
        return None
    return await set_entry_paused(redis, keys, name, paused=True)


async def resume(redis: Redis, keys: Keys, name: str) -> bool | None:
    """Resume entry ``name``: its next slots run (those skipped while paused never
    do). True when it was paused, False when it was not, None for an unknown name
    that is not paused either (a name paused and since removed can be resumed)."""
    if await set_entry_paused(redis, keys, name, paused=False):
        return True
    return False if await redis.hexists(keys.periodic_entries, name) else None


class UnreadQueueError(ValueError):
    """``run_now`` refused: no live process reads the entry's queue (a typo, a worker
    not started); ``force`` enqueues anyway."""


async def run_now(redis: Redis, keys: Keys, name: str, *, force: bool = False) -> str | None:
    """Enqueue one run of entry ``name`` now (a fresh jid; no slot is claimed, so the
    schedule goes on as before). Returns the jid, or None for an unknown name.

    A definition that can't be read (a field of the wrong type) is a
    ``ValueError`` naming the field; a queue no live process reads an
    ``UnreadQueueError`` naming it, unless ``force``.

    For an overlap=False entry the run takes the running lock when it is free
    (so no slot starts beside it); when a scheduled run holds it, this run
    goes ahead anyway (the operator asked for it) and leaves that lock alone."""
    raw = await redis.hget(keys.periodic_entries, name)
    if raw is None:
        return None
    definition = _definition(raw)
    if isinstance(definition, str):
        raise ValueError(f"periodic entry {name!r} has an unreadable definition ({definition})")
    entry = entry_of(definition)
    now = await redis_now(redis)
    if not force and await unread_queues(redis, keys, [entry.queue], now):
        raise UnreadQueueError(
            f"periodic entry {name!r} runs on queue {entry.queue!r}, which no live process "
            "reads: not enqueued (run it anyway with --force, force=True)"
        )
    jid = payload.new_jid()
    job = payload.build(
        entry.job,
        entry.args,
        entry.kwargs,
        entry.queue,
        now=now,
        jid=jid,
        extra=entry.payload_fields(now),
    )
    if not entry.overlap:
        ttl = max(1, int(entry.queued_ttl * 1000))
        await locks.take_lease(redis, keys.periodic_running(entry.name), jid, ttl)
    if LIMITS in entry.options:  # as the ticker does: the fetch checks it
        await mark_limits_used(redis, keys)
    await enqueues.push(redis, keys, entry.queue, [payload.encode_job(job)])
    return jid
