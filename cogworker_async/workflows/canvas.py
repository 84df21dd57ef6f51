"""What a flow is made of: steps, groups, chains and chords (pure data, no Redis).

``chain(a, b, c)``: each runs after the one before it succeeded, with its
result as first argument. ``group(a, b)`` (or ``group(x for x in ...)``):
side by side. ``chord(group(...), callback)``: the callback gets the group's
results, in order. A chain may hold groups (``chain(a, group(b, c), d)``: b
and c each get a's result, d gets [b's, c's]) and chords; a group holds
steps only (a chain inside a group is not supported yet). ``step(spec,
if_failed=...)`` sets the failure policy of the edge into that step.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from cogworker_async.jobs import BoundJob, JobArgs, JobFunction

IfFailed = Literal["fail", "drop", "run"]
POLICIES: tuple[str, ...] = ("fail", "drop", "run")


def _check_policy(if_failed: object) -> IfFailed:
    if if_failed not in POLICIES:
        raise ValueError(f"if_failed must be one of {', '.join(POLICIES)}, not {if_failed!r}")
    return if_failed  # type: ignore[return-value]


def _is_job_spec(item: object) -> bool:
    return isinstance(item, JobArgs | JobFunction | BoundJob | str)


@dataclass(frozen=True, slots=True)
class Step:
    """One job of a flow: ``job.args(...)``, a job, its ``.options(...)`` or a name."""

    spec: Any
    if_failed: IfFailed = "fail"


@dataclass(frozen=True, slots=True)
class Group:
    """Steps run side by side; the next stage gets their results as a list, in order."""

    steps: tuple[Step, ...]
    if_failed: IfFailed = "fail"


@dataclass(frozen=True, slots=True)
class Chain:
    """Stages run one after another."""

    stages: tuple[Step | Group, ...]


def step(spec: Any, *, if_failed: IfFailed = "fail") -> Step:
    """A step with the failure policy of the edge into it (``fail``, ``drop``, ``run``)."""
    if isinstance(spec, Step | Group | Chain):
        raise TypeError("step() takes one job (job.args(...), a job or a name), not a flow")
    if not _is_job_spec(spec):
        raise TypeError(f"a flow's step is job.args(...), a job or a name, not {spec!r}")
    return Step(spec, _check_policy(if_failed))


def _as_step(item: Any) -> Step:
    return item if isinstance(item, Step) else step(item)


def group(*items: Any, if_failed: IfFailed = "fail") -> Group:
    """Steps side by side: ``group(a.args(1), b.args(2))`` or ``group(f.args(u) for u in urls)``."""
    if len(items) == 1 and isinstance(items[0], Iterable) and not _is_job_spec(items[0]):
        items = tuple(items[0])
    if not items:
        raise ValueError("a group needs at least one step")
    for item in items:
        if isinstance(item, Group | Chain):
            raise TypeError("a group holds steps only (a chain or group inside one: not yet)")
    return Group(tuple(_as_step(item) for item in items), _check_policy(if_failed))


def chain(*items: Any) -> Chain:
    """Stages one after another; each gets the previous one's result as first argument."""
    if not items:
        raise ValueError("a chain needs at least one step")
    stages: list[Step | Group] = []
    for item in items:
        if isinstance(item, Chain):
            stages.extend(item.stages)
        elif isinstance(item, Group):
            stages.append(item)
        else:
            stages.append(_as_step(item))
    return Chain(tuple(stages))


def chord(header: Group | Iterable[Any], callback: Any, *, if_failed: IfFailed = "fail") -> Chain:
    """The group ``header``, then ``callback`` with the list of its results, in order."""
    head = header if isinstance(header, Group) else group(*header)
    body = callback if isinstance(callback, Step) else step(callback, if_failed=if_failed)
    return Chain((head, body))


def stages_of(flow: Chain | Group | Step | Any) -> tuple[Step | Group, ...]:
    """A flow's stages, whatever it was built as (a lone job: one stage)."""
    if isinstance(flow, Chain):
        return flow.stages
    if isinstance(flow, Group | Step):
        return (flow,)
    return (step(flow),)
