"""A process's presence: its beat (``heartbeat.lua``) and its leaving
(``deregister.lua``), called from the heartbeat's own thread on its own
blocking connection. The keys each script takes are listed here, beside the
call, in the order the script takes them.
"""

from __future__ import annotations

from typing import Any

import redis as sync_redis

from cogworker_async.keys import Keys
from cogworker_async.store.scripts import script


def beat(redis: sync_redis.Redis, keys: Keys, identity: str, info: bytes) -> Any:
    """One beat of process ``identity`` (``info``: its JSON); the script's reply (the
    stamp it wrote, then any signals waiting for it)."""
    beat_keys = [
        keys.process(identity),
        keys.last_beat,
        keys.in_progress_identities,
        keys.live_queues,
        keys.workers(identity),
        keys.processes,
        keys.signals(identity),
        keys.beating_since,
        keys.beats,
    ]
    return script("heartbeat").run_sync(redis, beat_keys, [info])


def deregister(redis: sync_redis.Redis, keys: Keys, identity: str) -> bool:
    """Process ``identity`` leaves the registries, in one step; True if it left them all."""
    leave_keys = [
        keys.process(identity),
        keys.workers(identity),
        keys.processes,
        keys.in_progress(identity),
        keys.last_beat,
        keys.beating_since,
        keys.in_progress_identities,
        keys.beats,
    ]
    return bool(script("deregister").run_sync(redis, leave_keys, [identity]))
