"""limits.concurrency declarations: checked when declared, keys resolved at enqueue
into the payload's fields, bad input refused with a one-line error."""

from __future__ import annotations

from typing import Any

import pytest

from cogworker_async import holds, job, limits
from cogworker_async.holds import Hold, HoldKind, InPayload, Rule
from cogworker_async.keys import Keys
from cogworker_async.limits.declarations import payload_fields

KEYS = Keys("ns")


def test_a_key_function_is_resolved_on_the_jobs_arguments() -> None:
    fields = payload_fields(
        [limits.concurrency("stripe", 5), limits.concurrency(lambda a, b=0: f"acct:{a}", 1)],
        (7,),
        {"b": 1},
    )
    assert fields == {
        "limits": [["concurrency", "stripe", 5], ["concurrency", "acct:7", 1]],
        "limit_slots": ["stripe", "acct:7"],
    }
    assert payload_fields([], (), {}) == {}
    assert payload_fields([limits.window(lambda a: a, 100, 60)], ("x",), {}) == {
        "limits": [["window", "x", 100, 60]]
    }
    costed = limits.points("api", 100, 60, cost=lambda rows: rows / 10)
    assert payload_fields([costed], (50,), {}) == {"limits": [["points", "api", 100, 60, 5.0]]}
    with pytest.raises(ValueError, match="at most 100"):
        payload_fields([costed], (5000,), {})
    both = [limits.bucket("b", 10, 2.5), limits.leaky("l", 5, 1)]
    assert payload_fields(both, (), {}) == {
        "limits": [["bucket", "b", 10, 2.5], ["leaky", "l", 5, 1]]
    }


@pytest.mark.parametrize(
    ("make", "error", "words"),
    [
        (lambda: limits.concurrency("k", 0), ValueError, "must be >= 1"),
        (lambda: limits.concurrency("k", True), TypeError, "must be an int"),
        (lambda: limits.concurrency("k", 2.5), TypeError, "must be an int"),
        (lambda: limits.concurrency("", 1), ValueError, "1-200 printable"),
        (lambda: limits.concurrency("~parked:x", 1), ValueError, "not starting with '~'"),
        (lambda: limits.concurrency("a\nb", 1), ValueError, "printable"),
        (lambda: limits.concurrency(7, 1), TypeError, "must be a str"),
        (lambda: limits.window("k", 0, 1), ValueError, "must be >= 1"),
        (lambda: limits.window("k", 1, 0), ValueError, "per must be a finite"),
        (lambda: limits.window("k", 1, float("nan")), ValueError, "per must be a finite"),
        (lambda: limits.window("k", 1, "1"), TypeError, "per must be a number"),
        (lambda: limits.window("k", 1, 0.0001), ValueError, "at least 0.001 s"),
        (lambda: limits.bucket("k", 0, 1), ValueError, "capacity must be >= 1"),
        (lambda: limits.bucket("k", 5, 0), ValueError, "per_second must be a finite"),
        (lambda: limits.bucket("k", 5, 0.0001), ValueError, "at least 0.001"),
        (lambda: limits.leaky("k", 0, 1), ValueError, "rate must be >= 1"),
        (lambda: limits.leaky("k", 5, -1), ValueError, "per_seconds must be a finite"),
        (lambda: limits.leaky("k", 10_000, 1), ValueError, "at least 0.001 s"),
        (lambda: limits.points("k", 0, 60), ValueError, "points must be >= 1"),
        (lambda: limits.points("k", 10, 0), ValueError, "per_seconds must be a finite"),
        (lambda: limits.points("k", 10, 60, cost=11), ValueError, "at most 10"),
        (lambda: limits.points("k", 10, 60, cost=0), ValueError, "above 0"),
        (lambda: limits.points("k", 10, 60, cost="1"), TypeError, "a cost must be a number"),
    ],
)
def test_a_bad_declaration_is_refused_when_made(make: Any, error: type, words: str) -> None:
    with pytest.raises(error, match=words):
        make()


def test_limits_must_be_a_list_of_limits() -> None:
    with pytest.raises(TypeError, match="limits must be a list"):
        job(limits="stripe")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="limits must hold limits"):
        job(limits=[("stripe", 5)])  # type: ignore[list-item]


def test_a_key_function_that_fails_or_gives_no_key_is_refused_at_enqueue() -> None:
    def boom(_: int) -> str:
        raise KeyError("nope")

    with pytest.raises(ValueError, match="failed on these arguments: KeyError"):
        payload_fields([limits.concurrency(boom, 1)], (1,), {})
    with pytest.raises(TypeError, match="must be a str, got int"):
        payload_fields([limits.concurrency(lambda x: x, 1)], (1,), {})
    with pytest.raises(ValueError, match="not starting with '~'"):
        payload_fields([limits.concurrency(lambda x: x, 1)], ("~config",), {})


def test_the_slot_hold_is_read_once_per_key_from_the_payload() -> None:
    job_fields = {"jid": "j1", "limit_slots": ["a", "b", "", "~x", 3]}
    assert holds.read(job_fields, KEYS) == (
        Hold("limit_slot", "ns:limits:a", "j1"),
        Hold("limit_slot", "ns:limits:b", "j1"),
    )
    assert holds.read({"jid": "j1", "limit_slots": "a"}, KEYS) == ()


def test_a_member_kind_is_released_never_kept_and_only_under_its_prefix() -> None:
    rules = dict.fromkeys(holds.Event, Rule.RELEASE)
    with pytest.raises(ValueError, match="ends with ':limits:'"):
        holds.declare(
            HoldKind(
                "t_member",
                prefix=lambda k: f"{k.ns}:other:",
                default_ttl=1.0,
                rules=rules,
                payload=InPayload(key=("x",)),
                shape="member",
            )
        )
    with pytest.raises(ValueError, match="ends with ':limits:'"):
        holds.declare(
            HoldKind("t_string", prefix=lambda k: f"{k.ns}:x:limits:", default_ttl=1.0, rules=rules)
        )
    kept = {**rules, holds.Event.RETRY: Rule.KEEP}
    with pytest.raises(ValueError, match="released, never kept"):
        holds.declare(
            HoldKind(
                "t_kept",
                prefix=lambda k: f"{k.ns}:y:limits:",
                default_ttl=1.0,
                rules=kept,
                shape="member",
            )
        )
    assert "t_member" not in holds.KINDS
    assert "t_kept" not in holds.KINDS


def test_a_back_off_names_a_key_and_a_time() -> None:
    exc = limits.BackOff("acct:7", 30)
    assert (exc.key, exc.seconds) == ("acct:7", 30.0)
    with pytest.raises(ValueError, match="not starting with '~'"):
        limits.BackOff("~due", 30)
    with pytest.raises(ValueError, match="BackOff's seconds must be a finite"):
        limits.BackOff("k", 0)
