"""The key guard's table: every key ``keys.py`` builds, and the type it must have.

``TYPED`` names each ``Keys`` member whose keys the guard may move aside, with
their type; ``NOT_GUARDED`` names the rest and says why. A unit test checks
that the two together name every member of ``Keys``, so a key added there
without a type here fails the build instead of going unguarded.

Families that share a prefix but not a type (``unique:~releases`` is a list
beside the unique locks; ``periodic:entries`` is a hash beside the slot
claims) are told apart by ``expected_type_of``, exact names first, then the
longest prefix: it answers for any key of the namespace, which is how a key
reported by a caller (a status or result key that said ``WRONGTYPE``) is
guarded though no pass could list them all.
"""

from __future__ import annotations

from cogworker_async.keys import Keys
from cogworker_async.store.guard import ExpectedType

# The Keys member -> the type each of its keys must have.
TYPED: dict[str, ExpectedType] = {
    "queue": "list",
    "queues": "set",
    "paused": "set",
    "wakeup": "zset",
    "schedule": "zset",
    "schedule_wakeup": "zset",
    "retry": "zset",
    "dead": "zset",
    "in_progress": "list",
    "in_progress_identities": "set",
    "processes": "set",
    "last_beat": "hash",
    "beating_since": "hash",
    "beats": "zset",
    "live_queues": "zset",
    "signals": "list",
    "orphanings": "integer",
    "repeat_orphans": "list",
    "unsettled": "list",
    "recovery_lock": "string",
    "stats_processed": "integer",
    "stats_failed": "integer",
    "stats_processed_on": "integer",
    "stats_failed_on": "integer",
    "history": "hash",
    "stat": "integer",
    "unique": "string",  # a lock, value: the jid; but unique:~releases (below)
    "periodic": "string",  # a slot claim; but entries, last, results (below)
    "periodic_running": "string",
    "status": "hash",
    "batch": "hash",
    "batch_pending": "set",
    "batch_results": "list",
    "batches": "zset",
    "batch_stats": "hash",  # under stats: (integers), an exact name
    "after_waiting": "hash",
    "after_left": "hash",
    "after_edges": "set",
    "result": "list",
    "result_gone": "string",
    "aborted": "zset",
    "given_back": "string",
    "periodic_last": "hash",
    "periodic_entries": "hash",
    "periodic_results": "hash",
    "periodic_paused": "set",
    "limit_slots": "set",  # a concurrency limit's running jids; but limits:~... (below)
    "limit_parked": "list",
    "limit_config": "hash",
    "limits_used": "string",
    "fair_used": "string",
    "limit_window": "zset",
    "limit_pause": "string",
    "limits_paused": "string",
    "limit_bucket": "hash",
    "limit_leaky": "string",
    "limit_points": "hash",
    "limit_admitted": "hash",
    "limit_due": "zset",
    "limit_windows": "hash",
}

# The Keys members the guard never moves, and why.
NOT_GUARDED: dict[str, str] = {
    "process": "rewritten whole by SET on every beat: no wrong type survives one",
    "workers": "rewritten whole (DEL + HSET) on every beat",
    "aborts": "a pub/sub channel, not a key",
    "quarantine": "where the guard puts wrong keys",
    "queue_prefix": "a prefix (queue)",
    "wakeup_prefix": "a prefix (wakeup)",
    "in_progress_prefix": "a prefix (in_progress)",
    "orphanings_prefix": "a prefix (orphanings)",
    "history_prefix": "a prefix (history)",
    "periodic_running_prefix": "a prefix (periodic_running)",
    "batch_prefix": "a prefix (batch)",
    "after_prefix": "a prefix (after_edges, after_waiting, after_left)",
    "periodic_claim": "a slot claim, a string under periodic's prefix (guarded as `periodic`); "
    "periodic_claim.lua checks its type before any write",
    "periodic_claim_before_21": "the old-format slot claim, as periodic_claim",
    "result_ready": "a pub/sub channel, not a key",
    "tracking_prefix": "a prefix (status, result, result_gone)",
    "limits_prefix": "a prefix (limit_slots and the limits' ~ keys)",
    "fair_base": "a hash beside its lists under one prefix; includes/fair.lua calls it "
    "under pcall: a wrong type only stops that queue's fair turns",
    "fair_ring": "a list under fair_base's prefix, read under pcall as fair_base",
    "fair_jobs": "a list under fair_base's prefix, read under pcall as fair_base",
}

# Keys of a family whose type differs from the family's: periodic's three hashes
# (periodic.entries, ticker) and the unique releases a stopping worker hands over.
# (periodic's paused set is a property of Keys: an exact key, typed in TYPED.)
_PERIODIC_HASHES = ("entries", "last", "results")
_RELEASES = "~releases"
# The member whose keys (one argument) share a prefix, for the prefix lookup.
_PREFIXED = (
    "queue",
    "wakeup",
    "in_progress",
    "process",
    "signals",
    "workers",
    "orphanings",
    "stats_processed_on",
    "stats_failed_on",
    "history",
    "stat",
    "unique",
    "periodic",
    "periodic_running",
    "status",
    "batch",
    "batch_pending",
    "batch_results",
    "after_edges",
    "result",
    "result_gone",
    "given_back",
    "quarantine",
    "limit_slots",
    "limit_parked",
    "limit_window",
    "limit_pause",
    "limit_bucket",
    "limit_leaky",
    "limit_points",
    "limit_admitted",
)
_HOLE = "\x00"


def _type_of(member: str) -> ExpectedType | None:
    return TYPED.get(member)


def expected_type_of(keys: Keys, key: str) -> ExpectedType | None:
    """The type ``key`` must have, by the table; None for a key the guard leaves alone
    (not ours, or one of ``NOT_GUARDED``)."""
    exact: dict[str, ExpectedType | None] = {
        name: _type_of(name)
        for name in TYPED.keys() | NOT_GUARDED.keys()
        if name not in _PREFIXED and not name.endswith("_prefix")
    }
    exact_keys = {getattr(keys, name): kind for name, kind in exact.items()}
    exact_keys.update({keys.periodic(suffix): "hash" for suffix in _PERIODIC_HASHES})
    exact_keys[keys.unique(_RELEASES)] = "list"
    if key in exact_keys:
        return exact_keys[key]
    prefixes = sorted(
        ((getattr(keys, name)(_HOLE).split(_HOLE)[0], _type_of(name)) for name in _PREFIXED),
        key=lambda pair: len(pair[0]),
        reverse=True,
    )
    for prefix, kind in prefixes:
        if key.startswith(prefix) and len(key) > len(prefix):
            return kind
    return None
