"""The job JSON: new jids, encoding, validation, and the entry for a bad payload.

A job travels as the exact bytes that were pushed: the raw string fetched is
the one acknowledged (``LREM`` by value), so nothing here re-encodes a job
between fetch and acknowledgement.
"""

from __future__ import annotations

import base64
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


# The one rule for what a job's arguments may be: strict JSON, what every
# reader of the wire contract (Python, Ruby, Lua, JavaScript...) reads back as
# it was written. orjson alone is laxer: it writes NaN and infinity as null,
# datetime, date, UUID and enums as strings, tuples as lists, dataclasses as
# objects, and integers up to 2**64 - 1: each would come back to the handler
# changed. So the values are walked first (only str, int, float, bool, None,
# list and dict with str keys), and only then encoded.
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
_JSON_TYPES = "str, int, float, bool, None, list, dict with str keys"
_HINTS = {
    "tuple": "pass a list",
    "set": "pass a sorted list",
    "frozenset": "pass a sorted list",
    "bytes": "pass text (or base64 of the bytes)",
    "datetime": "pass value.isoformat() or a timestamp",
    "date": "pass value.isoformat()",
    "time": "pass value.isoformat()",
    "UUID": "pass str(value)",
    "Decimal": "pass str(value)",
}


class _NotJSON(Exception):
    """Where the walk found a value strict JSON cannot carry, and why."""

    def __init__(self, value: object, kind: type[Exception], path: list[int | str]) -> None:
        super().__init__()
        self.value = value
        self.kind = kind
        self.path = path


def _plain(value: Any) -> bool:
    """Whether ``value`` is strict JSON: the quick check, run on every job."""
    kind = type(value)
    # Exact types: a subclass (an IntEnum, a str enum, a NamedTuple) would
    # come back to the handler as its base type.
    if kind is str or value is None or kind is bool:
        return True
    if kind is int:
        return bool(INT64_MIN <= value <= INT64_MAX)
    if kind is float:
        return bool(value - value == 0.0)  # false for NaN and infinity
    if kind is list:
        return all(map(_plain, value))
    if kind is dict:
        return all(type(key) is str and _plain(item) for key, item in value.items())
    return False


def _locate(value: Any, path: list[int | str]) -> _NotJSON | None:
    """The first value ``_plain`` refuses, with its path: only once a check failed."""
    kind = type(value)
    if kind is list:
        for index, item in enumerate(value):
            if (found := _locate(item, [*path, index])) is not None:
                return found
        return None
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                return _NotJSON(key, TypeError, [*path, "<key>"])
            if (found := _locate(item, [*path, key])) is not None:
                return found
        return None
    if _plain(value):
        return None
    return _NotJSON(value, ValueError if kind is int or kind is float else TypeError, path)


def _refusal(where: str, bad: _NotJSON) -> Exception:
    steps = bad.path
    as_key = bool(steps) and steps[-1] == "<key>"
    path = "".join(f"[{step!r}]" for step in (steps[:-1] if as_key else steps))
    at = (f" at {path}" if path else "") + (" as a dict key" if as_key else "")
    value = bad.value
    if bad.kind is ValueError:
        if isinstance(value, float):
            problem = f"{value} is not a JSON number (JSON has no NaN or infinity)"
        else:
            digits = str(value)
            problem = (
                f"integer {digits[:24]}{'...' if len(digits) > 24 else ''} does not fit in "
                "64 bits (other JSON readers would not read it back exactly)"
            )
        return ValueError(f"{where}{at}: {problem}")
    hint = _HINTS.get(type(value).__name__, "convert it first")
    return TypeError(
        f"{where} ({_describe(value)}{at}) is not JSON-serializable (strict JSON: "
        f"{_JSON_TYPES}; nothing is converted): {hint}"
    )


def check_json(value: object, where: str) -> None:
    """Raise unless ``value`` is strict JSON (see the rule above); ``where`` names it.

    A type JSON has no place for is a ``TypeError``; NaN, infinity or an
    integer beyond 64 bits a ``ValueError``.
    """
    if not _plain(value) and (bad := _locate(value, [])) is not None:
        raise _refusal(where, bad)


def ensure_json(args: Sequence[Any], kwargs: Mapping[str, Any] | None) -> None:
    """Raise ``TypeError``/``ValueError`` naming the first argument strict JSON cannot carry."""
    for index, value in enumerate(args):
        check_json(value, f"argument {index}")
    if kwargs:
        for name, value in kwargs.items():
            if type(name) is not str:
                raise TypeError(f"keyword argument name {name!r} must be a string")
            check_json(value, f"keyword argument {name!r}")


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


def encode_job(job: Mapping[str, Any]) -> bytes:
    """Encode a job built by ``build`` (its arguments checked against the strict rule first).

    The one encoder of ``Client.enqueue`` and ``enqueue_many``, so both refuse
    the same values with the same message naming the argument at fault.
    """
    args = job["args"]
    kwargs = job.get("kwargs")
    # This runs for every job of enqueue_many: scalar arguments (the usual
    # ones) are checked inline, without a call each; the argument at fault is
    # looked for (ensure_json) only once something failed.
    for value in args:
        kind = type(value)
        if kind is str or value is None or kind is bool:
            continue
        if kind is int:
            if INT64_MIN <= value <= INT64_MAX:
                continue
        elif kind is float:
            if value - value == 0.0:
                continue
        elif _plain(value):
            continue
        ensure_json(args, kwargs)
    if kwargs and not _plain(kwargs):
        ensure_json(args, kwargs)
    if "limits" in job and next(iter(job)) != "limits":
        # A limited job's limits, then its jid, lead its payload: the fetch
        # reads them there without decoding the whole payload
        # (``lua_scripts/includes/limits.lua``, ``header_of``). A re-encode of
        # the decoded payload (a retry, a requeue) keeps the order.
        lead = {"limits": job["limits"]}
        if "jid" in job:
            lead["jid"] = job["jid"]
        job = {**lead, **job}
    return orjson.dumps(job)


class PayloadError(ValueError):
    """Why a payload cannot be run (becomes the dead entry's error message)."""


def utf8_problem(raw: bytes | str) -> str | None:
    """Where ``raw`` stops being UTF-8, or None when it is.

    orjson says "str is not valid UTF-8: surrogates not allowed" at char 0
    for any invalid byte: this names the byte and where it is instead.
    """
    if not isinstance(raw, bytes):
        return None
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not valid UTF-8: byte 0x{raw[exc.start]:02x} at offset {exc.start} ({exc.reason})"
    return None


def decode(raw: bytes | str) -> JobDict:
    """Decode and validate a fetched payload, raising ``PayloadError`` saying why not."""
    try:
        job = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        # Only on this (rare) path is the payload looked at twice.
        problem = utf8_problem(raw)
        raise PayloadError(problem or f"not JSON: {exc}") from None
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


def raw_fields(raw: bytes | str) -> JobDict:
    """How a dead entry keeps a payload it could not decode: ``raw`` as text, and
    when the bytes are not UTF-8 (so ``raw`` shows U+FFFD in their place),
    ``raw_b64``, the exact bytes in base64, to recover or requeue them as they were."""
    if not isinstance(raw, bytes):
        return {"raw": raw}
    try:
        return {"raw": raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {
            "raw": raw.decode("utf-8", "replace"),
            "raw_b64": base64.b64encode(raw).decode("ascii"),
        }


def unparseable_entry(raw: bytes | str, reason: str, *, now: float | None = None) -> bytes:
    """The dead entry for a payload that can't be run: the raw payload kept
    (see ``raw_fields``), an error saying why."""
    entry: JobDict = {
        "jid": new_jid(),
        "class": "UnparseableJob",
        "args": [],
        "queue": None,
        **raw_fields(raw),
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
