"""includes/holds.lua and cogworker_async/holds.py: what a job holds, settled by one
include in the step that settles the job.

The include itself (owner check, prefix refusal, keep with a TTL, every event
of every declared kind, both ways in: a block the worker encodes, a payload a
script reads), and a kind declared here, in the test, that goes through an ack,
a retry filing and a recovery requeue with no script edited.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import holds
from cogworker_async.holds import Event, Hold, HoldKind, InPayload, Rule
from cogworker_async.keys import Keys
from cogworker_async.store import commands, orphans
from cogworker_async.store.commands import Ack, Filing
from cogworker_async.store.scripts import expand, scripts_dir
from tests.lua.support import JUDGE_TTL, jid_of, make_job, trust_judge

pytestmark = pytest.mark.anyio

ME = "host:5:me"
DEAD = "host:6:gone"
HELD_MS = 5_000  # what a hold starts with here: a kept one gets another TTL

# The include, called as the settling scripts call it.
BLOCK = expand(
    """--- @include holds
local gone = nil
if ARGV[1] ~= "" then
  gone = {[tonumber(ARGV[1])] = true}
end
return settle_holds(2, gone)
""",
    scripts_dir() / "includes",
    origin="test_holds",
)
PAYLOAD = expand(
    """--- @include holds
settle_payload_holds(ARGV[1], decode_kinds(ARGV[2]), ARGV[3], ARGV[4] == "1", ARGV[5])
return 1
""",
    scripts_dir() / "includes",
    origin="test_holds",
)


async def settle_block(redis: Redis, groups: list[str | int], gone: int | None = None) -> int:
    args = ["" if gone is None else gone, len(groups) // holds.HOLD_FIELDS, *groups]
    return int(await redis.eval(BLOCK, 0, *args))  # type: ignore[misc]


async def settle_payload(
    redis: Redis, keys: Keys, raw: bytes, event: Event, *, started: bool, wait_ms: int = 0
) -> None:
    kinds = holds.kinds_table(keys)
    await redis.eval(PAYLOAD, 0, raw, kinds, event.value, "1" if started else "0", wait_ms)  # type: ignore[misc]


# --- the include, block form -------------------------------------------------


async def test_a_release_is_owner_checked(redis: Redis, keys: Keys) -> None:
    prefix = keys.unique("")
    mine, theirs = keys.unique("a"), keys.unique("b")
    await redis.set(mine, "j1")
    await redis.set(theirs, "a-newer-copy")
    end = await settle_block(redis, [1, prefix, mine, "j1", "", 1, prefix, theirs, "j2", ""])
    assert end == 2 + 1 + 2 * holds.HOLD_FIELDS  # just past the block
    assert not await redis.exists(mine)
    assert await redis.get(theirs) == b"a-newer-copy"


async def test_a_key_outside_its_prefix_is_refused(redis: Redis, keys: Keys) -> None:
    """Issue 21: a payload names the key; nothing outside its kind's prefix is
    written, whoever it says holds it: another kind's prefix, the prefix's own
    bookkeeping (~releases), the bare prefix, a lookalike of it."""
    prefix = keys.unique("")
    outside = [
        keys.paused,
        keys.periodic_running("nightly"),
        keys.unique("~releases"),
        prefix,
        f"{keys.ns}:uniqueness:x",
    ]
    for key in outside:
        await redis.set(key, "j1")
    groups: list[str | int] = []
    for key in outside:
        groups.extend((1, prefix, key, "j1", ""))  # release
        groups.extend((1, prefix, key, "j1", 60_000))  # keep
    await settle_block(redis, groups)
    for key in outside:
        assert await redis.get(key) == b"j1"
        assert await redis.pttl(key) == -1  # no TTL set either
    # And an empty prefix admits nothing.
    await settle_block(redis, [1, "", keys.unique("c"), "j1", 60_000])
    assert not await redis.exists(keys.unique("c"))


async def test_keep_sets_the_ttl_takes_a_free_hold_and_leaves_another_owners(
    redis: Redis, keys: Keys
) -> None:
    prefix = keys.periodic_running_prefix
    held, free, other = (keys.periodic_running(n) for n in ("held", "free", "other"))
    await redis.set(held, "j1", px=HELD_MS)
    await redis.set(other, "j9", px=HELD_MS)
    groups: list[str | int] = []
    for key in (held, free, other):
        groups.extend((1, prefix, key, "j1", 600_000))
    await settle_block(redis, groups)
    for key in (held, free):
        assert await redis.get(key) == b"j1"
        assert 590_000 < await redis.pttl(key) <= 600_000
    assert await redis.get(other) == b"j9"
    assert await redis.pttl(other) <= HELD_MS


async def test_the_positions_of_gone_jobs_keep_their_holds(redis: Redis, keys: Keys) -> None:
    prefix = keys.unique("")
    first, second = keys.unique("1"), keys.unique("2")
    await redis.set(first, "j1")
    await redis.set(second, "j2")
    await settle_block(redis, [1, prefix, first, "j1", "", 2, prefix, second, "j2", ""], gone=2)
    assert not await redis.exists(first)
    assert await redis.get(second) == b"j2"  # its job was requeued: it runs again


async def test_a_wrong_typed_hold_fails_nothing_around_it(redis: Redis, keys: Keys) -> None:
    prefix = keys.unique("")
    odd, fine = keys.unique("odd"), keys.unique("fine")
    await redis.hset(odd, "f", "v")  # type: ignore[misc]
    await redis.set(fine, "j1")
    groups: list[str | int] = [1, prefix, odd, "j1", "", 1, prefix, fine, "j1", ""]
    await settle_block(redis, groups)
    assert await redis.type(odd) == b"hash"
    assert not await redis.exists(fine)


async def test_an_empty_block_is_one_argument(redis: Redis, keys: Keys) -> None:
    """The plain job's cost: no hold, one ``0``, and the ack's args end there."""
    assert holds.block(keys, (), Event.ACK) == [0]
    raw = make_job()
    args = commands._ack_args(keys, [Ack(raw, jid_of(raw)), Ack(raw, jid_of(raw))])
    assert args[-1] == 0
    assert len(args) == 3 + 2 + 1  # history groups, tags, count; the jobs; the 0


# --- every event of every declared kind --------------------------------------


def _job_holding(keys: Keys, kind: str, *, mode: str = "until_executed") -> tuple[bytes, str]:
    if kind == holds.UNIQUE.name:
        lock = keys.unique("t.job:every")
        return make_job(unique={"key": lock, "mode": mode, "for": 300}), lock
    fields = {"periodic_pjid": "every", "periodic_until_executed": True, "periodic_queued_ttl": 300}
    return make_job(**fields), keys.periodic_running("every")


async def _assert_settled(redis: Redis, key: str, owner: str, rule: Rule) -> None:
    if rule is Rule.RELEASE:
        assert not await redis.exists(key)
    elif rule is Rule.KEEP:
        assert await redis.get(key) == owner.encode()
        assert 290_000 < await redis.pttl(key) <= 300_000 + 20_000  # its TTL (+ the wait)
    else:
        assert await redis.get(key) == owner.encode()
        assert 0 < await redis.pttl(key) <= HELD_MS  # untouched


@pytest.mark.parametrize("event", list(Event))
@pytest.mark.parametrize("kind", [holds.UNIQUE.name, holds.PERIODIC_RUNNING.name])
async def test_every_event_settles_a_block_as_its_rule_says(
    redis: Redis, keys: Keys, kind: str, event: Event
) -> None:
    raw, key = _job_holding(keys, kind)
    job = orjson.loads(raw)
    (hold,) = holds.read(job, keys)
    assert (hold.kind, hold.key, hold.owner, hold.ttl) == (kind, key, job["jid"], 300.0)
    await redis.set(key, job["jid"], px=HELD_MS)
    await settle_block(redis, holds.encode(keys, [hold], event, wait=20.0))
    await _assert_settled(redis, key, job["jid"], holds.KINDS[kind].rule(event))


@pytest.mark.parametrize("event", list(Event))
@pytest.mark.parametrize("kind", [holds.UNIQUE.name, holds.PERIODIC_RUNNING.name])
async def test_every_event_settles_a_payload_as_its_rule_says(
    redis: Redis, keys: Keys, kind: str, event: Event
) -> None:
    raw, key = _job_holding(keys, kind)
    await redis.set(key, jid_of(raw), px=HELD_MS)
    await settle_payload(redis, keys, raw, event, started=True, wait_ms=20_000)
    await _assert_settled(redis, key, jid_of(raw), holds.KINDS[kind].rule(event))


async def test_an_until_executing_job_holds_its_lock_only_while_it_waits(
    redis: Redis, keys: Keys
) -> None:
    """It gave its lock back as it started: after a start (a burial) the lock,
    now a newer copy's or free, is not its to touch; waiting (an operator's
    delete) it still holds it."""
    raw, lock = _job_holding(keys, holds.UNIQUE.name, mode="until_executing")
    assert holds.read(orjson.loads(raw), keys) == ()
    assert holds.read(orjson.loads(raw), keys, started=False) != ()
    await redis.set(lock, jid_of(raw))
    await settle_payload(redis, keys, raw, Event.BURIAL, started=True)
    assert await redis.get(lock) == jid_of(raw).encode()
    await settle_payload(redis, keys, raw, Event.OPERATOR_DELETE, started=False)
    assert not await redis.exists(lock)


async def test_a_plain_or_foreign_payload_settles_nothing(redis: Redis, keys: Keys) -> None:
    foreign = make_job(unique={"key": keys.paused, "mode": "until_executed", "for": 60})
    await redis.set(keys.paused, jid_of(foreign))
    for raw in (make_job(), foreign, b"not json", b'{"unique": 1}'):
        await settle_payload(redis, keys, raw, Event.ACK, started=True)
    assert await redis.get(keys.paused) == jid_of(foreign).encode()
    assert holds.read(orjson.loads(foreign), keys) == ()


def test_a_kind_must_say_what_every_event_does() -> None:
    partial = {Event.ACK: Rule.RELEASE}
    with pytest.raises(ValueError, match="no rule for retry"):
        holds.declare(HoldKind("partial", lambda keys: keys.ns + ":p:", 1.0, partial))
    with pytest.raises(ValueError, match="unknown hold kind 'nobody'"):
        holds.encode(Keys("ns"), [Hold("nobody", "ns:x:1", "j")], Event.ACK)


# --- a new kind: one declaration, no script edited ---------------------------

# A limiter-slot-like kind, declared only here: its own prefix, its own rules
# (unlike both built-in kinds, a recovery requeue *releases* it: the slot is
# taken again when the job runs), named by the payload's `test_slot` field.
SLOT_RULES = dict.fromkeys(Event, Rule.RELEASE) | {
    Event.RETRY: Rule.KEEP,
    Event.SHUTDOWN_REQUEUE: Rule.LEAVE,
}


@pytest.fixture
def slot_kind() -> Iterator[HoldKind]:
    kind = holds.declare(
        HoldKind(
            "test_slot",
            prefix=lambda keys: f"{keys.ns}:test_slot:",
            default_ttl=120.0,
            rules=SLOT_RULES,
            payload=InPayload(key=("test_slot",), named=True),
        )
    )
    yield kind
    holds.withdraw(kind.name)


def _slot_job(keys: Keys, name: str) -> tuple[bytes, str, Hold]:
    raw = make_job("q", test_slot=name)
    (hold,) = holds.read(orjson.loads(raw), keys)
    assert hold.key == f"{keys.ns}:test_slot:{name}"
    return raw, hold.key, hold


async def test_a_new_kind_is_one_declaration_and_its_rules(
    redis: Redis, keys: Keys, slot_kind: HoldKind
) -> None:
    # Ack: released in the ack's step.
    acked, acked_slot, hold = _slot_job(keys, "a")
    await redis.lpush(keys.in_progress(ME), acked)
    await redis.set(acked_slot, jid_of(acked))
    assert (
        await commands.ack(redis, keys, identity=ME, acks=[Ack(acked, hold.owner, None, (hold,))])
        == []
    )
    assert not await redis.exists(acked_slot)

    # Retry filing: kept for the retry's wait plus the kind's default TTL.
    failed, failed_slot, hold = _slot_job(keys, "r")
    await redis.lpush(keys.in_progress(ME), failed)
    await redis.set(failed_slot, jid_of(failed), px=HELD_MS)
    filing = Filing(failed, hold.owner, keys.retry, time.time() + 30, failed, holds=(hold,))
    outcome = await commands.file(
        redis, keys, identity=ME, filing=filing, dead_max_jobs=100, dead_timeout=3600
    )
    assert outcome is commands.FileOutcome.FILED
    assert await redis.get(failed_slot) == jid_of(failed).encode()
    assert 140_000 < await redis.pttl(failed_slot) <= 150_000

    # Recovery requeue of a dead process's list: the script reads the payload by
    # the declaration and releases the slot; a shutdown requeue leaves it.
    orphaned, orphaned_slot, _ = _slot_job(keys, "o")
    await redis.lpush(keys.in_progress(DEAD), orphaned)
    await redis.set(orphaned_slot, jid_of(orphaned))
    result = await orphans.requeue(
        redis,
        keys,
        identity=DEAD,
        threshold=10.0,
        default_queue="default",
        max_orphanings=3,
        live_window=60.0,
        judge=await trust_judge(redis, keys),
        judge_ttl=JUDGE_TTL,
    )
    assert result.moved == 1
    assert not await redis.exists(orphaned_slot)

    mine, my_slot, _ = _slot_job(keys, "m")
    await redis.lpush(keys.in_progress(ME), mine)
    await redis.set(my_slot, jid_of(mine))
    own = await orphans.requeue(
        redis,
        keys,
        identity=ME,
        threshold=None,
        default_queue="default",
        max_orphanings=3,
        live_window=60.0,
    )
    assert own.moved == 1
    assert await redis.get(my_slot) == jid_of(mine).encode()


async def test_a_withdrawn_kind_is_not_minded(redis: Redis, keys: Keys) -> None:
    """The fixture's kind is gone after its test: the payload's field is data again."""
    raw = make_job("q", test_slot="x")
    assert holds.read(orjson.loads(raw), keys) == ()
    assert b"test_slot" not in holds.kinds_table(keys)
