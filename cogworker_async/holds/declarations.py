"""The declared kinds: a unique lock, a periodic running lock, a limit slot, a
batch membership; each one ``HoldKind`` and its rule per event."""

from __future__ import annotations

from cogworker_async.holds.kinds import Event, HoldKind, InPayload, Rule, declare


def _rules(**overrides: Rule) -> dict[Event, Rule]:
    """Every event releases, but those named."""
    rules = dict.fromkeys(Event, Rule.RELEASE)
    rules.update({Event(name): rule for name, rule in overrides.items()})
    return rules


# An `until_executed` unique job's lock (an `until_executing` one released its
# lock as it started, so it holds none). A retry keeps it for the delay plus
# unique_for (no duplicate gets in before the retry ran), an operator's retry
# re-takes it while the job waits; a requeue leaves it: the job still holds it.
UNIQUE = declare(
    HoldKind(
        "unique",
        prefix=lambda keys: keys.unique(""),
        default_ttl=3600.0,
        rules=_rules(
            retry=Rule.KEEP,
            operator_retry=Rule.KEEP,
            recovery_requeue=Rule.LEAVE,
            shutdown_requeue=Rule.LEAVE,
        ),
        payload=InPayload(
            key=("unique", "key"),
            ttl=("unique", "for"),
            unless_started=(("unique", "mode"), "until_executing"),
        ),
    )
)

# An overlap=False periodic entry's running lock: kept with its queued TTL
# whenever the run waits again (retry, requeue, an operator's retry), so the
# ticker starts no second run meanwhile; released when the run is over.
PERIODIC_RUNNING = declare(
    HoldKind(
        "periodic_running",
        prefix=lambda keys: keys.periodic_running_prefix,
        default_ttl=3600.0,
        rules=_rules(
            retry=Rule.KEEP,
            operator_retry=Rule.KEEP,
            recovery_requeue=Rule.KEEP,
            shutdown_requeue=Rule.KEEP,
        ),
        payload=InPayload(
            key=("periodic_pjid",),
            named=True,
            ttl=("periodic_queued_ttl",),
            when=(("periodic_until_executed",), True),
        ),
    )
)

# A concurrency limit's slot (cogworker_async/limits): the running job's jid in
# the set <ns>:limits:<key>, taken with the job by the fetch. Every ending
# releases it, requeues too (a job waiting on its queue holds no slot); the
# release unparks the oldest job parked on the key (includes/holds.lua).
LIMIT_SLOT = declare(
    HoldKind(
        "limit_slot",
        prefix=lambda keys: keys.limits_prefix,
        default_ttl=3600.0,
        rules=_rules(),
        payload=InPayload(key=("limit_slots",), named=True, many=True),
        shape="member",
    )
)


# A batch membership (workflows: ``client.batch``): the payload's ``batch``
# field names the batch, its key ``<ns>:batch:<bid>``. Released only at the
# job's end, each end counted (success, failure, death) by
# ``includes/batch_end.lua`` in the step that settles it; anything that runs
# the job again (a retry, a requeue, an operator's retry) leaves it.
BATCH = declare(
    HoldKind(
        "batch",
        prefix=lambda keys: keys.batch_prefix,
        default_ttl=3600.0,  # unused: a membership is never kept with a TTL
        rules=_rules(
            retry=Rule.LEAVE,
            operator_retry=Rule.LEAVE,
            recovery_requeue=Rule.LEAVE,
            shutdown_requeue=Rule.LEAVE,
        ),
        payload=InPayload(key=("batch",), named=True),
        outcomes={
            Event.ACK: "succeeded",
            Event.DEAD: "dead",
            Event.DISCARD: "failed",
            Event.ABORT: "failed",
            Event.BURIAL: "dead",
            Event.OPERATOR_DELETE: "failed",
            Event.OPERATOR_KILL: "dead",
        },
    )
)
