"""Every key of the wire contract (SPEC §2) is built by a `Keys` method or property."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from cogworker_async.keys import Keys

SAMPLE = "SAMPLEARG"
HOLE = "<*>"

# Used only when SPEC.md is not beside the checkout (the key column of §2).
INLINE_KEY_COLUMN = """
`<ns>:queue:<name>`
`<ns>:queues`
`<ns>:paused`
`<ns>:schedule`
`<ns>:retry`
`<ns>:dead`
`<ns>:in_progress:<identity>`
`<ns>:in_progress_identities`
`<ns>:process:<identity>`
`<ns>:processes`
`<ns>:last_beat`
`<ns>:live_queues`
`<ns>:workers:<identity>`
`<ns>:orphanings:<jid>`
`<ns>:repeat_orphans`
`<ns>:unsettled`
`<ns>:stats:processed`, `<ns>:stats:failed`
`<ns>:unique:<digest>`
`<ns>:periodic:...`
`<ns>:status:<jid>`
`<ns>:quarantine:<key>`
"""


def _spec_path() -> Path | None:
    here = Path(__file__).resolve()
    for candidate in (
        here.parents[2].parent / "shared" / "SPEC.md",
        here.parents[2] / ".." / "shared" / "SPEC.md",
    ):
        if candidate.is_file():
            return candidate
    return None


def _key_column_from_spec(text: str) -> list[str]:
    """The first cell of every row of the §2 table."""
    section = text.split("## 2.", 1)[1].split("\n## ", 1)[0]
    cells = []
    for line in section.splitlines():
        if line.startswith("|") and "`<ns>" in line:
            cells.append(line.split("|")[1])
    return cells


def spec_key_patterns() -> list[str]:
    path = _spec_path()
    cells = (
        _key_column_from_spec(path.read_text(encoding="utf-8"))
        if path is not None
        else INLINE_KEY_COLUMN.strip().splitlines()
    )
    patterns = [p for cell in cells for p in re.findall(r"`([^`]+)`", cell)]
    assert patterns, "no key patterns found in the SPEC §2 table"
    return patterns


def _shape_of_spec(pattern: str, ns: str) -> str:
    shape = pattern.replace("<ns>", ns)
    shape = re.sub(r"<[a-z_]+>", HOLE, shape)
    return shape.replace("...", HOLE)


def keys_shapes(ns: str) -> set[str]:
    """Every key `Keys(ns)` can build, with each argument shown as a hole."""
    k = Keys(ns)
    built: set[str] = set()
    for name, member in inspect.getmembers(type(k)):
        if name.startswith("_"):
            continue
        if isinstance(member, property):
            value = getattr(k, name)
        elif inspect.isfunction(member):
            arity = len(inspect.signature(member).parameters) - 1  # without self
            value = getattr(k, name)(*[SAMPLE] * arity)
        else:
            continue
        assert isinstance(value, str)
        built.add(value.replace(SAMPLE, HOLE))
    return built


def test_spec_table_found_and_complete() -> None:
    patterns = spec_key_patterns()
    # The table names at least the keys this test was written against.
    assert {"<ns>:queue:<name>", "<ns>:in_progress:<identity>", "<ns>:stats:failed"} <= set(
        patterns
    )
    assert len(patterns) >= 21


@pytest.mark.parametrize("ns", ["cogworker", "{cogworker}"])
def test_every_spec_key_is_built_by_keys(ns: str) -> None:
    built = keys_shapes(ns)
    missing = [p for p in spec_key_patterns() if _shape_of_spec(p, ns) not in built]
    assert not missing, f"keys in SPEC §2 that Keys({ns!r}) cannot build: {missing}"


@pytest.mark.parametrize("ns", ["cogworker", "{cogworker}"])
def test_every_key_starts_with_namespace(ns: str) -> None:
    for shape in keys_shapes(ns):
        assert shape.startswith(f"{ns}:"), shape


def test_hash_tag_namespace_keeps_one_slot() -> None:
    k = Keys("{cogworker}")
    # Redis Cluster hashes only what is inside the first {...}: the same for every key.
    tags = {re.match(r"^[^{]*\{([^}]*)\}", key)[1] for key in keys_shapes("{cogworker}")}  # type: ignore[index]
    assert tags == {"cogworker"}
    assert k.queue("mail") == "{cogworker}:queue:mail"


def test_prefixes_match_their_keys() -> None:
    k = Keys("ns")
    assert k.queue("x") == k.queue_prefix + "x"
    assert k.wakeup("x") == k.wakeup_prefix + "x"
    assert k.in_progress("x") == k.in_progress_prefix + "x"
    assert k.orphanings("x") == k.orphanings_prefix + "x"


def test_exact_names() -> None:
    k = Keys("cogworker")
    assert k.queue("default") == "cogworker:queue:default"
    assert k.in_progress("host:1:abc") == "cogworker:in_progress:host:1:abc"
    assert k.stats_processed == "cogworker:stats:processed"
    assert k.stats_failed == "cogworker:stats:failed"
    assert k.stats_processed_on("2024-01-02") == "cogworker:stats:processed:2024-01-02"
    assert k.stats_failed_on("2024-01-02") == "cogworker:stats:failed:2024-01-02"
    assert k.periodic("lock:x") == "cogworker:periodic:lock:x"


def test_inline_copy_matches_spec_when_present() -> None:
    path = _spec_path()
    if path is None:
        pytest.skip("SPEC.md not beside the checkout; the inline copy is in use")
    from_spec = [
        p
        for cell in _key_column_from_spec(path.read_text(encoding="utf-8"))
        for p in re.findall(r"`([^`]+)`", cell)
    ]
    inline = re.findall(r"`([^`]+)`", INLINE_KEY_COLUMN)
    assert inline == from_spec, "refresh INLINE_KEY_COLUMN from SPEC §2"
