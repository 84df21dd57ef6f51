"""The job JSON: new jids, encoding, validation, and the entry for a bad payload.

A job travels as the exact bytes that were pushed: the raw string fetched is
the one acknowledged (``LREM`` by value), so nothing here re-encodes a job
between fetch and acknowledgement.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson

JobDict = dict[str, Any]


def new_jid() -> str:
    """24 lowercase hex characters, as the wire contract requires."""
    return os.urandom(12).hex()


def jid_source() -> Iterator[str]:
    """Fresh jids drawn from the OS 1,024 at a time: one system call, not one per job.

    For use within one call (``enqueue_many``): a pool kept across calls would
    be copied into any child forked meanwhile, and both would hand out the
    same jids.
    """
    while True:
        drawn = os.urandom(12 * 1024).hex()
        for start in range(0, len(drawn), 24):
            yield drawn[start : start + 24]


def _describe(value: object) -> str:
    return f"{type(value).__module__}.{type(value).__qualname__}"


def ensure_json(args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """Raise ``TypeError`` naming the first argument that JSON cannot carry."""
    for index, value in enumerate(args):
        try:
            orjson.dumps(value)
        except TypeError as exc:
            raise TypeError(
                f"argument {index} ({_describe(value)}) is not JSON-serializable: {exc}"
            ) from None
    for name, value in kwargs.items():
        if not isinstance(name, str):
            raise TypeError(f"keyword argument name {name!r} must be a string")
        try:
            orjson.dumps(value)
        except TypeError as exc:
            raise TypeError(
                f"keyword argument {name!r} ({_describe(value)}) is not JSON-serializable: {exc}"
            ) from None


def build(
    name: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None,
    queue: str,
    *,
    now: float,
    jid: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> JobDict:
    """A job dict ready to encode; ``extra`` carries options (retry, timeout, ...)."""
    job: JobDict = {
        "jid": jid or new_jid(),
        "class": name,
        "args": list(args),
        "queue": queue,
        "created_at": now,
        "enqueued_at": now,
    }
    if kwargs:
        job["kwargs"] = dict(kwargs)
    if extra:
        for key, value in extra.items():
            if value is not None:
                job[key] = value
    return job


def encode(job: Mapping[str, Any]) -> bytes:
    """Encode a job (raises ``TypeError`` if something in it isn't JSON)."""
    return orjson.dumps(job)


def encode_job(job: Mapping[str, Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> bytes:
    """Encode a job built from ``args``/``kwargs``; a ``TypeError`` names the argument at fault.

    The arguments are checked one by one only when the whole fails: the
    common case encodes once.
    """
    try:
        return orjson.dumps(job)
    except TypeError:
        ensure_json(args, kwargs)
        raise


class PayloadError(ValueError):
    """Why a payload cannot be run (becomes the dead entry's error message)."""


def decode(raw: bytes | str) -> JobDict:
    """Decode and validate a fetched payload, raising ``PayloadError`` saying why not."""
    try:
        job = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise PayloadError(f"not JSON: {exc}") from None
    if not isinstance(job, dict):
        raise PayloadError(f"not a JSON object but {type(job).__name__}")
    queue = job.get("queue")
    if not isinstance(queue, str) or not queue:
        raise PayloadError("no 'queue' string in the job")
    if not isinstance(job.get("class"), str):
        raise PayloadError("no 'class' string in the job")
    if not isinstance(job.get("jid"), str):
        raise PayloadError("no 'jid' string in the job")
    args = job.get("args", [])
    if not isinstance(args, list):
        raise PayloadError("'args' is not an array")
    kwargs = job.get("kwargs")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise PayloadError("'kwargs' is not an object")
    return job


def unparseable_entry(raw: bytes | str, reason: str, *, now: float | None = None) -> bytes:
    """The dead entry for a payload that can't be run: the raw text kept, an error saying why."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    entry: JobDict = {
        "jid": new_jid(),
        "class": "UnparseableJob",
        "args": [],
        "queue": None,
        "raw": text,
        "error_class": "UnparseableJob",
        "error_message": reason,
        "failed_at": time.time() if now is None else now,
        "retry": False,
    }
    # Keep what can be recovered of the original, so a human can find it by jid.
    try:
        original = orjson.loads(raw)
    except orjson.JSONDecodeError:
        original = None
    if isinstance(original, dict):
        for key in ("jid", "class", "queue"):
            if isinstance(original.get(key), str):
                entry[key] = original[key]
    return orjson.dumps(entry)
