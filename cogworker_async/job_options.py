"""A job's options, declared once: the ``TypedDict`` of each list of keyword options
(``@job``, ``.options()``, ``@periodic``'s job part), the ``JobOptions`` they make,
and the one place that checks them.

Every decorator and method that takes these options takes them as
``**options: Unpack[...]`` of a ``TypedDict`` here, so a new option is added in
one place and mypy still checks each call's names and types. At run time an
unknown name is a ``TypeError`` naming it and the options taken.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Literal, TypedDict

from cogworker_async.limits import Limit, check_limits
from cogworker_async.settings import Settings, check_queue_name
from cogworker_async.timing import check_duration
from cogworker_async.unique.lock import UniqueKey, UniqueMode, check_unique

RetryOption = bool | int
IfFailed = Literal["fail", "drop", "run"]
AFTER_POLICIES: tuple[str, ...] = ("fail", "drop", "run")  # workflows' if_failed words
BacktraceOption = bool | int
"""``backtrace``: keep the failure's traceback in the retry/dead entry (True, the
default), keep none (False or 0), or keep at most N frames of it."""


class RunOptionArgs(TypedDict, total=False):
    """The options of how a job runs, taken by ``@job``, ``.options()`` and
    ``@periodic``. None (or left out) means the default: the job's own, else
    the settings'.

    - ``queue``: the queue it goes to (``default``).
    - ``retry``: False (no retry), True (the settings' ``max_retries``) or a count.
    - ``timeout``: seconds a run may take before it is cancelled.
    - ``keep_result``: keep its JSON return value this many seconds (``Client.result``).
    - ``status``: track ``<ns>:status:<jid>`` (``Client.status``); False opts out
      of ``status_tracking``.
    - ``backtrace``: False keeps no traceback in its retry/dead entries, N at most
      N frames (the log still has it).
    """

    queue: str | None
    retry: RetryOption | None
    timeout: float | None
    keep_result: float | None
    status: bool | None
    backtrace: BacktraceOption | None


class JobOptionArgs(RunOptionArgs, total=False):
    """``@job``'s options: ``RunOptionArgs`` and a unique lock (not for ``@periodic``:
    the ticker enqueues its runs, never through a lock).

    - ``unique``: ``"until_executed"`` or ``"until_executing"``: at most one job per
      key at a time; the key is a digest of (name, args, kwargs, queue), or of
      ``unique_key(*args, **kwargs)``.
    - ``unique_for``: the lock's TTL in seconds (default ``DEFAULT_UNIQUE_FOR``, an hour).
    - ``unique_key``: a callable giving what the lock is keyed by.
    - ``limits``: a list of limits (``limits.concurrency(key, n)``); a job over
      one is held until it has room (``docs/guides/limits.md``).
    """

    unique: UniqueMode | None
    unique_for: float | None
    unique_key: UniqueKey | None
    limits: Sequence[Limit] | None


class EnqueueOptionArgs(JobOptionArgs, total=False):
    """``.options()``'s: ``JobOptionArgs`` and when this one enqueue runs.

    - ``delay``: seconds from now; ``at``: a datetime or an epoch timestamp (one of them).
    - ``after``: jids (or handles) of jobs this one runs after, once all of them
      succeeded (``docs/guides/batches.md``); a mapping names each edge's policy.
    - ``if_failed``: what a prerequisite's failure does to this job, for every
      edge of an ``after`` list: ``"fail"`` (the default: it ends failed with
      ``DependencyFailed``, never run), ``"drop"`` (it ends aborted,
      ``DependencyDropped``) or ``"run"`` (it runs anyway).
    """

    delay: float | None
    at: datetime | float | None
    after: Sequence[str] | Mapping[str, IfFailed] | None
    if_failed: IfFailed | None


def after_edges(
    after: Sequence[str] | Mapping[str, str] | None, if_failed: str | None
) -> dict[str, str] | None:
    """``after`` as the payload carries it, prerequisite jid -> its edge's policy
    (``if_failed``, ``"fail"`` by default, for a list; a mapping names each);
    ValueError or TypeError naming what is wrong."""
    if if_failed is not None and if_failed not in AFTER_POLICIES:
        raise ValueError(f"if_failed must be one of {', '.join(AFTER_POLICIES)}, got {if_failed!r}")
    if after is None:
        if if_failed is not None:
            raise ValueError("if_failed is the policy of after=[...]'s edges: give after too")
        return None
    if isinstance(after, str | bytes):
        raise TypeError(
            "after must be a list of jids (or a mapping jid -> if_failed), not a string"
        )
    if isinstance(after, Mapping):
        edges = {str(jid): policy for jid, policy in after.items()}
    else:
        edges = dict.fromkeys((str(jid) for jid in after), if_failed or "fail")
    for jid, policy in edges.items():
        if not jid or '"' in jid:
            raise ValueError(f"after: {jid!r} is not a jid")
        if policy not in AFTER_POLICIES:
            raise ValueError(
                f"after: the policy of {jid!r} must be one of {', '.join(AFTER_POLICIES)}, "
                f"got {policy!r}"
            )
    if not edges:
        raise ValueError("after must name at least one job")
    return edges


def check_timing(delay: float | None, at: datetime | float | None) -> None:
    """Refuse a ``delay`` or ``at`` that is no time: NaN, infinite, negative or past
    ``MAX_DURATION`` (the one duration rule, ``timing.check_duration``).

    An infinite one would park the job in the schedule forever, a NaN one is
    refused by Redis only when the job is written (a raw ``ResponseError``).
    ``at``'s distance from now is checked where now is known (``Client``).
    """
    if delay is not None and at is not None:
        raise ValueError("give delay or at, not both")
    if delay is not None:
        check_duration(delay, "delay", zero_ok=True)
    if at is not None and not isinstance(at, datetime):
        if isinstance(at, bool) or not isinstance(at, int | float):
            raise TypeError(f"at must be a datetime or an epoch timestamp, got {type(at).__name__}")
        if not math.isfinite(at):
            raise ValueError(f"at must be a finite epoch timestamp: got {at}")


def check_timeout(timeout: float | None) -> None:
    if timeout is not None:
        check_duration(timeout, "timeout")


def check_keep_result(keep_result: float | None) -> None:
    if keep_result is not None:
        check_duration(keep_result, "keep_result")


def check_backtrace(backtrace: BacktraceOption | None) -> None:
    if backtrace is None or isinstance(backtrace, bool):
        return
    if not isinstance(backtrace, int):
        raise TypeError(
            f"backtrace must be True, False or a number of frames, got {type(backtrace).__name__}"
        )
    if backtrace < 0:
        raise ValueError(f"backtrace must be a number of frames >= 0, got {backtrace}")


@dataclass(frozen=True, slots=True)
class JobOptions:
    """Per-job options; ``None`` means "the default" (settings or the job's own).
    The fields are ``EnqueueOptionArgs``' (see there); ``check`` refuses bad ones."""

    queue: str = "default"
    retry: RetryOption | None = None
    timeout: float | None = None
    delay: float | None = None
    at: datetime | float | None = None
    keep_result: float | None = None
    status: bool | None = None
    unique: UniqueMode | None = None
    unique_for: float | None = None
    unique_key: UniqueKey | None = None
    backtrace: BacktraceOption | None = None
    limits: Sequence[Limit] | None = None
    after: Sequence[str] | Mapping[str, IfFailed] | None = None
    if_failed: IfFailed | None = None

    def check(self) -> JobOptions:
        """These options, each checked (the one place that checks them all):
        a ValueError or TypeError naming the option at fault."""
        check_timing(self.delay, self.at)
        if after_edges(self.after, self.if_failed) is not None:
            if self.delay is not None or self.at is not None:
                raise ValueError(
                    "after=[...] runs a job when its prerequisites end: not with delay/at"
                )
            if self.unique is not None:
                raise ValueError("after=[...] with a unique job is not supported yet")
        check_backtrace(self.backtrace)
        check_unique(self.unique, self.unique_for, self.unique_key)
        check_limits(self.limits)
        check_timeout(self.timeout)
        check_keep_result(self.keep_result)
        check_queue_name(self.queue)
        return self

    def merged(self, given: Mapping[str, Any], where: str) -> JobOptions:
        """These options with those ``given`` (None: keep this one's), checked.
        ``delay``, ``at``, ``after`` and ``if_failed`` are never inherited: they
        are one enqueue's."""
        known_only(given, _ENQUEUE_NAMES, where)
        chosen = {name: value for name, value in given.items() if value is not None}
        once = {"delay": None, "at": None, "after": None, "if_failed": None}
        return JobOptions(**{**_fields_of(self), **once, **chosen}).check()


def _fields_of(options: JobOptions) -> dict[str, Any]:
    return {field.name: getattr(options, field.name) for field in fields(options)}


RUN_OPTIONS = frozenset(RunOptionArgs.__optional_keys__)
JOB_OPTIONS = frozenset(JobOptionArgs.__optional_keys__)
_ENQUEUE_NAMES = frozenset(EnqueueOptionArgs.__optional_keys__)


def known_only(given: Mapping[str, Any], known: frozenset[str], where: str) -> None:
    """Refuse an option name ``where`` does not take (a typo would otherwise be
    dropped silently: ``**options`` takes any name at run time)."""
    unknown = sorted(set(given) - known)
    if unknown:
        raise TypeError(
            f"{where} got unknown option(s) {', '.join(unknown)}; "
            f"it takes {', '.join(sorted(known))}"
        )


def payload_options(options: JobOptions, settings: Settings) -> dict[str, Any]:
    """The options a payload carries (None values are left out of it).

    ``keep_result`` and ``status`` only for a job that asks (or by setting): a
    plain job's payload is what it was. An explicit ``status=False`` is carried
    too: it opts that job out of ``status_tracking``.
    """
    extra: dict[str, Any] = {"retry": options.retry, "timeout": options.timeout}
    keep_result = options.keep_result or settings.keep_result
    if keep_result:
        extra["keep_result"] = keep_result
    status = (settings.status_tracking or None) if options.status is None else options.status
    if status is not None:
        extra["status"] = status
    if options.backtrace is not None:
        extra["backtrace"] = options.backtrace
    return extra


def carried_options(options: JobOptions) -> dict[str, Any]:
    """The run options (but the queue) set on ``options``, None left out: what a
    periodic entry of a ``.options(...)`` job carries in each run's payload."""
    chosen = {name: getattr(options, name) for name in sorted(RUN_OPTIONS - {"queue"})}
    return {name: value for name, value in chosen.items() if value is not None}
