"""Orphan recovery: a dead process's jobs come back; a live one's never do.

Once per ``orphan_check_interval`` for the whole fleet, one process (whichever
takes the lease: ``recovery_lock``, SET NX with a TTL of one interval, kept to
expire rather than released, so a holder that dies never blocks recovery and
any process takes the next pass) asks ``overdue.lua`` for the identities whose
last beat is overdue (or that are registered with no beat in the index) and
runs ``requeue.lua`` for each: the cost of recovery grows with the fleet, not
with its square (every process walking every identity). The script itself
decides, atomically with the requeue, whether the owner is dead: presence
gone *and* its last beat, on Redis's clock, older than ``orphan_threshold``,
*and* the judge (this process) has beaten without a break for at least
``orphan_threshold`` with its last beat fresh. The last rule is what makes a
stale picture of Redis harmless (see requeue.lua, "Who may judge"): after an
outage, a restart from a snapshot, or writes refused for lack of memory,
nobody is judged until live processes have had ``orphan_threshold`` to beat
again. A dead identity whose list ends up empty leaves every registry in the
same script.

A job orphaned more than ``max_orphanings`` times is parked by the script and
filed in dead here as ``ProcessDied``: a job that kills its own process is
stopped after a bounded number of tries.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import orjson
from redis.asyncio import Redis

from cogworker_async import payload
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.store import locks, orphans
from cogworker_async.store.faults import is_outage, is_wrong_type
from cogworker_async.store.stats import add_stat
from cogworker_async.worker.keyguard import guard_recovery_keys
from cogworker_async.worker.unsettled import file_unsettled


@dataclass
class RecoveryCounters:
    recovered: int = 0
    parked: int = 0
    buried: int = 0
    pending_raw_burials: list[bytes] = field(default_factory=list)


class Recovery:
    def __init__(
        self, redis: Redis, keys: Keys, settings: Settings, *, identity: str, logger: logging.Logger
    ) -> None:
        self._redis = redis
        self._keys = keys
        self._settings = settings
        self._identity = identity
        self._log = logger
        self._looked_at_all = False
        self._untrusted_logged = False
        self._born = time.monotonic()
        self.counters = RecoveryCounters()

    def _error_fields(self) -> dict[str, object]:
        return {
            "error_class": "ProcessDied",
            "error_message": (
                "its process died while running it more than "
                f"{self._settings.max_orphanings} times (killed for memory? SIGKILL?): "
                "not retried again"
            ),
            "failed_at": time.time(),
        }

    async def pass_once(self) -> int:
        """One recovery pass; returns how many jobs were requeued."""
        token = self._identity
        # The lease is the fleet's interval: kept until it expires, so every
        # other process's attempt in this interval is one SET that fails.
        lease_ms = max(int(self._settings.orphan_check_interval * 1000), 1)
        if not await locks.take_lease(self._redis, self._keys.recovery_lock, token, lease_ms):
            return 0
        done = False
        try:
            moved = await self._recover_all()
            if moved is None:
                # This process may not judge yet: handed on, so a process that
                # may takes this interval's pass instead of nobody.
                return 0
            await self._bury_repeat_orphans()
            await self._complete_raw_burials()
            await file_unsettled(
                self._redis, self._keys, self._log, history=self._settings.metrics_history
            )
            done = True
        finally:
            if not done:
                await locks.release_lock(self._redis, self._keys.recovery_lock, token)
        return moved

    async def _candidates(self) -> set[str]:
        # Overdue identities only, from the index the beats keep; registered
        # ones missing from it too (old versions, a lost index), and the
        # process set as well as the registry: a dead process with no list
        # (basic fetch, or nothing running) must still leave the registries.
        identities = await orphans.overdue(
            self._redis, self._keys, threshold=self._settings.orphan_threshold
        )
        if not self._looked_at_all:
            # This process's first pass also judges identities only the beat stamps
            # still name (their registries lost or moved aside): read from the
            # namespace's own keys, never a SCAN of a shared Redis's keyspace.
            identities |= await orphans.stamped_only_identities(self._redis, self._keys)
            self._looked_at_all = True  # done only once the read got through
        identities.discard(self._identity)
        return identities

    async def _recover_all(self) -> int | None:
        """Jobs requeued this pass; None when this process may not judge yet."""
        total = 0
        for identity in sorted(await self._candidates()):
            try:
                moved = await self._recover(identity)
                if moved is None:
                    return None if total == 0 else total  # can't judge: nor anyone after
                total += moved
            except Exception as exc:  # one identity must never stop the others
                if is_outage(exc):
                    raise
                # A wrong-typed key (its in-progress list, which no live process
                # guards, or a shared one): moved aside now, logged by the guard,
                # and the next pass recovers it, instead of a skip every pass.
                if is_wrong_type(exc) and await guard_recovery_keys(
                    self._redis, self._keys, identity, self._log
                ):
                    continue
                self._log.error(
                    "orphan recovery skipped %s: %s: %s", identity, type(exc).__name__, exc
                )
        return total

    async def _recover(self, identity: str) -> int | None:
        """Requeue ``identity``'s jobs if it is dead; None when this process may not judge yet."""
        result = await orphans.requeue(
            self._redis,
            self._keys,
            identity=identity,
            threshold=self._settings.orphan_threshold,
            default_queue=self._settings.queue_specs[0].name,
            max_orphanings=self._settings.max_orphanings,
            live_window=2 * self._settings.heartbeat_ttl,
            judge=self._identity,
            judge_ttl=self._settings.heartbeat_ttl,
        )
        if result.untrusted:
            if not self._untrusted_logged:
                self._untrusted_logged = True
                # Expected for orphan_threshold after start; news after that.
                started = time.monotonic() - self._born > self._settings.orphan_threshold * 1.5
                self._log.log(
                    logging.INFO if started else logging.DEBUG,
                    "orphan recovery waits: this process has not yet beaten without a break "
                    "for orphan_threshold (%.0f s), so Redis's picture of who is alive can't "
                    "be trusted yet",
                    self._settings.orphan_threshold,
                )
            return None
        self._untrusted_logged = False
        if result.alive:
            return 0
        if result.moved:
            self.counters.recovered += result.moved
            await self._count("recovered", result.moved)
            self._log.warning(
                "requeued %d job(s) left in progress by dead process %s", result.moved, identity
            )
        if result.unread_queues:
            self._log.warning(
                "requeued job(s) from %s onto queue(s) no live process reads: %s — make sure "
                "some worker reads them",
                identity,
                ", ".join(result.unread_queues),
            )
        if result.failed:
            self._log.error(
                "%d job(s) left in progress by %s couldn't be put back on their queue "
                "(a key of the wrong type?): kept, retried on the next pass",
                result.failed,
                identity,
            )
        self.counters.pending_raw_burials.extend(result.raw_burials)
        return result.moved

    async def _count(self, name: str, n: int) -> None:
        try:
            await add_stat(self._redis, self._keys, name, n)
        except Exception as exc:  # noqa: BLE001 - a stat is best effort, never a failure
            self._log.debug("stat %s not counted: %s", name, exc)

    async def _bury_repeat_orphans(self) -> None:
        parked: list[bytes] = await self._redis.lrange(self._keys.repeat_orphans, 0, -1)  # type: ignore[assignment]
        for raw in parked:
            try:
                job = orjson.loads(raw)
            except orjson.JSONDecodeError:
                job = None
            if not isinstance(job, dict):
                job = {"jid": "", **payload.raw_fields(raw)}
            job.update(self._error_fields())
            jid = str(job.get("jid", ""))
            # Terminal: what it holds goes in the burial's step (read from raw).
            if await orphans.bury_orphan(
                self._redis,
                self._keys,
                raw=raw,
                jid=jid,
                dead_entry=orjson.dumps(job),
            ):
                self.counters.buried += 1
                await self._count("process_died", 1)
                self._log.error("jid=%s orphaned too often: moved to dead as ProcessDied", jid)

    async def _complete_raw_burials(self) -> None:
        pending, self.counters.pending_raw_burials = self.counters.pending_raw_burials, []
        for index, raw in enumerate(pending):
            try:
                job = orjson.loads(raw)
                job = job if isinstance(job, dict) else payload.raw_fields(raw)
            except orjson.JSONDecodeError:
                job = payload.raw_fields(raw)
            job.update(self._error_fields())
            try:
                if await orphans.swap_dead_entry(
                    self._redis,
                    self._keys,
                    old=raw,
                    new=orjson.dumps(job),
                    score=time.time(),
                    burial=True,
                ):
                    self.counters.buried += 1
                    await self._count("process_died", 1)
            except Exception:
                # Retried on the next pass: left alone, the raw entry would stay
                # in dead without its error.
                self.counters.pending_raw_burials.extend(pending[index:])
                raise
