"""Filing what stopping processes handed over in ``<ns>:unsettled``.

Each record names where its job goes (retry or dead), when, and the payload.
A job an abort was answered for ("cancelling", while it ran) is filed as
aborted instead of into retry (``file_unsettled.lua`` reads its tombstone);
one aborted while its record waits here is taken off by the abort itself
(``abort_unsettled.lua``).
Records are validated: one that can't be filed (unreadable, fields missing, a
target that isn't ours) is moved aside to quarantine for a human, with a log
line, instead of stopping every pass at it and everything behind it.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store import commands
from cogworker_async.store.guard import quarantine_record


def _valid(record: Any) -> bool:
    return (
        isinstance(record, dict)
        and record.get("set") in ("retry", "dead")
        and isinstance(record.get("score"), int | float)
        and isinstance(record.get("payload"), str)
    )


async def file_unsettled(
    redis: Redis, keys: Keys, logger: logging.Logger, *, history: bool = False
) -> int:
    """File every handed-over record, head first; returns how many were filed.

    ``history``: count each in the metrics history, under its job's name."""
    filed = 0
    records: list[bytes] = await redis.lrange(keys.unsettled, 0, -1)  # type: ignore[assignment]
    for raw in records:
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError:
            record = None
        if not _valid(record):
            await _quarantine(redis, keys, raw, logger)
            continue
        target = keys.retry if record["set"] == "retry" else keys.dead
        outcome = await commands.file_unsettled(
            redis,
            keys,
            record=raw,
            target=target,
            jid=_jid(record),
            score=float(record["score"]),
            entry=record["payload"].encode(),
            counted=_name(record["payload"]) if history else None,
        )
        if outcome is commands.FileOutcome.ABORTED:
            filed += 1
            logger.info(
                "handed-over failure jid=%s was aborted: filed as aborted, not into %s",
                record.get("jid"),
                record["set"],
            )
        elif outcome:
            filed += 1
            logger.info("filed handed-over failure jid=%s in %s", record.get("jid"), record["set"])
    return filed


def _jid(record: dict[str, Any]) -> str:
    """The record's jid: its own field, else its payload's ("" when neither has one)."""
    jid = record.get("jid")
    if isinstance(jid, str) and jid:
        return jid
    try:
        job = orjson.loads(record["payload"])
    except orjson.JSONDecodeError:
        return ""
    found = job.get("jid") if isinstance(job, dict) else None
    return found if isinstance(found, str) else ""


def _name(entry: str) -> str:
    """The job name in a record's payload ("" when it has none: an unparseable job's)."""
    try:
        job = orjson.loads(entry)
    except orjson.JSONDecodeError:
        return ""
    name = job.get("class") if isinstance(job, dict) else None
    return name if isinstance(name, str) else ""


async def _quarantine(redis: Redis, keys: Keys, raw: bytes, logger: logging.Logger) -> None:
    target = await quarantine_record(redis, keys, source=keys.unsettled, raw=raw)
    logger.error("unusable %s record moved to %s: %.200r", keys.unsettled, target, raw)
