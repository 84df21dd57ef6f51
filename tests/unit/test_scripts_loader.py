"""Lua script assembly: includes expanded once, nested, missing and cyclic ones refused."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from cogworker_async.errors import ScriptError
from cogworker_async.store.scripts import expand, load_script, script, scripts_dir


def _includes(tmp_path: Path, **files: str) -> Path:
    directory = tmp_path / "includes"
    directory.mkdir(exist_ok=True)
    for name, body in files.items():
        (directory / f"{name}.lua").write_text(body, encoding="utf-8")
    return directory


def test_include_expanded(tmp_path: Path) -> None:
    inc = _includes(tmp_path, helper="local function helper() return 1 end\n")
    out = expand("--- @include helper\nreturn helper()\n", inc, origin="main")
    assert "local function helper() return 1 end" in out
    assert "--- @include" not in out
    assert out.rstrip().endswith("return helper()")


def test_include_twice_expanded_once(tmp_path: Path) -> None:
    inc = _includes(tmp_path, helper="local HELPER_MARK = 1\n")
    source = "--- @include helper\n--- @include helper\nreturn HELPER_MARK\n"
    out = expand(source, inc, origin="main")
    assert out.count("local HELPER_MARK = 1") == 1
    assert "--- @include" not in out


def test_nested_includes(tmp_path: Path) -> None:
    inc = _includes(
        tmp_path,
        outer="--- @include inner\nlocal OUTER = INNER + 1\n",
        inner="local INNER = 1\n",
    )
    out = expand("--- @include outer\nreturn OUTER\n", inc, origin="main")
    assert out.count("local INNER = 1") == 1
    assert out.count("local OUTER = INNER + 1") == 1
    # The inner definition comes before its use.
    assert out.index("local INNER = 1") < out.index("local OUTER")


def test_diamond_includes_shared_dependency_once(tmp_path: Path) -> None:
    inc = _includes(
        tmp_path,
        left="--- @include base\nlocal LEFT = 1\n",
        right="--- @include base\nlocal RIGHT = 1\n",
        base="local BASE = 1\n",
    )
    out = expand("--- @include left\n--- @include right\n", inc, origin="main")
    assert out.count("local BASE = 1") == 1
    assert "local LEFT = 1" in out
    assert "local RIGHT = 1" in out


def test_missing_include_names_it(tmp_path: Path) -> None:
    inc = _includes(tmp_path)
    with pytest.raises(ScriptError, match="'nowhere'") as info:
        expand("--- @include nowhere\n", inc, origin="main")
    assert "main" in str(info.value)


def test_missing_nested_include_names_it(tmp_path: Path) -> None:
    inc = _includes(tmp_path, outer="--- @include ghost\n")
    with pytest.raises(ScriptError, match="'ghost'"):
        expand("--- @include outer\n", inc, origin="main")


def test_cyclic_include_names_the_cycle(tmp_path: Path) -> None:
    inc = _includes(tmp_path, a="--- @include b\n", b="--- @include a\n")
    with pytest.raises(ScriptError, match="cyclic") as info:
        expand("--- @include a\n", inc, origin="main")
    assert "a -> b -> a" in str(info.value)


def test_self_include_is_a_cycle(tmp_path: Path) -> None:
    inc = _includes(tmp_path, a="--- @include a\n")
    with pytest.raises(ScriptError, match="a -> a"):
        expand("--- @include a\n", inc, origin="main")


def test_include_directive_must_be_a_whole_line(tmp_path: Path) -> None:
    inc = _includes(tmp_path)
    source = "local x = 1 --- @include nowhere\n-- --- @include nowhere\n"
    assert expand(source, inc, origin="main") == source


def test_load_script_from_directory(tmp_path: Path) -> None:
    _includes(tmp_path, helper="local H = 1\n")
    (tmp_path / "demo.lua").write_text("-- demo\n--- @include helper\nreturn H\n")
    loaded = load_script("demo", tmp_path)
    assert loaded.name == "demo"
    assert "local H = 1" in loaded.text
    assert loaded.sha == hashlib.sha1(loaded.text.encode()).hexdigest()


def test_load_missing_script(tmp_path: Path) -> None:
    _includes(tmp_path)
    with pytest.raises(ScriptError, match="'absent'"):
        load_script("absent", tmp_path)


REAL_SCRIPTS = sorted(p.stem for p in scripts_dir().glob("*.lua"))


def test_the_expected_scripts_exist() -> None:
    expected = {"ack", "bury", "enqueue", "fetch", "file", "graduate", "heartbeat", "requeue"}
    assert expected | {"give_back"} <= set(REAL_SCRIPTS)


@pytest.mark.parametrize("name", REAL_SCRIPTS)
def test_real_script_loads_with_contract_header(name: str) -> None:
    loaded = script(name)
    assert loaded is script(name)  # read once
    assert "--- @include" not in loaded.text
    header = []
    for line in loaded.text.splitlines():
        if not line.startswith("--"):
            break
        header.append(line)
    block = "\n".join(header)
    assert header, f"{name}.lua does not open with a comment block"
    assert "KEYS[" in block, f"{name}.lua's header does not describe KEYS"
    assert "Returns" in block, f"{name}.lua's header does not say what it returns"
