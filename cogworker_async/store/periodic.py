"""Typed wrappers of the periodic ticker's scripts: ``periodic_claim.lua`` (a slot's
claim and push, many in one pipeline) and ``periodic_set_aside_last.lua``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import orjson
from redis.asyncio import Redis
from redis.exceptions import NoScriptError

from cogworker_async.keys import Keys
from cogworker_async.store.guard import QUARANTINE_TTL
from cogworker_async.store.replies import text
from cogworker_async.store.scripts import EncodableArg, script


@dataclass(frozen=True, slots=True)
class SlotClaim:
    """One (entry, slot) to claim; ``payload`` is the job pushed when it is claimed."""

    name: str
    slot: str  # as in keys: whole seconds without a fraction
    queue: str
    jid: str
    payload: bytes
    claim_ms: int  # the claim key's life
    lock_ms: int = 0  # overlap=False: the running lock's queued TTL; 0: overlap allowed
    catch_up: bool = False  # a missed slot: only if the entry's last slot is older
    digest: str = ""  # the definition's hash: for the claim key of releases before 21


ClaimKind = Literal["pushed", "taken", "done", "held", "wrongtype", "error"]


@dataclass(frozen=True, slots=True)
class ClaimOutcome:
    """What became of one claim. ``held``: ``holder`` is the jid holding the running lock.
    ``wrongtype``: nothing was written; ``key`` has type ``found``, not ``expected``.
    ``error``: the call failed (``error``), nothing is known to be written."""

    kind: ClaimKind
    holder: str | None = None
    key: str | None = None
    found: str | None = None
    expected: str | None = None
    error: Exception | None = None


def _call(keys: Keys, claim: SlotClaim) -> tuple[list[str], list[EncodableArg]]:
    spec = {
        "name": claim.name,
        "slot": claim.slot,
        "queue": claim.queue,
        "jid": claim.jid,
        "claim_ms": max(1, claim.claim_ms),
        "lock_ms": max(0, claim.lock_ms),
        "catch_up": claim.catch_up,
    }
    return (
        [
            keys.periodic_claim(claim.name, claim.slot),
            keys.periodic_last,
            keys.queue(claim.queue),
            keys.queues,
            keys.wakeup(claim.queue),
            keys.periodic_running(claim.name),
            keys.periodic_claim_before_21(claim.name, claim.digest, claim.slot),
        ],
        [orjson.dumps(spec), claim.payload],
    )


def _outcome(reply: object) -> ClaimOutcome:
    if isinstance(reply, Exception):
        return ClaimOutcome("error", error=reply)
    if not isinstance(reply, list) or not reply:
        return ClaimOutcome("error", error=ValueError(f"unexpected claim reply {reply!r}"))
    parts = [text(p) for p in reply]
    kind = parts[0]
    if kind == "held":
        return ClaimOutcome("held", holder=parts[1])
    if kind == "wrongtype":
        return ClaimOutcome("wrongtype", key=parts[1], found=parts[2], expected=parts[3])
    if kind in ("pushed", "taken", "done"):
        return ClaimOutcome(kind)  # type: ignore[arg-type]
    return ClaimOutcome("error", error=ValueError(f"unexpected claim reply {reply!r}"))


async def claim_slots(redis: Redis, keys: Keys, claims: Sequence[SlotClaim]) -> list[ClaimOutcome]:
    """Claim each slot (one atomic step each) in one pipeline; outcomes in order.

    A failed call is an ``error`` outcome, not an exception: one entry's
    trouble never hides the others' outcomes (the caller raises outages)."""
    if not claims:
        return []
    runner = script("periodic_claim")
    calls = [_call(keys, c) for c in claims]
    replies: list[object] = await _pipeline(redis, runner.sha, calls)
    if any(isinstance(r, NoScriptError) for r in replies):
        # Flushed: load it once and send those calls again (they did not run).
        await redis.script_load(runner.text)
        again = [i for i, r in enumerate(replies) if isinstance(r, NoScriptError)]
        for i, reply in zip(
            again, await _pipeline(redis, runner.sha, [calls[i] for i in again]), strict=True
        ):
            replies[i] = reply
    return [_outcome(r) for r in replies]


async def _pipeline(
    redis: Redis, sha: str, calls: Sequence[tuple[list[str], list[EncodableArg]]]
) -> list[object]:
    async with redis.pipeline(transaction=False) as pipe:
        for call_keys, args in calls:
            pipe.evalsha(sha, len(call_keys), *call_keys, *args)
        return list(await pipe.execute(raise_on_error=False))


SetAside = Literal["moved", "changed", "blocked"]


async def set_aside_last(
    redis: Redis, keys: Keys, *, name: str, seen: bytes, ttl: int = QUARANTINE_TTL
) -> SetAside:
    """Move entry ``name``'s unreadable last-slot stamp (``seen``, as read) to
    ``<ns>:quarantine:<ns>:periodic:last`` (a hash, kept ``ttl`` s). ``changed``:
    the stamp is no longer what was read (left alone); ``blocked``: the
    set-aside key is not a hash (nothing moved)."""
    reply = await script("periodic_set_aside_last").run(
        redis,
        [keys.periodic_last, keys.quarantine(keys.periodic_last)],
        [name, seen, ttl],
    )
    return {1: "moved", 0: "changed"}.get(int(reply), "blocked")  # type: ignore[return-value]


async def paused_entries(redis: Redis, keys: Keys) -> set[str]:
    """Names of the periodic entries paused at run time (``<ns>:periodic:paused``)."""
    return {text(name) for name in await redis.smembers(keys.periodic_paused)}


async def set_entry_paused(redis: Redis, keys: Keys, name: str, *, paused: bool) -> bool:
    """Pause (``paused``) or resume entry ``name``; True when that changed anything."""
    if paused:
        return bool(await redis.sadd(keys.periodic_paused, name))
    return bool(await redis.srem(keys.periodic_paused, name))


async def publish_entries(redis: Redis, keys: Keys, definitions: Mapping[str, bytes]) -> None:
    """Write the entries' definitions (name -> JSON) into ``<ns>:periodic:entries``."""
    await redis.hset(keys.periodic_entries, mapping=definitions)  # type: ignore[arg-type]


async def retake_running_lock(redis: Redis, lock: str, jid: str, ttl_ms: int) -> bool:
    """A run starts: re-take its entry's running lock for ``ttl_ms`` (``periodic_running.lua``);
    False when another jid holds it."""
    return bool(await script("periodic_running").run(redis, [lock], [jid, ttl_ms]))


async def record_result(redis: Redis, keys: Keys, name: str, record: bytes) -> None:
    """Keep a run's outcome (JSON) as entry ``name``'s last result."""
    await redis.hset(keys.periodic("results"), name, record)
