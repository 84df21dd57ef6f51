"""What a worker does for a periodic job it runs, read from the job's payload.

Every worker does this, whether or not it ticks any entries itself: the
payload says what the job is (``periodic_pjid``, ``periodic_slot``, and for an
``overlap=False`` entry ``periodic_until_executed`` with the lock's TTLs), so
a job pushed by one process and run by another keeps its lock just the same.

The running lock of an ``overlap=False`` entry (``<ns>:periodic:running:<name>``,
value: the jid of the run holding it) lives through one run:

- taken with the queued TTL in the claim's own step (``periodic_claim.lua``);
- re-taken with the active TTL when the run starts (``started``: a run whose
  queued TTL ran out while it waited takes it again, if no newer run did);
- re-taken with the queued TTL, in the same step, when recovery or a stopping
  worker puts the job back on its queue (``requeue_job.lua``), and with the
  retry's delay plus the queued TTL when it fails with retries left
  (``file.lua``);
- released, owner-checked and in the step that settles the job, on success (the
  ack), on a terminal failure (dead or discard: ``file.lua``;
  ``ProcessDied``: ``bury_orphan.lua``; an unsettled failure filed into dead:
  ``file_unsettled.lua``), and when an operator deletes the job (``api``).

A plain job pays one dict lookup (``"periodic_pjid" in job``) for all this.
Each run's outcome is kept per entry in ``<ns>:periodic:results`` for
``periodic list`` (best effort: a failed write never fails the job).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

import orjson
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store.locks import release_each
from cogworker_async.store.periodic import record_result, retake_running_lock

# The payload fields (SPEC §2).
PJID = "periodic_pjid"
SLOT = "periodic_slot"
UNTIL_EXECUTED = "periodic_until_executed"
QUEUED_TTL = "periodic_queued_ttl"
ACTIVE_TTL = "periodic_active_ttl"
DEFAULT_TTL = 3600.0


def _ttl(job: dict[str, Any], field: str) -> float:
    value = job.get(field)
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return DEFAULT_TTL


def running_lock(job: dict[str, Any], keys: Keys) -> str:
    """The running lock this job holds ("" when it is not a run of an overlap=False entry)."""
    name = job.get(PJID)
    if job.get(UNTIL_EXECUTED) is True and isinstance(name, str) and name:
        return keys.periodic_running(name)
    return ""


def queued_ttl(job: dict[str, Any]) -> float:
    """How long the lock is kept while the job waits (queued, requeued, retrying), s."""
    return _ttl(job, QUEUED_TTL)


def active_ttl(job: dict[str, Any]) -> float:
    """How long the lock is kept once the run started, s."""
    return _ttl(job, ACTIVE_TTL)


class PeriodicRuns:
    """The processor's side: the lock at run start, each run's outcome per entry."""

    def __init__(self, redis: Redis, keys: Keys, logger: logging.Logger) -> None:
        self._redis = redis
        self._keys = keys
        self._log = logger

    def lock(self, job: dict[str, Any]) -> str:
        return running_lock(job, self._keys)

    async def started(self, job: dict[str, Any]) -> str:
        """The run starts: its lock is re-taken for the active TTL. Returns the lock key."""
        lock = running_lock(job, self._keys)
        if not lock:
            return ""
        jid = str(job.get("jid", ""))
        try:
            held = await retake_running_lock(
                self._redis, lock, jid, max(1, int(active_ttl(job) * 1000))
            )
        except Exception as exc:  # noqa: BLE001 - the lock is best effort beside the run
            self._log.warning("jid=%s: could not re-take its running lock %s: %s", jid, lock, exc)
            return lock
        if not held:
            holder = await self._holder(lock)
            self._log.warning(
                "jid=%s: periodic entry %s: the running lock is held by jid=%s "
                "(this run's lock expired while it waited): running anyway",
                jid,
                job.get(PJID),
                holder,
            )
        return lock

    async def _holder(self, lock: str) -> str:
        try:
            raw = await self._redis.get(lock)
        except Exception:  # noqa: BLE001 - only for the log line
            return "?"
        return "?" if raw is None else raw.decode() if isinstance(raw, bytes) else str(raw)

    async def record(self, job: dict[str, Any], result: str, error: str | None = None) -> None:
        """Keep this run's outcome as its entry's last result (best effort)."""
        name = job.get(PJID)
        if not isinstance(name, str) or not name:
            return
        record = {
            "jid": job.get("jid"),
            "slot": job.get(SLOT),
            "result": result,
            "at": time.time(),
        }
        if error is not None:
            record["error"] = error
        try:
            await record_result(self._redis, self._keys, name, orjson.dumps(record))
        except Exception as exc:  # noqa: BLE001 - a result record never fails a job
            self._log.debug("periodic entry %s: could not record its result: %s", name, exc)


async def release_running_locks(redis: Redis, keys: Keys, raws: Iterable[bytes]) -> int:
    """Release the running locks these jobs hold (owner-checked, one pipeline):
    for jobs an operator removed (deleted from a set, a queue cleared). Only a
    payload naming ``periodic_until_executed`` is decoded. Returns how many
    locks were released."""
    held: list[tuple[str, str]] = []
    for raw in raws:
        if UNTIL_EXECUTED.encode() not in raw:
            continue
        try:
            job = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(job, dict) and (lock := running_lock(job, keys)):
            held.append((lock, str(job.get("jid", ""))))
    if not held:
        return 0
    return await release_each(redis, held)
