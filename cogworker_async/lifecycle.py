"""A job's states and the moves between them, in one table.

The invariant this table describes: a job is in exactly one *place* in Redis
at any instant (or, inside one script, in two: written before removed), never
in none until it has ended. Every move between places is one Lua script (or
one atomic command), named here; `tests/lua/test_lifecycle_table.py` runs
each one from a job placed in its ``source`` and checks where it lands, and
checks that every script in ``lua_scripts/`` is either named by a transition
or listed in ``MOVES_NO_JOB`` with the reason.

Status strings (``Client.status(jid)["state"]``) are wire contract: each state
that has one maps to it here (``State.status``), and ``client/tracking.py``
reads ``STATUS_STRINGS`` from this module. The diagram of
``docs/concepts/lifecycle.md`` is ``mermaid()``'s output (checked by a test).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Place(enum.Enum):
    """Where a job is in Redis (the keys of SPEC.md §2)."""

    QUEUE = "queue"  # <ns>:queue:<name>, a list
    SCHEDULE = "schedule"  # <ns>:schedule, a sorted set scored by when it is due
    RETRY = "retry"  # <ns>:retry, scored by the next try's time
    DEAD = "dead"  # <ns>:dead, scored by when it died
    IN_PROGRESS = "in_progress"  # <ns>:in_progress:<identity>, exactly as fetched
    REPEAT_ORPHANS = "repeat_orphans"  # <ns>:repeat_orphans: parked for a ProcessDied burial
    UNSETTLED = "unsettled"  # <ns>:unsettled: a failure a stopping process couldn't file
    HELD = "held"  # <ns>:limits:~parked:<key>: over a limit, waits for a slot (a list)
    FAIR = "fair"  # <ns>:limits:~fair:<queue>:<key>: a fair key's line, waits its turn (a list)
    AFTER = "after"  # <ns>:after:~waiting: waits on other jobs (after=[...]), a hash jid -> job
    GONE = "gone"  # in no job key: it has ended (its status and result, if kept, remain)


class State(enum.Enum):
    """A job's state: its place, and the status string it reports (None: none of its own).

    The in-between states (``parked``, ``unsettled``, ``held``) are the ones recovery and
    settlement need; a tracked job there still reports the status it had.
    """

    SCHEDULED = ("scheduled", Place.SCHEDULE, "scheduled")
    QUEUED = ("queued", Place.QUEUE, "queued")
    RUNNING = ("running", Place.IN_PROGRESS, "working")
    RETRYING = ("retrying", Place.RETRY, "retrying")
    SUCCEEDED = ("succeeded", Place.GONE, "complete")
    # Failed and not kept: ``retry=False``, or ``retry_in`` said not again.
    FAILED = ("failed", Place.GONE, "failed")
    DEAD = ("dead", Place.DEAD, "dead")
    ABORTED = ("aborted", Place.GONE, "aborted")
    # Removed by an operator (delete, clear a queue) before it ended.
    DISCARDED = ("discarded", Place.GONE, None)
    # Orphaned more than max_orphanings times: waits to be buried as ProcessDied.
    PARKED = ("parked", Place.REPEAT_ORPHANS, None)
    # Failed while its process stopped and Redis refused the filing.
    UNSETTLED = ("unsettled", Place.UNSETTLED, None)
    # Taken over one of its limits: held on the key, in order, until a slot frees.
    HELD = ("held", Place.HELD, None)
    # A fair key's job (limits.fair), moved off its queue onto its key's line by
    # a fetch: waits for its key's turn (its status stays "queued").
    IN_LINE = ("in_line", Place.FAIR, None)
    # Enqueued with after=[...]: waits until its prerequisites have ended.
    WAITING = ("waiting", Place.AFTER, "waiting")

    def __init__(self, label: str, place: Place, status: str | None) -> None:
        self.label = label
        self.place = place
        self.status = status

    @property
    def ended(self) -> bool:
        """True when the job is in no job key any more."""
        return self.place is Place.GONE


# The status strings of SPEC.md §3, in the order the docs list them.
STATUS_STRINGS: tuple[str, ...] = (
    "queued",
    "scheduled",
    "working",
    "retrying",
    "waiting",
    "complete",
    "failed",
    "dead",
    "aborted",
)
# The status strings of a job that will not run again by itself (dead may be
# retried by an operator, but nothing else runs it).
FINISHED_STATUS_STRINGS: tuple[str, ...] = ("complete", "failed", "dead", "aborted")


def state_of_status(status: str) -> State:
    """The state a status string names; ValueError naming it when none does."""
    for state in State:
        if state.status == status:
            return state
    raise ValueError(f"unknown job status {status!r}: expected one of {', '.join(STATUS_STRINGS)}")


def state_at(place: Place) -> State:
    """The state of a job found in ``place`` (each place but ``GONE`` holds one state)."""
    held = [state for state in State if state.place is place]
    if place is Place.GONE or len(held) != 1:
        raise ValueError(f"no single state is at place {place.value!r}")
    return held[0]


@dataclass(frozen=True, slots=True)
class Transition:
    """One allowed move: ``source`` (None: a new job) to ``target`` by ``script``.

    ``step`` says who takes it and when, in a few words (also the diagram's label).
    """

    source: State | None
    target: State
    script: str  # a file of lua_scripts/ without ".lua"
    step: str


S = State
TRANSITIONS: tuple[Transition, ...] = (
    # Arriving.
    Transition(None, S.QUEUED, "enqueue", "enqueue"),
    Transition(None, S.SCHEDULED, "schedule", "enqueue with delay/at"),
    Transition(None, S.QUEUED, "enqueue_unique", "unique enqueue"),
    Transition(None, S.SCHEDULED, "enqueue_unique", "unique enqueue with delay/at"),
    Transition(None, S.QUEUED, "periodic_claim", "periodic slot claimed"),
    Transition(None, S.QUEUED, "batch_add", "batch member enqueue"),
    Transition(None, S.SCHEDULED, "batch_add", "batch member enqueue with delay/at"),
    # after=[...]: waiting until its prerequisites end, or judged at once.
    Transition(None, S.WAITING, "after_enqueue", "enqueue with after=[...]"),
    Transition(None, S.QUEUED, "after_enqueue", "after=[...], all ended already"),
    Transition(None, S.FAILED, "after_enqueue", "after=[...], one failed already"),
    # The prerequisite's settling step releases or ends it (ack, file, abort,
    # burial, an operator's delete or kill: the ack and the dead filing here).
    Transition(S.WAITING, S.QUEUED, "ack", "its last prerequisite succeeded"),
    Transition(S.WAITING, S.FAILED, "file", "a prerequisite died (if_failed=fail)"),
    Transition(S.WAITING, S.ABORTED, "after_abort", "abort while waiting"),
    # Waiting to running, and due entries onto their queues.
    Transition(S.SCHEDULED, S.QUEUED, "graduate", "due"),
    Transition(S.RETRYING, S.QUEUED, "graduate", "due"),
    # One queue read with BLMOVE is the same move as one atomic command.
    Transition(S.QUEUED, S.RUNNING, "fetch", "fetch"),
    # Limits: a job over one is held on its key (never retried), and let back
    # onto its queue by the step that frees a slot of the key (any ending; the
    # ack stands for them all here).
    Transition(S.QUEUED, S.HELD, "fetch", "over a limit"),
    Transition(S.RUNNING, S.HELD, "admit_taken", "taken by a wait, over a limit"),
    Transition(S.HELD, S.QUEUED, "ack", "a slot of its key freed"),
    Transition(S.HELD, S.QUEUED, "limits_due", "its window reopened, its pause ended"),
    Transition(S.RUNNING, S.HELD, "back_off", "raised limits.BackOff: no retry"),
    # Fair keys: a fetch moves a fair job onto its key's line, and takes it in
    # its key's turn (admitted by its limits, or held), or feeds it back onto
    # the empty queue for a process idle in a blocking wait.
    Transition(S.QUEUED, S.IN_LINE, "fetch", "a fair key's job, onto its line"),
    Transition(S.IN_LINE, S.RUNNING, "fetch", "its key's turn"),
    Transition(S.IN_LINE, S.HELD, "fetch", "its key's turn, over a limit"),
    Transition(S.IN_LINE, S.QUEUED, "fetch", "its turn, fed to a blocking wait"),
    Transition(S.IN_LINE, S.DISCARDED, "drop_jobs", "operator: clear the queue"),
    # Settling a run.
    Transition(S.RUNNING, S.SUCCEEDED, "ack", "success"),
    Transition(S.RUNNING, S.SUCCEEDED, "fetch", "success, acked with the next fetch"),
    Transition(S.RUNNING, S.RETRYING, "file", "failed, retries left"),
    Transition(S.RUNNING, S.DEAD, "file", "failed, out of retries"),
    Transition(S.RUNNING, S.FAILED, "file", "failed, retry=False"),
    Transition(S.RUNNING, S.ABORTED, "file", "failed while an abort was answered"),
    Transition(S.RUNNING, S.ABORTED, "settle_aborted", "aborted while running"),
    Transition(S.RUNNING, S.QUEUED, "give_back", "given back (stray, shutdown)"),
    Transition(S.RUNNING, S.UNSETTLED, "park_unsettled", "failure Redis refused, at shutdown"),
    Transition(S.UNSETTLED, S.RETRYING, "file_unsettled", "filed by any live process"),
    Transition(S.UNSETTLED, S.DEAD, "file_unsettled", "filed by any live process"),
    Transition(S.UNSETTLED, S.ABORTED, "file_unsettled", "filed while an abort was answered"),
    # Recovery (a dead process's list) and shutdown (one's own list).
    Transition(S.RUNNING, S.QUEUED, "requeue", "process died or stopped"),
    Transition(S.RUNNING, S.SUCCEEDED, "requeue", "finished, ack was pending"),
    Transition(S.RUNNING, S.PARKED, "requeue", "orphaned max_orphanings times"),
    Transition(S.RUNNING, S.DEAD, "requeue", "unparseable, buried raw"),
    Transition(S.PARKED, S.DEAD, "bury_orphan", "buried as ProcessDied"),
    Transition(S.DEAD, S.DEAD, "swap_dead_entry", "raw burial completed"),
    Transition(S.SCHEDULED, S.DEAD, "bury", "unparseable entry"),
    Transition(S.RETRYING, S.DEAD, "bury", "unparseable entry"),
    # Aborting a waiting job.
    Transition(S.QUEUED, S.ABORTED, "abort_entry", "abort while waiting"),
    Transition(S.SCHEDULED, S.ABORTED, "abort_entry", "abort while waiting"),
    Transition(S.RETRYING, S.ABORTED, "abort_entry", "abort while waiting"),
    Transition(S.UNSETTLED, S.ABORTED, "abort_unsettled", "abort before it is filed"),
    # Operators (CLI, web UI).
    Transition(S.RETRYING, S.QUEUED, "enqueue_entry", "operator: retry now"),
    Transition(S.SCHEDULED, S.QUEUED, "enqueue_entry", "operator: enqueue now"),
    Transition(S.DEAD, S.QUEUED, "enqueue_entry", "operator: retry"),
    Transition(S.RETRYING, S.DEAD, "kill_entry", "operator: kill"),
    Transition(S.SCHEDULED, S.DEAD, "kill_entry", "operator: kill"),
    Transition(S.SCHEDULED, S.DISCARDED, "drop_jobs", "operator: delete"),
    Transition(S.RETRYING, S.DISCARDED, "drop_jobs", "operator: delete"),
    Transition(S.DEAD, S.DISCARDED, "drop_jobs", "operator: delete"),
    # A filing into dead trims the set to dead_max_jobs younger than dead_timeout.
    Transition(S.DEAD, S.DISCARDED, "file", "trimmed: dead_timeout, dead_max_jobs"),
    Transition(S.QUEUED, S.DISCARDED, "drop_jobs", "operator: clear the queue"),
)
del S

# Every other script of lua_scripts/ and why it moves no job between places.
MOVES_NO_JOB: dict[str, str] = {
    "batch_open": "creates a batch (and its membership in a parent batch)",
    "batch_member_end": "counts batch members' ends a settling step could not (basic fetch)",
    "batch_abort": "notes on a batch that it was aborted (its members are aborted one by one)",
    "batch_close": "closes a batch; may push its callbacks, new jobs (as enqueue does)",
    "batch_results": "reads a chunk of a batch's members' kept results (reads only)",
    "abort_running": "leaves a tombstone and notifies the runner; the runner settles the job",
    "delete_orphan_locks": "deletes unique locks whose holder is in no place",
    "deregister": "removes a leaving process's presence and registry entries",
    "heartbeat": "says a process is alive",
    "settle_points": "gives a points limit back the difference of a run's real cost",
    "limits_set": "sets or clears a key's run-time limit; limits_due lets its held jobs in",
    "overdue": "lists identities recovery must judge (reads only)",
    "periodic_running": "re-takes or releases a periodic entry's running lock",
    "periodic_set_aside_last": "moves an unreadable last-slot stamp aside",
    "quarantine": "moves a key of the wrong type aside (a key, not a job)",
    "release_lock": "releases one owner-checked lock",
    "release_locks": "releases unique locks, owner-checked",
    "renew_unique": "renews running unique jobs' locks",
}


def transitions_from(state: State | None) -> tuple[Transition, ...]:
    """The moves allowed out of ``state`` (None: how a new job arrives)."""
    return tuple(t for t in TRANSITIONS if t.source is state)


def allowed(source: State | None, target: State) -> bool:
    """Whether the table has a move from ``source`` to ``target``."""
    return any(t.source is source and t.target is target for t in TRANSITIONS)


def scripts() -> frozenset[str]:
    """The scripts that move a job (each named by at least one transition)."""
    return frozenset(t.script for t in TRANSITIONS)


def mermaid() -> str:
    """The table as a mermaid ``stateDiagram-v2`` (the docs' diagram), one arrow per
    (source, target) pair with its scripts."""
    pairs: dict[tuple[str, str], list[str]] = {}
    for t in TRANSITIONS:
        source = "[*]" if t.source is None else t.source.label
        scripts_of = pairs.setdefault((source, t.target.label), [])
        if t.script not in scripts_of:
            scripts_of.append(t.script)
    lines = ["stateDiagram-v2"]
    lines.extend(
        f"    {source} --> {target}: {', '.join(names)}"
        for (source, target), names in pairs.items()
    )
    lines.extend(f"    {state.label} --> [*]" for state in State if state.ended)
    return "\n".join(lines)
