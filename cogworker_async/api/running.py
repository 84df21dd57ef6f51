"""Processes and what they run: the process list with each one's presence
info, the jobs live processes run now, and the remote-control signals.

A presence key or a slot record that can't be parsed gives a ``problem`` on
its row, and a key of the wrong type is named in a warning: neither fails the
whole list.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import orjson
from redis.asyncio import Redis

from cogworker_async.api._common import _is_wrong_type, _set_members, _warn_wrong_type
from cogworker_async.api.sets import parse_entry
from cogworker_async.keys import Keys
from cogworker_async.store import admin
from cogworker_async.store.replies import loose_text as _loose_text


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """A process in ``<ns>:processes``; ``alive`` when its presence key exists.

    The other fields come from its presence key (None when gone or unreadable,
    ``problem`` then says why); ``last_beat`` is on Redis's clock.
    """

    identity: str
    alive: bool
    hostname: str | None = None
    pid: int | None = None
    queues: list[str] | None = None
    concurrency: int | None = None
    busy: int | None = None
    started_at: float | None = None
    last_beat: float | None = None
    version: str | None = None
    rss: int | None = None
    quiet: bool | None = None
    problem: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def human_size(size: int) -> str:
    """Bytes as ``51.2 MiB`` (binary units, one decimal; plain bytes below 1 KiB)."""
    if size < 1024:
        return f"{size} B"
    value = float(size)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit}"


def _field(info: dict[str, Any], name: str, kind: type[Any] | tuple[type[Any], ...]) -> Any:
    value = info.get(name)
    # bool is an int in Python, never a pid or a count on the wire.
    if isinstance(value, bool) or not isinstance(value, kind):
        return None
    return value


def _number(value: object) -> float | None:
    try:
        return float(value) if isinstance(value, bytes | str | int | float) else None
    except ValueError:
        return None


def _process(identity: str, presence: object, beat: object) -> ProcessInfo:
    last_beat = None if isinstance(beat, Exception) else _number(beat)
    if presence is None:
        return ProcessInfo(identity, alive=False, last_beat=last_beat)
    if isinstance(presence, Exception):
        return ProcessInfo(identity, alive=True, last_beat=last_beat, problem=str(presence))
    try:
        info = orjson.loads(presence)  # type: ignore[arg-type]
    except (orjson.JSONDecodeError, TypeError) as exc:
        return ProcessInfo(identity, True, last_beat=last_beat, problem=f"info not JSON: {exc}")
    if not isinstance(info, dict):
        return ProcessInfo(identity, True, last_beat=last_beat, problem="info not a JSON object")
    queues = info.get("queues")
    return ProcessInfo(
        identity=identity,
        alive=True,
        hostname=_field(info, "hostname", str),
        pid=_field(info, "pid", int),
        queues=[q for q in queues if isinstance(q, str)] if isinstance(queues, list) else None,
        concurrency=_field(info, "concurrency", int),
        busy=_field(info, "busy", int),
        started_at=_number(_field(info, "started_at", (int, float))),
        last_beat=last_beat,
        version=_field(info, "version", str),
        rss=_field(info, "rss", int),
        quiet=info["quiet"] if isinstance(info.get("quiet"), bool) else None,
    )


async def processes(redis: Redis, keys: Keys) -> list[ProcessInfo]:
    """Every process listed, live or not, by identity."""
    identities = await _set_members(redis, keys.processes, "no process listed")
    if not identities:
        return []
    async with redis.pipeline(transaction=False) as pipe:
        for identity in identities:
            pipe.get(keys.process(identity))
            pipe.hget(keys.last_beat, identity)
        replies = await pipe.execute(raise_on_error=False)
    return [
        _process(identity, replies[2 * i], replies[2 * i + 1])
        for i, identity in enumerate(identities)
    ]


@dataclass(frozen=True, slots=True)
class BusyJob:
    """A job a live process runs now (from its ``workers`` hash).

    ``payload`` is the job as fetched; ``job`` is None (and ``problem`` says
    why) when the slot's record or the payload can't be read.
    """

    identity: str
    slot: str
    queue: str | None
    jid: str | None
    name: str | None
    run_at: float | None
    payload: str | None
    job: dict[str, Any] | None
    problem: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def busy_job(identity: str, slot: str, record: bytes) -> BusyJob:
    try:
        work = orjson.loads(record)
    except orjson.JSONDecodeError as exc:
        return BusyJob(identity, slot, None, None, None, None, None, None, f"not JSON: {exc}")
    if not isinstance(work, dict):
        return BusyJob(identity, slot, None, None, None, None, None, None, "not a JSON object")
    raw = work.get("payload")
    queue = _field(work, "queue", str)
    run_at = _number(_field(work, "run_at", (int, float)))
    if not isinstance(raw, str):
        return BusyJob(identity, slot, queue, None, None, run_at, None, None, "no payload")
    entry = parse_entry(raw.encode(), 0.0)
    problem = None if entry.job is not None else entry.problem
    return BusyJob(
        identity, slot, queue or entry.queue, entry.jid, entry.name, run_at, raw, entry.job, problem
    )


def slot_order(job: BusyJob) -> tuple[str, int, str]:
    return (job.identity, int(job.slot) if job.slot.isdigit() else -1, job.slot)


async def busy(redis: Redis, keys: Keys) -> list[BusyJob]:
    """What every live process runs now, by process and slot."""
    live = [p.identity for p in await processes(redis, keys) if p.alive]
    if not live:
        return []
    async with redis.pipeline(transaction=False) as pipe:
        for identity in live:
            pipe.hgetall(keys.workers(identity))
        replies = await pipe.execute(raise_on_error=False)
    result: list[BusyJob] = []
    for identity, reply in zip(live, replies, strict=True):
        if isinstance(reply, Exception):
            if not _is_wrong_type(reply):
                raise reply
            await _warn_wrong_type(redis, keys.workers(identity), "hash", "its work not shown")
            continue
        for slot, record in reply.items():
            result.append(busy_job(identity, _loose_text(slot), record))
    result.sort(key=slot_order)
    return result


SIGNALS = ("quiet", "stop")
SIGNAL_TTL = 60


async def send_signal(redis: Redis, keys: Keys, identity: str, name: str) -> bool:
    """Ask process ``identity`` to go quiet or stop (read on its next beat).

    Returns False when no live process has that identity (nothing is sent)."""
    if name not in SIGNALS:
        raise ValueError(f"unknown signal {name!r}: expected one of {', '.join(SIGNALS)}")
    if not await redis.exists(keys.process(identity)):
        return False
    await admin.push_signal(redis, keys, identity, name, SIGNAL_TTL)
    return True
