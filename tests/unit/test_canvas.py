"""workflows/canvas.py: what chain, group, chord and step build (pure, no Redis)."""

from __future__ import annotations

import pytest

from cogworker_async import chain, chord, group, job, step
from cogworker_async.workflows.canvas import Chain, Group, Step, stages_of


@job(name="cv.one")
async def one(x: int = 0) -> int:
    return x


@job(name="cv.many")
async def many(values: list[int]) -> int:
    return sum(values)


def test_a_chain_flattens_chains_and_keeps_groups_as_stages() -> None:
    inner = chain(one.args(1), one.args())
    flow = chain(inner, group(one.args(), one.args()), many.args())
    assert [type(s) for s in flow.stages] == [Step, Step, Group, Step]
    assert flow.stages[0] == Step(one.args(1))
    assert all(s.if_failed == "fail" for s in flow.stages)  # the default, stated


def test_a_group_takes_items_or_one_iterable() -> None:
    assert group(one.args(1), one.args(2)) == group(one.args(i) for i in (1, 2))
    assert group([one, "cv.one"]).steps == (Step(one), Step("cv.one"))


def test_a_chord_is_its_group_then_its_callback_with_the_edge_policy() -> None:
    flow = chord([one.args(1), one.args(2)], many.args(), if_failed="run")
    assert flow == Chain((group(one.args(1), one.args(2)), Step(many.args(), "run")))


def test_a_lone_job_or_group_is_one_stage() -> None:
    assert stages_of(one.args(3)) == (Step(one.args(3)),)
    lone = group(one.args())
    assert stages_of(lone) == (lone,)


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: step(one.args(), if_failed="later"), ValueError, "if_failed must be one of"),
        (group, ValueError, "at least one step"),
        (chain, ValueError, "at least one step"),
        (lambda: group(group(one.args())), TypeError, "a group holds steps only"),
        (lambda: step(chain(one.args())), TypeError, "not a flow"),
        (lambda: chain(one.args(), 42), TypeError, "a flow's step is"),
    ],
)
def test_mistakes_are_refused_where_they_are_made(
    build: object, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        build()  # type: ignore[operator]
