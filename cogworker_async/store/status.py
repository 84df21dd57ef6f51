"""A job's status hash, read (``Client.status``, the CLI's ``status``, the web UI's
job page): ``JobStatus`` and the ``Progress`` its handler reported.

The writers are ``store/status_writes.py`` (``StatusWriter``) and the worker's
``worker/tracking.py`` and ``worker/progress.py``; this module only reads,
so every layer above the store may.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from cogworker_async.errors import StatusCorrupt
from cogworker_async.keys import Keys
from cogworker_async.store.after import Waiting, waiting_job


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a job said it is (``current_job().progress``): the latest value reported."""

    fraction: float  # 0 to 1
    message: str | None = None
    updated_at: float | None = None  # when the handler reported it (epoch seconds)

    def as_dict(self) -> dict[str, Any]:
        return {"fraction": self.fraction, "message": self.message, "updated_at": self.updated_at}

    @property
    def percent(self) -> str:
        """``"40%"`` (``"40.5%"`` when not a whole percent)."""
        return f"{self.fraction * 100:.1f}".removesuffix(".0") + "%"

    def describe(self) -> str:
        """One line: ``40% resized 40 of 100 (at 1765000000.25)``."""
        said = f" {self.message}" if self.message else ""
        at = "" if self.updated_at is None else f" (at {self.updated_at})"
        return f"{self.percent}{said}{at}"


def progress_fields(fraction: float, message: str | None, at: float) -> dict[str, Any]:
    """The status hash's fields for one progress report (an empty message: none)."""
    return {"progress": fraction, "progress_message": message or "", "progress_at": at}


NO_PROGRESS = {"progress": "", "progress_message": "", "progress_at": ""}
"""A new try's first write clears its last try's progress (a HSET, like every
status write: an empty ``progress`` reads as none)."""

# The finished states a status write says with no result beside it: their write
# tells the jid's waiters (``status_writes``), and a look that reads one with no
# result kept knows none will come (``client/result_checks.py``).
FINISHED = frozenset({"complete", "failed", "dead"})


@dataclass(frozen=True, slots=True)
class JobStatus:
    """One job's status as last written (``Client.status``)."""

    jid: str
    state: str
    job_class: str | None = None
    queue: str | None = None
    enqueued_at: float | None = None
    run_at: float | None = None  # scheduled or retrying: when it is due
    started_at: float | None = None
    finished_at: float | None = None
    updated_at: float | None = None
    retry_count: int | None = None
    error_class: str | None = None
    error_message: str | None = None
    progress: Progress | None = None  # the last progress its handler reported, if any
    # Waiting (after=[...]): the prerequisites it still waits on (None: not waiting).
    waiting_on: tuple[str, ...] | None = None

    def as_dict(self) -> dict[str, Any]:
        """Every field by name (what `cogworker-async status --json` prints); ``progress``
        as a dict (``fraction``, ``message``, ``updated_at``) or None."""
        fields = {k: getattr(self, k) for k in self.__slots__}
        if self.progress is not None:
            fields["progress"] = self.progress.as_dict()
        return fields

    def __getitem__(self, name: str) -> Any:
        """``status["progress"]``: a field by name, as ``as_dict()`` gives it (KeyError if none)."""
        if name not in self.__slots__:
            raise KeyError(name)
        value = getattr(self, name)
        return value.as_dict() if isinstance(value, Progress) else value


def _float(key: str, fields: dict[bytes, bytes], name: str) -> float | None:
    value = fields.get(name.encode())
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        raise StatusCorrupt(
            f"{key}: field {name!r} is not a number: {value[:40]!r} (left as found)"
        ) from None


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", "replace")


async def read_status(redis: Redis, keys: Keys, jid: str) -> JobStatus | None:
    """The job's status, or None when none is kept (not tracked, unknown, or expired).

    Raises ``StatusCorrupt`` naming the key and field when the hash holds what
    no writer of ours wrote (or the key is not a hash); the key is left as found.
    """
    key = keys.status(jid)
    try:
        fields: dict[bytes, bytes] = await redis.hgetall(key)  # type: ignore[assignment]
    except ResponseError as exc:
        if str(exc).startswith("WRONGTYPE"):
            raise StatusCorrupt(f"{key} is not a status hash (left as found): {exc}") from None
        raise
    state = fields.get(b"state")
    if state is None or state == b"waiting":
        # A job waiting on others (after=[...]) is told even untracked: its
        # payload and its edges say what it waits on.
        waiting = await waiting_job(redis, keys, jid)
        if waiting is not None:
            return _waiting_status(waiting, key, fields)
    if state is None:
        return None
    count = _float(key, fields, "retry_count")
    if count is not None and not count.is_integer():
        raise StatusCorrupt(f"{key}: field 'retry_count' is not an integer: {count}")
    return JobStatus(
        jid=jid,
        state=state.decode("utf-8", "replace"),
        job_class=_text(fields.get(b"class")),
        queue=_text(fields.get(b"queue")),
        enqueued_at=_float(key, fields, "enqueued_at"),
        run_at=_float(key, fields, "run_at"),
        started_at=_float(key, fields, "started_at"),
        finished_at=_float(key, fields, "finished_at"),
        updated_at=_float(key, fields, "updated_at"),
        retry_count=None if count is None else int(count),
        error_class=_text(fields.get(b"error_class")),
        error_message=_text(fields.get(b"error_message")),
        progress=_progress(key, fields),
    )


def _waiting_status(waiting: Waiting, key: str, fields: dict[bytes, bytes]) -> JobStatus:
    job = waiting.job
    enqueued_at = job.get("enqueued_at")
    return JobStatus(
        jid=waiting.jid,
        state="waiting",
        job_class=str(job.get("class")),
        queue=str(job.get("queue")),
        enqueued_at=float(enqueued_at) if isinstance(enqueued_at, int | float) else None,
        updated_at=_float(key, fields, "updated_at"),
        waiting_on=waiting.waiting_on,
    )


def _progress(key: str, fields: dict[bytes, bytes]) -> Progress | None:
    if not fields.get(b"progress"):
        return None  # none reported (empty: a new try cleared its last try's)
    fraction = _float(key, fields, "progress")
    if fraction is None:
        return None
    if not 0.0 <= fraction <= 1.0:
        raise StatusCorrupt(f"{key}: field 'progress' is not from 0 to 1: {fraction}")
    return Progress(
        fraction,
        _text(fields.get(b"progress_message")) or None,
        _float(key, fields, "progress_at"),
    )


_PROGRESS_FIELDS = ("progress", "progress_message", "progress_at")
_PROGRESS_FIELDS_B = tuple(name.encode() for name in _PROGRESS_FIELDS)


async def read_progress(redis: Redis, keys: Keys, jids: list[str]) -> dict[str, Progress]:
    """The progress each of ``jids`` reported, in one round trip (the Busy page).

    A job with none is left out, and so is one whose status key is of the wrong
    type or holds what no writer of ours wrote (its own page says why).
    """
    if not jids:
        return {}
    async with redis.pipeline(transaction=False) as pipe:
        for jid in jids:
            pipe.hmget(keys.status(jid), _PROGRESS_FIELDS)
        replies = await pipe.execute(raise_on_error=False)
    found: dict[str, Progress] = {}
    for jid, reply in zip(jids, replies, strict=True):
        if isinstance(reply, Exception) or not reply or not reply[0]:
            continue
        try:
            progress = _progress(
                keys.status(jid), dict(zip(_PROGRESS_FIELDS_B, reply, strict=True))
            )
        except StatusCorrupt:
            continue
        if progress is not None:
            found[jid] = progress
    return found
