"""The job JSON: jids, JSON checks, decoding, and the dead entry of a bad payload."""

from __future__ import annotations

import re

import orjson
import pytest

from cogworker_async.payload import (
    PayloadError,
    build,
    decode,
    encode,
    encode_job,
    ensure_json,
    jid_source,
    new_jid,
    unparseable_entry,
)


def test_new_jid_is_24_lowercase_hex() -> None:
    jids = {new_jid() for _ in range(1000)}
    assert len(jids) == 1000
    for jid in jids:
        assert re.fullmatch(r"[0-9a-f]{24}", jid), jid


def test_ensure_json_accepts_json_values() -> None:
    ensure_json([1, "x", None, [1, 2], {"a": 1.5}, True], {"k": {"n": [1]}})


@pytest.mark.parametrize("bad", [set(), object()])
def test_ensure_json_names_positional_index(bad: object) -> None:
    with pytest.raises(TypeError, match=r"argument 2 \(builtins\.(set|object)\)"):
        ensure_json([1, "ok", bad], {})


@pytest.mark.parametrize("bad", [{1, 2}, object()])
def test_ensure_json_names_keyword(bad: object) -> None:
    with pytest.raises(TypeError, match=r"keyword argument 'when'"):
        ensure_json([1], {"fine": 1, "when": bad})


def test_ensure_json_rejects_non_string_kwarg_name() -> None:
    with pytest.raises(TypeError, match="must be a string"):
        ensure_json([], {1: "x"})  # type: ignore[dict-item]


def test_ensure_json_nested_bad_value() -> None:
    with pytest.raises(TypeError, match="argument 0"):
        ensure_json([{"a": [object()]}], {})


def test_build_and_encode_roundtrip() -> None:
    job = build(
        "emails.send",
        ["a@b.c"],
        {"subject": "hi"},
        "mail",
        now=100.5,
        extra={"retry": 3, "timeout": None},
    )
    assert re.fullmatch(r"[0-9a-f]{24}", job["jid"])
    assert job["class"] == "emails.send"
    assert job["args"] == ["a@b.c"]
    assert job["kwargs"] == {"subject": "hi"}
    assert job["created_at"] == job["enqueued_at"] == 100.5
    assert job["retry"] == 3
    assert "timeout" not in job
    assert decode(encode(job)) == job


def test_build_without_kwargs_has_no_kwargs_field() -> None:
    job = build("x", [], None, "q", now=1.0, jid="a" * 24)
    assert job["jid"] == "a" * 24
    assert "kwargs" not in job


def _raw(**fields: object) -> bytes:
    base: dict[str, object] = {"jid": "a" * 24, "class": "C", "args": [], "queue": "q"}
    base.update(fields)
    return orjson.dumps({k: v for k, v in base.items() if v is not ...})


def test_decode_keeps_unknown_fields() -> None:
    job = decode(_raw(custom={"x": 1}))
    assert job["custom"] == {"x": 1}
    assert decode(_raw(args=...))["queue"] == "q"  # args may be absent


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not valid UTF-8: byte 0xff at offset 0"),
        (b"[1, 2]", "not a JSON object but list"),
        (b'"text"', "not a JSON object but str"),
        (b"42", "not a JSON object but int"),
        (_raw(queue=...), "no 'queue'"),
        (_raw(queue=""), "no 'queue'"),
        (_raw(queue=5), "no 'queue'"),
        (_raw(**{"class": ...}), "no 'class'"),
        (_raw(jid=...), "no 'jid'"),
        (_raw(jid=12), "no 'jid'"),
        (_raw(args={"a": 1}), "'args' is not an array"),
        (_raw(args="x"), "'args' is not an array"),
        (_raw(kwargs=[1]), "'kwargs' is not an object"),
    ],
)
def test_decode_rejects_with_reason(raw: bytes, reason: str) -> None:
    with pytest.raises(PayloadError, match=re.escape(reason)):
        decode(raw)


def test_payload_error_is_value_error() -> None:
    assert issubclass(PayloadError, ValueError)


def test_unparseable_entry_keeps_raw_text() -> None:
    entry = orjson.loads(unparseable_entry(b"{garbage", "not JSON: bad", now=12.5))
    assert entry["raw"] == "{garbage"
    assert entry["error_class"] == "UnparseableJob"
    assert entry["class"] == "UnparseableJob"
    assert entry["error_message"] == "not JSON: bad"
    assert entry["failed_at"] == 12.5
    assert entry["retry"] is False
    assert entry["queue"] is None
    assert re.fullmatch(r"[0-9a-f]{24}", entry["jid"])


def test_unparseable_entry_recovers_jid_class_queue() -> None:
    raw = orjson.dumps({"jid": "b" * 24, "class": "emails.send", "queue": "mail", "args": 5})
    entry = orjson.loads(unparseable_entry(raw, "'args' is not an array"))
    assert entry["jid"] == "b" * 24
    assert entry["class"] == "emails.send"
    assert entry["queue"] == "mail"
    assert entry["raw"] == raw.decode()
    assert isinstance(entry["failed_at"], float)


def test_unparseable_entry_ignores_non_string_fields() -> None:
    raw = orjson.dumps({"jid": 7, "class": ["x"], "queue": None})
    entry = orjson.loads(unparseable_entry(raw, "why"))
    assert entry["jid"] != 7
    assert re.fullmatch(r"[0-9a-f]{24}", entry["jid"])
    assert entry["class"] == "UnparseableJob"
    assert entry["queue"] is None


def test_unparseable_entry_accepts_str_and_invalid_utf8() -> None:
    assert orjson.loads(unparseable_entry("plain text", "r"))["raw"] == "plain text"
    entry = orjson.loads(unparseable_entry(b"ab\xffcd", "r"))
    assert entry["raw"].startswith("ab")
    assert entry["raw"].endswith("cd")


def test_jid_source_gives_distinct_wire_jids_past_one_draw() -> None:
    source = jid_source()
    jids = [next(source) for _ in range(2_500)]
    assert len(set(jids)) == len(jids)
    assert all(len(j) == 24 and int(j, 16) >= 0 and j == j.lower() for j in jids)


def test_a_limited_job_is_encoded_led_by_its_limits_then_its_jid() -> None:
    """The fetch reads a limited job's limits and jid from the payload's head
    (``includes/limits.lua``, ``header_of``); every field is still there."""
    job = build("t.job", [1], {"limits": "an argument"}, "default", now=1.0)
    job["limits"] = [["concurrency", "k", 2]]
    job["limit_slots"] = ["k"]
    raw = encode_job(job)
    assert raw.startswith(b'{"limits":[["concurrency","k",2]],"jid":"' + job["jid"].encode())
    assert orjson.loads(raw) == job
    plain = build("t.job", [1], None, "default", now=1.0)
    assert encode_job(plain) == orjson.dumps(plain)  # a plain job as before
