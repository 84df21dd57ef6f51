"""The end of a worker's life: settle what can be, requeue the rest, deregister.

Invariant: after a clean stop, every job this process fetched is either
settled (acked or filed), handed over to ``<ns>:unsettled``, back on its
queue, or still on the in-progress list where orphan recovery will find it
(basic fetch has no list: what is not settled goes back to its queue, pushed
once, ``give_back_at_stop``):
only if Redis refused even that, or if its handler's thread was left still
running (a second stop; a thread can't be stopped, and requeued it would run
twice at once). A finished job whose ack failed is
dropped from the list in the same atomic step that requeues the rest: it is
never run again because its ack failed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import anyio
from redis.asyncio import Redis

from cogworker_async.holds import Event, released
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.store import commands, orphans
from cogworker_async.unique import DeferredReleases, Release
from cogworker_async.worker.fetcher import Fetcher
from cogworker_async.worker.heartbeat import Heartbeat
from cogworker_async.worker.settlement import Settler

FINISH_BOUND = 10.0


async def finish(
    redis: Redis,
    keys: Keys,
    settings: Settings,
    *,
    identity: str,
    reliable: bool,
    fetcher: Fetcher,
    settler: Settler,
    heartbeat: Heartbeat,
    logger: logging.Logger,
    still_running: Sequence[bytes] = (),
    releases: DeferredReleases | None = None,
    interrupted: Sequence[bytes] = (),
) -> None:
    """``still_running``: jobs whose thread was left running (threads can't be
    stopped). Kept on the list, not requeued, so they can't run twice at once;
    orphan recovery requeues them once this process's heartbeat has lapsed.
    ``interrupted``: jobs the stop cancelled unsettled (on the list anyway in
    reliable fetch; basic fetch gives them back)."""
    list_empty = False
    with anyio.move_on_after(FINISH_BOUND):
        unacked = fetcher.take_pending_acks()
        if unacked and reliable:
            try:
                await commands.ack(redis, keys, identity=identity, acks=unacked)
                unacked = []
            except Exception as exc:  # noqa: BLE001 - shutdown goes on whatever failed
                logger.warning("final ack failed (%s): dropping them with the requeue", exc)
                if releases is not None:
                    # They ran: what they hold (unique, periodic locks) goes, later
                    # or by the next worker.
                    for ack in unacked:
                        for hold in released(ack.holds, Event.ACK):
                            releases.defer(Release(hold.key, hold.owner))
        await settler.settle_pending()
        discarded, keep = await settler.hand_over_pending()
        keep = [*keep, *still_running]
        if reliable:
            drop = [a.raw for a in unacked] + discarded
            targets = await _sources(redis, keys, identity, fetcher, logger)
            result = await requeue_own(
                redis,
                keys,
                settings,
                identity,
                drop,
                keep,
                logger,
                sole_queue=fetcher.sole_queue,
                targets=targets,
            )
            list_empty = result is not None and not keep and result.failed == 0
        else:
            list_empty = True
            await _give_back_unlisted(fetcher, [*interrupted, *keep], still_running, logger)
    heartbeat.stop()
    try:
        left = await anyio.to_thread.run_sync(heartbeat.deregister)
        if not left and list_empty:
            logger.warning("a job landed on this process's list while it left: kept for recovery")
    except Exception as exc:  # noqa: BLE001 - the keys expire by themselves anyway
        logger.warning("could not remove heartbeat keys (%s); they expire by themselves", exc)
    logger.info("worker %s stopped", identity)


async def _give_back_unlisted(
    fetcher: Fetcher,
    unsettled: Sequence[bytes],
    still_running: Sequence[bytes],
    logger: logging.Logger,
) -> None:
    """Basic fetch: no list to requeue, so every job still ours goes back to its queue
    (held ahead, cut off by the stop, a failure that could not even be handed over),
    except those whose thread still runs (it would run twice at once)."""
    running = set(still_running)
    done = False
    try:
        refused = await fetcher.give_back_at_stop([j for j in unsettled if j not in running])
        done = True
    finally:
        if not done:
            logger.error(
                "basic fetch: the jobs held here could not all be given back before the stop's "
                "bound (Redis unreachable?): those not pushed are lost (there is no list)"
            )
    for raw in refused:
        logger.error("job could not be given back (its queue key refused it): %.300r", raw)


async def _sources(
    redis: Redis, keys: Keys, identity: str, fetcher: Fetcher, logger: logging.Logger
) -> dict[bytes, str]:
    """Where each job on our list was fetched from, when we read several queues.

    One LRANGE, at shutdown only: the fetcher remembers whole batches, and
    only the jobs still listed go to the script. Unknown (a failure here, a
    fetch whose reply never came): the job goes back to its payload's queue.
    """
    if fetcher.sole_queue is not None:
        return {}  # requeue.lua's sole_queue covers every job
    try:
        listed: list[bytes] = await redis.lrange(keys.in_progress(identity), 0, -1)  # type: ignore[assignment]
    except Exception as exc:  # noqa: BLE001 - the payloads' own queues then
        logger.warning("could not read this process's list (%s): jobs go by their payloads", exc)
        return {}
    return fetcher.sources_of(listed)


async def requeue_own(
    redis: Redis,
    keys: Keys,
    settings: Settings,
    identity: str,
    finished: list[bytes],
    keep: list[bytes],
    logger: logging.Logger,
    *,
    sole_queue: str | None = None,
    targets: dict[bytes, str] | None = None,
) -> orphans.RequeueResult | None:
    """Requeue this process's list now (no liveness check: it is ours).

    Each job goes back to the queue it was fetched from (``sole_queue``, or
    ``targets``), not to the one its payload names, where those differ.
    """
    for attempt in range(3):
        try:
            result = await orphans.requeue(
                redis,
                keys,
                identity=identity,
                threshold=None,
                default_queue=settings.queue_specs[0].name,
                max_orphanings=settings.max_orphanings,
                live_window=2 * settings.heartbeat_ttl,
                finished=finished,
                keep=keep,
                sole_queue=sole_queue,
                targets=targets,
            )
        except Exception as exc:  # noqa: BLE001 - retried, then left to orphan recovery
            logger.warning("requeue of own jobs failed (%s), attempt %d", exc, attempt + 1)
            await anyio.sleep(0.5)
            continue
        if result.moved:
            logger.info(
                "requeued %d job(s): %s",
                result.moved,
                ", ".join(f"{queue} {n}" for queue, n in sorted(result.per_queue.items())),
            )
        return result
    logger.error("could not requeue this process's jobs: orphan recovery will bring them back")
    return None
