"""The lifecycle table against the scripts that exist, the status strings and the docs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cogworker_async import lifecycle
from cogworker_async.client import tracking
from cogworker_async.lifecycle import MOVES_NO_JOB, TRANSITIONS, Place, State

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = {path.stem for path in (ROOT / "lua_scripts").glob("*.lua")}


def test_every_script_moves_a_job_or_says_why_not() -> None:
    unaccounted = SCRIPTS - lifecycle.scripts() - set(MOVES_NO_JOB)
    assert not unaccounted, f"scripts neither in a transition nor in MOVES_NO_JOB: {unaccounted}"


def test_every_named_script_exists() -> None:
    missing = (lifecycle.scripts() | set(MOVES_NO_JOB)) - SCRIPTS
    assert not missing, f"the lifecycle table names scripts that lua_scripts/ lacks: {missing}"


def test_no_script_both_moves_and_moves_no_job() -> None:
    assert not lifecycle.scripts() & set(MOVES_NO_JOB)


def test_includes_are_not_scripts_of_the_table() -> None:
    includes = {path.stem for path in (ROOT / "lua_scripts" / "includes").glob("*.lua")}
    assert not includes & (lifecycle.scripts() | set(MOVES_NO_JOB))


def test_status_strings_are_the_wire_contracts_and_the_tables() -> None:
    assert tracking.STATES == lifecycle.STATUS_STRINGS
    assert {s.status for s in State if s.status is not None} == set(lifecycle.STATUS_STRINGS)
    assert set(lifecycle.FINISHED_STATUS_STRINGS) <= set(lifecycle.STATUS_STRINGS)
    for status in lifecycle.STATUS_STRINGS:
        assert lifecycle.state_of_status(status).status == status


def test_an_unknown_status_is_named() -> None:
    with pytest.raises(ValueError, match="'running'"):
        lifecycle.state_of_status("running")


def test_every_state_is_reachable_and_every_unended_one_can_leave() -> None:
    reached = {t.target for t in TRANSITIONS}
    assert reached == set(State)
    for state in State:
        leaving = lifecycle.transitions_from(state)
        if state.ended:
            assert not leaving, f"{state.label} has ended, yet the table moves it"
        else:
            assert leaving, f"{state.label} has no way out: a job there would stay forever"


def test_ended_states_are_gone_and_every_place_is_some_states() -> None:
    assert {s for s in State if s.place is Place.GONE} == {s for s in State if s.ended}
    assert {s.place for s in State} == set(Place)


def test_allowed() -> None:
    assert lifecycle.allowed(State.QUEUED, State.RUNNING)
    assert lifecycle.allowed(None, State.SCHEDULED)
    assert not lifecycle.allowed(State.SUCCEEDED, State.QUEUED)
    assert not lifecycle.allowed(State.QUEUED, State.RETRYING)


def test_the_docs_diagram_is_the_tables() -> None:
    page = (ROOT / "docs" / "concepts" / "lifecycle.md").read_text()
    blocks = re.findall(r"```mermaid\n(.*?)```", page, flags=re.DOTALL)
    assert blocks == [lifecycle.mermaid() + "\n"], (
        "docs/concepts/lifecycle.md's diagram differs from lifecycle.mermaid(): paste its output"
    )


def test_the_docs_table_lists_every_state_with_its_status() -> None:
    page = (ROOT / "docs" / "concepts" / "lifecycle.md").read_text()
    for state in State:
        status = f"`{state.status}`" if state.status else "(as before)"
        assert re.search(rf"^\| {state.label} \| {re.escape(status)} \|", page, re.M), state


def test_each_place_but_gone_holds_one_state() -> None:
    for place in Place:
        if place is Place.GONE:
            with pytest.raises(ValueError, match="'gone'"):
                lifecycle.state_at(place)
        else:
            assert lifecycle.state_at(place).place is place


def test_the_lookups_places_are_the_tables() -> None:
    from cogworker_async.api.lookup import Found

    states = {where: Found(where).state for where in ("queue", "schedule", "retry", "dead")}
    assert states == {
        "queue": State.QUEUED,
        "schedule": State.SCHEDULED,
        "retry": State.RETRYING,
        "dead": State.DEAD,
    }
    assert Found("running").state is State.RUNNING
